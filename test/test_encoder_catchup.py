"""The encoder node over real DDS when it is slower than the camera: catch-up batches.

The installed ``encoder_node`` runs the tiny V-JEPA-2 preset with
``encoder_batch_interval_s``: at most one forward per interval, so at 20 Hz and 0.3 s the
encoder is slower than the camera one window at a time (3.3 forwards/s for 20 windows/s)
and must batch to keep up. Nothing about the forward is mocked: the node really runs
behind and really encodes the backlog in one forward. The embeddings it publishes are
compared with the offline path (``VideoEncoder.encode_stream``, batches of
``encoder_batch``) on the same frames.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
import synthetic_frames as sf
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros_helpers import node_executable, peer_process, spin_until, wait_for_subscribers
from sensor_msgs.msg import Image

from surprise_memory.config import EncoderConfig
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.messages import time_to_ns
from surprise_memory.perception.encoders import VideoEncoder
from surprise_memory.perception.frames import Frame

NS = "/surprise_memory"
CAMERA = "/catchup_camera/image_raw"
RELIABLE = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}  # float32 on the CPU, batch shapes differ


@pytest.fixture(scope="module")
def offline() -> dict[int, np.ndarray]:
    """The offline path's embedding of every window of the test stream, by stamp."""
    config = EncoderConfig(**sf.ENCODER)
    encoder = VideoEncoder.from_config(config)
    frames = (Frame(rgb, t) for t, rgb in zip(sf.stamps(), sf.scene_change_rgb(), strict=True))
    z, stamps = encoder.encode_stream(frames, config)
    return {int(t): v for t, v in zip(stamps, z, strict=True)}


def _run_encoder(
    tmp_path: Path, settings: dict[str, Any], windows: int
) -> tuple[list[Any], dict[str, str]]:
    """Start the node, play the stream at 20 Hz, wait until all ``windows`` are accounted for."""
    params = tmp_path / "params.yaml"
    node_params = sf.node_params("/unused", CAMERA)["/**/encoder_node"]
    node_params["ros__parameters"].update(settings)
    params.write_text(yaml.safe_dump({"/**/encoder_node": node_params}))
    args = [node_executable("encoder_node"), "--ros-args", "--params-file", str(params)]
    args += ["-r", f"__ns:={NS}", "-r", f"image:={CAMERA}"]
    embeddings: list[FrameEmbedding] = []
    diagnostics: dict[str, str] = {}

    def on_diag(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.endswith("encoder_node"):
                diagnostics.update({kv.key: kv.value for kv in status.values})

    def accounted() -> int:
        return len(embeddings) + int(diagnostics.get("windows_dropped", 0))

    rclpy.init()
    node = Node("catchup_test")
    try:
        node.create_subscription(FrameEmbedding, f"{NS}/embedding", embeddings.append, RELIABLE)
        node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 50)
        camera = node.create_publisher(Image, CAMERA, RELIABLE)
        with peer_process(args, tmp_path, "encoder_node") as proc:
            wait_for_subscribers(node, camera, 1, timeout=60)
            for _, msg in sf.scene_change_frames():
                camera.publish(msg)
                spin_until(node, lambda: False, 1.0 / sf.FPS)
            assert spin_until(node, lambda: accounted() >= windows, 30.0), diagnostics
            # the counters come every 5 s: wait for a report that has seen every window
            assert spin_until(
                node, lambda: int(diagnostics.get("windows_encoded", 0)) == len(embeddings), 15.0
            )
            assert proc.poll() is None
    finally:
        node.destroy_node()
        rclpy.shutdown()
    return embeddings, diagnostics


def test_a_slow_encoder_batches_the_backlog_and_drops_nothing(
    tmp_path: Path, offline: dict[int, np.ndarray]
) -> None:
    settings = {"encoder_batch": 16, "encoder_queue": 32, "encoder_batch_interval_s": 0.3}
    embeddings, diag = _run_encoder(tmp_path, settings, len(offline))
    stamps = [time_to_ns(m.header.stamp) for m in embeddings]
    assert stamps == sorted(offline)  # every window, in stamp order
    assert int(diag.get("windows_dropped", 0)) == 0
    assert int(diag["batch_max"]) >= 3  # it did fall behind and catch up
    assert int(diag["batches"]) < len(stamps)
    for msg, t in zip(embeddings, stamps, strict=True):
        np.testing.assert_allclose(np.asarray(msg.embedding), offline[t], **TOLERANCE)


def test_only_an_overflowing_queue_drops_windows_oldest_first(
    tmp_path: Path, offline: dict[int, np.ndarray]
) -> None:
    """Batches of 2 every 0.3 s cannot keep up with 20 Hz: the bounded queue overflows."""
    settings = {"encoder_batch": 2, "encoder_queue": 4, "encoder_batch_interval_s": 0.3}
    embeddings, diag = _run_encoder(tmp_path, settings, len(offline))
    stamps = [time_to_ns(m.header.stamp) for m in embeddings]
    dropped = int(diag.get("windows_dropped", 0))
    assert dropped > 0 and dropped + len(stamps) == len(offline)
    assert stamps == sorted(set(stamps)) and set(stamps) <= set(offline)
    assert stamps[-1] == max(offline)  # the newest windows are kept
    assert int(diag["batch_max"]) == 2
    for msg, t in zip(embeddings, stamps, strict=True):
        np.testing.assert_allclose(np.asarray(msg.embedding), offline[t], **TOLERANCE)
