"""How far a stored pose can be trusted: its position uncertainty and the map it is on.

* :func:`position_sigma_m`: a ROS pose covariance (6x6, row-major: x, y, z, roll, pitch,
  yaw) -> the pose's horizontal 1-sigma position uncertainty in metres, the square root of
  the largest eigenvalue of its xy block (the semi-major axis of the 1-sigma ellipse on
  the ground), or None where the covariance says nothing (ROS's "unknown": a first entry
  of -1, or an xy block of zeros, which drivers leave when they do not estimate it).
* :class:`PoseTrust`: what an episode keeps of it (``sigma_m``, ``map_id``; None and ""
  = unknown: a tf pose, or a store older than these fields), and the two stores' columns
  (:data:`TRUST_COLUMNS`, :func:`trust_values`, :func:`trust_from_row`).
* :class:`SigmaBuffer`: a source's uncertainties by stamp (bounded), for the scorer's pose
  source to give an event's pose its uncertainty.
* :class:`TrustRule` and :func:`trust_refusal`: ``goto``'s rule: an episode from another
  map, or whose uncertainty exceeds ``max_goal_uncertainty_m``, gets no goal unless the
  caller overrides; an unknown map or uncertainty is not refused (nothing says it is
  wrong), and the goal's note says it is unknown.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from surprise_memory.errors import InputError

__all__ = [
    "TRUST_COLUMNS",
    "PoseTrust",
    "SigmaBuffer",
    "TrustRule",
    "check_pose_trust",
    "position_sigma_m",
    "trust_from_row",
    "trust_refusal",
    "trust_values",
]

_MAP_ID_MAX = 256


def position_sigma_m(covariance: Sequence[float]) -> float | None:
    """The horizontal 1-sigma position uncertainty of a ROS pose covariance, in metres.

    Args:
        covariance: The 36 entries of a ``PoseWithCovariance.covariance`` (row-major 6x6 over
            x, y, z, rotation about x, y, z).

    Returns:
        sqrt of the largest eigenvalue of the xy block, or None when it is unknown: a
        first entry of -1 (ROS's convention), an all-zero xy block, or a block that is
        not finite.

    Raises:
        InputError: Not 36 entries.

    """
    if len(covariance) != 36:
        raise InputError(f"pose covariance has {len(covariance)} entries: expected 36 (6x6)")
    xx, xy, yx, yy = (float(covariance[i]) for i in (0, 1, 6, 7))
    if xx == -1.0 or not all(math.isfinite(v) for v in (xx, xy, yx, yy)):
        return None
    if xx == xy == yx == yy == 0.0:
        return None
    off = 0.5 * (xy + yx)  # symmetric by definition; average any rounding apart
    half_trace, half_diff = 0.5 * (xx + yy), 0.5 * (xx - yy)
    largest = half_trace + math.hypot(half_diff, off)
    return math.sqrt(max(largest, 0.0))


@dataclass(frozen=True)
class PoseTrust:
    """An episode's pose trust.

    Attributes:
        sigma_m: Horizontal 1-sigma position uncertainty in metres
            (:func:`position_sigma_m`); None = unknown.
        map_id: The map the pose is on (the ``map_id`` setting when it was stored); "" =
            unknown.

    """

    sigma_m: float | None = None
    map_id: str = ""

    def describe(self) -> str:
        """One line for people: ``±0.12 m (1σ) on map 'lab'``, unknowns said as such."""
        sigma = "uncertainty unknown" if self.sigma_m is None else f"±{self.sigma_m:.2f} m (1σ)"
        where = f"map {self.map_id!r}" if self.map_id else "map unknown"
        return f"{sigma}, {where}"

    def as_json(self) -> dict[str, float | str | None]:
        """As the agent tools give it: ``pose_uncertainty_m`` (1σ, m) and ``map``, or null."""
        sigma = None if self.sigma_m is None else round(self.sigma_m, 3)
        return {"pose_uncertainty_m": sigma, "map": self.map_id or None}

    def brief(self) -> str:
        """The known parts only, for a label (``±0.12 m  map lab``); "" when both are unknown."""
        parts = [] if self.sigma_m is None else [f"±{self.sigma_m:.2f} m"]
        return "  ".join(parts + ([f"map {self.map_id}"] if self.map_id else []))


def check_pose_trust(trust: PoseTrust) -> PoseTrust:
    """Check an add's trust: a finite sigma >= 0 (or None), a short printable map id.

    Returns:
        The trust.

    Raises:
        InputError: Not a :class:`PoseTrust`, or a field breaks its rule.

    """
    if not isinstance(trust, PoseTrust):
        raise InputError(f"pose_trust is a {type(trust).__name__}: expected a PoseTrust")
    sigma = trust.sigma_m
    if sigma is not None and (
        not isinstance(sigma, int | float) or not math.isfinite(sigma) or sigma < 0
    ):
        raise InputError(f"pose uncertainty {sigma!r}: must be a finite number >= 0 m or None")
    map_id = trust.map_id
    if not isinstance(map_id, str) or len(map_id) > _MAP_ID_MAX or not map_id.isprintable():
        raise InputError(f"map_id {map_id!r}: must be a printable string (at most 256)")
    return trust


TRUST_COLUMNS = "pose_sigma_m, map_id"
"""The trust's columns of both stores' ``episodes``, in row order (sigma NULL = unknown)."""


def trust_values(trust: PoseTrust) -> tuple[float | None, str]:
    """The row values of a trust, in :data:`TRUST_COLUMNS` order."""
    return (None if trust.sigma_m is None else float(trust.sigma_m), trust.map_id)


def trust_from_row(values: Sequence[object]) -> PoseTrust:
    """The trust of a row's :data:`TRUST_COLUMNS` values."""
    sigma, map_id = values
    return PoseTrust(None if sigma is None else float(sigma), str(map_id or ""))  # type: ignore[arg-type]


class SigmaBuffer:
    """A pose source's uncertainties by stamp: the newest ``capacity`` samples.

    Args:
        capacity: Samples kept (the oldest go first).

    """

    def __init__(self, capacity: int = 2000) -> None:
        self._samples: deque[tuple[int, float | None, str]] = deque(maxlen=capacity)

    def add(self, stamp_ns: int, sigma_m: float | None, frame_id: str) -> None:
        """One sample: its stamp, uncertainty (None = unknown) and the frame of its pose."""
        self._samples.append((stamp_ns, sigma_m, frame_id))

    def nearest(self, stamp_ns: int, max_gap_ns: int) -> float | None:
        """The uncertainty of the sample nearest the stamp within ``max_gap_ns``, else None."""
        best, gap = None, max_gap_ns
        for stamp, sigma, _ in self._samples:
            if abs(stamp - stamp_ns) <= gap:
                best, gap = sigma, abs(stamp - stamp_ns)
        return best

    def latest_at(self, stamp_ns: int, frame_id: str) -> float | None:
        """The uncertainty of the newest sample at or before the stamp in ``frame_id``.

        A localiser (AMCL) publishes when its estimate changes, so its newest estimate is
        its belief until the next one, however old.
        """
        for stamp, sigma, frame in reversed(self._samples):
            if stamp <= stamp_ns and frame == frame_id:
                return sigma
        return None

    def clear(self) -> None:
        """Forget every sample (time went backwards)."""
        self._samples.clear()


@dataclass(frozen=True)
class TrustRule:
    """What ``goto`` trusts.

    Attributes:
        map_id: The map the robot is on now ("" = unknown: no episode is refused for its map).
        max_sigma_m: Largest accepted uncertainty, metres (0 = no limit).
        override: Go anyway (the caller said so, e.g. ``--trust-pose``).

    """

    map_id: str = ""
    max_sigma_m: float = 0.0
    override: bool = False


def trust_refusal(trust: PoseTrust, rule: TrustRule) -> str | None:
    """Why an episode's pose is not trusted as a goal, in one line; None = trusted.

    Args:
        trust: The episode's.
        rule: The caller's.

    Returns:
        The reason, or None. ``rule.override`` is the caller's to apply (the goal is sent
        anyway, its note saying why it would not have been).

    """
    if rule.map_id and trust.map_id and trust.map_id != rule.map_id:
        return f"it was recorded on map {trust.map_id!r} and the robot is on map {rule.map_id!r}"
    if rule.max_sigma_m > 0 and trust.sigma_m is not None and trust.sigma_m > rule.max_sigma_m:
        return (
            f"its pose was uncertain by {trust.sigma_m:.2f} m (1σ), over "
            f"max_goal_uncertainty_m {rule.max_sigma_m:g}"
        )
    return None
