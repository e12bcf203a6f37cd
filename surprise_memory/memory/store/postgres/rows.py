"""The SQL of the PostgreSQL store's rows: insert, count, evict, delete, read.

Every statement is a constant with bound parameters (lists go in as one array parameter);
no SQL is built from values. The functions run inside the caller's transaction where they
write, and raise :class:`psycopg.Error` (the store turns it into a
:class:`~surprise_memory.errors.StoreError` that says what it was doing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import HalfVector

from surprise_memory.errors import StoreError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import TRUST_COLUMNS, trust_from_row, trust_values
from surprise_memory.memory.store.camera_columns import (
    CAMERA_COLUMN_TYPES,
    CAMERA_COLUMNS,
    camera_from_row,
    camera_values,
)
from surprise_memory.memory.store.frame_files import FrameFiles
from surprise_memory.memory.store.records import EpisodeRecord, JpegSource, episode_values
from surprise_memory.memory.store.summary import SUMMARY_COLUMNS, EpisodeSummary

__all__ = [
    "add_robot_counts",
    "all_ids",
    "claim_meta",
    "copy_episodes",
    "delete_episodes",
    "eviction_order",
    "frame_count",
    "graph_counts",
    "insert_episode",
    "key_of",
    "keys_of",
    "latest_views",
    "lower_origin",
    "pooled_vector",
    "read_meta",
    "revision",
    "robot_counts",
    "select_embeddings",
    "select_frame",
    "select_jpegs",
    "select_records",
    "select_summaries",
    "store_counts",
    "surplus_views",
]

Conn = psycopg.Connection[Any]

_EPISODE_COLUMNS = (
    "seq, id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, ori_x, ori_y, ori_z, ori_w, "
    "pose_frame_id, pose_valid, surprise, threshold, encoder_model, encoder_pretrained, "
    "embedder_model, embedder_pretrained, created_wall_ns, robot_id, session_id, kind, "
    "place_key, " + CAMERA_COLUMNS + ", " + TRUST_COLUMNS
)
_TRUST_AT = 25 + len(CAMERA_COLUMN_TYPES)  # where the trust's columns start in a row
_WRITTEN_COLUMNS = (
    "id, robot_id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, ori_x, ori_y, ori_z, "
    "ori_w, pose_frame_id, pose_valid, surprise, threshold, encoder_model, "
    "encoder_pretrained, embedder_model, embedder_pretrained, created_wall_ns, nbytes, "
    "session_id, kind, place_key, " + CAMERA_COLUMNS + ", " + TRUST_COLUMNS
)
"""An episode row's columns as written, in :func:`_written_values`' order."""
_SELECT_RECORDS = (
    "SELECT " + _EPISODE_COLUMNS + ", "
    "ARRAY(SELECT f.stamp_ns FROM surprise_memory.frames f WHERE f.episode_seq = e.seq "
    "AND f.robot_id = e.robot_id ORDER BY f.idx) "
    "FROM surprise_memory.episodes e WHERE e.seq = ANY(%s)"
)
_POOLED_MIN_NORM = 1e-3


def pooled_vector(unit: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """The one vector per episode that the approximate index ranks episodes by.

    ``p = mean_i e_i / ||mean_i e_i||`` over the episode's unit frame embeddings ``e_i``
    as stored (rounded to float16). A query ``q`` has ``cos(q, p) = mean_i cos(q, e_i) /
    ||mean_i e_i||``, which ranks the episodes whose frames are alike (most of them: 8
    frames within seconds) nearly as the paper's score ``max_i cos(q, e_i)`` does; the
    best ``ann_candidates`` by ``p`` are then re-ranked by the exact max. Chosen because
    it is one vector (8x smaller graph) and measured (benchmarks/bench_fleet_store.py).
    When the frames cancel out (norm of the mean below 1e-3, e.g. two opposite frames),
    the first frame stands for the episode instead, so every episode has a unit vector
    the cosine index can rank.

    Args:
        unit: The episode's unit-norm frame embeddings, (frames >= 1, D).

    Returns:
        The pooled unit vector, (D,) float32.

    """
    stored = np.asarray(unit, dtype=np.float16).astype(np.float32)
    mean = stored.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    if norm < _POOLED_MIN_NORM:
        mean = stored[0]
        norm = max(float(np.linalg.norm(mean)), 1e-12)
    pooled: npt.NDArray[np.float32] = (mean / norm).astype(np.float32)
    return pooled


_SELECT_JPEGS = (
    "SELECT episode_seq, jpeg FROM surprise_memory.frames WHERE episode_seq = ANY(%s) "
    "ORDER BY episode_seq, idx"
)


def key_of(conn: Conn, episode_id: str) -> int | None:
    """The key of an episode, or None when it is not stored."""
    row = conn.execute(
        "SELECT seq FROM surprise_memory.episodes WHERE id = %s", (episode_id,)
    ).fetchone()
    return None if row is None else int(row[0])


def keys_of(conn: Conn, episode_ids: Sequence[str]) -> list[int]:
    """The keys of the stored episodes among ``episode_ids`` (others are skipped)."""
    found = conn.execute(
        "SELECT seq FROM surprise_memory.episodes WHERE id = ANY(%s)", (list(episode_ids),)
    ).fetchall()
    return [int(r[0]) for r in found]


def all_ids(conn: Conn) -> list[str]:
    """Ids of all episodes, in the order they were added."""
    found = conn.execute("SELECT id FROM surprise_memory.episodes ORDER BY seq").fetchall()
    return [str(r[0]) for r in found]


def read_meta(conn: Conn) -> dict[str, str]:
    """The ``meta`` table as a dict (``schema_version`` included)."""
    rows = conn.execute("SELECT key, value FROM surprise_memory.meta").fetchall()
    return {str(k): str(v) for k, v in rows}


def claim_meta(conn: Conn, entries: Mapping[str, str]) -> dict[str, str]:
    """Insert ``meta`` entries that are missing (first writer wins), then read ``meta``.

    Concurrent first adds of two writers serialise on the key: the second waits for the
    first's commit, keeps the first's value and sees it in the answer, so the caller can
    refuse an embedder that lost.

    Returns:
        The ``meta`` table as now visible to the transaction.

    """
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO surprise_memory.meta (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO NOTHING",
            list(entries.items()),
        )
    return read_meta(conn)


def lower_origin(conn: Conn, stamp_ns: int) -> None:
    """Set ``meta.origin_ns`` to ``stamp_ns`` when it is missing or later (the store's start).

    Read first and written only when it moves, so adds of a running fleet (whose stamps
    are past the origin) do not all queue on the one ``origin_ns`` row.
    """
    row = conn.execute("SELECT value FROM surprise_memory.meta WHERE key = 'origin_ns'").fetchone()
    if row is not None and int(row[0]) <= stamp_ns:
        return
    conn.execute(
        "INSERT INTO surprise_memory.meta (key, value) VALUES ('origin_ns', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value "
        "WHERE surprise_memory.meta.value::bigint > excluded.value::bigint",
        (str(stamp_ns),),
    )


def insert_episode(
    conn: Conn,
    rec: EpisodeRecord,
    unit: npt.NDArray[np.float32],
    jpegs: Sequence[bytes],
    *,
    nbytes: int,
) -> int:
    """Insert an episode, its frames, embeddings and pooled vector (caller's transaction).

    Args:
        conn: The connection.
        rec: The episode.
        unit: Its unit-norm embeddings, (frames, D); stored as ``halfvec``.
        jpegs: Each frame's JPEG bytes, in order.
        nbytes: Its size for the budget (JPEGs + embeddings as stored).

    Returns:
        The episode's key (``seq``).

    Raises:
        psycopg.errors.UniqueViolation: The id exists.
        StoreError: Another robot's episode has the id.

    """
    return copy_episodes(conn, [rec], [unit], [jpegs], [nbytes])[0]


def _written_values(rec: EpisodeRecord, nbytes: int) -> tuple[Any, ...]:
    values = (rec.id, rec.robot_id, *episode_values(rec), nbytes, rec.session_id, rec.kind)
    return (*values, rec.place_key, *camera_values(rec.camera), *trust_values(rec.pose_trust))


def copy_episodes(
    conn: Conn,
    records: Sequence[EpisodeRecord],
    units: Sequence[npt.NDArray[np.float32]],
    jpegs: Sequence[Sequence[bytes]],
    nbytes: Sequence[int],
) -> list[int]:
    """Insert episodes with their frames, embeddings and pooled vectors (caller's transaction).

    Four ``COPY`` statements and one ``SELECT`` for any number of episodes (a bulk load
    copies 64 at a time; an add, one).

    Returns:
        The episodes' keys (``seq``), in order.

    Raises:
        psycopg.errors.UniqueViolation: An id exists.
        StoreError: Another robot's episode has one of the ids (an id is unique per robot
            in the database since schema 8; the store keeps it unique across robots
            here, in the same transaction, so nothing of the batch is kept).

    """
    with conn.cursor().copy(f"COPY surprise_memory.episodes ({_WRITTEN_COLUMNS}) FROM STDIN") as cp:
        for rec, size in zip(records, nbytes, strict=True):
            cp.write_row(_written_values(rec, size))
    robot_of = {r.id: r.robot_id for r in records}
    seq_of: dict[str, int] = {}
    for ep_id, seq, robot_id in conn.execute(
        "SELECT id, seq, robot_id FROM surprise_memory.episodes WHERE id = ANY(%s)",
        (list(robot_of),),
    ):
        if robot_id != robot_of[ep_id]:
            raise StoreError(f"episode id {ep_id} is already in the store (robot {robot_id!r})")
        seq_of[ep_id] = int(seq)
    seqs = [seq_of[r.id] for r in records]
    _copy_binary(
        conn,
        "frames (episode_seq, idx, robot_id, stamp_ns, jpeg)",
        ["bigint", "smallint", "text", "bigint", "bytea"],
        (
            (seq, i, rec.robot_id, stamp, jpeg)
            for seq, rec, files in zip(seqs, records, jpegs, strict=True)
            for i, (stamp, jpeg) in enumerate(zip(rec.frame_stamps_ns, files, strict=True))
        ),
    )
    _copy_binary(
        conn,
        "embeddings (episode_seq, idx, robot_id, stamp_ns, embedding)",
        ["bigint", "smallint", "text", "bigint", "halfvec"],
        (
            (seq, i, rec.robot_id, rec.stamp_ns, HalfVector(v))
            for seq, rec, unit in zip(seqs, records, units, strict=True)
            for i, v in enumerate(unit)
        ),
    )
    _copy_binary(
        conn,
        "episode_vectors (episode_seq, robot_id, stamp_ns, pooled)",
        ["bigint", "text", "bigint", "halfvec"],
        (
            (seq, rec.robot_id, rec.stamp_ns, HalfVector(pooled_vector(unit)))
            for seq, rec, unit in zip(seqs, records, units, strict=True)
            if len(unit)
        ),
    )
    return seqs


def _copy_binary(
    conn: Conn, target: str, types: Sequence[str], rows: Iterable[tuple[Any, ...]]
) -> None:
    """``COPY`` ``rows`` into ``target`` (a table of the schema and its columns) in binary."""
    with conn.cursor().copy(f"COPY surprise_memory.{target} FROM STDIN WITH (FORMAT BINARY)") as cp:
        cp.set_types(list(types))
        for row in rows:
            cp.write_row(row)


def add_robot_counts(
    conn: Conn, robot_id: str, *, episodes: int, frames: int, nbytes: int, place: bool = False
) -> tuple[int, int]:
    """Add a record to a robot's counters (creating its row) and lock that row until commit.

    The lock is what serialises two adds of the same robot: the second waits here until
    the first has committed its record and its evictions, then sees their counts.

    Args:
        conn: The connection (inside the add's transaction).
        robot_id: The robot.
        episodes: Records added.
        frames: Their frames.
        nbytes: Their bytes.
        place: They are place keyframes (counted, but outside the budget).

    Returns:
        The robot's surprise episodes and their bytes after the change (the budget's).

    """
    places = (episodes, nbytes) if place else (0, 0)
    row = conn.execute(
        "INSERT INTO surprise_memory.robots AS r (robot_id, episodes, frames, nbytes, places, "
        "place_bytes) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (robot_id) DO UPDATE SET "
        "episodes = r.episodes + excluded.episodes, frames = r.frames + excluded.frames, "
        "nbytes = r.nbytes + excluded.nbytes, places = r.places + excluded.places, "
        "place_bytes = r.place_bytes + excluded.place_bytes "
        "RETURNING episodes - places, nbytes - place_bytes",
        (robot_id, episodes, frames, nbytes, *places),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def eviction_order(
    conn: Conn, robot_id: str, keep: int, sizes: dict[int, int], batch: int = 256
) -> Iterator[int]:
    """Keys of a robot's episodes in eviction order (lowest surprise, oldest, first added).

    Read lazily in batches along the ``episodes_eviction`` index, so a budget that needs
    one eviction reads one batch, whatever the store's size.

    Args:
        conn: The connection (inside the add's transaction).
        robot_id: The robot whose budget is applied.
        keep: The key never to list (the episode just added).
        sizes: Filled with each listed episode's bytes before its key is yielded.
        batch: Rows per statement.

    Yields:
        Episode keys.

    """
    after: tuple[float, int, int] | None = None
    while True:
        if after is None:
            rows = conn.execute(
                "SELECT seq, nbytes, surprise, stamp_ns FROM surprise_memory.episodes "
                "WHERE robot_id = %s AND kind = 'episode' AND seq <> %s "
                "ORDER BY surprise, stamp_ns, seq LIMIT %s",
                (robot_id, keep, batch),
            ).fetchall()
        else:
            rows = conn.execute(
                "SELECT seq, nbytes, surprise, stamp_ns FROM surprise_memory.episodes "
                "WHERE robot_id = %s AND kind = 'episode' AND seq <> %s "
                "AND (surprise, stamp_ns, seq) > (%s, %s, %s) "
                "ORDER BY surprise, stamp_ns, seq LIMIT %s",
                (robot_id, keep, *after, batch),
            ).fetchall()
        for seq, size, surprise, stamp in rows:
            sizes[int(seq)] = int(size)
            after = (float(surprise), int(stamp), int(seq))
            yield int(seq)
        if len(rows) < batch:
            return


def delete_episodes(conn: Conn, seqs: Sequence[int]) -> list[str]:
    """Delete episodes by key with their frames and embeddings; keep the robot counters.

    Returns:
        The ids deleted (keys not found are skipped).

    """
    rows = conn.execute(
        "WITH gone AS (DELETE FROM surprise_memory.episodes d WHERE d.seq = ANY(%s) "
        "RETURNING d.id, d.robot_id, d.nbytes, d.kind = 'place' AS place, "
        "(SELECT count(*) FROM surprise_memory.frames f WHERE f.episode_seq = d.seq "
        "AND f.robot_id = d.robot_id) AS nf), "
        "per_robot AS (SELECT robot_id, count(*) AS n, sum(nf) AS nf, sum(nbytes) AS nb, "
        "count(*) FILTER (WHERE place) AS np, "
        "coalesce(sum(nbytes) FILTER (WHERE place), 0) AS npb FROM gone GROUP BY robot_id), "
        "counted AS (UPDATE surprise_memory.robots r SET episodes = r.episodes - p.n, "
        "frames = r.frames - p.nf, nbytes = r.nbytes - p.nb, places = r.places - p.np, "
        "place_bytes = r.place_bytes - p.npb FROM per_robot p "
        "WHERE r.robot_id = p.robot_id RETURNING 1) "
        "SELECT id FROM gone",
        ([int(s) for s in seqs],),
    ).fetchall()
    return [str(r[0]) for r in rows]


def robot_counts(conn: Conn) -> dict[str, tuple[int, int, int]]:
    """Episodes, frames and bytes of each robot."""
    rows = conn.execute(
        "SELECT robot_id, episodes, frames, nbytes FROM surprise_memory.robots"
    ).fetchall()
    return {str(r): (int(e), int(f), int(b)) for r, e, f, b in rows}


def store_counts(conn: Conn) -> tuple[int, int, int]:
    """Episodes, frames and bytes of the whole store."""
    row = conn.execute(
        "SELECT coalesce(sum(episodes), 0), coalesce(sum(frames), 0), coalesce(sum(nbytes), 0) "
        "FROM surprise_memory.robots"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def graph_counts(conn: Conn, robot_id: str | None) -> tuple[int, int, int]:
    """The store's episodes and frames, and the episodes of the graph a query searches.

    A query for one robot of a store of several searches that robot's graph
    (:func:`~surprise_memory.memory.store.postgres.schema.ensure_ann_index`), the others
    the graph of every episode. One statement over the robots' counters, as
    :func:`store_counts`.
    """
    row = conn.execute(
        "SELECT coalesce(sum(episodes), 0), coalesce(sum(frames), 0), count(*), "
        "coalesce(sum(episodes) FILTER (WHERE robot_id = %s), 0) FROM surprise_memory.robots",
        (robot_id,),
    ).fetchone()
    assert row is not None
    episodes, frames, robots, mine = (int(v) for v in row)
    return episodes, frames, mine if robot_id is not None and robots > 1 else episodes


def select_records(
    conn: Conn, seqs: Sequence[int], source: JpegSource | None
) -> dict[int, EpisodeRecord]:
    """The episodes with these keys, as records (one statement), by key.

    Args:
        conn: The connection.
        seqs: Keys; a key not stored is left out.
        source: Set as each record's ``jpeg_source`` (the store, to read frames later).

    """
    out = {}
    for row in conn.execute(_SELECT_RECORDS, ([int(s) for s in seqs],)):
        (seq, ep_id, stamp, start, end, px, py, pz, ox, oy, oz, ow, frame_id, valid) = row[:14]
        stamps = tuple(int(s) for s in row[-1])
        out[int(seq)] = EpisodeRecord(
            id=ep_id,
            stamp_ns=int(stamp),
            start_ns=int(start),
            end_ns=int(end),
            pose=Pose(px, py, pz, ox, oy, oz, ow, frame_id),
            pose_valid=bool(valid),
            surprise=float(row[14]),
            threshold=math.nan if row[15] is None else float(row[15]),
            frame_stamps_ns=stamps,
            frame_paths=tuple(FrameFiles.relative_paths(ep_id, len(stamps))),
            encoder_model=row[16],
            encoder_pretrained=bool(row[17]),
            embedder_model=row[18],
            embedder_pretrained=bool(row[19]),
            created_wall_ns=int(row[20]),
            robot_id=row[21],
            session_id=row[22],
            kind=row[23],
            place_key=row[24],
            camera=camera_from_row(row[25:_TRUST_AT]),
            pose_trust=trust_from_row(row[_TRUST_AT:-1]),
            jpeg_source=source,
        )
    return out


def surplus_views(conn: Conn, record: EpisodeRecord, keep: int) -> list[int]:
    """The views of ``record``'s place and robot beyond the ``keep`` newest by stamp.

    As the SQLite store's :func:`~surprise_memory.memory.store.place_rows.surplus_views`,
    along the ``episodes_place`` index, inside the add's transaction.
    """
    rows = conn.execute(
        "SELECT seq FROM surprise_memory.episodes WHERE kind = 'place' AND place_key = %s "
        "AND robot_id = %s ORDER BY stamp_ns DESC, seq DESC OFFSET %s",
        (record.place_key, record.robot_id, keep),
    ).fetchall()
    return [int(r[0]) for r in rows]


def latest_views(conn: Conn, place_keys: Sequence[str], robot_id: str | None) -> list[int]:
    """The key of the newest view of each of these places (in their order; none: left out).

    As the SQLite store's :func:`~surprise_memory.memory.store.place_rows.latest_views`.
    """
    keys = list(dict.fromkeys(place_keys))
    if robot_id is None:
        rows = conn.execute(
            "SELECT (SELECT e.seq FROM surprise_memory.episodes e WHERE e.kind = 'place' "
            "AND e.place_key = k.key ORDER BY e.stamp_ns DESC, e.seq DESC LIMIT 1) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS k(key, n) ORDER BY k.n",
            (keys,),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT (SELECT e.seq FROM surprise_memory.episodes e WHERE e.kind = 'place' "
            "AND e.place_key = k.key AND e.robot_id = %s ORDER BY e.stamp_ns DESC, e.seq DESC "
            "LIMIT 1) FROM unnest(%s::text[]) WITH ORDINALITY AS k(key, n) ORDER BY k.n",
            (robot_id, keys),
        ).fetchall()
    return [int(r[0]) for r in rows if r[0] is not None]


def select_jpegs(conn: Conn, seqs: Sequence[int]) -> dict[int, list[bytes]]:
    """The JPEG bytes of each frame of these episodes, in frame order, by key."""
    out: dict[int, list[bytes]] = {int(s): [] for s in seqs}
    for seq, jpeg in conn.execute(_SELECT_JPEGS, ([int(s) for s in seqs],), binary=True):
        out[int(seq)].append(bytes(jpeg))
    return out


def select_embeddings(conn: Conn, seq: int) -> npt.NDArray[np.float32]:
    """The stored frame embeddings of one episode, (frames, D) float32 (empty when none)."""
    rows = conn.execute(
        "SELECT embedding FROM surprise_memory.embeddings WHERE episode_seq = %s ORDER BY idx",
        (seq,),
        binary=True,
    ).fetchall()
    if not rows:
        return np.empty((0, 0), dtype=np.float32)
    return np.stack([r[0].to_numpy() for r in rows]).astype(np.float32)


def select_summaries(conn: Conn, robot_id: str | None) -> list[EpisodeSummary]:
    """Every episode (or one robot's) in brief, in the order added."""
    if robot_id is None:
        rows = conn.execute(
            "SELECT " + SUMMARY_COLUMNS + " FROM surprise_memory.episodes ORDER BY seq"
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT " + SUMMARY_COLUMNS + " FROM surprise_memory.episodes WHERE robot_id = %s "
            "ORDER BY seq",
            (robot_id,),
        ).fetchall()
    return [EpisodeSummary.from_row(r) for r in rows]


def frame_count(conn: Conn, seq: int) -> int:
    """How many frames an episode has."""
    row = conn.execute(
        "SELECT count(*) FROM surprise_memory.frames WHERE episode_seq = %s", (seq,)
    ).fetchone()
    assert row is not None
    return int(row[0])


def select_frame(conn: Conn, seq: int, index: int) -> bytes:
    """The JPEG bytes of one frame of an episode (``index`` checked by the caller)."""
    row = conn.execute(
        "SELECT jpeg FROM surprise_memory.frames WHERE episode_seq = %s AND idx = %s",
        (seq, index),
        binary=True,
    ).fetchone()
    assert row is not None
    return bytes(row[0])


def revision(conn: Conn) -> tuple[int, int]:
    """(episodes stored, largest key ever used): changes with every add and every removal.

    Two index-only lookups (the robots' counters, the key's maximum), whatever the size.
    """
    row = conn.execute(
        "SELECT (SELECT coalesce(sum(episodes), 0) FROM surprise_memory.robots), "
        "(SELECT coalesce(max(seq), 0) FROM surprise_memory.episodes)"
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
