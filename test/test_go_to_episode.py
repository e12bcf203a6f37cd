"""``go_to_episode`` over real DDS: the memory node, pipeline_node, the CLI and the agent function.

A test node stands where Nav2 is (:class:`FakeNav2`): a node named ``bt_navigator`` (the
node the memory node's ``navigator_node`` waits for) subscribes ``/goal_pose`` and,
where ``nav2_msgs`` is importable, serves the ``NavigateToPose`` action too, accepting every
goal; with ``goal_transport: auto`` the node sends through the action where nav2_msgs is
installed, else on the topic, so the same checks run both ways. Each goal is checked for
frame, position and orientation against hand-computed poses.

The memory node serves a store written here: episodes in ``map`` and in ``odom``, one
without a pose, one of another robot, one in a frame with no transform. Its embedder is
the tiny PE-Core architecture loaded from a checkpoint file saved here (random values,
but loaded as weights: the node treats them as trained), and each episode's frames carry
the text embedding of its caption, so a text query picks a known episode. pipeline_node
serves the same service (``test_pipeline_node.py`` checks it there, with random weights:
a text query is refused).

The demo's store (the offline pipeline over a synthetic bag, random weights, odometry
poses in ``odom`` of the recording's session, unknown here) is exercised through
``surprise-memory goto --store``: a text query is refused and says which selectors work;
its odom episodes are refused as another session's, unless ``--fixed-frames`` declares
``odom`` fixed; then a time window gives the right goal. The action path, with goal ids,
late answers, preemption and cancels, is ``test_navigation_action.py``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
from geometry_msgs.msg import PoseStamped
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import memory_node_command, peer_process
from safetensors.torch import save_file
from test_daaam_integration import strict_violations
from test_goto_places import goto  # the command as its own process (ROS-free module)

from surprise_memory.agents.navigation_tool import NavigateToEpisodeTool
from surprise_memory.agents.ros_client import EpisodicMemoryClient, RosEpisodeRetriever
from surprise_memory.agents.ros_navigation import GoToEpisodeClient
from surprise_memory.agents.tool import EpisodicMemoryTool
from surprise_memory.memory.navigation import GoalRefusedError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.nodes.goal_sender import navigate_to_pose_action
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag
from surprise_memory.perception.encoders import SYNTHETIC_EMBEDDER_MODEL, ImageTextEmbedder
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
NS = "/surprise_memory"
PIPE_NS = "/pipe"
R2 = math.sqrt(0.5)
HAS_TF2 = importlib.util.find_spec("tf2_ros") is not None
NAV2 = navigate_to_pose_action()
VIA = "action /navigate_to_pose" if NAV2 is not None else "topic /goal_pose"
NEEDS_TF2 = pytest.mark.skipif(not HAS_TF2, reason="tf2_ros is not installed (not on PyPI)")
NEEDS_NAV2 = pytest.mark.skipif(NAV2 is None, reason="nav2_msgs is not installed (not on PyPI)")
MAP_FROM_ODOM = (10.0, 5.0, 90.0)  # the test's static tf map -> odom: x, y, yaw (deg)


def yawed(x: float, y: float, yaw_deg: float, frame: str = "map") -> Pose:
    a = math.radians(yaw_deg) / 2
    return Pose(x, y, 0.0, 0.0, 0.0, math.sin(a), math.cos(a), frame)


@dataclass(frozen=True)
class Ep:
    name: str
    seconds: int
    pose: Pose | None
    caption: str
    robot: str = "me"


EPISODES = [
    Ep("door", 10, yawed(2.0, 3.0, 90.0), "a red door"),
    Ep("car", 20, yawed(1.0, 0.0, 0.0, "odom"), "a blue car"),
    Ep("dark", 30, None, "a dark corridor"),
    Ep("plant", 40, yawed(-4.0, 1.0, 180.0), "a green plant", robot="other"),
    Ep("ball", 50, yawed(0.0, 0.0, 0.0, "elsewhere"), "a yellow ball"),
    Ep("cart", 60, yawed(1.0, 0.0, 0.0, "drift"), "a shopping cart"),
]


class FakeNav2:
    """In Nav2's place: takes goals on /goal_pose (as ``navigator``, a node named
    bt_navigator) and, with nav2_msgs, the action."""

    def __init__(self, node: Node, navigator: Node) -> None:
        self._goals: list[tuple[str, PoseStamped]] = []
        self._lock = threading.Lock()
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        navigator.create_subscription(
            PoseStamped, "/goal_pose", lambda m: self._add("topic", m), qos
        )
        if NAV2 is not None:
            from rclpy.action import ActionServer, GoalResponse

            def on_goal(request: Any) -> GoalResponse:
                self._add("action", request.pose)
                return GoalResponse.ACCEPT

            def execute(handle: Any) -> Any:
                handle.succeed()
                return NAV2.Result()

            self._server = ActionServer(
                node, NAV2, "/navigate_to_pose", execute, goal_callback=on_goal
            )

    def _add(self, how: str, goal: PoseStamped) -> None:
        with self._lock:
            self._goals.append((how, goal))

    def take(self, timeout: float = 10.0) -> tuple[str, PoseStamped]:
        """The next goal received (fails after ``timeout`` s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._goals:
                    return self._goals.pop(0)
            time.sleep(0.02)
        pytest.fail(f"no goal reached Nav2's place within {timeout} s")

    def quiet(self, seconds: float = 1.0) -> list[tuple[str, PoseStamped]]:
        """The goals received within ``seconds`` (none expected)."""
        time.sleep(seconds)
        with self._lock:
            got, self._goals = self._goals, []
        return got


def assert_goal(goal: PoseStamped, want: Pose) -> None:
    p, o = goal.pose.position, goal.pose.orientation
    assert goal.header.frame_id == want.frame_id
    assert (p.x, p.y, p.z) == pytest.approx(want.position, abs=1e-6)
    q, w = (o.x, o.y, o.z, o.w), (want.qx, want.qy, want.qz, want.qw)
    assert q == pytest.approx(w, abs=1e-6) or q == pytest.approx([-c for c in w], abs=1e-6)


def map_pose(x: float, y: float, yaw_deg: float) -> Pose:
    """An odom pose seen in map through the test's static tf."""
    tx, ty, tyaw = MAP_FROM_ODOM
    a = math.radians(tyaw)
    return yawed(
        tx + math.cos(a) * x - math.sin(a) * y,
        ty + math.sin(a) * x + math.cos(a) * y,
        tyaw + yaw_deg,
    )


# --- fixtures ---------------------------------------------------------------------------


def _weights(folder: Path) -> tuple[str, ImageTextEmbedder]:
    """The tiny PE-Core saved as a checkpoint, and loaded from it (= "trained")."""
    random_init = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, "random", device="cpu")
    state = {k: v.contiguous() for k, v in random_init.model.state_dict().items()}
    folder.mkdir()
    save_file(state, str(folder / "open_clip_model.safetensors"))
    embedder = ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, str(folder), device="cpu")
    assert embedder.pretrained
    return str(folder), embedder


def _fill(store: Path, embedder: ImageTextEmbedder, t0: int) -> None:
    texts = embedder.embed_text([e.caption for e in EPISODES])
    with EpisodeStore(store) as st:
        st.note_origin(t0)
        for i, ep in enumerate(EPISODES):
            t = t0 + ep.seconds * S
            frames = [
                Frame(np.full((16, 16, 3), 40 * i, np.uint8), t + j * S // 10) for j in range(2)
            ]
            st.add(
                frames,
                np.tile(texts[i], (2, 1)),
                stamp_ns=t,
                surprise=2.0,
                pose=ep.pose,
                embedder_model=embedder.model_name,
                embedder_pretrained=True,
                episode_id=ep.name,
                robot_id=ep.robot,
            )


@pytest.fixture(scope="module")
def ros(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, FakeNav2]]:
    """rclpy, the test node in Nav2's place (spun in a thread), and tf map -> odom."""
    rclpy.init()
    node = Node("go_to_episode_test")
    navigator = Node("bt_navigator")
    nav = FakeNav2(node, navigator)
    if HAS_TF2:
        from geometry_msgs.msg import TransformStamped
        from tf2_ros import StaticTransformBroadcaster

        tf = TransformStamped()
        tf.header.frame_id, tf.child_frame_id = "map", "odom"
        x, y, yaw = MAP_FROM_ODOM
        tf.transform.translation.x, tf.transform.translation.y = x, y
        tf.transform.rotation.z = math.sin(math.radians(yaw) / 2)
        tf.transform.rotation.w = math.cos(math.radians(yaw) / 2)
        broadcaster = StaticTransformBroadcaster(node)
        broadcaster.sendTransform(tf)
    executor = MultiThreadedExecutor(num_threads=2)
    executor.add_node(node)
    executor.add_node(navigator)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node, nav
    finally:
        executor.shutdown()
        navigator.destroy_node()
        node.destroy_node()
        rclpy.shutdown()
        thread.join(timeout=5)


@pytest.fixture(scope="module")
def memory(
    ros: tuple[Node, FakeNav2], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GoToEpisodeClient, Path]]:
    """memory_node on the store written here, and a go_to_episode client."""
    work = tmp_path_factory.mktemp("go_to_episode")
    weights, embedder = _weights(work / "weights")
    store = work / "store"
    _fill(store, embedder, time.time_ns() - 3600 * S)  # an hour ago
    params = sf.node_params(str(store), embedder_weights=weights, robot_id="me")
    params["/**/memory_node"]["ros__parameters"]["goal_standoff_meters"] = 0.5
    node, _ = ros
    with go_to_episode_service(node, work, params) as client:
        yield client, store


@contextlib.contextmanager
def go_to_episode_service(
    node: Node, work: Path, params: dict[str, Any], ns: str = NS
) -> Iterator[GoToEpisodeClient]:
    """memory_node started with ``params`` in namespace ``ns``, serving go_to_episode; its client.

    Its store must hold the episode ``door`` (the first dry run waits for the service).
    """
    with peer_process(memory_node_command(params, work, ns), work, "memory_node") as proc:
        client = GoToEpisodeClient(node, f"{ns}/go_to_episode", timeout=60.0)
        client.go_to(episode_id="door", dry_run=True)  # up and serving
        yield client
        client.destroy()
        assert proc.poll() is None, "memory_node died during the tests"


# --- the service ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("standoff", "want"),
    [
        (None, yawed(2.0, 2.5, 90.0)),  # the node's goal_standoff_meters: 0.5 m short
        (0.0, yawed(2.0, 3.0, 90.0)),  # the stored pose itself
        (1.5, yawed(2.0, 1.5, 90.0)),  # facing +y: 1.5 m back along -y
    ],
)
def test_a_map_episode_becomes_a_goal(
    ros: tuple[Node, FakeNav2],
    memory: tuple[GoToEpisodeClient, Path],
    standoff: float | None,
    want: Pose,
) -> None:
    client, _ = memory
    result = client.go_to(episode_id="door", standoff_m=standoff)
    assert result.sent_via == VIA and result.episode_id == "door"
    how, goal = ros[1].take()
    assert how == VIA.split(maxsplit=1)[0]
    assert_goal(goal, want)
    assert result.goal.position == pytest.approx(want.position)
    assert result.episode_pose == EPISODES[0].pose


@NEEDS_TF2
def test_an_old_episode_takes_the_latest_transform(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path]
) -> None:
    """The node hears tf only during a request; the episode is an hour old: the latest
    map <- drift is used, and the response says so."""
    from geometry_msgs.msg import TransformStamped
    from tf2_ros import TransformBroadcaster

    node, nav = ros
    deadline = time.monotonic() + 10.0  # between requests nothing listens to tf
    while node.count_subscribers("/tf") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert node.count_subscribers("/tf") == 0
    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = "map", "drift"
    tf.transform.translation.y, tf.transform.rotation.w = -3.0, 1.0
    broadcaster = TransformBroadcaster(node)

    def broadcast() -> None:  # at 20 Hz, as a live tf tree does
        tf.header.stamp = node.get_clock().now().to_msg()
        broadcaster.sendTransform(tf)

    timer = node.create_timer(0.05, broadcast)
    try:
        result = memory[0].go_to(episode_id="cart", standoff_m=0.0)
    finally:
        node.destroy_timer(timer)
    assert "latest transform" in result.message and "episode's time" in result.message
    assert_goal(nav.take()[1], yawed(1.0, -3.0, 0.0))


@NEEDS_TF2
@pytest.mark.parametrize(("standoff", "back"), [(0.0, 0.0), (2.0, 2.0)])
def test_an_odom_episode_goes_through_tf(
    ros: tuple[Node, FakeNav2],
    memory: tuple[GoToEpisodeClient, Path],
    standoff: float,
    back: float,
) -> None:
    client, _ = memory
    client.go_to(episode_id="car", standoff_m=standoff)
    _, goal = ros[1].take()
    # odom (1, 0) facing +x; in map (10, 6) facing +y; the stand-off backs off along -y
    want = map_pose(1.0, 0.0, 0.0)
    assert_goal(goal, yawed(want.x, want.y - back, 90.0))


def test_text_query_picks_the_episode(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path]
) -> None:
    client, _ = memory
    result = client.go_to(text="a red door", standoff_m=0.0)
    assert result.episode_id == "door"
    assert_goal(ros[1].take()[1], yawed(2.0, 3.0, 90.0))
    # another robot's episode: only when asked
    result = client.go_to(text="a green plant", allow_other_robots=True, standoff_m=0.0)
    assert result.episode_id == "plant" and result.robot_id == "other"
    assert_goal(ros[1].take()[1], yawed(-4.0, 1.0, 180.0))
    # without permission the best of this robot's own episodes is chosen, never the other's
    # (which of them ranks first is the random weights' choice: it may lack a usable pose)
    try:
        assert client.go_to(text="a green plant", dry_run=True).episode_id != "plant"
    except GoalRefusedError as refused:
        assert "other" not in str(refused) and "pose" in str(refused)


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        ({"episode_id": "dark"}, "no valid pose"),
        ({"episode_id": "plant"}, "robot 'other''s memory"),
        ({"robot_id": "other", "text": "a green plant"}, "another robot's memory"),
        ({"episode_id": "ball"}, "tf2_ros is not installed" if not HAS_TF2 else "no transform"),
        ({"start": time.time_ns() + 3600 * S}, "has not happened yet"),
        ({"episode_id": "nope"}, "nope"),
        ({"episode_id": "door", "text": "a red door"}, "not both"),
        ({}, "say which episode"),
    ],
)
def test_refusals_send_nothing(
    ros: tuple[Node, FakeNav2],
    memory: tuple[GoToEpisodeClient, Path],
    request_: dict,
    needle: str,
) -> None:
    client, _ = memory
    with pytest.raises(GoalRefusedError, match=needle):
        client.go_to(**request_)
    assert ros[1].quiet(0.5) == []


def test_dry_run_sends_nothing(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path]
) -> None:
    result = memory[0].go_to(episode_id="door", standoff_m=1.0, dry_run=True)
    assert result.sent_via == "" and "dry run" in result.message
    assert result.goal.position == pytest.approx((2.0, 2.0, 0.0))
    assert ros[1].quiet(1.0) == []


# --- the agent: search, then navigate_to_episode ------------------------------------------


def test_agent_searches_then_navigates(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path]
) -> None:
    node, nav = ros
    client, _ = memory
    search_client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=30.0)
    try:
        search = EpisodicMemoryTool(RosEpisodeRetriever(search_client))
        navigate = NavigateToEpisodeTool(client, standoff_m=1.0)
        assert strict_violations(navigate.signature["parameters"]) == []
        assert navigate.signature["name"] == "navigate_to_episode"
        assert navigate.schema["function"]["parameters"] == navigate.parameters
        found = search.execute(query="a red door", max_results=1)
        (episode,) = found["episodes"]
        out = navigate.execute(episode_id=episode["id"])
        assert out["sent"] is True and out["episode_id"] == "door" and out["via"] == VIA
        assert out["goal"] == {
            "frame": "map",
            "position": [2.0, 2.0, 0.0],
            "yaw_deg": 90.0,
            "orientation": [0.0, 0.0, round(R2, 4), round(R2, 4)],
        }
        assert_goal(nav.take()[1], yawed(2.0, 2.0, 90.0))
        refused = navigate.execute(episode_id="dark")
        assert refused["sent"] is False and "no valid pose" in refused["error"]
        assert navigate.execute(episode_id=None)["sent"] is False
        assert "unknown arguments" in navigate.execute(episode_id="door", x=1)["error"]
        assert nav.quiet(0.5) == []
    finally:
        search_client.destroy()


# --- the CLI, through the service and with --store ---------------------------------------


def test_cli_through_the_memory_node(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path], tmp_path: Path
) -> None:
    proc = goto(tmp_path, "a red door", "--standoff", "0", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["episode"]["id"] == "door" and out["sent_via"] == VIA
    assert out["goal"]["position"] == [2.0, 3.0, 0.0] and out["goal"]["frame"] == "map"
    assert_goal(ros[1].take()[1], yawed(2.0, 3.0, 90.0))
    # a time window in seconds from the store's origin: "door" is at 10 s
    proc = goto(tmp_path, "--start", "5", "--end", "15")
    assert proc.returncode == 0, proc.stderr
    assert "episode door" in proc.stdout and "(2.00, 2.50, 0.00) yaw 90.0 deg in map" in proc.stdout
    assert_goal(ros[1].take()[1], yawed(2.0, 2.5, 90.0))
    refused = goto(tmp_path, "--id", "dark")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "no valid pose" in line
    assert goto(tmp_path, "--id", "door", "--goal-topic", "/x").returncode == 1  # node's setting
    assert ros[1].quiet(0.5) == []


def test_topic_mode_waits_for_the_navigator_not_any_subscriber(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path], tmp_path: Path
) -> None:
    """A recorder or `ros2 topic echo` on the goal topic is not Nav2: no goal is "sent" to it."""
    node, _ = ros
    got: list[PoseStamped] = []
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    recorder = node.create_subscription(PoseStamped, "/lonely_goal", got.append, qos)
    try:
        store = ["--store", str(memory[1]), "--allow-other-robots", "--goal-transport", "topic"]
        store += ["--goal-topic", "/lonely_goal", "--goal-timeout-seconds", "5"]  # discovery
        refused = goto(tmp_path, "--id", "door", *store)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        (line,) = refused.stderr.strip().splitlines()
        assert "'bt_navigator' does not subscribe /lonely_goal" in line
        assert "/go_to_episode_test" in line and "Goal not sent" in line
        time.sleep(0.5)
        assert got == []
        # named as the navigator, the same subscriber takes the goal
        sent = goto(tmp_path, "--id", "door", *store, "--navigator-node", "go_to_episode_test")
        assert sent.returncode == 0, sent.stderr
        assert "via topic /lonely_goal: sent" in sent.stdout
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(got) == 1 and got[0].pose.position.x == pytest.approx(2.0)
    finally:
        node.destroy_subscription(recorder)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's store as ``make demo`` makes it without trained weights, smaller.

    The same calls as :mod:`surprise_memory.offline.demo`: a synthetic bag, the offline
    pipeline with the tiny presets and random weights, poses from ``/odom``.
    """
    from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process

    tmp = tmp_path_factory.mktemp("demo")
    scene = SyntheticScene(seed=2, duration_s=8.0, width=64, height=48)
    rec = write_synthetic_bag(tmp / "rec", scene)
    values = {**sf.ENCODER, **sf.EMBEDDER, "window": 16, "warmup": 8, "nms_seconds": 0.5}
    values |= {"episode_frames": 2}
    pipeline = OfflinePipeline(PipelineSettings.from_mapping(values))
    process(rec.path, tmp / "store", pipeline=pipeline, pose_topic="/odom")
    return tmp / "store"


def test_cli_on_the_demo_store(
    ros: tuple[Node, FakeNav2], demo_store: Path, tmp_path: Path
) -> None:
    nav = ros[1]
    with EpisodeStore(demo_store, read_only=True) as st:
        hits = st.search(max_results=1)  # newest first
        assert hits, "the synthetic scene's events should give episodes"
        newest = hits[0].episode
    assert newest.pose_valid and newest.pose.frame_id == "odom"
    assert newest.session_id == ""  # a recording's odom: its session is not this machine's
    store = ["--store", str(demo_store), "--goal-transport", "topic"]

    # odom of another session: refused, in map (through tf) as in odom, dry run or not
    for frame in ("map", "odom"):
        proc = goto(tmp_path, "--id", newest.id, "--navigation-frame", frame, *store)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert "'odom', a frame that starts anew each session" in line and f"'{frame}'" in line
        # what is missing: a fixed frame, or (a recording's odom) odom declared fixed
        assert "it needs a pose in 'odom'" not in line
        fixed = "--fixed-frames odom" if frame == "odom" else "--navigation-frame odom --fix"
        assert f"'odom' declared fixed ({fixed}" in line, line
    proc = goto(tmp_path, "--id", newest.id, "--navigation-frame", "odom", "--dry-run", *store)
    assert proc.returncode == 1 and "starts anew each session" in proc.stderr
    assert nav.quiet(0.5) == []
    # ...unless odom is declared fixed (a robot whose odom is its map)
    store += ["--fixed-frames", "map,odom"]

    refused = goto(tmp_path, "a person", *store)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "random, untrained weights" in line and "--id, --start/--end or --near" in line

    # Nav2 planning in odom: the stored pose as it is
    proc = goto(
        tmp_path, "--start", "0", "--end", "100", "--navigation-frame", "odom", "--json", *store
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["episode"]["id"] == newest.id and out["sent_via"] == "topic /goal_pose"
    assert out["state"] == "sent" and out["goal_id"]
    how, goal = nav.take()
    assert how == "topic"
    assert_goal(goal, newest.pose)

    dry = goto(tmp_path, "--id", newest.id, "--navigation-frame", "odom", "--dry-run", *store)
    assert dry.returncode == 0 and "dry run: not sent" in dry.stdout
    assert nav.quiet(1.0) == []

    # Nav2 planning in map (the default): through tf, or a refusal where tf2_ros is missing
    in_map = goto(tmp_path, "--id", newest.id, "--goal-timeout-seconds", "10", "--json", *store)
    if HAS_TF2:
        assert in_map.returncode == 0, in_map.stderr
        p = newest.pose
        want = map_pose(p.x, p.y, math.degrees(2 * math.atan2(p.qz, p.qw)))
        assert_goal(
            nav.take()[1], Pose(want.x, want.y, p.z, want.qx, want.qy, want.qz, want.qw, "map")
        )
    else:
        assert in_map.returncode == 1
        assert "tf2_ros is not installed" in in_map.stderr and "'odom'" in in_map.stderr
        assert nav.quiet(0.5) == []


@NEEDS_NAV2
def test_the_action_is_used_where_nav2_msgs_is_installed(
    ros: tuple[Node, FakeNav2], memory: tuple[GoToEpisodeClient, Path]
) -> None:
    result = memory[0].go_to(episode_id="door", standoff_m=0.0)
    assert result.sent_via == "action /navigate_to_pose"
    how, goal = ros[1].take()
    assert how == "action"
    assert_goal(goal, yawed(2.0, 3.0, 90.0))
