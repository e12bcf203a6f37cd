"""memory_node with redact_faces over DDS: a camera showing a face, stored blurred (issue 48).

The test publishes a real photograph (Grace Hopper's portrait, matplotlib's sample data) as
the camera's frames and a SurpriseEvent as the scorer would, then asks the node for the
episode with its images over ``retrieve_episodes``: every frame it stored has the face
blurred (the detector finds none in it and the region lost its detail), and ``/diagnostics``
counts the frames and faces blurred.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from face_photos import assert_blurred, grace_hopper
from PIL import Image as PilImage
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from surprise_memory.agents.ros_client import EpisodicMemoryClient
from surprise_memory.memory.redaction import FaceDetector
from surprise_memory.msg import Episode, SurpriseEvent
from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time
from surprise_memory.nodes.qos import LATCHED

NS = "/private_memory"
CAMERA = "/private_camera/image"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
FPS = 20
T0 = 50 * 10**9


def _params(store: Path) -> dict[str, Any]:
    params = {
        **sf.EPISODE,  # 0.5 s before and after the trigger, 4 s history
        **sf.EMBEDDER,
        "episode_frames": 4,
        "store_path": str(store),
        "redact_faces": True,
        "qos_overrides": {CAMERA: {"subscription": {"reliability": "reliable", "depth": 1000}}},
    }
    return {"/**/memory_node": {"ros__parameters": params}}


def test_the_live_node_stores_faces_blurred(
    tmp_path: Path, detector: FaceDetector, faint: FaceDetector
) -> None:
    photo = np.asarray(PilImage.fromarray(grace_hopper()).resize((128, 150)))
    (face,) = detector.detect(photo)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(_params(tmp_path / "store")))
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    rclpy.init()
    node = Node("private_memory_test")
    episodes: list[Episode] = []
    diag: dict[str, str] = {}

    def on_diag(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if "memory_node" in status.name:
                diag.update({kv.key: kv.value for kv in status.values})

    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    events = node.create_publisher(SurpriseEvent, f"{NS}/events", LATCHED)  # as the scorer
    node.create_subscription(Episode, f"{NS}/episodes", episodes.append, RELIABLE)
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
    try:
        with peer_process(args, tmp_path, "memory_node") as proc:
            wait_for_subscribers(node, cam)
            wait_for_subscribers(node, events)
            for i in range(40):  # 2 s of a camera looking at a person
                cam.publish(image_msg_from_rgb(photo, T0 + i * 10**9 // FPS, "camera"))
                spin_until(node, lambda: False, 0.01)
            event = SurpriseEvent(score=5.0, kl=1.0, threshold=1.0, pose_source="none")
            event.header.stamp = ns_to_time(T0 + 20 * 10**9 // FPS)
            event.decided = event.header.stamp
            event.pose.orientation.w = 1.0
            events.publish(event)
            assert spin_until(node, lambda: len(episodes) == 1, 60.0), diag
            client = EpisodicMemoryClient(node, f"{NS}/retrieve_episodes", timeout=60.0)
            (hit,) = client.retrieve(k=1, include_images=True)
            client.destroy()
            assert spin_until(node, lambda: diag.get("redacted_faces", "0") != "0", 10.0), diag
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()

    images = hit.decode_images()
    assert len(images) == 4
    for image in images:
        assert_blurred(photo, image, [face], faint)  # no face left to find, even a faint one
    assert diag["redacted_frames"] == "4" and diag["redacted_faces"] == "4", diag
    assert diag["redact_faces"].startswith("on")
