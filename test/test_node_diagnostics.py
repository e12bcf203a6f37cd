"""Diagnostics over DDS as a robot reads them: levels and reasons on /diagnostics (issue 11/12).

* untrained weights: the encoder says WARN "encoder weights are untrained";
* a killed encoder (SIGKILL): the scorer stays up and its WARN says "no encoder";
* an unwritable store (its frames folder replaced by a file while the node runs): the
  memory node says ERROR with the failed writes, stays up, and stores again once the
  folder is back.

The nodes publish diagnostics every 0.5 s here (``diagnostics_period_seconds``) and call a
streaming input silent after 2 s (``input_silent_seconds``).
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import rclpy
import synthetic_frames as sf
import torch
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image
from test_memory_node import _event, _image, _params

from surprise_memory.msg import Episode, FrameEmbedding, SurpriseEvent
from surprise_memory.nodes.qos import LATCHED

NS = "/diag_test"
CAMERA = "/diag_camera/image"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
FAST = {"diagnostics_period_seconds": 0.5, "input_silent_seconds": 2.0}


class _Monitor:
    """Every status of each node; the latest one is what rqt_robot_monitor would show."""

    def __init__(self) -> None:
        self.seen: dict[str, list[DiagnosticStatus]] = {}

    def on_diag(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.seen.setdefault(status.name.rsplit(" ", 1)[-1], []).append(status)

    @property
    def status(self) -> dict[str, DiagnosticStatus]:
        """The latest status of each node."""
        return {name: statuses[-1] for name, statuses in self.seen.items()}

    def latest(self, node: str) -> DiagnosticStatus | None:
        statuses = self.seen.get(node)
        return statuses[-1] if statuses else None

    @staticmethod
    def _is(status: DiagnosticStatus, level: int, text: str) -> bool:
        return status.level[0] == level and text in status.message

    def level(self, node: str) -> int | None:
        status = self.latest(node)
        return None if status is None else status.level[0]

    def says(self, node: str, level: int, text: str) -> bool:
        status = self.latest(node)
        return status is not None and self._is(status, level, text)

    def has_said(self, node: str, level: int, text: str) -> bool:
        """Whether any status of ``node`` so far had ``level`` and ``text``.

        A counted failure raises the level for the one period in which it happened; that
        period's status may have been followed by others before the test looks.
        """
        return any(self._is(s, level, text) for s in self.seen.get(node, []))

    def values(self, node: str) -> dict[str, str]:
        status = self.latest(node)
        return {} if status is None else {kv.key: kv.value for kv in status.values}


def _write_params(tmp_path: Path, params: dict[str, Any]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_killed_encoder_makes_the_scorer_warn_no_encoder(tmp_path: Path) -> None:
    params = sf.node_params("/unused", CAMERA, **FAST)
    del params["/**/memory_node"]
    path = _write_params(tmp_path, params)
    common = ["--ros-args", "--params-file", str(path), "-r", f"__ns:={NS}"]
    encoder = [node_executable("encoder_node"), *common, "-r", f"image:={CAMERA}"]
    scorer = [node_executable("scorer_node"), *common]
    rclpy.init()
    node = Node("diagnostics_test")
    monitor = _Monitor()
    embeddings: list[FrameEmbedding] = []
    node.create_subscription(DiagnosticArray, "/diagnostics", monitor.on_diag, 100)
    node.create_subscription(FrameEmbedding, f"{NS}/embedding", embeddings.append, RELIABLE)
    cam = node.create_publisher(Image, CAMERA, RELIABLE)
    frames = sf.scene_change_frames()
    try:
        with (
            peer_process(scorer, tmp_path, "scorer_node") as scorer_proc,
            peer_process(encoder, tmp_path, "encoder_node") as encoder_proc,
        ):
            wait_for_subscribers(node, cam, 1, timeout=60)
            warn = DiagnosticStatus.WARN[0]
            # the camera runs: the encoder's only complaint is its random weights
            i = 0
            while i < 40 or not monitor.says("encoder_node", warn, "untrained"):
                cam.publish(frames[i % len(frames)][1])
                spin_until(node, lambda: False, 1.0 / sf.FPS)
                i += 1
                assert i < 40 * sf.FPS, monitor.status
            assert monitor.status["encoder_node"].message == "encoder weights are untrained"
            # the README's check that the GPU is used: encoder_device auto -> what torch sees
            device = "cuda" if torch.cuda.is_available() else "cpu"
            assert monitor.values("encoder_node")["device"] == device
            assert spin_until(node, lambda: len(embeddings) > 0, 30.0)
            # the scorer hears the encoder: it says the embeddings are untrained, not missing
            assert spin_until(
                node, lambda: monitor.says("scorer_node", warn, "encoder weights"), 10.0
            ), monitor.status
            assert "no encoder" not in monitor.status["scorer_node"].message
            encoder_proc.send_signal(signal.SIGKILL)
            encoder_proc.wait(timeout=10)
            monitor.seen.pop("scorer_node")  # wait for a status after the kill
            assert spin_until(
                node, lambda: monitor.says("scorer_node", warn, "no encoder"), 60.0
            ), monitor.status.get("scorer_node")
            assert scorer_proc.poll() is None, "the scorer died with the encoder"
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_unwritable_store_is_an_error_and_the_node_recovers(tmp_path: Path) -> None:
    store = tmp_path / "store"
    params = _params(store, compressed=False)
    params["/**/memory_node"]["ros__parameters"].update(FAST)
    path = _write_params(tmp_path, params)
    ns = "/diag_mem"
    args = [node_executable("memory_node"), "--ros-args", "--params-file", str(path)]
    args += ["-r", f"__ns:={ns}", "-r", "image:=/mem_camera/image"]
    rclpy.init()
    node = Node("diagnostics_store_test")
    monitor = _Monitor()
    episodes: list[Episode] = []
    node.create_subscription(DiagnosticArray, "/diagnostics", monitor.on_diag, 100)
    node.create_subscription(Episode, f"{ns}/episodes", episodes.append, RELIABLE)
    cam = node.create_publisher(Image, "/mem_camera/image", RELIABLE)
    frame = 0

    def camera(seconds: float, event_at: int | None = None) -> None:
        nonlocal frame
        for _ in range(round(seconds * 20)):
            cam.publish(_image(frame, compressed=False))
            if frame == event_at:
                events.publish(_event(frame - 10))
            frame += 1
            spin_until(node, lambda: False, 0.01)

    error = DiagnosticStatus.ERROR[0]
    try:
        with peer_process(args, tmp_path, "memory_node") as proc:
            wait_for_subscribers(node, cam)
            # no scorer yet: the node says what is missing
            assert spin_until(node, lambda: monitor.says("memory_node", 1, "no scorer"), 30.0), (
                monitor.status
            )
            events = node.create_publisher(SurpriseEvent, f"{ns}/events", LATCHED)
            wait_for_subscribers(node, events)
            camera(2.0, event_at=30)
            assert spin_until(node, lambda: len(episodes) == 1, 60.0), monitor.status
            assert spin_until(node, lambda: monitor.level("memory_node") == 1, 10.0)
            message = monitor.status["memory_node"].message  # the camera may have paused too
            assert "embedder weights are untrained" in message and "store" not in message
            frames_dir = store / "frames"
            frames_dir.rename(store / "frames.away")
            frames_dir.write_text("not a folder")  # the store cannot write frames now
            camera(2.0, event_at=frame + 20)
            assert spin_until(
                node, lambda: monitor.has_said("memory_node", error, "store write(s) failed"), 60.0
            ), monitor.status.get("memory_node")
            assert proc.poll() is None, "the node died on an unwritable store"
            frames_dir.unlink()
            (store / "frames.away").rename(frames_dir)
            camera(2.0, event_at=frame + 20)
            assert spin_until(node, lambda: len(episodes) == 2, 60.0), monitor.status
            # the failure is in the past: the level comes back down (random weights: WARN)
            assert spin_until(node, lambda: monitor.level("memory_node") == 1, 10.0)
            assert monitor.values("memory_node")["rejected_store"] == "1"
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
