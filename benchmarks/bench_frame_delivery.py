"""Camera frames delivered to the live nodes, with and without the shipped Fast DDS profile.

Run (venv active and the colcon install sourced, ``install/setup.bash``)::

    python benchmarks/bench_frame_delivery.py [--minutes 2.5] [--fps 30]
        [--sizes 640x480 1280x720] [--shapes split one_process]
        [--transports raw compressed] [--profiles shipped none] [--cameras 1 3]
        [--camera-processes] [--out DIR]

Each combination is one run of ``benchmarks/soak_nodes.py`` in a process of its own (Fast
DDS reads its profile once per process): the nodes of the shape (``encoder_node``,
``scorer_node``, ``memory_node``, or ``pipeline_node``) and a bare subscriber that only
counts frames, a camera publishing rgb8 ``Image`` or JPEG ``CompressedImage`` at ``--fps``
with sensor-data QoS once every camera subscriber is there. ``shipped`` gives the camera's
process and the nodes ``config/fastdds_large_frames.xml``; ``none`` is Fast DDS's defaults.
Per run and camera node: the share of the published frames it took in, its own estimate
(``/diagnostics``: received / (received + lost)), the share it put down to transport, and
the bare subscriber's share (transport alone: what a node lost beyond it, a busy CPU
took). The machine's load average is printed with every row: on a shared machine a node
starved of CPU loses frames in its own queue, which the bare subscriber's column tells
apart from the middleware's loss.

``--cameras 1 3`` runs each combination with one camera (the unnamed one, as before) and
with three (``front``, ``left``, ``rear``, each its own topic at ``--fps``, the nodes given
``cameras: front,left,rear``): a row per node and camera, its share of that camera's
frames by the node's per-camera ``/diagnostics`` (``front.camera_frames_received``).
``--camera-processes``: each camera publishes from a process of its own, as a robot's
drivers do (else all from the soak's process).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run_one(
    out: Path,
    *,
    minutes: float,
    fps: float,
    size: str,
    shape: str,
    transport: str,
    profile: str,
    cameras: int = 1,
    camera_processes: bool = False,
) -> dict[str, Any]:
    """One soak run in its own process; its soak.json (``{"error": ...}`` if it failed)."""
    cmd = [sys.executable, str(HERE / "soak_nodes.py"), "--minutes", str(minutes)]
    cmd += ["--fps", str(fps), "--size", size, "--shape", shape, "--transport", transport]
    cmd += ["--fastdds-profile", profile, "--bare-subscriber", "--warmup-s", "0"]
    cmd += ["--cameras", str(cameras), "--out", str(out)]
    if camera_processes:
        cmd.append("--camera-processes")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": (proc.stdout + proc.stderr)[-2000:]}
    return dict(json.loads((out / "soak.json").read_text()))


def rows(result: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(node, delivered, estimated, in transport, bare) per camera node of a run.

    With several cameras a row per node and camera (``encoder_node front``): its share of
    that camera's frames, its estimate, and the bare subscriber's share of them.
    """
    if "error" in result:
        return [("error", "", "", "", result["error"].splitlines()[-1][:60])]
    if not result["frames_published"]:  # the nodes were not up before the run ended
        return [("no frames", "", "", "", "nodes not subscribed in time: longer --minutes")]
    delivery = result["delivery"]
    bare = delivery.get("bare_subscriber", {}).get("delivered")
    out = []
    for name, got in delivery.items():
        if name == "bare_subscriber":
            continue
        if "cameras" in got:
            out += [
                _row(f"{name} {camera}", cam, cam["lost_in_transport"], cam["bare"])
                for camera, cam in got["cameras"].items()
            ]
            continue
        diag = result["diagnostics"].get(name, {})
        transport = int(diag.get("camera_frames_lost_in_transport", 0) or 0)
        out.append(_row(name, got, transport, bare))
    return out


def _row(
    name: str, got: dict[str, Any], in_transport: int, bare: float | None
) -> tuple[str, str, str, str, str]:
    lost = int(got["lost"]) or 1
    return (
        name,
        f"{got['delivered']:.1%}",
        f"{got['estimated']:.1%}",
        f"{min(in_transport / lost, 1.0):.0%} of lost" if got["lost"] else "-",
        "" if bare is None else f"{bare:.1%}",
    )


def main(argv: list[str] | None = None) -> int:
    """Run every combination and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.5, help="per run, start included")
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720"])
    parser.add_argument("--shapes", nargs="+", default=["split", "one_process"])
    parser.add_argument("--transports", nargs="+", default=["raw", "compressed"])
    parser.add_argument("--profiles", nargs="+", default=["shipped", "none"])
    parser.add_argument(
        "--cameras", nargs="+", type=int, default=[1], help="cameras per run (1 to 4)"
    )
    parser.add_argument(
        "--camera-processes", action="store_true", help="each camera publishes from its own process"
    )
    parser.add_argument("--out", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="frame_delivery_"))
    print(
        f"frame delivery: {args.minutes:g} min per run at {args.fps:g} Hz; "
        f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"ROS_DISTRO={os.environ.get('ROS_DISTRO', 'none (PyPI Kilted wheels)')}; "
        f"camera publishers: {'a process each' if args.camera_processes else 'one process'}; "
        f"out {out}",
        flush=True,
    )
    header: tuple[str, ...] = ("cameras", "size", "transport", "shape", "profile", "node")
    header += ("took in",)
    header += ("its estimate", "in transport", "bare subscriber", "load 1/5 min")
    print(" | ".join(header), flush=True)
    results = []
    for cameras, size, transport, shape, profile in itertools.product(
        args.cameras, args.sizes, args.transports, args.shapes, args.profiles
    ):
        name = f"{cameras}cam_{size}_{transport}_{shape}_{profile}"
        res = run_one(
            out / name,
            minutes=args.minutes,
            fps=args.fps,
            size=size,
            shape=shape,
            transport=transport,
            profile=profile,
            cameras=cameras,
            camera_processes=args.camera_processes,
        )
        load = res.get("load_average", [float("nan")] * 3)
        for row in rows(res):
            cells = (str(cameras), size, transport, shape, profile, *row)
            print(" | ".join((*cells, f"{load[0]:.1f}/{load[1]:.1f}")), flush=True)
        results.append(
            {"cameras": cameras, "size": size, "transport": transport, "shape": shape, **res}
        )
    (out / "frame_delivery.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
