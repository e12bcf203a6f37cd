"""Robot poses by stamp: a sampled trajectory (odometry, one tf edge) and tf chains.

A :class:`PoseLookup` answers "where was the robot at stamp t?" with a :class:`Pose` or
``None`` (unknown). Two kinds:

* :class:`SampledPoseLookup` over time-stamped samples (an odometry topic, one edge of
  ``/tf``), interpolated or nearest, with a maximum gap beyond which the pose is unknown.
  It can pull its samples lazily from an iterator and forget old ones, so a long bag is
  never held whole: memory is bounded by ``history_ns`` worth of samples.
* :class:`ChainedPoseLookup`, the composition of several lookups along a tf chain,
  e.g. ``map -> odom`` (static or slow) then ``odom -> base_link`` (fast).

Poses are :class:`surprise_memory.memory.pose.Pose` (the project's one pose type); a lookup
also names its moving frame (``child_frame_id``). The pose maths and the lookup rule
(``compose``, ``interpolate``, ``yaw_of``, re-exported here) live in
:mod:`surprise_memory.memory.pose`, shared with the live node's ``PoseBuffer``. Nothing here
knows about bags or ROS messages; :mod:`surprise_memory.sources.bag_poses` builds these lookups
from a bag's messages, and a node could build them from its subscriptions.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.memory.pose import Pose, Sample, compose, pose_from_samples, yaw_of
from surprise_memory.memory.pose import interpolate_between as interpolate
from surprise_memory.memory.pose_trust import SigmaBuffer

__all__ = [
    "ChainedPoseLookup",
    "Pose",
    "PoseLookup",
    "Sample",
    "SampledPoseLookup",
    "compose",
    "interpolate",
    "yaw_of",
]


class PoseLookup(ABC):
    """Answers the pose at a stamp, or ``None`` when it is unknown there.

    Lookups may hold a bag reader open; close them (or use them as context managers).
    """

    @abstractmethod
    def at(self, stamp_ns: int) -> Pose | None:
        """Return the pose at ``stamp_ns``, or ``None`` when no sample is close enough.

        Raises:
            InputError: ``stamp_ns`` is older than what the lookup still holds.

        """

    @property
    @abstractmethod
    def frame_id(self) -> str:
        """The fixed frame of the poses it returns."""

    @property
    @abstractmethod
    def child_frame_id(self) -> str:
        """The moving frame of the poses it returns."""

    def describe(self) -> str:
        """One line for logs and reports."""
        return f"{self.frame_id} <- {self.child_frame_id}"

    def sigma_at(self, stamp_ns: int) -> float | None:
        """The pose's horizontal 1-sigma uncertainty in metres near ``stamp_ns``, or None.

        Asked after :meth:`at`; None = unknown (the default: the source records none).
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook, most lookups hold nothing
        """Release what the lookup holds open (a bag reader); a no-op by default."""

    def __enter__(self) -> PoseLookup:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SampledPoseLookup(PoseLookup):
    """Poses from time-stamped samples, interpolated or nearest, with a maximum gap.

    Rule for ``at(t)`` (:func:`surprise_memory.memory.pose.pose_from_neighbours`, the same as
    :class:`surprise_memory.memory.pose.PoseBuffer`'s): with
    ``interpolate``, when a sample at or before t and one at or after t are both within
    ``max_gap_ns`` of t, the pose is interpolated between them (linear position, slerp
    orientation); otherwise (or without ``interpolate``) the nearest sample is returned
    if it lies within ``max_gap_ns`` of t; otherwise ``None``. No extrapolation.

    Samples come from an iterable in stamp order and are pulled lazily, only as far as a
    query needs (up to the first sample after t). A sample whose stamp is not after the
    previous one is dropped and counted (``dropped``). With ``history_ns``, samples older
    than the newest query minus ``history_ns`` are forgotten, so memory stays bounded
    when queries move forward in time; a query older than that raises. Without it every
    sample pulled is kept.

    Args:
        samples: ``(stamp_ns, pose)`` pairs in stamp order (a list, or a generator over
            a bag; closed by :meth:`close`).
        max_gap_ns: Largest distance in time from t to a sample that may be used.
        interpolate: Interpolate between the samples around t (else nearest).
        history_ns: How far before the newest query samples are kept; ``None`` keeps all.
        frame_id: Fixed frame of the poses.
        child_frame_id: Moving frame of the poses.

    Raises:
        ConfigError: ``max_gap_ns`` or ``history_ns`` is negative.

    """

    def __init__(
        self,
        samples: Iterable[Sample],
        *,
        max_gap_ns: int = 500_000_000,
        interpolate: bool = True,
        history_ns: int | None = None,
        frame_id: str = "",
        child_frame_id: str = "",
        sigmas: SigmaBuffer | None = None,
    ) -> None:
        if max_gap_ns < 0:
            raise ConfigError(f"max_gap_ns={max_gap_ns}: must be >= 0")
        if history_ns is not None and history_ns < 0:
            raise ConfigError(f"history_ns={history_ns}: must be >= 0 or None")
        self._iter: Iterator[Sample] | None = iter(samples)
        self._max_gap_ns = int(max_gap_ns)
        self._interpolate = interpolate
        self._history_ns = history_ns
        self._samples: deque[Sample] = deque()
        self._forgotten_before: int | None = None  # queries older than this cannot be answered
        self._frame_id = frame_id
        self._child_frame_id = child_frame_id
        self._sigmas = sigmas
        self.dropped = 0
        """Samples dropped because their stamp did not increase."""

    def sigma_at(self, stamp_ns: int) -> float | None:
        """The uncertainty of the sample nearest ``stamp_ns`` within ``max_gap_ns``, or None.

        From ``sigmas``, where the samples' covariances are recorded as they are pulled.
        """
        return None if self._sigmas is None else self._sigmas.nearest(stamp_ns, self._max_gap_ns)

    @classmethod
    def constant(cls, pose: Pose, child_frame_id: str = "") -> SampledPoseLookup:
        """A lookup that answers ``pose`` at every stamp (a static transform)."""
        return _StaticPoseLookup(pose, child_frame_id)

    @property
    def frame_id(self) -> str:
        """The fixed frame of the samples."""
        return self._frame_id

    @property
    def child_frame_id(self) -> str:
        """The moving frame of the samples."""
        return self._child_frame_id

    @property
    def max_gap_ns(self) -> int:
        """Largest distance in time from a query to a usable sample."""
        return self._max_gap_ns

    def __len__(self) -> int:
        """Number of samples held now."""
        return len(self._samples)

    def _pull_past(self, stamp_ns: int) -> None:
        """Read samples until one is after ``stamp_ns`` or the samples end."""
        held = self._samples
        while self._iter is not None and (not held or held[-1][0] <= stamp_ns):
            try:
                stamp, pose = next(self._iter)
            except StopIteration:
                self._iter = None
                return
            if held and stamp <= held[-1][0]:
                self.dropped += 1
                continue
            held.append((int(stamp), pose))
            self._forget_before(stamp_ns)  # a far jump ahead must not hold what it skips

    def _forget_before(self, stamp_ns: int) -> None:
        if self._history_ns is None:
            return
        horizon = stamp_ns - self._history_ns
        held = self._samples
        # keep one sample at or before the horizon, so queries at the horizon still bracket
        while len(held) > 1 and held[1][0] <= horizon:
            held.popleft()
            self._forgotten_before = held[0][0]

    def at(self, stamp_ns: int) -> Pose | None:
        """Return the pose at ``stamp_ns`` (see the class rule), or ``None``.

        Raises:
            InputError: ``stamp_ns`` is older than the samples still held (``history_ns``).

        """
        stamp_ns = int(stamp_ns)
        if self._forgotten_before is not None and stamp_ns < self._forgotten_before:
            raise InputError(
                f"pose at stamp {stamp_ns} ns: samples before {self._forgotten_before} ns were "
                f"already forgotten (history_ns={self._history_ns}); query in time order or "
                "raise history_ns"
            )
        self._pull_past(stamp_ns)
        result = pose_from_samples(
            self._samples, stamp_ns, self._max_gap_ns, interpolate=self._interpolate
        )
        self._forget_before(stamp_ns)
        return result

    def close(self) -> None:
        """Stop pulling samples; closes the sample generator (and the reader behind it)."""
        it, self._iter = self._iter, None
        close = getattr(it, "close", None)
        if close is not None:
            close()


class _StaticPoseLookup(SampledPoseLookup):
    """One pose valid at every stamp (a static transform)."""

    def __init__(self, pose: Pose, child_frame_id: str) -> None:
        super().__init__((), frame_id=pose.frame_id, child_frame_id=child_frame_id)
        self._pose = pose

    def at(self, stamp_ns: int) -> Pose | None:
        """Return the static pose."""
        return self._pose

    def describe(self) -> str:
        """One line for logs and reports."""
        return f"{self.frame_id} <- {self.child_frame_id} (static)"


class ChainedPoseLookup(PoseLookup):
    """The composition of lookups along a chain, e.g. map->odom then odom->base_link.

    ``at(t)`` composes every link's pose at t and is unknown when any link's is.

    Args:
        links: Lookups from the fixed frame outwards; each link's child frame is the
            next link's fixed frame.

    Raises:
        ConfigError: No links, or the frames do not chain.

    """

    def __init__(self, links: Sequence[PoseLookup]) -> None:
        if not links:
            raise ConfigError("ChainedPoseLookup needs at least one link")
        for a, b in itertools.pairwise(links):
            if a.child_frame_id and b.frame_id and a.child_frame_id != b.frame_id:
                raise ConfigError(
                    f"links do not chain: {a.describe()} is followed by {b.describe()}"
                )
        self._links = list(links)

    @property
    def links(self) -> list[PoseLookup]:
        """The links, from the fixed frame outwards."""
        return list(self._links)

    @property
    def frame_id(self) -> str:
        """Fixed frame of the first link."""
        return self._links[0].frame_id

    @property
    def child_frame_id(self) -> str:
        """Moving frame of the last link."""
        return self._links[-1].child_frame_id

    def describe(self) -> str:
        """The chain, e.g. ``map <- odom (static) <- base_link``."""
        return " ; ".join(link.describe() for link in self._links)

    def at(self, stamp_ns: int) -> Pose | None:
        """Return the composed pose at ``stamp_ns``, or ``None`` if any link is unknown."""
        result: Pose | None = None
        for link in self._links:
            pose = link.at(stamp_ns)
            if pose is None:
                return None
            result = pose if result is None else compose(result, pose)
        return result

    def close(self) -> None:
        """Close every link."""
        for link in self._links:
            link.close()
