"""``surprise-memory serve``: the memory browser, one web page over a store, read-only.

The store (a folder or a ``postgresql://`` URI) is opened read-only and the page served
by uvicorn on ``--host``/``--port`` (127.0.0.1:8765 by default: this machine only).
Access follows :mod:`surprise_memory.access`, as ``mcp`` does: another address needs a
token (:data:`TOKEN_ENV` or ``--token-file``, never the command line), or the command
refuses to start; with a token, on any address, a person signs in once on the page and
scripts send ``Authorization: Bearer <token>``. The first line printed is the page's
address (with the real port when ``--port 0`` asked for any free one), so a script or a
test can read it. Ctrl-C (or SIGTERM) stops the server, ending the pages' live streams
first, and the command exits 130 (or 143) as every other does after Ctrl-C (SIGTERM),
also when it was started with SIGINT ignored (:mod:`~surprise_memory.cli.stopping`).
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path
from typing import Any

from surprise_memory.access import add_token_options, check_exposure, is_loopback, read_token
from surprise_memory.cli.options import (
    add_config_options,
    add_place_status_options,
    given,
    note,
    place_status_config,
)
from surprise_memory.cli.stopping import raise_for_signal
from surprise_memory.config.browser import BrowserConfig
from surprise_memory.errors import ConfigError, InputError

__all__ = ["TOKEN_ENV", "add_serve_command"]

TOKEN_ENV = "SURPRISE_MEMORY_BROWSER_TOKEN"
"""The environment variable that holds the browser's token."""


def add_serve_command(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """Add ``serve`` to the subcommands ``sub`` of the main parser.

    Args:
        sub: The main parser's subparsers (``add_subparsers()``).
        fmt: The help formatter of every subcommand.

    """
    p = sub.add_parser(
        "serve",
        help="browse a store in a web page: timeline, search, map, episodes, live (read-only)",
        formatter_class=fmt,
        description="Serve the memory browser over STORE (opened read-only): a timeline "
        "of the recording with its episodes (and the surprise curve where `process` wrote "
        "scores.csv), search by text, image, time and place, a map of the episodes' poses "
        "per robot, each episode's frames and why it was kept, and the episodes a running "
        "memory node adds, as they come. The page loads nothing from the internet. By "
        "default only this machine can open it; another --host (0.0.0.0, the robot's "
        f"address) needs a token (${TOKEN_ENV} or --token-file), which a person types "
        "once on the page's sign-in form and a script sends as 'Authorization: Bearer'.",
    )
    p.add_argument("store", metavar="STORE", help="store folder or postgresql:// URI")
    add_token_options(p, TOKEN_ENV, "the page")
    add_config_options(p, [BrowserConfig])
    add_place_status_options(p)
    p.set_defaults(func=_cmd_serve)


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (port 0: any free one), ready for the server.

    Raises:
        InputError: The address cannot be resolved or bound (in use, not this machine's).

    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise InputError(f"--host {host!r}: cannot listen there ({exc})") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)  # connections wait in the backlog until the server takes them
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    return sock


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from surprise_memory.browser.app import create_app
    except ImportError as exc:
        raise ConfigError(
            f"the memory browser needs Starlette and uvicorn ({exc}); "
            "pip install -r requirements/browser.txt"
        ) from None
    from surprise_memory.memory.store import describe_location, is_postgres_url, open_store

    config = BrowserConfig.from_mapping(given(args, [BrowserConfig]))
    token = read_token(TOKEN_ENV, args.token_file)
    check_exposure(config.host, token, host_option="--host", env_var=TOKEN_ENV)
    if not is_postgres_url(args.store) and not Path(args.store).is_dir():
        raise InputError(f"store {args.store!r} does not exist")
    with open_store(args.store, read_only=True) as store:
        app = create_app(store, args.store, config, token, places=place_status_config(args))
        sock = _listen(config.host, config.port)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        signed = "sign in with the token; " if token is not None else ""
        serving = (
            f"serving {describe_location(args.store)} read-only at http://{shown}:{port}/ "
            f"({signed}Ctrl-C stops)"
        )
        if not is_loopback(host):
            note(
                f"listening on {host}: other machines reach the page, each after signing in "
                "with the token (plain HTTP: use it on a network you trust, or behind a TLS "
                "proxy)"
            )
        browser = app.state.browser
        stopped_by: list[int] = []

        class Server(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets=sockets)
                # said once uvicorn's signal handlers are in place: a caller that signals
                # as soon as it reads this line is heard (before them, a SIGINT the caller
                # ignored was lost, and a default one broke the event loop's set-up)
                if self.started:
                    print(serving, flush=True)

            def handle_exit(self, sig: int, frame: Any) -> None:
                stopped_by.append(sig)
                browser.close_streams()  # else open pages' streams hold the shutdown
                super().handle_exit(sig, frame)

        server = Server(
            uvicorn.Config(
                app,
                log_config=None,  # keep the command's one-line log format
                log_level="warning",
                access_log=False,
                timeout_graceful_shutdown=2,
            )
        )
        # uvicorn handles SIGINT and SIGTERM itself, then raises the signal again on the way
        # out, which ends in our handlers (KeyboardInterrupt, Terminated) or, where the
        # caller ignored SIGINT, in nothing: then the status comes from what it caught
        server.run(sockets=[sock])
        raise_for_signal(stopped_by[0] if stopped_by else None)
    return 0
