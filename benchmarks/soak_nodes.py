"""Soak: the live nodes at camera rate for minutes: the memory each holds, the frames each got.

Run (venv active and the colcon install sourced, ``install/setup.bash``)::

    python benchmarks/soak_nodes.py [--minutes 60] [--fps 30] [--size 640x480] [--out DIR]
        [--shape split|one_process] [--transport raw|compressed]
        [--fastdds-profile shipped|none] [--bare-subscriber] [--cameras 1-4]
        [--camera-processes]

The installed ``encoder_node``, ``scorer_node`` and ``memory_node`` (``--shape split``) or
``pipeline_node`` (``one_process``) run as their own processes (the tiny V-JEPA-2 and
PE-Core presets, random weights, on the CPU) on a random ``ROS_DOMAIN_ID`` with DDS
discovery on this host only. This process publishes ``sensor_msgs/Image`` rgb8 frames
(``--transport compressed``: ``CompressedImage`` JPEG) at ``--fps`` (sensor-data QoS, as
a camera driver does, stamped by the camera's schedule) of a scene that changes every
20 s, so the gate fires and episodes are stored, and samples each node's resident memory
(``VmRSS`` of ``/proc/PID/status``) every ``--sample-s`` seconds.

**Delivery.** The camera publishes only once every camera node has subscribed, so every
frame published was meant for every node. ``--fastdds-profile shipped`` (the default, the
package's shipped configuration) gives this process (the camera driver's side) and the
nodes ``config/fastdds_large_frames.xml``; ``none`` runs Fast DDS's defaults. At the end
each camera node's last ``/diagnostics`` gives what it took in (``frames_in``) and its own
estimate from the stamps (``camera_frames_received``, ``camera_frames_lost``): per node
the delivered share (frames_in / published) against the estimate (received / (received +
lost)), and whether it said WARN "camera frames lost". ``--bare-subscriber`` adds an
rclpy process that only counts the frames (transport loss alone, against which the
nodes' loss from a busy CPU shows).

**Several cameras.** ``--cameras 3`` publishes three cameras, ``front``, ``left`` and
``rear``, each its own stream at ``--fps`` on its own topic (``<name>/image`` in the
nodes' namespace), and gives every node ``cameras: front,left,rear``; per node and camera
the share of that camera's frames its subscription delivered (``front.camera_frames_received``
of its ``/diagnostics``), its own estimate, its WARNs naming the camera, and the bare
subscriber's share. ``--camera-processes`` publishes each camera from a process of its
own, as a robot's camera drivers are (:mod:`soak_cameras`).

**Memory.** The fit starts after ``--warmup-s`` (models loaded, the frame history and the
gate's history filled) and never spans the first stored episode (received on
``episodes``): the first write allocates once what every later one reuses (the writer
thread's heap arena, the JPEG encoder, SQLite's page cache, the first ``Episode``
message), a step that is not growth; the longer side of it is fitted (:func:`fit_window`).
Two growth figures per node from there, in MB per minute: the least-squares line through
the samples, and the line through the *floor* of each ``--floor-s`` window (its smallest
sample). Frames held, episodes being embedded and JPEGs being written come and go by tens
of MB between samples; a leak raises the floor, transients do not, so the floor's slope is
the figure a test can hold to a few MB per minute over minutes. It prints the table and
writes ``soak.json`` and ``soak.png`` (RSS over time, one line per node) into ``--out``.

The node processes get SIGINT at the end, SIGKILL if they linger, also on errors.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling benchmarks

import bench_ros_latency as brl
from soak_cameras import (
    CameraFrames,
    camera_delivery,
    camera_topics,
    count_frames,
    publish_camera,
)

SHAPES = {
    "split": ("encoder_node", "scorer_node", "memory_node"),
    "one_process": ("pipeline_node",),
}
"""The ``--shape`` -> the node processes it starts."""

CAMERA_NODES = ("encoder_node", "memory_node", "pipeline_node")
"""The nodes that subscribe to the camera (and report their delivery)."""

BARE = "bare_subscriber"
"""The name of the ``--bare-subscriber`` process in the results."""


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
    spans it leaves: from the warm-up to one sample before it, or from one sample after it
    to the end; with no episode, the warm-up to the end. A sample apart on both sides: the
    node builds the episode (embeds and encodes its frames) before it announces it, which
    takes seconds on a loaded machine, so the step can come in the sample before the
    announcement (a fresh clone's CI: the step at 125 s, the episode announced at 126 s).

    Args:
        warmup_s: End of the warm-up, seconds from the start.
        end_s: End of the run.
        first_episode_s: When the first episode was announced (None: none was).
        sample_s: Seconds between samples (the step lands in the sample before or after
            the announcement).

    Returns:
        (from, to) in seconds; samples at ``from <= t < to`` are fitted.

    """
    if first_episode_s is None:
        return warmup_s, end_s
    before = (warmup_s, min(first_episode_s - sample_s, end_s))
    after = (max(warmup_s, first_episode_s + sample_s), end_s)
    return max(before, after, key=lambda span: span[1] - span[0])


def _params(
    store: Path,
    shape: str,
    transport: str,
    diagnostics_s: float,
    camera_depth: int,
    *,
    topics: dict[str, str],
) -> dict[str, Any]:
    from surprise_memory.perception.encoders import TINY_EMBEDDER_MODEL, TINY_VIDEO_WEIGHTS

    def camera() -> dict[str, Any]:  # a new dict per node: YAML aliases break rcl's parser
        values: dict[str, Any] = {"image_transport": transport}
        if camera_depth:  # the camera subscriptions' queue (sensor-data QoS: 5)
            depth = {"subscription": {"depth": camera_depth}}
            values["qos_overrides"] = {topic: dict(depth) for topic in topics.values()}
        return values

    sections: dict[str, dict[str, Any]] = {
        "encoder_node": {
            "encoder_weights": TINY_VIDEO_WEIGHTS,
            "encoder_device": "cpu",
            "clip_frames": 16,
        },
        # gamma 3: about the paper's rate of episodes with random weights, not one every few
        # seconds; the embedder must keep up, or the writer's backlog (bounded at 32
        # episodes of 8 held frames) is what grows
        # a short scorer window and gate warm-up (16 windows each, not 64 + 32): the first
        # episode comes within the first minute, so even a 3-minute run fits its slope
        # after the first write's one-time allocations
        "scorer_node": {"window": 16, "warmup": 16, "gamma": 3.0},
        "memory_node": {
            # a history bounded by count, not by the (varying, best-effort) receive rate:
            # its size, the largest thing the node holds, stays put and the trend shows
            "frame_history_max": 64,
            "episode_before_seconds": 0.5,
            "episode_after_seconds": 0.5,
            "embedder_model": TINY_EMBEDDER_MODEL,
            "embedder_weights": "random",
            "embedder_device": "cpu",
            "store_path": str(store),
        },
    }
    if shape == "one_process":  # the three sections in one, as the launch file merges them
        merged = {k: v for section in sections.values() for k, v in section.items()}
        sections = {"pipeline_node": merged}
    named = ",".join(name for name in topics if name)  # "": the one unnamed camera
    for name, values in sections.items():
        values["diagnostics_period_seconds"] = diagnostics_s
        if named:  # every node reads the cameras (the scorer keeps a stream per camera)
            values["cameras"] = named
        if name in CAMERA_NODES:
            values.update(camera())
    return {f"/**/{name}": {"ros__parameters": values} for name, values in sections.items()}


class _Diagnostics(brl._Inbox):
    """The latest diagnostics per node, and every "camera frames lost" WARN each said.

    Args:
        cameras: The named cameras, whose WARNs ("camera front: camera frames lost") are
            also counted per camera.

    """

    def __init__(self, cameras: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._cameras = cameras
        self.loss_warnings: dict[str, list[str]] = {}
        self.loss_times: dict[str, list[float]] = {}  # when each came (monotonic)
        self.camera_loss_warnings: dict[str, dict[str, int]] = {}  # node -> camera -> periods

    def on_diag(self, msg: Any) -> None:
        super().on_diag(msg)
        for status in msg.status:
            if "camera frames lost" in status.message:
                name = status.name.split(": ")[-1]
                self.loss_warnings.setdefault(name, []).append(status.message)
                self.loss_times.setdefault(name, []).append(time.monotonic())
                per_camera = self.camera_loss_warnings.setdefault(name, {})
                for camera in self._cameras:
                    if f"camera {camera}: camera frames lost" in status.message:
                        per_camera[camera] = per_camera.get(camera, 0) + 1


def profile_env(profile: str) -> dict[str, str | None]:
    """The profile variables for ``--fastdds-profile`` (None: unset the variable).

    ``shipped``: the installed ``config/fastdds_large_frames.xml``, for this process (the
    camera) and the nodes; ``none``: Fast DDS's defaults (every profile variable unset).
    """
    from ament_index_python.packages import get_package_share_directory

    from surprise_memory.middleware import PROFILE_VARIABLES, profile_variables, shipped_profile

    unset: dict[str, str | None] = dict.fromkeys(PROFILE_VARIABLES)
    if profile == "none":
        return unset
    path = shipped_profile(Path(get_package_share_directory("surprise_memory")) / "config")
    return {**unset, **profile_variables(path, os.environ.get("ROS_DISTRO"))}


def delivery(
    published: dict[str, int],
    diagnostics: _Diagnostics,
    names: tuple[str, ...],
    bare: dict[str, int] | None,
) -> dict[str, dict[str, Any]]:
    """Per camera node: the share of the published frames it took in, against its estimate.

    Args:
        published: Camera name -> frames it published (all after every camera node had
            subscribed); ``""`` the one unnamed camera.
        diagnostics: The nodes' last diagnostics and their loss WARNs.
        names: The node processes.
        bare: Camera name -> frames the bare subscriber counted (None: none ran).

    Returns:
        Node -> ``frames_in``, ``delivered`` (frames_in / published, all cameras), the
        node's own ``received`` and ``lost`` (summed over the cameras), ``estimated``
        (received / (received + lost)), ``loss_warnings`` (how many periods said WARN
        "camera frames lost") and the last such message, and with named cameras
        ``cameras`` (:func:`soak_cameras.camera_delivery`); ``bare_subscriber`` -> its
        count and share (and ``cameras``: name -> its share).

    """
    total = sum(published.values())
    named = {name: sent for name, sent in published.items() if name}
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        if name not in CAMERA_NODES:
            continue
        warnings = diagnostics.loss_warnings.get(name, [])
        frames_in = diagnostics.count(name, "frames_in")
        got: dict[str, Any] = {"frames_in": frames_in}
        if named:
            cameras = camera_delivery(
                named,
                diagnostics.diagnostics.get(name, {}),
                diagnostics.camera_loss_warnings.get(name, {}),
                bare,
            )
            received = sum(c["received"] for c in cameras.values())
            lost = sum(c["lost"] for c in cameras.values())
        else:
            received = diagnostics.count(name, "camera_frames_received")
            lost = diagnostics.count(name, "camera_frames_lost")
        got |= {
            "delivered": frames_in / total if total else float("nan"),
            "received": received,
            "lost": lost,
            "estimated": received / (received + lost) if received + lost else float("nan"),
            "loss_warnings": len(warnings),
            "last_loss_warning": warnings[-1] if warnings else "",
        }
        if named:
            got["cameras"] = cameras
        out[name] = got
    if bare is not None:
        count = sum(bare.values())
        out[BARE] = {"frames_in": count, "delivered": count / total if total else 0.0}
        if named:
            out[BARE]["cameras"] = {
                name: bare.get(name, 0) / sent if sent else 0.0 for name, sent in named.items()
            }
    return out


def run(
    minutes: float,
    fps: float,
    size: tuple[int, int],
    out: Path,
    *,
    sample_s: float = 5.0,
    warmup_s: float = 60.0,
    floor_s: float = 30.0,
    shape: str = "split",
    transport: str = "raw",
    profile: str = "shipped",
    bare_subscriber: bool = False,
    diagnostics_s: float = 2.0,
    camera_depth: int = 0,
    cameras: int = 1,
    camera_processes: bool = False,
    log: Any = None,
) -> dict[str, Any]:
    """Run the soak and return its figures (also written to ``out/soak.json``).

    Run it in a process of its own: Fast DDS reads its profile once per process, at the
    first participant, so ``profile`` reaches this process's camera only if no DDS
    participant was created in it before.

    Args:
        minutes: Length of the run, including the nodes' start and the warm-up.
        fps: Camera rate in Hz.
        size: (width, height) of the published frames.
        out: Folder for soak.json, soak.png, the node logs and the episode store.
        sample_s: Seconds between two RSS samples.
        warmup_s: Samples before this are plotted but not fitted.
        floor_s: Window of the floor (minimum) whose growth is the second figure.
        shape: ``split`` (three nodes) or ``one_process`` (``pipeline_node``).
        transport: ``raw`` (Image rgb8) or ``compressed`` (CompressedImage JPEG).
        profile: ``shipped`` (the package's Fast DDS profile) or ``none`` (defaults).
        bare_subscriber: Also count the frames in a process that does nothing else.
        diagnostics_s: The nodes' ``diagnostics_period_seconds``.
        camera_depth: The camera subscriptions' queue depth (0: sensor-data QoS's 5).
        cameras: How many cameras (1: the unnamed one; more: ``front``, ``left``, ...,
            each its own topic, the nodes given ``cameras``; :mod:`soak_cameras`).
        camera_processes: Each camera publishes from a process of its own (else all
            from this one).
        log: Where progress lines go (a text stream; None = silent).

    Returns:
        Settings, samples, per-node slopes and final RSS, the delivery per camera node,
        and what the nodes did.

    Raises:
        FileNotFoundError: The node executables are not installed.
        RuntimeError: A node or a camera process exited during the run.

    """
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import CompressedImage, Image

    from surprise_memory.middleware import PROFILE_VARIABLES
    from surprise_memory.msg import Episode
    from surprise_memory.nodes.qos import LATCHED

    names = SHAPES[shape]
    out.mkdir(parents=True, exist_ok=True)
    env = os.environ.copy()
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(101, 232)))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    for key, value in profile_env(profile).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", *PROFILE_VARIABLES):
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)
    topics = camera_topics(cameras)
    inbox = _Diagnostics(tuple(name for name in topics if name))
    samples: dict[str, list[float]] = {n: [] for n in names}
    times: list[float] = []
    compressed = transport == "compressed"
    frames = {  # the cameras this process publishes (none with camera_processes)
        name: CameraFrames(size, fps, compressed, seed=7 + i, frame_id=name or "camera")
        for i, name in enumerate(topics)
        if not camera_processes
    }
    subscribers = sum(n in CAMERA_NODES for n in names) + bare_subscriber
    context = Context()
    rclpy.init(context=context)
    node = Node("soak_camera", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    msg_type = CompressedImage if transport == "compressed" else Image
    pubs = (
        {}
        if camera_processes
        else {
            name: node.create_publisher(msg_type, topic, qos_profile_sensor_data)
            for name, topic in topics.items()
        }
    )
    node.create_subscription(DiagnosticArray, "/diagnostics", inbox.on_diag, 50)
    stored_s: list[float] = []  # when each stored episode arrived, seconds from t0
    t0 = time.monotonic()  # (set again when the first frame goes out)
    node.create_subscription(
        Episode, f"{brl.NS}/episodes", lambda _: stored_s.append(time.monotonic() - t0), LATCHED
    )
    published = dict.fromkeys(topics, 0)
    first_frame_s = None
    bare_out = out / f"{BARE}.json"
    bare_cmd = [sys.executable, __file__, "--count-frames", "--transport", transport]
    bare_cmd += ["--cameras", str(cameras), "--out", str(bare_out)]
    helpers: list[subprocess.Popen[bytes]] = []  # the bare subscriber, the camera processes
    try:
        with brl.node_processes(
            out,
            _params(out / "store", shape, transport, diagnostics_s, camera_depth, topics=topics),
            env,
            names=names,
        ) as procs:
            bare = None
            if bare_subscriber:
                bare = _start(bare_cmd, out / f"{BARE}.log", env)
                helpers.append(bare)
            cams = {}
            if camera_processes:
                for i, name in enumerate(topics):
                    cmd = [sys.executable, __file__, "--publish-camera", name or "camera"]
                    cmd += ["--cameras", str(cameras), "--fps", str(fps), "--seed", str(7 + i)]
                    cmd += ["--size", f"{size[0]}x{size[1]}", "--transport", transport]
                    cmd += ["--subscribers", str(subscribers)]
                    cmd += ["--out", str(out / f"camera_{name or 'camera'}.json")]
                    cams[name] = _start(cmd, out / f"camera_{name or 'camera'}.log", env)
                helpers.extend(cams.values())
            pids = dict(zip(names, (p.pid for p in procs), strict=True))
            t0 = time.monotonic()
            next_frame, next_sample = t0, t0
            end = t0 + minutes * 60.0
            stamp0 = time.time_ns()
            while (now := time.monotonic()) < end:
                if any(p.poll() is not None for p in (*procs, *cams.values())):
                    raise RuntimeError(
                        f"a node or camera exited during the soak; see the logs in {out}"
                    )
                if now >= next_sample:
                    times.append(now - t0)
                    for name, pid in pids.items():
                        samples[name].append(rss_mb(pid))
                    if log is not None:
                        rss = ", ".join(f"{n} {samples[n][-1]:.0f}" for n in names)
                        print(f"  t={now - t0:5.0f} s  RSS MiB: {rss}", file=log, flush=True)
                    next_sample += sample_s
                if pubs and now >= next_frame:
                    k = round((next_frame - t0) * fps)  # the camera's schedule
                    # publish once every camera subscriber is there: each frame is for all
                    for name, pub in pubs.items():
                        if published[name] or pub.get_subscription_count() >= subscribers:
                            first_frame_s = now - t0 if first_frame_s is None else first_frame_s
                            pub.publish(frames[name].frame(k, stamp0 + round(k * 1e9 / fps)))
                            published[name] += 1
                    next_frame += 1.0 / fps
                wake = min(next_frame, next_sample) if pubs else next_sample
                executor.spin_once(timeout_sec=max(0.0, min(wake, end) - now))
            for cam in cams.values():  # the cameras stop; their counts are written
                brl.stop_process(cam)
            for name in cams:
                sent = json.loads((out / f"camera_{name or 'camera'}.json").read_text())
                published[name] = sent["published"]
                if sent["first_frame_monotonic"] is not None:
                    first = sent["first_frame_monotonic"] - t0
                    first_frame_s = first if first_frame_s is None else min(first, first_frame_s)
            # the nodes' last word: a whole diagnostics period after the last frame
            settle = time.monotonic() + diagnostics_s + 1.5
            while time.monotonic() < settle:
                executor.spin_once(timeout_sec=0.1)
            if bare is not None:
                brl.stop_process(bare)
    finally:
        for helper in helpers:
            brl.stop_process(helper)
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)

    fit_from, fit_to = fit_window(
        warmup_s, minutes * 60.0, stored_s[0] if stored_s else None, sample_s
    )
    fit = [i for i, t in enumerate(times) if fit_from <= t < fit_to]
    bare_counts = None
    if bare_subscriber:
        counted = json.loads(bare_out.read_text()) if bare_out.exists() else {}
        bare_counts = counted.get("cameras", dict.fromkeys(topics, 0))
    result: dict[str, Any] = {
        "settings": {
            "minutes": minutes,
            "fps": fps,
            "size": list(size),
            "sample_s": sample_s,
            "warmup_s": warmup_s,
            "floor_s": floor_s,
            "shape": shape,
            "transport": transport,
            "fastdds_profile": profile,
            "camera_depth": camera_depth,
            "cameras": [name for name in topics if name],
            "camera_processes": camera_processes,
        },
        "load_average": os.getloadavg(),
        "frames_published": sum(published.values()),
        "frames_published_per_camera": published,
        "first_frame_s": first_frame_s,
        "episodes_stored_s": stored_s,
        "fit_from_s": fit_from,
        "fit_to_s": fit_to,
        "times_s": times,
        "rss_mb": samples,
        "nodes": {},
        "delivery": delivery(published, inbox, names, bare_counts),
        "loss_warnings_s": {n: [t - t0 for t in ts] for n, ts in inbox.loss_times.items()},
        "diagnostics": inbox.diagnostics,
    }
    for name in names:
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


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A helper process (bare subscriber, camera) in ``log``'s folder, its output in ``log``."""
    with open(log, "wb") as stream:
        return subprocess.Popen(cmd, cwd=log.parent, env=env, stdout=stream, stderr=stream)


def _plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    t = np.asarray(result["times_s"]) / 60.0
    for name in result["nodes"]:
        slope = result["nodes"][name]["slope_mb_per_min"]
        ax.plot(t, result["rss_mb"][name], marker=".", label=f"{name} ({slope:+.2f} MB/min)")
    for edge in (result["fit_from_s"], result["fit_to_s"]):  # the fitted span
        ax.axvline(edge / 60.0, color="grey", linestyle=":")
    s = result["settings"]
    ax.set_title(
        f"RSS of the live nodes, {s['fps']:g} Hz {s['size'][0]}x{s['size'][1]} {s['transport']}"
    )
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
    parser.add_argument("--shape", choices=list(SHAPES), default="split")
    parser.add_argument("--transport", choices=("raw", "compressed"), default="raw")
    parser.add_argument("--fastdds-profile", choices=("shipped", "none"), default="shipped")
    parser.add_argument("--bare-subscriber", action="store_true")
    parser.add_argument("--diagnostics-s", type=float, default=2.0)
    parser.add_argument("--camera-depth", type=int, default=0, help="0: sensor-data QoS's 5")
    parser.add_argument(
        "--cameras", type=int, default=1, help="1 (the unnamed camera) to 4: front,left,rear,right"
    )
    parser.add_argument(
        "--camera-processes", action="store_true", help="each camera publishes from its own process"
    )
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    parser.add_argument("--count-frames", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--publish-camera", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=7, help=argparse.SUPPRESS)
    parser.add_argument("--subscribers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    compressed = args.transport == "compressed"
    if args.count_frames:  # the bare subscriber's own process
        count_frames(camera_topics(args.cameras), compressed, args.out)
        return 0
    if args.publish_camera is not None:  # a --camera-processes camera's own process
        name = "" if args.publish_camera == "camera" else args.publish_camera
        publish_camera(
            name,
            camera_topics(args.cameras)[name],
            fps=args.fps,
            size=(width, height),
            compressed=compressed,
            subscribers=args.subscribers,
            seed=args.seed,
            out=args.out,
        )
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="soak_"))
    res = run(
        args.minutes,
        args.fps,
        (width, height),
        out,
        sample_s=args.sample_s,
        warmup_s=args.warmup_s,
        floor_s=args.floor_s,
        shape=args.shape,
        transport=args.transport,
        profile=args.fastdds_profile,
        bare_subscriber=args.bare_subscriber,
        diagnostics_s=args.diagnostics_s,
        camera_depth=args.camera_depth,
        cameras=args.cameras,
        camera_processes=args.camera_processes,
        log=sys.stdout,
    )
    load = ", ".join(f"{v:.1f}" for v in res["load_average"])
    several = (
        f"{args.cameras} cameras ({'a process each' if args.camera_processes else 'one process'}), "
        if args.cameras > 1
        else ""
    )
    print(
        f"soak: {args.minutes:g} min at {args.fps:g} Hz {width}x{height} {args.transport}, "
        f"{several}{args.shape}, Fast DDS profile {args.fastdds_profile}, load {load}, out {out}"
    )
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
    print(f"  {res['frames_published']} frames published from t = {res['first_frame_s']} s")
    for name, got in res["delivery"].items():
        line = f"  {name:15s} took in {got['frames_in']} ({got['delivered']:.1%})"
        if "estimated" in got:
            line += (
                f", its estimate {got['estimated']:.1%} ({got['lost']} lost), "
                f"{got['loss_warnings']} loss WARN(s)"
            )
        print(line)
        for camera, cam in got.get("cameras", {}).items():
            if isinstance(cam, float):  # the bare subscriber's share
                print(f"    {camera:6s} {cam:.1%}")
                continue
            print(
                f"    {camera:6s} {cam['received']} of {cam['published']} "
                f"({cam['delivered']:.1%}), its estimate {cam['estimated']:.1%} "
                f"({cam['lost']} lost, {cam['lost_in_transport']} in transport), "
                f"{cam['loss_warnings']} loss WARN(s)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
