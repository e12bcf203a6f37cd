"""The encoder's work inside a node: frames in, one FrameEmbedding per V-JEPA-2 window out.

:class:`EncoderPart` is hosted by ``encoder_node`` (which publishes each embedding on
``embedding``) and by ``pipeline_node`` (which hands it to the scorer in memory); the host
converts camera messages to frames and watches their stamp order. One model serves every
camera of the ``cameras`` setting: each camera has its own ring buffer, window schedule
and queue, and the windows due from any of them share the catch-up batches
(:class:`~surprise_memory.perception.camera_batches.CameraBatcher`).
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from surprise_memory.config import CamerasConfig, ComponentConfig, EncoderConfig
from surprise_memory.errors import InputError
from surprise_memory.health import (
    Finding,
    Level,
    counted_finding,
    untrained_finding,
    window_span_finding,
    worker_finding,
)
from surprise_memory.msg import FrameEmbedding
from surprise_memory.nodes.delivery import CameraDelivery
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.messages import ns_to_time
from surprise_memory.nodes.parameters import Applier
from surprise_memory.perception.camera_batches import CameraBatcher
from surprise_memory.perception.catchup import FrameBatch
from surprise_memory.perception.delivery import CONFIRM_FRAMES, WindowSpan
from surprise_memory.perception.encoders import LiveWindowEncoder, VideoEncoder
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["EncoderPart"]


class EncoderPart:
    """Buffers camera frames and encodes each window of the M newest with V-JEPA-2.

    :meth:`push` (the camera callback) only samples and buffers frames and queues the
    window (:class:`~surprise_memory.perception.catchup.CatchUpBatcher`); the model runs
    in its own thread. When it falls behind, it encodes every pending window (up to
    ``encoder_batch``) in one forward and emits them in stamp order; only an overflow of
    the bounded queue (``encoder_queue``) drops windows, oldest first, counted
    (``/diagnostics``: windows_encoded, windows_dropped, batches, batch_max, latency). Each
    embedding carries the stamp of its newest frame. Each window's span is judged against
    the input period (``1/input_fps``), or, every frame kept, by the frames between its
    first and last that never arrived (the camera's grid, which the stamps' jitter does
    not move: :class:`~surprise_memory.perception.delivery.FrameLossEstimator`):
    ``window_frames_missing`` counts the frames it lacks, and a WARN says so above
    ``camera_loss_warn``.

    Several cameras: each embedding names its camera (``FrameEmbedding.camera``) and its
    frame (the camera's ``frame=``, else the images'); each camera's windows are in stamp
    order; the counters are the node's and, prefixed ``<name>.``, each camera's.

    Args:
        node: The host node (its logger).
        stats: The host's counters.
        emit: Called from the model thread with each embedding, oldest first per camera.
        cameras: The host's camera deliveries by camera name (each camera's period, when
            every frame is kept).

    """

    def __init__(
        self,
        node: Any,
        stats: NodeStats,
        emit: Callable[[FrameEmbedding], None],
        cameras: Mapping[str, CameraDelivery],
    ) -> None:
        self._node = node
        self._stats = stats
        self._emit = emit
        self._cameras = dict(cameras)

    def setup(self, values: Mapping[str, Any]) -> None:
        """Configure: load the model (slow, can fail) and start its thread."""
        config = EncoderConfig.from_mapping(values)
        self._encoder = VideoEncoder.from_config(config)
        self._encoder.make_sampler(config)  # checks clip_frames against the tubelet size
        self._live = LiveWindowEncoder(self._encoder)
        if config.encoder_warmup:
            self._live.warm_up(config.clip_frames)
        crop = self._encoder.crop_size
        specs = CamerasConfig.from_mapping(values).specs
        self._frames = {spec.name: spec.frame for spec in specs}  # "" = the images'
        self._batcher = CameraBatcher(
            config,
            [spec.name for spec in specs],
            (crop, crop),
            self._encoder.prepare_frame,
            self._live.host_buffer,
        )
        self._window_frames = config.clip_frames
        self._input_period_ns = round(NS_PER_SECOND / config.input_fps) if config.input_fps else 0
        self._spans = {spec.name: WindowSpan() for spec in specs}
        # every frame kept: each window (first and last frame's index, frames, span) until
        # the camera's grid has placed its frames for good (CONFIRM_FRAMES later)
        self._unsettled: dict[str, deque[tuple[int, int, int, int]]] = {
            spec.name: deque(maxlen=4 * CONFIRM_FRAMES) for spec in specs
        }
        if not self._encoder.pretrained:
            self._node.get_logger().warning(
                f"encoder weights {self._encoder.model_name}: UNTRAINED, surprise is meaningless"
            )
        self._stats.add_check(self._health)
        self._stats.add_values(
            lambda: {"applied.encoder_batch_interval_s": self._batcher.batch_interval_s}
        )
        self._stats.set(
            model=self._encoder.model_name,
            pretrained=str(self._encoder.pretrained),
            device=str(self._encoder.device),  # the README's check that a robot uses its GPU
            latency_mean_ms="",
            latency_p95_ms="",
            batch_max="0",
        )
        self._latencies: deque[float] = deque(maxlen=500)
        self._batch_max = 0
        self._batch_cameras = 0  # most cameras in one forward (several cameras)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._encode_loop, name="encoder", daemon=True)
        self._worker.start()
        cameras = f" of {len(specs)} cameras" if len(specs) > 1 else ""
        self._node.get_logger().info(
            f"encoding windows{cameras} of {config.clip_frames} frames with "
            f"{self._encoder.model_name} on {self._encoder.device} ({self._encoder.dtype})"
        )

    def appliers(self) -> dict[type[ComponentConfig], Applier]:
        """Live changes: the batch interval (model, window sampling, sizes are read-only)."""
        return {
            EncoderConfig: lambda c: setattr(
                self._batcher, "batch_interval_s", c.encoder_batch_interval_s
            )
        }

    @property
    def model(self) -> tuple[str, bool]:
        """The model's name and whether its weights are trained."""
        return self._encoder.model_name, self._encoder.pretrained

    def push(self, frame: Frame, camera: str = "") -> bool:
        """Offer a frame of a camera (its stamps increasing); False when rejected (counted)."""
        try:
            # queues only indices of the ring buffer: no pixels are copied here
            dropped = self._batcher.push(camera, frame, frame.frame_id)
        except InputError as exc:
            self._stats.reject("image", str(exc))
            return False
        if dropped:
            self._stats.count_camera("windows_dropped", camera, dropped)
        window = self._batcher.last_window
        if window is not None:
            frames = self._window_frames - window.padded
            if self._input_period_ns:  # sampled at input_fps: its span against that period
                self._judged(camera, window.span_ns, frames, self._input_period_ns, None)
            else:  # every frame kept: the frames that did not arrive, once the grid knows
                last = self._cameras[camera].frames_seen - 1
                self._unsettled[camera].append((last - frames + 1, last, frames, window.span_ns))
        if not self._input_period_ns:
            self._judge_settled(camera)
        return True

    def _judge_settled(self, camera: str) -> None:
        """Judge the windows whose frames the camera's grid has placed for good."""
        delivery, unsettled = self._cameras[camera], self._unsettled[camera]
        while unsettled and unsettled[0][1] < delivery.frames_seen - 1 - CONFIRM_FRAMES:
            first, last, frames, span_ns = unsettled.popleft()
            missing = delivery.missing_between(first, last)
            if missing is not None:  # None: before the grid (the camera's first frames)
                self._judged(camera, span_ns, frames, delivery.period_ns, missing)

    def _judged(
        self, camera: str, span_ns: int, frames: int, period: int | None, missing: int | None
    ) -> None:
        missing = self._spans[camera].add(span_ns, frames, period, missing)
        if missing:
            self._stats.count_camera("window_frames_missing", camera, missing)

    def reset(self, camera: str = "") -> None:
        """A camera starts a new sequence (its time went back); queued windows stay."""
        self._batcher.reset(camera)

    def _health(self, delta: Mapping[str, int]) -> list[Finding | None]:
        found = [
            worker_finding("encoder", self._worker.is_alive() or self._stop.is_set()),
            counted_finding(delta, "windows_dropped", Level.WARN, "windows dropped"),
            untrained_finding("encoder", self._encoder.pretrained),
        ]
        for name, spans in self._spans.items():
            finding = window_span_finding(spans.take(), self._cameras[name].warn_above)
            if finding is not None and name:
                finding = Finding(finding.level, f"camera {name}: {finding.reason}")
            found.append(finding)
        return found

    def _encode_loop(self) -> None:
        while not self._stop.is_set():
            batch = self._batcher.next_batch(timeout=0.1)
            if batch is not None:
                self._encode_batch(batch)

    def _encode_batch(self, batch: FrameBatch) -> None:
        if batch.stale:  # overwritten before the worker could copy them (it stalled)
            self._stats.count("windows_dropped", batch.stale)
        if len(self._frames) > 1:  # how many cameras shared this forward
            self._batch_cameras = max(self._batch_cameras, len({w.camera for w in batch.windows}))
            self._stats.set(batch_cameras_max=str(self._batch_cameras))
        if not batch.windows:
            return
        start = time.perf_counter()
        try:
            z = self._live.encode(batch.frames, batch.index)
        except Exception as exc:  # keep serving: a failed batch is counted, not fatal
            self._stats.reject("encode", f"{type(exc).__name__}: {exc}")
            self._stats.count("windows_dropped", len(batch.windows))  # every window counted
            return
        # latency: the batch's upload + forward, what its windows waited once taken
        self._latencies.append(time.perf_counter() - start)
        for window, embedding, valid in zip(batch.windows, z, batch.valid, strict=True):
            if not valid:  # frames overwritten while queued (the worker stalled)
                self._stats.count_camera("windows_dropped", window.camera)
                continue
            msg = FrameEmbedding(
                model=self._encoder.model_name,
                pretrained=self._encoder.pretrained,
                window_frames=self._window_frames,
                padded_frames=window.padded,
                camera=window.camera,
            )
            msg.header.stamp = ns_to_time(window.stamp_ns)
            msg.header.frame_id = self._frames[window.camera] or window.frame_id
            msg.embedding = array("f", embedding.astype(np.float32).tobytes())
            self._emit(msg)  # oldest first: stamp order of each camera
            self._stats.count_camera("windows_encoded", window.camera)
        self._stats.count("batches")
        self._batch_max = max(self._batch_max, len(batch.windows))
        lat = np.asarray(self._latencies) * 1e3
        self._stats.set(
            latency_mean_ms=f"{lat.mean():.1f}",
            latency_p95_ms=f"{np.percentile(lat, 95):.1f}",
            batch_max=str(self._batch_max),
        )

    def flush(self) -> None:
        """Stop the model thread (the windows still queued are not encoded)."""
        if "_worker" not in self.__dict__:  # configure failed before the thread started
            return
        self._stop.set()
        self._batcher.close()
        self._worker.join(timeout=5.0)

    def teardown(self) -> None:
        """Cleanup: stop the model thread and drop the model (its GPU memory goes back)."""
        self.flush()
        for name in ("_live", "_encoder", "_batcher", "_worker"):
            self.__dict__.pop(name, None)
