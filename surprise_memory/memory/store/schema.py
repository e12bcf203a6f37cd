"""The store's database: schema, migrations, transactions, and the SQL of its rows.

Tables: ``episodes`` (one row per episode, key ``seq``), ``frames`` (path and stamp of
each JPEG), ``embeddings`` (one unit-norm blob per frame, with its dtype and dimension),
``snapshots`` (a bag recorder's answers, per episode and call) and ``meta``
(``embedder_model``, ``embedder_pretrained``, ``embedding_dim``,
``origin_ns``: the store's time origin, the first frame seen). ``PRAGMA user_version``
holds :data:`SCHEMA_VERSION`; an older database is migrated on open by
:func:`ensure_schema`, one step of ``_MIGRATIONS`` per version, each in its own
transaction; a newer one is refused. A new database is created at version 1 and goes
through the same steps.

Every statement is a constant with bound parameters (lists go in as one JSON array read
by ``json_each``); no SQL is built from values.

Long module: the tables, each version's migration and the statements over their rows are
one contract with the database; apart, a migration would live away from the SQL it changes.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import StoreError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import TRUST_COLUMNS, trust_from_row, trust_values
from surprise_memory.memory.store.camera_columns import (
    CAMERA_COLUMN_TYPES,
    CAMERA_COLUMNS,
    camera_from_row,
    camera_values,
)
from surprise_memory.memory.store.embedding_codec import blob_dim, decode_blob, decode_blobs
from surprise_memory.memory.store.records import EpisodeRecord, episode_values, host_robot_id
from surprise_memory.memory.store.snapshots import SNAPSHOTS_TABLE
from surprise_memory.memory.store.summary import SUMMARY_COLUMNS, EpisodeSummary

__all__ = [
    "DB_NAME",
    "FILTER_COLUMNS",
    "PAGE_SIZE",
    "SCHEMA_VERSION",
    "IndexRow",
    "Migration",
    "connect",
    "delete_episodes",
    "ensure_schema",
    "index_rows",
    "insert_episode",
    "read_meta",
    "select_embeddings",
    "select_embeddings_of",
    "select_records",
    "select_summaries",
    "transaction",
    "upsert_meta",
]

PAGE_SIZE = 16_384
"""A new database's page size: a 2 KiB frame row took a whole 4 KiB page (half a robot-year's
database empty); 16 KiB pages hold seven (RESULTS.md, "SQLite page size"). An existing store
keeps its own; ``migrate OLD NEW`` writes a new one. The WAL is checkpointed every 4 MiB."""

_WAL_BYTES = 4_096_000  # SQLite's default WAL before a checkpoint: 1,000 pages of 4 KiB

SCHEMA_VERSION = 8
"""Version of the database schema written by this code (``PRAGMA user_version``).

1. The tables below; ``meta.origin_ns`` was the earliest *trigger* stamp.
2. ``meta.origin_ns`` is the store's time origin: the first *frame* seen (see
   :meth:`~surprise_memory.memory.store.EpisodeStore.note_origin`). Migrated by
   :func:`_origin_from_frames`.
3. ``episodes.robot_id`` (a store of version 1 or 2 was one robot's, opened on it: its
   episodes get the host name of the machine that migrates it). Migrated by
   :func:`_add_robot_id`.
4. ``snapshots``: what a bag recorder answered when asked for a snapshot for an episode
   (:mod:`~surprise_memory.memory.store.snapshots`). Migrated by :func:`_add_snapshots`.
5. ``episodes.session_id``: the session (the machine's boot) that stored the episode, so
   a pose in a frame that starts anew each session (``odom``) is not taken for today's
   (episodes of older versions get "", unknown). Migrated by :func:`_add_session_id`.
6. ``episodes.camera`` and the camera's optical frame and pose at the trigger
   (:mod:`~surprise_memory.memory.store.camera_columns`): episodes of older versions were
   seen by one unnamed camera whose pose is unknown. Migrated by :func:`_add_cameras`.
7. ``episodes.kind`` (``episode`` or ``place``: a place keyframe,
   :mod:`~surprise_memory.memory.places`) and ``episodes.place_key``, indexed with the
   stamp for the places' latest views: the rows of older versions are episodes.
   Migrated by :func:`_add_places`.
8. ``episodes.pose_sigma_m`` and ``map_id`` (:mod:`~surprise_memory.memory.pose_trust`):
   older rows get unknown (NULL, ""). Migrated by :func:`_add_pose_trust`.
"""

DB_NAME = "episodes.sqlite3"
"""Name of the database file inside the store folder."""

_SCHEMA_V1 = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE episodes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        stamp_ns INTEGER NOT NULL,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        pos_x REAL NOT NULL, pos_y REAL NOT NULL, pos_z REAL NOT NULL,
        ori_x REAL NOT NULL, ori_y REAL NOT NULL, ori_z REAL NOT NULL, ori_w REAL NOT NULL,
        pose_frame_id TEXT NOT NULL,
        pose_valid INTEGER NOT NULL,
        surprise REAL NOT NULL,
        threshold REAL,
        encoder_model TEXT NOT NULL,
        encoder_pretrained INTEGER NOT NULL,
        embedder_model TEXT NOT NULL,
        embedder_pretrained INTEGER NOT NULL,
        created_wall_ns INTEGER NOT NULL,
        nbytes INTEGER NOT NULL
    )""",
    """CREATE TABLE frames (
        episode_seq INTEGER NOT NULL REFERENCES episodes(seq) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        stamp_ns INTEGER NOT NULL,
        path TEXT NOT NULL UNIQUE,
        nbytes INTEGER NOT NULL,
        PRIMARY KEY (episode_seq, idx)
    ) WITHOUT ROWID""",
    """CREATE TABLE embeddings (
        episode_seq INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        dim INTEGER NOT NULL,
        dtype TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (episode_seq, idx),
        FOREIGN KEY (episode_seq, idx) REFERENCES frames(episode_seq, idx) ON DELETE CASCADE
    )""",
    "CREATE INDEX episodes_stamp ON episodes(stamp_ns)",
)

Migration = Callable[[sqlite3.Connection], None]


def _origin_from_frames(conn: sqlite3.Connection) -> None:
    """1 -> 2: the origin becomes the earliest frame stamp known, not the earliest trigger.

    The first frame a version-1 writer saw was not recorded; the best left is the earliest
    of the old origin and the stamps of the frames still stored (the first frame of the
    earliest episode is at most the assembler's window before its trigger).
    """
    row = conn.execute(
        "SELECT min(v) FROM (SELECT CAST(value AS INTEGER) AS v FROM meta "
        "WHERE key = 'origin_ns' UNION ALL SELECT min(stamp_ns) FROM frames)"
    ).fetchone()
    if row is not None and row[0] is not None:
        upsert_meta(conn, {"origin_ns": str(int(row[0]))})


def _add_robot_id(conn: sqlite3.Connection) -> None:
    """2 -> 3: add ``episodes.robot_id`` (filled with this host's robot id) and its index."""
    conn.execute("ALTER TABLE episodes ADD COLUMN robot_id TEXT NOT NULL DEFAULT ''")
    conn.execute("UPDATE episodes SET robot_id = ?", (host_robot_id(),))
    conn.execute("CREATE INDEX episodes_robot ON episodes(robot_id)")


def _add_snapshots(conn: sqlite3.Connection) -> None:
    """3 -> 4: add the ``snapshots`` table (empty: no episode asked for one before)."""
    conn.execute(SNAPSHOTS_TABLE)


def _add_session_id(conn: sqlite3.Connection) -> None:
    """4 -> 5: add ``episodes.session_id``, "" (unknown) for the episodes stored before."""
    conn.execute("ALTER TABLE episodes ADD COLUMN session_id TEXT NOT NULL DEFAULT ''")


_SQL_KINDS = {"text": "TEXT", "bool": "INTEGER", "float": "REAL"}


def _add_cameras(conn: sqlite3.Connection) -> None:
    """5 -> 6: add the camera columns; older episodes: one unnamed camera, pose unknown."""
    for name, kind, default in CAMERA_COLUMN_TYPES:
        conn.execute(  # constants of camera_columns, no value from outside
            f"ALTER TABLE episodes ADD COLUMN {name} {_SQL_KINDS[kind]} NOT NULL DEFAULT {default}"
        )


def _add_places(conn: sqlite3.Connection) -> None:
    """6 -> 7: add ``kind`` and ``place_key``; the rows stored before are episodes."""
    conn.execute("ALTER TABLE episodes ADD COLUMN kind TEXT NOT NULL DEFAULT 'episode'")
    conn.execute("ALTER TABLE episodes ADD COLUMN place_key TEXT NOT NULL DEFAULT ''")
    conn.execute(  # the places' views, newest first per place; episodes are not in it
        "CREATE INDEX episodes_place ON episodes(place_key, robot_id, stamp_ns) "
        "WHERE kind = 'place'"
    )


def _add_pose_trust(conn: sqlite3.Connection) -> None:
    """7 -> 8: add ``pose_sigma_m`` and ``map_id``; the rows stored before: unknown."""
    conn.execute("ALTER TABLE episodes ADD COLUMN pose_sigma_m REAL")
    conn.execute("ALTER TABLE episodes ADD COLUMN map_id TEXT NOT NULL DEFAULT ''")


_MIGRATIONS: dict[int, Migration] = {
    1: _origin_from_frames,
    2: _add_robot_id,
    3: _add_snapshots,
    4: _add_session_id,
    5: _add_cameras,
    6: _add_places,
    7: _add_pose_trust,
}
"""Schema steps: ``_MIGRATIONS[v]`` turns a version-v database into version v+1.

Add one entry per schema change (and bump :data:`SCHEMA_VERSION`); each runs in its own
transaction together with the ``user_version`` update, so a crash mid-migration leaves
the previous version intact.
"""

_EPISODE_COLUMNS = (
    "seq, id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, ori_x, ori_y, ori_z, ori_w, "
    "pose_frame_id, pose_valid, surprise, threshold, encoder_model, encoder_pretrained, "
    "embedder_model, embedder_pretrained, created_wall_ns, nbytes, robot_id, session_id, "
    "kind, place_key, " + CAMERA_COLUMNS + ", " + TRUST_COLUMNS
)
_TRUST_AT = 26 + len(CAMERA_COLUMN_TYPES)  # where the trust's columns start in a row
_SELECT_EPISODES_BY_SEQ = (
    "SELECT " + _EPISODE_COLUMNS + " FROM episodes WHERE seq IN (SELECT value FROM json_each(?))"
)
_SELECT_FRAMES_BY_SEQ = (
    "SELECT episode_seq, idx, stamp_ns, path FROM frames "
    "WHERE episode_seq IN (SELECT value FROM json_each(?)) ORDER BY episode_seq, idx"
)
_INSERT_EPISODE = (
    "INSERT INTO episodes (id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, "
    "ori_x, ori_y, ori_z, ori_w, pose_frame_id, pose_valid, surprise, threshold, "
    "encoder_model, encoder_pretrained, embedder_model, embedder_pretrained, "
    "created_wall_ns, nbytes, robot_id, session_id, kind, place_key, "
    + CAMERA_COLUMNS
    + ", "
    + TRUST_COLUMNS
    + ") VALUES ("
    + ", ".join("?" * (27 + len(CAMERA_COLUMN_TYPES)))
    + ")"
)


def connect(db: Path, *, read_only: bool) -> sqlite3.Connection:
    """Open the database with the store's settings (WAL, ``synchronous=FULL``, foreign keys).

    Args:
        db: The database file.
        read_only: Open it read-only (``mode=ro``; the journal mode is left as it is).

    Returns:
        The connection, in autocommit mode (transactions only through :func:`transaction`),
        usable from any thread (the store serialises the calls).

    Raises:
        StoreError: SQLite cannot switch to WAL mode.
        sqlite3.Error: SQLite cannot open or set up the database (the connection is closed).

    """
    if read_only:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(db, check_same_thread=False)
    try:
        conn.isolation_level = None  # explicit BEGIN/COMMIT only
        conn.execute("PRAGMA busy_timeout = 5000")
        if not read_only:
            # a new database only (an existing one keeps its pages; before WAL, which fixes
            # them): see PAGE_SIZE
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE:d}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            page = int(conn.execute("PRAGMA page_size").fetchone()[0])
            # the WAL's bytes as with SQLite's defaults (1,000 pages of 4 KiB), any page size
            conn.execute(f"PRAGMA wal_autocheckpoint = {_WAL_BYTES // page:d}")
            if str(mode).lower() != "wal":
                raise StoreError(f"{db}: cannot switch SQLite to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
        raise
    return conn


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction (``BEGIN IMMEDIATE``): committed on exit, rolled back on error.

    Args:
        conn: A connection in autocommit mode (see :func:`connect`).

    Yields:
        Nothing; the statements run inside the ``with`` block.

    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def ensure_schema(conn: sqlite3.Connection, root: Path, *, read_only: bool) -> None:
    """Create the schema in an empty database, or migrate an older one to :data:`SCHEMA_VERSION`.

    Args:
        conn: The open database.
        root: The store folder (for the messages).
        read_only: The store is opened read-only: a database that needs migrating is refused.

    Raises:
        StoreError: The schema is newer than this code, needs migrating but the store is
            read-only, the database holds other tables, or a migration step is missing.
        sqlite3.Error: A statement failed (the step's transaction is rolled back).

    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{root}: store schema version {version} is newer than this code's "
            f"{SCHEMA_VERSION}; update surprise_memory to read it"
        )
    if version == SCHEMA_VERSION:
        return
    if read_only:
        raise StoreError(
            f"{root}: store schema version {version} needs migrating to "
            f"{SCHEMA_VERSION}; open it once without read_only"
        )
    if version == 0:
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        if tables:
            raise StoreError(
                f"{root / DB_NAME}: not an episode store (tables "
                f"{sorted(t[0] for t in tables)} but no schema version)"
            )
        with transaction(conn):
            for stmt in _SCHEMA_V1:
                conn.execute(stmt)
            conn.execute("PRAGMA user_version = 1")
        version = 1
    for v in range(version, SCHEMA_VERSION):
        step = _MIGRATIONS.get(v)
        if step is None:
            raise StoreError(f"{root}: no migration from schema version {v} to {v + 1}")
        with transaction(conn):
            step(conn)
            conn.execute(f"PRAGMA user_version = {v + 1:d}")


# ----------------------------------------------------------------- loading the index
class IndexRow(NamedTuple):
    """One stored episode as the in-memory index loads it at open."""

    seq: int
    episode_id: str
    stamp_ns: int
    position: tuple[float, float, float]
    pose_valid: bool
    surprise: float
    nbytes: int
    embeddings: list[npt.NDArray[np.floating]]
    """Its frame embeddings as stored (dtype and dimension of the blobs), in frame order."""
    robot_id: str
    pose_frame: str
    camera: str
    kind: str


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The ``meta`` table as a dict (empty for a store without episodes)."""
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


FILTER_COLUMNS = (
    "seq, id, stamp_ns, pos_x, pos_y, pos_z, pose_valid, surprise, nbytes, "
    "robot_id, pose_frame_id, camera, kind"
)
"""The columns an open loads of each episode (no embeddings), in the order of
:class:`~surprise_memory.memory.store.column_file.EpisodeColumns` and :class:`IndexRow`."""


def index_rows(conn: sqlite3.Connection, after_seq: int = 0) -> Iterator[IndexRow]:
    """Every episode with its embeddings, in the order they were added (two cursors, merged).

    Args:
        conn: The database.
        after_seq: Only the episodes added after the one with this key (0 = all).

    Yields:
        One :class:`IndexRow` per episode; ``embeddings`` is empty for an episode that has
        none (a damaged store; the caller refuses it).

    """
    rows = conn.execute(
        f"SELECT {FILTER_COLUMNS} FROM episodes WHERE seq > ? ORDER BY seq", (after_seq,)
    )
    emb_rows = conn.execute(
        "SELECT episode_seq, dim, dtype, data FROM embeddings WHERE episode_seq > ? "
        "ORDER BY episode_seq, idx",
        (after_seq,),
    )
    pending = next(emb_rows, None)
    for seq, ep_id, stamp, x, y, z, valid, surprise, nbytes, *labels in rows:
        vecs = []
        while pending is not None and pending[0] == seq:
            _, d, dtype, blob = pending
            vecs.append(decode_blob(blob, d, dtype))
            pending = next(emb_rows, None)
        # labels: robot, pose frame, camera, kind
        yield IndexRow(seq, ep_id, stamp, (x, y, z), bool(valid), surprise, nbytes, vecs, *labels)


# ----------------------------------------------------------------- writing rows
def insert_episode(
    conn: sqlite3.Connection,
    rec: EpisodeRecord,
    *,
    nbytes: int,
    blobs: Sequence[bytes],
    dtype: str,
    jpeg_sizes: Sequence[int],
) -> int:
    """Insert an episode, its frames and its embeddings (inside the caller's transaction).

    Args:
        conn: The database.
        rec: The episode.
        nbytes: Its size for the disk budget (JPEGs + embedding blobs).
        blobs: One embedding blob per frame, in ``dtype``.
        dtype: The blobs' row dtype (:data:`.embedding_codec.BLOB_DTYPES`).
        jpeg_sizes: Size of each frame's JPEG, in order.

    Returns:
        The episode's key (``seq``).

    Raises:
        sqlite3.Error: An insert failed (e.g. the id exists).

    """
    values = (rec.id, *episode_values(rec), nbytes, rec.robot_id, rec.session_id, rec.kind)
    tail = (rec.place_key, *camera_values(rec.camera), *trust_values(rec.pose_trust))
    cur = conn.execute(_INSERT_EPISODE, (*values, *tail))
    seq = cur.lastrowid
    assert seq is not None
    conn.executemany(
        "INSERT INTO frames (episode_seq, idx, stamp_ns, path, nbytes) VALUES (?, ?, ?, ?, ?)",
        [
            (seq, i, s, path, size)
            for i, (s, path, size) in enumerate(
                zip(rec.frame_stamps_ns, rec.frame_paths, jpeg_sizes, strict=True)
            )
        ],
    )
    dim = blob_dim(blobs[0], dtype)
    conn.executemany(
        "INSERT INTO embeddings (episode_seq, idx, dim, dtype, data) VALUES (?, ?, ?, ?, ?)",
        [(seq, i, dim, dtype, blob) for i, blob in enumerate(blobs)],
    )
    return seq


def upsert_meta(conn: sqlite3.Connection, meta: Mapping[str, str]) -> None:
    """Insert or overwrite ``meta`` entries (inside the caller's transaction)."""
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        list(meta.items()),
    )


def delete_episodes(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
    """Delete episodes by key; their frames and embeddings go with them (``ON DELETE CASCADE``)."""
    conn.execute(
        "DELETE FROM episodes WHERE seq IN (SELECT value FROM json_each(?))",
        (json.dumps(list(seqs)),),
    )


# ----------------------------------------------------------------- reading rows
def select_records(
    conn: sqlite3.Connection, seqs: Sequence[int], root: Path
) -> dict[int, EpisodeRecord]:
    """The episodes with these keys, as records (two statements, whatever their number).

    Args:
        conn: The database.
        seqs: Episode keys; a key not stored is left out of the answer.
        root: The store folder, set as each record's ``root``.

    Returns:
        The records by key.

    Raises:
        sqlite3.Error: A statement failed.

    """
    arg = (json.dumps([int(s) for s in seqs]),)
    frames: dict[int, list[tuple[int, str]]] = {}
    for seq, _idx, stamp, path in conn.execute(_SELECT_FRAMES_BY_SEQ, arg):
        frames.setdefault(seq, []).append((stamp, path))
    out = {}
    for row in conn.execute(_SELECT_EPISODES_BY_SEQ, arg):
        (seq, ep_id, stamp, start, end, px, py, pz, ox, oy, oz, ow, frame_id, valid) = row[:14]
        fr = frames.get(seq, [])
        out[seq] = EpisodeRecord(
            id=ep_id,
            stamp_ns=stamp,
            start_ns=start,
            end_ns=end,
            pose=Pose(px, py, pz, ox, oy, oz, ow, frame_id),
            pose_valid=bool(valid),
            surprise=row[14],
            threshold=math.nan if row[15] is None else row[15],
            frame_stamps_ns=tuple(s for s, _ in fr),
            frame_paths=tuple(p for _, p in fr),
            encoder_model=row[16],
            encoder_pretrained=bool(row[17]),
            embedder_model=row[18],
            embedder_pretrained=bool(row[19]),
            created_wall_ns=row[20],
            robot_id=row[22],
            session_id=row[23],
            kind=row[24],
            place_key=row[25],
            camera=camera_from_row(row[26:_TRUST_AT]),
            pose_trust=trust_from_row(row[_TRUST_AT:]),
            root=root,
        )
    return out


def select_summaries(
    conn: sqlite3.Connection, robot_id: str | None
) -> Iterator[tuple[int, EpisodeSummary]]:
    """Every episode (or one robot's) in brief with its key, in the order added.

    Raises:
        sqlite3.Error: The statement failed.

    """
    if robot_id is None:
        rows = conn.execute(f"SELECT seq, {SUMMARY_COLUMNS} FROM episodes ORDER BY seq")
    else:
        rows = conn.execute(
            f"SELECT seq, {SUMMARY_COLUMNS} FROM episodes WHERE robot_id = ? ORDER BY seq",
            (robot_id,),
        )
    for row in rows:
        yield int(row[0]), EpisodeSummary.from_row(row[1:])


def select_embeddings(conn: sqlite3.Connection, seq: int) -> npt.NDArray[np.float32]:
    """The stored frame embeddings of one episode, (frames, D) float32, in frame order.

    Raises:
        sqlite3.Error: The statement failed.
        ValueError: The episode has no embeddings.

    """
    rows = conn.execute(
        "SELECT dim, dtype, data FROM embeddings WHERE episode_seq = ? ORDER BY idx",
        (seq,),
    )
    return np.stack([decode_blob(b, d, t).astype(np.float32) for d, t, b in rows])


def select_embeddings_of(
    conn: sqlite3.Connection, seqs: Sequence[int]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The stored frame embeddings of many episodes: one row per frame, with its episode.

    An episode the database does not hold is left out. Rows of several dtypes (a store
    whose ``embedding_dtype`` changed) are each read as written.

    Returns:
        The key of each row, ascending (an episode's frames in order), and the rows,
        (frames, D) float32.

    Raises:
        sqlite3.Error: The statement failed.
        ValueError: The rows differ in dimension.

    """
    rows = conn.execute(
        "SELECT episode_seq, dim, dtype, data FROM embeddings "
        "WHERE episode_seq IN (SELECT value FROM json_each(?)) ORDER BY episode_seq, idx",
        (json.dumps([int(s) for s in seqs]),),
    ).fetchall()
    if not rows:
        return np.empty(0, dtype=np.int64), np.empty((0, 0), dtype=np.float32)
    dims = {d for _, d, _, _ in rows}
    if len(dims) != 1:
        raise ValueError(f"embeddings of several dimensions: {sorted(dims)}")
    (dim,) = dims
    keys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    dtypes = [r[2] for r in rows]
    if len(set(dtypes)) == 1:
        return keys, decode_blobs([r[3] for r in rows], dim, dtypes[0])
    data = np.empty((len(rows), dim), dtype=np.float32)
    for dtype in set(dtypes):
        at = [i for i, t in enumerate(dtypes) if t == dtype]
        data[at] = decode_blobs([rows[i][3] for i in at], dim, dtype)
    return keys, data
