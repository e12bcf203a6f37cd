"""The browser's sign-in, when ``serve`` has a token (:mod:`surprise_memory.access`).

A person opens the page's address and is sent to ``/login``, a static form
(``static/login.html``) that posts the token once. The right token gets a session cookie
(:func:`~surprise_memory.access.session_value`: HttpOnly, so no script reads it;
SameSite=Strict, so no other site's page sends it; Secure when served over HTTPS, e.g.
behind a TLS proxy; gone when the browser ends its session) and a redirect to the page; a
wrong one, a redirect back to the form, which says so. From then on the page's requests
(its JSON, its frames, its live stream) carry the cookie by themselves. Scripts send the
token as ``Authorization: Bearer <token>`` instead.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, RedirectResponse, Response
from starlette.routing import Route

from surprise_memory.access import same_secret, session_value

__all__ = ["OPEN_PATHS", "SESSION_COOKIE", "SIGN_IN_PATH", "sign_in_routes"]

SIGN_IN_PATH = "/login"
"""The sign-in form (GET) and where it posts the token (POST)."""

SESSION_COOKIE = "surprise_memory_session"
"""The cookie that says a browser signed in."""

OPEN_PATHS = frozenset({SIGN_IN_PATH, "/static/login.js", "/static/style.css"})
"""What is served without the token: the form and its two files (nothing of the store)."""

_MAX_FORM_BYTES = 4096


def sign_in_routes(token: str, static_dir: Path) -> list[Route]:
    """The routes of ``/login``: the form, and the check of what it posts.

    Args:
        token: The server's token.
        static_dir: The folder of the page's files (``login.html`` among them).

    Returns:
        The two routes (GET and POST ``/login``).

    """

    def form(request: Request) -> Response:
        return FileResponse(static_dir / "login.html", headers={"Cache-Control": "no-cache"})

    async def check(request: Request) -> Response:
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > _MAX_FORM_BYTES:
                raise HTTPException(413, f"a sign-in form is under {_MAX_FORM_BYTES} bytes")
        fields = parse_qs(body.decode("utf-8", errors="replace"))
        given = (fields.get("token") or [""])[0].strip()
        if not same_secret(given, token):
            return RedirectResponse(f"{SIGN_IN_PATH}?failed", status_code=303)
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session_value(token),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    return [
        Route(SIGN_IN_PATH, form, methods=["GET"]),
        Route(SIGN_IN_PATH, check, methods=["POST"]),
    ]
