"""The MCP SDK's own client, held open across a module's tests.

:func:`stdio_session` starts ``surprise-memory mcp`` as a subprocess (as a desktop client
does) and :func:`http_session` connects to one serving streamable HTTP; either way the
SDK's ``ClientSession`` runs on an event loop of its own thread (an anyio blocking portal),
so plain synchronous tests call it through :class:`McpCaller`. An :class:`Approver` is
the person at the client: it answers the server's elicitations as a test tells it to.
:func:`guide_session` starts a server of the agents guide's ``mcpServers`` examples as a
client starts it: the command as written, the client's default environment. ROS-free.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client

import surprise_memory

MCP = [sys.executable, "-m", "surprise_memory", "mcp"]

GUIDE = Path(__file__).resolve().parents[1] / "doc" / "guides" / "agents.md"
"""The guide whose ``mcpServers`` examples must start as written."""

GUIDE_PREFIX = "/home/me/ros2_ws/install/surprise_memory"
"""The package's install prefix in the guide's examples (the robot route's workspace)."""

CLIENT_PATH = "/usr/local/bin:/usr/bin:/bin"
"""A desktop client's PATH: none of this shell's venv or sourced workspace."""


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


class Approver:
    """The person at an MCP client: answers each elicitation with :attr:`answer`.

    ``accept`` (yes), ``accept_no`` (the form answered no), ``decline``, ``cancel``, or
    ``nothing`` (no answer: the call waits until the server gives up and cancels it).
    What the server asked is kept in :attr:`asked`.
    """

    def __init__(self) -> None:
        self.answer = "accept"
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.answer == "nothing":
            await anyio.sleep_forever()
        if self.answer in ("accept", "accept_no"):
            content = {"send_robot": self.answer == "accept"}
            return types.ElicitResult(action="accept", content=content)
        return types.ElicitResult(action=self.answer)


@contextlib.asynccontextmanager
async def _session(
    transport: Any, approver: Approver | None
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    async with (
        transport as (read, write),
        ClientSession(read, write, elicitation_callback=approver) as session,
    ):
        init = await session.initialize()
        yield session, init


@contextlib.contextmanager
def _caller(make_transport: Any, approver: Approver | None) -> Iterator[McpCaller]:
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(make_transport(), approver)) as (
            session,
            init,
        ),
    ):
        yield McpCaller(portal, session, init)


@contextlib.contextmanager
def stdio_session(
    args: Sequence[str],
    cwd: Path,
    errlog: TextIO,
    approver: Approver | None = None,
    command: Sequence[str] = MCP,
    env: dict[str, str] | None = None,
) -> Iterator[McpCaller]:
    """``surprise-memory mcp ARGS`` over stdio, started by the SDK's client.

    Args:
        args: The command's arguments.
        cwd: Its working folder (never the repository root: the install is imported).
        errlog: Where its standard error goes (the navigation log is read from there).
        approver: Answers the server's elicitations (None: the client cannot elicit).
        command: The command line before ``args``.
        env: What the client adds to its default environment (default: this process's).

    """
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], *args],
        env=dict(os.environ) if env is None else env,
        cwd=str(cwd),
    )
    with _caller(lambda: stdio_client(params, errlog=errlog), approver) as caller:
        yield caller


@contextlib.contextmanager
def http_session(
    url: str, token: str | None, approver: Approver | None = None
) -> Iterator[McpCaller]:
    """A client session over streamable HTTP at ``url`` (with the bearer token, if any)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def transport() -> Any:
        # httpx's default 5 s read timeout is shorter than the server's first text search
        # on a loaded machine (it loads the query embedder then): a client waits as a
        # desktop client does
        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        return streamable_http_client(url, http_client=client)

    with _caller(transport, approver) as caller:
        yield caller


@contextlib.contextmanager
def http_server(
    args: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float = 60.0,
    said: str | None = None,
) -> Iterator[str]:
    """``surprise-memory mcp ARGS --transport http --http-port 0`` running; its URL, given
    once its standard error has said ``said`` too (None: once it listens)."""
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
        if said is not None:
            assert proc.stderr is not None
            told = _read_until(proc.stderr.fileno(), said, timeout)
            assert said in told, (told, proc.poll())
        yield line.split(" at ", 1)[1].split()[0]
        assert proc.poll() is None, "the server died during the tests"
    finally:
        proc.terminate()
        proc.wait(timeout=timeout)


def _read_until(fd: int, needle: str, timeout: float) -> str:
    """What a pipe said until it said ``needle``, or until ``timeout`` (raw reads: a text
    wrapper's buffer would hide lines from ``select``)."""
    said = b""
    deadline = time.monotonic() + timeout
    while needle.encode() not in said and (left := deadline - time.monotonic()) > 0:
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:  # it closed: the process ended
                break
            said += chunk
    return said.decode(errors="replace")


def _rest(proc: subprocess.Popen[str], timeout: float) -> str:
    """What a failed start said on standard error."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc.stderr.read() if proc.stderr is not None else ""


def installed_prefix() -> Path:
    """The install prefix of the package under test (``<install>/surprise_memory``)."""
    # <prefix>/lib/pythonX.Y/site-packages/surprise_memory/__init__.py
    prefix = Path(surprise_memory.__file__).resolve().parents[4]
    assert (prefix / "bin" / "surprise-memory").is_file(), f"no colcon install at {prefix}"
    return prefix


def guide_servers() -> dict[str, dict[str, Any]]:
    """The stdio servers of the guide's ``mcpServers`` examples, by name, as written."""
    servers: dict[str, dict[str, Any]] = {}
    for block in re.findall(r"```json\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S):
        for name, spec in json.loads(block).get("mcpServers", {}).items():
            if "command" in spec:
                servers[name] = spec
    return servers


@contextlib.contextmanager
def guide_session(
    name: str,
    cwd: Path,
    errlog: TextIO,
    paths: dict[str, str],
    *,
    more_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    approver: Approver | None = None,
    prefix: Path | None = None,
) -> Iterator[McpCaller]:
    """The guide's server ``name`` started by the SDK's stdio client as a desktop client does.

    Its command and arguments as written, but for the guide's paths (the install prefix
    becomes this test's, and ``paths`` maps the others); its ``env`` (``env`` replaces
    values, such as the domain); the client's default environment
    (``get_default_environment()``, its PATH a desktop's): nothing sourced, no venv.

    Args:
        name: The server's name in the guide.
        cwd: Its working folder.
        errlog: Where its standard error goes.
        paths: The guide's other paths and this test's (a store, ...).
        more_args: Arguments added after the guide's (a test's namespace, ...).
        env: Values of the guide's ``env`` replaced by the test's.
        approver: Answers the server's elicitations.
        prefix: The install prefix that the guide's stands for (default: the one under test).

    """
    spec = guide_servers()[name]
    prefix = prefix or installed_prefix()
    mine = {GUIDE_PREFIX: str(prefix), **paths}

    def ours(word: str) -> str:
        for guide_path, path in mine.items():
            word = word.replace(guide_path, path)
        return word

    command = [ours(spec["command"]), *(ours(a) for a in spec.get("args", []))]
    assert command[0] == str(prefix / "bin" / "surprise-memory"), command
    extra = {**spec.get("env", {}), **(env or {}), "PATH": CLIENT_PATH}
    inherited = get_default_environment()
    assert not {"PYTHONPATH", "AMENT_PREFIX_PATH", "LD_LIBRARY_PATH", "VIRTUAL_ENV"} & set(
        inherited
    )
    with stdio_session(
        [*command[1:], *more_args], cwd, errlog, approver, command=command[:1], env=extra
    ) as caller:
        yield caller
