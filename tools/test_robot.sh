#!/usr/bin/env bash
# CI's robot stage (tools/test.sh runs it after the main suite): a robot's Python, emulated
# by Debian's own system Python with Debian's apt packages of numpy (1.x), PyYAML, Pillow,
# matplotlib and OpenCV and its EXTERNALLY-MANAGED marker left in place; then the README's
# robot set-up step, as written there, in a workspace laid out as there; then the ROS-free
# part of the suite (`pytest --ros-free`, test/ros_free.py) under the venv it made. The ROS 2
# wheels on PyPI need numpy 2, so what needs ROS 2 runs in the main stage only.
#
# Needs root where the apt packages are missing (Debian/Ubuntu). The workspace (and its
# venv, reused while nothing changed) lives in $SURPRISE_MEMORY_ROBOT_WS, default
# ~/.cache/surprise_memory/robot_ws; never the project's own venv. Arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WS="${SURPRISE_MEMORY_ROBOT_WS:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/robot_ws}"
SYSTEM_PYTHON=/usr/bin/python3
# what rosdep installs for package.xml's python3-* keys, python3-venv for the set-up step
APT_PACKAGES=(python3-venv python3-numpy python3-yaml python3-pil python3-matplotlib
  python3-opencv python3-pytest)
start=$SECONDS

# a robot's shell: nothing of the main stage's venv, colcon install or PyPI ROS 2
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH \
  LD_LIBRARY_PATH PYTHONSAFEPATH

if ! command -v dpkg-query >/dev/null || [[ ! -x "$SYSTEM_PYTHON" ]]; then
  echo "robot stage: needs Debian/Ubuntu with $SYSTEM_PYTHON (a robot's system Python)" >&2
  exit 1
fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ "$(id -u)" != "0" ]]; then
    echo "robot stage: missing ${missing[*]}; sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "robot stage: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

marker="$("$SYSTEM_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')/EXTERNALLY-MANAGED"
system_packages() {  # what the system Python has, to show that the set-up wrote nothing there
  "$SYSTEM_PYTHON" -c 'from importlib import metadata as m
print(sorted((d.metadata["Name"], d.version) for d in m.distributions()))'
}
before="$(system_packages)"
system_numpy="$("$SYSTEM_PYTHON" -c 'import numpy; print(numpy.__version__)')"
echo "robot stage: $SYSTEM_PYTHON $("$SYSTEM_PYTHON" -V 2>&1 | cut -d' ' -f2), numpy $system_numpy," \
  "$([[ -f "$marker" ]] && echo "marked externally managed" || echo "no EXTERNALLY-MANAGED marker")"

# the README's steps, in a workspace laid out as there (~/ros2_ws/src/surprise_memory)
mkdir -p "$WS/src"
ln -sfn "$ROOT" "$WS/src/surprise_memory"
cd "$WS"
bash src/surprise_memory/tools/setup_robot.sh venv
set +u  # venv's activate reads unset variables on some Pythons
# shellcheck disable=SC1091
source venv/bin/activate
set -u

# the optional parts as the README installs them: a fleet's PostgreSQL client, the memory
# browser, Ray
for extra in store browser ray; do
  pip install -q -c venv/surprise_memory-constraints.txt -r "src/surprise_memory/requirements/$extra.txt" \
    2>&1 | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
done
# test-only, under the same constraints: requirements/test.txt's tools the tests use (the
# PostgreSQL server, Sphinx for the docs test), not its pytest (Debian's is the robot's),
# linters or stubs
mapfile -t test_tools < <(grep -vE '^\s*(#|$)|^(pytest|ruff|mypy|types-)' "$ROOT/requirements/test.txt")
pip install -q -c venv/surprise_memory-constraints.txt "${test_tools[@]%%#*}" 2>&1 \
  | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }

# after every install of the stage: the system's numpy, the system Python untouched
venv_numpy="$(python -c 'import numpy; print(numpy.__version__, numpy.__file__)')"
echo "robot stage: the robot venv's numpy.__version__ = ${venv_numpy}"
if [[ "${venv_numpy%% *}" != "$system_numpy" ]]; then
  echo "robot stage: FAILED: the venv's numpy is not the system's ($system_numpy)" >&2
  exit 1
fi
if [[ "$(system_packages)" != "$before" ]]; then
  echo "robot stage: FAILED: the set-up changed the system Python's packages" >&2
  exit 1
fi
echo "robot stage: set up in $((SECONDS - start)) s; pytest $(python -m pytest --version 2>&1 | cut -d' ' -f2)"

# the package from the checkout, on PYTHONPATH as a colcon install would put it there (the
# ROS-free core needs no build; tests run commands in subprocesses too)
export PYTHONPATH="$ROOT"
cd "$ROOT"
python -m pytest --ros-free "$@"
echo "robot stage: done in $((SECONDS - start)) s"
