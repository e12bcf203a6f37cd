"""rosbag2_interfaces/srv/Snapshot for the tests: rosbag2's own, or a stand-in of its shape.

rosbag2 is not on PyPI: where it is not installed, :func:`snapshot_env` builds
``test/fixtures/rosbag2_interfaces`` (only ``srv/Snapshot.srv``, as rosbag2's) with colcon
once into the cache (about 12 s; rebuilt when its files change) and returns the environment
in which it imports. Processes started with that environment (the memory node, the
recorder stand-in) talk over the same type as on a robot. The stand-in's install is merged,
one prefix with its own ``local_setup.bash`` as ``/opt/ros/<distro>`` is, so the launcher's
test builds a workspace over it as an underlay (:func:`stand_in_install`).

ROS-free (colcon runs in a subprocess): the robot stages collect the modules that import it.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

_SOURCE = Path(__file__).parent / "fixtures" / "rosbag2_interfaces"
_LAYOUT = b"merge-install"  # part of the cache's key: a cache of another layout is not reused


def colcon_build_command(source: Path, work: Path, install: Path, *more: str) -> list[str]:
    """``colcon build`` of the packages under ``source`` into ``install``, with its log and
    build folders in ``work``, for this interpreter and without the packages' tests."""
    return [
        "colcon", "--log-base", str(work / "log"), "build", "--base-paths", str(source),
        "--build-base", str(work / "build"), "--install-base", str(install), *more,
        "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF",
    ]  # fmt: skip


def _cache_dir() -> Path:
    digest = hashlib.sha256(_LAYOUT)
    for path in sorted(p for p in _SOURCE.rglob("*") if p.is_file()):
        digest.update(path.relative_to(_SOURCE).as_posix().encode())
        digest.update(path.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "surprise_memory" / f"test_rosbag2_interfaces-{digest.hexdigest()[:12]}"


def stand_in_install() -> Path:
    """The stand-in's merged install prefix, built once into the cache (a lock keeps two
    test processes from building it into the same folder at once)."""
    base = _cache_dir()
    install = base / "install"
    done_mark = base / "built"
    base.parent.mkdir(parents=True, exist_ok=True)
    with base.with_name(base.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done_mark.is_file():
            work = base.with_name(base.name + f".tmp{os.getpid()}")
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(install, ignore_errors=True)  # a build killed before its mark
            cmd = colcon_build_command(_SOURCE, work, install, "--merge-install")
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            assert done.returncode == 0, f"building the Snapshot stand-in failed:\n{done.stdout}"
            shutil.rmtree(work, ignore_errors=True)
            done_mark.write_text("colcon build finished\n")
    return install


def snapshot_env() -> dict[str, str]:
    """An environment in which ``rosbag2_interfaces.srv.Snapshot`` imports."""
    if importlib.util.find_spec("rosbag2_interfaces") is not None:
        return os.environ.copy()  # rosbag2 installed (a robot): the real type
    # local_setup, not setup: setup.bash would also source the workspaces that were sourced
    # when the cache was built (another checkout's install), ahead of this run's own
    setup = stand_in_install() / "local_setup.bash"
    out = subprocess.run(
        ["bash", "-c", f'source "{setup}" && env -0'], capture_output=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.decode().split("\0") if "=" in line)
