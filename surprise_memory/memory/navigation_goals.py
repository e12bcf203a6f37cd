"""The navigation goals a node sent, and where each stands: one goal at a time, told plainly.

* :class:`GoalStatus`: one goal's id, episode, state, what took its place, and the
  navigator's progress (distance remaining, its estimate of the time left).
* :class:`GoalBook`: the last goals of a node (bounded), thread-safe; the newest is the
  current one. When a new goal is taken, the earlier ones that may still run are marked
  ``preempted`` by its id: the earlier caller's answer to "what became of my goal".
* :func:`cancel_line`: what a cancel came to, in one line: "cancelled" only where the
  navigator confirmed it.

The states (:data:`GOAL_STATES`): a goal is ``pending`` from the moment it is sent until the
navigator answers; ``running`` once accepted (the action) or ``sent`` once acknowledged on
the topic (no outcome is reported there); final: ``succeeded``, ``aborted``, ``canceled``,
``preempted``, ``rejected``, ``cancelled_after_late_acceptance`` (the navigator accepted
after the caller had been answered "pending": the node asked it at once to cancel the
goal, and the navigator accepted the cancel), ``unknown`` (what became of it cannot be
known: published on the topic and not acknowledged, or no result came). A late
acceptance whose cancel the navigator refused (or did not answer) is ``running``, its
message says so, and its feedback and result follow. A final state is kept: a result
that arrives after it (the ``aborted`` of a preempted goal, the ``canceled`` of a late
one) does not change it.
ROS-free: the node's :class:`~surprise_memory.nodes.goal_sender.GoalSender` fills it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from surprise_memory.memory.pose import Pose

__all__ = [
    "ACTIVE_STATES",
    "CANCELLED_STATES",
    "FINAL_STATES",
    "GOAL_STATES",
    "GoalBook",
    "GoalStatus",
    "cancel_line",
]

ACTIVE_STATES = ("pending", "running", "sent")
"""States in which a goal of ours may still run (or, on the topic, be followed)."""

FINAL_STATES = (
    "succeeded",
    "aborted",
    "canceled",
    "preempted",
    "rejected",
    "cancelled_after_late_acceptance",
    "unknown",
)
"""States that do not change any more."""

GOAL_STATES = ACTIVE_STATES + FINAL_STATES

CANCELLED_STATES = ("canceled", "cancelled_after_late_acceptance")
"""Final states that a cancel of ours, confirmed by the navigator, ended in."""


@dataclass(frozen=True)
class GoalStatus:
    """Where one goal stands.

    Attributes:
        goal_id: The goal's id (the action goal's UUID, or one made for a topic goal).
        episode_id: The episode it is for ("" = not known).
        sent_via: ``action /navigate_to_pose`` or ``topic /goal_pose``.
        state: One of :data:`GOAL_STATES`.
        preempted_by: The goal that took its place (state ``preempted``), else "".
        message: One line: what the state does not say (the navigator's answer, what the
            caller may do); "" = nothing more.
        distance_remaining_m: Metres to go, from the navigator's feedback (NaN = none yet).
        eta_s: The navigator's estimate of the time left, seconds (NaN = none yet).
        navigation_time_s: Time navigating so far, seconds (NaN = none yet).
        recoveries: Recoveries so far (from the feedback).
        goal: The goal pose (None = not known).
        sent_ns: When it was sent (the node's clock), int ns.

    """

    goal_id: str
    episode_id: str = ""
    sent_via: str = ""
    state: str = "pending"
    preempted_by: str = ""
    message: str = ""
    distance_remaining_m: float = math.nan
    eta_s: float = math.nan
    navigation_time_s: float = math.nan
    recoveries: int = 0
    goal: Pose | None = None
    sent_ns: int = 0

    def __post_init__(self) -> None:
        if self.state not in GOAL_STATES:
            raise ValueError(f"state={self.state!r}: must be one of {', '.join(GOAL_STATES)}")

    @property
    def done(self) -> bool:
        """Whether the state is final."""
        return self.state in FINAL_STATES

    def progress_line(self) -> str:
        """One line for a progress display: id, state, distance and time left where known."""
        text = f"goal {self.goal_id}: {self.state.replace('_', ' ')}"
        if self.state == "preempted":
            text += f" by {self.preempted_by}"
        if self.state == "running" and math.isfinite(self.distance_remaining_m):
            text += f", {self.distance_remaining_m:.2f} m to go"
            if math.isfinite(self.eta_s) and self.eta_s > 0:
                text += f", about {self.eta_s:.0f} s left"
        if self.message and self.done:
            text += f" ({self.message})"
        return text


class GoalBook:
    """The goals a node sent, newest last (the current one), at most ``keep`` of them.

    Thread-safe: the sender updates it from the executor's threads while services read
    it; :meth:`wait` blocks until a goal changes.

    Args:
        keep: How many goals are remembered (the oldest is forgotten first).

    """

    def __init__(self, keep: int = 64) -> None:
        if keep < 1:
            raise ValueError(f"keep={keep!r}: must be >= 1")
        self._keep = keep
        self._goals: OrderedDict[str, GoalStatus] = OrderedDict()
        self._changed = threading.Condition()

    def add(self, status: GoalStatus) -> None:
        """Record a new goal as the current one (the earlier ones keep their state)."""
        with self._changed:
            self._goals[status.goal_id] = status
            while len(self._goals) > self._keep:
                self._goals.popitem(last=False)
            self._changed.notify_all()

    def preempt_others(self, goal_id: str) -> list[GoalStatus]:
        """Mark every other goal that may still run ``preempted`` by ``goal_id``.

        Returns:
            Those goals, as they were before (the caller cancels them where the navigator
            would not preempt them by itself).

        """
        with self._changed:
            earlier = [s for gid, s in self._goals.items() if gid != goal_id and not s.done]
            for status in earlier:
                self._goals[status.goal_id] = dataclasses.replace(
                    status,
                    state="preempted",
                    preempted_by=goal_id,
                    message="",  # the state and preempted_by say it all
                )
            if earlier:
                self._changed.notify_all()
            return earlier

    def update(self, goal_id: str, *, force: bool = False, **changes: object) -> GoalStatus | None:
        """Change a goal's fields; a final state is kept unless ``force``.

        Returns:
            The goal as it is now (None = not known, e.g. forgotten).

        """
        with self._changed:
            status = self._goals.get(goal_id)
            if status is None:
                return None
            if status.done and not force:
                return status
            status = dataclasses.replace(status, **changes)  # type: ignore[arg-type]
            self._goals[goal_id] = status
            self._changed.notify_all()
            return status

    def get(self, goal_id: str = "") -> GoalStatus | None:
        """A goal by id; "" = the current (newest) one; None = not known."""
        with self._changed:
            if not goal_id:
                return next(reversed(self._goals.values()), None) if self._goals else None
            return self._goals.get(goal_id)

    def active(self) -> GoalStatus | None:
        """The current goal if it may still run, else None."""
        current = self.get()
        return current if current is not None and not current.done else None

    def wait(self, goal_id: str, timeout_s: float, *, until_done: bool = True) -> GoalStatus | None:
        """Wait up to ``timeout_s`` for the goal to change (or, ``until_done``, to finish).

        Returns:
            The goal as it is then.

        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            first = self._goals.get(goal_id)
            while True:
                now = self._goals.get(goal_id)
                if now is None or (now.done if until_done else now is not first):
                    return now
                left = deadline - time.monotonic()
                if left <= 0:
                    return now
                self._changed.wait(left)

    def counts(self) -> dict[str, int]:
        """How many of the remembered goals are in each state (states with none left out)."""
        with self._changed:
            out: dict[str, int] = {}
            for status in self._goals.values():
                out[status.state] = out.get(status.state, 0) + 1
            return out


def cancel_line(confirmed: bool, status: GoalStatus) -> str:
    """What a cancel came to, in one line (the node's answer and ``goto --cancel``).

    Args:
        confirmed: Whether the navigator confirmed the cancel (or the goal had ended).
        status: The goal after the cancel; while it runs, its message says what the
            navigator said (refused, not answered in time, ...).

    Returns:
        ``cancelled: <progress line>`` only for a goal the navigator cancelled; ``cancel
        accepted by the navigator, not ended yet: ...``; ``nothing to cancel: ...`` (it had
        ended); or ``not cancelled (<why>): <progress line>``, whose state says whether
        the goal still runs.

    """
    line = status.progress_line()
    if status.state in CANCELLED_STATES:
        return f"cancelled: {line}"
    if status.done:  # its message is in the line already
        return f"{'nothing to cancel' if confirmed else 'not cancelled'}: {line}"
    if confirmed:
        return f"cancel accepted by the navigator, not ended yet: {line}"
    why = f" ({status.message})" if status.message else ""
    return f"not cancelled{why}: {line}"
