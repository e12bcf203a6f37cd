"""What every benchmark prints first: the machine, the versions, and that as a header.

Shared by :mod:`run_all` (the whole suite) and the single-purpose benchmarks it runs
(:mod:`bench_browser`, :mod:`bench_ray`), which import it; it imports none of them, so the
harness has one direction.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["header", "machine", "versions"]


def machine() -> dict[str, Any]:
    """CPU model, cores, RAM, GPU, load."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_gib = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = round(int(line.split()[1]) / 2**20, 1)
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram_gib,
        "os": platform.platform(),
        "load_avg_start": os.getloadavg(),
    }
    with contextlib.suppress(Exception):
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["gpu"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return info


def versions() -> dict[str, str]:
    """Versions of everything the figures depend on."""

    def dist(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "missing"

    out = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": dist("torch"),
        "transformers": dist("transformers"),
        "open_clip": dist("open_clip_torch"),
        "pillow": dist("pillow"),
        "rclpy": dist("rclpy"),
        "ros_distro": os.environ.get("ROS_DISTRO", "")
        or f"unset (rclpy from the ros-rclpy {dist('ros-rclpy')} wheel)",
        "rmw": os.environ.get("RMW_IMPLEMENTATION", "default (rmw_fastrtps_cpp)"),
        "sqlite": sqlite3.sqlite_version,
        "usearch": dist("usearch"),
        "rosbags": dist("rosbags"),
        "scenedetect": dist("scenedetect"),
        "opencv": dist("opencv-python"),
        "starlette": dist("starlette"),
        "uvicorn": dist("uvicorn"),
    }
    with contextlib.suppress(Exception):
        import surprise_memory

        out["surprise_memory"] = f"{Path(surprise_memory.__file__).parent}"
    return out


def header(mach: dict[str, Any], vers: dict[str, str], quick: bool) -> str:
    """The machine and versions, a few lines."""
    load = mach.get("load_avg_start")
    return "\n".join(
        [
            f"mode: {'quick' if quick else 'full'}; {time.strftime('%Y-%m-%d %H:%M %Z')}",
            f"machine: {mach['cpu']}, {mach['cores']} cores, {mach['ram_gib']} GiB RAM, "
            f"torch threads {mach.get('torch_threads')}, GPU {mach.get('gpu')}; "
            f"load average at start {', '.join(f'{x:.2f}' for x in load or ())}",
            "versions: " + ", ".join(f"{k} {v}" for k, v in vers.items() if k != "surprise_memory"),
            f"package: {vers.get('surprise_memory')}",
        ]
    )
