"""When to ask a bag recorder for a snapshot, and what it answered (ROS-free).

rosbag2's recorder in snapshot mode (``ros2 bag record --snapshot-mode``) keeps the last
seconds of every recorded topic in memory and writes them to a bag when its ``snapshot``
service is called. A stored episode wants such a snapshot; :class:`SnapshotPlanner` turns
the stream of stored episodes into few calls: a call waits ``hold`` after the first episode
that wants it, and every episode stored meanwhile shares it (a burst of events makes one
bag, which holds them all as long as the recorder's buffer covers the hold plus an episode
window). Optionally one more call follows ``aftermath`` later, for what came after the
event. :class:`SnapshotNote` is what an episode keeps of each call (the store persists it).
Times are int nanoseconds of one monotonic clock (the planner) or the wall clock (notes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from surprise_memory.errors import InputError

__all__ = ["SNAPSHOT_KINDS", "SnapshotCall", "SnapshotKind", "SnapshotNote", "SnapshotPlanner"]

SnapshotKind = Literal["event", "aftermath"]
SNAPSHOT_KINDS: tuple[SnapshotKind, ...] = ("event", "aftermath")
"""``event``: the call for a burst of stored episodes; ``aftermath``: the one after it."""


@dataclass(frozen=True)
class SnapshotNote:
    """One snapshot call as an episode records it.

    Attributes:
        kind: ``event`` (the call its burst made) or ``aftermath`` (the call after it).
        requested_ns: Wall-clock time of the call, int ns since the epoch.
        answered_ns: Wall-clock time of the answer, int ns (0: none came).
        success: What the recorder answered (False also when no recorder answered).
        message: Why not, when it failed (no recorder, timeout, an exception); else "".

    """

    kind: SnapshotKind
    requested_ns: int
    answered_ns: int
    success: bool
    message: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SNAPSHOT_KINDS:
            raise InputError(f"snapshot kind {self.kind!r}: expected one of {SNAPSHOT_KINDS}")
        if self.requested_ns < 0 or self.answered_ns < 0:
            raise InputError(
                f"snapshot times {self.requested_ns}, {self.answered_ns}: must be ns >= 0"
            )

    def as_dict(self) -> dict[str, object]:
        """The note as JSON-ready values (``query --json``, the browser)."""
        return {
            "kind": self.kind,
            "requested_ns": self.requested_ns,
            "answered_ns": self.answered_ns,
            "success": self.success,
            "message": self.message,
        }


@dataclass(frozen=True)
class SnapshotCall:
    """A call to make now: its kind and the episodes it is made for."""

    kind: SnapshotKind
    episode_ids: tuple[str, ...]


class SnapshotPlanner:
    """Decides when to call the recorder: one call per burst, an optional aftermath call.

    Feed :meth:`add` each stored episode; poll :meth:`due` (from a timer) with the time and
    whether a call is still unanswered (calls never overlap: a recorder writes one bag at
    a time). Not thread-safe: the host serialises the calls.

    Args:
        hold_ns: A call waits this long after the first episode that wants it, int ns >= 0.
        aftermath_ns: A second call more than this long after each event call (0 = none),
            int ns >= 0. Strictly more: a host polling from a fixed-period timer whose
            period divides the delay hits it exactly, and the calls' wall-clock stamps
            (read beside the steady clock that schedules) then showed a few tens of ns
            less than the delay; the first tick past it keeps them apart by the delay.

    Raises:
        InputError: A negative duration.

    """

    def __init__(self, hold_ns: int, aftermath_ns: int = 0) -> None:
        if hold_ns < 0 or aftermath_ns < 0:
            raise InputError(f"hold_ns={hold_ns}, aftermath_ns={aftermath_ns}: must be >= 0")
        self._hold_ns = hold_ns
        self._aftermath_ns = aftermath_ns
        self._pending: list[str] = []
        self._first_ns = 0  # when the first pending episode came
        self._aftermath: list[tuple[int, tuple[str, ...]]] = []  # (due, episodes), in order

    @property
    def waiting(self) -> int:
        """Episodes that wait for their event call."""
        return len(self._pending)

    def reconfigure(self, hold_ns: int, aftermath_ns: int) -> None:
        """New durations; calls already planned keep their time."""
        if hold_ns < 0 or aftermath_ns < 0:
            raise InputError(f"hold_ns={hold_ns}, aftermath_ns={aftermath_ns}: must be >= 0")
        self._hold_ns, self._aftermath_ns = hold_ns, aftermath_ns

    def add(self, episode_id: str, now_ns: int) -> None:
        """An episode was stored at ``now_ns``: it joins the next event call."""
        if not self._pending:
            self._first_ns = now_ns
        self._pending.append(episode_id)

    def due(self, now_ns: int, *, busy: bool = False) -> SnapshotCall | None:
        """The call to make now, or None (nothing due, or ``busy``: one is unanswered)."""
        if busy:
            return None
        if self._pending and now_ns - self._first_ns >= self._hold_ns:
            ids = tuple(self._pending)
            self._pending.clear()
            if self._aftermath_ns > 0:
                self._aftermath.append((now_ns + self._aftermath_ns, ids))
            return SnapshotCall("event", ids)
        if self._aftermath and now_ns > self._aftermath[0][0]:
            return SnapshotCall("aftermath", self._aftermath.pop(0)[1])
        return None
