"""What place keyframes cost per camera frame, and how many a month of one building makes.

Run: ``python benchmarks/bench_place_keyframes.py [--frames 100000] [--days 30]
[--store-days 30] [--store-backend postgres [--night-seconds 900]]`` (inside the venv;
no ROS needed: the selector and the store are ROS-free). Prints the machine, versions
and load (:mod:`harness`), then:

1. **Per frame.** :meth:`PlaceKeyframeSelector.push` timed one call at a time over
   ``--frames`` camera frames at 30 Hz of a robot driving a building's corridors (the live
   path's cost: one call per camera frame; the store's write is the node's writer thread's,
   not timed here): p50, p99 and max in microseconds.
2. **A month of the same building.** The robot drives the same corridor loop
   ``--hours`` a day for ``--days`` days; every kept frame goes to a model of the store's
   rule (the ``place_history`` newest views per place). Printed per day: the keyframes
   written that day and the records held at its end, for each ``place_revisit_seconds``
   of ``--revisits``: the records held must be flat after the first pass.
   The same month at the default ``place_revisit_seconds`` is also written to a real
   store folder for ``--store-days`` days (0: not run), opened anew each day as a memory
   node restarted every night: 64x48 frames, 1024-d unit embeddings, ``place_history``
   and the store's other defaults. Printed: the place
   records it holds, and the MiB of its database, frame files and episode index at the
   end of every fifth day: all three flat after the first pass (the index holds no place
   keyframe; before it did, each replaced view stayed there until a merge).
   ``--store-backend postgres`` writes the month to a PostgreSQL database instead (an
   embedded server with pgvector, its defaults, autovacuum included, as a fleet server
   has them; ``shared_buffers`` as the embedded default): the database's MiB, the frames
   table's (JPEG bytes, with TOAST), the HNSW indexes' and the dead rows left at each
   day's end. A replaced view is a deleted row there, which only a vacuum reclaims, so the
   question is whether autovacuum keeps them bounded. ``--night-seconds`` gives it a night
   after each day (idle until it has nothing left to do, at most that long): the 8-hour
   days are written in minutes, faster than a robot replaces views.
3. **Cell and sectors.** For each ``--cells`` x ``--sectors``: the places one pass makes,
   per 100 m of route, and how far a frame of the route is from the nearest kept view of
   its own viewing sector (median and p95 over every frame of a pass): how sparse the views
   are against how many there are, what the defaults were chosen by.

The route: a building of 60 x 40 m with a middle corridor (a loop of 240 m at 1 m/s,
turning on the spot at each corner), a lateral wobble of +-0.15 m and a yaw wobble of
+-4 degrees.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from harness import header, machine, versions

from surprise_memory.config import PlacesConfig, StoreConfig
from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.places import PlaceKeyframeSelector, sector_of
from surprise_memory.memory.pose import Pose, yaw_of
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.frame_files import FRAMES_DIR
from surprise_memory.memory.store.schema import DB_NAME
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

SPEED = 1.0  # m/s along a corridor
TURN = math.radians(45.0)  # rad/s on the spot at a corner
# the corridor loop: around the building's outside, then through its middle corridor
WAYPOINTS = [(0.0, 0.0), (60.0, 0.0), (60.0, 40.0), (30.0, 40.0), (30.0, 0.0), (30.0, 40.0),
             (0.0, 40.0), (0.0, 0.0)]  # fmt: skip


OFFSET = (0.9, 0.7)  # the building's corner in the map: its corridors off the cells' edges


def loop_route(
    hz: float, rng: np.random.Generator, offset: tuple[float, float] = OFFSET
) -> list[tuple[float, Pose]]:
    """One pass of the loop: (seconds since its start, pose) at ``hz``."""
    out: list[tuple[float, Pose]] = []
    t, dt, heading = 0.0, 1.0 / hz, 0.0
    corners = [(x + offset[0], y + offset[1]) for x, y in WAYPOINTS]
    for (x0, y0), (x1, y1) in itertools.pairwise(corners):
        want = math.atan2(y1 - y0, x1 - x0)
        turn = math.remainder(want - heading, 2 * math.pi)
        for k in range(round(abs(turn) / TURN * hz)):  # on the spot
            yaw = heading + math.copysign(k * TURN * dt, turn)
            out.append((t, yaw_pose(x0, y0, 0.0, yaw, "map")))
            t += dt
        heading = want
        length = math.hypot(x1 - x0, y1 - y0)
        for k in range(round(length / SPEED * hz)):
            f = k / (length / SPEED * hz)
            side = rng.uniform(-0.15, 0.15)
            x = x0 + f * (x1 - x0) - side * math.sin(want)
            y = y0 + f * (y1 - y0) + side * math.cos(want)
            out.append((t, yaw_pose(x, y, 0.0, want + math.radians(rng.uniform(-4, 4)), "map")))
            t += dt
    return out


def pass_seconds(route: list[tuple[float, Pose]], hz: float) -> float:
    return route[-1][0] + 1.0 / hz


def per_frame(n: int, rng: np.random.Generator) -> None:
    route = loop_route(30.0, rng)
    period = pass_seconds(route, 30.0)
    selector = PlaceKeyframeSelector(PlacesConfig())
    times = np.empty(n)
    kept = 0
    for i in range(n):
        loop, k = divmod(i, len(route))
        t, pose = route[k]
        stamp = round((loop * period + t) * NS_PER_SECOND)
        t0 = time.perf_counter_ns()
        decision = selector.push(stamp, pose, "front")
        times[i] = time.perf_counter_ns() - t0
        kept += decision is not None
    p50, p99, p999 = np.percentile(times, [50, 99, 99.9]) / 1e3
    print(
        f"per frame ({n} frames at 30 Hz, {n / 30 / 60:.0f} min of driving): p50 {p50:.1f} us, "
        f"p99 {p99:.1f} us, p99.9 {p999:.1f} us, max {times.max() / 1e3:.0f} us; "
        f"{kept} kept ({kept / n:.2%} of frames)"
    )


def month(days: int, hours: float, revisit: float, rng: np.random.Generator) -> None:
    hz = 5.0  # frames pushed a second (the count is about places: the rate changes little)
    route = loop_route(hz, rng)
    period = pass_seconds(route, hz)
    history = StoreConfig().place_history
    selector = PlaceKeyframeSelector(PlacesConfig(place_revisit_seconds=revisit))
    held: dict[str, deque[int]] = {}
    loops = int(hours * 3600 // period)
    written, counts = [], []
    t0 = time.perf_counter()
    for day in range(days):
        n = 0
        start = day * 86400.0
        for loop in range(loops):
            for t, pose in route:
                stamp = round((start + loop * period + t) * NS_PER_SECOND)
                d = selector.push(stamp, pose, "front")
                if d is not None:
                    held.setdefault(d.place_key, deque(maxlen=history)).append(stamp)
                    n += 1
        written.append(n)
        counts.append(sum(len(v) for v in held.values()))
    flat = counts.index(counts[-1]) + 1
    print(
        f"revisit {revisit:g} s: {loops} loops a day ({period:.0f} s each), {len(held)} places; "
        f"keyframes written a day {written[0]} (day 1), {written[-1]} (day {days}); records "
        f"held at the end of day 1, 2, 3, {days}: {counts[0]}, {counts[min(1, days - 1)]}, "
        f"{counts[min(2, days - 1)]}, {counts[-1]} (flat from day {flat}); "
        f"{time.perf_counter() - t0:.0f} s"
    )


def _folder_bytes(folder: Path) -> tuple[int, int, int, int]:
    """The store folder's database (with its WAL), frame files, the rest (its index), 0."""
    sizes = {f: f.stat().st_size for f in folder.rglob("*") if f.is_file()}
    database = sum(n for f, n in sizes.items() if f.name.startswith(DB_NAME))
    frames = sum(n for f, n in sizes.items() if FRAMES_DIR in f.relative_to(folder).parts)
    return database, frames, sum(sizes.values()) - database - frames, 0


def _postgres_bytes(url: str) -> tuple[int, int, int, int]:
    """The database, its frames table (with TOAST), its HNSW indexes; the dead rows left."""
    import psycopg
    from bench_lifetime import PG_HNSW

    with psycopg.connect(url, autocommit=True) as conn:
        hnsw = [r[0] for r in conn.execute(PG_HNSW)]
        row = conn.execute(
            "SELECT pg_database_size(current_database()), "
            "pg_total_relation_size('surprise_memory.frames'), "
            "(SELECT coalesce(sum(pg_relation_size(i::regclass)), 0) FROM unnest(%s::text[]) i), "
            "(SELECT sum(n_dead_tup) FROM pg_stat_user_tables "
            "WHERE schemaname = 'surprise_memory')",
            (hnsw,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3] or 0)


def _postgres_night(url: str, limit_s: float) -> float:
    """Idle until autovacuum has nothing left to do, at most ``limit_s``; the seconds idled.

    Nothing left: no table of the store holds more dead rows than autovacuum's own trigger
    (``autovacuum_vacuum_threshold`` + ``autovacuum_vacuum_scale_factor`` x its live rows).
    The month's 8-hour days are written in minutes, so without the night a throttled
    autovacuum meets 60-100 times a robot's rate of replaced views (one every 3.8 s).
    """
    import psycopg

    t0 = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        while time.perf_counter() - t0 < limit_s:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = 'surprise_memory' "
                "AND n_dead_tup > current_setting('autovacuum_vacuum_threshold')::int "
                "+ current_setting('autovacuum_vacuum_scale_factor')::float8 * n_live_tup"
            ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(5.0)
            conn.execute("SELECT pg_stat_clear_snapshot()")  # read the statistics anew
    return time.perf_counter() - t0


@contextlib.contextmanager
def _store_location(
    backend: str, night_s: float
) -> Iterator[tuple[str, Callable[[], tuple[int, ...]]]]:
    """Where the month is written, and its night and bytes after each day."""
    if backend == "postgres":
        from bench_fleet_store import pg_server, server_versions

        with pg_server() as server:
            url = str(server.get_uri())
            print(f"postgres: {server_versions(server)}")

            def after_day() -> tuple[int, ...]:
                night = _postgres_night(url, night_s) if night_s > 0 else 0.0
                return (*_postgres_bytes(url), round(night))

            yield url, after_day
        return
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work) / "store"
        yield str(folder), lambda: (*_folder_bytes(folder), 0)


def month_in_store(
    days: int,
    hours: float,
    revisit: float,
    rng: np.random.Generator,
    *,
    backend: str,
    night_s: float,
) -> None:
    hz = 5.0
    route = loop_route(hz, rng)
    period = pass_seconds(route, hz)
    selector = PlaceKeyframeSelector(PlacesConfig(place_revisit_seconds=revisit))
    loops = max(1, int(hours * 3600 // period))
    image = rng.integers(0, 256, (48, 64, 3), np.uint8)
    dim = 1024
    # written, held, database, frames, index, dead rows and night seconds (PostgreSQL's)
    rows: list[tuple[int, ...]] = []
    t0 = time.perf_counter()
    with _store_location(backend, night_s) as (location, sizes):
        for day in range(days):  # opened each day, as a memory node restarted every night
            n = 0
            start = day * 86400.0
            with open_store(location) as store:
                for loop in range(loops):
                    for t, pose in route:
                        stamp = round((start + loop * period + t) * NS_PER_SECOND)
                        d = selector.push(stamp, pose, "front")
                        if d is None:
                            continue
                        v = rng.standard_normal((1, dim)).astype(np.float32)
                        store.add(
                            [Frame(image, stamp)],
                            v / np.linalg.norm(v),
                            stamp_ns=stamp,
                            surprise=0.0,
                            pose=d.pose,
                            embedder_model="bench-1024",
                            embedder_pretrained=False,
                            kind="place",
                            place_key=d.place_key,
                        )
                        n += 1
                held = len(store)
            rows.append((n, held, *sizes()))
            print(f"  day {day + 1}: {rows[-1]}", file=sys.stderr, flush=True)
    held_by_day = [r[1] for r in rows]
    flat = held_by_day.index(held_by_day[-1]) + 1
    days_shown = sorted(d for d in {1, 2, 3, *range(5, days + 1, 5), days} if d <= days)

    def mib(column: int) -> str:
        return ", ".join(f"{rows[d - 1][column] / 2**20:.1f}" for d in days_shown)

    dead = (
        f"; dead rows {', '.join(str(rows[d - 1][5]) for d in days_shown)}; nights (s) "
        f"{', '.join(str(rows[d - 1][6]) for d in days_shown)}"
        if backend == "postgres"
        else ""
    )
    print(
        f"in a {backend} store, revisit {revisit:g} s: {loops} loops a day, "
        f"{sum(r[0] for r in rows)} keyframes written in {days} days ({rows[-1][0]} on day "
        f"{days}); records held at the end of day 1, 2, 3, {days}: {held_by_day[0]}, "
        f"{held_by_day[min(1, days - 1)]}, {held_by_day[min(2, days - 1)]}, {held_by_day[-1]} "
        f"(flat from day {flat}); MiB at the end of day {', '.join(map(str, days_shown))}: "
        f"database {mib(2)}; frames {mib(3)}; index {mib(4)} (largest "
        f"{max(r[4] for r in rows) / 2**20:.1f}){dead}; {time.perf_counter() - t0:.0f} s"
    )


def density(cells: list[float], sectors: list[int], rng: np.random.Generator) -> None:
    hz = 10.0
    metres = sum(math.dist(a, b) for a, b in itertools.pairwise(WAYPOINTS))
    runs = [(c, n, OFFSET) for c in cells for n in sectors]
    defaults = PlacesConfig()
    runs.append((defaults.place_cell_m, defaults.place_sectors, (0.0, 0.0)))  # on the edges
    for cell, n, offset in runs:
        route = loop_route(hz, rng, offset)
        selector = PlaceKeyframeSelector(PlacesConfig(place_cell_m=cell, place_sectors=n))
        views: dict[int, list[tuple[float, float]]] = {}
        for t, pose in route:
            d = selector.push(round(t * NS_PER_SECOND), pose)
            if d is not None:
                views.setdefault(d.cell.sector, []).append((pose.x, pose.y))
        gaps = []
        for _, pose in route:
            mine = views.get(sector_of(yaw_of(pose), n), [])
            gaps.append(min((math.hypot(pose.x - x, pose.y - y) for x, y in mine),
                            default=math.inf))  # fmt: skip
        kept = sum(len(v) for v in views.values())
        med, p95 = np.percentile(gaps, [50, 95])
        edges = ", corridors on the cells' edges" if offset == (0.0, 0.0) else ""
        print(
            f"cell {cell:g} m, {n} sectors{edges}: {kept} places a pass "
            f"({100 * kept / metres:.0f} per 100 m of route); nearest view of the frame's "
            f"sector: median {med:.2f} m, p95 {p95:.2f} m"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--revisits", type=float, nargs="+", default=[60.0, 300.0])
    parser.add_argument("--store-days", type=int, default=30, help="0: no month in a store")
    parser.add_argument(
        "--store-backend",
        choices=["folder", "postgres"],
        default="folder",
        help="the store the month is written to: a folder (SQLite) or PostgreSQL (embedded)",
    )
    parser.add_argument(
        "--night-seconds",
        type=float,
        default=0.0,
        help="postgres: after each day, idle up to this long until autovacuum has nothing "
        "left to do (a robot's night); 0: the next day at once",
    )
    parser.add_argument("--cells", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--sectors", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    print(header(machine(), versions(), quick=False))
    print(f"defaults: {PlacesConfig()}; place_history {StoreConfig().place_history}")
    rng = np.random.default_rng(0)
    per_frame(args.frames, rng)
    for revisit in args.revisits:
        month(args.days, args.hours, revisit, rng)
    if args.store_days > 0:
        revisit = PlacesConfig().place_revisit_seconds
        month_in_store(
            args.store_days,
            args.hours,
            revisit,
            rng,
            backend=args.store_backend,
            night_s=args.night_seconds,
        )
    density(args.cells, args.sectors, rng)
    print(f"load average at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
