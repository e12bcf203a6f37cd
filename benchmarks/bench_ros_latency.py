"""End-to-end ROS latency: a published camera frame -> its SurpriseScore, over real DDS.

Run (venv active and the colcon install sourced, ``install/setup.bash``)::

    python benchmarks/bench_ros_latency.py [--rates 10 30] [--seconds 20] [--size 640x480]

The installed ``encoder_node`` and ``scorer_node`` run as their own processes (the tiny
V-JEPA-2 preset, random weights, on the CPU) on a random ``ROS_DOMAIN_ID`` with DDS
discovery on this host only. This process publishes ``sensor_msgs/Image`` rgb8 frames with
increasing header stamps at each rate (sensor-data QoS, as a camera driver does) and
subscribes to ``surprise_memory/surprise``. The latency of a frame is the monotonic time
its SurpriseScore (matched by stamp) was received minus the time it was published. Per
rate: p50/p95/max, frames published, frames the encoder received, windows encoded and
dropped (the encoder node's ``/diagnostics`` counters, deltas over the phase) and scores
received. Before the timed phases, ``window + 8`` frames warm the scorer up (a score exists
only once the scorer's window is full).

The node processes get SIGINT at the end, SIGKILL if they linger, also on errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

NS = "/surprise_memory"
CAMERA = "/bench_camera/image_raw"
T0 = 1_700_000_000 * 10**9
NODES = ("encoder_node", "scorer_node")


@dataclass
class _Inbox:
    """What the benchmark node received: score arrival times and the latest diagnostics."""

    arrivals: dict[int, float] = field(default_factory=dict)
    diagnostics: dict[str, dict[str, str]] = field(default_factory=dict)
    diag_time: dict[str, float] = field(default_factory=dict)

    def on_score(self, msg: Any) -> None:
        now = time.monotonic()
        stamp = msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec
        self.arrivals.setdefault(stamp, now)

    def on_diag(self, msg: Any) -> None:
        now = time.monotonic()
        for status in msg.status:
            name = status.name.split(": ")[-1]
            self.diagnostics[name] = {kv.key: kv.value for kv in status.values}
            self.diag_time[name] = now

    def count(self, node: str, key: str) -> int:
        return int(self.diagnostics.get(node, {}).get(key, 0) or 0)


def node_params(clip_frames: int, scorer_window: int) -> dict[str, Any]:
    """Params file content: tiny encoder preset on the CPU, scorer window W."""
    from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS

    return {
        "/**/encoder_node": {
            "ros__parameters": {
                "encoder_weights": TINY_VIDEO_WEIGHTS,
                "encoder_device": "cpu",
                "clip_frames": clip_frames,
            }
        },
        "/**/scorer_node": {"ros__parameters": {"window": scorer_window}},
    }


def node_executable(name: str) -> str:
    """Path of an installed node executable; raises FileNotFoundError when not installed."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        prefix = Path(get_package_prefix("surprise_memory"))
    except PackageNotFoundError as err:
        raise FileNotFoundError(
            "package surprise_memory not found: source install/setup.bash (colcon build)"
        ) from err
    path = prefix / "lib" / "surprise_memory" / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is not installed: run colcon build (tools/build.sh)")
    return str(path)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGINT (a clean rclpy shutdown), then SIGKILL if the process lingers."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()


@contextlib.contextmanager
def node_processes(
    workdir: Path,
    params: dict[str, Any],
    env: dict[str, str],
    names: tuple[str, ...] = NODES,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start the nodes (default: encoder and scorer); stop them on exit, whatever happened."""
    import yaml

    params_path = workdir / "params.yaml"
    params_path.write_text(yaml.safe_dump(params), encoding="utf-8")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name in names:
            cmd = [sys.executable, node_executable(name), "--ros-args"]
            cmd += [
                "--params-file",
                str(params_path),
                "-r",
                f"__ns:={NS}",
                "-r",
                f"image:={CAMERA}",
            ]
            with open(workdir / f"{name}.log", "wb") as log:
                procs.append(
                    subprocess.Popen(
                        cmd, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT
                    )
                )
        yield procs
    finally:
        for proc in procs:
            stop_process(proc)


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p95_ms": None, "max_ms": None, "mean_ms": None}
    a = np.asarray(values) * 1e3
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p95_ms": float(np.percentile(a, 95)),
        "max_ms": float(a.max()),
        "mean_ms": float(a.mean()),
    }


def run(
    rates: tuple[float, ...] = (10.0, 30.0),
    seconds: float = 20.0,
    *,
    size: tuple[int, int] = (640, 480),
    clip_frames: int = 16,
    scorer_window: int = 64,
    domain_id: int | None = None,
    startup_timeout_s: float = 120.0,
    log: Any = None,
) -> dict[str, Any]:
    """Run the benchmark and return its figures (one entry per rate under ``"rates"``).

    Args:
        rates: Camera rates in Hz, run one after the other on the same node processes.
        seconds: Length of each timed phase.
        size: (width, height) of the published rgb8 images.
        clip_frames: M of the encoder node (the tiny preset's native clip is 16 frames).
        scorer_window: W of the scorer node (default 64, the paper's).
        domain_id: ROS_DOMAIN_ID; random in 1..100 when None.
        startup_timeout_s: How long to wait for the nodes to come up.
        log: Where progress lines go (a text stream; None = silent).

    Returns:
        Plain data: settings, per-rate figures, the node logs' tails on failure.

    Raises:
        FileNotFoundError: The node executables are not installed.
        RuntimeError: The nodes did not come up in time.

    """
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import Image

    from surprise_memory.msg import SurpriseScore
    from surprise_memory.nodes.messages import image_msg_from_rgb, ns_to_time

    def say(text: str) -> None:
        if log is not None:
            print(text, file=log, flush=True)

    domain = domain_id if domain_id is not None else random.randint(1, 100)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(domain)  # this process's own nodes too
    env = {
        **os.environ,
        "ROS_DOMAIN_ID": str(domain),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    w, h = size
    rng = np.random.default_rng(0)
    images = [image_msg_from_rgb(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)) for _ in range(8)]
    result: dict[str, Any] = {
        "settings": {
            "rates_hz": list(rates),
            "seconds": seconds,
            "image": f"{w}x{h} rgb8",
            "encoder": f"random:tiny, cpu, clip_frames={clip_frames}",
            "scorer_window": scorer_window,
            "domain_id": domain,
            "qos": "camera: sensor data (best effort); surprise: reliable",
        },
        "rates": [],
    }

    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain)
    node = Node("bench_ros_latency", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    inbox = _Inbox()
    node.create_subscription(
        SurpriseScore,
        f"{NS}/surprise",
        inbox.on_score,
        QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE),
    )
    node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)
    camera = node.create_publisher(Image, CAMERA, qos_profile_sensor_data)

    def spin_until(done: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not done() and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.02)
        return bool(done())

    def fresh_diagnostics(after: float, timeout: float = 8.0) -> bool:
        return spin_until(lambda: all(inbox.diag_time.get(n, -1.0) > after for n in NODES), timeout)

    stamp = T0
    period_pub: dict[int, float] = {}

    def stream(rate: float, count: int) -> list[int]:
        nonlocal stamp
        step = round(1e9 / rate)
        sent = []
        start = time.monotonic()
        for i in range(count):
            due = start + i / rate
            while (now := time.monotonic()) < due:
                executor.spin_once(timeout_sec=max(0.0, min(due - now, 0.005)))
            stamp += step
            msg = images[i % len(images)]
            msg.header.stamp = ns_to_time(stamp)
            period_pub[stamp] = time.monotonic()
            camera.publish(msg)
            sent.append(stamp)
        return sent

    workdir = Path(tempfile.mkdtemp(prefix="bench_ros_latency_"))
    try:
        with node_processes(workdir, node_params(clip_frames, scorer_window), env) as procs:
            t_start = time.monotonic()
            say(f"  ros latency: starting {', '.join(NODES)} (domain {domain}) ...")
            up = spin_until(
                lambda: (
                    (
                        camera.get_subscription_count() >= 1
                        and node.count_publishers(f"{NS}/surprise") >= 1
                        and all(n in inbox.diagnostics for n in NODES)
                    )
                    or any(p.poll() is not None for p in procs)
                ),
                startup_timeout_s,
            )
            if not up or any(p.poll() is not None for p in procs):
                tails = {
                    n: (workdir / f"{n}.log").read_text(errors="replace")[-2000:] for n in NODES
                }
                raise RuntimeError(f"nodes did not come up in {startup_timeout_s:.0f} s: {tails}")
            result["startup_s"] = time.monotonic() - t_start
            # warm-up: fill the scorer's window (no score before W embeddings)
            warm = stream(10.0, scorer_window + 8)
            spin_until(lambda: warm[-1] in inbox.arrivals, 10.0)
            fresh_diagnostics(period_pub[warm[-1]])
            for rate in rates:
                before = {
                    (n, k): inbox.count(n, k)
                    for n in NODES
                    for k in ("frames_in", "windows_encoded", "windows_dropped", "frames_scored")
                }
                say(f"  ros latency: {rate:g} Hz for {seconds:g} s ...")
                sent = stream(rate, round(rate * seconds))
                spin_until(lambda sent=sent: sent[-1] in inbox.arrivals, 5.0)
                spin_until(lambda: False, 0.5)  # stragglers
                fresh_diagnostics(period_pub[sent[-1]] + 0.05)

                def delta(n: str, k: str, before: dict[tuple[str, str], int] = before) -> int:
                    return inbox.count(n, k) - before[(n, k)]

                lat = [inbox.arrivals[s] - period_pub[s] for s in sent if s in inbox.arrivals]
                enc = inbox.diagnostics.get("encoder_node", {})
                result["rates"].append(
                    {
                        "rate_hz": rate,
                        "frames_published": len(sent),
                        "encoder_frames_in": delta("encoder_node", "frames_in"),
                        "windows_encoded": delta("encoder_node", "windows_encoded"),
                        "windows_dropped": delta("encoder_node", "windows_dropped"),
                        "frames_scored": delta("scorer_node", "frames_scored"),
                        "scores_received": len(lat),
                        "encoder_latency_p95_ms": enc.get("latency_p95_ms"),
                        "rejected": {
                            k: v
                            for n in NODES
                            for k, v in inbox.diagnostics.get(n, {}).items()
                            if k.startswith("rejected")
                        },
                        **_percentiles(lat),
                    }
                )
    finally:
        executor.shutdown()
        node.destroy_node()
        ctx.try_shutdown()
        for n in NODES:
            with contextlib.suppress(OSError):
                (workdir / f"{n}.log").unlink()
        with contextlib.suppress(OSError):
            (workdir / "params.yaml").unlink()
            workdir.rmdir()
    return result


def format_rows(result: dict[str, Any]) -> list[str]:
    """Human-readable lines, one per rate."""
    lines = [
        f"{'rate':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'published':>9} "
        f"{'enc in':>7} {'encoded':>7} {'dropped':>7} {'scores':>7}"
    ]
    for r in result["rates"]:

        def f(v: float | None) -> str:
            return "-" if v is None else f"{v:.1f}"

        lines.append(
            f"{r['rate_hz']:>4g}Hz {f(r['p50_ms']):>8} {f(r['p95_ms']):>8} {f(r['max_ms']):>8} "
            f"{r['frames_published']:>9} {r['encoder_frames_in']:>7} {r['windows_encoded']:>7} "
            f"{r['windows_dropped']:>7} {r['scores_received']:>7}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[10.0, 30.0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per rate")
    parser.add_argument("--size", default="640x480", help="WxH of the published images")
    parser.add_argument("--clip-frames", type=int, default=16)
    parser.add_argument("--scorer-window", type=int, default=64)
    parser.add_argument("--domain-id", type=int, default=None, help="default: random 1..100")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    w, h = (int(x) for x in args.size.lower().split("x"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the cleanup on SIGTERM
    result = run(
        tuple(args.rates),
        args.seconds,
        size=(w, h),
        clip_frames=args.clip_frames,
        scorer_window=args.scorer_window,
        domain_id=args.domain_id,
        log=sys.stdout,
    )
    print(f"nodes up in {result['startup_s']:.1f} s; {json.dumps(result['settings'])}")
    print("\n".join(format_rows(result)))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
