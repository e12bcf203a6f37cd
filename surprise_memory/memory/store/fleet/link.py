"""The state of a robot's link to its fleet store, as the calls over it find it.

:class:`LinkMonitor` watches every call the robot makes to the fleet store (the sender's
deliveries and checks, the retrievals) and says what the link is now:

* ``connected``: the last call was answered, its round trips short;
* ``slow``: answered, but a round trip took longer than ``slow_after_s``
  (:data:`SLOW_ROUND_TRIP_S`); or a call in progress has waited that long on a link
  whose last round trip was that slow too;
* ``not answering``: a call in progress has waited longer than ``slow_after_s`` for an
  answer that a link answering as it did before would have given long ago (a black
  hole, a hung server: nothing says the link is slow, only that nothing comes back);
  ``unreachable`` once the call gives up;
* ``unreachable``: the last call found no server (refused, cut, or silent past
  ``store_timeout_seconds``), until a call is answered again;
* ``connecting``: no call has ended yet.

A call the server answered with a refusal (a newer schema, a missing extension, another
embedder) leaves the link ``connected`` and is reported as the refusal it is.
:func:`fleet_findings` turns the state and the backlog into the diagnostics' findings.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from surprise_memory.errors import StoreError, StoreUnreachableError
from surprise_memory.health import Finding, Level
from surprise_memory.memory.store.fleet.ledger import Backlog
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "BACKLOG_ERROR_FRACTION",
    "SLOW_ROUND_TRIP_S",
    "FleetStatus",
    "LinkMonitor",
    "LinkReport",
    "TimesExchanges",
    "fleet_findings",
]

BACKLOG_ERROR_FRACTION = 0.8
"""Diagnostics ERROR once the backlog holds this share of ``fleet_local_max_bytes``."""

SLOW_ROUND_TRIP_S = 0.5
"""A round trip longer than this (or a quarter of the store's timeout, if less) is slow.

A robot's Wi-Fi answers in tens of milliseconds; half a second is a link in trouble.
"""


@runtime_checkable
class TimesExchanges(Protocol):
    """A remote store that times its exchanges with the server (the PostgreSQL store)."""

    def waiting_seconds(self) -> float:
        """How long the exchange in progress has waited (0 when none)."""
        ...

    def slowest_exchange_seconds(self) -> float:
        """The longest exchange of the call in progress, or of the last call."""
        ...


@dataclass(frozen=True)
class LinkReport:
    """The link as the calls found it.

    Attributes:
        state: ``connected``, ``slow``, ``not answering``, ``unreachable`` or
            ``connecting``.
        detail: Why it is not connected (the last error), else empty.
        since_s: Seconds in this state (monotonic).
        round_trip_s: The last check's round trip (None before the first).
        waiting_s: How long the call in progress has waited for an answer (0 when none).
        refused: The server's last refusal of a call (cleared by the next success).

    """

    state: str
    detail: str
    since_s: float
    round_trip_s: float | None
    waiting_s: float
    refused: str


@dataclass(frozen=True)
class FleetStatus:
    """A fleet store's link and backlog, as the node's diagnostics report them.

    Attributes:
        link: The link.
        backlog: The episodes waiting to be delivered.
        bound_bytes: ``fleet_local_max_bytes``: what the backlog may grow to.
        location: The fleet store, without password.

    """

    link: LinkReport
    backlog: Backlog
    bound_bytes: int
    location: str


class LinkMonitor:
    """Watches the calls to a remote store and derives the link's state from them.

    Thread-safe; several calls may be in progress at once (a delivery and a retrieval).

    Args:
        slow_after_s: A round trip, or a wait for one answer, longer than this is slow.

    """

    def __init__(self, slow_after_s: float) -> None:
        self.slow_after_s = slow_after_s
        self._lock = threading.Lock()
        self._state = "connecting"
        self._detail = ""
        self._since = time.monotonic()
        self._round_trip: float | None = None
        self._refused = ""
        self._calls: dict[int, tuple[float, Callable[[], float] | None]] = {}
        self._ids = itertools.count()

    @property
    def unreachable(self) -> bool:
        """Whether the last call ended finding no server."""
        with self._lock:
            return self._state == "unreachable"

    @contextmanager
    def call(self, store: object = None, *, check: bool = False) -> Iterator[None]:
        """Watch one call to the remote store; its outcome sets the link's state.

        Args:
            store: The store called; one that times its exchanges (:class:`TimesExchanges`)
                says how long the one in progress has waited and how long the slowest
                took; else the whole call counts as one exchange.
            check: The call is one round trip meant to measure the link.

        Raises:
            StoreError: Whatever the call raised, after noting it.

        """
        timed = store if isinstance(store, TimesExchanges) else None
        key = next(self._ids)
        start = time.monotonic()
        with self._lock:
            self._calls[key] = (start, None if timed is None else timed.waiting_seconds)
        try:
            yield
        except StoreUnreachableError as exc:
            self._set("unreachable", str(exc))
            raise
        except StoreError as exc:  # the server answered, refusing
            self.refuse(str(exc))
            self._set("connected", "")
            raise
        else:
            elapsed = time.monotonic() - start
            if timed is not None:
                slowest = timed.slowest_exchange_seconds()
            else:
                slowest = elapsed if check else 0.0
            with self._lock:
                self._refused = ""
                if check or timed is not None:
                    self._round_trip = slowest
            slow = slowest > self.slow_after_s
            self._set(
                "slow" if slow else "connected", f"round trip {slowest:.2f} s" if slow else ""
            )
        finally:
            with self._lock:
                self._calls.pop(key, None)

    def refuse(self, reason: str) -> None:
        """A call was refused (by the server, or failed here): say why until one succeeds."""
        with self._lock:
            self._refused = reason

    def report(self) -> LinkReport:
        """The link now (no call is made)."""
        now = time.monotonic()
        with self._lock:
            waits = [fn() if fn is not None else now - start for start, fn in self._calls.values()]
            waiting = max(waits, default=0.0)
            state, detail = self._state, self._detail
            if state != "unreachable" and waiting > self.slow_after_s:
                # slow only where the link's answers were slow; a link that answered fast
                # and now says nothing is not slow: it does not answer
                rtt = self._round_trip
                slow = rtt is not None and rtt > self.slow_after_s
                state = "slow" if slow else "not answering"
                detail = f"a call has waited {waiting:.1f} s for an answer"
            return LinkReport(
                state=state,
                detail=detail,
                since_s=now - self._since,
                round_trip_s=self._round_trip,
                waiting_s=waiting,
                refused=self._refused,
            )

    def _set(self, state: str, detail: str) -> None:
        with self._lock:
            if state != self._state:
                self._since = time.monotonic()
            self._state, self._detail = state, detail


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.1f} MB"


def fleet_findings(status: FleetStatus, now_wall_ns: int) -> list[Finding | None]:
    """The fleet link's findings for ``/diagnostics``: WARN for the link, ERROR for losses.

    Args:
        status: The link and backlog now.
        now_wall_ns: The wall clock (the backlog's age is in wall time).

    Returns:
        WARN when the store is unreachable or not answering, or the link slow; ERROR
        when the server refuses what is sent, or when the backlog passes
        :data:`BACKLOG_ERROR_FRACTION` of its bound. (Episodes named as never sent are
        counted by the node, by name.)

    """
    link, backlog = status.link, status.backlog
    waiting = f"{backlog.episodes} episode(s), {_mb(backlog.nbytes)} waiting"
    if backlog.oldest_wall_ns is not None:
        age = max(0, now_wall_ns - backlog.oldest_wall_ns) / NS_PER_SECOND
        waiting += f", the oldest for {age:.0f} s"
    found: list[Finding | None] = []
    if link.state == "unreachable":
        found.append(
            Finding(
                Level.WARN,
                f"fleet store {status.location} unreachable for {link.since_s:.0f} s "
                f"({waiting}; kept on the robot): {link.detail}",
            )
        )
    elif link.state == "not answering":
        found.append(
            Finding(
                Level.WARN,
                f"fleet store {status.location} not answering: {link.detail} ({waiting})",
            )
        )
    elif link.state == "slow":
        found.append(Finding(Level.WARN, f"fleet link slow: {link.detail} ({waiting})"))
    if link.refused:
        found.append(Finding(Level.ERROR, f"fleet store refuses: {link.refused} ({waiting})"))
    if backlog.nbytes >= BACKLOG_ERROR_FRACTION * status.bound_bytes:
        found.append(
            Finding(
                Level.ERROR,
                f"fleet backlog {_mb(backlog.nbytes)} of fleet_local_max_bytes "
                f"{_mb(status.bound_bytes)}: past it, unsent episodes are lost",
            )
        )
    return found
