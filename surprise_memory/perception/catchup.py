"""Catch-up batching of live encoder windows: a bounded queue, one forward per backlog.

Between the camera callback and the encoder's worker thread:

* :class:`WindowQueue`: a bounded FIFO of pending windows. ``put`` never blocks; when
  full, the *oldest* pending window is dropped and counted (a slow consumer never blocks
  the camera, as in image_pipeline's queues), so the newest frames are always encoded.
* :class:`CatchUpBatcher`: the live encoder's input. The callback ``push``-es frames; a
  window becomes a small :class:`PendingWindow` (stamp and ring-buffer indices, no
  pixels) in the queue. The worker's ``next_batch`` takes every pending window (up to
  ``encoder_batch``) and copies the *distinct* frames they cover out of the ring, once:
  with stride 1, B windows of M frames share all but B - 1 of them, so a batch is
  M + B - 1 frames (M = 64, B = 8: 71 frames, 14 MB at 256 px) instead of B copies of M
  (101 MB). The worker builds the overlapping windows from them on the device
  (:meth:`~surprise_memory.perception.encoders.live.LiveWindowEncoder.encode`).

When the encoder keeps up, every batch holds one window and nothing changes against the
one-window path; when it falls behind (a slow forward, a GPU shared with other work), the
backlog is encoded in one forward, which costs less per window than one forward each. No
window is dropped as long as B windows per forward keep up with the camera; beyond that,
the queue's bound decides what is dropped, oldest first.

Thread rule: exactly one thread calls ``push``/``reset`` (the camera callback) and one
calls ``next_batch`` (the worker). The ring buffer holds ``M + (queue + batch) * stride``
frames, so the frames of every pending or taken window stay in it while newer frames
arrive; should the worker stall so long that a frame it is copying is overwritten anyway,
the seqlock check of :meth:`FrameRingBuffer.copy_frames` marks the window invalid and it
is counted as dropped instead of being encoded from wrong pixels.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError
from surprise_memory.perception.frames import Frame, RgbArray
from surprise_memory.perception.window import FrameTransform, WindowSampler

__all__ = ["CatchUpBatcher", "FrameBatch", "PendingWindow", "WindowQueue", "gather_plan"]

HostAllocator = Callable[[tuple[int, ...]], RgbArray]
"""``shape -> uint8 array``: where a batch's frames are copied (e.g. pinned host memory)."""


@dataclass(frozen=True)
class PendingWindow:
    """A window waiting for the encoder: where its frames are, not the frames.

    Attributes:
        stamp_ns: Stamp of the newest frame (the embedding's stamp).
        end_index: Ring-buffer index of the newest frame.
        first_index: Index of the oldest distinct frame (padding repeats it).
        padded: Leading frames that repeat the first one (warm-up 'pad').
        frame_id: The camera frame's ``frame_id``, carried to the output.
        span_ns: Newest minus oldest distinct frame stamp (how much time it covers).
        camera: The camera whose frames it holds ("" = the one unnamed camera).

    """

    stamp_ns: int
    end_index: int
    first_index: int
    padded: int
    frame_id: str = ""
    span_ns: int = 0
    camera: str = ""


class WindowQueue:
    """Bounded FIFO of pending windows; a full queue drops its oldest item, counted.

    Args:
        capacity: Most pending windows.
        condition: The condition a put notifies; shared by the queues of several cameras,
            so that one worker waits for a window of any of them. Default: its own.

    Raises:
        ConfigError: capacity < 1.

    """

    def __init__(self, capacity: int, condition: threading.Condition | None = None) -> None:
        if capacity < 1:
            raise ConfigError(f"capacity={capacity}: must be >= 1")
        self._items: deque[PendingWindow] = deque()
        self._capacity = capacity
        self._cond = condition or threading.Condition()
        self._dropped = 0
        self._closed = False

    @property
    def capacity(self) -> int:
        """Most pending windows."""
        return self._capacity

    @property
    def dropped(self) -> int:
        """Windows dropped by overflow so far."""
        return self._dropped

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def put(self, item: PendingWindow) -> int:
        """Append a window without blocking.

        Returns:
            Windows dropped to make room (0 or 1; the oldest pending one).

        """
        with self._cond:
            dropped = 0
            if len(self._items) >= self._capacity:
                self._items.popleft()
                dropped = 1
                self._dropped += 1
            self._items.append(item)
            self._cond.notify_all()
        return dropped

    def take(self, most: int, timeout: float) -> list[PendingWindow]:
        """The oldest ``most`` pending windows, oldest first; waits up to ``timeout`` s.

        Returns:
            Between 1 and ``most`` windows, or an empty list after the timeout or close.

        """
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            n = min(most, len(self._items))
            return [self._items.popleft() for _ in range(n)]

    def clear(self) -> int:
        """Drop every pending window; return how many."""
        with self._cond:
            n = len(self._items)
            self._items.clear()
            return n

    def close(self) -> None:
        """Wake a waiting ``take`` (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def gather_plan(
    windows: list[PendingWindow], m: int
) -> tuple[list[tuple[int, int]], npt.NDArray[np.int64]]:
    """Which frames a batch needs, each once, and where each window finds its frames.

    Args:
        windows: Pending windows, oldest first.
        m: Frames per window.

    Returns:
        ``(segments, index)``: the distinct frames as merged inclusive index ranges
        ``(first, last)`` in ascending order (copied one after another), and a
        ``(len(windows), m)`` array whose row b lists, oldest first, the position of
        window b's frames in that copy (padding repeats the window's first frame).

    """
    segments: list[tuple[int, int]] = []
    for w in sorted(windows, key=lambda w: w.first_index):
        lo, hi = w.first_index, w.end_index
        if segments and lo <= segments[-1][1] + 1:
            segments[-1] = (segments[-1][0], max(segments[-1][1], hi))
        else:
            segments.append((lo, hi))
    starts = np.array([s for s, _ in segments], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([e - s + 1 for s, e in segments])[:-1]])
    index = np.empty((len(windows), m), dtype=np.int64)
    for b, w in enumerate(windows):
        frames = np.maximum(np.arange(w.end_index - m + 1, w.end_index + 1), w.first_index)
        seg = np.searchsorted(starts, frames, side="right") - 1
        index[b] = offsets[seg] + frames - starts[seg]
    return segments, index


@dataclass(frozen=True)
class FrameBatch:
    """What the worker encodes in one forward.

    Attributes:
        windows: The pending windows, oldest first.
        frames: (N, h, w, 3) uint8 distinct frames of the batch (valid until the next
            :meth:`CatchUpBatcher.next_batch`).
        index: (B, M) positions in ``frames`` of each window's frames, oldest first.
        valid: (B,) False for a window whose frames were overwritten during the copy
            (the worker stalled): it must be dropped, not published.
        stale: Windows taken from the queue but left out because their frames were
            overwritten before the copy (to be counted as dropped). ``windows`` may then
            be empty.

    """

    windows: list[PendingWindow]
    frames: RgbArray
    index: npt.NDArray[np.int64]
    valid: npt.NDArray[np.bool_]
    stale: int = 0


class CatchUpBatcher:
    """The live encoder's input: frames in from the camera, batches of windows out.

    Args:
        config: clip_frames, clip_stride, input_fps, clip_warmup, encoder_batch,
            encoder_queue and encoder_batch_interval_s are used.
        frame_shape: (h, w) of the stored frames (the encoder's input size).
        transform: ``rgb -> rgb`` applied on insert (``VideoEncoder.prepare_frame``).
        allocate: Allocator of the host buffer that receives a batch's frames (pinned
            memory for a CUDA upload); numpy by default. None with ``stage=False``.
        camera: The camera whose frames it takes, named in its windows.
        condition: Shared with other cameras' batchers (see :class:`WindowQueue`).
        stage: Allocate a staging buffer for :meth:`next_batch`; False when the batches
            are gathered into another's buffer (:meth:`gather`, several cameras).

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(
        self,
        config: EncoderConfig,
        frame_shape: tuple[int, int],
        transform: FrameTransform | None = None,
        allocate: HostAllocator | None = None,
        *,
        camera: str = "",
        condition: threading.Condition | None = None,
        stage: bool = True,
    ) -> None:
        self._m = config.clip_frames
        self._batch = config.encoder_batch
        self._interval_s = config.encoder_batch_interval_s
        self._camera = camera
        self._queue = WindowQueue(config.encoder_queue, condition)
        # every pending (queue) or taken (batch) window, plus the frames between windows
        spare = (config.encoder_queue + config.encoder_batch) * config.clip_stride
        self._sampler = WindowSampler.from_config(config, frame_shape, transform, spare=spare)
        # a batch's distinct frames: at most B windows of M, and all within the ring
        self.most_frames = min(self._m * self._batch, self._m + spare)
        """The most distinct frames one batch of this camera's windows holds."""
        alloc = allocate or (lambda shape: np.empty(shape, dtype=np.uint8))
        shape = (self.most_frames if stage else 0, frame_shape[0], frame_shape[1], 3)
        self._staging = alloc(shape)
        self._last_start = -float("inf")
        self._overrun = 0
        self.last_window: PendingWindow | None = None
        """The window the latest :meth:`push` queued (None: that frame made none)."""

    @property
    def batch_interval_s(self) -> float:
        """Least seconds between two batch starts (``encoder_batch_interval_s``; live)."""
        return self._interval_s

    @batch_interval_s.setter
    def batch_interval_s(self, value: float) -> None:
        self._interval_s = value

    @property
    def sampler(self) -> WindowSampler:
        """The window sampler (input rate, stride, warm-up) over the ring buffer."""
        return self._sampler

    @property
    def queue(self) -> WindowQueue:
        """The bounded queue of pending windows."""
        return self._queue

    @property
    def dropped(self) -> int:
        """Windows dropped so far: queue overflow plus windows overwritten while queued."""
        return self._queue.dropped + self._overrun

    def push(self, frame: Frame, frame_id: str = "") -> int:
        """Offer one camera frame (camera thread); queue its window, if one is due.

        Args:
            frame: The next frame, stamps increasing.
            frame_id: Carried to the window's output.

        Returns:
            Windows dropped by queue overflow because of this one (0 or 1).

        Raises:
            InputError: See :meth:`WindowSampler.push`; nothing changed then.

        """
        self.last_window = None
        window = self._sampler.push(frame)
        if window is None:
            return 0
        span = window.stamp_ns - self._sampler.buffer.stamp_at(window.first_index)
        pending = PendingWindow(
            window.stamp_ns,
            window.end_index,
            window.first_index,
            window.padded,
            frame_id,
            span,
            self._camera,
        )
        self.last_window = pending
        return self._queue.put(pending)

    def reset(self) -> None:
        """Start a new sequence (time went back); queued windows are still encoded."""
        self._sampler.reset()

    def next_batch(self, timeout: float) -> FrameBatch | None:
        """Take every pending window (up to ``encoder_batch``) and copy their frames once.

        Called by the worker only. With ``encoder_batch_interval_s`` > 0 it first waits
        until that long after the previous batch was taken, so that windows gather.

        Args:
            timeout: Longest wait for a window, seconds.

        Returns:
            The batch, or None when no window came within ``timeout``. Its ``windows``
            are empty when every window taken had been overwritten (``stale``).

        """
        wait = self._last_start + self._interval_s - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, timeout))
            if wait > timeout:
                return None
        taken = self._queue.take(self._batch, timeout)
        if not taken:
            return None
        self._last_start = time.monotonic()
        return self.gather(taken, self._staging)

    def gather(self, taken: list[PendingWindow], out: RgbArray) -> FrameBatch:
        """Copy the distinct frames of windows taken from the queue into ``out``, once.

        Called by the worker only (:meth:`next_batch`, or a batcher of several cameras
        that took the windows itself).

        Args:
            taken: Windows of this camera, oldest first.
            out: Where the frames go, from its first row; room for :attr:`most_frames`.

        Returns:
            The batch: its ``frames`` are the rows of ``out`` written (a view), its
            ``index`` positions within them.

        """
        buffer = self._sampler.buffer
        cap = buffer.capacity
        # windows whose oldest frame is already overwritten cannot be encoded; the rest
        # lie within the ring's newest `cap` frames, so their frames fit the staging buffer
        pushed = buffer.frames_pushed
        windows = [w for w in taken if pushed < w.first_index + cap]
        stale = len(taken) - len(windows)
        self._overrun += stale
        if not windows:
            empty = np.zeros((0, self._m), dtype=np.int64)
            return FrameBatch([], out[:0], empty, np.zeros(0, dtype=bool), stale)
        segments, index = gather_plan(windows, self._m)
        fresh = True
        at = 0
        for first, last in segments:
            fresh &= buffer.copy_frames(first, last, out[at:])
            at += last - first + 1
        valid = np.ones(len(windows), dtype=bool)
        if not fresh:  # overwritten during the copy: judge each window by its oldest frame
            pushed = buffer.frames_pushed
            valid = np.array([pushed < w.first_index + cap for w in windows], dtype=bool)
            self._overrun += int((~valid).sum())
        return FrameBatch(windows, out[:at], index, valid, stale)

    def close(self) -> None:
        """Wake the worker (shutdown)."""
        self._queue.close()
