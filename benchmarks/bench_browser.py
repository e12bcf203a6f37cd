"""The memory browser at 10k episodes: the page's first load and a search answer (goal <= 300 ms).

Run: ``python benchmarks/bench_browser.py [--episodes 10000] [--embedder large|tiny|none]
[--no-chromium] [--json out.json]`` (inside the venv, with the package importable).

Builds a folder store of N episodes (8 frames of 1024-d float16 embeddings each, poses in
``map`` within 200 m, three robots, one episode every 47 s as at 1.28 episodes/min) through
the store's own schema statements in one transaction, the same eight 640x480 JPEGs
hard-linked into every episode's folder (the durable add, eight fsyncs per episode, would
take a quarter of an hour at 10k and is timed by bench_retrieval.py), and a ``scores.csv``
of a day at 10 Hz (864,000 frames). Then starts ``surprise-memory serve`` on it, a real
process, and times over HTTP (one kept-alive connection, as a browser uses):

* the first load: the page, its script and style, then ``/api/store``, ``/api/timeline``
  (every episode) and ``/api/curve``, one after the other (the page fetches the three API
  answers at once, so this is an upper bound), and ``/api/timeline`` alone;
* in headless Chromium (when installed): navigation to the page drawn (timeline, map,
  latest episodes listed), as the page measures it (``window.sm.readyAt``);
* searches: a time window of 10 % of the recording, a place (20 m), a robot and a time
  window, and an image (POSTed JPEG) embedded by the store's embedder (``large``: the real
  PE-Core-L-14-336 architecture with random weights, on this CPU; ``tiny``: the test preset,
  whose 64-d store is then built instead);
* one frame; in this process, the store's embedder on one text and one image (a text
  search costs that forward plus a search without an embedding: random weights cannot
  rank a text, so the server refuses to); and the live feed's idle cost (``refresh()``
  of an unchanged store), ``summaries()`` at N, and the timeline's JSON made from them
  (the server keeps it and makes it again only after the store changed).

Prints the machine and the versions with the figures; ``--json`` writes them too.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import harness
import numpy as np
from bench_retrieval import percentiles

from surprise_memory.browser.views import timeline_columns
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import open_store
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.frame_files import FrameFiles, encode_jpeg
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.memory.store.schema import (
    DB_NAME,
    connect,
    ensure_schema,
    insert_episode,
    transaction,
    upsert_meta,
)
from surprise_memory.offline.run_record import SCORES_HEADER

S = 1_000_000_000
FRAMES = 8
ORIGIN = 1_700_000_000 * S
GOAL_MS = 300.0
EMBEDDERS = {  # the store's recorded embedder: name and dimension
    "large": ("PE-Core-L-14-336:random (untrained, seed 0)", 1024),
    "tiny": ("PE-Core-tiny-random:random (untrained, seed 0)", 64),
    "none": ("PE-Core-L-14-336:random (untrained, seed 0)", 1024),
}


def _jpegs(rng: np.random.Generator) -> list[bytes]:
    """Eight 640x480 camera-like frames (smooth gradients and blocks), as JPEG."""
    out = []
    yy, xx = np.mgrid[0:480, 0:640]
    for k in range(FRAMES):
        img = np.stack([(xx + 40 * k) % 256, (yy + 20 * k) % 256, (xx + yy) // 5 % 256], axis=2)
        img[100 + 10 * k : 220 + 10 * k, 200:330] = rng.integers(0, 256, 3)
        out.append(encode_jpeg(img.astype(np.uint8), 90))
    return out


def build_store(root: Path, n: int, model: str, dim: int, rng: np.random.Generator) -> float:
    """Write a store of ``n`` episodes at ``root`` (see the module docstring); returns seconds."""
    t0 = time.perf_counter()
    frames_dir = root / "frames"
    template = root / ".template"
    template.mkdir(parents=True)
    frames_dir.mkdir()
    jpegs = _jpegs(rng)
    for i, data in enumerate(jpegs):
        (template / f"{i:02d}.jpg").write_bytes(data)
    conn = connect(root / DB_NAME, read_only=False)
    conn.execute("PRAGMA synchronous = OFF")  # a benchmark's scratch store: no power cut here
    ensure_schema(conn, root, read_only=False)
    robots = ("rover-1", "rover-2", "rover-3")
    pos = rng.uniform(-200, 200, size=(n, 2))
    first = None
    with transaction(conn):
        for i in range(n):
            stamp = ORIGIN + 30 * S + i * 47 * S
            ep_id = f"ep-{stamp:019d}-{i:06x}"
            emb = rng.standard_normal((FRAMES, dim)).astype(np.float32)
            emb /= np.linalg.norm(emb, axis=1, keepdims=True)
            rec = EpisodeRecord(
                id=ep_id,
                stamp_ns=stamp,
                start_ns=stamp - 2 * S,
                end_ns=stamp + 2 * S,
                pose=Pose(float(pos[i, 0]), float(pos[i, 1]), 0.0, frame_id="map"),
                pose_valid=True,
                surprise=float(rng.uniform(1.0, 4.0)),
                threshold=1.0,
                frame_stamps_ns=tuple(stamp - 2 * S + k * S // 2 for k in range(FRAMES)),
                frame_paths=tuple(FrameFiles.relative_paths(ep_id, FRAMES)),
                encoder_model="random:tiny (untrained, seed 0)",
                encoder_pretrained=False,
                embedder_model=model,
                embedder_pretrained=False,
                created_wall_ns=time.time_ns(),
                robot_id=robots[i % 3],
            )
            blobs = [row.astype("<f2").tobytes() for row in emb]
            insert_episode(
                conn,
                rec,
                nbytes=sum(map(len, jpegs)) + sum(map(len, blobs)),
                blobs=blobs,
                dtype="<f2",
                jpeg_sizes=[len(j) for j in jpegs],
            )
            folder = frames_dir / ep_id
            folder.mkdir()
            for k in range(FRAMES):
                os.link(template / f"{k:02d}.jpg", folder / f"{k:02d}.jpg")
            first = first or rec
        assert first is not None
        meta = StoreMeta().updates_for(first, dim)
        meta["origin_ns"] = str(ORIGIN)
        upsert_meta(conn, meta)
    conn.close()
    return time.perf_counter() - t0


def write_scores(path: Path, frames: int, rng: np.random.Generator) -> None:
    """A ``scores.csv`` of ``frames`` frames at 10 Hz (a day: 864,000)."""
    stamps = ORIGIN + np.arange(frames, dtype=np.int64) * (S // 10)
    score = rng.gamma(2.0, 0.5, frames)
    with path.open("w", encoding="utf-8") as f:
        f.write(",".join(SCORES_HEADER) + "\n")
        for s, v in zip(stamps.tolist(), score.tolist(), strict=True):
            f.write(f"{s},{v!r},{v / 50!r},1.5,0,\n")


@contextlib.contextmanager
def server(store: Path, cwd: Path) -> Iterator[str]:
    """``surprise-memory serve STORE --port 0`` as a process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "surprise_memory", "serve", str(store), "--port", "0"],
        cwd=cwd,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 300)
        line = proc.stdout.readline() if ready else ""
        found = re.search(r"(http://\S+/)", line)
        if found is None:
            raise RuntimeError(f"serve did not start: {line!r}")
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class Client:
    """One kept-alive HTTP connection to the server."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=600)

    def get(self, path: str, body: bytes | None = None) -> bytes:
        """The body of a 200 answer (anything else raises)."""
        self.conn.request("POST" if body else "GET", path, body=body)
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path}: {resp.status} {data[:200]!r}")
        return data


def timed(fn: Callable[[], object], repeats: int) -> dict[str, float]:
    """p50/p99 in ms of ``fn`` (bench_retrieval's percentiles: after three warm-up calls)."""
    p50, p99 = percentiles(fn, repeats)
    return {"p50_ms": p50, "p99_ms": p99, "n": repeats}


def chromium_load(url: str, repeats: int) -> dict[str, Any] | None:
    """Navigation -> page drawn in headless Chromium (median of ``repeats``); None if absent."""
    if not Path("/usr/bin/chromedriver").is_file():
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        for arg in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1500",
            f"--user-data-dir={profile}",
        ):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            ready = []
            for _ in range(repeats + 1):
                driver.get(url)
                deadline = time.monotonic() + 120
                while not driver.execute_script("return window.sm && window.sm.ready"):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the page did not load in 120 s")
                    time.sleep(0.02)
                ready.append(float(driver.execute_script("return window.sm.readyAt")))
            episodes = int(driver.execute_script("return window.sm.episodes"))
        finally:
            driver.quit()
    ready = ready[1:]  # the first load also warms the browser's caches of the script
    return {
        "median_ms": statistics.median(ready),
        "max_ms": max(ready),
        "n": len(ready),
        "episodes_drawn": episodes,
    }


def run(episodes: int, embedder: str, chromium: bool, repeats: int) -> dict[str, Any]:
    """Build the store, serve it, time everything; returns the figures."""
    rng = np.random.default_rng(0)
    model, dim = EMBEDDERS[embedder]
    out: dict[str, Any] = {"episodes": episodes, "dim": dim, "embedder": model}
    with tempfile.TemporaryDirectory(prefix="bench_browser_") as tmp:
        store = Path(tmp) / "store"
        out["build_s"] = build_store(store, episodes, model, dim, rng)
        write_scores(store / "scores.csv", 864_000, rng)
        with open_store(store, read_only=True) as s:
            out["refresh_idle_us"] = timed(s.refresh, 2000)["p50_ms"] * 1e3
            out["summaries_ms"] = timed(s.summaries, 20)
            # what the server does once after each change: read, make columns, encode
            out["timeline_cold_ms"] = timed(
                lambda: json.dumps(timeline_columns(s.summaries(), ORIGIN), allow_nan=False), 10
            )
        t0 = time.perf_counter()
        with server(store, Path(tmp)) as url:
            out["serve_start_s"] = time.perf_counter() - t0
            c = Client(url)
            c.get("/api/curve")  # waits for the start-up read of the day's scores, if running
            out["first_curve_s"] = time.perf_counter() - t0 - out["serve_start_s"]
            pages = ["/", "/static/app.js", "/static/style.css"]
            api = ["/api/store", "/api/timeline", "/api/curve"]
            out["timeline_bytes"] = len(c.get("/api/timeline"))
            out["first_load"] = timed(lambda: [c.get(p) for p in pages + api], repeats)
            out["timeline"] = timed(lambda: c.get("/api/timeline"), repeats)
            span = episodes * 47
            window = f"start={span // 2}&end={span // 2 + span // 10}"
            searches = {
                "time window (10 %)": f"/api/search?{window}",
                "place (20 m)": "/api/search?near=10,-20&radius=20&near_frame=map",
                "robot + time window": f"/api/search?robot_id=rover-2&{window}",
            }
            out["search"] = {
                k: timed(functools.partial(c.get, p), repeats) for k, p in searches.items()
            }
            ep = json.loads(c.get("/api/timeline"))["id"][episodes // 2]
            out["frame"] = timed(lambda: c.get(f"/api/episodes/{ep}/frames/3"), repeats)
            out["episode"] = timed(lambda: c.get(f"/api/episodes/{ep}"), repeats)
            if embedder != "none":
                jpeg = (store / "frames" / ep / "03.jpg").read_bytes()
                t1 = time.perf_counter()
                c.get("/api/search", jpeg)  # builds the store's embedder in the server
                out["embedder_build_s"] = time.perf_counter() - t1
                out["search"]["image"] = timed(
                    lambda: c.get("/api/search", jpeg), max(5, repeats // 3)
                )
            if chromium:
                out["chromium"] = chromium_load(url, 5)
        if embedder != "none":
            out["forward"] = embedder_forward(model, jpeg)
    return out


def embedder_forward(model: str, jpeg: bytes) -> dict[str, dict[str, float]]:
    """One text and one image through the store's embedder in this process (on this CPU).

    A text search is this text forward plus what a search without one costs; the image
    search's time over HTTP is mostly its image forward.
    """
    import io

    from PIL import Image

    from surprise_memory.perception.encoders import ImageTextEmbedder

    name = model.partition(":")[0]
    emb = ImageTextEmbedder(name, "random", device="cpu", seed=0)
    with Image.open(io.BytesIO(jpeg)) as img:
        rgb = np.array(img.convert("RGB"))
    return {
        "text": timed(lambda: emb.embed_text(["the moment the door opened"]), 5),
        "image": timed(lambda: emb.embed_images([rgb]), 3),
    }


def machine() -> str:
    """CPU, cores, load, versions (the harness's): the line printed above the figures."""
    info, vers = harness.machine(), harness.versions()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    names = ("python", "sqlite", "starlette", "uvicorn", "numpy", "torch")
    return (
        f"machine: {info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM, load "
        f"average {load}; " + ", ".join(f"{k} {vers[k]}" for k in names)
    )


def report(f: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(figure, measured, verdict against the 300 ms goal where it applies) rows."""

    def ms(t: dict[str, float]) -> str:
        return f"p50 {t['p50_ms']:.1f} ms, p99 {t['p99_ms']:.1f} ms"

    def verdict(t: dict[str, float]) -> str:
        return "met" if t["p99_ms"] <= GOAL_MS else "not met"

    n = f"{f['episodes']:,}"
    rows = [
        (
            f"first load over HTTP, {n} episodes (page, script, style, store, timeline, curve)",
            ms(f["first_load"]),
            verdict(f["first_load"]),
        ),
        (
            f"/api/timeline alone ({f['timeline_bytes'] / 1024:.0f} KiB of JSON)",
            ms(f["timeline"]),
            "",
        ),
    ]
    chromium = f.get("chromium")
    if chromium:
        rows.append(
            (
                f"first load in headless Chromium, navigation -> drawn "
                f"({chromium['episodes_drawn']:,} episodes)",
                f"median {chromium['median_ms']:.0f} ms, max {chromium['max_ms']:.0f} ms "
                f"(n={chromium['n']})",
                "met" if chromium["median_ms"] <= GOAL_MS else "not met",
            )
        )
    for name, t in f["search"].items():
        rows.append((f"search: {name}", ms(t), verdict(t)))
    rows += [
        ("one frame (stored JPEG)", ms(f["frame"]), ""),
        ("one episode's detail", ms(f["episode"]), ""),
        (f"summaries() at {n} (in-process)", ms(f["summaries_ms"]), ""),
        (
            "timeline JSON remade after a change (summaries, columns, encode; in-process)",
            ms(f["timeline_cold_ms"]),
            "",
        ),
        ("live feed, idle refresh() (in-process)", f"{f['refresh_idle_us']:.1f} µs", ""),
        (
            "build (schema statements + hard links), serve start, first curve (864k rows)",
            f"{f['build_s']:.1f} s, {f['serve_start_s']:.1f} s, {f['first_curve_s']:.1f} s",
            "",
        ),
    ]
    for kind, t in f.get("forward", {}).items():
        rows.append((f"the store's embedder, one {kind} forward on this CPU", ms(t), ""))
    if "embedder_build_s" in f:
        rows.append(
            (
                "store's embedder built by the first image search",
                f"{f['embedder_build_s']:.1f} s ({f['embedder']})",
                "",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="large")
    parser.add_argument("--no-chromium", action="store_true")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(machine(), flush=True)
    figures = run(args.episodes, args.embedder, not args.no_chromium, args.repeats)
    print(machine().split(";")[0].replace("machine", "after"))
    for figure, value, verdict in report(figures):
        print(f"{figure:<92} {value:<40} {verdict}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
