"""The PostgreSQL backend's own parts, against a real server (``store_backends.pg_server``).

Its schema and migrations, connection strings, read-only opens, reconnection, the HNSW
path against the exact one, and several writer processes with concurrent queries. The
semantics it shares with the SQLite store are tested on both in test_store.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

import surprise_memory.memory.store.postgres.schema as pg_schema
import surprise_memory.memory.store.postgres.search as pg_search
from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import describe_location, is_postgres_url, open_store
from surprise_memory.memory.store.camera_columns import CAMERA_COLUMN_TYPES
from surprise_memory.memory.store.postgres import PostgresEpisodeStore
from surprise_memory.memory.store.postgres.schema import PLACE_INDEX
from surprise_memory.memory.store.postgres.search import SqlSearch, ann_candidates
from surprise_memory.memory.store.records import host_session_id
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"
ROOT = Path(__file__).resolve().parents[1]


def _frames(rng: np.random.Generator, t0: int, n: int = 8) -> list[Frame]:
    return [Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), t0 + i) for i in range(n)]


def _add(store: PostgresEpisodeStore, rng: np.random.Generator, i: int, **kw: object):
    kw.setdefault("surprise", 1.0)
    emb = kw.pop("embeddings", None)
    if emb is None:
        emb = rng.standard_normal((8, DIM))
    return store.add(  # type: ignore[arg-type]
        _frames(rng, i * S),
        emb,
        stamp_ns=i * S,
        embedder_model=MODEL,
        embedder_pretrained=True,
        **kw,
    )


def _sql(url: str, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)  # type: ignore[call-overload]
        return cur.fetchall() if cur.description else []


def test_schema_lives_in_its_namespace_with_a_version_and_an_hnsw_index(pg_url: str) -> None:
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        assert isinstance(store, PostgresEpisodeStore)
        _add(store, rng, 0)
    tables = {
        r[0]
        for r in _sql(
            pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'surprise_memory'"
        )
    }
    assert tables == {
        "meta",
        "robots",
        "episodes",
        "frames",
        "embeddings",
        "episode_vectors",
        "snapshots",
    }
    assert _sql(pg_url, "SELECT value FROM surprise_memory.meta WHERE key = 'schema_version'") == [
        (str(pg_schema.SCHEMA_VERSION),)
    ]
    (kind,) = _sql(
        pg_url,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = 'surprise_memory.embeddings'::regclass AND attname = 'embedding'",
    )
    assert kind == ("halfvec",)
    (index,) = _sql(
        pg_url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'episode_vectors_hnsw'"
    )
    assert "hnsw" in str(index[0]) and "halfvec(16)" in str(index[0])
    # built with the graph settings measured at 200k episodes (not pgvector's 16 / 64)
    assert "m='32'" in str(index[0]) and "ef_construction='128'" in str(index[0]), index[0]
    assert _sql(pg_url, "SELECT count(*), sum(length(jpeg)) > 0 FROM surprise_memory.frames") == [
        (8, True)
    ]


def test_newer_foreign_and_missing_schemas_are_refused(pg_server: object, pg_url: str) -> None:
    with pytest.raises(StoreError, match="no episode store here"):
        open_store(pg_url, read_only=True)
    open_store(pg_url).close()
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99 is newer"):
        open_store(pg_url)
    from store_backends import new_database

    other = new_database(pg_server)
    _sql(other, "CREATE SCHEMA surprise_memory")
    _sql(other, "CREATE TABLE surprise_memory.other (x int)")
    with pytest.raises(StoreError, match="not an episode store"):
        open_store(other)


def test_migrations_run_each_step_once(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        rec = _add(store, rng, 0)

    def add_note(conn: psycopg.Connection[object]) -> None:
        conn.execute("ALTER TABLE surprise_memory.episodes ADD COLUMN note text DEFAULT ''")

    version = pg_schema.SCHEMA_VERSION
    monkeypatch.setattr(pg_schema, "SCHEMA_VERSION", version + 1)
    monkeypatch.setattr(pg_schema, "MIGRATIONS", {**pg_schema.MIGRATIONS, version: add_note})
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(pg_url, read_only=True)
    with open_store(pg_url) as store:
        assert store.get(rec.id) == rec
    with open_store(pg_url) as store:  # second open: nothing to do
        assert len(store) == 1
    assert _sql(pg_url, "SELECT note FROM surprise_memory.episodes") == [("",)]
    monkeypatch.setattr(pg_schema, "SCHEMA_VERSION", version + 2)
    with pytest.raises(StoreError, match=f"no migration from schema version {version + 1}"):
        open_store(pg_url)


def test_schema_3_store_gains_unknown_session_ids(pg_url: str) -> None:
    """A store from before session ids (schema 3) opens: its episodes' session is unknown
    (""), a new episode gets this machine's (issue 29)."""
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        old = _add(store, rng, 0)
    assert old.session_id == host_session_id()
    _drop_cameras(pg_url)
    _sql(pg_url, "ALTER TABLE surprise_memory.episodes DROP COLUMN session_id")
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '3' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(pg_url, read_only=True)
    with open_store(pg_url) as store:
        assert store.get(old.id) == dataclasses.replace(old, session_id="")
        new = _add(store, rng, 1, session_id="boot-elsewhere")
    with open_store(pg_url, read_only=True) as store:
        assert store.get(new.id).session_id == "boot-elsewhere"


# schema 7's keys, as PostgreSQL named them: (table, primary key, foreign key's columns)
_SCHEMA_7_KEYS = (
    ("frames", "episode_seq, idx"),
    ("embeddings", "episode_seq, idx"),
    ("episode_vectors", "episode_seq"),
    ("snapshots", "episode_seq, kind"),
)


def as_schema_7(pg_url: str) -> None:
    """Turn the store into what schema 7 wrote: keys without the robot id."""
    for table, _ in _SCHEMA_7_KEYS:
        _sql(
            pg_url,
            f"ALTER TABLE surprise_memory.{table} DROP CONSTRAINT {table}_pkey, "
            f"DROP CONSTRAINT {table}_episode_seq_robot_id_fkey",
        )
    _sql(
        pg_url,
        "ALTER TABLE surprise_memory.episodes DROP CONSTRAINT episodes_pkey, "
        "DROP CONSTRAINT episodes_id_key, ADD PRIMARY KEY (seq), "
        "ADD CONSTRAINT episodes_id_key UNIQUE (id)",
    )
    for table, key in _SCHEMA_7_KEYS:
        _sql(
            pg_url,
            f"ALTER TABLE surprise_memory.{table} ADD PRIMARY KEY ({key}), "
            "ADD FOREIGN KEY (episode_seq) REFERENCES surprise_memory.episodes (seq) "
            "ON DELETE CASCADE",
        )
    for table in ("frames", "snapshots"):
        _sql(pg_url, f"ALTER TABLE surprise_memory.{table} DROP COLUMN robot_id")
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '7' WHERE key = 'schema_version'")


def as_schema_6(pg_url: str) -> None:
    """Turn the store into what schema 6 wrote: no pose trust."""
    as_schema_7(pg_url)
    for column in ("pose_sigma_m", "map_id"):
        _sql(pg_url, f"ALTER TABLE surprise_memory.episodes DROP COLUMN {column}")
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '6' WHERE key = 'schema_version'")


def as_schema_5(pg_url: str) -> None:
    """Turn the store into what schema 5 wrote: no kinds or places, an eviction index of all."""
    as_schema_6(pg_url)
    for column in ("kind", "place_key"):  # their indexes go with them
        _sql(pg_url, f"ALTER TABLE surprise_memory.episodes DROP COLUMN {column}")
    for column in ("places", "place_bytes"):
        _sql(pg_url, f"ALTER TABLE surprise_memory.robots DROP COLUMN {column}")
    _sql(
        pg_url,
        "CREATE INDEX episodes_eviction ON surprise_memory.episodes "
        "(robot_id, surprise, stamp_ns, seq)",
    )
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '5' WHERE key = 'schema_version'")


def _drop_cameras(pg_url: str) -> None:
    """Turn the store's episodes into what schema 4 wrote: no camera columns."""
    as_schema_5(pg_url)
    for name, _, _ in CAMERA_COLUMN_TYPES:
        _sql(pg_url, f"ALTER TABLE surprise_memory.episodes DROP COLUMN {name}")


def test_schema_4_store_opens_with_one_unnamed_camera(pg_url: str) -> None:
    """A store from before cameras (schema 4) opens: its episodes were seen by one unnamed
    camera whose pose is unknown; a new episode keeps its camera (issue 42)."""
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        old = _add(store, rng, 0)
    _drop_cameras(pg_url)
    _sql(pg_url, "UPDATE surprise_memory.meta SET value = '4' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(pg_url, read_only=True)
    camera = CameraView("left", "left_optical", Pose(1.0, 2.0, 0.3, 0.0, 0.0, 0.0, 1.0, "map"))
    with open_store(pg_url) as store:
        assert store.get(old.id) == old and old.camera == CameraView()
        new = _add(store, rng, 1, camera=camera)
        assert [h.episode.id for h in store.search(camera="left")] == [new.id]
        assert [h.episode.id for h in store.search(camera="")] == [old.id]
    with open_store(pg_url, read_only=True) as store:
        assert store.get(new.id).camera == camera
    assert pg_schema.SCHEMA_VERSION == 8


def test_connection_strings_carry_no_password(pg_url: str) -> None:
    assert is_postgres_url(pg_url) and is_postgres_url("postgres://h/db")
    assert not is_postgres_url("~/store") and not is_postgres_url("postgresql_notes/")
    secret = "postgresql://robot:hunter2@db.example:5432/memory?sslmode=verify-full"
    with pytest.raises(StoreError, match="PGPASSFILE") as err:
        open_store(secret)
    assert "hunter2" not in str(err.value)
    shown = describe_location(secret)
    assert "hunter2" not in shown and "db.example" in shown and "verify-full" in shown


def test_read_only_store_refuses_writes_and_sees_new_commits(pg_url: str) -> None:
    rng = np.random.default_rng(0)
    with open_store(pg_url) as writer, open_store(pg_url, read_only=True) as reader:
        a = _add(writer, rng, 0)
        assert reader.episode_ids() == [a.id]
        with pytest.raises(StoreError, match="read-only"):
            _add(reader, rng, 1)  # type: ignore[arg-type]
        with pytest.raises(StoreError, match="read-only"):
            reader.delete([a.id])
        b = _add(writer, rng, 1)
        assert reader.episode_ids() == [a.id, b.id]  # a server store: no snapshot at open
        assert reader.get(b.id).load_jpegs() == writer.get(b.id).load_jpegs()


def test_a_dropped_connection_is_opened_again(pg_url: str) -> None:
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        rec = _add(store, rng, 0)
        _sql(
            pg_url,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        with contextlib.suppress(StoreError):  # the call that meets the drop may fail
            store.episode_ids()
        assert store.episode_ids() == [rec.id]
        assert _add(store, rng, 1).id in store


def test_hnsw_answers_equal_the_exact_scan(pg_url: str) -> None:
    """Above ann_min_frames the index names 40 of 120 episodes; re-ranked, it equals the scan."""
    rng = np.random.default_rng(5)
    topics = rng.standard_normal((6, DIM))
    with open_store(pg_url) as store:
        for i in range(120):
            centre = topics[i % 6] + 0.5 * rng.standard_normal(DIM)
            emb = centre + 0.2 * rng.standard_normal((8, DIM))
            _add(
                store,
                rng,
                i,
                embeddings=emb,
                pose=Pose(x=float(i % 17)),
                robot_id=f"r{i % 3}",
            )
    exact = open_store(pg_url, StoreConfig(ann_min_frames=10**9), read_only=True)
    approx = open_store(pg_url, StoreConfig(ann_min_frames=0, ann_candidates=40), read_only=True)
    queries = [
        {},
        {"robot_id": "r1"},
        {"start_ns": 30 * S, "end_ns": 90 * S},
        {"near": (3.0, 0.0, 0.0), "radius_m": 2.5},  # few candidates: the exact fallback
        {"robot_id": "r2", "near": (0.0, 0.0, 0.0)},
    ]
    with exact, approx:
        for extra in queries:
            for t in range(6):
                q = topics[t] + 0.3 * rng.standard_normal(DIM)
                query = RetrievalQuery(embedding=q, embedder_model=MODEL, max_results=10, **extra)
                want = exact.retrieve(query)
                got = approx.retrieve(query)
                assert [h.episode.id for h in got] == [h.episode.id for h in want], extra
                np.testing.assert_allclose(
                    [h.score for h in got], [h.score for h in want], atol=1e-6
                )
                for h in want:  # the score is the max cosine over the stored frames
                    vecs = exact.embeddings(h.episode.id)
                    best = (vecs @ query.query_vector) / np.linalg.norm(vecs, axis=1)
                    assert h.score == pytest.approx(float(best.max()), abs=2e-3)
        with pytest.raises(InputError, match="max_results_cap"):
            approx.retrieve(RetrievalQuery(max_results=10_000))
    # the approximate statement does go through the HNSW index
    query = RetrievalQuery(embedding=topics[0], embedder_model=MODEL, robot_id="r1")
    built = SqlSearch.build(query, 10, dim=DIM, ann_episodes=ann_candidates(10, StoreConfig()))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        # a 120-row table: make the plan the big one's (no scan of all rows, no sort of a
        # robot's vectors: since schema 8 the key (episode_seq, robot_id) offers PostgreSQL
        # 18 a skip scan of one robot's rows, cheaper than the graph only in a tiny table)
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        plan = conn.execute(psycopg.sql.SQL("EXPLAIN ") + built.statement, built.params)
        assert "episode_vectors_hnsw" in "\n".join(r[0] for r in plan.fetchall())


def test_selective_window_ranks_its_episodes_exactly(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window of at most EXACT_EPISODES episodes: candidates ranked exactly, no HNSW.

    Its answers equal the exact scan with the place and robot filters too; a wider window
    or a place goes through the index (iterative scan) and its answers equal the scan as
    well; the exact ranking of a place's episodes finds them through the place index.
    """
    rng = np.random.default_rng(11)
    topics = rng.standard_normal((4, DIM))
    with open_store(pg_url) as store:
        for i in range(90):
            emb = (
                topics[i % 4] + 0.5 * rng.standard_normal(DIM) + 0.2 * rng.standard_normal((8, DIM))
            )
            _add(store, rng, i, embeddings=emb, pose=Pose(x=float(i % 13)), robot_id=f"r{i % 2}")
    monkeypatch.setattr(pg_search, "EXACT_EPISODES", 30)
    exact = open_store(pg_url, StoreConfig(ann_min_frames=10**9), read_only=True)
    narrow = open_store(pg_url, StoreConfig(ann_min_frames=0, ann_candidates=10), read_only=True)
    wide = open_store(pg_url, StoreConfig(ann_min_frames=0, ann_candidates=30), read_only=True)
    windows = [
        ({"start_ns": 20 * S, "end_ns": 45 * S}, True),  # 26 episodes
        ({"start_ns": 20 * S, "end_ns": 45 * S, "robot_id": "r1"}, True),
        ({"start_ns": 0, "end_ns": 80 * S, "near": (4.0, 0.0, 0.0), "radius_m": 3.5}, False),
        ({"start_ns": 10 * S, "end_ns": 70 * S, "near": (6.0, 0.0, 0.0), "radius_m": 2.5}, False),
        ({"end_ns": 29 * S, "near": (6.0, 0.0, 0.0), "radius_m": 2.5}, True),
        ({"near": (6.0, 0.0, 0.0), "radius_m": 1.2}, False),  # a place alone: the graph first
    ]
    with exact, narrow, wide, psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        for extra, few in windows:
            for t in range(4):
                q = topics[t] + 0.3 * rng.standard_normal(DIM)
                query = RetrievalQuery(embedding=q, embedder_model=MODEL, max_results=5, **extra)
                assert pg_search._few_in_window(conn, query) is few, extra
                want = exact.retrieve(query)
                got = (narrow if few else wide).retrieve(query)
                assert want, extra
                assert [h.episode.id for h in got] == [h.episode.id for h in want], extra
                np.testing.assert_allclose(
                    [h.score for h in got], [h.score for h in want], atol=1e-6
                )
        # the selective window's statement ranks the pooled vectors without the index
        query = RetrievalQuery(
            embedding=topics[0], embedder_model=MODEL, start_ns=20 * S, end_ns=45 * S
        )
        for exact_candidates, uses_index in ((True, False), (False, True)):
            built = SqlSearch.build(
                query, 10, dim=DIM, ann_episodes=10, exact_candidates=exact_candidates
            )
            with conn.transaction():
                conn.execute("SET LOCAL enable_seqscan = off")  # small tables: the big plan
                plan = conn.execute(psycopg.sql.SQL("EXPLAIN ") + built.statement, built.params)
                text = "\n".join(r[0] for r in plan.fetchall())
            assert ("episode_vectors_hnsw" in text) is uses_index, text
        # a place's episodes come from the place index, by the radius's bounding box
        query = RetrievalQuery(
            embedding=topics[0], embedder_model=MODEL, near=(6.0, 0.0, 0.0), radius_m=1.2
        )
        built = SqlSearch.build(
            query, 10, dim=DIM, ann_episodes=10, frame="", exact_candidates=True
        )
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = conn.execute(psycopg.sql.SQL("EXPLAIN ") + built.statement, built.params)
            text = "\n".join(r[0] for r in plan.fetchall())
        assert PLACE_INDEX in text, text


def test_a_store_without_the_place_index_answers_the_same_and_gains_it_when_opened_to_write(
    pg_url: str,
) -> None:
    """The place index is an index only (no schema version): a store written before it
    (here: the index dropped) answers place queries the same without it, read-only, and
    a writable open builds it (valid) over the rows already there."""
    rng = np.random.default_rng(5)
    with open_store(pg_url) as store:
        for i in range(40):
            _add(store, rng, i, pose=Pose(x=float(i % 10), y=float(i % 3)))
    index = f"surprise_memory.{PLACE_INDEX}"
    valid = "SELECT (SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s))"
    assert _sql(pg_url, valid, (index,)) == [(True,)]
    queries = [
        RetrievalQuery(near=(4.0, 1.0, 0.0), radius_m=1.5, max_results=50),
        RetrievalQuery(
            embedding=rng.standard_normal(DIM),
            embedder_model=MODEL,
            near=(4.0, 1.0, 0.0),
            radius_m=2.5,
            max_results=10,
        ),
    ]

    def answers() -> list[list[tuple[str, float | None, float | None]]]:
        with open_store(pg_url, read_only=True) as reader:
            return [
                [(h.episode.id, h.score, h.distance_m) for h in reader.retrieve(q)] for q in queries
            ]

    before = answers()
    assert len(before[0]) == sum(1 for i in range(40) if np.hypot(i % 10 - 4.0, i % 3 - 1.0) <= 1.5)
    _sql(pg_url, f"DROP INDEX {index}")
    assert answers() == before  # no index, the same answers
    assert _sql(pg_url, valid, (index,)) == [(None,)]
    with open_store(pg_url):  # a writer's open builds it
        pass
    assert _sql(pg_url, valid, (index,)) == [(True,)]


_WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from surprise_memory.config import StoreConfig
    from surprise_memory.perception.frames import Frame
    from surprise_memory.memory.store import open_store

    url, robot = sys.argv[1], sys.argv[2]
    count, seed, budget = (int(a) for a in sys.argv[3:6])
    rng = np.random.default_rng(seed)
    with open_store(url, StoreConfig(robot_id=robot, max_episodes=budget)) as store:
        for i in range(count):
            frames = [
                Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), i * 10**9 + j)
                for j in range(8)
            ]
            rec = store.add(
                frames, rng.standard_normal((8, 16)), stamp_ns=i * 10**9 + seed,
                surprise=float(rng.uniform(0, 5)), embedder_model="m", embedder_pretrained=True,
                episode_id=f"{robot}-{seed}-{i:03d}",
            )
            print(rec.id, flush=True)
    """
)


def test_many_writer_processes_and_concurrent_queries(pg_url: str) -> None:
    """Four writer processes (three robots, one with a budget shared by two writers), queries
    running meanwhile: nothing lost or doubled, counters right, answers equal exact search."""
    open_store(pg_url).close()  # the schema exists before the writers race
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    plan = [
        ("alpha", 25, 1, 0),
        ("bravo", 25, 2, 0),
        ("charlie", 20, 3, 12),
        ("charlie", 20, 4, 12),
    ]
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, pg_url, robot, str(n), str(seed), str(budget)],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for robot, n, seed, budget in plan
    ]
    errors: list[BaseException] = []
    stop = threading.Event()
    answered = [0]

    def reader() -> None:
        rng = np.random.default_rng(9)
        try:
            with open_store(pg_url, read_only=True) as store:
                while not stop.is_set():
                    if store.embedder_model is None:
                        continue
                    q = rng.standard_normal(DIM)
                    hits = store.search(
                        embedding=q, embedder_model="m", max_results=5, include_images=True
                    )
                    scores = [h.score for h in hits]
                    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
                    assert all(len(h.jpegs) == 8 for h in hits)
                    answered[0] += 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    printed = []
    for w in writers:
        out, _ = w.communicate(timeout=300)
        assert w.returncode == 0
        printed.append(out.split())
    stop.set()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert answered[0] > 0
    with open_store(pg_url, read_only=True) as store:
        ids = store.episode_ids()
        assert len(ids) == len(set(ids))  # nothing doubled
        for (_, n, _, budget), out in zip(plan, printed, strict=True):
            assert len(out) == n  # every add committed
            if not budget:
                assert set(out) <= set(ids)  # nothing lost
        charlie = [i for i in ids if i.startswith("charlie")]
        assert len(charlie) == 12  # one budget for the robot's two writers
        assert len(ids) == 25 + 25 + 12
        counts = store.robot_counts()  # type: ignore[attr-defined]
        rows = _sql(
            pg_url,
            "SELECT robot_id, count(*), sum(nbytes) FROM surprise_memory.episodes "
            "GROUP BY robot_id",
        )
        assert {r: (e, b) for r, (e, _, b) in counts.items()} == {r: (c, b) for r, c, b in rows}
        # the answers equal an exact max-over-frames search over what is stored
        vecs = {i: store.embeddings(i) for i in ids}
        robots = {i: store.get(i).robot_id for i in ids}
        rng = np.random.default_rng(3)
        for robot in (None, "charlie"):
            q = rng.standard_normal(DIM)
            q /= np.linalg.norm(q)
            best = {
                i: float((v @ q / np.linalg.norm(v, axis=1)).max())
                for i, v in vecs.items()
                if robot is None or robots[i] == robot
            }
            want = sorted(best, key=lambda i: -best[i])[:10]
            hits = store.search(embedding=q, embedder_model="m", max_results=10, robot_id=robot)
            assert [h.episode.id for h in hits] == want


def test_the_agent_tool_searches_the_fleet_or_one_robot(pg_url: str) -> None:
    from surprise_memory.agents.tool import EpisodicMemoryTool

    rng = np.random.default_rng(2)
    with open_store(pg_url) as store:
        for i in range(6):
            _add(store, rng, i + 1, robot_id="alpha" if i < 4 else "bravo", pose=Pose(x=1.0))
        fleet = EpisodicMemoryTool(store).execute(position=[0, 0, 0], max_results=10)
        assert [e["robot"] for e in fleet["episodes"]].count("bravo") == 2
        assert fleet["count"] == 6 and fleet["episodes"][0]["time"] == 5.0  # origin: 1 s
        one = EpisodicMemoryTool(store, robot_id="alpha").execute(
            start_time=1.0, max_results=10, include_images=True
        )
        assert {e["robot"] for e in one["episodes"]} == {"alpha"} and one["count"] == 3
        assert one["_images"] and one["_images"][0]["base64"]
    with pytest.raises(InputError, match="robot_id="):
        EpisodicMemoryTool(store, robot_id="two words")
