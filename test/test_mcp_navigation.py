"""``surprise-memory mcp --node``: an MCP client finds an episode and sends the robot there.

Over real DDS: the memory node serves a store written here (``test_navigation_action``'s
episodes) and sends goals through the tests' NavigateToPose-shaped action (and Nav2's,
where nav2_msgs is installed: ``test_navigation_action``'s fixtures) to
:class:`~test_navigation_action.ScriptedNavigator`, which stands where Nav2 is; the MCP
server runs as a subprocess started by the SDK's stdio client and reaches the node's
services from its own ROS 2 node, as it would from another machine. Each check looks at
both sides: what the MCP client was told, and what the navigator saw. Without
``--allow-navigation`` the navigation tools do not exist; with it every call is logged on
the server's standard error.
"""

from __future__ import annotations

import base64
import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import synthetic_frames as sf
import test_navigation_action as nav_action
from mcp.shared.exceptions import MCPError
from mcp_helpers import McpCaller, stdio_session
from PIL import Image
from rclpy.node import Node
from test_go_to_episode import _weights, go_to_episode_service
from test_navigation_action import ACTION_NAME, TIMEOUT_S, ScriptedNavigator, _fill

S = 1_000_000_000
NS = "/mcp_nav"
SEARCH = "search_episodic_memory"

# the scripted navigator and the action types it runs under, as test_navigation_action has them
action_type_name = nav_action.action_type_name
ros = nav_action.ros


@pytest.fixture(scope="module")
def memory_node(
    ros: tuple[Node, ScriptedNavigator],
    action_type_name: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Path]:
    """memory_node serving retrieve_episodes and go_to_episode in NS; its work folder."""
    work = tmp_path_factory.mktemp("mcp_nav")
    weights, _ = _weights(work / "weights")
    store = work / "store"
    _fill(store, weights, time.time_ns() - 3600 * S)
    params = sf.node_params(str(store), embedder_weights=weights, robot_id="me")
    params["/**/memory_node"]["ros__parameters"] |= {
        "goal_transport": "action",
        "goal_action": ACTION_NAME,
        "goal_action_type": action_type_name,
        "goal_timeout_seconds": TIMEOUT_S,
    }
    with go_to_episode_service(ros[0], work, params, NS):
        yield work


@pytest.fixture(scope="module")
def navigating(memory_node: Path) -> Iterator[tuple[McpCaller, Path]]:
    """The MCP server over the node, navigation allowed; its standard error's file."""
    log = memory_node / "mcp_navigation.log"
    args = ["--node", "--namespace", NS, "--allow-navigation"]
    with log.open("w") as errlog, stdio_session(args, memory_node, errlog) as caller:
        yield caller, log


def answer(result: types.CallToolResult) -> dict[str, Any]:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    body: dict[str, Any] = json.loads(first.text)
    assert result.is_error == ("error" in body)
    return body


def test_navigation_is_absent_without_the_flag(memory_node: Path) -> None:
    with (
        (memory_node / "mcp_read_only.log").open("w") as errlog,
        stdio_session(["--node", "--namespace", NS], memory_node, errlog) as caller,
    ):
        assert sorted(caller.tools()) == ["get_episode", SEARCH]
        with pytest.raises(MCPError, match="unknown tool"):
            caller.call("navigate_to_episode", {"episode_id": "door"})
        # the node's memory all the same: "door" is 10 s after the store's origin
        found = answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15}))
        assert [e["id"] for e in found["episodes"]] == ["door"]
        # a picture travels to the node, which embeds it (this store's frames hold the
        # embedding of one caption, so only that the image ranked is checked here)
        jpeg = io.BytesIO()
        Image.new("RGB", (32, 32), (120, 40, 200)).save(jpeg, "JPEG")
        image = base64.b64encode(jpeg.getvalue()).decode()
        ranked = answer(caller.call(SEARCH, {"image": image, "max_results": 2}))
        assert ranked["count"] == 2 and all(e["similarity"] is not None for e in ranked["episodes"])


def wait_status(caller: McpCaller, goal_id: str, state: str, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    status = answer(caller.call("navigation_status", {"goal_id": goal_id}))
    while status["state"] != state and time.monotonic() < deadline:
        time.sleep(0.1)
        status = answer(caller.call("navigation_status", {"goal_id": goal_id}))
    assert status["state"] == state, status
    return status


def test_an_agent_finds_an_episode_sends_the_robot_and_stops_it(
    ros: tuple[Node, ScriptedNavigator], navigating: tuple[McpCaller, Path]
) -> None:
    nav = ros[1]
    nav.script(steps=200, step_s=0.1)  # runs long: the stop comes while it runs
    caller, log = navigating
    tools = caller.tools()
    assert sorted(tools) == [
        "get_episode",
        "navigate_to_episode",
        "navigation_status",
        SEARCH,
        "stop_navigation",
    ]
    assert tools["navigate_to_episode"].annotations is not None
    assert tools["navigate_to_episode"].annotations.read_only_hint is False
    found = answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15, "include_images": True}))
    (episode,) = found["episodes"]
    assert episode["id"] == "door" and episode["position"] == [2.0, 3.0, 0.0]
    # the episode again by its id, with its frames, through the node
    one = caller.call("get_episode", {"episode_id": "door", "include_images": True})
    assert answer(one)["episode"] == episode
    assert sum(isinstance(c, types.ImageContent) for c in one.content) == 2
    sent = answer(caller.call("navigate_to_episode", {"episode_id": "door"}))
    assert sent["sent"] is True and sent["state"] == "running", sent
    assert sent["via"] == f"action {ACTION_NAME}" and sent["goal"]["frame"] == "map"
    goal_id = sent["goal_id"]
    assert nav.log(goal_id)[0] == "accepted"  # it reached the navigator
    status = wait_status(caller, goal_id, "running")
    assert status["episode_id"] == "door" and status["done"] is False
    stop = answer(caller.call("stop_navigation", {"goal_id": goal_id}))
    assert stop["stopped"] is True, stop
    nav.wait_for(goal_id, "canceled")
    assert nav.log(goal_id) == ["accepted", "cancel accepted", "canceled"]
    assert wait_status(caller, goal_id, "canceled")["done"] is True
    # every navigation call is on the server's record
    logged = log.read_text()
    assert (
        f'navigate_to_episode({{"episode_id": "door"}}) -> {{"sent": true, "goal_id": "{goal_id}"'
        in logged
    )
    assert f'stop_navigation({{"goal_id": "{goal_id}"}}) -> {{"stopped": true' in logged


def test_a_refused_cancel_is_not_reported_as_stopped(
    ros: tuple[Node, ScriptedNavigator], navigating: tuple[McpCaller, Path]
) -> None:
    nav = ros[1]
    nav.script(steps=200, step_s=0.1, refuse_cancel=True)
    caller, _ = navigating
    sent = answer(caller.call("navigate_to_episode", {"episode_id": "door"}))
    goal_id = sent["goal_id"]
    stop = answer(caller.call("stop_navigation", {"goal_id": goal_id}))
    assert stop["stopped"] is False and stop["state"] == "running", stop
    assert "cancel refused" in nav.log(goal_id)
    nav.finish(goal_id)
    wait_status(caller, goal_id, "succeeded")


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"episode_id": "nope"}, "nope"),
        ({"episode_id": ""}, "episode_id=''"),
        ({"episode_id": "door", "speed": 3}, "unknown arguments ['speed']"),
        ({}, "episode_id=None"),
    ],
)
def test_refused_goals_send_nothing_and_the_server_lives_on(
    ros: tuple[Node, ScriptedNavigator],
    navigating: tuple[McpCaller, Path],
    arguments: dict[str, Any],
    needle: str,
) -> None:
    nav = ros[1]
    nav.script()
    caller, _ = navigating
    refused = caller.call("navigate_to_episode", arguments)
    assert refused.is_error and needle in answer(refused)["error"]
    assert answer(refused)["sent"] is False
    time.sleep(0.5)
    assert nav.log() == []
    assert answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15}))["count"] == 1
