"""Which of the robot's episodes the fleet store has: :class:`DeliveryLedger`.

A small SQLite file beside the robot's local store (``fleet_outbox.sqlite3``) records, per
episode the robot committed, whether it was delivered to the fleet store, is waiting, or
will never be sent (and why). It is a cache of the sender's progress, not a source of
truth: at open it is reconciled with the local store (an episode committed just before a
kill, not yet recorded, is added as waiting), and losing it costs only resends, which the
fleet store takes as no-ops (an episode id is unique).

What the diagnostics read (the backlog's episodes, bytes and oldest age; the episodes
named as not sent) is kept in memory, so reading it never touches the disk.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from surprise_memory.errors import StoreError

__all__ = ["LEDGER_NAME", "Backlog", "DeliveryLedger", "Pending"]

LEDGER_NAME = "fleet_outbox.sqlite3"
"""The ledger's file name in the local store's folder."""

_NOT_SENT_KEPT = 10_000  # named failures kept in the file (the oldest leave first)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id TEXT NOT NULL UNIQUE,
    nbytes INTEGER NOT NULL,
    surprise REAL NOT NULL,
    added_wall_ns INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'not_sent')),
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS outbox_state ON outbox (state, seq);
"""


@dataclass(frozen=True)
class Pending:
    """An episode waiting to be delivered.

    Attributes:
        episode_id: Its id.
        nbytes: Its bytes (JPEGs plus embeddings), counted by the backlog.
        surprise: Its surprise (the backlog's own eviction goes by it).
        added_wall_ns: When the robot committed it (wall clock, ns).

    """

    episode_id: str
    nbytes: int
    surprise: float
    added_wall_ns: int


@dataclass(frozen=True)
class Backlog:
    """The episodes waiting to be delivered, in brief.

    Attributes:
        episodes: How many.
        nbytes: Their bytes.
        oldest_wall_ns: When the oldest was committed (None when there is none).
        sent: Episodes delivered since the ledger opened.
        not_sent: Episodes named as never to be sent since the ledger opened.

    """

    episodes: int
    nbytes: int
    oldest_wall_ns: int | None
    sent: int
    not_sent: int


class DeliveryLedger:
    """The sender's record of what the fleet store has, durable across kills.

    Thread-safe: the episode writer appends, the sender marks, the diagnostics read. The
    file and the state in memory have a lock each, so the diagnostics (on a node's
    executor) never wait for a write's fsync.

    Args:
        folder: The local store's folder (the file goes beside its database).

    Raises:
        StoreError: The file cannot be opened or created.

    """

    def __init__(self, folder: Path) -> None:
        self._path = folder / LEDGER_NAME
        self._lock = threading.Lock()  # the in-memory state: held for microseconds
        self._db_lock = threading.Lock()  # the file: held through a write and its fsync
        self._pending: OrderedDict[str, Pending] = OrderedDict()
        self._sent_ids: OrderedDict[str, int] = OrderedDict()  # delivered, still held: nbytes
        self._sent = self._not_sent = 0
        self._pending_bytes = 0
        try:
            self._conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(_SCHEMA)
            rows = self._conn.execute(
                "SELECT episode_id, nbytes, surprise, added_wall_ns, state FROM outbox "
                "WHERE state != 'not_sent' ORDER BY seq"
            ).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"{self._path}: cannot open the fleet delivery ledger: {exc}") from exc
        for ep_id, nbytes, surprise, added, state in rows:
            if state == "pending":
                self._pending[ep_id] = Pending(ep_id, nbytes, surprise, added)
                self._pending_bytes += nbytes
            else:
                self._sent_ids[ep_id] = nbytes

    @property
    def path(self) -> Path:
        """The ledger's file."""
        return self._path

    def known(self) -> set[str]:
        """Ids of the episodes the ledger holds, waiting or delivered."""
        with self._lock:
            return set(self._pending) | set(self._sent_ids)

    def append(self, episodes: Iterable[Pending]) -> None:
        """Record episodes the robot committed as waiting, in order.

        Raises:
            StoreError: The write failed (they are added again by the next open's
                reconciliation: the local store holds them).

        """
        new = [p for p in episodes if p.episode_id not in self._pending]
        self._write(
            "INSERT OR IGNORE INTO outbox (episode_id, nbytes, surprise, added_wall_ns, state) "
            "VALUES (?, ?, ?, ?, 'pending')",
            [(p.episode_id, p.nbytes, p.surprise, p.added_wall_ns) for p in new],
        )
        with self._lock:
            for p in new:
                self._pending[p.episode_id] = p
                self._pending_bytes += p.nbytes

    def next_pending(self) -> Pending | None:
        """The oldest episode waiting, or None."""
        with self._lock:
            return next(iter(self._pending.values()), None)

    def mark_sent(self, episode_id: str) -> None:
        """The fleet store holds the episode now."""
        self._write("UPDATE outbox SET state = 'sent' WHERE episode_id = ?", [(episode_id,)])
        with self._lock:
            entry = self._pending.pop(episode_id, None)
            if entry is not None:
                self._pending_bytes -= entry.nbytes
                self._sent_ids[episode_id] = entry.nbytes
                self._sent += 1

    def mark_not_sent(self, episode_id: str, reason: str) -> None:
        """The episode will never reach the fleet store (kept in the file with the reason)."""
        self._write(
            "UPDATE outbox SET state = 'not_sent', note = ? WHERE episode_id = ?",
            [(reason, episode_id)],
        )
        self._write(
            "DELETE FROM outbox WHERE state = 'not_sent' AND seq <= "
            "(SELECT seq FROM outbox WHERE state = 'not_sent' ORDER BY seq DESC LIMIT 1 OFFSET ?)",
            [(_NOT_SENT_KEPT,)],
        )
        with self._lock:
            entry = self._pending.pop(episode_id, None)
            if entry is not None:
                self._pending_bytes -= entry.nbytes
                self._not_sent += 1

    def forget(self, episode_ids: Iterable[str]) -> None:
        """Delivered episodes the robot no longer holds (the fleet store keeps them)."""
        ids = [(i,) for i in episode_ids]
        self._write("DELETE FROM outbox WHERE episode_id = ? AND state = 'sent'", ids)
        with self._lock:
            for (ep_id,) in ids:
                self._sent_ids.pop(ep_id, None)

    def supersede(self, episode_ids: Iterable[str]) -> None:
        """Place keyframes the robot replaced by newer views of their place (``place_history``).

        Forgotten whatever their state: a waiting one is not sent, and not lost either (the
        newer view of its place is on its way).
        """
        ids = [(i,) for i in episode_ids]
        self._write("DELETE FROM outbox WHERE episode_id = ?", ids)
        with self._lock:
            for (ep_id,) in ids:
                entry = self._pending.pop(ep_id, None)
                if entry is not None:
                    self._pending_bytes -= entry.nbytes
                self._sent_ids.pop(ep_id, None)

    def oldest_sent(self) -> str | None:
        """The delivered episode the robot has held longest (the first to make room)."""
        with self._lock:
            return next(iter(self._sent_ids), None)

    def lowest_pending(self, keep: Collection[str | None]) -> Pending | None:
        """The waiting episode of lowest surprise (ties to the oldest), never one of ``keep``."""
        with self._lock:
            waiting = [p for p in self._pending.values() if p.episode_id not in keep]
        return min(waiting, key=lambda p: p.surprise, default=None)

    def is_pending(self, episode_id: str) -> bool:
        """Whether the episode waits to be delivered."""
        with self._lock:
            return episode_id in self._pending

    def not_sent(self, limit: int = 100) -> list[tuple[str, str]]:
        """The most recent episodes named as not sent, with their reasons, newest first.

        Raises:
            StoreError: The read failed.

        """
        with self._db_lock:
            try:
                rows = self._conn.execute(
                    "SELECT episode_id, note FROM outbox WHERE state = 'not_sent' "
                    "ORDER BY seq DESC LIMIT ?",
                    (limit,),
                ).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self._path}: cannot read the ledger: {exc}") from exc
        return [(str(i), str(n)) for i, n in rows]

    def backlog(self) -> Backlog:
        """The backlog in brief (from memory: no disk read, no scan)."""
        with self._lock:
            oldest = next(iter(self._pending.values()), None)
            return Backlog(
                episodes=len(self._pending),
                nbytes=self._pending_bytes,
                oldest_wall_ns=oldest.added_wall_ns if oldest is not None else None,
                sent=self._sent,
                not_sent=self._not_sent,
            )

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._db_lock:
            self._conn.close()

    def _write(self, statement: str, rows: Sequence[tuple[object, ...]]) -> None:
        if not rows:
            return
        with self._db_lock:
            try:
                with self._conn:
                    self._conn.execute("BEGIN")
                    self._conn.executemany(statement, rows)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._path}: cannot update the ledger: {exc}") from exc
