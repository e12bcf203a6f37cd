"""Robot poses by stamp: the pose type and a bounded, time-ordered pose buffer."""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass

__all__ = ["Pose", "PoseBuffer"]


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


def _interpolate(a: Pose, b: Pose, f: float) -> Pose:
    """Linear position, normalised-linear quaternion (shortest arc) between two poses."""
    sign = -1.0 if (a.qx * b.qx + a.qy * b.qy + a.qz * b.qz + a.qw * b.qw) < 0 else 1.0
    q = [
        (1 - f) * qa + f * sign * qb
        for qa, qb in ((a.qx, b.qx), (a.qy, b.qy), (a.qz, b.qz), (a.qw, b.qw))
    ]
    norm = math.sqrt(sum(c * c for c in q)) or 1.0
    return Pose(
        x=a.x + f * (b.x - a.x),
        y=a.y + f * (b.y - a.y),
        z=a.z + f * (b.z - a.z),
        qx=q[0] / norm,
        qy=q[1] / norm,
        qz=q[2] / norm,
        qw=q[3] / norm,
        frame_id=a.frame_id,
    )


class PoseBuffer:
    """The most recent poses by stamp, for "where was the robot at time t".

    Poses are kept in stamp order (an out-of-order pose is inserted in place; a pose older
    than everything held when the buffer is full is dropped). ``lookup`` interpolates
    between the two poses around t when both are within ``max_gap_ns`` of it, else takes
    the nearest one within ``max_gap_ns``, else answers None: a pose far from t in time
    is not the robot's pose at t.

    Args:
        capacity: Poses kept (oldest dropped first).
        max_gap_ns: Largest distance in time between t and a pose used for it.

    """

    def __init__(self, capacity: int = 2000, max_gap_ns: int = 500_000_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: must be >= 1")
        if max_gap_ns < 0:
            raise ValueError(f"max_gap_ns={max_gap_ns}: must be >= 0")
        self._capacity = capacity
        self._max_gap_ns = max_gap_ns
        self._stamps: deque[int] = deque()
        self._poses: deque[Pose] = deque()

    def __len__(self) -> int:
        return len(self._stamps)

    def clear(self) -> None:
        """Forget every pose (e.g. when time jumped back)."""
        self._stamps.clear()
        self._poses.clear()

    def add(self, stamp_ns: int, pose: Pose) -> None:
        """Add the pose at ``stamp_ns``; a pose with a stamp already held replaces it."""
        if not self._stamps or stamp_ns > self._stamps[-1]:  # the usual case: O(1)
            self._stamps.append(stamp_ns)
            self._poses.append(pose)
        else:
            i = bisect.bisect_left(self._stamps, stamp_ns)
            if i < len(self._stamps) and self._stamps[i] == stamp_ns:
                self._poses[i] = pose
                return
            if i == 0 and len(self._stamps) >= self._capacity:
                return  # older than everything in a full buffer
            self._stamps.insert(i, stamp_ns)
            self._poses.insert(i, pose)
        if len(self._stamps) > self._capacity:
            self._stamps.popleft()
            self._poses.popleft()

    def lookup(self, stamp_ns: int) -> Pose | None:
        """The pose at ``stamp_ns`` (interpolated or nearest), or None if none is close enough."""
        n = len(self._stamps)
        if n == 0:
            return None
        i = bisect.bisect_left(self._stamps, stamp_ns)
        if i < n and self._stamps[i] == stamp_ns:
            return self._poses[i]
        before = i - 1 if i > 0 else None
        after = i if i < n else None
        gap = self._max_gap_ns
        if before is not None and after is not None:
            t0, t1 = self._stamps[before], self._stamps[after]
            if stamp_ns - t0 <= gap and t1 - stamp_ns <= gap:
                f = (stamp_ns - t0) / (t1 - t0)
                return _interpolate(self._poses[before], self._poses[after], f)
        near = [
            (abs(self._stamps[j] - stamp_ns), j)
            for j in (before, after)
            if j is not None and abs(self._stamps[j] - stamp_ns) <= gap
        ]
        return self._poses[min(near)[1]] if near else None
