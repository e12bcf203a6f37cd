"""``surprise-memory mcp --node``: an MCP client finds an episode and sends the robot there.

Over real DDS: the memory node serves a store written here (``test_navigation_action``'s
episodes) and sends goals through the tests' NavigateToPose-shaped action (and Nav2's,
where nav2_msgs is installed: ``test_navigation_action``'s fixtures) to
:class:`~test_navigation_action.ScriptedNavigator`, which stands where Nav2 is; the MCP
server runs as a subprocess started by the SDK's stdio client and reaches the node's
services from its own ROS 2 node, as it would from another machine. Each check looks at
both sides: what the MCP client was told, and what the navigator saw. Without
``--allow-navigation`` the navigation tools do not exist; with it every call is logged on
the server's standard error, and a goal is sent only after the person at the client (an
:class:`~mcp_helpers.Approver` answering the server's elicitation) said yes, over stdio
and streamable HTTP alike, unless ``--navigation-approval none`` said otherwise.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import synthetic_frames as sf
import test_navigation_action as nav_action
from fleet_helpers import wait_until
from mcp.shared.exceptions import MCPError
from mcp_helpers import (
    MCP,
    Approver,
    McpCaller,
    guide_session,
    http_server,
    http_session,
    stdio_session,
)
from PIL import Image
from rclpy.node import Node
from test_go_to_episode import _weights, go_to_episode_service
from test_navigation_action import ACTION_NAME, TIMEOUT_S, ScriptedNavigator, _fill

S = 1_000_000_000
NS = "/mcp_nav"
SEARCH = "search_episodic_memory"
APPROVAL_TIMEOUT_S = 5.0  # the servers' --approval-timeout-seconds
NAVIGATING = [
    "--node",
    "--namespace",
    NS,
    "--allow-navigation",
    "--approval-timeout-seconds",
    str(APPROVAL_TIMEOUT_S),
    "--robot-pose-topic",
    f"{NS}/amcl_pose",
]
ROBOT_AT = (2.0, -1.0)  # the robot's pose in map (AMCL's), 4 m from the episode 'door'

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
def approver() -> Approver:
    """The person at the MCP clients (says yes unless a test tells it otherwise)."""
    return Approver()


@pytest.fixture(autouse=True)
def says_yes(approver: Approver) -> None:
    approver.answer = "accept"
    approver.asked.clear()


@pytest.fixture(scope="module")
def robot_pose(ros: tuple[Node, ScriptedNavigator]) -> Iterator[Any]:
    """The robot's localised pose, published once as AMCL does (reliable, transient local);
    the publisher."""
    from geometry_msgs.msg import PoseWithCovarianceStamped

    from surprise_memory.nodes.qos import ROBOT_POSE

    publisher = ros[0].create_publisher(PoseWithCovarianceStamped, f"{NS}/amcl_pose", ROBOT_POSE)
    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = "map"
    msg.pose.pose.position.x, msg.pose.pose.position.y = ROBOT_AT
    msg.pose.pose.orientation.w = 1.0
    publisher.publish(msg)
    yield publisher
    ros[0].destroy_publisher(publisher)


# What a server logs once it holds the robot's pose: the fixtures wait for it (DDS discovery
# and the transient-local sample take a moment, longer on a loaded machine; a goal asked
# before that is told the distance is unknown)
HEARD = f"robot pose heard on {NS}/amcl_pose (frame 'map')"


@pytest.fixture(scope="module")
def navigating(
    memory_node: Path, approver: Approver, robot_pose: Any
) -> Iterator[tuple[McpCaller, Path]]:
    """The MCP server over the node, navigation allowed, holding the robot's pose; its
    standard error's file."""
    log = memory_node / "mcp_navigation.log"
    with contextlib.ExitStack() as stack:
        errlog = stack.enter_context(log.open("w"))
        caller = stack.enter_context(stdio_session(NAVIGATING, memory_node, errlog, approver))
        assert wait_until(lambda: HEARD in log.read_text(), 30.0), log.read_text()
        yield caller, log


@pytest.fixture(scope="module")
def navigating_http(memory_node: Path, robot_pose: Any) -> Iterator[str]:
    """The same server on streamable HTTP (loopback, any free port), holding the robot's
    pose; its URL."""
    with http_server(NAVIGATING, memory_node, dict(os.environ), said=HEARD) as url:
        yield url


def answer(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's answer: the result's JSON's data field (episode text is data)."""
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    body: dict[str, Any] = json.loads(first.text)
    assert result.is_error == ("error" in body)
    data: dict[str, Any] = body["memory_data"]
    assert ("error" in data) == ("error" in body)
    return data


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
    assert nav.first_event(goal_id) == "accepted"  # it reached the navigator
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


def check_asked(
    approver: Approver, distance: str | None = "Distance from the robot's current pose: 4.0 m."
) -> None:
    """The person was asked once, shown the episode, its time and age, its pose, the goal,
    and the distance from the robot (from the pose AMCL published)."""
    (asked,) = approver.asked
    assert "episode 'door' (robot 'me')" in asked, asked
    # the store began an hour ago; its episode 'door' 10 s after that
    assert re.search(
        r"Recorded 20\d\d-\d\d-\d\d [0-9:]+ UTC, t=10.0 s \((1 h( \d+ min)?|59 min) ago\)", asked
    )
    assert "Episode pose: (2.00, 3.00, 0.00) in 'map'" in asked
    assert "Goal: (2.00, 3.00, 0.00) in 'map', facing 90.0 deg." in asked
    assert distance is None or distance in asked, asked


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("accept", ""),
        ("accept_no", "declined (answered no)"),
        ("decline", "declined by the person"),
        ("cancel", "cancelled by the person"),
        ("nothing", f"no answer within {APPROVAL_TIMEOUT_S:g} s"),
    ],
)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_goal_is_sent_only_after_the_persons_yes(
    ros: tuple[Node, ScriptedNavigator],
    request: pytest.FixtureRequest,
    approver: Approver,
    transport: str,
    reply: str,
    why: str,
) -> None:
    nav = ros[1]
    nav.script(steps=200, step_s=0.1)  # runs long: stopped below
    approver.answer = reply
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            caller = request.getfixturevalue("navigating")[0]
        else:
            url = request.getfixturevalue("navigating_http")
            caller = stack.enter_context(http_session(url, None, approver))
        found = answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15}))  # as an agent
        assert [e["id"] for e in found["episodes"]] == ["door"]
        started = time.monotonic()
        result = caller.call("navigate_to_episode", {"episode_id": "door"})
        took = time.monotonic() - started
        sent = answer(result)
        check_asked(approver)
        if reply == "accept":
            assert sent["sent"] is True and sent["approval"] == "accepted by the person", sent
            goal_id = sent["goal_id"]
            assert nav.first_event(goal_id) == "accepted"  # it reached the navigator
            assert answer(caller.call("stop_navigation", {"goal_id": goal_id}))["stopped"]
            nav.wait_for(goal_id, "canceled")
            return
        assert result.is_error and sent["sent"] is False, sent
        assert sent["approval"].startswith(why) and "no goal was sent" in sent["error"], sent
        if reply == "nothing":
            assert took >= APPROVAL_TIMEOUT_S
        time.sleep(1.0)  # a goal sent anyway would have reached the navigator by now
        assert nav.log() == []


def test_a_client_that_cannot_ask_the_person_is_refused(
    ros: tuple[Node, ScriptedNavigator], navigating_http: str
) -> None:
    nav = ros[1]
    nav.script()
    with http_session(navigating_http, None, approver=None) as caller:
        refused = caller.call("navigate_to_episode", {"episode_id": "door"})
        body = answer(refused)
        assert refused.is_error and body["sent"] is False
        assert "does not support elicitation" in body["error"], body
        assert "--navigation-approval none" in body["error"]
        # reading the memory needs nobody's approval
        assert answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15}))["count"] == 1
    time.sleep(1.0)
    assert nav.log() == []


def test_approval_switched_off_is_said_at_start_and_at_every_goal(
    ros: tuple[Node, ScriptedNavigator], memory_node: Path
) -> None:
    nav = ros[1]
    nav.script(steps=200, step_s=0.1)
    log = memory_node / "mcp_no_approval.log"
    args = [*NAVIGATING, "--navigation-approval", "none"]
    with log.open("w") as errlog, stdio_session(args, memory_node, errlog) as caller:
        assert "approve" not in caller.tools()["navigate_to_episode"].description
        sent = answer(caller.call("navigate_to_episode", {"episode_id": "door"}))
        assert sent["sent"] is True, sent
        assert sent["approval"] == "not asked (--navigation-approval none)"
        goal_id = sent["goal_id"]
        assert nav.first_event(goal_id) == "accepted"
        assert answer(caller.call("stop_navigation", {"goal_id": goal_id}))["stopped"]
        nav.wait_for(goal_id, "canceled")
    logged = log.read_text()
    assert "navigation approval none: goals are sent without asking anyone" in logged
    assert f'"goal_id": "{goal_id}"' in logged
    assert '"approval": "not asked (--navigation-approval none)"' in logged


def test_the_guides_node_configuration_starts_from_a_clients_default_environment(
    ros: tuple[Node, ScriptedNavigator], memory_node: Path, approver: Approver
) -> None:
    """The agents guide's ``--node`` example as a desktop client starts it (this test's
    namespace and ROS domain), asking the person before the goal."""
    nav = ros[1]
    nav.script(steps=200, step_s=0.1)
    domain = {"ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "0")}
    log = memory_node / "mcp_guide.log"
    with (
        log.open("w") as errlog,
        guide_session(
            "robot",
            memory_node,
            errlog,
            {},
            more_args=["--namespace", NS],
            env=domain,
            approver=approver,
        ) as caller,
    ):
        assert "navigate_to_episode" in caller.tools()
        found = answer(caller.call(SEARCH, {"start_time": 5, "end_time": 15}))
        assert [e["id"] for e in found["episodes"]] == ["door"]
        sent = answer(caller.call("navigate_to_episode", {"episode_id": "door"}))
        assert sent["sent"] is True and sent["approval"] == "accepted by the person", sent
        check_asked(approver, None)  # the guide's robot pose topic (AMCL's) is not this test's
        assert answer(caller.call("stop_navigation", {"goal_id": sent["goal_id"]}))["stopped"]
        nav.wait_for(sent["goal_id"], "canceled")


def test_a_wrong_robot_pose_topic_is_refused_at_start(tmp_path: Path) -> None:
    out = subprocess.run(
        [*MCP, *NAVIGATING[:4], "--robot-pose-topic", "not a topic!"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 1 and "--robot-pose-topic 'not a topic!'" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
