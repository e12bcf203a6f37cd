"""The core never imports rclpy: it must install and run without ROS."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import surprise_memory

CORE_MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(surprise_memory.__path__)
    if m.name not in {"msg", "srv", "nodes", "client"} and not m.name.startswith("_")
)


def test_core_modules_do_not_import_rclpy(tmp_path: Path) -> None:
    assert {"config", "errors", "gate", "robust", "surprise"} <= set(CORE_MODULES)
    code = (
        "import importlib, sys\n"
        f"for name in {CORE_MODULES!r}:\n"
        "    importlib.import_module('surprise_memory.' + name)\n"
        "roots = {m.split('.')[0] for m in sys.modules}\n"
        "bad = sorted(roots & {'rclpy', 'rosidl_runtime_py', 'rosidl_parser'})\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
