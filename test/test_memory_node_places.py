"""Place keyframes in the live memory node, over DDS (issue 47).

The real ``memory_node`` executable (and ``pipeline_node``, which hosts the same part),
camera frames and odometry published by the test (the odometry is the node's pose source:
no tf is published), the store read back from disk:

* without a pose nothing is kept, and ``/diagnostics`` says why (a WARN naming "no pose"),
  nor with odometry of another boot (stale: its stamps far from the camera's);
* a robot that drives away and comes back to a place replaces that place's view
  (``place_history`` 1: the store holds the newer view only);
* a localiser that jumps about (a relocalisation every few frames) adds no keyframe
  until its pose has been continuous for ``place_settle_seconds``: one keyframe, not a burst;
* the camera path never waits for a keyframe write: with every frame a keyframe and
  large frames, the writer falls behind, keyframes are dropped (counted), and every frame
  is still taken in while the writer is busy;
* on a full disk the keyframe writes fail, counted and reported, while every frame is
  still taken in; once space is back new places are written again, each one whole.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import CompressedImage, Image
from store_backends import new_database
from test_memory_node_disk import _fill, _small_disk

from surprise_memory.memory.places import PLACE
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.places_part import PENDING_PLACES

NS = "/surprise_memory_places"
CAMERA = "/places_camera/image"
ODOM = "/places_odom"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
FPS = 20
T_CAM = 1000 * 10**9  # the camera's (and the odometry's) clock
HOME = "odom@2m:0,0:0/8"  # the place at (1, 1) looking along x


def _stamp(i: int) -> int:
    return T_CAM + i * 10**9 // FPS


def _odometry(i: int, x: float, y: float, yaw: float = 0.0) -> Odometry:
    msg = Odometry()
    msg.header.stamp = ns_to_time(_stamp(i))
    msg.header.frame_id = "odom"
    msg.child_frame_id = "base_link"
    msg.pose.pose.position.x, msg.pose.pose.position.y = x, y
    msg.pose.pose.orientation.z = math.sin(yaw / 2.0)
    msg.pose.pose.orientation.w = math.cos(yaw / 2.0)
    return msg


class _Robot:
    """The test's camera and odometry, and what the node says on /diagnostics."""

    def __init__(self, node: Node, *, compressed: bool = False) -> None:
        self.node = node
        self.compressed = compressed
        msg_type = CompressedImage if compressed else Image
        self.cam = node.create_publisher(msg_type, CAMERA, RELIABLE)
        self.odom = node.create_publisher(Odometry, ODOM, RELIABLE)
        self.diag: dict[str, str] = {}
        self.message = ""
        self.history: list[dict[str, str]] = []
        self.frames = 0
        self.size = (48, 64)
        self._pictures: dict[int, tuple[np.ndarray, bytes]] = {}
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 50)

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.hardware_id.startswith(NS):
                self.diag = {kv.key: kv.value for kv in status.values}
                self.message = status.message
                self.history.append(self.diag)

    def image(self, i: int) -> Image | CompressedImage:
        """Frame ``i``: one of 8 pictures (made once: the camera publishes at once)."""
        if i % 8 not in self._pictures:
            small = np.random.default_rng(i % 8).integers(0, 256, (9, 16, 3), np.uint8)
            rgb = cv2.resize(small, self.size[::-1], interpolation=cv2.INTER_LINEAR)
            ok, buf = cv2.imencode(".jpg", rgb[:, :, ::-1])
            assert ok
            self._pictures[i % 8] = (rgb, buf.tobytes())
        rgb, jpeg = self._pictures[i % 8]
        if not self.compressed:
            return image_msg_from_rgb(rgb, _stamp(i), "camera")
        msg = CompressedImage(format="rgb8; jpeg compressed bgr8", data=jpeg)
        msg.header.stamp = ns_to_time(_stamp(i))
        msg.header.frame_id = "camera"
        return msg

    def drive(
        self, poses: list[tuple[float, float]] | None, n: int = 0, *, burst: bool = False
    ) -> None:
        """One camera frame per pose (odometry first), or ``n`` frames without odometry.

        ``burst``: all at once (the publishers keep them all), else a few ms apart.
        """
        for k in range(n if poses is None else len(poses)):
            i = self.frames
            if poses is not None:
                self.odom.publish(_odometry(i, *poses[k]))
            self.cam.publish(self.image(i))
            self.frames += 1
            if not burst:
                spin_until(self.node, lambda: False, 0.005)

    def count(self, key: str) -> int:
        return int(self.diag.get(key, "0"))

    def until(self, done: Callable[[], bool], timeout: float = 60.0) -> None:
        assert spin_until(self.node, done, timeout), (self.message, self.diag)


def _params(store: Path | str, node: str = "memory_node", **extra: Any) -> dict[str, Any]:
    # pipeline_node: the same MemoryPart, its scorer's pose source (tiny encoder on the CPU)
    model = {**sf.ENCODER, **sf.SCORER} if node == "pipeline_node" else {}
    params = {
        **model,
        **sf.EPISODE,
        **sf.EMBEDDER,
        "store_path": str(store),
        "odom_topic": ODOM,
        "diagnostics_period_seconds": 1.0,
        "place_history": 1,
        "place_revisit_seconds": 2.0,
        "qos_overrides": {CAMERA: {"subscription": {"reliability": "reliable", "depth": 1000}}},
        **extra,
    }
    return {f"/**/{node}": {"ros__parameters": params}}


def _run(tmp_path: Path, params: dict[str, Any], body: Callable[[_Robot], None], **kw: Any) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    (section,) = params
    name = section.rsplit("/", 1)[-1]
    args = [node_executable(name), "--ros-args", "--params-file", str(path)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    rclpy.init()
    node = Node("places_test")
    robot = _Robot(node, **kw)
    try:
        with peer_process(args, tmp_path, name) as proc:
            wait_for_subscribers(node, robot.cam)
            body(robot)
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()


def _places(store: Path | str) -> list[EpisodeRecord]:
    """The place keyframes of the store at ``store``: a folder, or a PostgreSQL URI."""
    with open_store(store, read_only=True) as s:
        return [r for r in (s.get(i) for i in s.episode_ids()) if r.kind == PLACE]


def _line(a: tuple[float, float], b: tuple[float, float], n: int) -> list[tuple[float, float]]:
    return [(a[0] + (b[0] - a[0]) * k / n, a[1] + (b[1] - a[1]) * k / n) for k in range(1, n + 1)]


@pytest.mark.parametrize(
    ("node", "backend"),
    [("memory_node", "sqlite"), ("pipeline_node", "sqlite"), ("memory_node", "postgres")],
)
def test_no_pose_then_revisit_then_pose_jumps(
    tmp_path: Path, node: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """On PostgreSQL the node writes to its local copy first and delivers in the
    background (a fleet store): the server must end up with the same views, the replaced
    one deleted there too."""
    store: Path | str = tmp_path / "store"
    extra: dict[str, Any] = {}
    if backend == "postgres":
        store = new_database(request.getfixturevalue("pg_server"))
        extra["fleet_local_store"] = str(tmp_path / "local")
    marks: dict[str, int] = {}

    def body(robot: _Robot) -> None:
        # no odometry, no tf: nothing kept, and /diagnostics says why
        robot.drive(None, n=40)
        robot.until(lambda: "no pose" in robot.diag.get("place_keyframes", ""))
        assert "place keyframes none kept: no pose" in robot.message
        assert robot.count("place_keyframes_kept") == 0
        assert robot.count("place_skipped.no_pose") >= 1
        # odometry of another boot (a ROS message does not say its boot): its stamps an
        # hour before the camera's, so stale, and nothing is kept
        wait_for_subscribers(robot.node, robot.odom)
        for _ in range(40):
            old = _odometry(robot.frames, 1.0, 1.0)
            old.header.stamp = ns_to_time(_stamp(robot.frames) - 3600 * 10**9)
            robot.odom.publish(old)
            robot.drive(None, n=1)
        robot.until(lambda: "stale pose" in robot.diag.get("place_keyframes", ""))
        assert robot.count("place_keyframes_kept") == 0
        # the first visit of HOME, written before the robot comes back
        robot.drive([(1.0, 1.0)] * 20)
        robot.until(lambda: robot.count("place_keyframes_written") >= 1)
        marks["home_left"] = _stamp(robot.frames)
        # away along x at 4 m/s (no jump) and back, then stay: HOME is seen again 3 s later
        robot.drive(_line((1.0, 1.0), (7.0, 1.0), 30))
        robot.drive(_line((7.0, 1.0), (1.0, 1.0), 30))
        robot.drive([(1.0, 1.0)] * 20)
        # a localiser that hesitates: a jump every 5 frames for 4 s, then it settles
        hesitating = [(41.0, 1.0), (1.0, 41.0), (41.0, 41.0), (81.0, 1.0)]
        marks["jumps"] = _stamp(robot.frames)
        for k in range(16):
            robot.drive([hesitating[k % 4]] * 5)
        robot.drive([(81.0, 81.0)] * 80)  # 4 s still, longer than place_settle_seconds
        robot.until(
            lambda: (
                robot.count("place_skipped.pose_jump") >= 16
                and robot.count("place_keyframes_written") == robot.count("place_keyframes_kept")
                and robot.count("frames_in") == robot.frames
            )
        )
        assert robot.count("place_keyframes_dropped") == 0
        assert robot.count("rejected_place_store") == 0
        if backend == "postgres":  # delivered: the server holds what the local copy holds
            local = {r.id for r in _places(extra["fleet_local_store"])}
            robot.until(lambda: {r.id for r in _places(store)} == local)

    _run(tmp_path, _params(store, node, **extra), body)
    places = _places(store)
    home = [r for r in places if r.place_key == HOME]
    assert len(home) == 1, [r.place_key for r in places]  # place_history 1: one view kept
    assert home[0].stamp_ns > marks["home_left"]  # ... the revisit's, not the first one
    assert home[0].pose is not None and home[0].pose.frame_id == "odom"
    assert len(home[0].frame_paths) == 1
    away = [r for r in places if r.stamp_ns >= marks["jumps"]]
    assert len(away) == 1, [(r.place_key, r.stamp_ns) for r in away]  # not a burst
    assert away[0].pose is not None and away[0].pose.position[:2] == (81.0, 81.0)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_camera_path_never_waits_for_a_keyframe_write(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Every frame a keyframe (no revisit or interval bound), 1920x1080 JPEG frames at once.

    The writer decodes, embeds and writes each one as a file with its fsync (tens of ms);
    the camera callback only queues it. Every frame is taken in, and the keyframes the
    writer's queue cannot hold are dropped and counted: a camera path that waited for the
    writer would drop none (its queue would only fill as fast as the writer empties it).
    On PostgreSQL the writer commits to the fleet store's local copy and the server gets
    the keyframes in the background, as in the test above.
    """
    store: Path | str = tmp_path / "store"
    extra: dict[str, Any] = {}
    if backend == "postgres":
        store = new_database(request.getfixturevalue("pg_server"))
        extra["fleet_local_store"] = str(tmp_path / "local")
    frames = 120

    def body(robot: _Robot) -> None:
        robot.size = (1080, 1920)
        wait_for_subscribers(robot.node, robot.odom)
        path = _line((0.0, 0.0), (11.9, 0.0), frames)  # 2.4 m/s
        for i, (x, y) in enumerate(path):  # the odometry first: it leads the camera
            robot.odom.publish(_odometry(i, x, y))
            # at 100 Hz, as a robot's: the node keeps the last 50 (best effort), so a burst
            # of 120 outran a loaded node's executor (the first 60 frames had no pose)
            time.sleep(0.01)
        robot.drive(None, n=frames, burst=True)
        robot.until(lambda: robot.count("frames_in") == frames, 120.0)
        # the first report that counted every frame: the writer was still behind then
        taken = next(d for d in robot.history if int(d.get("frames_in", "0")) == frames)
        kept = int(taken["place_keyframes_kept"])
        assert kept > frames / 2, (taken, robot.message)
        written = int(taken["place_keyframes_written"])
        assert written < kept - PENDING_PLACES - 1, taken  # every frame in, most not written
        assert int(taken["place_keyframes_dropped"]) > 0, taken  # the queue never blocked
        robot.until(
            lambda: (
                robot.count("place_keyframes_written") + robot.count("place_keyframes_dropped")
                == kept
            ),
            120.0,
        )
        if backend == "postgres":  # every keyframe written locally reaches the server
            local = {r.id for r in _places(extra["fleet_local_store"])}
            robot.until(lambda: {r.id for r in _places(store)} == local, 120.0)

    params = _params(
        store,
        image_transport="compressed",
        place_revisit_seconds=0.0,
        place_min_interval_seconds=0.0,
        place_history=1000,
        **extra,
    )
    _run(tmp_path, params, body, compressed=True)
    assert 0 < len(_places(store)) < frames


def test_a_full_disk_fails_keyframe_writes_and_the_camera_path_goes_on(tmp_path: Path) -> None:
    """The store on a 16 MiB tmpfs (root, as CI) filled up while the robot drives on."""
    failed = "place keyframe write(s) failed"
    counts: dict[str, int] = {}

    def body(robot: _Robot) -> None:
        wait_for_subscribers(robot.node, robot.odom)

        def settled() -> bool:  # every keyframe kept so far written or rejected, every frame in
            done = robot.count("place_keyframes_written") + robot.count("rejected_place_store")
            return done == robot.count("place_keyframes_kept") and (
                robot.count("frames_in") == robot.frames
            )

        robot.drive(_line((0.0, 0.0), (6.0, 0.0), 30))  # 4 m/s through new places
        robot.until(lambda: settled() and robot.count("place_keyframes_written") >= 2)
        counts["written"] = robot.count("place_keyframes_written")
        filler = _fill(disk)
        robot.drive(_line((6.0, 0.0), (12.0, 0.0), 30))
        robot.until(lambda: settled() and failed in robot.message)
        assert robot.count("rejected_place_store") >= 2, robot.diag
        assert robot.count("place_keyframes_written") == counts["written"]
        counts["rejected"] = robot.count("rejected_place_store")
        filler.unlink()  # space is back
        robot.drive(_line((12.0, 0.0), (18.0, 0.0), 30))
        robot.until(
            lambda: settled() and robot.count("place_keyframes_written") > counts["written"]
        )
        assert robot.count("rejected_place_store") == counts["rejected"]
        assert robot.count("place_keyframes_dropped") == 0
        counts["written"] = robot.count("place_keyframes_written")

    with _small_disk(tmp_path / "disk") as disk:
        store = disk / "store"
        _run(tmp_path, _params(store), body)  # and the node is alive at the end
        places = _places(store)
        assert len(places) == counts["written"]  # none of the failed ones half-there
        for record in places:
            assert len(record.load_images()) == 1
        assert max(r.pose.position[0] for r in places if r.pose is not None) > 12.0
