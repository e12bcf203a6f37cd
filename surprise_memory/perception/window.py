"""The encoder's input: a ring of fixed-size frames and the window sampler.

* :class:`FrameRingBuffer`: a preallocated ring of fixed-size frames whose ``latest(m)``
  is one contiguous array *view* (no copy per window).
* :class:`WindowSampler`: the encoder's input policy over a ring buffer (input rate,
  stride, warm-up), one frame in, at most one window out.

Frames by stamp for episodes are held elsewhere, at camera resolution:
:class:`surprise_memory.memory.episodes.FrameHistory`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.frames import Frame, RgbArray
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["FrameRingBuffer", "FrameTransform", "Window", "WindowSampler"]

FrameTransform = Callable[[RgbArray], RgbArray]
"""``rgb -> rgb`` applied to each frame on insert (e.g. the encoder's resize and crop)."""


# --------------------------------------------------------------------------- ring buffer


class FrameRingBuffer:
    """Preallocated ring of the ``capacity`` most recent frames, all of one fixed size.

    Storage is one uint8 array of ``capacity + window - 1`` slots. Frame i goes to slot
    ``i % capacity``; the first ``window - 1`` slots are also mirrored after the end, so
    the last m <= ``window`` frames are always one contiguous slice: :meth:`latest`
    returns a read-only view, with no per-window copy. Memory:
    ``(capacity + window - 1) * height * width * 3`` bytes (64 frames at 256x256 for the
    encoder: 25 MB).

    The size is fixed so that windows are cheap: every frame is brought to
    ``(height, width)`` once, on insert, by ``transform`` (the video encoder passes its
    geometric preprocessing, resize-shortest-edge + centre crop, so a window is already at
    the model's input size). Without a transform, frames must already have that size.

    Args:
        capacity: Frames held (oldest dropped first).
        height: Stored frame height.
        width: Stored frame width.
        window: Largest m that :meth:`latest` serves as a contiguous view (<= capacity).
        transform: Optional ``rgb -> rgb`` applied on insert; its output must be
            (height, width, 3) uint8.

    Raises:
        ConfigError: A size is out of range.

    """

    def __init__(
        self,
        capacity: int,
        height: int,
        width: int,
        *,
        window: int = 1,
        transform: FrameTransform | None = None,
    ) -> None:
        for name, value in (("capacity", capacity), ("height", height), ("width", width)):
            if value < 1:
                raise ConfigError(f"{name}={value}: must be >= 1")
        if not 1 <= window <= capacity:
            raise ConfigError(f"window={window}: must be in 1..capacity={capacity}")
        self._capacity = capacity
        self._window = window
        self._shape = (height, width, 3)
        self._transform = transform
        self._slots = np.zeros((capacity + window - 1, height, width, 3), dtype=np.uint8)
        self._stamps = np.zeros(capacity, dtype=np.int64)
        # Frames are numbered from 0 for the buffer's life (the *index*; ``clear`` does not
        # renumber): frame i lives in slot i % capacity until frame i + capacity is pushed.
        # ``_count`` = frames pushed so far, ``_start`` = index of the current sequence's
        # first frame. Only ``push`` writes ``_count``, and only after the slot is written:
        # :meth:`copy_frames` relies on that order (see there).
        self._count = 0
        self._start = 0

    @property
    def capacity(self) -> int:
        """Frames held at most."""
        return self._capacity

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        """(height, width, 3) of every stored frame."""
        return self._shape

    @property
    def window(self) -> int:
        """Largest m that :meth:`latest` serves."""
        return self._window

    def __len__(self) -> int:
        return min(self._count - self._start, self._capacity)

    @property
    def frames_pushed(self) -> int:
        """Frames pushed over the buffer's life: the index the next frame will get."""
        return self._count

    @property
    def sequence_start(self) -> int:
        """Index of the first frame pushed since the last :meth:`clear`."""
        return self._start

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the newest frame (None when empty)."""
        if self._count == self._start:
            return None
        return int(self._stamps[(self._count - 1) % self._capacity])

    def stamp_at(self, index: int) -> int:
        """Stamp of the frame pushed as ``index`` (valid while it is held)."""
        return int(self._stamps[index % self._capacity])

    def clear(self) -> None:
        """Forget every frame (the storage stays allocated; indices keep counting up).

        Frames of the previous sequence stay readable by index (:meth:`copy_frames`)
        until they are overwritten, so windows already handed to a worker stay valid.
        """
        self._start = self._count

    def push(self, frame: Frame) -> None:
        """Add a frame (after ``transform``), dropping the oldest when full.

        Args:
            frame: The frame; its stamp must be later than the newest held frame's.

        Raises:
            InputError: Stamp not increasing, or the (transformed) frame has the wrong
                size. The buffer is unchanged then.

        """
        last = self.last_stamp_ns
        if last is not None and frame.stamp_ns <= last:
            raise InputError(
                f"frame stamp {frame.stamp_ns} ns is not after the newest buffered frame "
                f"({last} ns); clear() the buffer when time jumps back"
            )
        rgb = frame.rgb if self._transform is None else self._transform(frame.rgb)
        if rgb.shape != self._shape or rgb.dtype != np.uint8:
            raise InputError(
                f"frame of {rgb.dtype} {rgb.shape} does not fit the buffer's {self._shape} uint8"
                + ("" if self._transform is None else " after its transform")
            )
        slot = self._count % self._capacity
        self._slots[slot] = rgb
        if slot < self._window - 1:
            self._slots[self._capacity + slot] = rgb
        self._stamps[slot] = frame.stamp_ns
        self._count += 1  # last: a reader that sees the new count sees the frame

    def latest(self, m: int) -> RgbArray:
        """The m most recent frames, oldest first, as one contiguous read-only view.

        The view is valid until the next ``push`` overwrites its slots (after
        ``capacity - m + 1`` more pushes at the earliest); copy it to keep it longer.

        Args:
            m: Number of frames, 1 <= m <= min(window, len(self)).

        Returns:
            (m, height, width, 3) uint8 view into the buffer.

        Raises:
            InputError: m out of range.

        """
        if not 1 <= m <= min(self._window, len(self)):
            raise InputError(
                f"latest({m}): the buffer holds {len(self)} frames and serves windows of at "
                f"most {self._window}"
            )
        end = (self._count - 1) % self._capacity + 1  # one past the newest slot
        start = end - m
        if start < 0:  # wraps: read the mirror after the end instead
            start += self._capacity
            end += self._capacity
        view = self._slots[start:end]
        view.flags.writeable = False
        return view

    def copy_frames(self, first: int, last: int, out: RgbArray) -> bool:
        """Copy frames ``first..last`` (indices, inclusive) into ``out[: last - first + 1]``.

        Thread rule: one thread pushes (the camera callback) while another copies (the
        encoder worker), without a lock, seqlock style. ``push`` writes the slot first and
        increments the frame count last, so a push that had begun when the copy ended
        shows as a count >= its frame's index. Frame ``first``'s slot is next written by
        frame ``first + capacity``; if the count read after the copy is below that, no push
        touched the slot, nor the younger frames' slots. So only the newest
        ``capacity - 1`` frames can be copied with certainty.

        Args:
            first: Index of the oldest frame to copy.
            last: Index of the newest frame (< :attr:`frames_pushed`).
            out: Destination, (>= last - first + 1, height, width, 3) uint8.

        Returns:
            True when every copied frame is the one asked for; False when some were
            overwritten before or during the copy (then frames from ``first`` up to
            ``frames_pushed - capacity`` (read after the copy) are wrong, the rest right).

        Raises:
            InputError: An index out of range or ``out`` too small.

        """
        n = last - first + 1
        if first < 0 or n < 1 or last >= self._count:
            raise InputError(
                f"copy_frames({first}, {last}): frames 0..{self._count - 1} were pushed"
            )
        if out.shape[0] < n or out.shape[1:] != self._shape:
            raise InputError(f"copy_frames: out of shape {out.shape} cannot take {n} frames")
        lo, cap = first % self._capacity, self._capacity
        head = min(n, cap - lo)
        out[:head] = self._slots[lo : lo + head]
        if head < n:  # the range wraps around the end of the ring
            out[head:n] = self._slots[: n - head]
        return self._count < first + cap


# --------------------------------------------------------------------------- sampler


@dataclass(frozen=True)
class Window:
    """One encoder window decided by :class:`WindowSampler`.

    Attributes:
        stamp_ns: Stamp of the newest frame: the embedding of this window carries it.
        frames: (M, h, w, 3) uint8, oldest first; a read-only view into the ring buffer
            (valid until the next push) or, while padding, a new array.
        padded: Leading frames that repeat the first frame (warm-up 'pad'), else 0.
        end_index: Ring-buffer index of the newest frame (-1 when not from a buffer).
        first_index: Ring-buffer index of the oldest distinct frame; frame j of the
            window is index ``max(end_index - M + 1 + j, first_index)`` (padding repeats
            the sequence's first frame). Workers that copy frames themselves use these.

    """

    stamp_ns: int
    frames: RgbArray
    padded: int = 0
    end_index: int = -1
    first_index: int = -1


class WindowSampler:
    """The encoder's input policy: input rate, window of M frames, stride and warm-up.

    ``push(frame)`` keeps the frame when the input rate allows it (a deadline that advances
    by 1/``input_fps`` per kept frame and never lets two kept frames come closer than half
    a period, so jitter neither drops nor doubles frames), stores it (after ``transform``)
    in a :class:`FrameRingBuffer` of M frames, and returns a :class:`Window` on every
    ``stride``-th kept frame. Before M frames are held, warm-up ``'pad'`` returns windows
    whose missing leading frames repeat the first frame; ``'wait'`` returns nothing until
    the window is full. Stride counts from the first window.

    Args:
        clip_frames: M.
        frame_shape: (h, w) of the stored frames (the encoder's input size).
        stride: Return a window every k-th kept frame.
        input_fps: Keep at most this rate (Hz); 0 keeps every frame.
        warmup: 'pad' or 'wait'.
        transform: ``rgb -> rgb`` of shape ``frame_shape`` (e.g.
            ``VideoEncoder.prepare_frame``).
        spare: Frames held beyond M, so that windows handed to a worker by index stay
            in the buffer while newer frames come (see
            :class:`~surprise_memory.perception.catchup.CatchUpBatcher`).

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(
        self,
        clip_frames: int,
        frame_shape: tuple[int, int],
        *,
        stride: int = 1,
        input_fps: float = 0.0,
        warmup: str = "pad",
        transform: FrameTransform | None = None,
        spare: int = 0,
    ) -> None:
        if spare < 0:
            raise ConfigError(f"spare={spare}: must be >= 0")
        cfg = EncoderConfig(
            clip_frames=clip_frames, clip_stride=stride, input_fps=input_fps, clip_warmup=warmup
        )
        self._m = cfg.clip_frames
        self._stride = cfg.clip_stride
        self._period_ns = 0 if cfg.input_fps == 0 else round(NS_PER_SECOND / cfg.input_fps)
        self._pad = cfg.clip_warmup == "pad"
        self._buffer = FrameRingBuffer(
            self._m + spare, frame_shape[0], frame_shape[1], window=self._m, transform=transform
        )
        self._due_ns = -math.inf
        self._since_window = 0
        self._windows = 0

    @classmethod
    def from_config(
        cls,
        config: EncoderConfig,
        frame_shape: tuple[int, int],
        transform: FrameTransform | None = None,
        spare: int = 0,
    ) -> WindowSampler:
        """Build a sampler from the encoder config (clip_frames, clip_stride, ...)."""
        return cls(
            config.clip_frames,
            frame_shape,
            stride=config.clip_stride,
            input_fps=config.input_fps,
            warmup=config.clip_warmup,
            transform=transform,
            spare=spare,
        )

    @property
    def clip_frames(self) -> int:
        """M, frames per window."""
        return self._m

    @property
    def stride(self) -> int:
        """A window every ``stride``-th kept frame."""
        return self._stride

    @property
    def buffer(self) -> FrameRingBuffer:
        """The ring buffer of the kept frames."""
        return self._buffer

    @property
    def windows_emitted(self) -> int:
        """Windows returned since the last reset."""
        return self._windows

    def reset(self) -> None:
        """Forget every frame (e.g. when time jumps back)."""
        self._buffer.clear()
        self._due_ns = -math.inf
        self._since_window = 0
        self._windows = 0

    def push(self, frame: Frame) -> Window | None:
        """Offer one frame; return the window to encode now, if any.

        Args:
            frame: The next camera frame (stamps increasing).

        Returns:
            A window, or None (frame skipped by the input rate, stride, or warm-up 'wait').

        Raises:
            InputError: Stamp not increasing or frame unusable; the sampler is unchanged.

        """
        if frame.stamp_ns < self._due_ns:
            last = self._buffer.last_stamp_ns
            if last is not None and frame.stamp_ns <= last:
                raise InputError(
                    f"frame stamp {frame.stamp_ns} ns is not after the last kept frame "
                    f"({last} ns); reset() when time jumps back"
                )
            return None
        self._buffer.push(frame)
        if self._period_ns:
            self._due_ns = max(
                self._due_ns + self._period_ns, frame.stamp_ns + self._period_ns // 2
            )
        held = len(self._buffer)
        if held < self._m and not self._pad:
            return None
        if self._windows and self._since_window + 1 < self._stride:
            self._since_window += 1
            return None
        self._since_window = 0
        self._windows += 1
        end = self._buffer.frames_pushed - 1
        if held >= self._m:
            frames = self._buffer.latest(self._m)
            return Window(frame.stamp_ns, frames, 0, end, end - self._m + 1)
        frames = self._buffer.latest(held)
        pad = np.repeat(frames[:1], self._m - held, axis=0)
        padded = self._m - held
        return Window(frame.stamp_ns, np.concatenate([pad, frames]), padded, end, end - held + 1)
