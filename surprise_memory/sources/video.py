"""Frames from a video file (mp4, avi, mkv, webm, mov), decoded with PyAV.

Stamps come from the container's presentation times, ``pts * time_base``, converted
exactly to integer nanoseconds (plus an optional ``start_ns`` offset, e.g. the wall time
the recording began), never from frame counts: variable-frame-rate files (phones, screen
recorders) keep their true timing. A frame without a pts gets the previous stamp plus
one nominal frame interval, counted in ``stats.zero_stamp``. Packets that fail to decode
are skipped and counted (``stats.bad``); frames whose stamp does not increase are
dropped (``stats.out_of_order``).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.frames import Frame
from surprise_memory.sources.base import (
    SkipLog,
    SourceStats,
    Subsampler,
    check_fps,
    estimate_frames,
)
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["VIDEO_SUFFIXES", "VideoSource"]

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm")
"""File suffixes :func:`surprise_memory.sources.open_source` treats as video."""


def _to_ns(ticks: int, time_base: Fraction) -> int:
    """``ticks * time_base`` seconds as int nanoseconds, rounded to nearest, exactly."""
    value = Fraction(ticks) * time_base * NS_PER_SECOND
    return int(value.numerator * 2 + value.denominator) // (2 * value.denominator)


class VideoSource:
    """Frames of one video stream of a file, stamped by presentation time.

    Args:
        path: The video file.
        fps: Keep at most this many frames per second of stamps (``None``/0: all).
        stream_index: Which video stream (0: the first).
        start_ns: Added to every stamp (the presentation time starts near 0).
        threads: Let FFmpeg decode with several threads.

    Raises:
        InputError: The file is missing, cannot be opened, or has no such video stream.
        ConfigError: ``fps`` or ``stream_index`` is out of range.

    """

    def __init__(
        self,
        path: str | Path,
        *,
        fps: float | None = None,
        stream_index: int = 0,
        start_ns: int = 0,
        threads: bool = True,
    ) -> None:
        if stream_index < 0:
            raise ConfigError(f"stream_index={stream_index}: must be >= 0")
        self._path = Path(path)
        self._fps = check_fps(fps)
        self._index = int(stream_index)
        self._start_ns = int(start_ns)
        self._threads = threads
        self._stats = SourceStats()
        with self._open() as container:
            stream = self._stream(container)
            self._codec = str(stream.codec_context.name)
            self._width = int(stream.codec_context.width)
            self._height = int(stream.codec_context.height)
            self._time_base = Fraction(stream.time_base) if stream.time_base else None
            rate = stream.average_rate or stream.guessed_rate
            self._rate = float(rate) if rate else None
            self._duration_ns = self._read_duration(container, stream)
            guessed = stream.guessed_rate or rate
            self._frames = self._count_frames(
                int(stream.frames or 0), self._duration_ns, float(guessed) if guessed else None
            )

    def _open(self) -> Any:
        if not self._path.is_file():
            raise InputError(f"video file {str(self._path)!r} does not exist")
        try:
            return av.open(str(self._path), mode="r")
        except av.error.FFmpegError as err:
            raise InputError(f"cannot open video {str(self._path)!r}: {err}") from err

    def _stream(self, container: Any) -> Any:
        streams = container.streams.video
        if self._index >= len(streams):
            raise InputError(
                f"video {str(self._path)!r} has {len(streams)} video stream(s); "
                f"stream_index={self._index} was asked for"
            )
        return streams[self._index]

    @staticmethod
    def _count_frames(declared: int, duration_ns: int | None, rate: float | None) -> int | None:
        """The container's frame count, unless duration * rate says it is implausible.

        Some containers declare none (mkv, webm), and AVI counts time slots, not frames,
        when the time base is finer than the frame rate.
        """
        estimate = (
            round(duration_ns * rate / NS_PER_SECOND) if duration_ns is not None and rate else None
        )
        if declared > 0 and (estimate is None or declared <= 2 * estimate + 1):
            return declared
        return estimate

    @staticmethod
    def _read_duration(container: Any, stream: Any) -> int | None:
        if stream.duration and stream.time_base:
            return _to_ns(int(stream.duration), Fraction(stream.time_base))
        if container.duration:  # in microseconds (AV_TIME_BASE)
            return int(container.duration) * 1000
        return None

    # --- metadata -----------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The video file."""
        return self._path

    @property
    def stream_name(self) -> str:
        """``video:<stream index>``."""
        return f"video:{self._index}"

    @property
    def duration_ns(self) -> int | None:
        """Duration from the container, ``None`` when it does not say."""
        return self._duration_ns

    @property
    def frame_count(self) -> int | None:
        """Frames in the stream (from the container, else duration * average rate)."""
        return self._frames

    @property
    def estimated_frames(self) -> int | None:
        """Frames a pass should yield after subsampling (an estimate for a progress bar)."""
        return estimate_frames(self._frames, self._duration_ns, self._fps)

    @property
    def average_rate(self) -> float | None:
        """Average frame rate the container declares."""
        return self._rate

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) of the decoded frames."""
        return (self._width, self._height)

    @property
    def fps(self) -> float | None:
        """The subsampling rate, ``None`` when every frame is kept."""
        return self._fps

    @property
    def stats(self) -> SourceStats:
        """Counters of the current or last pass."""
        return self._stats

    def describe(self) -> str:
        """One line: file, codec, size, duration and frame count."""
        seconds = (
            f"{self._duration_ns / NS_PER_SECOND:.1f} s" if self._duration_ns is not None else "? s"
        )
        frames = self._frames if self._frames is not None else "?"
        rate = f", subsampled to {self._fps:g} fps" if self._fps else ""
        return (
            f"video {self._path} ({self._codec} {self._width}x{self._height}): "
            f"{frames} frames over {seconds}{rate}"
        )

    # --- frames -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Frame]:
        """Yield the frames in strictly increasing presentation-time order."""
        stats = self._stats = SourceStats()
        skips = SkipLog(str(self._path))
        subsampler = Subsampler(self._fps)
        step_ns = round(NS_PER_SECOND / self._rate) if self._rate else 0
        last: int | None = None
        with self._open() as container:
            stream = self._stream(container)
            if self._threads:
                stream.thread_type = "AUTO"
            time_base = (
                Fraction(stream.time_base) if stream.time_base else Fraction(1, NS_PER_SECOND)
            )
            try:
                for packet in container.demux(stream):
                    try:
                        frames = packet.decode()
                    except av.error.FFmpegError as err:
                        stats.bad += 1
                        skips.skip("undecodable packet", f"pts {packet.pts}: {err}")
                        continue
                    for frame in frames:
                        stats.read += 1
                        if frame.pts is None:
                            stats.zero_stamp += 1
                            skips.skip("frame without pts", "previous stamp + 1/rate used")
                            stamp_ns = (last - self._start_ns + step_ns) if last is not None else 0
                        else:
                            stamp_ns = _to_ns(int(frame.pts), time_base)
                        stamp_ns += self._start_ns
                        if last is not None and stamp_ns <= last:
                            stats.out_of_order += 1
                            skips.skip("out-of-order frame", f"{stamp_ns} ns after {last} ns")
                            continue
                        last = stamp_ns
                        if not subsampler.keep(stamp_ns):
                            stats.subsampled += 1
                            continue
                        rgb = frame.to_ndarray(format="rgb24")
                        if rgb.size == 0:
                            stats.bad += 1
                            skips.skip("bad frame", f"stamp {stamp_ns} ns has zero size")
                            continue
                        stats.yielded += 1
                        yield Frame(rgb=rgb, stamp_ns=stamp_ns, frame_id="")
            except av.error.FFmpegError as err:  # a broken container ends the file early
                stats.bad += 1
                skips.skip("unreadable container", str(err))
            finally:
                skips.summary(stats)
