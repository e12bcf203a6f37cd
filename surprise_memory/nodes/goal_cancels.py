"""The cancels a node asks of the navigator for its goals, and what the navigator said.

:class:`GoalCancels` sends every cancel of a
:class:`~surprise_memory.nodes.goal_sender.GoalSender` through the action's cancel service
and writes the navigator's verdict into the goal book as soon as it comes, for each reason
a goal of ours is cancelled:

* the caller's (``cancel_navigation``, ``goto --cancel``): :meth:`GoalCancels.ask`, which
  waits for the verdict;
* an acceptance that came after its caller was told ``pending`` (or after a cancel was
  asked, or after a newer goal took its place): :meth:`GoalCancels.late`;
* a preemption (a newer goal of ours took its place): :meth:`GoalCancels.preempted`.

A cancel counts only where the navigator says so for this goal: it is in the answer's
``goals_canceling``. rclcpp's server (Nav2) refuses with ``ERROR_REJECTED``; rclpy's leaves
the goal out of ``goals_canceling`` with return code 0: both are a refusal, said at once,
and a goal whose cancel was refused is followed as running (its feedback and result).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from surprise_memory.memory.navigation_goals import GoalBook

__all__ = ["CANCEL_SAID", "GoalCancels", "cancel_verdict"]

# CancelGoal's return codes (1, ERROR_REJECTED, is a refusal, as is 0 with our goal left
# out of goals_canceling: see cancel_verdict)
_CANCEL_UNKNOWN_GOAL, _CANCEL_TERMINATED = 2, 3


def cancel_verdict(gid: str, future: Any) -> str:
    """What the navigator said to our cancel of goal ``gid``: a key of :data:`CANCEL_SAID`."""
    response = future.result() if future.exception() is None else None
    if response is None:
        return "failed"
    ours = uuid.UUID(gid).bytes
    if any(bytes(g.goal_id.uuid) == ours for g in response.goals_canceling):
        return "accepted"
    code = int(response.return_code)
    if code == _CANCEL_TERMINATED:
        return "ended"
    if code == _CANCEL_UNKNOWN_GOAL:
        return "unknown goal"
    return "refused"  # ERROR_REJECTED (rclcpp), or return code 0 without our goal (rclpy)


CANCEL_SAID = {
    "accepted": "the navigator accepted the cancel",
    "ended": "the navigator says the goal has ended (its result tells how)",
    "unknown goal": "the navigator does not know the goal: not confirmed",
    "refused": "the navigator refused the cancel",
    "failed": "the cancel request failed: not confirmed",
}
"""The goal's message after the navigator answered the caller's cancel, by verdict."""

_LATE_SAID = {
    "accepted": "cancelled: the navigator accepted the cancel asked at once",
    "ended": "the navigator says it has ended (its result tells how)",
    "unknown goal": "the navigator does not know the goal: not confirmed cancelled, it may run",
    "refused": "the navigator refused the cancel: it runs",
    "failed": "the cancel request failed: it may run",
}
"""What a late acceptance's cancel came to, after why it was cancelled."""

_MAY_RUN = ("pending", "running", "preempted")
"""States in which the navigator may still run the goal as far as the book knows."""


class GoalCancels:
    """Asks the navigator to cancel goals of ours; its verdicts go into the goal book.

    Args:
        book: The goals (their state and message are updated here).
        late_wait_s: How long a late acceptance's cancel may go unanswered before its
            message says so (``goal_timeout_seconds``).

    """

    def __init__(self, book: GoalBook, late_wait_s: float) -> None:
        self._book = book
        self._late_wait_s = late_wait_s
        self._lock = threading.Lock()
        self._open: set[str] = set()  # late acceptances whose cancel has no verdict yet

    def _send(self, gid: str, handle: Any, on_verdict: Callable[[str], None]) -> None:
        handle.cancel_goal_async().add_done_callback(
            lambda future: on_verdict(cancel_verdict(gid, future))
        )

    def ask(self, gid: str, handle: Any, timeout_s: float) -> str:
        """The caller's cancel: waits up to ``timeout_s`` for the navigator's verdict.

        The goal's message says the verdict (:data:`CANCEL_SAID`), or that none came in
        time; a verdict after ``timeout_s`` still updates it. The state stays what the
        navigator reports (its result follows a confirmed cancel).

        Returns:
            The verdict (a key of :data:`CANCEL_SAID`), or "" when none came in time.

        """
        answered = threading.Event()
        verdicts: list[str] = []
        lock = threading.Lock()  # one message: the verdict's, or the caller's "no answer"

        def on_verdict(verdict: str) -> None:
            with lock:
                verdicts.append(verdict)
                self._book.update(gid, message=CANCEL_SAID[verdict])
            answered.set()

        self._send(gid, handle, on_verdict)
        answered.wait(timeout_s)
        with lock:
            if verdicts:
                return verdicts[0]
            self._book.update(
                gid,
                message=f"the navigator did not answer the cancel within {timeout_s:g} s: "
                "not confirmed",
            )
            return ""

    def late(self, gid: str, handle: Any, why: str) -> None:
        """Cancel a goal accepted after its caller had moved on; say at once what came of it.

        Accepted: ``cancelled_after_late_acceptance`` (a preempted goal stays
        ``preempted``). Refused, not known or failed: the goal runs as far as anyone
        knows, so it is ``running`` (followed: feedback, result) and its message says
        why. No verdict within ``late_wait_s``: the message says so (it may run); a
        later verdict still counts.

        Args:
            gid: The goal.
            handle: Its action goal handle.
            why: How it came late ("accepted after its caller was told pending", ...).

        """
        with self._lock:
            self._open.add(gid)

        # Each handler writes the book *before* the goal leaves ``_open``, the lock held
        # throughout: whoever sees the cancel no longer open (``settle``) reads its outcome.
        # Cleared first, ``goto --store`` once printed the goal as still being cancelled.
        def on_verdict(verdict: str) -> None:
            with self._lock:
                self._write_late_verdict(gid, why, verdict)
                self._open.discard(gid)

        self._send(gid, handle, on_verdict)

        def unanswered() -> None:
            with self._lock:
                if gid not in self._open:
                    return
                now = self._book.get(gid)
                if now is not None and now.state in _MAY_RUN:  # (not one whose result came)
                    self._book.update(
                        gid,
                        force=True,  # a preempted one too: it may run all the same
                        message=f"{why}; the navigator did not answer the cancel within "
                        f"{self._late_wait_s:g} s: it may run (cancel it on the navigator)",
                    )
                self._open.discard(gid)

        timer = threading.Timer(self._late_wait_s, unanswered)
        timer.daemon = True
        timer.start()

    def _write_late_verdict(self, gid: str, why: str, verdict: str) -> None:
        """Write what a late acceptance's cancel came to (see :meth:`late`)."""
        now = self._book.get(gid)
        if now is None:
            return
        message = f"{why}; {_LATE_SAID[verdict]}"
        if verdict == "accepted":
            if now.state in ("pending", "running"):
                self._book.update(gid, state="cancelled_after_late_acceptance", message=message)
            elif now.state == "preempted":  # its caller knows that; the message says more
                self._book.update(gid, force=True, message=message)
        elif verdict in ("refused", "unknown goal", "failed") and now.state in _MAY_RUN:
            self._book.update(gid, force=True, state="running", message=message)
        elif not now.done:
            self._book.update(gid, message=message)

    def preempted(self, gid: str, handle: Any) -> None:
        """Cancel a goal a newer one of ours replaced (a navigator that queues would run it).

        Nav2 preempts by itself, so an accepted cancel or an ended goal needs no word; a
        refusal or a failed request is said (the goal may run until the navigator ends it).
        """

        def on_verdict(verdict: str) -> None:
            if verdict in ("refused", "failed"):
                said = (
                    "the navigator refused to cancel it"
                    if verdict == "refused"
                    else ("the cancel request failed")
                )
                self._book.update(
                    gid, force=True, message=f"{said}: it may run until the navigator ends it"
                )

        self._send(gid, handle, on_verdict)

    def open(self, gid: str) -> bool:
        """Whether a late acceptance's cancel awaits the navigator's verdict."""
        with self._lock:
            return gid in self._open
