"""The PostgreSQL store's pooled episode vectors (schema 2), against a real server.

The approximate index ranks one pooled vector per episode (the normalised mean of its
frames); these tests check the vector each episode gets, the migration that fills them
into a schema-1 store, and what the candidate count does to the approximate answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from test_store_postgres import as_schema_5, as_schema_7

import surprise_memory.memory.store.postgres.schema as pg_schema
from surprise_memory.config import StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.camera_columns import CAMERA_COLUMN_TYPES
from surprise_memory.memory.store.postgres import PostgresEpisodeStore
from surprise_memory.memory.store.postgres.rows import pooled_vector
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "PE-Core-L-14-336"


def _add(store: PostgresEpisodeStore, rng: np.random.Generator, i: int, emb: np.ndarray) -> str:
    frames = [
        Frame(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), i * S + j) for j in range(len(emb))
    ]
    rec = store.add(
        frames, emb, stamp_ns=i * S, embedder_model=MODEL, embedder_pretrained=True, surprise=1.0
    )
    return rec.id


def _pooled_rows(url: str) -> dict[str, np.ndarray]:
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT e.id, v.pooled FROM surprise_memory.episode_vectors v "
            "JOIN surprise_memory.episodes e ON e.seq = v.episode_seq"
        ).fetchall()
    return {str(i): np.asarray(v.to_numpy(), np.float32) for i, v in rows}


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def test_pooled_vector_is_the_normalised_mean_or_the_first_frame() -> None:
    rng = np.random.default_rng(0)
    frames = _unit(rng.standard_normal((8, DIM)))
    want = frames.astype(np.float16).astype(np.float32).mean(axis=0)
    np.testing.assert_allclose(pooled_vector(frames), want / np.linalg.norm(want), atol=1e-6)
    e = _unit(rng.standard_normal(DIM))
    # two opposite frames cancel out: the first frame stands for the episode
    np.testing.assert_allclose(
        pooled_vector(np.stack([e, -e])), e.astype(np.float16).astype(np.float32), atol=1e-3
    )
    assert np.linalg.norm(pooled_vector(np.stack([e, -e]))) == pytest.approx(1.0, abs=1e-6)


def test_each_add_stores_its_pooled_vector_and_a_delete_removes_it(pg_url: str) -> None:
    rng = np.random.default_rng(1)
    e = _unit(rng.standard_normal(DIM))
    embs = {"plain": _unit(rng.standard_normal((8, DIM))), "opposite": np.stack([e, -e])}
    with open_store(pg_url) as store:
        ids = {name: _add(store, rng, i, emb) for i, (name, emb) in enumerate(embs.items())}
        stored = _pooled_rows(pg_url)
        assert set(stored) == set(ids.values())
        for name, emb in embs.items():
            np.testing.assert_allclose(stored[ids[name]], pooled_vector(emb), atol=2e-3)
        store.delete([ids["plain"]])
        assert set(_pooled_rows(pg_url)) == {ids["opposite"]}


def test_schema_1_store_is_migrated_to_pooled_vectors(pg_url: str) -> None:
    """A schema-1 store (frame index, no pooled vectors) opens as schema 2, answers alike."""
    rng = np.random.default_rng(2)
    topics = rng.standard_normal((4, DIM))
    e = _unit(rng.standard_normal(DIM))
    embs = [_unit(topics[i % 4] + 0.3 * rng.standard_normal((8, DIM))) for i in range(40)]
    embs.append(np.stack([e, -e, e]))  # the mean is e/3: normalised, e
    embs.append(np.stack([e, -e]))  # the mean is zero: the first frame
    with open_store(pg_url) as store:
        ids = [_add(store, rng, i, emb) for i, emb in enumerate(embs)]
    # turn it into the store schema 1 wrote: no pooled vectors, the HNSW index over frames
    as_schema_5(pg_url)  # no kinds or places
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE surprise_memory.snapshots")  # schema 3
        conn.execute("DROP TABLE surprise_memory.episode_vectors")
        conn.execute("ALTER TABLE surprise_memory.episodes DROP COLUMN session_id")  # schema 4
        for name, _, _ in CAMERA_COLUMN_TYPES:  # schema 5
            conn.execute(f"ALTER TABLE surprise_memory.episodes DROP COLUMN {name}")
        conn.execute(
            "CREATE INDEX embeddings_hnsw ON surprise_memory.embeddings "
            f"USING hnsw ((embedding::halfvec({DIM})) halfvec_cosine_ops)"
        )
        conn.execute("UPDATE surprise_memory.meta SET value = '1' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="needs migrating"):
        open_store(pg_url, read_only=True)
    with open_store(pg_url) as store:
        assert store.episode_ids() == ids
    with psycopg.connect(pg_url, autocommit=True) as conn:
        version = conn.execute(
            "SELECT value FROM surprise_memory.meta WHERE key = 'schema_version'"
        ).fetchone()
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = 'surprise_memory'"
            ).fetchall()
        }
    assert version == (str(pg_schema.SCHEMA_VERSION),)
    assert "episode_vectors_hnsw" in indexes and "embeddings_hnsw" not in indexes
    stored = _pooled_rows(pg_url)
    assert set(stored) == set(ids)
    for i, emb in zip(ids, embs, strict=True):  # the SQL fill follows pooled_vector's rule
        np.testing.assert_allclose(stored[i], pooled_vector(emb), atol=3e-3)
    exact = open_store(pg_url, StoreConfig(ann_min_frames=10**9), read_only=True)
    approx = open_store(pg_url, StoreConfig(ann_min_frames=0, ann_candidates=20), read_only=True)
    with exact, approx:
        for t in range(4):
            query = RetrievalQuery(
                embedding=topics[t] + 0.2 * rng.standard_normal(DIM),
                embedder_model=MODEL,
                max_results=5,
            )
            assert [h.episode.id for h in approx.retrieve(query)] == [
                h.episode.id for h in exact.retrieve(query)
            ]


def test_the_candidate_count_bounds_what_the_index_can_find(pg_url: str) -> None:
    """An episode matched by one frame but far from the query on average: the documented miss.

    Its max-over-frames score is 1 (the exact scan puts it first), but its pooled vector
    ranks it last among 60 episodes, so 10 candidates miss it and 60 find it, with the
    exact score either way for what is returned.
    """
    rng = np.random.default_rng(3)
    q = _unit(rng.standard_normal(DIM))
    with open_store(pg_url) as store:
        for i in range(59):  # alike the query on average (cosine about 0.5)
            _add(store, rng, i, _unit(q + 0.25 * rng.standard_normal((8, DIM))))
        # one frame is the query itself, seven point away from it
        odd = np.concatenate([q[None], _unit(-q + 0.1 * rng.standard_normal((7, DIM)))])
        odd_id = _add(store, rng, 59, odd)
    query = RetrievalQuery(embedding=q, embedder_model=MODEL, max_results=5)
    with open_store(pg_url, StoreConfig(ann_min_frames=10**9), read_only=True) as exact:
        want = exact.retrieve(query)
    assert want[0].episode.id == odd_id and want[0].score == pytest.approx(1.0, abs=2e-3)
    narrow = StoreConfig(ann_min_frames=0, ann_candidates=10)
    with open_store(pg_url, narrow, read_only=True) as approx:
        got = approx.retrieve(query)
    assert odd_id not in [h.episode.id for h in got]
    assert len(got) == 5
    with open_store(pg_url, read_only=True) as reader:
        for h in got:  # what the narrow search returns carries its exact score
            best = float((reader.embeddings(h.episode.id) @ query.query_vector).max())
            assert h.score == pytest.approx(best, abs=2e-3)
    assert [h.score for h in got] == sorted((h.score for h in got), reverse=True)
    wide = StoreConfig(ann_min_frames=0, ann_candidates=60)
    with open_store(pg_url, wide, read_only=True) as approx:
        assert [h.episode.id for h in approx.retrieve(query)] == [h.episode.id for h in want]


def test_only_a_store_with_rows_migrates_under_the_long_bound(pg_url: str) -> None:
    """A new store's migrations run on empty tables under the ordinary bound per answer; an
    hour's (a migration over a robot-year) would let a link gone silent while a robot sets
    up a fresh fleet server hold its sender that long."""
    entered: list[int] = []

    @contextlib.contextmanager
    def long_work() -> Iterator[None]:
        entered.append(1)
        yield

    with pg_schema.connect(pg_url, read_only=False, timeout_s=5.0) as conn:
        pg_schema.ensure_schema(conn, "new", read_only=False, long_work=long_work)
        assert entered == [] and pg_schema.schema_version(conn) == pg_schema.SCHEMA_VERSION
        as_schema_7(pg_url)  # back to schema 7: one step to migrate
        pg_schema.ensure_schema(conn, "old", read_only=False, long_work=long_work)
        assert entered == [1] and pg_schema.schema_version(conn) == pg_schema.SCHEMA_VERSION
