"""The PostgreSQL store's schema steps: the tables of schema 1 and each migration after it.

:func:`~surprise_memory.memory.store.postgres.schema.ensure_schema` creates
:data:`SCHEMA_1` in an empty database and runs ``MIGRATIONS[v]`` for each version ``v``
below :data:`~surprise_memory.memory.store.postgres.schema.SCHEMA_VERSION`, each in its own
transaction with the version's update (PostgreSQL's DDL is transactional). A new store
takes the same steps as an old one, so both end with the same tables and keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from surprise_memory.memory.store.camera_columns import CAMERA_COLUMN_TYPES
from surprise_memory.memory.store.postgres.snapshots import SNAPSHOTS_TABLE

if TYPE_CHECKING:
    from typing_extensions import LiteralString  # typing's from Python 3.11 (we run on 3.10)

__all__ = ["MIGRATIONS", "SCHEMA_1", "Migration"]

SCHEMA_1: tuple[LiteralString, ...] = (
    "CREATE TABLE surprise_memory.meta (key text PRIMARY KEY, value text NOT NULL)",
    """CREATE TABLE surprise_memory.robots (
        robot_id text PRIMARY KEY,
        episodes bigint NOT NULL,
        frames bigint NOT NULL,
        nbytes bigint NOT NULL
    )""",
    """CREATE TABLE surprise_memory.episodes (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        robot_id text NOT NULL,
        stamp_ns bigint NOT NULL,
        start_ns bigint NOT NULL,
        end_ns bigint NOT NULL,
        pos_x double precision NOT NULL,
        pos_y double precision NOT NULL,
        pos_z double precision NOT NULL,
        ori_x double precision NOT NULL,
        ori_y double precision NOT NULL,
        ori_z double precision NOT NULL,
        ori_w double precision NOT NULL,
        pose_frame_id text NOT NULL,
        pose_valid boolean NOT NULL,
        surprise double precision NOT NULL,
        threshold double precision,
        encoder_model text NOT NULL,
        encoder_pretrained boolean NOT NULL,
        embedder_model text NOT NULL,
        embedder_pretrained boolean NOT NULL,
        created_wall_ns bigint NOT NULL,
        nbytes bigint NOT NULL
    )""",
    "CREATE INDEX episodes_stamp ON surprise_memory.episodes (stamp_ns)",
    # the eviction order of one robot, read in index order
    "CREATE INDEX episodes_eviction ON surprise_memory.episodes "
    "(robot_id, surprise, stamp_ns, seq)",
    """CREATE TABLE surprise_memory.frames (
        episode_seq bigint NOT NULL REFERENCES surprise_memory.episodes (seq) ON DELETE CASCADE,
        idx smallint NOT NULL,
        stamp_ns bigint NOT NULL,
        jpeg bytea NOT NULL,
        PRIMARY KEY (episode_seq, idx)
    )""",
    """CREATE TABLE surprise_memory.embeddings (
        episode_seq bigint NOT NULL REFERENCES surprise_memory.episodes (seq) ON DELETE CASCADE,
        idx smallint NOT NULL,
        robot_id text NOT NULL,
        stamp_ns bigint NOT NULL,
        embedding halfvec NOT NULL,
        PRIMARY KEY (episode_seq, idx)
    )""",
    # a 1024-d halfvec is 2 KiB: keep it in the heap row (no TOAST detour on every scan)
    "ALTER TABLE surprise_memory.embeddings ALTER COLUMN embedding SET STORAGE PLAIN",
)

# schema 2: the per-episode pooled vectors, filled from the stored frames (the same rule
# as rows.pooled_vector: the normalised mean, or the first frame when the mean is about
# zero); the HNSW index over frames gives way to one over these (ensure_ann_index)
_V1_TO_V2: tuple[LiteralString, ...] = (
    """CREATE TABLE surprise_memory.episode_vectors (
        episode_seq bigint PRIMARY KEY
            REFERENCES surprise_memory.episodes (seq) ON DELETE CASCADE,
        robot_id text NOT NULL,
        stamp_ns bigint NOT NULL,
        pooled halfvec NOT NULL
    )""",
    "ALTER TABLE surprise_memory.episode_vectors ALTER COLUMN pooled SET STORAGE PLAIN",
    """INSERT INTO surprise_memory.episode_vectors (episode_seq, robot_id, stamp_ns, pooled)
    SELECT m.episode_seq, e.robot_id, e.stamp_ns, avg(m.embedding)
    FROM surprise_memory.embeddings m JOIN surprise_memory.episodes e ON e.seq = m.episode_seq
    GROUP BY m.episode_seq, e.robot_id, e.stamp_ns""",
    """UPDATE surprise_memory.episode_vectors v SET pooled = CASE
        WHEN l2_norm(v.pooled) < 1e-3 THEN (SELECT m.embedding FROM surprise_memory.embeddings m
            WHERE m.episode_seq = v.episode_seq ORDER BY m.idx LIMIT 1)
        ELSE l2_normalize(v.pooled) END""",
    "DROP INDEX IF EXISTS surprise_memory.embeddings_hnsw",
)


def _v1_to_v2(conn: psycopg.Connection[Any]) -> None:
    """Schema 1 -> 2: add ``episode_vectors`` (one pooled vector per episode), filled."""
    for stmt in _V1_TO_V2:
        conn.execute(stmt)


def _v2_to_v3(conn: psycopg.Connection[Any]) -> None:
    """Schema 2 -> 3: add ``snapshots`` (empty: no episode asked for one before)."""
    conn.execute(SNAPSHOTS_TABLE)


def _v3_to_v4(conn: psycopg.Connection[Any]) -> None:
    """Schema 3 -> 4: add ``episodes.session_id``, "" (unknown) for the episodes stored before."""
    conn.execute(
        "ALTER TABLE surprise_memory.episodes ADD COLUMN session_id text NOT NULL DEFAULT ''"
    )


_SQL_KINDS = {"text": "text", "bool": "boolean", "float": "double precision"}
_SQL_DEFAULTS = {"0": "0", "1": "1", "''": "''"}


def _v4_to_v5(conn: psycopg.Connection[Any]) -> None:
    """Schema 4 -> 5: the camera columns; older episodes: one unnamed camera, pose unknown."""
    for name, kind, default in CAMERA_COLUMN_TYPES:
        value = "false" if kind == "bool" else _SQL_DEFAULTS[default]
        conn.execute(
            sql.SQL(
                "ALTER TABLE surprise_memory.episodes ADD COLUMN {} {} NOT NULL DEFAULT {}"
            ).format(sql.Identifier(name), sql.SQL(_SQL_KINDS[kind]), sql.SQL(value))
        )


_V5_TO_V6: tuple[LiteralString, ...] = (
    "ALTER TABLE surprise_memory.episodes ADD COLUMN kind text NOT NULL DEFAULT 'episode'",
    "ALTER TABLE surprise_memory.episodes ADD COLUMN place_key text NOT NULL DEFAULT ''",
    # the places' views, newest first per place and robot; episodes are not in it
    "CREATE INDEX episodes_place ON surprise_memory.episodes (place_key, robot_id, stamp_ns) "
    "WHERE kind = 'place'",
    # the budget's order walks episodes only (place keyframes are outside the budget)
    "DROP INDEX surprise_memory.episodes_eviction",
    "CREATE INDEX episodes_eviction ON surprise_memory.episodes "
    "(robot_id, surprise, stamp_ns, seq) WHERE kind = 'episode'",
    "ALTER TABLE surprise_memory.robots ADD COLUMN places bigint NOT NULL DEFAULT 0",
    "ALTER TABLE surprise_memory.robots ADD COLUMN place_bytes bigint NOT NULL DEFAULT 0",
)


def _v5_to_v6(conn: psycopg.Connection[Any]) -> None:
    """Schema 5 -> 6: the record's kind and place; the rows stored before are episodes."""
    for stmt in _V5_TO_V6:
        conn.execute(stmt)


def _v6_to_v7(conn: psycopg.Connection[Any]) -> None:
    """Schema 6 -> 7: the pose's uncertainty and map; the rows stored before: unknown."""
    conn.execute("ALTER TABLE surprise_memory.episodes ADD COLUMN pose_sigma_m double precision")
    conn.execute("ALTER TABLE surprise_memory.episodes ADD COLUMN map_id text NOT NULL DEFAULT ''")


# the tables keyed by (episode_seq, ...) and their key after schema 8; the constraint names
# are those PostgreSQL gave the schema-1..7 keys (<table>_pkey, <table>_episode_seq_fkey)
_EPISODE_TABLES: tuple[tuple[LiteralString, LiteralString], ...] = (
    ("frames", "episode_seq, idx, robot_id"),
    ("embeddings", "episode_seq, idx, robot_id"),
    ("episode_vectors", "episode_seq, robot_id"),
    ("snapshots", "episode_seq, kind, robot_id"),
)


def _v7_to_v8(conn: psycopg.Connection[Any]) -> None:
    """Schema 7 -> 8: the robot id in every key (a store with rows: one pass per table).

    ``frames`` and ``snapshots`` get their episode's robot; a unique id is then unique per
    robot in the database (a distributed table's unique keys must hold its distribution
    column), and the store refuses an id another robot holds when it adds
    (:func:`~surprise_memory.memory.store.postgres.rows.copy_episodes`).
    """
    for table in ("frames", "snapshots"):
        conn.execute(
            sql.SQL("ALTER TABLE surprise_memory.{} ADD COLUMN robot_id text").format(
                sql.Identifier(table)
            )
        )
        conn.execute(
            sql.SQL(
                "UPDATE surprise_memory.{t} x SET robot_id = e.robot_id "
                "FROM surprise_memory.episodes e WHERE e.seq = x.episode_seq"
            ).format(t=sql.Identifier(table))
        )
        conn.execute(
            sql.SQL("ALTER TABLE surprise_memory.{} ALTER COLUMN robot_id SET NOT NULL").format(
                sql.Identifier(table)
            )
        )
    for table, _ in _EPISODE_TABLES:
        conn.execute(
            sql.SQL("ALTER TABLE surprise_memory.{} DROP CONSTRAINT {}, DROP CONSTRAINT {}").format(
                sql.Identifier(table),
                sql.Identifier(f"{table}_episode_seq_fkey"),
                sql.Identifier(f"{table}_pkey"),
            )
        )
    conn.execute(
        "ALTER TABLE surprise_memory.episodes DROP CONSTRAINT episodes_pkey, "
        "DROP CONSTRAINT episodes_id_key, ADD PRIMARY KEY (seq, robot_id), "
        "ADD CONSTRAINT episodes_id_key UNIQUE (id, robot_id)"
    )
    for table, key in _EPISODE_TABLES:
        conn.execute(
            sql.SQL(
                "ALTER TABLE surprise_memory.{t} ADD PRIMARY KEY ({key}), "
                "ADD FOREIGN KEY (episode_seq, robot_id) "
                "REFERENCES surprise_memory.episodes (seq, robot_id) ON DELETE CASCADE"
            ).format(t=sql.Identifier(table), key=sql.SQL(key))
        )


Migration = Callable[[psycopg.Connection[Any]], None]
MIGRATIONS: dict[int, Migration] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
}
"""Schema steps: ``MIGRATIONS[v]`` turns a version-v store into version v+1.

Add one entry per schema change (and bump
:data:`~surprise_memory.memory.store.postgres.schema.SCHEMA_VERSION`); each runs in its own
transaction together with the ``schema_version`` update, so a failure mid-migration leaves
the previous version intact (PostgreSQL's DDL is transactional).
"""
