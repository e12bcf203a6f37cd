"""``surprise-memory mcp`` over a store, through the MCP SDK's own client, stdio and HTTP.

The store is the held-out scene of the project's trained small models
(:mod:`trained_models`: the demo's layout, every scripted event found, about 1.5 s to
build), so a text search must find the person's episode first; which episode is the
person's comes from the scene's ground truth, not from the server. The server runs as a
subprocess: started by the SDK's stdio client (as a desktop client starts it), and on
streamable HTTP on a free loopback port with a bearer token. The tools must be the agent
tools' own definitions; time and place filters must agree with ``surprise-memory query``;
every malformed call must come back as an error while the server lives on.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import psutil
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import (
    CLIENT_PATH,
    MCP,
    McpCaller,
    guide_session,
    http_server,
    http_session,
    stdio_session,
)
from PIL import Image
from snapshot_helpers import colcon_build_command, stand_in_install
from trained_models import SEED, build_trained_store

from surprise_memory.agents.episode_tool import GetEpisodeTool, StoreEpisodeLookup
from surprise_memory.agents.mcp_approval import DATA_NOTE
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.cli import main as cli_main
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.synthetic import ground_truth, model_scene
from surprise_memory.offline.synthetic.evaluation import episode_event
from surprise_memory.stamps import NS_PER_SECOND

TOKEN = "test-token-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[1]
SEARCH = "search_episodic_memory"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_trained_store(tmp_path_factory.mktemp("mcp") / "store")


@pytest.fixture(scope="module")
def person(store: Path) -> str:
    """The id of the episode of the person crossing, from the scene's ground truth."""
    scene = model_scene(SEED)
    truth = ground_truth(scene)
    with EpisodeStore(store, read_only=True) as s:
        found = [
            ep_id
            for ep_id in s.episode_ids()
            if episode_event((s.get(ep_id).stamp_ns - scene.start_ns) / NS_PER_SECOND, truth)
            == "person_crosses"
        ]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def stdio(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpCaller]:
    cwd = tmp_path_factory.mktemp("stdio")
    with (
        (cwd / "stderr.log").open("w") as errlog,
        stdio_session(["--store", str(store)], cwd, errlog) as caller,
    ):
        yield caller


@pytest.fixture(scope="module")
def http(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server on streamable HTTP, loopback, any free port, with a bearer token."""
    env = {**os.environ, "SURPRISE_MEMORY_MCP_TOKEN": TOKEN}
    with http_server(["--store", str(store)], tmp_path_factory.mktemp("http"), env) as url:
        yield url


@pytest.fixture(scope="module", params=["stdio", "http"])
def client(request: pytest.FixtureRequest) -> Iterator[McpCaller]:
    """The SDK's client session over either transport."""
    if request.param == "stdio":
        yield request.getfixturevalue("stdio")
    else:
        with http_session(request.getfixturevalue("http"), TOKEN) as caller:
            yield caller


def answer(result: types.CallToolResult) -> dict[str, Any]:
    """A tool's answer: the data field of the result's JSON (its first content, and the
    structured content alike), where episode text is marked as data."""
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    body: dict[str, Any] = json.loads(first.text)
    assert result.structured_content == body
    assert set(body) <= {"memory_data", "error"}
    assert result.is_error == ("error" in body) == ("error" in body["memory_data"])
    data: dict[str, Any] = body["memory_data"]
    return data


def images(result: types.CallToolResult) -> list[bytes]:
    """The JPEG bytes of a result's image contents, each checked to decode."""
    out = []
    for c in result.content:
        if isinstance(c, types.ImageContent):
            assert c.mime_type == "image/jpeg"
            data = base64.b64decode(c.data)
            with Image.open(io.BytesIO(data)) as img:
                assert img.format == "JPEG" and img.size[0] > 0
            out.append(data)
    return out


def ids(result: types.CallToolResult) -> list[str]:
    body = answer(result)
    assert not result.is_error, body
    return [e["id"] for e in body["episodes"]]


# ---------------------------------------------------------------------- one definition
def test_the_tools_are_the_agent_tools_own_definitions(stdio: McpCaller, store: Path) -> None:
    tools = stdio.tools()
    assert sorted(tools) == ["get_episode", SEARCH]  # read-only: no navigation
    with EpisodeStore(store, read_only=True) as s:

        def embed(_: Any) -> Any:
            raise AssertionError("not called")

        search = EpisodicMemoryTool(
            s,
            embed_text=embed,
            embed_image=embed,
            embedder_model=s.embedder_model,
            max_results_cap=s.config.max_results_cap,
        )
        for ours in (search, GetEpisodeTool(search, StoreEpisodeLookup(s))):
            served = tools[ours.name]
            assert served.input_schema == ours.parameters
            # the tool's own words, then what episode text is: data, never instructions
            assert served.description == f"{ours.description} {DATA_NOTE}"
            assert served.annotations is not None and served.annotations.read_only_hint
    assert "search_episodic_memory" in (stdio.init.instructions or "")
    assert DATA_NOTE in (stdio.init.instructions or "")


# ---------------------------------------------------------------------- search
def test_text_search_finds_the_person_first_with_images(client: McpCaller, person: str) -> None:
    result = client.call(SEARCH, {"query": "a person crossing", "include_images": True})
    found = ids(result)
    assert found[0] == person
    jpegs = images(result)
    assert 3 <= len(jpegs) <= 9  # up to 3 frames of each of the best 3 episodes
    labels = [
        json.loads(c.text)["memory_data"]["image_label"]
        for c in result.content[1:]
        if isinstance(c, types.TextContent)
    ]
    assert labels[0].startswith(f"episode {person}, frame 1/8")
    episode = answer(result)["episodes"][0]
    assert episode["similarity"] > answer(result)["episodes"][1]["similarity"]


def query_ids(capsys: pytest.CaptureFixture[str], store: Path, *options: str) -> list[str]:
    """The episodes ``surprise-memory query --json`` returns."""
    assert cli_main(["query", str(store), "--json", "-k", "10", *options]) == 0
    return [hit["id"] for hit in json.loads(capsys.readouterr().out)["hits"]]


@pytest.mark.parametrize(
    ("options", "arguments"),
    [
        ((), {}),
        (("--start", "20", "--end", "40"), {"start_time": 20, "end_time": 40}),
        (("--start", "30"), {"start_time": "30s"}),
        (("--end", "2023-11-14T22:13:50Z"), {"end_time": "2023-11-14T22:13:50Z"}),
        (("--near", "8.45,10.15", "--radius", "3"), {"position": [8.45, 10.15, 0], "radius": 3}),
        (("--near", "7.8,0"), {"position": [7.8, 0.0, 0.0]}),
        (("--robot-id", "vm", "--start", "20"), {"robot": "vm", "start_time": 20}),
        (("--robot-id", "other"), {"robot": "other"}),
    ],
)
def test_time_place_and_robot_filters_agree_with_query(
    stdio: McpCaller,
    store: Path,
    capsys: pytest.CaptureFixture[str],
    options: tuple[str, ...],
    arguments: dict[str, Any],
) -> None:
    want = query_ids(capsys, store, *options)
    got = ids(stdio.call(SEARCH, {**arguments, "max_results": 10}))
    assert got == want
    if {"start_time", "end_time", "radius"} & set(arguments):
        assert 0 < len(got) < 4  # each filter leaves some episodes out, and keeps some
    elif "position" in arguments:  # no radius: every episode, nearest first
        assert len(got) == 4 and got != ids(stdio.call(SEARCH, {"max_results": 10}))


def test_an_image_finds_its_own_episode(stdio: McpCaller, store: Path, person: str) -> None:
    with EpisodeStore(store, read_only=True) as s:
        jpeg = s.frame_jpeg(person, 3)
    image = base64.b64encode(jpeg).decode()
    assert ids(stdio.call(SEARCH, {"image": image, "max_results": 2}))[0] == person
    data_url = "data:image/jpeg;base64," + image  # as a browser client may hold it
    assert ids(stdio.call(SEARCH, {"image": data_url, "max_results": 1})) == [person]


# ---------------------------------------------------------------------- one episode
def test_get_episode_sends_every_frame(stdio: McpCaller, store: Path, person: str) -> None:
    result = stdio.call("get_episode", {"episode_id": person, "include_images": True})
    episode = answer(result)["episode"]
    assert episode["id"] == person and len(episode["frame_times"]) == 8
    with EpisodeStore(store, read_only=True) as s:
        assert images(result) == [s.frame_jpeg(person, i) for i in range(8)]  # as stored
    bare = stdio.call("get_episode", {"episode_id": person, "include_images": False})
    assert answer(bare)["episode"] == episode and images(bare) == []


def test_resources_summary_and_episodes(stdio: McpCaller, store: Path, person: str) -> None:
    listed = [str(r.uri) for r in stdio.resources()]
    assert listed[0] == "memory://summary"
    assert f"memory://episodes/{person}" in listed and len(listed) == 5  # the 4 episodes
    (summary,) = stdio.read("memory://summary").contents
    assert isinstance(summary, types.TextResourceContents)
    facts = json.loads(summary.text)
    assert facts["episodes"] == 4 and facts["text_search"] and facts["image_search"]
    assert facts["navigation"] is False and facts["memory"] == str(store)
    contents = stdio.read(f"memory://episodes/{person}").contents
    head, *frames = contents
    assert isinstance(head, types.TextResourceContents)
    assert json.loads(head.text)["memory_data"]["episode"]["id"] == person
    assert [f.uri for f in frames] == [
        f"memory://episodes/{person}/frames/{n}" for n in range(1, 9)
    ]
    with EpisodeStore(store, read_only=True) as s:
        for n, frame in enumerate(frames):
            assert isinstance(frame, types.BlobResourceContents)
            assert frame.mime_type == "image/jpeg"
            assert base64.b64decode(frame.blob) == s.frame_jpeg(person, n)


# ---------------------------------------------------------------------- malformed calls
NOT_AN_IMAGE = base64.b64encode(b"not an image at all").decode()


@pytest.mark.parametrize(
    ("tool", "arguments", "needle"),
    [
        (SEARCH, {"query": 5}, "query=5"),
        (SEARCH, {"max_results": 0}, "between 1 and"),
        (SEARCH, {"max_results": "many"}, "max_results="),
        (SEARCH, {"position": [1, 2]}, "position="),
        (SEARCH, {"radius": 2.0}, "radius given without a position"),
        (SEARCH, {"start_time": "soonish"}, "soonish"),
        (SEARCH, {"start_time": -3}, "start_time=-3"),
        (SEARCH, {"bogus": 1}, "unknown arguments ['bogus']"),
        (SEARCH, {"image": "%%% not base64"}, "not valid base64"),
        (SEARCH, {"image": NOT_AN_IMAGE}, "not an image"),
        (SEARCH, {"query": "a person", "image": NOT_AN_IMAGE}, "not both"),
        (SEARCH, {"robot": "no such robot!"}, "robot"),
        (SEARCH, {"include_images": "yes"}, "include_images="),
        ("get_episode", {"episode_id": 3}, "episode_id=3"),
        ("get_episode", {"episode_id": "../../etc/passwd"}, "no episode"),
        ("get_episode", {"episode_id": "ep-none", "include_images": True}, "no episode"),
    ],
)
def test_malformed_arguments_are_tool_errors(
    stdio: McpCaller, tool: str, arguments: dict[str, Any], needle: str
) -> None:
    result = stdio.call(tool, arguments)
    assert result.is_error
    assert needle in answer(result)["error"]


def test_unknown_tools_and_resources_are_protocol_errors_and_the_server_lives_on(
    stdio: McpCaller, person: str
) -> None:
    with pytest.raises(MCPError, match="unknown tool 'navigate_to_episode'"):
        stdio.call("navigate_to_episode", {"episode_id": person})  # read-only: not offered
    for uri in ("memory://nothing", "memory://episodes/ep-none", "file:///etc/passwd"):
        with pytest.raises(MCPError):
            stdio.read(uri)
    assert ids(stdio.call(SEARCH, {"query": "a person crossing"}))[0] == person


# ---------------------------------------------------------------------- HTTP safety
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", TOKEN, f"Basic {TOKEN}"])
def test_http_refuses_a_missing_or_wrong_token(http: str, authorization: str | None) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = httpx2.post(http, json=INITIALIZE, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    # the right token passes the gate
    headers["Authorization"] = f"Bearer {TOKEN}"
    assert httpx2.post(http, json=INITIALIZE, headers=headers, timeout=30).status_code == 200


def mcp_command(
    tmp_path: Path, *args: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MCP, *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_refusals_at_start(store: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SURPRISE_MEMORY_MCP_TOKEN"}
    wide = mcp_command(
        tmp_path, "--store", str(store), "--transport", "http", "--http-host", "0.0.0.0", env=env
    )
    assert wide.returncode == 1 and "bearer token" in wide.stderr and wide.stdout == ""
    empty = tmp_path / "empty_token"
    empty.write_text("\n")
    no_token = mcp_command(
        tmp_path, "--store", str(store), "--transport", "http", "--token-file", str(empty), env=env
    )
    assert no_token.returncode == 1 and "holds no token" in no_token.stderr
    nav = mcp_command(tmp_path, "--store", str(store), "--allow-navigation", env=env)
    assert nav.returncode == 1 and "--allow-navigation needs --node" in nav.stderr
    missing = mcp_command(tmp_path, "--store", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    for out in (wide, no_token, nav, missing):
        assert "Traceback" not in out.stderr


# ---------------------------------------------------------------------- the guide's client
@pytest.mark.ros  # the colcon install's launcher (bin/surprise-memory): the main stage only
def test_the_guides_desktop_configuration_starts_from_a_clients_default_environment(
    store: Path, person: str, tmp_path: Path
) -> None:
    """The agents guide's first ``mcpServers`` example, started as a desktop client does."""
    with (
        (tmp_path / "stderr.log").open("w") as errlog,
        guide_session(
            "robot-memory", tmp_path, errlog, {"/home/me/memory/store": str(store)}
        ) as caller,
    ):
        assert sorted(caller.tools()) == ["get_episode", SEARCH]
        assert ids(caller.call(SEARCH, {"query": "a person crossing"}))[0] == person


def _colcon_build(source: Path, work: Path, setup: str) -> Path:
    """``colcon build`` of ``source`` into ``work/install`` in a shell that ran ``setup``.

    At the lowest priority: its compilers take both cores of a 2-core machine, and the
    tests beside it (DDS round trips timed in seconds) must not wait for them.
    """
    command = shlex.join(colcon_build_command(source, work, work / "install"))
    build = f"{setup} && nice -n 19 {command}"
    done = subprocess.run(
        ["bash", "-c", build], env=_robot_shell(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"colcon build of {source} failed:\n{done.stdout[-3000:]}"
    return work / "install"


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # ended since it was listed
        return ""


def _robot_shell() -> dict[str, str]:
    """A fresh login's environment: nothing of this run's sourced install."""
    keep = ("HOME", "USER", "LOGNAME", "ROS_DISTRO", "SURPRISE_MEMORY_VENV", "XDG_CACHE_HOME")
    shell = {k: os.environ[k] for k in keep if k in os.environ}
    return {**shell, "PATH": f"{Path(sys.executable).parent}:{CLIENT_PATH}"}


@pytest.mark.slow  # a colcon build of the package (about a minute)
@pytest.mark.ros  # the colcon install's launcher (bin/surprise-memory): the main stage only
def test_the_launcher_brings_the_underlay_the_workspace_was_built_on(
    store: Path, person: str, tmp_path: Path
) -> None:
    """The robot route's shape: the workspace is built over an underlay found through
    ``AMENT_PREFIX_PATH`` with its own ``local_setup.bash`` (as ``/opt/ros/<distro>`` is),
    then the guide's first example starts from a client's default environment. The
    launcher sources the workspace's setup, which chains that underlay: the server runs
    with the underlay's packages on its paths, and answers.

    The underlay here is our own interface package (``test/fixtures/rosbag2_interfaces``)
    in a merged install; on an apt ROS 2 the workspace is built over ``/opt/ros`` as well
    (``ROS_DISTRO`` set: its ``setup.bash`` is sourced first), as on a robot.
    """
    apt = 'source "/opt/ros/$ROS_DISTRO/setup.bash"; ' if os.environ.get("ROS_DISTRO") else ""
    ros = f'set +u; {apt}source "{ROOT}/tools/env.sh"'  # our route: the venv's ROS 2
    underlay = stand_in_install()  # a merged install, as /opt/ros/<distro> is
    # the underlay sourced as a robot sources ROS 2's; colcon must find it through
    # AMENT_PREFIX_PATH alone, as it finds /opt/ros
    setup = f'{ros} && source "{underlay}/local_setup.bash" && unset COLCON_PREFIX_PATH'
    workspace = _colcon_build(ROOT, tmp_path / "ws", setup)
    with (
        (tmp_path / "stderr.log").open("w") as errlog,
        guide_session(
            "robot-memory",
            tmp_path,
            errlog,
            {"/home/me/memory/store": str(store)},
            prefix=workspace / "surprise_memory",
        ) as caller,
    ):
        assert ids(caller.call(SEARCH, {"query": "a person crossing"}))[0] == person
        (server,) = [
            p for p in psutil.Process().children(recursive=True) if str(workspace) in _cmdline(p)
        ]
        env = server.environ()
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert str(underlay) in env["AMENT_PREFIX_PATH"].split(":"), env["AMENT_PREFIX_PATH"]
    assert str(underlay / site) in env["PYTHONPATH"].split(":"), env["PYTHONPATH"]
    assert str(workspace / "surprise_memory") in env["AMENT_PREFIX_PATH"].split(":")
