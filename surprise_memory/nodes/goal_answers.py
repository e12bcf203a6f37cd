"""The navigator's answers to our action goals: taken once, from its response or its status.

The navigator answers a goal with a response to its request, and lists an accepted goal on
the action's status topic. rclpy's server publishes the status first, so the status nearly
always comes a few milliseconds before the answer; and DDS may drop the answer on the way
(a service response to a client the navigator has not discovered yet: a process just
started, a loaded machine, a slow link). :class:`GoalAnswers` takes whichever comes first
as the answer, once, and says only what happened: "accepted by the navigator" when the
answer came (in either order), and that the answer did not come only where it did not
within the caller's wait. A goal whose caller has moved on before the answer (told
``pending``, cancelled, or replaced by a newer goal) keeps why, and its acceptance is
handed on as late (the sender cancels it at once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from surprise_memory.memory.navigation_goals import GoalBook

__all__ = ["GoalAnswers"]

_LISTED = "accepted by the navigator (listed on its status topic; its answer not in yet)"
_ACCEPTED = "accepted by the navigator"

Accepted = Callable[[str, Any, str, str], None]
"""``(goal id, handle, why late ("" = in time), message)``: an acceptance taken."""


class GoalAnswers:
    """Which goals await the navigator's answer, and the handles of those it accepted.

    Its lock is held while an answer is taken and handed on, so that the sender's book
    changes of one answer are not interleaved with another's (re-entrant: the sender
    preempts, and so marks other goals, from inside the hand-on).

    Args:
        book: The goals (a rejection and the answer's notes are written here).
        on_accepted: Called once per accepted goal, with the lock held.

    """

    def __init__(self, book: GoalBook, on_accepted: Accepted) -> None:
        self.lock = threading.RLock()
        """Held while an answer is taken; the sender holds it to read or change a goal's."""
        self._book = book
        self._on_accepted = on_accepted
        self._handles: dict[str, Any] = {}  # accepted goals not finished: id -> handle
        # sent, not answered: id -> "" while its caller waits, else why an acceptance
        # now comes late ("accepted after its caller was told pending")
        self._waiting: dict[str, str] = {}
        self._listed: set[str] = set()  # accepted as listed on the status topic, no answer yet
        self._answered: dict[str, threading.Event] = {}  # id -> set once answered

    def expect(self, gid: str) -> threading.Event:
        """A goal about to be sent: its caller waits; the event is set once it is answered."""
        answered = threading.Event()
        with self.lock:
            self._waiting[gid] = ""
            self._answered[gid] = answered
        return answered

    def end_wait(self, gid: str, timeout_s: float, pending: str) -> None:
        """The caller's wait is over: say what did not come.

        An unanswered goal gets the message ``pending`` (its acceptance, if one comes, is
        late); one only listed on the status topic says its answer did not come.
        """
        with self.lock:
            self._answered.pop(gid, None)
            if self._waiting.get(gid) == "":
                self._waiting[gid] = "accepted after its caller was told pending"
                self._book.update(gid, message=pending)
            elif gid in self._listed:  # listed, and its answer never came: lost on the way
                self._listed.discard(gid)
                self._replace(
                    gid,
                    "accepted by the navigator (listed on its status topic; its answer did "
                    f"not come within {timeout_s:g} s)",
                )

    def move_on(self, gid: str, why: str) -> bool:
        """The goal's caller moves on before its answer: a later acceptance is late, ``why``.

        The latest reason is kept (a goal told ``pending``, then replaced, was replaced).

        Returns:
            Whether the goal is still unanswered.

        """
        with self.lock:
            if gid in self._waiting:
                self._waiting[gid] = why
            return gid in self._waiting

    def unanswered(self, gid: str) -> bool:
        """Whether the navigator has not answered the goal yet."""
        with self.lock:
            return gid in self._waiting

    def handle(self, gid: str) -> Any:
        """The goal's action handle while it is accepted and not finished, else None."""
        with self.lock:
            return self._handles.get(gid)

    def finished(self, gid: str) -> Any:
        """Forget the goal's handle (its result came, or a newer goal replaced it); returns it."""
        with self.lock:
            return self._handles.pop(gid, None)

    def response(self, gid: str, handle: Any, refused: str) -> None:
        """The navigator's response (executor thread): ``handle`` None if it failed."""
        with self.lock:
            answered = self._answered.get(gid)
            if gid in self._listed:  # the status topic told first: the answer says the same
                if handle is not None:  # (a failed one: its answer did not come)
                    self._listed.discard(gid)
                    self._replace(gid, _ACCEPTED)
            else:
                self._take(gid, handle, refused)
        if answered is not None:
            answered.set()

    def listed(self, gid: str, make_handle: Callable[[], Any]) -> None:
        """The navigator lists the goal on its status topic (executor thread): accepted."""
        with self.lock:
            if gid in self._waiting:
                self._take(gid, make_handle(), "", listed=True)

    def _take(self, gid: str, handle: Any, refused: str, listed: bool = False) -> None:
        """Take the answer once (the lock held): a rejection here, an acceptance handed on."""
        why = self._waiting.pop(gid, None)
        if why is None:
            return  # answered already
        if refused:
            self._book.update(gid, state="rejected", message=f"the navigator {refused}")
            return
        self._handles[gid] = handle
        if listed and not why:  # its answer usually follows at once
            self._listed.add(gid)
        self._on_accepted(gid, handle, why, _LISTED if listed and not why else _ACCEPTED)

    def _replace(self, gid: str, message: str) -> None:
        """Replace the "answer not in yet" note (only: a cancel's or a result's stays)."""
        now = self._book.get(gid)
        if now is not None and now.message == _LISTED:
            self._book.update(gid, message=message)
