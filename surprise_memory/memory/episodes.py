"""Episode assembly: the frames around each gated event, taken from a bounded frame history."""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

import numpy as np

from surprise_memory.config import EpisodeConfig
from surprise_memory.errors import InputError
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["EpisodeAssembler", "EpisodeFrames", "FrameHistory", "select_episode_frames"]


@dataclass(frozen=True)
class EpisodeFrames:
    """A trigger and the frames chosen for its episode (time order, the trigger frame included)."""

    trigger: SurpriseTrigger
    frames: tuple[Frame, ...]


class FrameHistory:
    """The camera frames of the last ``seconds`` (at most ``max_frames``), by stamp.

    Frames are held as they came (no copy); older ones leave as new ones arrive. Stamps must
    increase: an older stamp raises :class:`InputError` (the caller decides whether time
    went backwards and clears the history).
    """

    def __init__(self, seconds: float, max_frames: int) -> None:
        self._span_ns = round(seconds * NS_PER_SECOND)
        self._max_frames = max_frames
        self._frames: deque[Frame] = deque()
        self._stamps: deque[int] = deque()

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

    def add(self, frame: Frame) -> None:
        """Add the newest frame; frames older than the span (or over the count) leave."""
        if self._stamps and frame.stamp_ns <= self._stamps[-1]:
            raise InputError(
                f"frame stamp {frame.stamp_ns} ns is not after the newest held "
                f"({self._stamps[-1]} ns)"
            )
        self._frames.append(frame)
        self._stamps.append(frame.stamp_ns)
        while len(self._frames) > self._max_frames or (
            frame.stamp_ns - self._stamps[0] > self._span_ns
        ):
            self._frames.popleft()
            self._stamps.popleft()

    def between(self, start_ns: int, end_ns: int) -> list[Frame]:
        """The held frames with start_ns <= stamp <= end_ns, in time order."""
        lo = bisect.bisect_left(self._stamps, start_ns)
        hi = bisect.bisect_right(self._stamps, end_ns)
        return [self._frames[i] for i in range(lo, hi)]


def select_episode_frames(candidates: list[Frame], trigger_ns: int, count: int) -> list[Frame]:
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
    trigger_index = int(np.argmin(np.abs(stamps - trigger_ns)))
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
        self.history = FrameHistory(c.frame_history_seconds, c.frame_history_max)
        self._pending: deque[SurpriseTrigger] = deque()

    @property
    def config(self) -> EpisodeConfig:
        """The episode settings."""
        return self._config

    @property
    def pending(self) -> int:
        """Triggers waiting for their later frames."""
        return len(self._pending)

    def reset(self) -> None:
        """Forget frames and pending triggers (e.g. time went backwards)."""
        self.history.clear()
        self._pending.clear()

    def add_frame(self, frame: Frame) -> list[EpisodeFrames]:
        """Add a camera frame; return the episodes it completes."""
        self.history.add(frame)
        return self.take_ready()

    def add_trigger(self, trigger: SurpriseTrigger) -> list[EpisodeFrames]:
        """Queue a trigger; return the episodes ready now (its own, if its frames are in)."""
        self._pending.append(trigger)
        return self.take_ready()

    def take_ready(self, now_ns: int | None = None) -> list[EpisodeFrames]:
        """Episodes whose window has been seen (or has timed out at ``now_ns``)."""
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
        return [e for e in ready if e.frames]

    def flush(self) -> list[EpisodeFrames]:
        """Build every pending episode from the frames held (end of stream)."""
        out = [self._build(t) for t in self._pending]
        self._pending.clear()
        return [e for e in out if e.frames]

    def _build(self, trig: SurpriseTrigger) -> EpisodeFrames:
        candidates = self.history.between(
            trig.stamp_ns - self._before_ns, trig.stamp_ns + self._after_ns
        )
        frames = select_episode_frames(candidates, trig.stamp_ns, self._config.episode_frames)
        return EpisodeFrames(trigger=trig, frames=tuple(frames))
