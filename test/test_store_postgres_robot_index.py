"""A graph per robot in a PostgreSQL fleet store (issue 49), against a real server.

A store of several robots gets, besides the HNSW index over every episode, one partial HNSW
index per robot, which that robot's queries search (measured at a million episodes in
benchmarks/RESULTS.md). These tests check when each index comes (not for a store of one
robot; with each robot's adds once there are two), that a robot's query goes through its
own graph and answers as the exact scan does, and that a build killed midway (an invalid
index) or a dropped index is built again by the robot's next add.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from test_store_postgres import _sql

from surprise_memory.config import StoreConfig
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStoreBackend, open_store
from surprise_memory.memory.store.postgres.rows import graph_counts
from surprise_memory.memory.store.postgres.schema import ANN_INDEX, robot_index_name
from surprise_memory.memory.store.postgres.search import (
    EF_GRAPH_EPISODES,
    SqlSearch,
    search_breadth,
)
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 16
MODEL = "m"
_INDEXES = (
    "SELECT c.relname, i.indisvalid, pg_get_indexdef(c.oid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'surprise_memory' AND c.relname LIKE 'episode_vectors_hnsw%%'"
)


def _hnsw(url: str) -> dict[str, tuple[bool, str]]:
    """The store's HNSW indexes: name -> (valid, definition)."""
    return {str(n): (bool(ok), str(d)) for n, ok, d in _sql(url, _INDEXES)}


def _add(store: EpisodeStoreBackend, k: int, robot_id: str, emb: np.ndarray) -> None:
    rng = np.random.default_rng(k)
    frames = [Frame(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), k * S + i) for i in range(8)]
    store.add(
        frames,
        emb,
        stamp_ns=k * S,
        surprise=1.0,
        embedder_model=MODEL,
        embedder_pretrained=True,
        robot_id=robot_id,
    )


def test_a_robot_gets_its_own_graph_once_the_store_has_two(pg_url: str) -> None:
    """One robot: one graph. A second robot: each robot's add builds its own, valid.

    A query for one robot is sized by that robot's graph (the search breadth grows with it).
    """
    rng = np.random.default_rng(0)
    with open_store(pg_url) as store:
        for k in range(3):
            _add(store, k, "r1", rng.standard_normal((8, DIM)))
        assert set(_hnsw(pg_url)) == {ANN_INDEX}
        _add(store, 3, "r2", rng.standard_normal((8, DIM)))
        assert set(_hnsw(pg_url)) == {ANN_INDEX, robot_index_name("r2")}
        _add(store, 4, "r1", rng.standard_normal((8, DIM)))  # r1's index, over its rows
    indexes = _hnsw(pg_url)
    assert set(indexes) == {ANN_INDEX, robot_index_name("r1"), robot_index_name("r2")}
    for robot in ("r1", "r2"):
        valid, definition = indexes[robot_index_name(robot)]
        assert valid and definition.endswith(f"WHERE (robot_id = '{robot}'::text)"), definition
    counts = _sql(
        pg_url, "SELECT robot_id, count(*) FROM surprise_memory.episode_vectors GROUP BY 1"
    )
    assert dict(counts) == {"r1": 4, "r2": 1}  # what each robot's graph holds
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the graph each query searches
        assert graph_counts(conn, None) == (5, 40, 5)
        assert graph_counts(conn, "r1") == (5, 40, 4)
        assert graph_counts(conn, "r9") == (5, 40, 0)
    assert robot_index_name("r1") != robot_index_name("r2")
    assert len(robot_index_name("x" * 64)) <= 63  # PostgreSQL's longest name


def test_a_robots_query_searches_its_own_graph_and_answers_as_the_exact_scan(
    pg_url: str,
) -> None:
    rng = np.random.default_rng(3)
    topics = rng.standard_normal((4, DIM))
    with open_store(pg_url) as store:
        for k in range(60):
            emb = topics[k % 4] + 0.5 * rng.standard_normal((8, DIM))
            _add(store, k, f"r{k % 3}", emb)
        _add(store, 60, "r0", topics[0] + 0.5 * rng.standard_normal((8, DIM)))  # its index
    exact = open_store(pg_url, StoreConfig(ann_min_frames=10**9), read_only=True)
    approx = open_store(pg_url, StoreConfig(ann_min_frames=0, ann_candidates=30), read_only=True)
    with exact, approx:
        for t in range(4):
            for robot in ("r0", "r1"):
                q = topics[t] + 0.3 * rng.standard_normal(DIM)
                query = RetrievalQuery(embedding=q, embedder_model=MODEL, robot_id=robot)
                want = [h.episode.id for h in exact.retrieve(query)]
                got = approx.retrieve(query)
                assert [h.episode.id for h in got] == want
                assert {h.episode.robot_id for h in got} == {robot}
    query = RetrievalQuery(embedding=topics[0], embedder_model=MODEL, robot_id="r0")
    built = SqlSearch.build(query, 10, dim=DIM, ann_episodes=30)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET enable_seqscan = off")  # a 61-row table: the big table's plan
        conn.execute("SET enable_sort = off")
        # the generic plan a prepared statement may come to use (psycopg prepares a query
        # run 5 times): it can take the robot's index only with the robot as a literal
        conn.execute("SET plan_cache_mode = force_generic_plan")
        text = built.statement.as_string(conn)
        names = list(built.params)
        for i, name in enumerate(names, 1):
            text = text.replace(f"%({name})s", f"${i}")
        types = {int: "bigint", str: "text", HalfVector: "halfvec"}
        declared = ", ".join(types[type(built.params[n])] for n in names)
        conn.execute(f"PREPARE robot_query ({declared}) AS {text}")
        args = psycopg.sql.SQL(", ").join([psycopg.sql.Placeholder()] * len(names))
        explain = psycopg.sql.SQL("EXPLAIN EXECUTE robot_query({})").format(args)
        cursor = psycopg.ClientCursor(conn)  # EXECUTE's arguments inlined, typed by PREPARE
        plan = cursor.execute(explain, [built.params[n] for n in names]).fetchall()
        text = "\n".join(r[0] for r in plan)
        assert f"Index Scan using {robot_index_name('r0')} " in text, text


@pytest.mark.parametrize("damage", ["invalid", "dropped"])
def test_a_robots_graph_lost_or_left_invalid_is_built_again_by_its_next_add(
    pg_url: str, damage: str
) -> None:
    """A concurrent build killed midway leaves an invalid index; a user may drop one."""
    rng = np.random.default_rng(5)
    with open_store(pg_url) as store:
        for k in range(6):
            _add(store, k, f"r{k % 2}", rng.standard_normal((8, DIM)))
    name = robot_index_name("r0")
    assert _hnsw(pg_url)[name][0]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        if damage == "invalid":  # the state a killed CREATE INDEX CONCURRENTLY leaves
            conn.execute(
                "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
                (f"surprise_memory.{name}",),
            )
        else:
            conn.execute(
                psycopg.sql.SQL("DROP INDEX surprise_memory.{}").format(
                    psycopg.sql.Identifier(name)
                )
            )
    assert not _hnsw(pg_url).get(name, (False,))[0]
    with open_store(pg_url) as store:  # a writer's open checks the shared index only
        assert not _hnsw(pg_url).get(name, (False,))[0]
        _add(store, 6, "r1", rng.standard_normal((8, DIM)))  # another robot's add: not it
        assert not _hnsw(pg_url).get(name, (False,))[0]
        _add(store, 7, "r0", rng.standard_normal((8, DIM)))
    valid, definition = _hnsw(pg_url)[name]
    assert valid and "WHERE (robot_id = 'r0'::text)" in definition


def test_the_search_breadth_grows_with_the_graph_searched() -> None:
    config = StoreConfig()  # ann_ef_search 200
    assert search_breadth(config, 200, 1_000) == 200
    assert search_breadth(config, 200, EF_GRAPH_EPISODES) == 200
    assert search_breadth(config, 200, 1_000_000) == 800  # what the 1M fleet needed
    assert search_breadth(config, 200, 10_000_000) == 1000  # pgvector's largest
    assert search_breadth(config, 400, 1_000) == 400  # never fewer than the candidates
    assert search_breadth(StoreConfig(ann_ef_search=100), 50, 2 * EF_GRAPH_EPISODES) == 200
