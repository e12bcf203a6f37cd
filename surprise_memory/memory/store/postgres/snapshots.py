"""The ``snapshots`` table of the PostgreSQL store: what a bag recorder answered, per episode.

As the SQLite store's (:mod:`surprise_memory.memory.store.snapshots`): one row per episode
and call kind, deleted with its episode.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from surprise_memory.memory.snapshot import SnapshotKind, SnapshotNote

if TYPE_CHECKING:
    from typing_extensions import LiteralString  # typing's from Python 3.11 (we run on 3.10)

__all__ = ["SNAPSHOTS_TABLE", "select_snapshots", "upsert_snapshots"]

# as schema 3 created it; schema 8 adds robot_id to the row and its keys
SNAPSHOTS_TABLE: LiteralString = """CREATE TABLE surprise_memory.snapshots (
    episode_seq bigint NOT NULL REFERENCES surprise_memory.episodes (seq) ON DELETE CASCADE,
    kind text NOT NULL,
    requested_ns bigint NOT NULL,
    answered_ns bigint NOT NULL,
    success boolean NOT NULL,
    message text NOT NULL,
    PRIMARY KEY (episode_seq, kind)
)"""

_UPSERT: LiteralString = (
    "INSERT INTO surprise_memory.snapshots "
    "(episode_seq, robot_id, kind, requested_ns, answered_ns, success, message) "
    "SELECT seq, robot_id, %s, %s, %s, %s, %s FROM surprise_memory.episodes WHERE id = ANY(%s) "
    "ON CONFLICT (episode_seq, kind, robot_id) DO UPDATE SET "
    "requested_ns = excluded.requested_ns, answered_ns = excluded.answered_ns, "
    "success = excluded.success, message = excluded.message"
)
_SELECT: LiteralString = (
    "SELECT e.id, s.kind, s.requested_ns, s.answered_ns, s.success, s.message "
    "FROM surprise_memory.snapshots s JOIN surprise_memory.episodes e "
    "ON e.seq = s.episode_seq AND e.robot_id = s.robot_id "
    "WHERE e.id = ANY(%s) ORDER BY e.seq, s.requested_ns"
)


def upsert_snapshots(
    conn: psycopg.Connection[Any], episode_ids: Sequence[str], note: SnapshotNote
) -> int:
    """Record ``note`` on each episode still stored; how many got it (inside a transaction)."""
    cur = conn.execute(
        _UPSERT,
        (
            note.kind,
            note.requested_ns,
            note.answered_ns,
            note.success,
            note.message,
            list(episode_ids),
        ),
    )
    return max(cur.rowcount, 0)


def select_snapshots(
    conn: psycopg.Connection[Any], episode_ids: Sequence[str]
) -> dict[str, list[SnapshotNote]]:
    """The notes of these episodes, by id (ids without notes left out)."""
    notes: dict[str, list[SnapshotNote]] = {}
    for eid, kind, requested, answered, success, message in conn.execute(
        _SELECT, (list(episode_ids),)
    ):
        k: SnapshotKind = "aftermath" if kind == "aftermath" else "event"
        notes.setdefault(eid, []).append(
            SnapshotNote(k, int(requested), int(answered), bool(success), str(message))
        )
    return notes
