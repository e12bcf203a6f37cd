"""The pose of an event, over DDS: tf at the peak stamp, else odometry, else none (said so).

* odometry from a best-effort publisher (many robot drivers) reaches the scorer, its
  covariance with it (the event's ``pose_sigma_m``);
* where tf2_ros is installed, a TransformBroadcaster moving the robot gives each event the
  tf pose at its peak stamp (``pose_source`` = ``tf``), and the scorer shuts down without a
  traceback from tf2's listener;
* with neither, the event is still published with ``pose_valid=false`` and the reason.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from test_scorer_node import FPS, PARAMS, T0, _embedding, _stream

from surprise_memory.memory.camera_view import CameraView, mounting_pose
from surprise_memory.memory.pose import Pose, compose
from surprise_memory.msg import FrameEmbedding, SurpriseEvent
from surprise_memory.nodes.messages import ns_to_time, pose_from_msg, time_to_ns

NS = "/surprise_memory"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
BEST_EFFORT = QoSProfile(depth=1000, reliability=ReliabilityPolicy.BEST_EFFORT)
N, CHANGE_AT = 160, 100
HAVE_TF2 = importlib.util.find_spec("tf2_ros") is not None
ODOM_DRIFT_M = 0.01


def _run_scorer(
    tmp_path: Path,
    publish_pose: object,
    odom_qos: QoSProfile | None = RELIABLE,
    camera: bool = False,
) -> tuple[list[SurpriseEvent], list[int], str]:
    """Feed the scene-change stream to a scorer_node; return its events, stamps and log.

    ``camera``: the embeddings are camera ``front``'s (``front_optical``), whose mounting
    on ``base_link`` tf gives on ``/tf_static`` (:data:`MOUNT`).
    """
    params = tmp_path / "params.yaml"
    values = {**PARAMS, **({"cameras": "front"} if camera else {})}
    params.write_text(yaml.safe_dump({"/**/scorer_node": {"ros__parameters": values}}))
    z = _stream(N, CHANGE_AT)
    stamps = [T0 + i * 10**9 // FPS for i in range(N)]
    rclpy.init()
    node = Node("scorer_pose_test")
    events: list[SurpriseEvent] = []
    node.create_subscription(SurpriseEvent, f"{NS}/events", events.append, RELIABLE)
    emb_pub = node.create_publisher(FrameEmbedding, f"{NS}/embedding", RELIABLE)
    odom_pub = node.create_publisher(Odometry, "/odom", odom_qos) if odom_qos else None
    tf_pub = None
    if publish_pose == "tf":
        from tf2_ros import TransformBroadcaster

        tf_pub = TransformBroadcaster(node)
    static = None
    if camera:
        from tf2_ros import StaticTransformBroadcaster

        static = StaticTransformBroadcaster(node)
    args = [node_executable("scorer_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}"]
    try:
        with peer_process(args, tmp_path, "scorer_node") as proc:
            wait_for_subscribers(node, emb_pub)
            if odom_pub is not None:
                wait_for_subscribers(node, odom_pub)
            if tf_pub is not None:
                wait_for_subscribers(node, tf_pub.pub_tf)
            if static is not None:
                static.sendTransform(_mount())
            for i in range(N):
                if odom_pub is not None:
                    odom_pub.publish(_odometry(stamps[i], i))
                if tf_pub is not None:
                    tf_pub.sendTransform(_transform(stamps[i], i))
                msg = _embedding(stamps[i], z[i])
                if camera:
                    msg.camera, msg.header.frame_id = "front", "front_optical"
                emb_pub.publish(msg)
                spin_until(node, lambda: False, 0.005)
            assert spin_until(node, lambda: len(events) >= 1, 30.0), "no event"
            spin_until(node, lambda: False, 1.0)
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return events, stamps, (tmp_path / "scorer_node.log").read_text()


def _odometry(stamp: int, i: int) -> Odometry:
    odom = Odometry()
    odom.header.stamp = ns_to_time(stamp)
    odom.header.frame_id = "odom"
    odom.pose.pose.position.x = i * 0.1
    odom.pose.pose.orientation.w = 1.0
    # dead reckoning drifts: 1 cm more along x per frame (frame 0: all zeros, unknown)
    odom.pose.covariance[0] = (ODOM_DRIFT_M * i) ** 2
    odom.pose.covariance[7] = (0.5 * ODOM_DRIFT_M * i) ** 2
    return odom


def _transform(stamp: int, i: int) -> object:
    from geometry_msgs.msg import TransformStamped

    tf = TransformStamped()
    tf.header.stamp = ns_to_time(stamp)
    tf.header.frame_id = "map"
    tf.child_frame_id = "base_link"
    tf.transform.translation.y = 0.05 * i  # 1 m/s along y
    yaw = 0.01 * i
    tf.transform.rotation.z, tf.transform.rotation.w = np.sin(yaw / 2), np.cos(yaw / 2)
    return tf


MOUNT = (0.3, 0.0, 0.5, 90.0)  # front_optical on base_link: x, y, z and yaw (deg)


def _mount() -> object:
    from geometry_msgs.msg import TransformStamped

    x, y, z, yaw = MOUNT
    q = mounting_pose(yaw)
    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = "base_link", "front_optical"
    tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z = x, y, z
    r = tf.transform.rotation
    r.x, r.y, r.z, r.w = q.qx, q.qy, q.qz, q.qw
    return tf


def test_best_effort_odometry_gives_the_event_pose(tmp_path: Path) -> None:
    events, stamps, _ = _run_scorer(tmp_path, "odometry", BEST_EFFORT)
    for e in events:
        i = stamps.index(time_to_ns(e.header.stamp))
        assert e.pose_valid and e.pose_source == "odometry", e.pose_source
        assert e.header.frame_id == "odom" and e.pose.position.x == i * 0.1
        # issue 48: the odometry's own covariance is the event's pose uncertainty
        assert e.pose_sigma_valid and e.pose_sigma_m == pytest.approx(ODOM_DRIFT_M * i, rel=1e-6)


def test_no_pose_source_gives_pose_valid_false_with_the_reason(tmp_path: Path) -> None:
    events, _, _ = _run_scorer(tmp_path, None, None)
    for e in events:
        assert not e.pose_valid
        assert e.pose_source.startswith("no pose") and "odometry" in e.pose_source
        assert e.pose.orientation.w == 1.0


@pytest.mark.skipif(not HAVE_TF2, reason="tf2_ros is not installed (it comes with an apt ROS 2)")
def test_tf_pose_at_the_peak_stamp_and_a_clean_shutdown(tmp_path: Path) -> None:
    # odometry too: tf must win where it has the transform
    events, stamps, log = _run_scorer(tmp_path, "tf", RELIABLE)
    for e in events:
        i = stamps.index(time_to_ns(e.header.stamp))
        assert e.pose_valid and e.pose_source == "tf", e.pose_source
        assert e.header.frame_id == "map"
        assert e.pose.position.y == pytest.approx(0.05 * i)
        assert e.pose.orientation.z == pytest.approx(np.sin(0.01 * i / 2))
    assert "Traceback" not in log and "ExternalShutdownException" not in log, log


@pytest.mark.skipif(not HAVE_TF2, reason="tf2_ros is not installed (it comes with an apt ROS 2)")
def test_tf_gives_the_camera_pose_the_robot_pose_plus_its_mounting(tmp_path: Path) -> None:
    """Issue 42: tf map <- front_optical at the peak stamp is the robot's pose plus the
    camera's mounting (/tf_static); the event says where the camera was and looked."""
    events, stamps, _ = _run_scorer(tmp_path, "tf", RELIABLE, camera=True)
    for e in events:
        i = stamps.index(time_to_ns(e.header.stamp))
        assert e.camera == "front" and e.camera_frame_id == "front_optical"
        assert e.camera_pose_valid and e.camera_pose_source == "tf", e.camera_pose_source
        robot = pose_from_msg(e.pose, "map")
        x, y, z, yaw = MOUNT
        want = compose(robot, compose(Pose(x, y, z), mounting_pose(yaw)))
        got = pose_from_msg(e.camera_pose, "map")
        assert got.position == pytest.approx(want.position, abs=1e-6)
        view = CameraView("front", "front_optical", got).yaw
        assert view == pytest.approx(0.01 * i + math.radians(yaw), abs=1e-6)
