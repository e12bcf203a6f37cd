"""The PostgreSQL store's connection: one per store object, guarded, reopened when it broke.

:class:`Session` holds the connection, the lock that serialises its use between threads,
and the store's ``meta`` as last read. Its context managers are the only ways the store
touches the database: :meth:`Session.reading` (one repeatable-read transaction, so a
query and the reading of its rows and JPEGs see one snapshot), :meth:`Session.writing`
(one read-committed transaction) and :meth:`Session.autocommit` (statements outside a
transaction); all turn :class:`psycopg.Error` into
:class:`~surprise_memory.errors.StoreError` naming what was being done.

Every call has bounded time (``store_timeout_seconds``): the lock is waited for at most
twice the bound, connecting is bounded by libpq's ``connect_timeout``, and each answer of
the server by the :class:`~.watchdog.StatementWatchdog`. A refused, cut or silent link
comes out as :class:`~surprise_memory.errors.StoreUnreachableError`; the next call
reconnects; a connection the server dropped while it was idle (a restart) is found
before it is used (:func:`_dropped`, no round trip) and opened again.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from psycopg import pq

from surprise_memory.errors import StoreError, StoreUnreachableError
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.postgres import rows
from surprise_memory.memory.store.postgres.schema import connect, ensure_ann_index, ensure_schema
from surprise_memory.memory.store.postgres.url import redacted
from surprise_memory.memory.store.postgres.watchdog import StatementWatchdog

__all__ = ["SCHEMA_WORK_TIMEOUT_S", "Session"]

SCHEMA_WORK_TIMEOUT_S = 3600.0
"""Bound of one statement creating or migrating the schema or building the HNSW index."""


class Session:
    """A store's connection to PostgreSQL.

    Args:
        url: The libpq connection string.
        read_only: Make every transaction read-only; never create or migrate the schema.
        timeout_s: The longest wait for one answer of the server (``store_timeout_seconds``).

    Attributes:
        meta: The ``meta`` entries as last read or committed.

    Raises:
        StoreUnreachableError: The server cannot be reached.
        StoreError: The login fails, or the schema check fails (see
            :func:`~surprise_memory.memory.store.postgres.schema.ensure_schema`).

    """

    def __init__(self, url: str, *, read_only: bool, timeout_s: float) -> None:
        self._url = url
        self._read_only = read_only
        self.where = redacted(url)
        self.lock = threading.RLock()
        self.meta = StoreMeta()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._watchdog = StatementWatchdog(timeout_s)
        try:
            with self._locked("open the episode store"):
                self._connect()
        except BaseException:
            self._watchdog.close()
            raise

    @property
    def timeout_s(self) -> float:
        """The longest wait for one answer of the server."""
        return self._watchdog.timeout_s

    @timeout_s.setter
    def timeout_s(self, seconds: float) -> None:
        self._watchdog.timeout_s = seconds

    def long_work(self) -> AbstractContextManager[None]:
        """A block whose statements may take long (a migration, an index build): an hour each."""
        return self._watchdog.extended(SCHEMA_WORK_TIMEOUT_S)

    def waiting_s(self) -> float:
        """How long the exchange in progress has waited for the server (0 when none)."""
        return self._watchdog.waiting_s()

    def slowest_s(self) -> float:
        """The longest exchange with the server of the call in progress, or of the last."""
        return self._watchdog.slowest_s()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = None
        what = "open the episode store"
        try:
            conn = connect(self._url, read_only=self._read_only, timeout_s=self.timeout_s)
            conn.watchdog = self._watchdog
            with self._watchdog.bounded(conn):
                long_work = self.long_work
                ensure_schema(conn, self.where, read_only=self._read_only, long_work=long_work)
                self.meta = StoreMeta(rows.read_meta(conn))
                if not self._read_only and self.meta.embedding_dim is not None:
                    # the index over every episode; a robot's own comes with its adds
                    ensure_ann_index(conn, self.meta.embedding_dim, long_work, robots=())
        except (psycopg.Error, StoreError) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, StoreError):
                raise
            raise self._error(what, exc, conn) from exc
        self._conn = conn
        return conn

    def _error(
        self, what: str, exc: psycopg.Error, conn: psycopg.Connection[Any] | None
    ) -> StoreError:
        """The store's error for a failed call: unreachable when the link, not the request."""
        if self._watchdog.fired:
            return StoreUnreachableError(
                f"{self.where}: cannot {what}: no answer from the server within "
                f"{self._watchdog.limit_s:g} s (the link or the server is down, or this "
                "request needs longer on this server: store_timeout_seconds)"
            )
        if conn is None or conn.broken or conn.closed:
            return StoreUnreachableError(f"{self.where}: cannot {what}: {exc}")
        if _left_mid_exchange(exc, conn):
            # a link cut mid-exchange can leave libpq with a command in progress on a
            # connection not marked broken: every later statement then fails ("another
            # command is already in progress"); closed here, the next call reconnects
            conn.close()
            return StoreUnreachableError(f"{self.where}: cannot {what}: {exc}")
        return StoreError(f"{self.where}: cannot {what}: {exc}")

    @contextmanager
    def _locked(self, what: str) -> Iterator[None]:
        """Hold the lock, waiting at most twice the bound (another call may be stuck)."""
        if not self.lock.acquire(timeout=2 * self.timeout_s):
            raise StoreUnreachableError(
                f"{self.where}: cannot {what}: another call has held the connection for "
                f"over {2 * self.timeout_s:g} s (a slow link or server)"
            )
        try:
            yield
        finally:
            self.lock.release()

    def db(self) -> psycopg.Connection[Any]:
        """The open connection, opened again when the last one broke (hold :attr:`lock`).

        Raises:
            StoreError: The store is closed, or reconnecting failed.

        """
        if self._closed:
            raise StoreError(f"{self.where}: the store is closed")
        if self._conn is None or self._conn.closed or self._conn.broken or _dropped(self._conn):
            if self._conn is not None:
                self._conn.close()  # a broken one still holds its socket
                self._conn = None
            return self._connect()
        return self._conn

    @contextmanager
    def reading(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """One repeatable-read transaction under the lock.

        Args:
            what: What the caller does, for the error message ("read episode x").

        Yields:
            The connection, inside the transaction.

        Raises:
            StoreError: The store is closed, or a statement failed.

        """
        with self._locked(what):
            conn = self.db()
            try:
                # BEGIN ISOLATION LEVEL REPEATABLE READ: one round trip, not two
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                with self._watchdog.bounded(conn), conn.transaction():
                    yield conn
            except psycopg.Error as exc:
                raise self._error(what, exc, conn) from exc

    @contextmanager
    def writing(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """One read-committed write transaction under the lock: committed or rolled back.

        Args:
            what: What the caller does, for the error message.

        Yields:
            The connection, inside the transaction.

        Raises:
            StoreError: The store is read-only or closed, or a statement failed (nothing
                was committed); a duplicate key says so.

        """
        if self._read_only:
            raise StoreError(f"{self.where}: the store was opened read-only")
        with self._locked(what):
            conn = self.db()
            try:
                conn.isolation_level = None  # the server's default, read committed
                with self._watchdog.bounded(conn), conn.transaction():
                    yield conn
            except psycopg.errors.UniqueViolation as exc:
                raise StoreError(
                    f"cannot {what}: already in the store ({exc.diag.message_detail})"
                ) from exc
            except psycopg.Error as exc:
                raise self._error(what, exc, conn) from exc

    @contextmanager
    def autocommit(
        self, what: str, timeout_s: float | None = None
    ) -> Iterator[psycopg.Connection[Any]]:
        """Statements outside a transaction (each commits on its own), under the lock.

        Args:
            what: What the caller does, for the error message.
            timeout_s: The bound of each answer; None = ``store_timeout_seconds``.

        Yields:
            The connection.

        Raises:
            StoreError: The store is closed, or a statement failed.

        """
        with self._locked(what):
            conn = self.db()
            try:
                with self._watchdog.bounded(conn):
                    yield conn
            except psycopg.Error as exc:
                raise self._error(what, exc, conn) from exc

    def close(self) -> None:
        """Close the connection (idempotent); waits for a call in progress (it is bounded)."""
        with self.lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._watchdog.close()


def _dropped(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server dropped this idle connection since its last call (no round trip).

    A server that restarts (``pg_ctl stop``, a failover) tells each idle connection
    "terminating connection due to administrator command" and closes it; a link that
    was cut resets it. The client learns of it only when it next uses the connection, and
    that call fails: a retrieval after the server came back would answer partial, and
    the link be called unreachable, though the server answers. Both leave the idle
    socket readable (the notice, the end of the stream or the reset), where a healthy idle
    connection has nothing to read (this store never listens for notifications): libpq
    reads what came, and the connection is opened again if it is gone. A black-holed or
    silent link leaves nothing to read: that connection is used, and the watchdog bounds
    the call.
    """
    if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
        if not readable:
            return False
        conn.pgconn.consume_input()  # the notice and the end: a closed connection fails here
    except (OSError, ValueError, psycopg.Error):
        return True
    return conn.pgconn.status != pq.ConnStatus.OK


def _left_mid_exchange(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> bool:
    """Whether a failed call left ``conn`` unusable though not broken.

    The client failed (no SQLSTATE: the server refused nothing), or libpq is still in a
    command.
    """
    busy = conn.pgconn.transaction_status in (
        pq.TransactionStatus.ACTIVE,
        pq.TransactionStatus.UNKNOWN,
    )
    return busy or (isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None)
