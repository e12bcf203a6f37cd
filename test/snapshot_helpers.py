"""rosbag2_interfaces/srv/Snapshot for the tests: rosbag2's own, or a stand-in of its shape.

rosbag2 is not on PyPI: where it is not installed, :func:`snapshot_env` builds
``test/fixtures/rosbag2_interfaces`` (only ``srv/Snapshot.srv``, as rosbag2's) with colcon
once into the cache (about 12 s; rebuilt when its files change) and returns the environment
in which it imports. Processes started with that environment (the memory node, the
recorder stand-in) talk over the same type as on a robot.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ros_helpers import FIXTURES

_SOURCE = FIXTURES / "rosbag2_interfaces"


def _cache_dir() -> Path:
    digest = hashlib.sha256()
    for path in sorted(p for p in _SOURCE.rglob("*") if p.is_file()):
        digest.update(path.relative_to(_SOURCE).as_posix().encode())
        digest.update(path.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "surprise_memory" / f"test_rosbag2_interfaces-{digest.hexdigest()[:12]}"


def snapshot_env() -> dict[str, str]:
    """An environment in which ``rosbag2_interfaces.srv.Snapshot`` imports."""
    if importlib.util.find_spec("rosbag2_interfaces") is not None:
        return os.environ.copy()  # rosbag2 installed (a robot): the real type
    base = _cache_dir()
    # local_setup, not setup: setup.bash would also source the workspaces that were sourced
    # when the cache was built (another checkout's install), ahead of this run's own
    setup = base / "install" / "local_setup.bash"
    done_mark = base / "built"
    if not done_mark.is_file():
        tmp = base.with_name(base.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            "colcon", "--log-base", str(tmp / "log"), "build",
            "--base-paths", str(_SOURCE),
            "--build-base", str(tmp / "build"), "--install-base", str(base / "install"),
            "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"building the Snapshot stand-in failed:\n{done.stdout}"
        shutil.rmtree(tmp, ignore_errors=True)
        done_mark.write_text("colcon build finished\n")
    out = subprocess.run(
        ["bash", "-c", f'source "{setup}" && env -0'], capture_output=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.decode().split("\0") if "=" in line)
