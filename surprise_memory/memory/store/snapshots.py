"""The ``snapshots`` table of the SQLite store: what a bag recorder answered, per episode.

One row per episode and call kind (``event``, ``aftermath``; see
:mod:`surprise_memory.memory.snapshot`); it goes with its episode (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from surprise_memory.memory.snapshot import SnapshotKind, SnapshotNote

__all__ = ["SNAPSHOTS_TABLE", "select_snapshots", "upsert_snapshots"]

SNAPSHOTS_TABLE = """CREATE TABLE snapshots (
    episode_seq INTEGER NOT NULL REFERENCES episodes(seq) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    requested_ns INTEGER NOT NULL,
    answered_ns INTEGER NOT NULL,
    success INTEGER NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (episode_seq, kind)
) WITHOUT ROWID"""

_UPSERT = (
    "INSERT INTO snapshots (episode_seq, kind, requested_ns, answered_ns, success, message) "
    "SELECT seq, ?, ?, ?, ?, ? FROM episodes WHERE id IN (SELECT value FROM json_each(?)) "
    "ON CONFLICT (episode_seq, kind) DO UPDATE SET requested_ns = excluded.requested_ns, "
    "answered_ns = excluded.answered_ns, success = excluded.success, message = excluded.message"
)
_SELECT = (
    "SELECT e.id, s.kind, s.requested_ns, s.answered_ns, s.success, s.message "
    "FROM snapshots s JOIN episodes e ON e.seq = s.episode_seq "
    "WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.seq, s.requested_ns"
)


def upsert_snapshots(
    conn: sqlite3.Connection, episode_ids: Sequence[str], note: SnapshotNote
) -> int:
    """Record ``note`` on each episode still stored (replacing one of the same kind).

    Returns:
        How many episodes got it (an evicted one is skipped).

    """
    cur = conn.execute(
        _UPSERT,
        (
            note.kind,
            note.requested_ns,
            note.answered_ns,
            int(note.success),
            note.message,
            json.dumps(list(episode_ids)),
        ),
    )
    return max(cur.rowcount, 0)


def select_snapshots(
    conn: sqlite3.Connection, episode_ids: Sequence[str]
) -> dict[str, list[SnapshotNote]]:
    """The notes of these episodes, by id, in the order asked (ids without notes left out)."""
    notes: dict[str, list[SnapshotNote]] = {}
    for eid, kind, requested, answered, success, message in conn.execute(
        _SELECT, (json.dumps(list(episode_ids)),)
    ):
        k: SnapshotKind = "aftermath" if kind == "aftermath" else "event"
        notes.setdefault(eid, []).append(
            SnapshotNote(k, int(requested), int(answered), bool(success), str(message))
        )
    return notes
