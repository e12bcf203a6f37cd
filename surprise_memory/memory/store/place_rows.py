"""The SQLite store's statements about place keyframes: a place's bounded history, its latest view.

Both read the partial index ``episodes_place (place_key, robot_id, stamp_ns) WHERE kind =
'place'`` (schema 7), so their cost is that of a place's few views, never of the history
of the store. Constant statements with bound parameters, as in
:mod:`~surprise_memory.memory.store.schema`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from surprise_memory.memory.store.records import EpisodeRecord

__all__ = ["latest_views", "surplus_views", "view_ids"]


def surplus_views(conn: sqlite3.Connection, record: EpisodeRecord, keep: int) -> list[int]:
    """The views of ``record``'s place and robot beyond the ``keep`` newest by stamp.

    Run inside the add's transaction, after the record's insert, so that their deletion
    commits with the add. A live add is the newest view of its place; a delivered copy of
    an older view than the ``keep`` newest (a fleet's late backlog) is itself the surplus.

    Args:
        conn: The database.
        record: The place keyframe just inserted.
        keep: ``place_history``.

    Returns:
        Keys to delete, oldest views last (ties in stamp: the later added is newer).

    Raises:
        sqlite3.Error: The statement failed.

    """
    rows = conn.execute(
        "SELECT seq FROM episodes WHERE kind = 'place' AND place_key = ? AND robot_id = ? "
        "ORDER BY stamp_ns DESC, seq DESC LIMIT -1 OFFSET ?",
        (record.place_key, record.robot_id, keep),
    )
    return [int(r[0]) for r in rows]


def latest_views(
    conn: sqlite3.Connection, place_keys: Sequence[str], robot_id: str | None
) -> list[int]:
    """The key of the newest view of each of these places (places without one left out).

    Args:
        conn: The database.
        place_keys: Place keys (duplicates are answered once).
        robot_id: Only this robot's views; None = every robot's (the newest of all).

    Returns:
        Keys, in the order of ``place_keys``.

    Raises:
        sqlite3.Error: The statement failed.

    """
    keys = json.dumps(list(dict.fromkeys(place_keys)))
    if robot_id is None:
        rows = conn.execute(
            "SELECT (SELECT e.seq FROM episodes e WHERE e.kind = 'place' AND e.place_key = "
            "k.value ORDER BY e.stamp_ns DESC, e.seq DESC LIMIT 1) FROM json_each(?) k",
            (keys,),
        )
    else:
        rows = conn.execute(
            "SELECT (SELECT e.seq FROM episodes e WHERE e.kind = 'place' AND e.place_key = "
            "k.value AND e.robot_id = ? ORDER BY e.stamp_ns DESC, e.seq DESC LIMIT 1) "
            "FROM json_each(?) k",
            (robot_id, keys),
        )
    return [int(r[0]) for r in rows if r[0] is not None]


def view_ids(conn: sqlite3.Connection, place_key: str, robot_id: str) -> list[str]:
    """Ids of every view of a place by a robot, newest first (at most ``place_history``).

    Raises:
        sqlite3.Error: The statement failed.

    """
    rows = conn.execute(
        "SELECT id FROM episodes WHERE kind = 'place' AND place_key = ? AND robot_id = ? "
        "ORDER BY stamp_ns DESC, seq DESC",
        (place_key, robot_id),
    )
    return [str(r[0]) for r in rows]
