"""events and episodes are transient local: a memory node started after an event stores it.

The scorer publishes events with a bounded transient-local history, so a memory node
that starts late (or restarts) still receives the recent events. A restarted node that
receives an event again whose episode it already stored does not store it twice.
"""

from __future__ import annotations

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
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time, time_to_ns
from surprise_memory.nodes.qos import LATCHED

NS = "/surprise_memory"
CAMERA = "/test_camera/image_raw"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
TRIGGER = 40  # frame index of the event


def _diag_count(diag: list[DiagnosticArray], key: str) -> int:
    for arr in reversed(diag):
        for status in arr.status:
            if status.name.endswith("memory_node"):
                return int({kv.key: kv.value for kv in status.values}.get(key, 0))
    return 0


def test_memory_node_started_after_the_event_stores_it_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(sf.node_params(str(store), CAMERA, episode_frames=4)))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params_file)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    # stamps ahead of the wall clock: the node's episode timeout (which compares with its
    # clock) must not give up on the event before the test's frames arrive
    base = time.time_ns() + 120 * 10**9
    stamps = [base + t - sf.T0 for t in sf.stamps()[:80]]
    rgb = sf.scene_change_rgb()[:80]

    rclpy.init()
    node = Node("late_join_test")
    episodes: list[Episode] = []
    diag: list[DiagnosticArray] = []
    node.create_subscription(Episode, f"{NS}/episodes", episodes.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", diag.append, 50)
    camera = node.create_publisher(Image, CAMERA, RELIABLE)
    # the scorer's profile: this event is published before any memory node exists
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)
    event = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0, pose_valid=False)
    event.header.stamp = ns_to_time(stamps[TRIGGER])
    event.decided = ns_to_time(stamps[TRIGGER] + 10**9 // 2)
    event.pose.orientation.w = 1.0
    events.publish(event)
    try:
        with peer_process(args, tmp_path, "memory_node"):
            wait_for_subscribers(node, camera, timeout=60)
            spin_until(node, lambda: _diag_count(diag, "events_in") >= 1, 15.0)
            for t, frame in zip(stamps, rgb, strict=True):
                camera.publish(image_msg_from_rgb(frame, t, "camera"))
                spin_until(node, lambda: False, 0.005)
            assert spin_until(node, lambda: len(episodes) >= 1, 60.0), "no episode stored"
        assert [time_to_ns(e.header.stamp) for e in episodes] == [stamps[TRIGGER]]

        # restarted on the same store: the event comes again, and is not stored twice
        diag.clear()
        with peer_process(args, tmp_path, "memory_node_restarted"):
            ok = spin_until(node, lambda: _diag_count(diag, "events_already_stored") >= 1, 60.0)
            assert ok, "the restarted node did not receive the event again"
    finally:
        node.destroy_node()
        rclpy.shutdown()
    with EpisodeStore(store) as stored:
        assert len(stored) == 1
