"""Episode assembly: the frames around each gated event, taken from a bounded frame history.

Memory is bounded three ways, whatever the camera: by time (``frame_history_seconds``), by
count (``frame_history_max``) and by bytes (``frame_history_bytes``). Raw frames are
downscaled on arrival to ``frame_history_max_side`` (the stored episode frames are these);
compressed frames are held as their JPEG/PNG bytes and only the few an episode keeps are
decoded. At 1080p and 30 Hz, ten seconds of full-resolution RGB would be 1.9 GB; downscaled
to 640 px they are 207 MB, and as JPEG about 15 MB.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from surprise_memory.config import EpisodeConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.frames import CompressedFrame, Frame
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = [
    "CameraClock",
    "EpisodeAssembler",
    "EpisodeFrames",
    "FrameHistory",
    "HeldFrame",
    "downscale",
    "select_episode_frames",
    "trigger_frame_index",
]

HeldFrame = Frame | CompressedFrame
"""What the frame history holds: decoded pixels, or the bytes of a compressed image."""


def downscale(frame: Frame, max_side: int) -> Frame:
    """The frame with its longer side at most ``max_side`` pixels (area averaging).

    Args:
        frame: The frame.
        max_side: Longest side allowed; 0 keeps the frame as it is.

    Returns:
        ``frame`` itself when it is small enough, else a new, smaller frame.

    """
    h, w = frame.rgb.shape[:2]
    if max_side <= 0 or max(h, w) <= max_side:
        return frame
    import cv2

    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    rgb = cv2.resize(frame.rgb, size, interpolation=cv2.INTER_AREA)
    return Frame(rgb=np.ascontiguousarray(rgb), stamp_ns=frame.stamp_ns, frame_id=frame.frame_id)


def _nbytes(item: HeldFrame) -> int:
    return item.rgb.nbytes if isinstance(item, Frame) else item.nbytes


class CameraClock:
    """The camera's clock "now", estimated from the stamp of the newest frame.

    A pending episode times out when the camera stops, which must be judged in the camera's
    own time base: its stamps may come from another clock than the node's (a camera that
    stamps from its boot, a bag played without ``use_sim_time``). The estimate is the newest
    frame's stamp plus the steady time elapsed since that frame arrived.
    """

    def __init__(self) -> None:
        self._stamp_ns: int | None = None
        self._received_ns = 0

    def observe(self, stamp_ns: int, received_ns: int) -> None:
        """Record a frame's stamp and its arrival on a steady clock (``time.monotonic_ns``)."""
        self._stamp_ns, self._received_ns = stamp_ns, received_ns

    def clear(self) -> None:
        """Forget the newest frame (time went backwards)."""
        self._stamp_ns = None

    @property
    def started(self) -> bool:
        """Whether a frame was observed since the start or the last :meth:`clear`."""
        return self._stamp_ns is not None

    def now(self, steady_now_ns: int) -> int | None:
        """The camera's time at ``steady_now_ns``; None before the first frame."""
        if self._stamp_ns is None:
            return None
        return self._stamp_ns + max(0, steady_now_ns - self._received_ns)


@dataclass(frozen=True)
class EpisodeFrames:
    """A trigger and the frames chosen for its episode (time order, the trigger frame included)."""

    trigger: SurpriseTrigger
    frames: tuple[Frame, ...]


class FrameHistory:
    """The camera frames of the last ``seconds`` (at most ``max_frames`` and ``max_bytes``).

    Raw frames are held downscaled to ``max_side`` (no copy when already small enough),
    compressed ones as their bytes; the oldest leave first when any bound is passed. Stamps
    must increase: an older stamp raises :class:`InputError` (the caller decides whether time
    went backwards and clears the history).

    Args:
        seconds: Time span held, measured back from the newest frame.
        max_frames: Most frames held.
        max_bytes: Most bytes held (pixels or compressed bytes); 0 = no byte bound.
        max_side: Longest side of a held raw frame in pixels; 0 = full resolution.

    """

    def __init__(
        self, seconds: float, max_frames: int, max_bytes: int = 0, max_side: int = 0
    ) -> None:
        self._span_ns = round(seconds * NS_PER_SECOND)
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self._max_side = max_side
        self._frames: deque[HeldFrame] = deque()
        self._stamps: deque[int] = deque()
        self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes held (pixels of raw frames, bytes of compressed ones)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the newest frame, None when empty."""
        return self._stamps[-1] if self._stamps else None

    def clear(self) -> None:
        """Forget every frame."""
        self._frames.clear()
        self._stamps.clear()
        self._bytes = 0

    def add(self, frame: HeldFrame) -> None:
        """Add the newest frame; the oldest leave while the span, count or bytes are passed."""
        if self._stamps and frame.stamp_ns <= self._stamps[-1]:
            raise InputError(
                f"frame stamp {frame.stamp_ns} ns is not after the newest held "
                f"({self._stamps[-1]} ns)"
            )
        if isinstance(frame, Frame):
            frame = downscale(frame, self._max_side)
        self._frames.append(frame)
        self._stamps.append(frame.stamp_ns)
        self._bytes += _nbytes(frame)
        while len(self._frames) > 1 and (
            len(self._frames) > self._max_frames
            or frame.stamp_ns - self._stamps[0] > self._span_ns
            or (self._max_bytes and self._bytes > self._max_bytes)
        ):
            self._bytes -= _nbytes(self._frames.popleft())
            self._stamps.popleft()

    def between(self, start_ns: int, end_ns: int) -> list[HeldFrame]:
        """The held frames with start_ns <= stamp <= end_ns, in time order."""
        lo = bisect.bisect_left(self._stamps, start_ns)
        hi = bisect.bisect_right(self._stamps, end_ns)
        return [self._frames[i] for i in range(lo, hi)]


def trigger_frame_index(
    frame_stamps_ns: Sequence[int] | npt.NDArray[np.int64], trigger_ns: int
) -> int:
    """The index of an episode's trigger frame: its stamp is nearest the trigger stamp.

    The one rule for an episode's picture, wherever one frame stands for it (the browser's
    cards, the display's preview, the report, the export): the assembler always keeps this
    frame (:func:`select_episode_frames`), and it is the frame that surprised.

    Args:
        frame_stamps_ns: The episode's frame stamps, int ns, in order.
        trigger_ns: Its trigger stamp, int ns.

    Returns:
        The index (the earlier of two equally near; 0 for an episode without frames).

    """
    if len(frame_stamps_ns) == 0:
        return 0
    stamps = np.asarray(frame_stamps_ns, dtype=np.int64)
    return int(np.argmin(np.abs(stamps - trigger_ns)))


def select_episode_frames(
    candidates: list[HeldFrame], trigger_ns: int, count: int
) -> list[HeldFrame]:
    """Pick ``count`` frames spread evenly in time over ``candidates``, the trigger's included.

    Targets are ``count`` evenly spaced times over the candidates' span; each takes the
    nearest frame not taken yet. The frame nearest the trigger stamp is always kept (it
    replaces the selected frame closest to it in time). Fewer candidates than ``count``
    gives them all.
    """
    if len(candidates) <= count:
        return list(candidates)
    stamps = np.array([f.stamp_ns for f in candidates], dtype=np.int64)
    targets = np.linspace(stamps[0], stamps[-1], count)
    chosen: list[int] = []
    free = np.ones(len(candidates), dtype=bool)
    for target in targets:
        dist = np.abs(stamps - target).astype(np.float64)
        dist[~free] = np.inf
        i = int(np.argmin(dist))
        chosen.append(i)
        free[i] = False
    trigger_index = trigger_frame_index(stamps, trigger_ns)
    if trigger_index not in chosen:
        nearest = min(chosen, key=lambda i: abs(int(stamps[i]) - trigger_ns))
        chosen[chosen.index(nearest)] = trigger_index
    return [candidates[i] for i in sorted(chosen)]


class EpisodeAssembler:
    """Turns gated triggers into episodes once the frames after each trigger have arrived.

    An episode of trigger t takes ``episode_frames`` frames from
    [t - episode_before_seconds, t + episode_after_seconds]. It is ready when a frame at or
    after the window's end has arrived, or (a camera that stopped) when ``now_ns`` passes
    the window's end by ``episode_timeout_seconds``; then it is built from what is held.
    The frame history must cover the gate's decision delay plus the window: a trigger
    arrives up to ``nms_seconds`` after its stamp.

    Args:
        config: Episode settings (frames per episode, window, history, timeout).
    """

    def __init__(self, config: EpisodeConfig | None = None) -> None:
        self._config = config or EpisodeConfig()
        c = self._config
        self._before_ns = round(c.episode_before_seconds * NS_PER_SECOND)
        self._after_ns = round(c.episode_after_seconds * NS_PER_SECOND)
        self._timeout_ns = round(c.episode_timeout_seconds * NS_PER_SECOND)
        self.history = FrameHistory(
            c.frame_history_seconds,
            c.frame_history_max,
            max_bytes=c.frame_history_bytes,
            max_side=c.frame_history_max_side,
        )
        self._pending: deque[SurpriseTrigger] = deque()
        self._lost: list[SurpriseTrigger] = []

    @property
    def config(self) -> EpisodeConfig:
        """The episode settings."""
        return self._config

    def reconfigure(self, config: EpisodeConfig) -> None:
        """Apply new episode settings live (a node's parameter change).

        Frames per episode, the window before and after a trigger and the timeout apply to
        every episode built from now on, pending triggers included. The frame history's
        size is fixed while it holds frames.

        Raises:
            ConfigError: A frame-history setting differs from the current one.

        """
        history = ("frame_history_seconds", "frame_history_max", "frame_history_bytes")
        for name in (*history, "frame_history_max_side"):
            if getattr(config, name) != getattr(self._config, name):
                raise ConfigError(f"{name} is fixed while the node runs")
        self._config = config
        self._before_ns = round(config.episode_before_seconds * NS_PER_SECOND)
        self._after_ns = round(config.episode_after_seconds * NS_PER_SECOND)
        self._timeout_ns = round(config.episode_timeout_seconds * NS_PER_SECOND)

    @property
    def pending(self) -> int:
        """Triggers waiting for their later frames."""
        return len(self._pending)

    def reset(self) -> None:
        """Forget frames and pending triggers (e.g. time went backwards)."""
        self.history.clear()
        self._lost.extend(self._pending)
        self._pending.clear()

    def take_lost(self) -> list[SurpriseTrigger]:
        """Triggers that gave no episode since the last call, and forget them.

        A trigger is lost when none of its frames is held when it is built (they left the
        history before it came: a slow encoder, a memory node started late) or none of them
        could be decoded, and when a reset drops it while pending.
        """
        lost, self._lost = self._lost, []
        return lost

    def add_frame(self, frame: HeldFrame) -> list[EpisodeFrames]:
        """Add a camera frame; return the episodes it completes."""
        self.history.add(frame)
        return self.take_ready()

    def add_trigger(self, trigger: SurpriseTrigger) -> list[EpisodeFrames]:
        """Queue a trigger; return the episodes ready now (its own, if its frames are in)."""
        self._pending.append(trigger)
        return self.take_ready()

    def take_ready(self, now_ns: int | None = None) -> list[EpisodeFrames]:
        """Episodes whose window has been seen (or has timed out at ``now_ns``).

        Args:
            now_ns: The camera's time now (:meth:`CameraClock.now`), in the time base of the
                frame stamps, not the node's clock; None = no timeout check.

        """
        last = self.history.last_stamp_ns
        ready = []
        keep: deque[SurpriseTrigger] = deque()
        for trig in self._pending:
            end = trig.stamp_ns + self._after_ns
            seen = last is not None and last >= end
            timed_out = now_ns is not None and now_ns >= end + self._timeout_ns
            if seen or timed_out:
                ready.append(self._build(trig))
            else:
                keep.append(trig)
        self._pending = keep
        return self._complete(ready)

    def flush(self) -> list[EpisodeFrames]:
        """Build every pending episode from the frames held (end of stream)."""
        out = [self._build(t) for t in self._pending]
        self._pending.clear()
        return self._complete(out)

    def _complete(self, episodes: list[EpisodeFrames]) -> list[EpisodeFrames]:
        self._lost.extend(e.trigger for e in episodes if not e.frames)
        return [e for e in episodes if e.frames]

    def _build(self, trig: SurpriseTrigger) -> EpisodeFrames:
        candidates = self.history.between(
            trig.stamp_ns - self._before_ns, trig.stamp_ns + self._after_ns
        )
        chosen = select_episode_frames(candidates, trig.stamp_ns, self._config.episode_frames)
        frames = []
        for held in chosen:  # decode only what the episode keeps
            if isinstance(held, Frame):
                frames.append(held)
                continue
            try:
                frames.append(held.decode())
            except InputError:
                continue  # a corrupt image: the episode keeps its other frames
        return EpisodeFrames(trigger=trig, frames=tuple(frames))
