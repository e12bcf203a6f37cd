"""How many sealed index segments to merge into one graph (``ann.MERGE_FANOUT``).

Run: ``python benchmarks/bench_segment_merge.py --work DIR [--segments 8] [--fanouts 1 2 4 8]``
(inside the venv; DIR needs about 2.5 GiB per fan-out at the defaults). Prints the machine
and versions with the figures.

The store's own index (:class:`~surprise_memory.memory.store.ann.AnnIndex`, its real segment
size and graph settings) is filled with ``--segments`` sealed segments of the pooled
episode vectors of ``bench_lifetime.py``'s synthetic robot-year (places revisited, drift);
for each fan-out a copy of it is merged with the store's own merge
(:func:`~surprise_memory.memory.store.segment_merge.write_merged` then
``AnnIndex.replace``, here in the foreground) and queried the way the episode index asks
its graphs for an unfiltered query (every graph at once, each asked for its share of 4 x 100
candidates and at least 128, the candidates re-scored from their float32 vectors). Per
fan-out: graphs per query, query p50 / p99, recall@10 of the re-scored top 10 against exact
search over every pooled vector, the merge's time and the peak anonymous RSS it added.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

import numpy as np
from bench_lifetime import BATCH, World, _unit
from harness import header, machine, versions

from surprise_memory.memory.store import ann
from surprise_memory.memory.store.segment_merge import write_merged

_WANT = 100  # candidates re-ranked per query (episode_index.RERANK)
_OVERSAMPLE = 4.0  # episode_index._OVERSAMPLE
_MIN_COUNT = 128  # episode_index._MIN_COUNT


def _pooled(n: int, world: World) -> np.ndarray:
    """The pooled vectors of bench_lifetime's year (its first ``n`` episodes)."""
    out = [
        _unit(world.batch(b)["frames"].astype(np.float32).mean(axis=1))
        for b in range(-(-n // BATCH))
    ]
    return np.concatenate(out)[:n].astype(np.float32)


def _rss_mib() -> float:
    """The process's anonymous resident memory now: not the peak of its life (the vectors
    held here for the ground truth set that), nor the memory-mapped files' pages (the
    parts' vectors read by a merge), which the OS may drop."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return 0.0


class _RssPeak:
    """The largest resident memory seen while it runs (sampled every 50 ms)."""

    def __init__(self) -> None:
        self.peak = _rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, _rss_mib())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def _query(index: ann.AnnIndex, q: np.ndarray, total: int) -> np.ndarray:
    parts = index.parts()
    count = max(_MIN_COUNT, *(int(np.ceil(_WANT * len(s) / total * _OVERSAMPLE)) for s in parts))
    got = ann.search_segments(parts, q, count)
    found = [np.sort(got[(got >= s.first) & (got <= s.last)]) for s in parts]
    sims = np.concatenate([s.vectors(k) @ q for s, k in zip(parts, found, strict=True)])
    return np.concatenate(found)[np.argsort(-sims)[:10]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--segments", type=int, default=8)
    p.add_argument("--fanouts", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--queries", type=int, default=300)
    args = p.parse_args()
    n = args.segments * ann.SEGMENT_SIZE
    print(header(machine(), versions(), quick=False))
    t0 = time.perf_counter()
    world = World(seed=0)
    vecs = _pooled(n, world)
    dim = vecs.shape[1]
    keys = np.arange(1, n + 1, dtype=np.int64)
    queries = world.queries(args.queries)["vec"]
    truth = [set((np.argsort(-(vecs @ q))[:10] + 1).tolist()) for q in queries]
    base = args.work / "base"
    shutil.rmtree(base, ignore_errors=True)
    index = ann.AnnIndex(base, dim, read_only=False)
    index.rebuild(((int(k), v[None, :]) for k, v in zip(keys, vecs, strict=True)), 0)
    index.close()
    print(
        f"{n} vectors in {args.segments} sealed segments built in {time.perf_counter() - t0:.0f} s"
    )
    print(
        "| fan-out | graphs per query | query p50 / p99 ms | recall@10 | merge s (each) |", end=""
    )
    print(" peak anonymous RSS added MiB |")
    print("|---|---|---|---|---|---|")
    stop = threading.Event()
    for fanout in args.fanouts:
        root = args.work / f"fanout-{fanout}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root)
        ann.MERGE_FANOUT = fanout
        index = ann.AnnIndex(root, dim, read_only=False)
        assert index.load()
        merges: list[float] = []
        rss_before = _rss_mib()
        sampler = _RssPeak()
        while plan := index.merge_plan():
            t = time.perf_counter()
            keep = np.ones(sum(len(s) for s in plan), dtype=np.bool_)
            entry = write_merged(index.directory, plan, dim, keep, stop)
            assert entry is not None and index.replace(plan, entry)
            merges.append(time.perf_counter() - t)
        rss_added = sampler.stop() - rss_before
        for q in queries[:20]:  # warm the page cache
            _query(index, q, n)
        times, recalls = [], []
        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            got = _query(index, q, n)
            times.append((time.perf_counter() - t) * 1e3)
            recalls.append(len(want & set(got.tolist())) / 10)
        p50, p99 = np.percentile(times, [50, 99])
        each = " / ".join(f"{m:.0f}" for m in merges) or "-"
        print(
            f"| {fanout} | {index.segments - 1} | {p50:.1f} / {p99:.1f} | {np.mean(recalls):.3f} "
            f"| {each} | {rss_added:.0f} |"
        )
        index.close()
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
