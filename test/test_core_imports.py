"""The core never imports rclpy: it must install and run without ROS."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import surprise_memory

# the ROS side: generated interfaces (the test action too), the nodes, and the service client
ROS_MODULES = {"msg", "srv", "action", "nodes", "agents.ros_client", "agents.ros_navigation"}

CORE_MODULES = sorted(
    m.name.removeprefix("surprise_memory.")
    for m in pkgutil.walk_packages(surprise_memory.__path__, "surprise_memory.")
    if not any(
        m.name == f"surprise_memory.{r}" or m.name.startswith(f"surprise_memory.{r}.")
        for r in ROS_MODULES
    )
    and not m.name.rsplit(".", 1)[-1].startswith("_")
)


def test_core_modules_do_not_import_rclpy(tmp_path: Path) -> None:
    assert {
        "config",
        "errors",
        "stamps",
        "surprise.gate",
        "surprise.robust",
        "surprise.scorer",
        "memory.store",
        "agents.tool",
    } <= set(CORE_MODULES)
    code = (
        "import importlib, sys\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    importlib.import_module('surprise_memory.' + name)\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "bad = sorted(roots & {'rclpy', 'rosidl_runtime_py', 'rosidl_parser'})\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
