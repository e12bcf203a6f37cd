"""memory_node alone over DDS: camera clocks, lost events, compressed frames (issue 12).

The test publishes camera frames and SurpriseEvents itself, so each case is exact:
* a camera stamping from another clock than the node's (here: from 1000 s after its
  boot, while the node's clock reads the wall time): a pending episode waits for the
  frames after its trigger, instead of timing out at the next timer tick (item 4);
* an event whose frames have left the frame history is counted, and forgotten (item 3);
* with the compressed transport, frames are held as JPEG bytes and an episode decodes only
  its own frames (item 6).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.memory.store import EpisodeStore
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED

NS = "/surprise_memory"
CAMERA = "/mem_camera/image"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
FPS = 20
T_CAM = 1000 * 10**9  # the camera's clock: 1000 s since it booted


def _rgb(i: int) -> np.ndarray:
    rgb = np.zeros((48, 64, 3), np.uint8)
    rgb[:, :, 0] = (i * 7) % 256
    rgb[: i % 48, :, 1] = 200
    return rgb


def _image(i: int, compressed: bool) -> Image | CompressedImage:
    stamp = T_CAM + i * 10**9 // FPS
    if not compressed:
        return image_msg_from_rgb(_rgb(i), stamp, "camera")
    ok, buf = cv2.imencode(".jpg", _rgb(i)[:, :, ::-1])
    assert ok
    msg = CompressedImage(format="rgb8; jpeg compressed bgr8", data=buf.tobytes())
    msg.header.stamp = ns_to_time(stamp)
    msg.header.frame_id = "camera"
    return msg


def _event(i: int) -> SurpriseEvent:
    msg = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0, pose_valid=False, pose_source="none")
    msg.header.stamp = ns_to_time(T_CAM + i * 10**9 // FPS)
    msg.decided = msg.header.stamp
    msg.pose.orientation.w = 1.0
    return msg


class _Inbox:
    def __init__(self) -> None:
        self.episodes: list[Episode] = []
        self.diag: dict[str, str] = {}

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            if "memory_node" in status.name:
                self.diag = {kv.key: kv.value for kv in status.values}


def _params(store: Path, compressed: bool) -> dict[str, Any]:
    params = {
        **sf.EPISODE,  # 0.5 s before and after the trigger, 4 s history
        "episode_timeout_seconds": 4.0,
        **sf.EMBEDDER,
        "store_path": str(store),
        "image_transport": "compressed" if compressed else "raw",
        "qos_overrides": {CAMERA: {"subscription": {"reliability": "reliable", "depth": 1000}}},
    }
    return {"/**/memory_node": {"ros__parameters": params}}


@pytest.mark.parametrize("compressed", [False, True], ids=["raw", "compressed"])
def test_memory_node_on_its_own(tmp_path: Path, compressed: bool) -> None:
    store = tmp_path / "store"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(store, compressed)))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    rclpy.init()
    node = Node("memory_node_test")
    inbox = _Inbox()
    msg_type = CompressedImage if compressed else Image
    cam = node.create_publisher(msg_type, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
    node.create_subscription(Episode, f"{NS}/episodes", inbox.episodes.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)
    try:
        with peer_process(args, tmp_path, "memory_node") as proc:
            wait_for_subscribers(node, cam)
            wait_for_subscribers(node, events)
            for i in range(40):  # 2 s of camera
                cam.publish(_image(i, compressed))
                spin_until(node, lambda: False, 0.01)
            events.publish(_event(30))  # its window ends at frame 40
            # the camera pauses for 1.5 s (less than the 4 s timeout, in the camera's time):
            # the node must wait for the frames after the trigger
            spin_until(node, lambda: False, 1.5)
            for i in range(40, 60):
                cam.publish(_image(i, compressed))
                spin_until(node, lambda: False, 0.01)
            assert spin_until(node, lambda: len(inbox.episodes) == 1, 60.0), inbox.diag
            # an event whose frames have left the 4 s history: counted, not stored
            for i in range(60, 160):
                cam.publish(_image(i, compressed))
                spin_until(node, lambda: False, 0.005)
            events.publish(_event(5))

            def lost_counted() -> bool:
                return inbox.diag.get("rejected_episode_frames_gone") == "1"

            assert spin_until(node, lost_counted, 30.0), inbox.diag
            assert proc.poll() is None
            held_mb = float(inbox.diag["frame_history_mb"])
    finally:
        node.destroy_node()
        rclpy.shutdown()

    (episode,) = inbox.episodes
    trigger = T_CAM + 30 * 10**9 // FPS
    stamps = [t.sec * 10**9 + t.nanosec for t in episode.frame_stamps]
    assert trigger in stamps
    assert max(stamps) > trigger + 10**9 // 4  # frames from after the pause are in it
    with EpisodeStore(store, read_only=True) as s:
        (record,) = [s.get(i) for i in s.episode_ids()]
        images = record.load_images()
        assert s.origin_ns == T_CAM  # the first frame the live node saw (issue 12, item 10)
    assert len(images) == len(stamps) and images[0].shape == (48, 64, 3)
    # 4 s at 20 Hz of 48x64 frames: 0.7 MB as pixels, about 0.1 MB as JPEG
    assert held_mb < (0.35 if compressed else 1.0)
