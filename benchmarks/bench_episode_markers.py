"""What the memory node pays to show its episodes on a display, per stored episode.

Run: ``python benchmarks/bench_episode_markers.py [--sizes 1000 10000 100000]`` (inside the
venv, after ``source install/setup.bash``: it builds the real ``visualization_msgs``
messages). Prints the machine, versions and load, then per store size the cost of one
marker refresh, which the node runs after every stored episode (1-2 a minute), in the
episode writer's thread, never per camera frame:

* ``newest_episodes``: the newest ``marker_max_episodes`` (default 500) episodes read from
  a real SQLite store with the ordinary retrieval query, pages of ``max_results_cap``
  (default 100);
* the markers and the ``MarkerArray`` message built from them, and its serialized size
  (what DDS sends to each display, once per stored episode);
* reading the newest episode's 8 JPEGs for the preview.

The stores are real SQLite folders written through ``EpisodeStore.add`` (one episode = 8
frames of 64x48 and 8 embeddings of 64 dimensions; every tenth without a pose). Building
them is not timed, and skips the fsyncs of files and commits to finish in minutes (the
timed reads do not write).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from bench_retrieval import percentiles

from surprise_memory.config import DisplayConfig, StoreConfig
from surprise_memory.memory.episode_markers import episode_marker, newest_episodes
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.perception.frames import Frame

S = 1_000_000_000
FRAMES = 8
DIM = 64


@contextlib.contextmanager
def no_fsync(store: EpisodeStore) -> Iterator[None]:
    """Skip the fsyncs of JPEG files and commits while building (not timed; reads never write).

    On a disk shared with other writers each durable add took up to 200 ms, which makes a
    100k-episode store a matter of hours.
    """
    db = store._folder.db()  # the store's own connection; only this build relaxes it
    db.execute("PRAGMA synchronous = OFF")
    try:
        with mock.patch("os.fsync", lambda fd: None):
            yield
    finally:
        db.execute("PRAGMA synchronous = FULL")


def build_store(path: Path, n: int, rng: np.random.Generator) -> EpisodeStore:
    store = EpisodeStore(path, StoreConfig())
    pixels = [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(FRAMES)]
    emb = rng.standard_normal((FRAMES, DIM)).astype(np.float32)
    with no_fsync(store):
        for i in range(n):
            t = 1_700_000_000 * S + i * 45 * S  # one episode every 45 s
            pose = (
                None if i % 10 == 0 else Pose(float(i % 100), float(i // 100), 0.0, frame_id="map")
            )
            store.add(
                [Frame(p, t + k * S // 4) for k, p in enumerate(pixels)],
                emb,
                stamp_ns=t,
                surprise=2.0 + (i % 7) / 3,
                threshold=2.0,
                pose=pose,
                embedder_model="bench",
                embedder_pretrained=False,
            )
    return store


def bench(n: int, repeats: int, rng: np.random.Generator) -> None:
    from rclpy.serialization import serialize_message

    from surprise_memory.nodes.episode_display import marker_array

    cfg = DisplayConfig()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store = build_store(Path(tmp) / "store", n, rng)
        built_s = time.perf_counter() - t0
        with store:
            records = newest_episodes(store, cfg.marker_max_episodes)

            def markers() -> Any:
                out = [episode_marker(r, store.origin_ns, cfg.marker_size_m) for r in records]
                return marker_array([m for m in out if m is not None])

            read = percentiles(lambda: newest_episodes(store, cfg.marker_max_episodes), repeats)
            build = percentiles(markers, repeats)
            message = markers()
            size = len(serialize_message(message))
            jpegs = percentiles(records[0].load_jpegs, repeats)
    shown = (len(message.markers) - 1) // 2
    print(
        f"{n:>8} {read[0]:>8.2f}/{read[1]:<8.2f} {build[0]:>8.2f}/{build[1]:<8.2f} "
        f"{jpegs[0]:>8.2f}/{jpegs[1]:<8.2f} {shown:>6} {size / 1024:>8.0f} KiB   "
        f"(store built in {built_s:.0f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    import rclpy

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"sqlite {sqlite3.sqlite_version}, rclpy from {Path(rclpy.__file__).parent}; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"marker_max_episodes {DisplayConfig().marker_max_episodes}, max_results_cap "
        f"{StoreConfig().max_results_cap}; p50/p99 in ms over repetitions"
    )
    head = ("episodes", "read", "markers+msg", "8 jpegs", "shown", "message")
    print("{:>8} {:>17} {:>17} {:>17} {:>6} {:>12}".format(*head))
    rng = np.random.default_rng(0)
    for n in args.sizes:
        bench(n, args.repeats, rng)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
