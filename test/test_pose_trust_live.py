"""Trusted poses over DDS: from a localiser's covariance to a refused goal.

* scorer_node with ``pose_covariance_topic`` (a ``PoseWithCovarianceStamped`` publisher, as
  AMCL's ``/amcl_pose``) and no odometry: each event's pose comes from it, with its
  uncertainty (the semi-major axis of the covariance's 1-sigma ellipse);
* memory_node with ``map_id`` stores that uncertainty and the map with each episode,
  publishes and retrieves both (``Episode.pose_sigma_m``, ``map_id``), and ``goto
  --dry-run`` (through the node, and with ``--store`` on another map) refuses the
  too-uncertain episode with one line, and accepts it with ``--trust-pose``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import synthetic_frames as sf
import yaml
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from test_go_to_episode import goto
from test_scorer_node import FPS, PARAMS, T0, _embedding, _stream

from surprise_memory.agents.ros_client import EpisodicMemoryClient
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import Episode, FrameEmbedding, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED

NS = "/surprise_memory"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
S = 1_000_000_000


def _covariance(sx: float, sy: float, angle: float) -> list[float]:
    c, s = math.cos(angle), math.sin(angle)
    xy = np.array([[c, -s], [s, c]]) @ np.diag([sx**2, sy**2]) @ np.array([[c, s], [-s, c]])
    cov = np.zeros((6, 6))
    cov[:2, :2], cov[5, 5] = xy, 0.05
    return [float(v) for v in cov.ravel()]


def _located(stamp: int, i: int) -> PoseWithCovarianceStamped:
    msg = PoseWithCovarianceStamped()
    msg.header.stamp = ns_to_time(stamp)
    msg.header.frame_id = "map"
    msg.pose.pose.position.x = 0.1 * i
    msg.pose.pose.orientation.w = 1.0
    msg.pose.covariance = _covariance(0.4, 0.1, 0.6)
    return msg


def test_the_scorer_gives_an_event_its_localisers_uncertainty(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    values = {**PARAMS, "odom_topic": "", "pose_covariance_topic": "/amcl_pose"}
    params.write_text(yaml.safe_dump({"/**/scorer_node": {"ros__parameters": values}}))
    n = 160
    z = _stream(n, 100)
    stamps = [T0 + i * S // FPS for i in range(n)]
    rclpy.init()
    node = Node("pose_trust_scorer_test")
    events: list[SurpriseEvent] = []
    node.create_subscription(SurpriseEvent, f"{NS}/events", events.append, RELIABLE)
    emb_pub = node.create_publisher(FrameEmbedding, f"{NS}/embedding", RELIABLE)
    located = node.create_publisher(PoseWithCovarianceStamped, "/amcl_pose", RELIABLE)
    args = [node_executable("scorer_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}"]
    try:
        with peer_process(args, tmp_path, "scorer_node") as proc:
            wait_for_subscribers(node, emb_pub)
            wait_for_subscribers(node, located)
            for i in range(n):
                located.publish(_located(stamps[i], i))
                emb_pub.publish(_embedding(stamps[i], z[i]))
                spin_until(node, lambda: False, 0.005)
            assert spin_until(node, lambda: len(events) >= 1, 30.0), "no event"
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    event = events[0]
    # tf2_ros may be installed, but nothing publishes tf here: the located pose is used
    assert event.pose_valid and event.pose_source == "pose_covariance", event.pose_source
    assert event.header.frame_id == "map"
    assert event.pose_sigma_valid and event.pose_sigma_m == np.float32(0.4)


def _rgb(i: int) -> np.ndarray:
    rgb = np.zeros((48, 64, 3), np.uint8)
    rgb[:, :, 0] = (i * 7) % 256
    rgb[: i % 48, :, 1] = 200
    return rgb


def _event(stamp: int, sigma: float | None) -> SurpriseEvent:
    msg = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0, pose_valid=True, pose_source="tf")
    msg.header.stamp = ns_to_time(stamp)
    msg.header.frame_id = "map"
    msg.decided = msg.header.stamp
    msg.pose.position.x, msg.pose.orientation.w = 2.0, 1.0
    msg.pose_sigma_valid = sigma is not None
    msg.pose_sigma_m = sigma or 0.0
    return msg


def _memory_params(store: Path, camera: str) -> dict[str, Any]:
    values = {
        **sf.EPISODE,
        "episode_timeout_seconds": 4.0,
        **sf.EMBEDDER,
        "store_path": str(store),
        "robot_id": "me",
        "map_id": "lab",
        "max_goal_uncertainty_m": 0.3,
        "qos_overrides": {camera: {"subscription": {"reliability": "reliable", "depth": 1000}}},
    }
    return {"/**/memory_node": {"ros__parameters": values}}


def test_the_memory_keeps_it_and_goto_refuses_what_it_cannot_trust(tmp_path: Path) -> None:
    camera = "/trust_camera/image"
    store = tmp_path / "store"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_memory_params(store, camera)))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={camera}"]
    t0 = time.time_ns() - 60 * S  # a minute ago on the node's clock
    stamps = [t0 + i * S // 20 for i in range(120)]
    rclpy.init()
    node = Node("pose_trust_memory_test")
    episodes: list[Episode] = []
    cam = node.create_publisher(Image, camera, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
    node.create_subscription(Episode, f"{NS}/episodes", episodes.append, RELIABLE)
    try:
        with peer_process(args, tmp_path, "memory_node") as proc:
            wait_for_subscribers(node, cam)
            wait_for_subscribers(node, events)
            for i in range(120):  # 6 s of camera
                cam.publish(image_msg_from_rgb(_rgb(i), stamps[i], "camera"))
                spin_until(node, lambda: False, 0.01)
                if i == 60:
                    events.publish(_event(stamps[30], 0.5))  # too uncertain for 0.3
                if i == 100:
                    events.publish(_event(stamps[80], None))  # a tf pose: unknown
            assert spin_until(node, lambda: len(episodes) == 2, 60.0), len(episodes)
            lost, unknown = sorted(
                episodes, key=lambda e: e.header.stamp.sec * S + e.header.stamp.nanosec
            )
            assert lost.pose_sigma_valid and lost.pose_sigma_m == np.float32(0.5)
            assert lost.map_id == unknown.map_id == "lab"
            assert not unknown.pose_sigma_valid
            client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=30.0)
            found = {e.id: e.pose_trust for e in client.retrieve(k=5)}
            client.destroy()
            assert found == {lost.id: PoseTrust(0.5, "lab"), unknown.id: PoseTrust(None, "lab")}
            refused = goto(tmp_path, "--id", lost.id, "--dry-run")
            assert refused.returncode == 1 and "Traceback" not in refused.stderr
            (line,) = refused.stderr.strip().splitlines()
            assert "uncertain by 0.50 m" in line and "max_goal_uncertainty_m 0.3" in line
            assert "--trust-pose" in line
            trusted = goto(tmp_path, "--id", lost.id, "--dry-run", "--trust-pose")
            assert trusted.returncode == 0, trusted.stderr
            assert "dry run" in trusted.stdout and "trusted anyway" in trusted.stdout
            plain = goto(tmp_path, "--id", unknown.id, "--dry-run")
            assert plain.returncode == 0, plain.stderr
            assert "uncertainty unknown, map 'lab'" in plain.stdout
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    with EpisodeStore(store, read_only=True) as st:
        assert st.get(lost.id).pose_trust == PoseTrust(0.5, "lab")
    # from the store (another robot's, as this host is not "me"), on another map: refused
    # for its map, accepted with the override
    on_store = (
        "--store",
        str(store),
        "--dry-run",
        "--max-goal-uncertainty-m",
        "0",
        "--allow-other-robots",
    )
    other = goto(tmp_path, "--id", unknown.id, "--map-id", "hall", *on_store)
    assert other.returncode == 1 and "Traceback" not in other.stderr
    (line,) = other.stderr.strip().splitlines()
    assert "recorded on map 'lab'" in line and "on map 'hall'" in line
    assert (
        goto(tmp_path, "--id", unknown.id, "--map-id", "hall", "--trust-pose", *on_store).returncode
        == 0
    )
