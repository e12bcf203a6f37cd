"""A robot with three cameras over real DDS (issue 42): one encoder, surprise per camera.

``pipeline_node`` (and, alike, the split's three nodes) runs with ``cameras:
front,left,rear`` and the tiny presets. Three synthetic cameras publish at once, each
showing a scene change of its own at its own time, while odometry says where the robot is
(tf2_ros is not needed: each camera's pose comes from the odometry and its configured
mounting yaw, the fallback where tf has no mounting). Checked:

* each camera's change is an event of that camera, and its episode is stored with that
  camera, its optical frame and its pose, looking where the camera looks;
* one encoder served the three cameras (windows of several cameras in one forward);
* the rear camera then stops publishing: ``/diagnostics`` reports it by name, while the
  front and left cameras' windows go on being encoded;
* the store answers a camera-filtered query, and ``goto --dry-run`` faces the camera's
  direction (within 5 degrees).
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import (
    node_executable,
    peer_process,
    serving_memory_node,
    spin_until,
    wait_for_subscribers,
)
from sensor_msgs.msg import Image
from test_store import _add, _as_version_5

from surprise_memory.agents.ros_client import EpisodicMemoryClient
from surprise_memory.memory.store import DB_NAME, EpisodeRecord, EpisodeStore, open_store
from surprise_memory.memory.store.schema import SCHEMA_VERSION
from surprise_memory.msg import Episode, FrameEmbedding, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time, time_to_ns

NS = "/surprise_memory"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
MOUNTS = {"front": 0.0, "left": 90.0, "rear": 180.0}  # the cameras' yaw on the robot
CHANGE_AT = {"front": 45, "left": 75, "rear": 105}  # each camera's own scene change
REAR_STOPS = 130  # the rear camera goes silent here; the others go on to sf.N_FRAMES
ROBOT_YAW = math.radians(30.0)
SHAPES = {
    "one_process": ("pipeline_node",),
    "split": ("encoder_node", "scorer_node", "memory_node"),
}


def _params(store: Path) -> dict[str, Any]:
    cameras = ",".join(f"{name}:yaw={yaw:g}" for name, yaw in MOUNTS.items())
    qos = {
        f"{NS}/{name}/image": {
            "subscription": {"reliability": "reliable", "history": "keep_last", "depth": 1000}
        }
        for name in MOUNTS
    }
    extra = {
        "cameras": cameras,
        "encoder_queue": 256,  # nothing dropped on a loaded machine: the results are exact
        "diagnostics_period_seconds": 1.0,
        "input_silent_seconds": 1.0,
    }
    params = sf.node_params(str(store), **extra)
    for section in params.values():
        if (
            "store_path" in section["ros__parameters"]
            or "clip_frames" in section["ros__parameters"]
        ):
            section["ros__parameters"]["qos_overrides"] = qos
    # a JSON round trip gives every node its own copies: YAML aliases break rcl's parser
    return json.loads(json.dumps(params))


def _command(name: str, params: Path) -> list[str]:
    return [node_executable(name), "--ros-args", "--params-file", str(params), "-r", f"__ns:={NS}"]


@dataclass
class Run:
    """What the nodes published and stored."""

    embeddings: list[FrameEmbedding] = field(default_factory=list)
    events: list[SurpriseEvent] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    messages: dict[str, list[str]] = field(default_factory=dict)  # node -> its messages
    values: dict[str, dict[str, str]] = field(default_factory=dict)  # node -> key values
    silent_values: dict[str, str] = field(default_factory=dict)  # encoder's, rear silent
    records: list[EpisodeRecord] = field(default_factory=list)
    store: Path = Path()

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            name = status.name.split(": ")[-1]
            self.messages.setdefault(name, []).append(status.message)
            self.values[name] = {kv.key: kv.value for kv in status.values}


def _run(tmp_path: Path, shape: str) -> Run:
    store = tmp_path / "store"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(store)))
    rclpy.init()
    node = Node(f"cameras_{shape}_test")
    run = Run(store=store)
    for msg_type, topic, sink in (
        (FrameEmbedding, "embedding", run.embeddings),
        (SurpriseEvent, "events", run.events),
        (Episode, "episodes", run.episodes),
    ):
        node.create_subscription(msg_type, f"{NS}/{topic}", sink.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", run.on_diag, 50)
    cameras = {n: node.create_publisher(Image, f"{NS}/{n}/image", RELIABLE) for n in MOUNTS}
    odom = node.create_publisher(Odometry, "/odom", RELIABLE)
    scenes = {n: sf.camera_scene(seed, CHANGE_AT[n]) for seed, n in enumerate(MOUNTS)}
    encoder = SHAPES[shape][0]
    try:
        with ExitStack() as stack:
            procs = [
                stack.enter_context(peer_process(_command(name, params), tmp_path, name))
                for name in SHAPES[shape]
            ]
            for publisher in cameras.values():  # encoder and memory: one or two subscribers
                wait_for_subscribers(node, publisher, len(SHAPES[shape]) - 1 or 1, timeout=90)
            wait_for_subscribers(node, odom, 1, timeout=60)
            assert spin_until(node, lambda: set(SHAPES[shape]) <= set(run.values), 30.0)
            for i, t in enumerate(sf.stamps()):
                o = Odometry()
                o.header.stamp, o.header.frame_id = ns_to_time(t), "odom"
                o.pose.pose.position.x = 0.05 * i
                o.pose.pose.orientation.z = math.sin(ROBOT_YAW / 2)
                o.pose.pose.orientation.w = math.cos(ROBOT_YAW / 2)
                odom.publish(o)
                for name, publisher in cameras.items():
                    if name != "rear" or i < REAR_STOPS:
                        publisher.publish(image_msg_from_rgb(scenes[name][i], t, f"{name}_optical"))
                spin_until(node, lambda: False, 1.0 / sf.FPS)
            # every camera's change decided and stored
            assert spin_until(
                node,
                lambda: {e.camera for e in run.episodes} >= set(MOUNTS),
                30.0,
            ), [(e.camera, time_to_ns(e.header.stamp)) for e in run.events]
            # the cameras that went on to the end: their windows up to the last frame (a
            # loaded encoder is a window or two behind the stream when the events are in)
            last = sf.stamps()[-1]
            assert spin_until(
                node,
                lambda: all(
                    any(
                        m.camera == n and time_to_ns(m.header.stamp) == last for m in run.embeddings
                    )
                    for n in MOUNTS
                    if n != "rear"
                ),
                30.0,
            ), [(m.camera, time_to_ns(m.header.stamp)) for m in run.embeddings[-6:]]
            # the rear camera has been silent for over a second: reported by name
            assert spin_until(
                node,
                lambda: any("no camera rear" in m for m in run.messages.get(encoder, [])),
                10.0,
            ), run.messages.get(encoder)
            run.silent_values = dict(run.values[encoder])
            assert all(p.poll() is None for p in procs), "a node died"
    finally:
        node.destroy_node()
        rclpy.shutdown()
    with open_store(store, read_only=True) as db:
        records = (db.get(i) for i in db.episode_ids())  # the episodes, not place keyframes
        run.records = sorted((r for r in records if r.kind == "episode"), key=lambda r: r.stamp_ns)
    return run


@pytest.fixture(scope="module", params=list(SHAPES))
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory.mktemp(f"cameras_{request.param}"), request.param)


def _near(stamp_ns: int, camera: str) -> bool:
    return abs(stamp_ns - sf.stamps()[CHANGE_AT[camera]]) <= 4 * 10**9 // sf.FPS


def test_each_camera_has_its_own_windows_and_events(run: Run) -> None:
    by_camera: dict[str, list[int]] = {}
    for msg in run.embeddings:
        by_camera.setdefault(msg.camera, []).append(time_to_ns(msg.header.stamp))
        assert msg.header.frame_id == f"{msg.camera}_optical"
    assert set(by_camera) == set(MOUNTS)
    for name, stamps in by_camera.items():
        assert stamps == sorted(set(stamps)), name  # each camera's windows in stamp order
    # after the rear camera stopped, the others' windows went on to the end of the stream
    last = sf.stamps()[-1]
    assert by_camera["front"][-1] == by_camera["left"][-1] == last
    assert by_camera["rear"][-1] == sf.stamps()[REAR_STOPS - 1]
    for name in MOUNTS:
        assert any(e.camera == name and _near(time_to_ns(e.header.stamp), name) for e in run.events)


def test_one_encoder_served_the_three_cameras(run: Run) -> None:
    values = run.silent_values
    assert int(values["batch_cameras_max"]) >= 2  # windows of several cameras in one forward
    assert int(values.get("windows_dropped", 0)) == 0
    for name in MOUNTS:
        assert int(values[f"{name}.windows_encoded"]) > 0
        assert float(values[f"{name}.camera_loss"]) == 0.0 or name == "rear"


def test_each_episode_keeps_its_camera_its_frame_and_where_it_looked(run: Run) -> None:
    for name, mount in MOUNTS.items():
        mine = [r for r in run.records if r.camera.name == name and _near(r.stamp_ns, name)]
        assert mine, (name, [(r.camera.name, r.stamp_ns) for r in run.records])
        for rec in mine:
            assert rec.camera.frame_id == f"{name}_optical"
            assert rec.pose_valid and rec.pose.frame_id == "odom"
            pose = rec.camera.pose
            assert pose is not None and pose.frame_id == "odom"
            assert pose.position == pytest.approx(rec.pose.position)  # mounted at the origin
            yaw = rec.camera.yaw
            assert yaw is not None
            want = ROBOT_YAW + math.radians(mount)
            assert abs(math.remainder(yaw - want, 2 * math.pi)) < 1e-6, (name, yaw, want)
    published = {(e.camera, e.camera_frame_id) for e in run.episodes}
    assert published >= {(n, f"{n}_optical") for n in MOUNTS}


def test_a_silent_camera_is_reported_and_the_others_go_on(run: Run) -> None:
    assert run.silent_values["level"] == "WARN"
    assert int(run.silent_values["front.windows_encoded"]) > int(
        run.silent_values["rear.windows_encoded"]
    )


def _cli(*args: str) -> Any:
    out = subprocess.run(
        [sys.executable, "-m", "surprise_memory", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_camera_filtered_query_and_goto_face_that_camera(run: Run) -> None:
    """The synthetic three-camera scene's goal: each scripted event is found by a query
    for its camera, and ``goto --dry-run`` faces that camera's direction (within 5 deg)."""
    for name, mount in MOUNTS.items():
        hits = _cli("query", str(run.store), "--camera", name, "-k", "50", "--json")["hits"]
        assert hits and {h["camera"] for h in hits} == {name}
        target = next(h for h in hits if _near(h["stamp_ns"], name))
        # the best hit of a query for that camera around its change: its episode
        window = [f"{target['stamp_ns'] + d}ns" for d in (-(10**8), 10**8)]
        out = _cli(
            "goto", "--store", str(run.store), "--camera", name, "--dry-run", "--json",
            "--start", window[0], "--end", window[1],
            "--fixed-frames", "odom", "--navigation-frame", "odom",
        )  # fmt: skip
        assert out["episode"]["id"] == target["id"]
        want = math.degrees(ROBOT_YAW) + mount
        assert abs(math.remainder(out["goal"]["yaw_deg"] - want, 360.0)) < 5.0, (name, out)
        assert "facing where camera" in out["message"]
        # the option that keeps the robot's heading
        kept = _cli(
            "goto", "--store", str(run.store), "--id", target["id"], "--dry-run", "--json",
            "--fixed-frames", "odom", "--navigation-frame", "odom", "--goal-facing", "robot",
        )  # fmt: skip
        assert abs(math.remainder(kept["goal"]["yaw_deg"] - 30.0, 360.0)) < 1e-3


def test_an_old_store_opens_with_one_unnamed_camera(tmp_path: Path) -> None:
    """A store from before cameras (schema 5) is served by a memory node of three cameras:
    its episodes come back over DDS seen by the one unnamed camera, direction unknown."""
    store = tmp_path / "old"
    rng = np.random.default_rng(0)
    with EpisodeStore(store) as db:
        old = [_add(db, rng, i) for i in range(2)]
    _as_version_5(store / DB_NAME)
    params = sf.node_params(str(store), cameras=",".join(MOUNTS))
    with serving_memory_node(params, tmp_path, NS, "old_store_test") as node:
        client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=30.0)
        try:
            got = client.retrieve(k=10)
            assert sorted(e.id for e in got) == sorted(r.id for r in old)
            assert {(e.camera.name, e.camera.frame_id, e.camera.pose) for e in got} == {
                ("", "", None)
            }
            assert client.retrieve(k=10, camera="front") == []
        finally:
            client.destroy()
    conn = sqlite3.connect(store / DB_NAME)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
