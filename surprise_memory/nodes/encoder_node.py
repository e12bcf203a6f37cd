"""encoder_node: camera frames in; one V-JEPA-2 FrameEmbedding per encoder window out."""

from __future__ import annotations

import threading
import time
from array import array
from collections import deque
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import CompressedImage, Image

from surprise_memory.config import CameraConfig, EncoderConfig
from surprise_memory.errors import InputError
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import ns_to_time
from surprise_memory.nodes.parameters import declare_settings
from surprise_memory.nodes.qos import RELIABLE, subscribe_camera
from surprise_memory.nodes.runtime import StampOrder, frame_from_msg, run_node
from surprise_memory.perception.encoders import VideoEncoder
from surprise_memory.perception.window import Window


class LatestSlot:
    """A one-item mailbox between the camera callback and the model thread: newest wins.

    ``put`` never blocks; it returns True when it replaced an item the worker had not taken
    (a dropped window).
    """

    def __init__(self) -> None:
        self._item: Any = None
        self._cond = threading.Condition()

    def put(self, item: Any) -> bool:
        """Offer the newest item; True if an untaken one was replaced."""
        with self._cond:
            dropped = self._item is not None
            self._item = item
            self._cond.notify()
        return dropped

    def take(self, timeout: float) -> Any:
        """The newest item, or None after ``timeout`` seconds."""
        with self._cond:
            if self._item is None:
                self._cond.wait(timeout)
            item, self._item = self._item, None
        return item


class EncoderNode(Node):
    """Buffers camera frames and encodes each window of the M newest with V-JEPA-2.

    The camera callback only converts, samples and buffers frames (``WindowSampler``); the
    model runs in its own thread. When it cannot keep up, the newest window wins and the
    skipped ones are counted (``/diagnostics``: frames_in, windows_encoded,
    windows_dropped, latency). Each embedding carries the stamp of its newest frame.
    """

    def __init__(self) -> None:
        super().__init__("encoder_node")
        values = declare_settings(self, CameraConfig, EncoderConfig)
        camera = CameraConfig.from_mapping(values)
        config = EncoderConfig.from_mapping(values)
        self._encoder = VideoEncoder.from_config(config)
        self._sampler = self._encoder.make_sampler(config)
        self._window_frames = config.clip_frames
        if not self._encoder.pretrained:
            self.get_logger().warning(
                f"encoder weights {self._encoder.model_name}: UNTRAINED, surprise is meaningless"
            )
        self._stats = NodeStats(self)
        self._stats.set(
            model=self._encoder.model_name,
            pretrained=str(self._encoder.pretrained),
            latency_mean_ms="",
            latency_p95_ms="",
        )
        self._order = StampOrder(self, self._stats, self._sampler.reset)
        self._latencies: deque[float] = deque(maxlen=500)
        self._slot = LatestSlot()
        self._stop = threading.Event()
        self._pub = self.create_publisher(FrameEmbedding, "embedding", RELIABLE)
        subscribe_camera(self, camera, self._on_image)
        self._worker = threading.Thread(target=self._encode_loop, name="encoder", daemon=True)
        self._worker.start()
        self.get_logger().info(
            f"encoding windows of {config.clip_frames} frames with {self._encoder.model_name} "
            f"on {self._encoder.device} ({self._encoder.dtype})"
        )

    def _on_image(self, msg: Image | CompressedImage) -> None:
        frame = frame_from_msg(msg, self._stats)
        if frame is None or not self._order.check(frame.stamp_ns):
            return
        try:
            window = self._sampler.push(frame)
        except InputError as exc:
            self._stats.reject("image", str(exc))
            return
        self._order.commit(frame.stamp_ns)
        if window is not None:
            # the window is a view of the ring buffer, overwritten by the next frame: the
            # model thread needs its own copy
            owned = Window(window.stamp_ns, np.array(window.frames), window.padded)
            if self._slot.put((owned, frame.frame_id)):
                self._stats.count("windows_dropped")

    def _encode_loop(self) -> None:
        while not self._stop.is_set():
            item = self._slot.take(timeout=0.1)
            if item is None:
                continue
            window, frame_id = item
            start = time.perf_counter()
            try:
                z = self._encoder.encode_window(window.frames, prepared=True)
            except Exception as exc:  # keep serving: one failed window is counted, not fatal
                self._stats.reject("encode", f"{type(exc).__name__}: {exc}")
                continue
            self._latencies.append(time.perf_counter() - start)
            msg = FrameEmbedding(
                model=self._encoder.model_name,
                pretrained=self._encoder.pretrained,
                window_frames=self._window_frames,
                padded_frames=window.padded,
            )
            msg.header.stamp = ns_to_time(window.stamp_ns)
            msg.header.frame_id = frame_id
            msg.embedding = array("f", z.astype(np.float32).tobytes())
            self._pub.publish(msg)
            self._stats.count("windows_encoded")
            lat = np.asarray(self._latencies) * 1e3
            self._stats.set(
                latency_mean_ms=f"{lat.mean():.1f}", latency_p95_ms=f"{np.percentile(lat, 95):.1f}"
            )

    def close(self) -> None:
        """Stop the model thread."""
        self._stop.set()
        self._worker.join(timeout=5.0)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``ros2 run surprise_memory encoder_node``."""
    return run_node(EncoderNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
