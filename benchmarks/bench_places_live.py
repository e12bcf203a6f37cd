"""What the live node's place keyframes cost on the camera path, per camera frame.

Run: ``python benchmarks/bench_places_live.py [--seconds 120] [--burners 0 2]`` (inside the
venv, with the colcon install sourced: it runs rclpy). ``bench_place_keyframes.py`` times
the selector alone; this times the whole camera-path step the memory node runs for every
camera frame, :meth:`~surprise_memory.nodes.places_part.PlacesPart.on_frame`: the robot's
newest pose from the node's pose source, the camera's pose and viewing yaw, the selector,
and a kept frame's hand-over to the place writer's bounded queue.

In one process, as ``memory_node`` hosts it: a node with a :class:`PlacesPart` (its own
pose source subscribed to odometry, no tf), its place writer thread embedding each kept
frame with ``synthetic-trained-tiny``'s image embedder on the CPU and writing it to a real
SQLite store folder (JPEG, fsync, commit) while the camera path goes on; a second node
publishes the robot's odometry over DDS at 50 Hz along ``bench_place_keyframes``' building
loop (1 m/s), both spun by one executor thread. Camera frames of ``--width`` x ``--height``
rgb8 come at 30 Hz in real time, each :meth:`on_frame` call timed alone. For each count of
``--burners`` (CPU-bound processes started beside it, as a busy robot or CI has them):
p50 / p99 / p99.9 / max in microseconds, and the keyframes kept, written and dropped.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import rclpy
from bench_place_keyframes import loop_route, pass_seconds
from harness import header, machine, versions
from nav_msgs.msg import Odometry
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from surprise_memory.memory.store import EpisodeStore
from surprise_memory.nodes.diagnostics import NodeStats
from surprise_memory.nodes.places_part import PlacesPart
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    SYNTHETIC_MODEL_NAME,
    ImageTextEmbedder,
)
from surprise_memory.perception.frames import Frame

ODOM = "/bench_places_live/odom"
CAMERA_HZ = 30.0
ODOM_HZ = 50.0


class TinyEmbedding:
    """The host's embedding callable (no redaction), as the memory node hands it over."""

    def __init__(self, embedder: ImageTextEmbedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()

    @property
    def model(self) -> tuple[str, bool]:
        return self._embedder.model_name, self._embedder.pretrained

    def __call__(self, frames: Sequence[Frame]) -> tuple[list[Frame], npt.NDArray[np.float32]]:
        with self._lock:
            return list(frames), self._embedder.embed_images([f.rgb for f in frames])


class OdometryPublisher(Node):
    """The robot driving the building loop: its odometry at ODOM_HZ, stamped now."""

    def __init__(self, t0_ns: int) -> None:
        super().__init__("bench_places_odometry")
        self._route = loop_route(ODOM_HZ, np.random.default_rng(0))
        self._period = pass_seconds(self._route, ODOM_HZ)
        self._t0_ns = t0_ns
        self._pub = self.create_publisher(Odometry, ODOM, 10)
        self.create_timer(1.0 / ODOM_HZ, self._publish)

    def _publish(self) -> None:
        now = time.time_ns()
        k = int(((now - self._t0_ns) / 1e9 % self._period) * ODOM_HZ) % len(self._route)
        pose = self._route[k][1]
        msg = Odometry()
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
        msg.header.frame_id = "map"
        msg.child_frame_id = "base_link"
        p, q = msg.pose.pose.position, msg.pose.pose.orientation
        p.x, p.y, p.z = pose.x, pose.y, pose.z
        q.x, q.y, q.z, q.w = pose.qx, pose.qy, pose.qz, pose.qw
        self._pub.publish(msg)


def run(seconds: float, width: int, height: int, embed: TinyEmbedding, work: Path) -> str:
    """One timed run: the camera path's per-frame cost and the keyframes' fate."""
    t0 = time.time_ns()
    host = Node("bench_places_memory")
    odometry = OdometryPublisher(t0)
    stats = NodeStats(host)
    values = {"odom_topic": ODOM}
    with EpisodeStore(work / f"store-{t0}") as store:
        part = PlacesPart(host, stats, values, store, embed)
        part.subscribe()
        executor = SingleThreadedExecutor()
        executor.add_node(host)
        executor.add_node(odometry)
        spinner = threading.Thread(target=executor.spin, daemon=True)
        spinner.start()
        time.sleep(1.0)  # the odometry's first messages
        rng = np.random.default_rng(1)
        images = [rng.integers(0, 256, (height, width, 3), np.uint8) for _ in range(8)]
        n = round(seconds * CAMERA_HZ)
        times = np.empty(n)
        start = time.perf_counter()
        for i in range(n):
            wait = start + i / CAMERA_HZ - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            frame = Frame(images[i % len(images)], time.time_ns(), "front_optical")
            t = time.perf_counter_ns()
            part.on_frame(frame, "front")
            times[i] = time.perf_counter_ns() - t
        late = part.close(timeout=30.0)
        executor.shutdown()
        spinner.join(timeout=5.0)
        kept, written, dropped = (
            stats.count(f"place_keyframes_{k}", 0) for k in ("kept", "written", "dropped")
        )
        held = len(store)
    host.destroy_node()
    odometry.destroy_node()
    p50, p99, p999 = np.percentile(times, [50, 99, 99.9]) / 1e3
    return (
        f"{n} frames {width}x{height} at {CAMERA_HZ:g} Hz: on_frame p50 {p50:.1f} us, "
        f"p99 {p99:.1f} us, p99.9 {p999:.1f} us, max {times.max() / 1e3:.0f} us; keyframes "
        f"kept {kept}, written {written}, dropped {dropped}, not written at close {late}; "
        f"{held} records in the store"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--burners", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args()
    print(header(machine(), versions(), quick=False))
    embed = TinyEmbedding(
        ImageTextEmbedder(SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME, device="cpu")
    )
    rclpy.init()
    try:
        with tempfile.TemporaryDirectory() as work:
            for burners in args.burners:
                procs = [
                    subprocess.Popen([sys.executable, "-c", "while 1: pass"])
                    for _ in range(burners)
                ]
                try:
                    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
                    line = run(args.seconds, args.width, args.height, embed, Path(work))
                    print(
                        f"{burners} CPU-bound process(es) beside it (load at start {load}): {line}"
                    )
                finally:
                    for p in procs:
                        p.kill()
                        p.wait()
    finally:
        rclpy.try_shutdown()
    print(f"load average at end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
