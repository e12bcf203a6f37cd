"""Shutdown as ``ros2 launch`` does it: SIGINT, then SIGTERM while the node still works.

launch sends SIGINT, waits ``sigterm_timeout`` and sends SIGTERM. The memory node stores
the episodes still pending after the first signal; a second signal arriving meanwhile must
neither abort the process (exit -6, "terminate called without an active exception") nor
lose those episodes.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED

NS = "/surprise_memory"
CAMERA = "/test_camera/image_raw"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
N_FRAMES = 80  # 4 s at 20 fps
TRIGGERS = range(60, 80, 5)  # 4 events whose after-window (2 s) has not been seen yet


def _events_in(diag: list[DiagnosticArray]) -> int:
    for arr in reversed(diag):
        for status in arr.status:
            if status.name.endswith("memory_node"):
                return int({kv.key: kv.value for kv in status.values}.get("events_in", 0))
    return 0


def test_memory_node_stores_pending_episodes_through_sigint_then_sigterm(tmp_path: Path) -> None:
    store = tmp_path / "store"
    params = sf.node_params(
        str(store),
        CAMERA,
        episode_before_seconds=2.0,
        episode_after_seconds=2.0,
        episode_timeout_seconds=600.0,  # only shutdown builds the pending episodes
        episode_frames=4,
    )
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params_file)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    stamps = sf.stamps()[:N_FRAMES]
    rgb = sf.scene_change_rgb()[:N_FRAMES]

    rclpy.init()
    node = Node("shutdown_test")
    diag: list[DiagnosticArray] = []
    node.create_subscription(DiagnosticArray, "/diagnostics", diag.append, 50)
    camera = node.create_publisher(Image, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
    try:
        with peer_process(args, tmp_path, "memory_node") as proc:
            wait_for_subscribers(node, camera, timeout=60)
            wait_for_subscribers(node, events, timeout=60)
            for t, frame in zip(stamps, rgb, strict=True):
                camera.publish(image_msg_from_rgb(frame, t, "camera"))
                spin_until(node, lambda: False, 0.005)
            for i in TRIGGERS:
                msg = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0)
                msg.header.stamp = ns_to_time(stamps[i])
                msg.decided = ns_to_time(stamps[i] + 10**9 // 2)
                msg.pose.orientation.w = 1.0
                events.publish(msg)
            arrived = spin_until(node, lambda: _events_in(diag) >= len(TRIGGERS), 30.0)
            assert arrived, f"events_in={_events_in(diag)}"
            proc.send_signal(signal.SIGINT)
            # SIGTERM again and again: inside close() (embedding the pending episodes) and
            # during the interpreter's exit alike
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=5)
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert code == 0
    log = (tmp_path / "memory_node.log").read_text()
    assert "terminate called" not in log and "Traceback" not in log, log
    stored = EpisodeStore(store)
    try:
        assert len(stored) == len(TRIGGERS)
    finally:
        stored.close()
