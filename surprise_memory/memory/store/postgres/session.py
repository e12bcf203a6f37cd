"""The PostgreSQL store's connection: one per store object, guarded, reopened when it broke.

:class:`Session` holds the connection, the lock that serialises its use between threads,
and the store's ``meta`` as last read. Its two context managers are the only ways the
store touches the database: :meth:`Session.reading` (one repeatable-read transaction, so a
query and the reading of its rows and JPEGs see one snapshot) and :meth:`Session.writing`
(one read-committed transaction); both turn :class:`psycopg.Error` into
:class:`~surprise_memory.errors.StoreError` naming what was being done.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from surprise_memory.errors import StoreError
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.postgres import rows
from surprise_memory.memory.store.postgres.schema import connect, ensure_ann_index, ensure_schema
from surprise_memory.memory.store.postgres.url import redacted

__all__ = ["Session"]


class Session:
    """A store's connection to PostgreSQL.

    Args:
        url: The libpq connection string.
        read_only: Make every transaction read-only; never create or migrate the schema.

    Attributes:
        meta: The ``meta`` entries as last read or committed.

    Raises:
        StoreError: The server cannot be reached, the login fails, or the schema check
            fails (see :func:`~surprise_memory.memory.store.postgres.schema.ensure_schema`).

    """

    def __init__(self, url: str, *, read_only: bool) -> None:
        self._url = url
        self._read_only = read_only
        self.where = redacted(url)
        self.lock = threading.RLock()
        self.meta = StoreMeta()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        with self.lock:
            self._connect()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = None
        try:
            conn = connect(self._url, read_only=self._read_only)
            ensure_schema(conn, self.where, read_only=self._read_only)
            self.meta = StoreMeta(rows.read_meta(conn))
            if not self._read_only and self.meta.embedding_dim is not None:
                ensure_ann_index(conn, self.meta.embedding_dim)
        except (psycopg.Error, StoreError) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"{self.where}: cannot open the episode store: {exc}") from exc
        self._conn = conn
        return conn

    def db(self) -> psycopg.Connection[Any]:
        """The open connection, opened again when the last one broke (hold :attr:`lock`).

        Raises:
            StoreError: The store is closed, or reconnecting failed.

        """
        if self._closed:
            raise StoreError(f"{self.where}: the store is closed")
        if self._conn is None or self._conn.closed or self._conn.broken:
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
        with self.lock:
            conn = self.db()
            try:
                with conn.transaction():
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    yield conn
            except psycopg.Error as exc:
                raise StoreError(f"{self.where}: cannot {what}: {exc}") from exc

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
        with self.lock:
            conn = self.db()
            try:
                with conn.transaction():
                    yield conn
            except psycopg.errors.UniqueViolation as exc:
                raise StoreError(
                    f"cannot {what}: already in the store ({exc.diag.message_detail})"
                ) from exc
            except psycopg.Error as exc:
                raise StoreError(f"{self.where}: cannot {what}: {exc}") from exc

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
