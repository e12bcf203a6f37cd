"""Robot poses by stamp: the pose type, its maths, the lookup rule, and a bounded buffer.

The one implementation of "the pose at stamp t" used by the live scorer node
(:class:`PoseBuffer`, fed by odometry) and by the offline bag lookups
(:class:`surprise_memory.sources.SampledPoseLookup`):

* :func:`interpolate_pose`: linear position, shortest-arc slerp orientation.
* :func:`pose_from_neighbours`: the lookup rule over the samples around t.
* :func:`pose_from_samples`: the same over a sequence of samples in stamp order.
* :func:`compose` and :func:`yaw_of`: chaining poses along a tf tree, and the heading.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from surprise_memory.errors import ConfigError

__all__ = [
    "Pose",
    "PoseBuffer",
    "Sample",
    "compose",
    "interpolate_between",
    "interpolate_pose",
    "pose_from_neighbours",
    "pose_from_samples",
    "yaw_of",
]

Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]  # x, y, z, w (ROS order)


@dataclass(frozen=True)
class Pose:
    """A rigid pose: position in metres and a unit quaternion (x, y, z, w), in ``frame_id``."""

    x: float = 0.0
    y: float = 0.0
    z: float = 0.0
    qx: float = 0.0
    qy: float = 0.0
    qz: float = 0.0
    qw: float = 1.0
    frame_id: str = ""

    @property
    def position(self) -> tuple[float, float, float]:
        """(x, y, z) in metres."""
        return (self.x, self.y, self.z)

    def is_finite(self) -> bool:
        """True when every component is a finite number."""
        return all(
            math.isfinite(v) for v in (self.x, self.y, self.z, self.qx, self.qy, self.qz, self.qw)
        )


Sample = tuple[int, Pose]
"""A pose and its stamp (int nanoseconds)."""


# --------------------------------------------------------------------------- pose maths


def yaw_of(pose: Pose) -> float:
    """Heading about +z in radians (for plots and reports)."""
    x, y, z, w = pose.qx, pose.qy, pose.qz, pose.qw
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def _quat(pose: Pose) -> Quaternion:
    return (pose.qx, pose.qy, pose.qz, pose.qw)


def _make(position: Vector3, q: Quaternion, frame_id: str) -> Pose:
    return Pose(*position, *q, frame_id=frame_id)


def _multiply(a: Quaternion, b: Quaternion) -> Quaternion:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    )


def _rotate(q: Quaternion, v: Vector3) -> Vector3:
    x, y, z, _ = _multiply(_multiply(q, (v[0], v[1], v[2], 0.0)), (-q[0], -q[1], -q[2], q[3]))
    return (x, y, z)


def _normalize(q: Quaternion) -> Quaternion:
    n = math.sqrt(sum(c * c for c in q))
    if n == 0.0 or not math.isfinite(n):
        return (0.0, 0.0, 0.0, 1.0)
    return (q[0] / n, q[1] / n, q[2] / n, q[3] / n)


def _slerp(a: Quaternion, b: Quaternion, f: float) -> Quaternion:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    if dot < 0.0:  # q and -q are the same rotation: take the short way round
        b = (-b[0], -b[1], -b[2], -b[3])
        dot = -dot
    if dot > 0.9995:  # nearly parallel: linear is exact enough and stable
        wa, wb = 1.0 - f, f
    else:
        theta = math.acos(dot)
        s = math.sin(theta)
        wa, wb = math.sin((1.0 - f) * theta) / s, math.sin(f * theta) / s
    return _normalize(
        (wa * a[0] + wb * b[0], wa * a[1] + wb * b[1], wa * a[2] + wb * b[2], wa * a[3] + wb * b[3])
    )


def compose(parent: Pose, child: Pose) -> Pose:
    """Return ``parent * child``, the child pose expressed in the parent's fixed frame.

    ``child`` is expressed in the parent's moving frame: e.g. ``map <- odom`` composed
    with ``odom <- base_link`` gives ``map <- base_link``.
    """
    rotated = _rotate(_quat(parent), child.position)
    position = (parent.x + rotated[0], parent.y + rotated[1], parent.z + rotated[2])
    return _make(position, _normalize(_multiply(_quat(parent), _quat(child))), parent.frame_id)


def interpolate_pose(a: Pose, b: Pose, f: float) -> Pose:
    """The pose a fraction ``f`` of the way from ``a`` to ``b``.

    Args:
        a: The pose at ``f = 0`` (its ``frame_id`` is kept).
        b: The pose at ``f = 1``.
        f: Fraction, 0..1 (not checked; outside it extrapolates).

    Returns:
        Linear position; orientation by slerp along the shorter arc (``b``'s quaternion
        is negated when the two are more than 180 degrees apart as 4-vectors), normalised.

    """
    position = (a.x + f * (b.x - a.x), a.y + f * (b.y - a.y), a.z + f * (b.z - a.z))
    return _make(position, _slerp(_quat(a), _quat(b), f), a.frame_id)


def interpolate_between(before: Sample, after: Sample, stamp_ns: int) -> Pose:
    """Pose at ``stamp_ns`` between two samples (see :func:`interpolate_pose`)."""
    (t0, a), (t1, b) = before, after
    f = 0.0 if t1 <= t0 else (stamp_ns - t0) / (t1 - t0)
    return interpolate_pose(a, b, f)


# --------------------------------------------------------------------------- lookup rule


def pose_from_neighbours(
    stamp_ns: int,
    before: Sample | None,
    after: Sample | None,
    max_gap_ns: int,
    *,
    interpolate: bool = True,
) -> Pose | None:
    """The pose at ``stamp_ns`` from the samples around it, or ``None`` if none is close.

    The rule: a sample at exactly ``stamp_ns`` is returned as it is; with ``interpolate``,
    when both neighbours are within ``max_gap_ns`` of ``stamp_ns``, the pose is
    interpolated between them; otherwise the nearer neighbour within ``max_gap_ns`` is
    returned (``before`` on a tie); otherwise ``None``: a pose far from t in time is not
    the robot's pose at t. No extrapolation.

    Args:
        stamp_ns: The query stamp.
        before: The last sample at or before ``stamp_ns`` (``None``: none).
        after: The first sample after ``stamp_ns`` (``None``: none).
        max_gap_ns: Largest distance in time between ``stamp_ns`` and a sample used.
        interpolate: Interpolate between the neighbours (else nearest only).

    Returns:
        The pose, or ``None``.

    """
    near = [s for s in (before, after) if s is not None and abs(s[0] - stamp_ns) <= max_gap_ns]
    if not near:
        return None
    if near[0][0] == stamp_ns:
        return near[0][1]
    if interpolate and len(near) == 2:
        return interpolate_between(near[0], near[1], stamp_ns)
    return min(near, key=lambda s: abs(s[0] - stamp_ns))[1]


def _stamp(sample: Sample) -> int:
    return sample[0]


def pose_from_samples(
    samples: Sequence[Sample], stamp_ns: int, max_gap_ns: int, *, interpolate: bool = True
) -> Pose | None:
    """:func:`pose_from_neighbours` over ``samples`` in strictly increasing stamp order."""
    i = bisect.bisect_right(samples, stamp_ns, key=_stamp)  # samples[i-1] <= t < samples[i]
    before = samples[i - 1] if i > 0 else None
    after = samples[i] if i < len(samples) else None
    return pose_from_neighbours(stamp_ns, before, after, max_gap_ns, interpolate=interpolate)


# --------------------------------------------------------------------------- buffer


class PoseBuffer:
    """The most recent poses by stamp, for "where was the robot at time t".

    Poses are kept in stamp order (an out-of-order pose is inserted in place; a pose older
    than everything held when the buffer is full is dropped). ``lookup`` follows
    :func:`pose_from_neighbours`: interpolated between the two poses around t when both
    are within ``max_gap_ns`` of it, else the nearest one within ``max_gap_ns``, else None.

    Args:
        capacity: Poses kept (oldest dropped first).
        max_gap_ns: Largest distance in time between t and a pose used for it.

    Raises:
        ConfigError: ``capacity`` < 1 or ``max_gap_ns`` < 0.

    """

    def __init__(self, capacity: int = 2000, max_gap_ns: int = 500_000_000) -> None:
        if capacity < 1:
            raise ConfigError(f"capacity={capacity}: must be >= 1")
        if max_gap_ns < 0:
            raise ConfigError(f"max_gap_ns={max_gap_ns}: must be >= 0")
        self._capacity = capacity
        self._max_gap_ns = max_gap_ns
        self._samples: deque[Sample] = deque()

    @property
    def max_gap_ns(self) -> int:
        """Largest distance in time between a stamp and a pose used for it (may change)."""
        return self._max_gap_ns

    @max_gap_ns.setter
    def max_gap_ns(self, value: int) -> None:
        if value < 0:
            raise ConfigError(f"max_gap_ns={value}: must be >= 0")
        self._max_gap_ns = value

    def __len__(self) -> int:
        return len(self._samples)

    def clear(self) -> None:
        """Forget every pose (e.g. when time jumped back)."""
        self._samples.clear()

    def add(self, stamp_ns: int, pose: Pose) -> None:
        """Add the pose at ``stamp_ns``; a pose with a stamp already held replaces it."""
        held = self._samples
        sample = (int(stamp_ns), pose)
        if not held or sample[0] > held[-1][0]:  # the usual case: O(1)
            held.append(sample)
        else:
            i = bisect.bisect_left(held, sample[0], key=_stamp)
            if i < len(held) and held[i][0] == sample[0]:
                held[i] = sample
                return
            if i == 0 and len(held) >= self._capacity:
                return  # older than everything in a full buffer
            held.insert(i, sample)
        if len(held) > self._capacity:
            held.popleft()

    @property
    def latest(self) -> Sample | None:
        """The newest pose held and its stamp, or None when empty (O(1))."""
        return self._samples[-1] if self._samples else None

    def lookup(self, stamp_ns: int) -> Pose | None:
        """The pose at ``stamp_ns`` (interpolated or nearest), or None if none is close enough."""
        return pose_from_samples(self._samples, int(stamp_ns), self._max_gap_ns)
