"""How a segment's graph is built in a batch (a catch-up, a rebuild): one thread or all.

Run: ``python benchmarks/bench_index_build.py [--episodes 20000] [--builds 3]`` (inside the
venv). Prints the machine and versions with the figures.

The store's graphs (usearch, int8, the store's own parameters from ``ann.new_index``) are
built one episode at a time while the robot runs, and in batches when the store catches
up after a kill or rebuilds a lost index. usearch builds a batch on all cores by default;
this compares that with one thread on the same vectors: build time, whether two builds of
the same rows give the same graph (same answers), and the graph's recall@10 of the exact
int8 nearest episodes. The vectors are clustered like a robot's places (a place's
direction plus each episode's noise), so near-ties are common.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import header, machine, versions

from surprise_memory.memory.store import ann


def _vectors(n: int, dim: int, places: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((places, dim))
    x = centres[rng.integers(places, size=n)] + 0.8 * rng.standard_normal((n, dim))
    unit: np.ndarray = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
    return unit


def _build(keys: np.ndarray, vecs: np.ndarray, threads: int) -> tuple[Any, float, str]:
    index = ann.new_index(vecs.shape[1])
    t0 = time.perf_counter()
    index.add(keys, vecs, threads=threads)
    seconds = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.usearch"
        index.save(str(path))
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    return index, seconds, digest


def _recall(index: Any, queries: np.ndarray, k: int) -> tuple[float, float]:
    """recall@k of the graph against the exact search of the same int8 vectors, and the
    share of queries whose exact nearest episode the graph did not return at all."""
    approx = index.search(queries, k)
    exact = index.search(queries, k, exact=True)
    hits = [len(set(a) & set(e)) / k for a, e in zip(approx.keys, exact.keys, strict=True)]
    missed = [e[0] not in set(a) for a, e in zip(approx.keys, exact.keys, strict=True)]
    return float(np.mean(hits)), float(np.mean(missed))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=20_000)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--places", type=int, default=300)
    p.add_argument("--queries", type=int, default=500)
    p.add_argument("--builds", type=int, default=3, help="builds of the same rows per setting")
    args = p.parse_args()
    vecs = _vectors(args.episodes, args.dim, args.places, seed=1)
    keys = np.arange(1, args.episodes + 1, dtype=np.int64)
    queries = _vectors(args.queries, args.dim, args.places, seed=2)
    print(header(machine(), versions(), quick=False))
    print("| build | seconds (each build) | distinct graphs | recall@10 (each) | nearest missed |")
    print("|---|---|---|---|---|")
    for name, threads in (("all cores (usearch's default)", 0), ("one thread", 1)):
        seconds, digests, recalls, missed = [], set(), [], []
        for _ in range(args.builds):
            index, s, digest = _build(keys, vecs, threads)
            r, m = _recall(index, queries, 10)
            seconds.append(s)
            digests.add(digest)
            recalls.append(r)
            missed.append(m)
        print(
            f"| {name} | {' / '.join(f'{s:.1f}' for s in seconds)} | {len(digests)} of "
            f"{args.builds} | {' / '.join(f'{r:.4f}' for r in recalls)} | "
            f"{' / '.join(f'{m:.1%}' for m in missed)} |"
        )


if __name__ == "__main__":
    main()
