"""One access rule for every door that serves the store over the network.

The memory browser (``surprise-memory serve``) and the MCP server's HTTP transport
(``surprise-memory mcp --transport http``) follow the same rule, written once here:

* They listen on the loopback by default: this machine only.
* Any other address needs a token, or the command refuses to start, saying what to set
  (:func:`check_exposure`). The token comes from an environment variable (each door its
  own: ``SURPRISE_MEMORY_BROWSER_TOKEN``, ``SURPRISE_MEMORY_MCP_TOKEN``) or from a file
  (``--token-file``; :func:`read_token`), never from the command line, which ``ps`` shows
  to every user of the machine.
* A token given is required on the loopback too: once one is set, every request must
  carry it, whatever the address.
* A request carries it as ``Authorization: Bearer <token>``, or, at the browser, as the
  session cookie a person's sign-in set (:func:`session_value`: derived from the token,
  so the cookie never holds the token itself); both are compared in constant time. An
  HTTP request without it is answered 401 (:func:`token_gate`), except the few paths a
  door leaves open (the browser's sign-in page, its script and its style).

ROS-free and free of any web framework: the gate is a plain ASGI wrapper.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from pathlib import Path
from typing import Any

from surprise_memory.errors import ConfigError, InputError

__all__ = [
    "ASGIApp",
    "add_token_options",
    "check_exposure",
    "is_loopback",
    "read_token",
    "same_secret",
    "session_value",
    "token_gate",
]

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

_SESSION_LABEL = b"surprise-memory browser session"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine only.

    A host name other than ``localhost`` counts as reachable from elsewhere: what it
    resolves to may change.
    """
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def read_token(env_var: str, token_file: str | None) -> str | None:
    """The door's token: from ``token_file`` when given, else from ``$env_var``.

    Args:
        env_var: The environment variable that may hold the token.
        token_file: A file holding the token (surrounding whitespace ignored), or None.

    Returns:
        The token, or None when neither gives one (an empty variable gives none).

    Raises:
        InputError: The file cannot be read or holds no token.

    """
    if token_file is not None:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InputError(f"--token-file {token_file!r}: {exc.strerror or exc}") from None
        if not token:
            raise InputError(f"--token-file {token_file!r} holds no token")
        return token
    return os.environ.get(env_var, "").strip() or None


def check_exposure(host: str, token: str | None, *, host_option: str, env_var: str) -> None:
    """Refuse to listen on another address than the loopback without a token.

    Args:
        host: The address the door would listen on.
        token: Its token, or None.
        host_option: The option that set the address (named in the message).
        env_var: The environment variable of this door's token (named in the message).

    Raises:
        ConfigError: ``host`` is not the loopback and there is no token.

    """
    if token is None and not is_loopback(host):
        raise ConfigError(
            f"{host_option} {host}: other machines could reach the memory; give a bearer "
            f"token in the environment ({env_var}) or in a file (--token-file PATH), "
            "or listen on 127.0.0.1"
        )


class _RefuseToken(argparse.Action):
    """``--token``: refused with the reason (a token on the command line is public)."""

    def __init__(self, option_strings: list[str], dest: str, env_var: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self._env_var = env_var

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(
            "the token is never taken from the command line (ps shows it to every user); "
            f"set {self._env_var} or use --token-file PATH"
        )


def add_token_options(parser: argparse.ArgumentParser, env_var: str, what: str) -> None:
    """Add ``--token-file`` (and a ``--token`` that is refused with the reason) to a command.

    Args:
        parser: The command's parser.
        env_var: The environment variable that holds the token by default.
        what: What the token guards, for the help (e.g. ``"the page"``).

    """
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help=f"file holding the bearer token of {what} (default: ${env_var} when set); "
        "required off the loopback, required by every request once set",
    )
    # also stops argparse reading `--token X` as an abbreviation of --token-file
    parser.add_argument("--token", action=_RefuseToken, env_var=env_var)


def same_secret(given: str | bytes, expected: str | bytes) -> bool:
    """Whether two secrets are equal, in a time that depends on neither's content or length.

    Digests of both are compared, so even the length of the expected one does not leak.
    """
    a = given.encode() if isinstance(given, str) else given
    b = expected.encode() if isinstance(expected, str) else expected
    return hmac.compare_digest(hashlib.sha256(a).digest(), hashlib.sha256(b).digest())


def session_value(token: str) -> str:
    """The browser's session cookie for ``token``: a keyed digest, not the token itself.

    A stolen cookie opens this browser only (not the MCP server, nor another door given
    the same token as a bearer header would), and every cookie of an old token stops
    working when the token changes.
    """
    return hmac.new(token.encode(), _SESSION_LABEL, hashlib.sha256).hexdigest()


def _cookies(headers: list[tuple[bytes, bytes]], name: str) -> list[bytes]:
    """Every value of cookie ``name`` among a request's ``Cookie`` headers."""
    found = []
    for key, value in headers:
        if key != b"cookie":
            continue
        for pair in value.split(b";"):
            k, _, v = pair.strip().partition(b"=")
            if k == name.encode():
                found.append(v.strip(b'"'))
    return found


def token_gate(
    app: ASGIApp,
    token: str,
    *,
    session_cookie: str | None = None,
    open_paths: Collection[str] = (),
    sign_in_page: str | None = None,
) -> ASGIApp:
    """``app`` behind a token: an HTTP request without it is answered 401.

    Args:
        app: The ASGI application.
        token: The token a request must carry (``Authorization: Bearer <token>``).
        session_cookie: The name of a cookie that holds :func:`session_value` of the token,
            accepted instead of the header (the browser's sign-in); None: the header only.
        open_paths: Paths served without the token (a sign-in page and its files).
        sign_in_page: Where a ``GET /`` without the token is sent (303), for a person who
            opens the address; None: answered 401 like every other path.

    Returns:
        The guarded application (lifespan events pass through).

    """
    bearer = f"Bearer {token}".encode()
    session = session_value(token).encode() if session_cookie is not None else None
    refusal = json.dumps(
        {"error": "a valid bearer token (or the sign-in's session cookie) is required"}
    ).encode()

    def allowed(headers: list[tuple[bytes, bytes]]) -> bool:
        ok = False  # every candidate is compared: the time does not say which one was close
        for key, value in headers:
            if key == b"authorization":
                ok |= same_secret(value, bearer)
        if session_cookie is not None and session is not None:
            for value in _cookies(headers, session_cookie):
                ok |= same_secret(value, session)
        return ok

    async def gate(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or scope["path"] in open_paths or allowed(scope["headers"]):
            await app(scope, receive, send)
            return
        if sign_in_page is not None and scope["path"] == "/" and scope["method"] == "GET":
            status, headers, body = 303, [(b"location", sign_in_page.encode())], b""
        else:
            status, body = 401, refusal
            headers = [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="surprise-memory"'),
            ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return gate
