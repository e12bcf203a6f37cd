"""Retrieval latency and memory of the episode store (goal: p99 <= 20 ms at 10k episodes).

Run: ``python benchmarks/bench_retrieval.py [--sizes 1000 10000 100000]`` (inside the venv).
Prints the machine and versions, then per size (8 frames of 1024-d per episode):
p50/p99 latency of the in-memory search (the matrix product, filters and top-k) for a
text-like query, a text query with a time window, a place query and a time-only query;
the memory the matrix and arrays take; then the cost of one durable ``add`` (8 JPEGs of
640x480 written and fsynced, one SQLite transaction) and of a full ``retrieve`` with the
fetch of the k episodes from SQLite, on a small real store.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import PIL

from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.memory.store.search import EmbeddingIndex
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
DIM = 1024
FRAMES = 8


def build_index(n: int, rng: np.random.Generator) -> EmbeddingIndex:
    index = EmbeddingIndex(DIM)
    index.reserve(n, n * FRAMES)
    chunk = 1000
    for c0 in range(0, n, chunk):
        m = min(chunk, n - c0)
        emb = rng.standard_normal((m * FRAMES, DIM), dtype=np.float32)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        pos = rng.uniform(-500, 500, size=(m, 3))
        for j in range(m):
            i = c0 + j
            index.add(
                i,
                stamp_ns=i * 60 * S,
                position=tuple(pos[j]),
                pose_valid=True,
                surprise=1.0,
                unit_embeddings=emb[j * FRAMES : (j + 1) * FRAMES],
            )
    return index


def percentiles(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    p50, p99 = np.percentile(times, [50, 99]) * 1e3
    return float(p50), float(p99)


def index_figures(n: int, repeats: int, rng: np.random.Generator) -> dict[str, Any]:
    """In-memory search at ``n`` episodes: {query: (p50 ms, p99 ms)}, memory and build time."""
    t0 = time.perf_counter()
    index = build_index(n, rng)
    build_s = time.perf_counter() - t0
    span = n * 60 * S
    q = rng.standard_normal(DIM).astype(np.float32)
    queries = {
        "text": RetrievalQuery(embedding=q, embedder_model="m"),
        "text+time(10%)": RetrievalQuery(
            embedding=q, embedder_model="m", start_ns=span // 2, end_ns=span // 2 + span // 10
        ),
        "place(r=50m)": RetrievalQuery(near=(0.0, 0.0, 0.0), radius_m=50.0),
        "time(10%)": RetrievalQuery(start_ns=span // 2, end_ns=span // 2 + span // 10),
    }
    latency = {
        name: percentiles(functools.partial(index.search, query, 10), repeats)
        for name, query in queries.items()
    }
    return {
        "episodes": n,
        "latency_ms": latency,
        "memory_mib": index.nbytes / 2**20,
        "matrix_mib": n * FRAMES * DIM * 4 / 2**20,
        "build_s": build_s,
    }


def bench_index(n: int, repeats: int, rng: np.random.Generator) -> None:
    """Print the in-memory search figures at ``n`` episodes."""
    fig = index_figures(n, repeats, rng)
    for name, (p50, p99) in fig["latency_ms"].items():
        print(f"{n:>8} {name:>15} {p50:>9.2f} {p99:>9.2f}")
    print(
        f"{n:>8} {'memory':>15} {fig['memory_mib']:>9.0f} MiB "
        f"(matrix {fig['matrix_mib']:.0f} MiB float32), built in {fig['build_s']:.1f} s"
    )


def store_figures(episodes: int, rng: np.random.Generator) -> dict[str, float]:
    """Durable ``add``, ``retrieve`` (with and without images) and re-open of a real store."""
    with tempfile.TemporaryDirectory() as tmp:
        store = EpisodeStore(tmp)
        adds = []
        for i in range(episodes):
            frames = [
                Frame(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8), i * S + j)
                for j in range(FRAMES)
            ]
            emb = rng.standard_normal((FRAMES, DIM), dtype=np.float32)
            t0 = time.perf_counter()
            store.add(
                frames,
                emb,
                stamp_ns=i * S,
                surprise=1.0,
                pose=Pose(x=float(i)),
                embedder_model="m",
                embedder_pretrained=True,
            )
            adds.append(time.perf_counter() - t0)
        a50, a99 = np.percentile(adds, [50, 99]) * 1e3
        q = RetrievalQuery(
            embedding=rng.standard_normal(DIM).astype(np.float32), embedder_model="m"
        )
        r50, r99 = percentiles(lambda: store.retrieve(q), 50)
        i50, i99 = percentiles(lambda: store.retrieve(q, include_images=True), 20)
        store.close()
        t0 = time.perf_counter()
        EpisodeStore(tmp).close()
        open_ms = (time.perf_counter() - t0) * 1e3
    return {
        "episodes": episodes,
        "add_p50_ms": float(a50),
        "add_p99_ms": float(a99),
        "retrieve_p50_ms": r50,
        "retrieve_p99_ms": r99,
        "retrieve_images_p50_ms": i50,
        "retrieve_images_p99_ms": i99,
        "open_ms": open_ms,
    }


def bench_store(episodes: int, rng: np.random.Generator) -> None:
    """Print the store figures."""
    f = store_figures(episodes, rng)
    print(
        f"add (8 x 640x480 JPEG, fsync, commit): p50 {f['add_p50_ms']:.1f} ms, "
        f"p99 {f['add_p99_ms']:.1f} ms"
    )
    print(
        f"retrieve k=10 incl. SQLite fetch ({episodes} episodes): "
        f"p50 {f['retrieve_p50_ms']:.2f} ms, p99 {f['retrieve_p99_ms']:.2f} ms"
    )
    print(
        f"retrieve k=10 with JPEG bytes: p50 {f['retrieve_images_p50_ms']:.2f} ms, "
        f"p99 {f['retrieve_images_p99_ms']:.2f} ms"
    )
    print(f"open (load {episodes} episodes into memory): {f['open_ms']:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--store-episodes", type=int, default=40)
    args = parser.parse_args()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"sqlite {sqlite3.sqlite_version}, Pillow {PIL.__version__}"
    )
    rng = np.random.default_rng(0)
    print(f"{'episodes':>8} {'query':>15} {'p50 ms':>9} {'p99 ms':>9}")
    for n in args.sizes:
        bench_index(n, args.repeats if n <= 10_000 else max(20, args.repeats // 10), rng)
    bench_store(args.store_episodes, rng)


if __name__ == "__main__":
    main()
