"""Several cameras, one encoder (issue 42): batched against one process per camera.

Run: ``python benchmarks/bench_cameras.py [--seconds S] [--cameras 1,2,3,4] [--out J]``
(inside the venv; no ROS needed: the encoder node's own objects run here).

For K = 1..4 cameras, each publishing 640x480 rgb frames at 30 Hz in real time for
``--seconds``, two shapes side by side in one run:

* **batched**: one process, one model: ``CameraBatcher`` (each camera's ring, window
  schedule and queue) and ``LiveWindowEncoder`` in a worker thread, exactly as
  ``encoder_node`` / ``pipeline_node`` wire them for ``cameras: front,left,...``;
* **per camera**: K processes started together, each with its own model and one camera
  (``CameraBatcher`` of one camera: today's one-camera node), competing for the same cores.

Printed per shape and K: windows encoded per second of camera time (all cameras; at
30 Hz and stride 1 each camera has a window per frame once M frames are in), windows
dropped, each
camera's delay (the newest frame of a window pushed -> its embedding out; mean and p95),
the forward passes and their mean batch, and the cost per window: CPU seconds of the
processes (``time.process_time``, every thread) per window encoded, and the forward's
wall time per window. Model: ``random:tiny`` (the tiny V-JEPA-2 preset: the same
architecture at test size) on the CPU, M = ``--clip-frames`` (default 16), stride 1, the
encoder's geometric preparation on every frame (640x480 -> its input size). The machine
and its load are printed first: on a shared machine the absolute figures move with the
other jobs; the two shapes run one after the other at each K.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import header, machine, versions

from surprise_memory.config import EncoderConfig
from surprise_memory.perception.camera_batches import CameraBatcher
from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS, LiveWindowEncoder, VideoEncoder
from surprise_memory.perception.frames import Frame

RATE_HZ = 30.0
WIDTH, HEIGHT = 640, 480
NAMES = ("front", "left", "rear", "right")


def _images(seed: int, count: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (HEIGHT, WIDTH, 3), dtype=np.uint8) for _ in range(count)]


def run_cameras(cameras: int, seconds: float, clip_frames: int, batch: int) -> dict[str, Any]:
    """One process, one model, ``cameras`` cameras at 30 Hz in real time: the figures."""
    names = NAMES[:cameras]
    cfg = EncoderConfig(
        encoder_weights=TINY_VIDEO_WEIGHTS,
        encoder_device="cpu",
        clip_frames=clip_frames,
        encoder_batch=batch,
        encoder_queue=16,
    )
    encoder = VideoEncoder.from_config(cfg)
    live = LiveWindowEncoder(encoder)
    live.warm_up(cfg.clip_frames)
    crop = encoder.crop_size
    batcher = CameraBatcher(cfg, names, (crop, crop), encoder.prepare_frame, live.host_buffer)
    images = {n: _images(i) for i, n in enumerate(names)}
    pushed: dict[tuple[str, int], float] = {}
    delays: dict[str, list[float]] = {n: [] for n in names}
    forwards: list[tuple[int, float]] = []  # (windows, seconds)
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            got = batcher.next_batch(timeout=0.05)
            if got is None or not got.windows:
                continue
            t0 = time.perf_counter()
            live.encode(got.frames, got.index)
            done = time.perf_counter()
            forwards.append((len(got.windows), done - t0))
            for w in got.windows:
                delays[w.camera].append(done - pushed.pop((w.camera, w.stamp_ns), done))

    thread = threading.Thread(target=worker, daemon=True)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    thread.start()
    period = 1.0 / RATE_HZ
    i = 0
    while True:
        due = wall0 + i * period
        now = time.perf_counter()
        if now - wall0 >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        stamp = 10**18 + round(i * period * 1e9)
        for name in names:  # the cameras' frames of one instant, as their callbacks run
            frame = Frame(images[name][i % len(images[name])], stamp, f"{name}_optical")
            batcher.push(name, frame, frame.frame_id)
            window = batcher.last_window
            if window is not None:
                pushed[(name, window.stamp_ns)] = time.perf_counter()
        i += 1
    time.sleep(0.5)  # the last windows through the model
    stop.set()
    batcher.close()
    thread.join(5.0)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    encoded = sum(len(d) for d in delays.values())
    per_camera = {
        n: {
            "encoded": len(delays[n]),
            "dropped": batcher.camera(n).dropped,
            "delay_mean_ms": float(np.mean(delays[n]) * 1e3) if delays[n] else None,
            "delay_p95_ms": float(np.percentile(delays[n], 95) * 1e3) if delays[n] else None,
        }
        for n in names
    }
    return {
        "cameras": cameras,
        "frames_per_camera": i,
        "wall_s": wall,
        "cpu_s": cpu,
        "encoded": encoded,
        "dropped": batcher.dropped,
        "forwards": len(forwards),
        "forward_s": sum(s for _, s in forwards),
        "per_camera": per_camera,
    }


def _child(cameras: int, seconds: float, clip_frames: int, batch: int, out: Any) -> None:
    out.put(run_cameras(cameras, seconds, clip_frames, batch))


def per_camera_processes(k: int, seconds: float, clip_frames: int, batch: int) -> dict[str, Any]:
    """K processes, one camera and one model each, started together: their figures summed."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_child, args=(1, seconds, clip_frames, batch, out)) for _ in range(k)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join(30)
    per_camera = {NAMES[j]: r["per_camera"][NAMES[0]] for j, r in enumerate(results)}
    return {
        "cameras": k,
        "frames_per_camera": min(r["frames_per_camera"] for r in results),
        "wall_s": max(r["wall_s"] for r in results),
        "cpu_s": sum(r["cpu_s"] for r in results),
        "encoded": sum(r["encoded"] for r in results),
        "dropped": sum(r["dropped"] for r in results),
        "forwards": sum(r["forwards"] for r in results),
        "forward_s": sum(r["forward_s"] for r in results),
        "per_camera": per_camera,
    }


def _row(shape: str, r: dict[str, Any]) -> str:
    enc = max(r["encoded"], 1)
    stream_s = r["frames_per_camera"] / RATE_HZ
    delays = ", ".join(
        f"{n} {c['delay_mean_ms']:.1f}/{c['delay_p95_ms']:.1f}" if c["delay_mean_ms"] else f"{n} -"
        for n, c in r["per_camera"].items()
    )
    return (
        f"| {r['cameras']} | {shape} | {r['encoded'] / stream_s:.1f} | {r['dropped']} | "
        f"{r['forwards']} ({r['encoded'] / max(r['forwards'], 1):.2f}) | "
        f"{r['cpu_s'] / enc * 1e3:.2f} | {r['forward_s'] / enc * 1e3:.2f} | {delays} |"
    )


def main() -> None:
    """Run both shapes for each number of cameras; print the table and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0, help="each run's real time")
    p.add_argument("--cameras", default="1,2,3,4", help="numbers of cameras to run")
    p.add_argument("--clip-frames", type=int, default=16, help="M, frames per window")
    p.add_argument("--batch", type=int, default=8, help="encoder_batch")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = p.parse_args()
    mach, vers = machine(), versions()
    print(header(mach, vers, quick=False))
    print(
        f"{args.seconds:g} s of 30 Hz 640x480 frames per camera; random:tiny on the CPU, "
        f"M = {args.clip_frames}, stride 1, encoder_batch {args.batch}, encoder_queue 16"
    )
    print(
        "\n| cameras | shape | windows/s | dropped | forwards (mean batch) | CPU ms/window "
        "| forward ms/window | delay mean/p95 ms per camera |\n|---|---|---|---|---|---|---|---|"
    )
    results = []
    for k in (int(c) for c in args.cameras.split(",")):
        batched = run_cameras(k, args.seconds, args.clip_frames, args.batch)
        print(_row("batched", batched), flush=True)
        apart = per_camera_processes(k, args.seconds, args.clip_frames, args.batch)
        print(_row("one process per camera", apart), flush=True)
        results.append({"batched": batched, "per_camera_processes": apart})
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.out is not None:
        blob = {"machine": mach, "versions": vers, "args": vars(args) | {"out": str(args.out)}}
        args.out.write_text(json.dumps({**blob, "results": results}, indent=2))


if __name__ == "__main__":
    main()
