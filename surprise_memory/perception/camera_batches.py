"""One encoder for several cameras: each camera's windows, one catch-up batch for all.

:class:`CameraBatcher` holds one :class:`~surprise_memory.perception.catchup.CatchUpBatcher`
per camera (its own ring buffer, window schedule and bounded queue: a camera's backlog or
drops never touch another's), and one staging buffer. Its worker side,
:meth:`CameraBatcher.next_batch`, waits for a window of *any* camera, takes the pending
windows of every camera in turn (round robin, oldest first within a camera) up to
``encoder_batch`` in all, and copies each camera's distinct frames once into the shared
buffer: one upload and one forward of the model for windows of several cameras. Taking in
turn bounds what a busy camera can hold back of a quiet one: each forward takes at least
one window (``encoder_batch`` >= number of cameras: one each) of every camera that has one
waiting.

With one camera it is exactly the one-camera batcher (the same windows, batches and
drops). A camera that stops publishing only stops having windows; the others go on.

Thread rule: as :class:`~surprise_memory.perception.catchup.CatchUpBatcher`: the camera
callbacks (one executor thread) ``push``; one worker calls ``next_batch``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.catchup import (
    CatchUpBatcher,
    FrameBatch,
    HostAllocator,
    PendingWindow,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.perception.window import FrameTransform

__all__ = ["CameraBatcher"]


class CameraBatcher:
    """The live encoder's input for several cameras: frames in per camera, batches out.

    Args:
        config: The encoder settings (every camera's; see :class:`CatchUpBatcher`).
        cameras: The cameras' names, in order ("" alone: the one unnamed camera).
        frame_shape: (h, w) of the stored frames (the encoder's input size).
        transform: ``rgb -> rgb`` applied on insert (``VideoEncoder.prepare_frame``).
        allocate: Allocator of the shared staging buffer (pinned memory for CUDA).

    Raises:
        ConfigError: No camera, a name twice, or a setting out of range.

    """

    def __init__(
        self,
        config: EncoderConfig,
        cameras: Sequence[str],
        frame_shape: tuple[int, int],
        transform: FrameTransform | None = None,
        allocate: HostAllocator | None = None,
    ) -> None:
        if not cameras or len(set(cameras)) != len(cameras):
            raise ConfigError(f"cameras={list(cameras)!r}: one or more, each named once")
        self._cond = threading.Condition()
        self._closed = False
        self._batch = config.encoder_batch
        self._interval_s = config.encoder_batch_interval_s
        self._last_start = -float("inf")
        self._cameras = {
            name: CatchUpBatcher(
                config, frame_shape, transform, camera=name, condition=self._cond, stage=False
            )
            for name in cameras
        }
        self._turn = 0  # which camera takes first in the next batch
        one = next(iter(self._cameras.values())).most_frames
        # a batch: at most B windows of M frames, and at most each camera's own bound
        most = min(config.clip_frames * config.encoder_batch, len(cameras) * one)
        alloc = allocate or (lambda shape: np.empty(shape, dtype=np.uint8))
        self._staging = alloc((most, frame_shape[0], frame_shape[1], 3))
        self.last_window: PendingWindow | None = None
        """The window the latest :meth:`push` queued (None: that frame made none)."""

    @property
    def cameras(self) -> tuple[str, ...]:
        """The cameras' names, in order."""
        return tuple(self._cameras)

    @property
    def batch_interval_s(self) -> float:
        """Least seconds between two batch starts (``encoder_batch_interval_s``; live)."""
        return self._interval_s

    @batch_interval_s.setter
    def batch_interval_s(self, value: float) -> None:
        self._interval_s = value

    def camera(self, name: str) -> CatchUpBatcher:
        """One camera's batcher (its ring, sampler and queue).

        Raises:
            InputError: No camera of that name.

        """
        try:
            return self._cameras[name]
        except KeyError:
            raise InputError(
                f"camera {name!r} is not one of the encoder's cameras: {', '.join(self._cameras)}"
            ) from None

    @property
    def dropped(self) -> int:
        """Windows dropped so far, every camera's."""
        return sum(c.dropped for c in self._cameras.values())

    def push(self, camera: str, frame: Frame, frame_id: str = "") -> int:
        """Offer one frame of a camera (its stamps increasing); queue its window, if due.

        Returns:
            That camera's windows dropped by queue overflow because of this one (0 or 1).

        Raises:
            InputError: An unknown camera, or as :meth:`CatchUpBatcher.push`.

        """
        batcher = self.camera(camera)
        self.last_window = None
        dropped = batcher.push(frame, frame_id)
        self.last_window = batcher.last_window
        return dropped

    def reset(self, camera: str) -> None:
        """A camera starts a new sequence (its time went back); queued windows stay."""
        self.camera(camera).reset()

    def close(self) -> None:
        """Wake the worker (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for batcher in self._cameras.values():
            batcher.close()

    def _waiting(self) -> bool:
        return any(len(c.queue) for c in self._cameras.values())

    def _take(self) -> list[list[PendingWindow]]:
        """Pending windows of every camera in turn, up to ``encoder_batch`` in all."""
        names = list(self._cameras)
        order = names[self._turn :] + names[: self._turn]
        self._turn = (self._turn + 1) % len(names)
        taken: dict[str, list[PendingWindow]] = {name: [] for name in order}
        room = self._batch
        while room:
            got = 0
            for name in order:
                queue = self._cameras[name].queue
                if room and len(queue) and (one := queue.take(1, 0.0)):
                    taken[name] += one
                    room -= 1
                    got += 1
            if not got:
                break
        return [taken[name] for name in order if taken[name]]

    def next_batch(self, timeout: float) -> FrameBatch | None:
        """Take pending windows of every camera (up to ``encoder_batch``); copy them once.

        Called by the worker only. With ``encoder_batch_interval_s`` > 0 it first waits
        until that long after the previous batch was taken.

        Args:
            timeout: Longest wait for a window, seconds.

        Returns:
            The batch, its windows grouped by camera (each camera's oldest first), or None
            when no window came within ``timeout``.

        """
        wait = self._last_start + self._interval_s - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, timeout))
            if wait > timeout:
                return None
        with self._cond:
            if not self._waiting() and not self._closed:
                self._cond.wait(timeout)
            groups = self._take()
        if not groups:
            return None
        self._last_start = time.monotonic()
        at = 0
        parts = []
        for windows in groups:
            part = self._cameras[windows[0].camera].gather(windows, self._staging[at:])
            parts.append((part, at))
            at += len(part.frames)
        return FrameBatch(
            windows=[w for part, _ in parts for w in part.windows],
            frames=self._staging[:at],
            index=np.concatenate([part.index + offset for part, offset in parts]),
            valid=np.concatenate([part.valid for part, _ in parts]),
            stale=sum(part.stale for part, _ in parts),
        )
