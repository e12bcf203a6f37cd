"""One access rule for every door: the memory browser with a token, over HTTP and in Chromium.

A real ``surprise-memory serve`` process given a token (``SURPRISE_MEMORY_BROWSER_TOKEN``)
on the loopback, where a token once set is required too: every route of the store (its
JSON, its frames, the live stream, the image search, the page and its script) answers 401
without the token, the bearer header or the sign-in's session cookie opens each, and the
sign-in form with its two files stays reachable. Off the loopback the command refuses to
start without a token and takes none from the command line (``mcp`` the same: one rule).
In Debian's Chromium: before signing in no frame loads; signed in on the page, search
and the episode's frames work as without a token. (Without a token on the loopback the
page is as before: ``test_browser_http.py`` and ``test_browser_page.py``.)
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from browser_helpers import (
    EventStream,
    Server,
    chrome,
    images_loaded,
    processed_store,
    serve,
    wait_for,
)
from selenium.webdriver.common.by import By

from surprise_memory.browser.sign_in import SESSION_COOKIE
from surprise_memory.cli.mcp import TOKEN_ENV as MCP_TOKEN_ENV
from surprise_memory.cli.serve import TOKEN_ENV
from surprise_memory.memory.store import EpisodeStore

TOKEN = f"browser-{secrets.token_urlsafe(24)}"

# every kind of route that reads the store, and the page itself (its script too)
ROUTES = [
    "api/store",
    "api/timeline",
    "api/curve",
    "api/episodes/{id}",
    "api/episodes/{id}/frames/0",
    "api/episodes/{id}/thumbnail",
    "api/search?start=0",
    "api/live",
    "static/app.js",
    "static/index.html",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return processed_store(tmp_path_factory.mktemp("browser_access"), seconds=10.0)


@pytest.fixture(scope="module")
def first_id(store: Path) -> str:
    with EpisodeStore(store, read_only=True) as s:
        return s.episode_ids()[0]


def _env(**tokens: str) -> dict[str, str]:
    """This process's environment without any door's token, plus ``tokens``."""
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, MCP_TOKEN_ENV)}
    return {**env, **tokens}


@pytest.fixture(scope="module")
def server(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    cwd = tmp_path_factory.mktemp("cwd")
    with serve(str(store), cwd, "--live-poll-seconds", "0.2", env=_env(**{TOKEN_ENV: TOKEN})) as s:
        yield s


def request(
    server: Server,
    path: str,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """One raw request (redirects not followed): status, headers (lower-case), body."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        conn.request(method, "/" + path.lstrip("/"), body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def sign_in(server: Server, token: str) -> tuple[int, dict[str, str]]:
    """Post the sign-in form as a browser does: the status and headers of the answer."""
    status, headers, _ = request(
        server,
        "login",
        "POST",
        {"Content-Type": "application/x-www-form-urlencoded"},
        urlencode({"token": token}).encode(),
    )
    return status, headers


@pytest.fixture(scope="module")
def cookie(server: Server) -> str:
    """The session cookie (``name=value``) of a sign-in with the right token."""
    status, headers = sign_in(server, TOKEN)
    assert status == 303 and headers["location"] == "/"
    return headers["set-cookie"].split(";")[0]


@pytest.mark.parametrize(
    "credentials",
    [
        {},
        {"Authorization": "Bearer wrong-token"},
        {"Authorization": TOKEN},  # the token without its scheme
        {"Authorization": f"Basic {TOKEN}"},
        {"Cookie": f"{SESSION_COOKIE}=0123abcd"},
        {"Cookie": f"{SESSION_COOKIE}={TOKEN}"},  # the cookie is not the token itself
    ],
    ids=["none", "wrong", "no scheme", "basic", "wrong cookie", "token as cookie"],
)
def test_every_route_answers_401_without_the_token(
    server: Server, first_id: str, store: Path, credentials: dict[str, str]
) -> None:
    for path in ROUTES:
        status, headers, body = request(server, path.format(id=first_id), headers=credentials)
        assert status == 401, (path, status, body[:200])
        assert "bearer token" in json.loads(body)["error"]
        assert headers["www-authenticate"].startswith("Bearer")
    with EpisodeStore(store, read_only=True) as s:
        jpeg = s.frame_jpeg(first_id, 0)
    status, _, body = request(server, "api/search", "POST", credentials, jpeg)
    assert status == 401 and b"hits" not in body
    # a person who opens the address is sent to the sign-in form
    status, headers, _ = request(server, "", headers=credentials)
    assert status == 303 and headers["location"] == "/login"


def test_the_bearer_header_or_the_session_cookie_opens_every_route(
    server: Server, first_id: str, store: Path, cookie: str
) -> None:
    with EpisodeStore(store, read_only=True) as s:
        jpeg = s.frame_jpeg(first_id, 0)
        count = len(s)
    for credentials in ({"Authorization": f"Bearer {TOKEN}"}, {"Cookie": cookie}):
        for path in ROUTES:
            if path == "api/live":
                stream = EventStream(server.url, headers=credentials)  # asserts the 200
                try:
                    assert stream.next()[0] == "hello"
                finally:
                    stream.close()
                continue
            status, _, body = request(server, path.format(id=first_id), headers=credentials)
            assert status == 200, (path, body[:200])
        status, _, body = request(server, f"api/episodes/{first_id}/frames/0", headers=credentials)
        assert body == jpeg
        status, _, body = request(server, "api/store", headers=credentials)
        assert json.loads(body)["episodes"] == count
        # past the gate, the image search reads the upload (the model is not this test's:
        # an upload that is no image is refused by the search itself)
        status, _, body = request(server, "api/search", "POST", credentials, b"no image")
        assert status == 400 and "not an image" in json.loads(body)["error"]
        status, _, body = request(server, "", headers=credentials)
        assert status == 200 and b'id="timeline"' in body


def test_signing_in_sets_an_http_only_strict_cookie_and_never_echoes_the_token(
    server: Server,
) -> None:
    # the form and its two files are reachable without the token
    status, headers, body = request(server, "login")
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert b'name="token"' in body and b'type="password"' in body
    for path in ("static/login.js", "static/style.css"):
        assert request(server, path)[0] == 200, path
    # a wrong token: back to the form (which says so), no cookie
    status, headers = sign_in(server, "not-the-token")
    assert status == 303 and headers["location"] == "/login?failed"
    assert "set-cookie" not in headers
    status, headers = sign_in(server, TOKEN)
    assert status == 303 and headers["location"] == "/"
    attributes = [a.strip().lower() for a in headers["set-cookie"].split(";")]
    assert attributes[0].startswith(f"{SESSION_COOKIE}=")
    assert {"httponly", "samesite=strict", "path=/"} <= set(attributes[1:])
    assert TOKEN.lower() not in headers["set-cookie"].lower()
    # a form too large to be one is refused before it is read whole
    status, _, body = request(server, "login", "POST", body=b"token=" + b"x" * 10_000)
    assert status == 413 and "sign-in form" in json.loads(body)["error"]


def _command(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "surprise_memory", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_off_the_loopback_a_token_is_needed_and_never_taken_from_the_command_line(
    store: Path, tmp_path: Path
) -> None:
    wide = _command(tmp_path, "serve", str(store), "--host", "0.0.0.0", env=_env())
    assert wide.returncode == 1 and wide.stdout == "", wide.stderr
    assert wide.stderr.startswith(
        "surprise-memory: error: --host 0.0.0.0: other machines could reach the memory"
    )
    assert TOKEN_ENV in wide.stderr and "--token-file" in wide.stderr
    assert "Traceback" not in wide.stderr and len(wide.stderr.strip().splitlines()) == 1
    # the MCP server's HTTP transport: the same rule, the same words, its own variable
    mcp_wide = ("mcp", "--store", str(store), "--transport", "http", "--http-host", "0.0.0.0")
    # the browser's token is not the MCP server's: each door its own variable
    mcp = _command(tmp_path, *mcp_wide, env=_env(**{TOKEN_ENV: TOKEN}))
    assert mcp.returncode == 1 and "--http-host 0.0.0.0: other machines could reach" in mcp.stderr
    assert MCP_TOKEN_ENV in mcp.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    args = ("serve", str(store), "--host", "0.0.0.0", "--token-file", str(empty))
    no_token = _command(tmp_path, *args, env=_env())
    assert no_token.returncode == 1 and "holds no token" in no_token.stderr
    secret = secrets.token_hex(16)
    for given in (["--token", secret], [f"--token={secret}"], ["--tok", secret]):
        for command in (
            ["serve", str(store), "--host", "0.0.0.0"],
            ["mcp", "--store", str(store), "--transport", "http", "--http-host", "0.0.0.0"],
        ):
            refused = _command(tmp_path, *command, *given, env=_env())
            assert refused.returncode == 2 and refused.stdout == "", refused.stderr
            assert secret not in refused.stderr  # never echoed, never read as a file name
            if given[0] != "--tok":  # (an abbreviation is ambiguous: refused as such)
                assert "never taken from the command line" in refused.stderr


def test_off_the_loopback_with_a_token_file_every_request_needs_it(
    store: Path, first_id: str, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(f"{TOKEN}\n")
    options = ("--host", "0.0.0.0", "--token-file", str(token_file))
    with serve(str(store), tmp_path, *options, env=_env()) as wide:
        assert urlsplit(wide.url).hostname == "0.0.0.0"
        local = Server(wide.proc, wide.url.replace("0.0.0.0", "127.0.0.1"))
        frame = f"api/episodes/{first_id}/frames/0"
        assert request(local, frame)[0] == 401
        status, headers, _ = request(local, frame, headers={"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and headers["content-type"] == "image/jpeg"


def _image_loads(page: Any, src: str) -> bool:
    """Whether Chromium loads ``src`` as an image (waits for its load or its error)."""
    script = """
    const done = arguments[arguments.length - 1];
    const img = new Image();
    img.onload = () => done(img.naturalWidth > 0);
    img.onerror = () => done(false);
    img.src = arguments[0];
    """
    return bool(page.execute_async_script(script, src))


def test_in_chromium_no_frame_loads_until_the_person_signs_in(
    server: Server, store: Path, first_id: str, tmp_path: Path
) -> None:
    page = chrome(tmp_path / "profile")
    try:
        page.set_script_timeout(60)
        page.get(server.url)
        wait_for(lambda: urlsplit(page.current_url).path == "/login", 30, "the sign-in form")
        frames = [f"/api/episodes/{first_id}/frames/0", f"/api/episodes/{first_id}/thumbnail"]
        assert not any(_image_loads(page, src) for src in frames)
        # a wrong token: the form says so
        page.find_element(By.ID, "token").send_keys("not-the-token")
        page.find_element(By.ID, "sign-in-btn").click()
        # the post redirects to a new form page: an element found on the old one goes stale,
        # so each poll asks the page that is there now
        shown = "const m = document.getElementById('sign-in-msg'); return !!m && !m.hidden"
        wait_for(lambda: page.execute_script(shown), 30, "the wrong token's message")
        assert urlsplit(page.current_url).query == "failed"
        assert not any(_image_loads(page, src) for src in frames)
        page.get_log("browser")  # the refused loads' console errors, read and cleared
        page.find_element(By.ID, "token").send_keys(TOKEN)
        page.find_element(By.ID, "sign-in-btn").click()
        ready = "return !!window.sm && window.sm.ready && window.sm.live === 'on'"
        wait_for(lambda: page.execute_script(ready), 60, "the page's first load after signing in")
        assert urlsplit(page.current_url).path == "/"
        # signed in, the page works as without a token: search, thumbnails, frames
        page.find_element(By.ID, "q-start").send_keys("0")
        page.find_element(By.ID, "search-btn").click()
        wait_for(
            lambda: "ranked by time" in page.find_element(By.ID, "search-msg").text, 60, "results"
        )
        with EpisodeStore(store, read_only=True) as s:
            ids = s.episode_ids()
        cards = page.find_elements(By.CSS_SELECTOR, "#results .hit")
        assert sorted(c.get_attribute("data-id") for c in cards) == sorted(ids)
        wait_for(lambda: images_loaded(page, "#results img"), 30, "the results' thumbnails")
        cards[0].click()
        wait_for(lambda: page.find_element(By.ID, "episode").is_displayed(), 30, "the episode")
        wait_for(lambda: images_loaded(page, "#ep-frames img, #ep-player"), 30, "its frames")
        assert all(_image_loads(page, src) for src in frames)
        # the cookie is the browser's alone: no script reads it, no other site sends it
        assert page.execute_script("return document.cookie") == ""
        (jar,) = page.get_cookies()
        assert jar["name"] == SESSION_COOKIE and jar["httpOnly"] and jar["sameSite"] == "Strict"
        errors = [e for e in page.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        page.quit()
