"""The PostgreSQL store's database: connection, schema, versions and migrations.

Every table lives in the PostgreSQL schema (namespace) ``surprise_memory`` of the database
the connection string names, so the store can share a database with other applications:

* ``meta (key, value)``: ``schema_version``, the embedder (``embedder_model``,
  ``embedder_pretrained``, ``embedding_dim``) and ``origin_ns``, as in the SQLite store;
* ``robots (robot_id, episodes, frames, nbytes, places, place_bytes)``: per-robot
  counters of its records (``places``, ``place_bytes``: the place keyframes among them)
  kept in step in the same transactions; the budget reads them, and an add locks its
  robot's row, which serialises the adds (and evictions) of one robot while other robots
  write in parallel;
* ``episodes``: one row per episode (``seq``, an identity column, with ``robot_id`` is
  the key; the id is unique per robot, and the store refuses an id another robot holds);
* ``frames (episode_seq, idx, robot_id, stamp_ns, jpeg)``: the frames' JPEG bytes
  (``bytea``);
* ``embeddings (episode_seq, idx, robot_id, stamp_ns, embedding)``: one unit-norm
  ``halfvec`` per frame; robot and stamp are copied from the episode so the exact scan
  can filter on them without a join;
* ``episode_vectors (episode_seq, robot_id, stamp_ns, pooled)`` (schema 2): one
  ``halfvec`` per episode, the unit-normalised mean of its frame embeddings
  (:func:`~surprise_memory.memory.store.postgres.rows.pooled_vector`), which the
  approximate index ranks; robot and stamp copied for the index scan's filters.

Since schema 8 every key holds the robot id (an episode's rows reference
``episodes (seq, robot_id)``), which is what a distributed PostgreSQL sharding every table
by robot needs (the fleet guide gives that route; untested here).

The approximate index, an HNSW index over ``pooled::halfvec(D)`` with
``halfvec_cosine_ops`` (one vector per episode: 8x fewer than one per frame, so the graph
of 100,000 episodes is about 250 MB instead of 2 GB), needs the dimension D, known only
with the first episode: it is created by :func:`ensure_ann_index` then (the dimension of
a store never changes). A store of several robots also holds one such index per robot (a
partial index), which that robot's queries search.

``meta.schema_version`` holds :data:`SCHEMA_VERSION`. :func:`ensure_schema` creates the
schema at version 1 in an empty database and runs one step of ``MIGRATIONS`` per version
after it, each step in its own transaction with the version update; a newer schema is
refused. Openers serialise on an advisory lock, so several processes opening a new
database at once (robots booting, ``surprise-memory migrate`` runs) create the pgvector
extension, the schema and its tables once; the others find them done. The lock is the
database's own (an advisory lock's key is per database).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from surprise_memory.errors import StoreError
from surprise_memory.memory.store.postgres.migrations import MIGRATIONS, SCHEMA_1
from surprise_memory.memory.store.postgres.watchdog import TimedConnection

__all__ = [
    "ANN_INDEX",
    "HNSW_EF_CONSTRUCTION",
    "HNSW_M",
    "MIGRATIONS",
    "PLACE_INDEX",
    "SCHEMA",
    "SCHEMA_VERSION",
    "connect",
    "ensure_ann_index",
    "ensure_schema",
    "robot_index_name",
    "schema_version",
]

SCHEMA = "surprise_memory"
"""The PostgreSQL schema (namespace) holding the store's tables."""

SCHEMA_VERSION = 8
"""Version of the PostgreSQL schema written by this code (``meta.schema_version``).

2. ``episode_vectors``: one pooled vector per episode (``migrations._v1_to_v2``).
3. ``snapshots``: a bag recorder's answers per episode (``migrations._v2_to_v3``).
4. ``episodes.session_id``: the session (the machine's boot) that stored the episode, ""
   (unknown) for older ones (``migrations._v3_to_v4``).
5. ``episodes.camera``, its optical frame and pose at the trigger
   (:mod:`~surprise_memory.memory.store.camera_columns`): older episodes were seen by one
   unnamed camera whose pose is unknown (``migrations._v4_to_v5``).
6. ``episodes.kind`` (``episode`` or ``place``: a place keyframe) and ``place_key``,
   indexed for the places' latest views; ``robots.places`` and ``robots.place_bytes``
   (the place keyframes among a robot's records, outside its budget); the eviction index
   holds episodes only. Older rows are episodes (``migrations._v5_to_v6``).
7. ``episodes.pose_sigma_m`` (the pose's horizontal 1-sigma uncertainty in metres, NULL =
   unknown) and ``episodes.map_id`` ("" = unknown;
   :mod:`~surprise_memory.memory.pose_trust`): older rows get unknown (``migrations._v6_to_v7``).
8. The robot id in every key: ``frames`` and ``snapshots`` gain ``robot_id``; the keys
   become ``episodes (seq, robot_id)`` and ``(id, robot_id)``, ``frames`` and
   ``embeddings (episode_seq, idx, robot_id)``, ``episode_vectors (episode_seq,
   robot_id)``, ``snapshots (episode_seq, kind, robot_id)``, and each table's foreign key
   ``(episode_seq, robot_id)``. Every row of an episode then lives with its robot, so a
   distributed PostgreSQL (Citus) can shard every table by ``robot_id`` and co-locate
   them without another migration (``migrations._v7_to_v8``).
"""

# pg_advisory_lock key of schema creation and migration: "SMEM" in ASCII
_SCHEMA_LOCK = 0x534D454D
_LOCK_POLL_S = 0.1  # between two tries of the schema lock


@contextlib.contextmanager
def _schema_lock(conn: psycopg.Connection[Any], what: str) -> Iterator[None]:
    """Hold the schema's advisory lock for the block.

    Waited for in short tries (``pg_try_advisory_lock``, each answered at once) rather than
    one ``pg_advisory_lock``: another opener may hold it for a while (a migration, over a
    slow link), and a client that waits for one answer that long is one the statement
    watchdog takes for a dead link. Given up after an hour.

    Raises:
        StoreError: Another session held the lock for an hour.
        psycopg.Error: A statement failed.

    """
    deadline = time.monotonic() + 3600.0
    while True:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (_SCHEMA_LOCK,)).fetchone()
        if row is not None and row[0]:
            break
        if time.monotonic() > deadline:
            raise StoreError(f"{what}: the store's schema lock has been held for an hour")
        time.sleep(_LOCK_POLL_S)
    try:
        yield
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SCHEMA_LOCK,))


LongWork = Callable[[], AbstractContextManager[Any]]
"""Entered around a statement that may take long (a migration step, an index build)."""


def _ms(seconds: float) -> str:
    return str(int(seconds * 1000))


def connect(url: str, *, read_only: bool, timeout_s: float) -> TimedConnection:
    """Open a connection in autocommit mode (transactions only through ``conn.transaction()``).

    A dead or silent link is noticed in seconds: what the URL does not set itself gets
    ``connect_timeout`` (2x ``timeout_s``, at least 2 s: libpq's least), TCP keepalives
    and ``tcp_user_timeout``, and the session's ``statement_timeout`` (10x; it also bounds
    a wait for a lock), ``idle_in_transaction_session_timeout`` (10x, at least 10 s) and
    server-side TCP keepalives, so the server also drops a robot whose link died and
    releases the locks it held (the schema's advisory lock among them). A hung server or
    a black-holed link is the client's
    :class:`~surprise_memory.memory.store.postgres.watchdog.StatementWatchdog`'s to cut.

    Args:
        url: A libpq connection string (``postgresql://...``); the password, if any, comes
            from ``PGPASSWORD`` or ``PGPASSFILE`` (libpq reads them), not from the URL.
        read_only: Make every transaction of the connection read-only.
        timeout_s: ``store_timeout_seconds``: the longest wait for one answer.

    Returns:
        The connection (its ``watchdog`` to be set by the caller).

    Raises:
        psycopg.Error: The server cannot be reached or refuses the login.

    """
    given = conninfo_to_dict(url)
    defaults = {
        "connect_timeout": str(max(2, math.ceil(2 * timeout_s))),
        "keepalives": "1",
        "keepalives_idle": str(max(1, math.ceil(timeout_s))),
        "keepalives_interval": "1",
        "keepalives_count": "3",
        "tcp_user_timeout": _ms(3 * timeout_s),
    }
    extra = {k: v for k, v in defaults.items() if k not in given}
    options = [str(given.get("options", "")).strip()]
    session = {  # the server drops a robot whose link died, and frees what it held
        "statement_timeout": _ms(10 * timeout_s),
        "idle_in_transaction_session_timeout": _ms(max(10.0, 10 * timeout_s)),
        "tcp_keepalives_idle": str(max(1, math.ceil(timeout_s))),
        "tcp_keepalives_interval": "1",
        "tcp_keepalives_count": "3",
    }
    options += [f"-c {k}={v}" for k, v in session.items() if k not in options[0]]
    if read_only:
        options.append("-c default_transaction_read_only=on")
    extra["options"] = " ".join(o for o in options if o)
    return TimedConnection.connect(make_conninfo(url, **extra), autocommit=True)


def _has_schema(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT to_regclass('surprise_memory.meta') IS NOT NULL, "
        "EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s)",
        (SCHEMA,),
    ).fetchone()
    assert row is not None
    has_meta, has_namespace = row
    if has_namespace and not has_meta:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (SCHEMA,)
        ).fetchone()
        if tables is not None and tables[0]:
            raise StoreError(
                f"schema {SCHEMA} holds tables but no meta table: not an episode store"
            )
    return bool(has_meta)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The store's schema version (0 when the database holds no store).

    Raises:
        StoreError: The schema exists but is not an episode store's.
        psycopg.Error: A statement failed.

    """
    if not _has_schema(conn):
        return 0
    row = conn.execute(
        "SELECT value FROM surprise_memory.meta WHERE key = 'schema_version'"
    ).fetchone()
    if row is None:
        raise StoreError(f"schema {SCHEMA} has no schema_version: not an episode store")
    return int(row[0])


def _has_extension(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    return row is not None


def _ensure_extension(conn: psycopg.Connection[Any], where: str) -> None:
    """Create pgvector in the database unless it is there (call under the schema lock).

    Openers of the store hold the advisory lock here, so they create it once; a process
    outside that lock creating it at the same instant (another application) makes ours
    fail on the catalog's unique index: then it exists, which is all that was wanted.

    Raises:
        StoreError: pgvector is not installed on the server, or this role may not create
            it; the message says which, and what to run.

    """
    if _has_extension(conn):
        return
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.UniqueViolation:
        if _has_extension(conn):
            return
        raise
    except (psycopg.errors.UndefinedFile, psycopg.errors.FeatureNotSupported) as exc:
        raise StoreError(
            f"{where}: the pgvector extension is not installed on this PostgreSQL server "
            f"({exc.diag.message_primary}); install pgvector (e.g. the postgresql-<version>-"
            "pgvector package) on the server, then open the store again"
        ) from exc
    except psycopg.errors.InsufficientPrivilege as exc:
        raise StoreError(
            f"{where}: the pgvector extension is not installed in this database and this "
            f"role cannot create it ({exc.diag.message_primary}); as a database owner or "
            "superuser run: CREATE EXTENSION vector;"
        ) from exc


def ensure_schema(
    conn: psycopg.Connection[Any],
    where: str,
    *,
    read_only: bool,
    long_work: LongWork = contextlib.nullcontext,
) -> None:
    """Create the store in an empty database or migrate an older one; register ``halfvec``.

    Args:
        conn: An autocommit connection.
        where: The store's location, for the messages (no password in it).
        read_only: Refuse to create or migrate (a reader never writes).
        long_work: Entered around each migration step of a store that was already there,
            which may take long with its rows (the session's watchdog allows it more
            time there); a store created here migrates its empty tables without it.

    Raises:
        StoreError: No store here (read-only), a newer schema, a migration needed but the
            store is read-only, a missing migration step, no pgvector, or another
            schema of the same name.
        psycopg.Error: A statement failed (the step's transaction is rolled back).

    """
    version = schema_version(conn)
    if version == SCHEMA_VERSION:
        register_vector(conn)
        return
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: store schema version {version} is newer than this code's "
            f"{SCHEMA_VERSION}; update surprise_memory to read it"
        )
    if read_only:
        if version == 0:
            raise StoreError(f"{where}: no episode store here (no schema {SCHEMA})")
        raise StoreError(
            f"{where}: store schema version {version} needs migrating to "
            f"{SCHEMA_VERSION}; open it once without read_only"
        )
    # one opener at a time creates or migrates; the others then find it done (CREATE
    # EXTENSION IF NOT EXISTS fails in the loser of a race, so it is under the lock too)
    with _schema_lock(conn, where):
        _ensure_extension(conn, where)
        version = schema_version(conn)  # another opener may have done it meanwhile
        if version == 0:
            with conn.transaction():
                conn.execute("CREATE SCHEMA IF NOT EXISTS surprise_memory")
                for stmt in SCHEMA_1:
                    conn.execute(stmt)
                conn.execute(
                    "INSERT INTO surprise_memory.meta (key, value) VALUES ('schema_version', '1')"
                )
            version = 1
            # the migrations then run on empty tables: quick, so each answer keeps the
            # ordinary bound (an hour's would let a link gone silent while a robot sets up
            # a fresh fleet server hold its sender that long)
            long_work = contextlib.nullcontext
        for v in range(version, SCHEMA_VERSION):
            step = MIGRATIONS.get(v)
            if step is None:
                raise StoreError(f"{where}: no migration from schema version {v} to {v + 1}")
            with long_work(), conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")  # a migration may take long
                step(conn)
                conn.execute(
                    "UPDATE surprise_memory.meta SET value = %s WHERE key = 'schema_version'",
                    (str(v + 1),),
                )
    register_vector(conn)


ANN_INDEX = "episode_vectors_hnsw"
"""The HNSW index over every episode's pooled vector (:func:`ensure_ann_index`)."""
HNSW_M = 32
"""Links per node of the HNSW graph (pgvector's default is 16)."""
HNSW_EF_CONSTRUCTION = 128
"""Search breadth while the HNSW graph is built (pgvector's default is 64).

Measured at 200,000 episodes of benchmarks/bench_lifetime.py's synthetic year (places
revisited all year: ~67 near-alike episodes per place): recall@10 0.965 with pgvector's
defaults (16, 64) at ef_search 400, 1.000 with (32, 128); the build takes ~4x longer.
"""


PLACE_INDEX = "episodes_place_gist"
"""The GiST index over ``point(pos_x, pos_y)`` of the episodes with a valid pose.

A place filter (within ``radius_m`` of ``near``) scans it by the radius's bounding box
(:mod:`~surprise_memory.memory.store.postgres.search`) instead of computing the distance
of every episode: at two million episodes a 25 m query's exact ranking read every
episode row (benchmarks/RESULTS.md, "Two million episodes"). PostgreSQL's own ``point``
operator class: no extension beyond pgvector.
"""


def robot_index_name(robot_id: str) -> str:
    """The name of ``robot_id``'s own HNSW index (a digest: a robot id may be 64 characters)."""
    digest = hashlib.blake2s(robot_id.encode(), digest_size=8).hexdigest()
    return f"{ANN_INDEX}_{digest}"


# rows (robots in the store, index name, valid) of the indexes among the names given; one
# row (robots, NULL, NULL) when none exists
_INDEX_STATES = (
    "SELECT r.n, x.relname, x.indisvalid FROM "
    "(SELECT count(*) AS n FROM surprise_memory.robots) r LEFT JOIN "
    "(SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'surprise_memory' AND c.relname = ANY(%s)) x ON TRUE"
)


def _index_states(
    conn: psycopg.Connection[Any], names: Collection[str]
) -> tuple[int, dict[str, bool]]:
    """The store's robots, and name -> valid of the indexes among ``names`` that exist."""
    rows = conn.execute(_INDEX_STATES, (list(names),)).fetchall()
    return int(rows[0][0]), {name: bool(ok) for _, name, ok in rows if name is not None}


_CREATE_PLACE_INDEX = sql.SQL(
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON surprise_memory.episodes "
    "USING gist (point(pos_x, pos_y)) WHERE pose_valid"
).format(name=sql.Identifier(PLACE_INDEX))


def _create_ann_index(name: str, dim: int, robot_id: str | None) -> sql.Composed:
    """The store's HNSW index ``name``; a robot's own (built concurrently) if ``robot_id``."""
    return sql.SQL(
        "CREATE INDEX {how} IF NOT EXISTS {name} ON surprise_memory.episode_vectors "
        "USING hnsw ((pooled::halfvec({dim})) halfvec_cosine_ops) "
        "WITH (m = {m}, ef_construction = {efc}){where}"
    ).format(
        how=sql.SQL("" if robot_id is None else "CONCURRENTLY"),
        name=sql.Identifier(name),
        dim=sql.Literal(int(dim)),
        m=sql.Literal(HNSW_M),
        efc=sql.Literal(HNSW_EF_CONSTRUCTION),
        where=sql.SQL("")
        if robot_id is None
        else sql.SQL(" WHERE robot_id = {}").format(sql.Literal(robot_id)),
    )


def ensure_ann_index(
    conn: psycopg.Connection[Any],
    dim: int,
    long_work: LongWork = contextlib.nullcontext,
    robots: Collection[str] | None = None,
) -> None:
    """Create the search's indexes if missing: HNSW over the pooled vectors, GiST over places.

    :data:`PLACE_INDEX` (the episodes' positions, for place filters) is built with the
    first episode, or concurrently over the rows of a store written before it existed
    (an index only: no schema version, so robots of either age share the server). The
    HNSW indexes over the pooled episode vectors of dimension ``dim`` are of two kinds,
    each built with :data:`HNSW_M` and :data:`HNSW_EF_CONSTRUCTION`:

    * :data:`ANN_INDEX` over every episode, which unfiltered queries search. Built once,
      with the first episode, it grows with each insert (a few milliseconds per frame),
      so no query waits for a build.
    * In a store of several robots, one per robot (:func:`robot_index_name`, a partial
      index ``WHERE robot_id = ...``), which a query for that robot searches instead: its
      graph holds that robot's episodes only, so no candidate is walked past for being
      another robot's. Measured on ten robots' million episodes (benchmarks/RESULTS.md,
      "A fleet on PostgreSQL"): one robot's query 42 -> 16-43 ms p50, recall@10 0.970
      -> 0.999. A store of one robot has none (it would copy the other). A robot's index
      comes with its adds: built over its rows when the store has a second robot (or
      after an upgrade), *concurrently* (``CREATE INDEX CONCURRENTLY``), so the other
      robots keep adding while it scans the shared table; a build killed midway leaves
      an invalid index, dropped and built again here.

    ``robots`` names the robots whose own index is checked; None = every robot of the
    store. ``long_work`` is entered around the builds, which take long over a store with
    rows (at 100,000 episodes of a robot, about two minutes here). An index built with
    other settings is kept (its name is what is checked); dropping one makes the next add
    build it again. Run outside a transaction; concurrent callers serialise on the
    schema's advisory lock (two ``CREATE INDEX IF NOT EXISTS`` at once may otherwise
    collide in the catalog).

    Raises:
        psycopg.Error: A statement failed.

    """
    if robots is None:
        robots = [r[0] for r in conn.execute("SELECT robot_id FROM surprise_memory.robots")]
    want: dict[str, sql.Composed] = {
        PLACE_INDEX: _CREATE_PLACE_INDEX,
        ANN_INDEX: _create_ann_index(ANN_INDEX, dim, None),
    }
    own = {robot_index_name(r): _create_ann_index(robot_index_name(r), dim, r) for r in robots}
    fleet, valid = _index_states(conn, want.keys() | own.keys())
    if fleet >= 2:  # one robot: its graph would be a copy of the one over every episode
        want |= own
    if all(valid.get(n) for n in want):
        return
    with _schema_lock(conn, "the search indexes"):
        conn.execute("SET statement_timeout = 0")  # a build over a migrated store takes long
        try:
            with long_work():
                _, valid = _index_states(conn, want)  # another opener may have built them
                for name, create in want.items():
                    if valid.get(name):
                        continue
                    if name in valid:  # left invalid by a concurrent build that was killed
                        conn.execute(
                            sql.SQL("DROP INDEX CONCURRENTLY surprise_memory.{}").format(
                                sql.Identifier(name)
                            )
                        )
                    conn.execute(create)
        finally:
            with contextlib.suppress(psycopg.Error):
                conn.execute("RESET statement_timeout")
