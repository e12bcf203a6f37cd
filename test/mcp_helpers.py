"""The MCP SDK's own client, held open across a module's tests.

:func:`stdio_session` starts ``surprise-memory mcp`` as a subprocess (as a desktop client
does) and :func:`http_session` connects to one serving streamable HTTP; either way the
SDK's ``ClientSession`` runs on an event loop of its own thread (an anyio blocking portal),
so plain synchronous tests call it through :class:`McpCaller`. ROS-free.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx2
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

MCP = [sys.executable, "-m", "surprise_memory", "mcp"]


class McpCaller:
    """An initialized client session, called from synchronous code.

    Args:
        portal: The event loop the session lives on.
        session: The session.
        init: The server's answer to ``initialize``.

    """

    def __init__(
        self, portal: BlockingPortal, session: ClientSession, init: types.InitializeResult
    ) -> None:
        self.portal = portal
        self.session = session
        self.init = init

    def tools(self) -> dict[str, types.Tool]:
        """The server's tools by name."""
        return {t.name: t for t in self.portal.call(self.session.list_tools).tools}

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> types.CallToolResult:
        """One tools/call."""
        return self.portal.call(self.session.call_tool, name, arguments)

    def read(self, uri: str) -> types.ReadResourceResult:
        """One resources/read."""
        return self.portal.call(self.session.read_resource, uri)

    def resources(self) -> list[types.Resource]:
        """The resources listed."""
        return self.portal.call(self.session.list_resources).resources


@contextlib.asynccontextmanager
async def _session(transport: Any) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    async with transport as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        yield session, init


@contextlib.contextmanager
def _caller(make_transport: Any) -> Iterator[McpCaller]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(make_transport())) as (session, init),
    ):
        yield McpCaller(portal, session, init)


@contextlib.contextmanager
def stdio_session(args: Sequence[str], cwd: Path, errlog: TextIO) -> Iterator[McpCaller]:
    """``surprise-memory mcp ARGS`` over stdio, started by the SDK's client.

    Args:
        args: The command's arguments.
        cwd: Its working folder (never the repository root: the install is imported).
        errlog: Where its standard error goes (the navigation log is read from there).

    """
    params = StdioServerParameters(
        command=MCP[0], args=[*MCP[1:], *args], env=dict(os.environ), cwd=str(cwd)
    )
    with _caller(lambda: stdio_client(params, errlog=errlog)) as caller:
        yield caller


@contextlib.contextmanager
def http_session(url: str, token: str | None) -> Iterator[McpCaller]:
    """A client session over streamable HTTP at ``url`` (with the bearer token, if any)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def transport() -> Any:
        # httpx's default 5 s read timeout is shorter than the server's first text search
        # on a loaded machine (it loads the query embedder then): a client waits as a
        # desktop client does
        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        return streamable_http_client(url, http_client=client)

    with _caller(transport) as caller:
        yield caller


@contextlib.contextmanager
def http_server(
    args: Sequence[str], cwd: Path, env: dict[str, str], timeout: float = 60.0
) -> Iterator[str]:
    """``surprise-memory mcp ARGS --transport http --http-port 0`` running; its URL."""
    proc = subprocess.Popen(
        [*MCP, *args, "--transport", "http", "--http-port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""  # its first line, once it listens
        assert "serving MCP" in line, (line, proc.poll(), _rest(proc, timeout))
        yield line.split(" at ", 1)[1].split()[0]
        assert proc.poll() is None, "the server died during the tests"
    finally:
        proc.terminate()
        proc.wait(timeout=timeout)


def _rest(proc: subprocess.Popen[str], timeout: float) -> str:
    """What a failed start said on standard error."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.stderr.read() if proc.stderr is not None else ""
