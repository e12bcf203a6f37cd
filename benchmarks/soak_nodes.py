"""Soak: the three live nodes at camera rate for minutes, and the memory each one holds.

Run (venv active and the colcon install sourced, ``install/setup.bash``)::

    python benchmarks/soak_nodes.py [--minutes 60] [--fps 30] [--size 640x480] [--out DIR]

The installed ``encoder_node``, ``scorer_node`` and ``memory_node`` run as their own
processes (the tiny V-JEPA-2 and PE-Core presets, random weights, on the CPU) on a random
``ROS_DOMAIN_ID`` with DDS discovery on this host only. This process publishes rgb8
``sensor_msgs/Image`` frames at ``--fps`` (sensor-data QoS, as a camera driver does) of a
scene that changes every 20 s, so the gate fires and episodes are stored, and samples each
node's resident memory (``VmRSS`` of ``/proc/PID/status``) every ``--sample-s`` seconds.
The fit starts after ``--warmup-s`` (models loaded, the frame history and the gate's
history filled) and never spans the first stored episode (received on ``episodes``): the
first write allocates once what every later one reuses (the writer thread's heap arena,
the JPEG encoder, SQLite's page cache, the first ``Episode`` message), a step that is not
growth; the longer side of it is fitted (:func:`fit_window`). Two growth figures per node
from there, in MB per minute: the least-squares line
through the samples, and the line through the *floor* of each ``--floor-s`` window (its
smallest sample). Frames
held, episodes being embedded and JPEGs being written come and go by tens of MB between
samples; a leak raises the floor, transients do not, so the floor's slope is the figure a
test can hold to a few MB per minute over minutes. It
prints the table and writes ``soak.json`` and ``soak.png`` (RSS over time, one line per
node) into ``--out``.

The node processes get SIGINT at the end, SIGKILL if they linger, also on errors.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks

import bench_ros_latency as brl

NODES = ("encoder_node", "scorer_node", "memory_node")
SCENE_SECONDS = 20.0


def rss_mb(pid: int) -> float:
    """Resident memory of a process in MiB (``VmRSS``), NaN once it has exited."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def slope_mb_per_min(times_s: list[float], values_mb: list[float]) -> float:
    """Least-squares growth of ``values_mb`` over ``times_s``, in MB per minute."""
    if len(times_s) < 2:
        return float("nan")
    return float(np.polyfit(np.asarray(times_s) / 60.0, np.asarray(values_mb), 1)[0])


def floor_slope_mb_per_min(times_s: list[float], values_mb: list[float], window_s: float) -> float:
    """Growth of the per-window minimum of ``values_mb`` (windows of ``window_s``), MB/min."""
    if not times_s:
        return float("nan")
    t0 = times_s[0]
    floors: dict[int, tuple[float, float]] = {}
    for t, v in zip(times_s, values_mb, strict=True):
        k = int((t - t0) // window_s)
        if k not in floors or v < floors[k][1]:
            floors[k] = (t, v)
    points = [floors[k] for k in sorted(floors)]
    return slope_mb_per_min([t for t, _ in points], [v for _, v in points])


def fit_window(
    warmup_s: float, end_s: float, first_episode_s: float | None, sample_s: float
) -> tuple[float, float]:
    """The span whose growth is fitted: after the warm-up, never across the first episode.

    The first stored episode allocates once what every later one reuses (a step, not
    growth), and when it comes depends on the gate. The fit takes the longer of the two
    spans it leaves: from the warm-up to it, or from one sample after it to the end; with
    no episode, the warm-up to the end.

    Args:
        warmup_s: End of the warm-up, seconds from the start.
        end_s: End of the run.
        first_episode_s: When the first episode was stored (None: none was).
        sample_s: Seconds between samples (the step lands in the sample after it).

    Returns:
        (from, to) in seconds; samples at ``from <= t < to`` are fitted.

    """
    if first_episode_s is None:
        return warmup_s, end_s
    before = (warmup_s, min(first_episode_s, end_s))
    after = (max(warmup_s, first_episode_s + sample_s), end_s)
    return max(before, after, key=lambda span: span[1] - span[0])


def _params(store: Path) -> dict[str, Any]:
    from surprise_memory.perception.encoders import TINY_EMBEDDER_MODEL, TINY_VIDEO_WEIGHTS

    return {
        "/**/encoder_node": {
            "ros__parameters": {
                "encoder_weights": TINY_VIDEO_WEIGHTS,
                "encoder_device": "cpu",
                "clip_frames": 16,
            }
        },
        # gamma 3: about the paper's rate of episodes with random weights, not one every few
        # seconds; the embedder must keep up, or the writer's backlog (bounded at 32
        # episodes of 8 held frames) is what grows
        # a short scorer window and gate warm-up (16 windows each, not 64 + 32): the first
        # episode comes within the first minute, so even a 3-minute run fits its slope
        # after the first write's one-time allocations
        "/**/scorer_node": {"ros__parameters": {"window": 16, "warmup": 16, "gamma": 3.0}},
        "/**/memory_node": {
            "ros__parameters": {
                # a history bounded by count, not by the (varying, best-effort) receive rate:
                # its size, the largest thing the node holds, stays put and the trend shows
                "frame_history_max": 64,
                "episode_before_seconds": 0.5,
                "episode_after_seconds": 0.5,
                "embedder_model": TINY_EMBEDDER_MODEL,
                "embedder_weights": "random",
                "embedder_device": "cpu",
                "store_path": str(store),
            }
        },
    }


def _scenes(size: tuple[int, int]) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    w, h = size
    return [rng.integers(0, 256, size=(h, w * 2, 3), dtype=np.uint8) for _ in range(3)]


def run(
    minutes: float,
    fps: float,
    size: tuple[int, int],
    out: Path,
    *,
    sample_s: float = 5.0,
    warmup_s: float = 60.0,
    floor_s: float = 30.0,
    log: Any = None,
) -> dict[str, Any]:
    """Run the soak and return its figures (also written to ``out/soak.json``).

    Args:
        minutes: Length of the run, including the warm-up.
        fps: Camera rate in Hz.
        size: (width, height) of the published frames.
        out: Folder for soak.json, soak.png, the node logs and the episode store.
        sample_s: Seconds between two RSS samples.
        warmup_s: Samples before this are plotted but not fitted.
        floor_s: Window of the floor (minimum) whose growth is the second figure.
        log: Where progress lines go (a text stream; None = silent).

    Returns:
        Settings, samples, per-node slopes and final RSS, and what the nodes did.

    Raises:
        FileNotFoundError: The node executables are not installed.
        RuntimeError: A node exited during the run.

    """
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from surprise_memory.msg import Episode
    from surprise_memory.nodes.messages import image_msg_from_rgb
    from surprise_memory.nodes.qos import LATCHED

    out.mkdir(parents=True, exist_ok=True)
    env = os.environ.copy()
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(101, 232)))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    inbox = brl._Inbox()
    samples: dict[str, list[float]] = {n: [] for n in NODES}
    times: list[float] = []
    scenes = _scenes(size)
    context = Context()
    rclpy.init(context=context)
    node = Node("soak_camera", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    pub = node.create_publisher(Image, brl.CAMERA, qos_profile_sensor_data)
    node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)
    stored_s: list[float] = []  # when each stored episode arrived, seconds from t0
    node.create_subscription(
        Episode, f"{brl.NS}/episodes", lambda _: stored_s.append(time.monotonic() - t0), LATCHED
    )
    published = 0
    try:
        with brl.node_processes(out, _params(out / "store"), env, names=NODES) as procs:
            pids = dict(zip(NODES, (p.pid for p in procs), strict=True))
            t0 = time.monotonic()
            next_frame, next_sample = t0, t0
            end = t0 + minutes * 60.0
            stamp0 = time.time_ns()
            while (now := time.monotonic()) < end:
                if any(p.poll() is not None for p in procs):
                    raise RuntimeError(f"a node exited during the soak; see the logs in {out}")
                if now >= next_sample:
                    times.append(now - t0)
                    for name, pid in pids.items():
                        samples[name].append(rss_mb(pid))
                    if log is not None:
                        rss = ", ".join(f"{n} {samples[n][-1]:.0f}" for n in NODES)
                        print(f"  t={now - t0:5.0f} s  RSS MiB: {rss}", file=log, flush=True)
                    next_sample += sample_s
                if now >= next_frame:
                    t = now - t0
                    scene = scenes[int(t // SCENE_SECONDS) % len(scenes)]
                    off = int(t * 20) % size[0]  # a slow pan across the scene
                    rgb = np.ascontiguousarray(scene[:, off : off + size[0]])
                    stamp = stamp0 + round(t * 1e9)
                    pub.publish(image_msg_from_rgb(rgb, stamp, "camera"))
                    published += 1
                    next_frame += 1.0 / fps
                executor.spin_once(timeout_sec=max(0.0, min(next_frame, next_sample) - now))
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)

    fit_from, fit_to = fit_window(
        warmup_s, minutes * 60.0, stored_s[0] if stored_s else None, sample_s
    )
    fit = [i for i, t in enumerate(times) if fit_from <= t < fit_to]
    result: dict[str, Any] = {
        "settings": {
            "minutes": minutes,
            "fps": fps,
            "size": list(size),
            "sample_s": sample_s,
            "warmup_s": warmup_s,
            "floor_s": floor_s,
        },
        "frames_published": published,
        "episodes_stored_s": stored_s,
        "fit_from_s": fit_from,
        "fit_to_s": fit_to,
        "times_s": times,
        "rss_mb": samples,
        "nodes": {},
        "diagnostics": inbox.diagnostics,
    }
    for name in NODES:
        values = samples[name]
        ft, fv = [times[i] for i in fit], [values[i] for i in fit]
        result["nodes"][name] = {
            "slope_mb_per_min": slope_mb_per_min(ft, fv),
            "floor_slope_mb_per_min": floor_slope_mb_per_min(ft, fv, floor_s),
            "final_rss_mb": values[-1] if values else float("nan"),
            "max_rss_mb": max(values) if values else float("nan"),
        }
    (out / "soak.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    _plot(result, out / "soak.png")
    return result


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    t = np.asarray(result["times_s"]) / 60.0
    for name in NODES:
        slope = result["nodes"][name]["slope_mb_per_min"]
        ax.plot(t, result["rss_mb"][name], marker=".", label=f"{name} ({slope:+.2f} MB/min)")
    for edge in (result["fit_from_s"], result["fit_to_s"]):  # the fitted span
        ax.axvline(edge / 60.0, color="grey", linestyle=":")
    s = result["settings"]
    ax.set_title(f"RSS of the live nodes, {s['fps']:g} Hz {s['size'][0]}x{s['size'][1]} rgb8")
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MiB)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the soak from the command line and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--size", default="640x480", help="WIDTHxHEIGHT of the frames")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--warmup-s", type=float, default=60.0)
    parser.add_argument("--floor-s", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    out = args.out or Path(tempfile.mkdtemp(prefix="soak_"))
    res = run(
        args.minutes,
        args.fps,
        (width, height),
        out,
        sample_s=args.sample_s,
        warmup_s=args.warmup_s,
        floor_s=args.floor_s,
        log=sys.stdout,
    )
    print(f"soak: {args.minutes:g} min at {args.fps:g} Hz {width}x{height}, out {out}")
    print(
        f"  {len(res['episodes_stored_s'])} episodes stored; "
        f"fit from t = {res['fit_from_s']:.0f} s to {res['fit_to_s']:.0f} s "
        "(after the warm-up, on the longer side of the first episode's one-time step)"
    )
    for name, fig in res["nodes"].items():
        print(
            f"  {name:13s} slope {fig['slope_mb_per_min']:+7.2f} MB/min "
            f"(floor {fig['floor_slope_mb_per_min']:+7.2f}), "
            f"final {fig['final_rss_mb']:.0f} MiB, max {fig['max_rss_mb']:.0f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
