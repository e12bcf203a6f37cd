"""Time in the core: integer nanoseconds, and the one place that converts to and from them.

Every stamp in the core is an ``int`` of nanoseconds (since the epoch for ROS and bag
stamps, since the start of the stream for videos), as in ``rosbags``. Message stamps
(``builtin_interfaces/Time``, from rclpy or deserialised from a bag) are converted here,
duck-typed on ``sec`` and ``nanosec``, so this module needs no ROS.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from surprise_memory.errors import InputError

__all__ = [
    "NS_PER_SECOND",
    "duration_text",
    "ns_to_seconds",
    "parse_time",
    "seconds_to_ns",
    "split_ns",
    "stamp_to_ns",
]

NS_PER_SECOND = 1_000_000_000
"""Nanoseconds in one second."""


def seconds_to_ns(seconds: float) -> int:
    """Seconds (float) -> int nanoseconds, rounded to nearest."""
    return round(seconds * NS_PER_SECOND)


def ns_to_seconds(ns: int) -> float:
    """Int nanoseconds -> float seconds."""
    return ns / NS_PER_SECOND


def duration_text(seconds: float) -> str:
    """A length of time as a person reads it: its two largest units (``3 h 12 min``).

    ``45 s``, ``12 min 5 s``, ``3 h 12 min``, ``12 d 4 h``; a negative length reads as its
    magnitude (the caller says which way); not finite reads ``unknown``.
    """
    if not math.isfinite(seconds):
        return "unknown"
    whole = round(abs(seconds))
    minutes, s = divmod(whole, 60)
    hours, m = divmod(minutes, 60)
    days, h = divmod(hours, 24)
    units = [(days, "d"), (h, "h"), (m, "min"), (s, "s")]
    first = next((i for i, (n, _) in enumerate(units) if n), len(units) - 1)
    shown = [f"{n} {u}" for n, u in units[first : first + 2] if n]
    return " ".join(shown) or "0 s"


def stamp_to_ns(stamp: Any) -> int:
    """A message stamp (``sec``, ``nanosec``; rclpy or rosbags) -> int nanoseconds."""
    return int(stamp.sec) * NS_PER_SECOND + int(stamp.nanosec)


def split_ns(ns: int) -> tuple[int, int]:
    """Int nanoseconds -> ``(sec, nanosec)`` of a ``builtin_interfaces/Time`` (negative -> 0)."""
    ns = max(int(ns), 0)
    return ns // NS_PER_SECOND, ns % NS_PER_SECOND


_REL_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?s?$")
_NS_RE = re.compile(r"^\d+ns$")
# Python 3.10's datetime.fromisoformat reads a fraction of 3 or 6 digits only, and no "Z"
_ISO_FRACTION_RE = re.compile(r"(\d{2}:\d{2}:\d{2})[.,](\d+)")


def parse_time(text: str, origin_ns: int | None) -> int:
    """Parse a time given by a person to int nanoseconds since the epoch.

    * ``12.5`` or ``12.5s``: seconds from the recording's origin ``origin_ns``;
    * ``1700000012500000000ns``: an absolute stamp in integer nanoseconds;
    * ``2023-11-14T22:13:32.5Z`` (ISO 8601 with a time zone): an absolute time.

    Raises:
        InputError: Unparseable, or relative while there is no origin.

    """
    value = text.strip()
    if _NS_RE.match(value):
        return _in_range(int(value[:-2]), text)
    if _REL_RE.match(value):
        if origin_ns is None:
            raise InputError(f"time {text!r} is relative, but the store has no episode yet")
        seconds = float(value.rstrip("s"))
        if not math.isfinite(seconds) or abs(seconds) > _MAX_NS / NS_PER_SECOND:
            _in_range(_MAX_NS + 1, text)  # 1e999 (inf) or 1e300: past any stamp
        return _in_range(origin_ns + seconds_to_ns(seconds), text)
    try:
        when = datetime.fromisoformat(_iso_for_fromisoformat(value))
    except ValueError:
        raise InputError(
            f"time {text!r}: expected seconds from the recording start (12.5), nanoseconds "
            "since the epoch (1700000012500000000ns) or ISO 8601 with a zone "
            "(2023-11-14T22:13:32Z)"
        ) from None
    if when.tzinfo is None:
        raise InputError(f"time {text!r}: an ISO 8601 time needs a zone (Z or +01:00)")
    seconds = int(when.timestamp())
    return seconds * NS_PER_SECOND + when.microsecond * 1000


_MAX_NS = 2**63 - 1  # a stamp is a signed 64-bit count of nanoseconds (ROS, the stores)


def _in_range(ns: int, text: str) -> int:
    if not -_MAX_NS <= ns <= _MAX_NS:
        raise InputError(
            f"time {text!r}: outside the stamps a store can hold (at most {_MAX_NS} ns from "
            "the epoch)"
        )
    return ns


def _iso_for_fromisoformat(value: str) -> str:
    """ISO 8601 as Python 3.10's ``fromisoformat`` reads it.

    "Z" becomes "+00:00" and the fraction is padded or cut to microseconds, as Python
    3.11+ does by itself.
    """
    value = value.replace("Z", "+00:00")
    return _ISO_FRACTION_RE.sub(lambda m: f"{m[1]}.{(m[2] + '00000')[:6]}", value, count=1)
