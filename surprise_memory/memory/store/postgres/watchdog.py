"""A bound on every exchange with the server: :class:`StatementWatchdog` cuts a silent link.

libpq waits for an answer as long as its socket stays open. Over a robot's Wi-Fi the
socket often does: a hung server (its kernel still acknowledges), a proxy or access point
that accepts and never forwards. TCP keepalives and ``tcp_user_timeout`` do not see
those, and ``statement_timeout`` is enforced by the server that is not answering. So the
client bounds each exchange itself: the watchdog is armed when a call begins, re-armed
when each exchange with the server starts (:class:`TimedConnection`: a statement, a
``BEGIN``, a ``COMMIT``), and, when the server has not answered within the timeout, shuts
the connection's socket down.
libpq then fails the call at once ("server closed the connection"), the connection is
broken, and the store reopens it at the next call.

One daemon thread per watchdog (one per store connection), waiting on a condition; no
thread is started per exchange.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

__all__ = ["StatementWatchdog", "TimedConnection"]


class StatementWatchdog:
    """Shuts a connection's socket down when one exchange waited past its timeout.

    Args:
        timeout_s: Longest wait for one answer, seconds.
        name: Thread name.

    """

    def __init__(self, timeout_s: float, name: str = "pg-watchdog") -> None:
        self.timeout_s = timeout_s
        self._cond = threading.Condition()
        self._conn: psycopg.Connection[Any] | None = None
        self._limit = timeout_s
        self._deadline: float | None = None
        self._started = 0.0  # when the exchange waited on now began
        self._waiting = False  # an exchange is in progress
        self._slowest = 0.0  # the longest exchange of the call in progress (or the last)
        self._fired = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def fired(self) -> bool:
        """Whether the last bounded call was cut (reset by the next :meth:`bounded`)."""
        with self._cond:
            return self._fired

    @property
    def limit_s(self) -> float:
        """The bound of the call in progress (or of the last one)."""
        return self._limit

    def waiting_s(self) -> float:
        """How long the exchange in progress has waited so far (0 when none)."""
        with self._cond:
            return time.monotonic() - self._started if self._waiting else 0.0

    def slowest_s(self) -> float:
        """The longest exchange of the call in progress, or of the last call."""
        with self._cond:
            return self._slowest

    @contextlib.contextmanager
    def bounded(
        self, conn: psycopg.Connection[Any], timeout_s: float | None = None
    ) -> Iterator[None]:
        """Watch ``conn`` for the duration of one call; each answer may take ``timeout_s``.

        Args:
            conn: The connection the call uses.
            timeout_s: This call's bound per answer; None = the watchdog's.

        """
        with self._cond:
            self._conn = conn
            self._limit = self.timeout_s if timeout_s is None else timeout_s
            self._fired = False
            self._slowest = 0.0
            self._arm()
        try:
            yield
        finally:
            with self._cond:
                self._conn = None
                self._deadline = None
                self._waiting = False

    @contextlib.contextmanager
    def extended(self, timeout_s: float) -> Iterator[None]:
        """Allow the exchanges of the block ``timeout_s`` each (a migration, an index build)."""
        with self._cond:
            limit, self._limit = self._limit, timeout_s
            if self._conn is not None and not self._fired:
                self._arm()
        try:
            yield
        finally:
            with self._cond:
                self._limit = limit
                if self._conn is not None and not self._fired:
                    self._arm()

    def rearm(self) -> None:
        """A new exchange starts: its answer gets the whole bound."""
        with self._cond:
            self._waiting = True
            if self._conn is not None and not self._fired:
                self._arm()

    def answered(self, seconds: float) -> None:
        """The exchange in progress ended after ``seconds``."""
        with self._cond:
            self._waiting = False
            self._slowest = max(self._slowest, seconds)

    def close(self) -> None:
        """Stop the thread (idempotent)."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _arm(self) -> None:
        self._started = time.monotonic()
        self._deadline = self._started + self._limit
        self._cond.notify()  # the thread may sleep toward a later deadline (an extended one)

    def _run(self) -> None:
        with self._cond:
            while not self._closed:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                remaining = self._deadline - time.monotonic()
                if remaining > 0:
                    self._cond.wait(remaining)  # or until re-armed: the loop reads the new one
                    continue
                self._fired = True
                self._deadline = None
                if self._conn is not None:
                    _shut_down(self._conn)


def _shut_down(conn: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down, so a libpq call blocked on it fails at once."""
    with contextlib.suppress(OSError, psycopg.Error):
        fd = conn.pgconn.socket
        sock = socket.socket(fileno=os.dup(fd))  # a duplicate: libpq keeps its own fd
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


class TimedConnection(psycopg.Connection[Any]):
    """A connection whose every exchange with the server re-arms its watchdog.

    psycopg runs every exchange (a statement from any cursor class, a ``BEGIN`` or
    ``COMMIT``, a type lookup) through :meth:`wait`; re-arming there bounds each answer,
    however the statement was sent. Connecting is bounded by ``connect_timeout`` instead.
    """

    watchdog: StatementWatchdog | None = None

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        """Wait for one exchange, the watchdog armed for it (see psycopg)."""
        watchdog = self.watchdog
        if watchdog is None:
            return super().wait(gen, *args, **kwargs)
        watchdog.rearm()
        start = time.monotonic()
        try:
            return super().wait(gen, *args, **kwargs)
        finally:
            watchdog.answered(time.monotonic() - start)
