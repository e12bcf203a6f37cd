"""Retrieval in SQL over pgvector: the same answers as the in-memory search of the SQLite store.

A :class:`~surprise_memory.memory.retrieval.RetrievalQuery` becomes one statement, built
from constant fragments (one per filter the query has; the values are bound parameters):

* **filters**: ``robot_id``, ``camera``, ``kinds``, the time window on the trigger stamp, and the
  place (valid pose, distance to ``near`` within ``radius_m``), as in
  :class:`~surprise_memory.memory.store.search.EmbeddingIndex`;
* **ranking with an embedding**: an episode's score is the paper's max cosine over its
  frames, ``max(1 - (embedding <=> q))`` between ``halfvec`` values (pgvector computes
  in float32; the query rounded to float16 moves a cosine by about 1e-4); ties go to the
  newer trigger stamp, then the later insertion, like the SQLite store;
* **exact** below ``ann_min_frames`` stored frames: every frame of the episodes the filters
  leave is scored (the episodes found by their own indexes, e.g. the stamp for a time
  window, each one's frames fetched by primary key: no scan of every frame);
* **approximate** above it: the HNSW index over the episodes' pooled vectors (one per
  episode, the normalised mean of its frames, see
  :func:`~surprise_memory.memory.store.postgres.rows.pooled_vector`) names the
  ``ann_candidates`` episodes nearest to the query (filtered on time in the index scan,
  ``hnsw.iterative_scan = relaxed_order``, ``hnsw.ef_search`` by :func:`search_breadth`:
  wider in a larger graph; a query for one robot searches that robot's own graph, a
  partial index, see :func:`~surprise_memory.memory.store.postgres.schema.ensure_ann_index`);
  their frames, fetched by primary key, are then
  scored exactly and each episode ranked by max-over-frames. Every returned score is
  exact; what the index can miss is an episode whose mean is far from the query while
  one of its frames is close (the benchmark measures how often). When the candidates
  leave fewer than ``k`` episodes after the place filter, the candidates are named again
  by an exact ranking of the pooled vectors of every episode the filters leave (below),
  a place's episodes found through the place index
  (:data:`~surprise_memory.memory.store.postgres.schema.PLACE_INDEX`) by the radius's
  bounding box;
* **selective time window**: when a time window (and robot) leaves at most
  :data:`EXACT_EPISODES` episodes, the candidates are the ``ann_candidates`` episodes of
  the window (and place) nearest by their pooled vector, ranked *exactly* (no graph,
  every filter applied before ranking), then re-ranked by their frames as above: the
  HNSW scan would have to walk past ``1 / selectivity`` non-matching episodes per
  candidate (a one-day window of a robot-year holds 0.3 % of them), as the embedded
  store's :class:`~surprise_memory.memory.store.episode_index.EpisodeIndex` does too;
* **without an embedding**: by distance to ``near`` when given, else newest first.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import psycopg
from pgvector import HalfVector
from psycopg import sql

from surprise_memory.config import StoreConfig
from surprise_memory.memory.retrieval import RetrievalQuery, one_pose_frame
from surprise_memory.memory.store.postgres.rows import graph_counts

__all__ = [
    "EF_GRAPH_EPISODES",
    "EXACT_EPISODES",
    "PGVECTOR_MAX_EF",
    "SqlSearch",
    "ann_candidates",
    "find",
    "run_search",
    "search_breadth",
]

EXACT_EPISODES = 32_768
"""A time window leaving at most this many episodes ranks their pooled vectors exactly.

Measured on ten robots' million episodes (benchmarks/RESULTS.md, "A fleet on
PostgreSQL"): a day of the whole fleet (about 18,400 episodes, 1.8 % of the store) ranked
exactly took 27 ms p50 / 31 ms p99 with recall@10 1.000, against 88 / 105 ms and 0.935
through the graph, whose filtered scan walks past ~55 other episodes per match. A window
is counted along the stamp index (at most this many entries) before each such query.
"""

_EPISODE_FILTERS = {
    "robot": "e.robot_id = %(robot)s",
    "camera": "e.camera = %(camera)s",
    "kinds": "e.kind = ANY(%(kinds)s)",
    "start": "e.stamp_ns >= %(start)s",
    "end": "e.stamp_ns <= %(end)s",
    "pose": "e.pose_valid",
    "frame": "e.pose_frame_id = %(frame)s",
    "radius": "(" + "{dist}" + ") <= %(radius)s",
    # the radius's bounding box, which the place index (schema.PLACE_INDEX) answers; its
    # expression and the pose_valid filter are the index's own, or the planner cannot use it
    "box": "point(e.pos_x, e.pos_y) <@ box(point(%(x)s - %(radius)s, %(y)s - %(radius)s), "
    "point(%(x)s + %(radius)s, %(y)s + %(radius)s))",
}
# on the pooled vectors (alias v) in the HNSW scan; the robot as a literal ({robot}, filled
# by sql.Literal), not a parameter: only then can the planner match the robot's own partial
# index (schema.ensure_ann_index), in every plan it caches
_VECTOR_FILTERS = {
    "robot": "v.robot_id = {robot}",
    "start": "v.stamp_ns >= %(start)s",
    "end": "v.stamp_ns <= %(end)s",
}
_DIST = "sqrt((e.pos_x - %(x)s)^2 + (e.pos_y - %(y)s)^2 + (e.pos_z - %(z)s)^2)"


EF_GRAPH_EPISODES = 250_000
"""The graph size up to which ``ann_ef_search`` is the search breadth as set.

A larger graph is searched proportionally wider (:func:`search_breadth`). Measured on ten
robots' episodes (benchmarks/RESULTS.md, "A fleet on PostgreSQL"): breadth 200 found the
true top-10 at 100,000 and 300,000 episodes (recall@10 0.998, 1.000) but 0.844 at
1,000,000, where 800 found 0.962 (the misses ties within 0.003) at text p99 24 ms; 800 at
100,000 only cost 15 ms of p50.
"""
PGVECTOR_MAX_EF = 1000
"""pgvector's largest ``hnsw.ef_search``."""


def search_breadth(config: StoreConfig, candidates: int, graph_episodes: int) -> int:
    """``hnsw.ef_search`` for a graph of ``graph_episodes`` episodes.

    ``ann_ef_search`` per :data:`EF_GRAPH_EPISODES` episodes (at least ``ann_ef_search``),
    at least the ``candidates`` asked for, at most :data:`PGVECTOR_MAX_EF`.
    """
    scaled = math.ceil(config.ann_ef_search * max(1.0, graph_episodes / EF_GRAPH_EPISODES))
    return min(max(scaled, candidates), PGVECTOR_MAX_EF)


def ann_candidates(k: int, config: StoreConfig) -> int:
    """How many episodes the index is asked for, to be re-ranked exactly for ``k`` results.

    ``config.ann_candidates``, and at least ``k``; the benchmark
    (benchmarks/bench_fleet_store.py) measured recall@10 with the default.
    """
    return max(k, config.ann_candidates)


class SqlSearch(NamedTuple):
    """One query's statement and its parameters.

    Attributes:
        statement: The SQL, answering rows ``(seq, score, distance)`` best first.
        params: The bound values by name.

    """

    statement: sql.Composed
    params: dict[str, Any]

    @classmethod
    def build(
        cls,
        query: RetrievalQuery,
        k: int,
        *,
        dim: int | None,
        ann_episodes: int | None,
        frame: str | None = None,
        exact_candidates: bool = False,
    ) -> SqlSearch:
        """The statement for ``query``.

        Args:
            query: The validated query.
            k: Results wanted.
            dim: The store's embedding dimension (None before the first episode).
            ann_episodes: Ask the HNSW index for this many nearest episodes (by their
                pooled vectors) and re-rank them exactly; None = exact scan.
            frame: The pose frame a place is compared in (resolved by :func:`find`).
            exact_candidates: Name the ``ann_episodes`` candidates by an exact ranking of
                the filtered episodes' pooled vectors instead of the HNSW index.

        """
        params: dict[str, Any] = {"k": k}
        ep_where: list[str] = []
        vec_where: list[str] = []
        if query.robot_id is not None:
            params["robot"] = query.robot_id
            ep_where.append(_EPISODE_FILTERS["robot"])
            vec_where.append(_VECTOR_FILTERS["robot"])
        if query.camera is not None:  # on the episode rows only: the graph's candidates
            params["camera"] = query.camera  # are filtered after, widened when too few pass
            ep_where.append(_EPISODE_FILTERS["camera"])
        if query.kinds is not None:  # likewise
            params["kinds"] = sorted(query.kinds)
            ep_where.append(_EPISODE_FILTERS["kinds"])
        if query.start_ns is not None:
            params["start"] = query.start_ns
            ep_where.append(_EPISODE_FILTERS["start"])
            vec_where.append(_VECTOR_FILTERS["start"])
        if query.end_ns is not None:
            params["end"] = query.end_ns
            ep_where.append(_EPISODE_FILTERS["end"])
            vec_where.append(_VECTOR_FILTERS["end"])
        dist = "NULL::double precision"
        if query.near is not None:
            params.update(zip(("x", "y", "z"), query.near, strict=True))
            params["frame"] = frame if frame is not None else (query.near_frame or "")
            dist = _DIST
            ep_where += [_EPISODE_FILTERS["pose"], _EPISODE_FILTERS["frame"]]
            if query.radius_m is not None:
                params["radius"] = query.radius_m
                ep_where += [_EPISODE_FILTERS["box"], _EPISODE_FILTERS["radius"].format(dist=_DIST)]
        where = " AND ".join(ep_where) or "TRUE"
        q = query.query_vector
        if q is None:
            order = "d" if query.near is not None else "e.stamp_ns DESC"
            text = (
                f"SELECT e.seq, NULL::double precision, {dist} AS d "
                f"FROM surprise_memory.episodes e WHERE {where} "
                f"ORDER BY {order}, e.stamp_ns DESC, e.seq DESC LIMIT %(k)s"
            )
            return cls(sql.Composed([sql.SQL(text)]), params)
        params["q"] = HalfVector(q)
        order = " ORDER BY s.score DESC NULLS LAST, e.stamp_ns DESC, e.seq DESC LIMIT %(k)s"
        if ann_episodes is None or dim is None:
            # the filtered episodes by their own indexes (the stamp for a window), each
            # one's frames by key: no scan of every frame for a selective filter
            statement = sql.Composed(
                [
                    sql.SQL(
                        "SELECT e.seq, s.score, " + dist + " AS d "
                        "FROM surprise_memory.episodes e CROSS JOIN LATERAL "
                        "(SELECT max(1 - (m.embedding <=> %(q)s)) AS score "
                        "FROM surprise_memory.embeddings m "
                        "WHERE m.episode_seq = e.seq AND m.robot_id = e.robot_id) s "
                        "WHERE " + where + " AND s.score IS NOT NULL" + order
                    )
                ]
            )
            return cls(statement, params)
        # Each candidate's score is a subquery over its own frames (one index lookup of 8
        # rows), and its episode row is fetched by key: no plan groups or sorts the frame
        # vectors themselves (a GROUP BY over the candidates' frames was planned at 100k
        # episodes as a sort of 1,600 rows of 2 KiB, a third of the query), and no plan
        # scans every episode (a plain join was planned as a hash join over a sequential
        # scan; OFFSET 0 keeps the planner from flattening the lateral subquery).
        params["n"] = ann_episodes
        if exact_candidates:
            # every filter before the ranking; "+ 0" keeps the HNSW index out of the plan
            candidates = (
                "SELECT v.episode_seq, v.robot_id FROM surprise_memory.episodes e "
                "JOIN surprise_memory.episode_vectors v "
                "ON v.episode_seq = e.seq AND v.robot_id = e.robot_id WHERE "
                + where
                + " ORDER BY (v.pooled::halfvec({dim}) <=> %(q)s::halfvec({dim})) + 0, "
                "v.episode_seq LIMIT %(n)s"
            )
        else:
            vec_filter = " AND ".join(vec_where) or "TRUE"
            candidates = (
                "SELECT v.episode_seq, v.robot_id FROM surprise_memory.episode_vectors v "
                "WHERE " + vec_filter + " ORDER BY v.pooled::halfvec({dim}) <=> "
                "%(q)s::halfvec({dim}) LIMIT %(n)s"
            )
        statement = sql.Composed(
            [
                sql.SQL(
                    "SELECT e.seq, s.score, " + dist + " AS d FROM (SELECT c.episode_seq, "
                    "c.robot_id, (SELECT max(1 - (m.embedding <=> %(q)s)) "
                    "FROM surprise_memory.embeddings m WHERE m.episode_seq = c.episode_seq "
                    "AND m.robot_id = c.robot_id) AS score FROM (" + candidates + ") c) s "
                    "CROSS JOIN LATERAL (SELECT * FROM surprise_memory.episodes e "
                    "WHERE e.seq = s.episode_seq AND e.robot_id = s.robot_id OFFSET 0) e "
                    "WHERE " + where + order
                ).format(dim=sql.Literal(int(dim)), robot=sql.Literal(query.robot_id))
            ]
        )
        return cls(statement, params)


def run_search(
    conn: psycopg.Connection[Any], search: SqlSearch
) -> list[tuple[int, float | None, float | None]]:
    """Run a built search; rows ``(seq, score, distance)`` best first."""
    rows = conn.execute(search.statement, search.params).fetchall()
    return [
        (int(s), None if sc is None else float(sc), None if d is None else float(d))
        for s, sc, d in rows
    ]


def find(
    conn: psycopg.Connection[Any],
    query: RetrievalQuery,
    k: int,
    *,
    dim: int | None,
    config: StoreConfig,
) -> list[tuple[int, float | None, float | None]]:
    """Answer ``query`` inside the caller's transaction: rows ``(seq, score, distance)``.

    Exact below ``config.ann_min_frames`` stored frames; above, ``ann_candidates``
    episodes named by the HNSW index over the pooled episode vectors (or, for a time
    window of at most :data:`EXACT_EPISODES` episodes, or when the place filter leaves
    fewer than ``k`` of the graph's candidates, by an exact ranking of the pooled vectors
    of the filtered episodes), re-ranked exactly by max-over-frames.

    Args:
        conn: The connection, inside a transaction (the index settings are local to it).
        query: The validated query.
        k: Results wanted.
        dim: The store's embedding dimension (None before the first episode).
        config: ``ann_min_frames``, ``ann_candidates`` and ``ann_ef_search``.

    Raises:
        InputError: A place without its frame while the poses span several frames.
        psycopg.Error: A statement failed.

    """
    if query.near is not None and query.near_frame is None:
        where = "pose_valid" + (" AND robot_id = %s" if query.robot_id is not None else "")
        rows = conn.execute(
            "SELECT DISTINCT pose_frame_id FROM surprise_memory.episodes WHERE " + where,
            () if query.robot_id is None else (query.robot_id,),
        ).fetchall()
        frame = one_pose_frame(query, {r[0] for r in rows})
        if frame is None:  # no valid pose at all: no episode has a place
            return []
    else:
        frame = query.near_frame
    ann: int | None = None
    exact_candidates = False
    if query.query_vector is not None and dim is not None:
        episodes, frames, graph = graph_counts(conn, query.robot_id)
        if frames >= config.ann_min_frames and episodes > 0:
            ann = ann_candidates(k, config)
            exact_candidates = _few_in_window(conn, query)
            if not exact_candidates:
                conn.execute(  # one round trip: it is on every query's path
                    "SELECT set_config('hnsw.ef_search', %s, true), "
                    "set_config('hnsw.iterative_scan', 'relaxed_order', true)",
                    (str(search_breadth(config, ann, graph)),),
                )
    found = run_search(
        conn,
        SqlSearch.build(
            query, k, dim=dim, ann_episodes=ann, frame=frame, exact_candidates=exact_candidates
        ),
    )
    if ann is not None and not exact_candidates and len(found) < k:
        # the place filter left too few of the graph's candidates: rank every episode the
        # filters leave by its pooled vector exactly (fewer than k found then means fewer
        # than k pass the filters: all of them, scored exactly, are the answer)
        found = run_search(
            conn,
            SqlSearch.build(
                query, k, dim=dim, ann_episodes=ann, frame=frame, exact_candidates=True
            ),
        )
    return found


def _few_in_window(conn: psycopg.Connection[Any], query: RetrievalQuery) -> bool:
    """Whether the query's time window (and robot) leaves at most :data:`EXACT_EPISODES`.

    Counted along the stamp index, at most ``EXACT_EPISODES + 1`` entries; False (the
    HNSW path) without a time window.
    """
    if query.start_ns is None and query.end_ns is None:
        return False
    where = ["TRUE"]
    params: list[Any] = []
    for column, op, value in (
        ("robot_id", "=", query.robot_id),
        ("stamp_ns", ">=", query.start_ns),
        ("stamp_ns", "<=", query.end_ns),
    ):
        if value is not None:
            where.append(f"{column} {op} %s")
            params.append(value)
    row = conn.execute(
        sql.SQL(  # constant fragments; the values are bound
            "SELECT count(*) FROM (SELECT 1 FROM surprise_memory.episodes WHERE "
            + " AND ".join(where)
            + " LIMIT %s) c"
        ),
        (*params, EXACT_EPISODES + 1),
    ).fetchone()
    return row is not None and int(row[0]) <= EXACT_EPISODES
