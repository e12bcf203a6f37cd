"""The first queries after a boot: a robot-year's store with the page cache dropped.

Run (as root: it writes ``/proc/sys/vm/drop_caches``), on a folder that
``bench_lifetime.py`` filled::

    python benchmarks/bench_lifetime.py --work W --sizes 670800 --exact-max 0
    sudo python benchmarks/bench_cold_start.py --work W

Each variant runs in a fresh process after ``sync`` and ``drop_caches``: it opens the
store read-only and times the same text queries as ``bench_lifetime.py`` (k = 10,
records fetched), reporting p50 / p99, the first query, and recall@10 against the
year's exact top-10:

* ``no prefetch``: ``index_prefetch: false``; every page a query touches comes from disk.
* ``prefetch, queries at once``: the default; the queries start when ``open`` returns,
  while the index files are read in the background.
* ``prefetch done``: the default, the queries after ``wait_for_prefetch``.
* ``warm``: no drop, the store's files as the previous variants left them in the cache.

``--memory-limit GIB`` runs every variant's process in a memory cgroup of that size (cgroup
v1 or v2), which holds the page cache it reads as well as its heap: a robot whose memory
is smaller than its store (a Jetson with 8 or 16 GB beside its other nodes), on a machine
that has more.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_lifetime import MODEL, World, episode_id, recall
from harness import header, machine, versions

VARIANTS = ("no prefetch", "prefetch, queries at once", "prefetch done", "warm")


def drop_page_cache() -> None:
    """Write back and drop the page cache (root only)."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        sys.exit(f"bench_cold_start: cannot drop the page cache ({exc}); run it as root")


def memory_cgroup(limit_gib: float) -> Path:
    """A new memory cgroup of ``limit_gib`` GiB (root only); its ``cgroup.procs`` file."""
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").is_file():  # the unified hierarchy
        if "memory" not in (v2 / "cgroup.subtree_control").read_text().split():
            sys.exit("bench_cold_start: the memory controller is not enabled in /sys/fs/cgroup")
        group, limit_file = v2 / f"bench_cold_start.{os.getpid()}", "memory.max"
    else:  # cgroup v1's memory hierarchy
        group = Path("/sys/fs/cgroup/memory") / f"bench_cold_start.{os.getpid()}"
        limit_file = "memory.limit_in_bytes"
    try:
        group.mkdir()
        (group / limit_file).write_text(f"{int(limit_gib * 2**30)}\n")
    except OSError as exc:
        sys.exit(f"bench_cold_start: cannot make a memory cgroup at {group} ({exc}); run as root")
    return group / "cgroup.procs"


def measure(store_dir: Path, variant: str, queries: np.ndarray) -> dict[str, Any]:
    """One variant, in this process: open, (wait), time the queries."""
    from surprise_memory.config import StoreConfig
    from surprise_memory.memory.retrieval import RetrievalQuery
    from surprise_memory.memory.store import EpisodeStore

    if variant != "warm":
        drop_page_cache()
    t0 = time.perf_counter()
    config = StoreConfig(index_prefetch=variant != "no prefetch")
    store = EpisodeStore(store_dir, config, read_only=True)
    open_s = time.perf_counter() - t0
    if variant == "prefetch done":
        store.wait_for_prefetch()
    prefetch_s = time.perf_counter() - t0
    ms, hits = [], []
    for q in queries:
        t = time.perf_counter()
        got = store.retrieve(RetrievalQuery(embedding=q, embedder_model=MODEL, max_results=10))
        ms.append((time.perf_counter() - t) * 1e3)
        hits.append([h.episode.id for h in got])
    store.close()
    return {"open_s": open_s, "ready_s": prefetch_s, "ms": ms, "hits": hits}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, required=True, help="a bench_lifetime.py folder")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=7, help="bench_lifetime.py's --seed")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help="run each variant in a memory cgroup of this many GiB (heap and page cache)",
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    store_dir = args.work / "store"
    truth = np.load(args.work / "truth.npz")["top_text"]
    # the year's queries as bench_lifetime.py drew them (the draws depend on their count)
    queries = World(args.seed).queries(len(truth))["vec"][: args.queries]
    if args.child:  # the prefetch's plan (what it passes over for the memory) to stderr
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
        json.dump(measure(store_dir, args.child, queries), sys.stdout)
        return
    truth = truth[: args.queries]
    want = [[episode_id(int(i)) for i in row if i >= 0] for row in truth]
    print(header(machine(), versions(), quick=False))
    procs = memory_cgroup(args.memory_limit) if args.memory_limit else None
    limit = f", memory limited to {args.memory_limit:g} GiB" if procs else ""
    print(f"store: {store_dir} ({len(want)} text queries, seed {args.seed}{limit})\n")
    print("| variant | open s | ready s | text p50 / p99 ms | first query ms | recall@10 |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    try:
        for variant in VARIANTS:
            cmd = [sys.executable, __file__, "--work", str(args.work), "--seed", str(args.seed)]
            cmd += ["--queries", str(args.queries), "--child", variant]
            # the child joins the cgroup before it runs (the cache it then reads is charged there)
            join = None if procs is None else lambda: procs.write_text(f"{os.getpid()}\n")
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, preexec_fn=join)
            res = json.loads(out.stdout)
            plan = [line for line in out.stderr.splitlines() if "index prefetch" in line]
            ms = np.asarray(res["ms"])
            row = {
                "variant": variant,
                "open_s": res["open_s"],
                "ready_s": res["ready_s"],
                "p50_ms": float(np.percentile(ms, 50)),
                "p99_ms": float(np.percentile(ms, 99)),
                "first_ms": float(ms[0]),
                "recall": recall(res["hits"], want),
                "prefetch_plan": plan,
            }
            rows.append(row)
            print(
                f"| {variant} | {row['open_s']:.2f} | {row['ready_s']:.2f} | "
                f"{row['p50_ms']:.1f} / {row['p99_ms']:.1f} | {row['first_ms']:.0f} | "
                f"{row['recall']:.3f} |",
                flush=True,
            )
        plans = {line for row in rows for line in row["prefetch_plan"]}
        print("".join(f"\n{line}" for line in sorted(plans)) or "\nthe prefetch read every file")
    finally:  # also when a variant fails: no cgroup is left behind
        if procs is not None:  # empty: its children have exited (the kernel keeps the cache)
            procs.parent.rmdir()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
