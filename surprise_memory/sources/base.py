"""What every offline frame source shares: the protocol, the counters, fps subsampling."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from surprise_memory.errors import ConfigError
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["FrameSource", "SourceStats", "Subsampler", "check_fps"]

_LOG = logging.getLogger("surprise_memory.sources")
WARN_LIMIT = 5
"""Skipped items of one kind that are logged one by one; the rest are only counted."""


@dataclass
class SourceStats:
    """Counters of one pass over a source (reset when a new pass starts).

    Attributes:
        read: Image messages or decoded video frames read.
        yielded: Frames handed out.
        subsampled: Frames left out by the ``fps`` setting.
        bad: Frames skipped because they could not be converted (unknown encoding, zero
            size, truncated or undecodable data).
        zero_stamp: Frames whose header stamp was zero and which got the bag's log
            (receive) time instead.
        out_of_order: Frames dropped because their stamp was not after the previous
            frame's, beyond what the reorder buffer could repair (duplicates included).

    """

    read: int = 0
    yielded: int = 0
    subsampled: int = 0
    bad: int = 0
    zero_stamp: int = 0
    out_of_order: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a plain dict (for the run summary)."""
        return asdict(self)


@runtime_checkable
class FrameSource(Protocol):
    """An offline stream of frames in strictly increasing stamp order.

    Iterating reads the input from the start each time, in constant memory, and resets
    :attr:`stats`. Bad items are skipped and counted, never raised.
    """

    @property
    def path(self) -> Path:
        """The input file or folder."""
        ...

    @property
    def stream_name(self) -> str:
        """The image topic of a bag, or ``video:<index>`` for a video file."""
        ...

    @property
    def duration_ns(self) -> int | None:
        """Length of the input in nanoseconds, ``None`` when unknown."""
        ...

    @property
    def estimated_frames(self) -> int | None:
        """Frames a pass is expected to yield (after fps subsampling), ``None`` if unknown.

        An estimate for a progress bar, not a promise: bad and dropped frames are not
        foreseen.
        """
        ...

    @property
    def stats(self) -> SourceStats:
        """Counters of the current or last pass."""
        ...

    def describe(self) -> str:
        """One line naming the input, stream, duration and frame count, for the CLI."""
        ...

    def __iter__(self) -> Iterator[Frame]:
        """Yield the frames, stamps strictly increasing."""
        ...


def check_fps(fps: float | None) -> float | None:
    """Validate an fps setting: ``None`` or 0 (keep all frames) or a positive rate.

    Raises:
        ConfigError: Negative, not finite, or not a number.

    """
    if fps is None:
        return None
    if isinstance(fps, bool) or not isinstance(fps, int | float):
        raise ConfigError(f"fps={fps!r}: must be a number (frames per second) or None")
    if not math.isfinite(fps) or fps < 0:
        raise ConfigError(f"fps={fps!r}: must be a finite number >= 0 (0 or None keeps all)")
    return float(fps) if fps > 0 else None


class Subsampler:
    """Keeps at most one frame per 1/fps slot, slots counted from the first frame's stamp.

    Slots on a fixed grid (not "period since the last kept frame") keep the average rate
    exact over long inputs even when the source rate is not a multiple of ``fps``; the
    first frame of each slot is kept.

    Args:
        fps: Target rate; ``None`` keeps every frame.

    """

    def __init__(self, fps: float | None) -> None:
        self._period_ns = None if fps is None else max(1, round(NS_PER_SECOND / fps))
        self._origin: int | None = None
        self._last_slot = -1

    def keep(self, stamp_ns: int) -> bool:
        """Return whether the frame at ``stamp_ns`` (stamps increasing) is kept."""
        if self._period_ns is None:
            return True
        if self._origin is None:
            self._origin = stamp_ns
        slot = (stamp_ns - self._origin) // self._period_ns
        if slot > self._last_slot:
            self._last_slot = slot
            return True
        return False


def estimate_frames(count: int | None, duration_ns: int | None, fps: float | None) -> int | None:
    """Frames expected after subsampling ``count`` frames spread over ``duration_ns``."""
    if count is None:
        return None
    if fps is None or duration_ns is None:
        return count
    return min(count, int(duration_ns * fps // NS_PER_SECOND) + 1)


class SkipLog:
    """Logs the first few skipped items of each kind, then only counts them."""

    def __init__(self, source: str) -> None:
        self._source = source
        self._seen: dict[str, int] = {}

    def skip(self, kind: str, message: str) -> None:
        """Record one skipped item of ``kind`` and log it if it is among the first few."""
        n = self._seen.get(kind, 0) + 1
        self._seen[kind] = n
        if n <= WARN_LIMIT:
            more = " (further ones are counted, not logged)" if n == WARN_LIMIT else ""
            _LOG.warning("%s: skipped %s: %s%s", self._source, kind, message, more)

    def summary(self, stats: SourceStats) -> None:
        """Log one line with the totals at the end of a pass, if anything was skipped."""
        if stats.bad or stats.out_of_order or stats.zero_stamp:
            _LOG.warning(
                "%s: %d frames yielded of %d read; %d bad, %d out of order, "
                "%d with a zero header stamp (log time used)",
                self._source,
                stats.yielded,
                stats.read,
                stats.bad,
                stats.out_of_order,
                stats.zero_stamp,
            )
