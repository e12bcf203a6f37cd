#!/usr/bin/env bash
# CI's robot stages (tools/test.sh runs them beside the main suite): a robot's Python, then
# the README's robot set-up step, as written there, in a workspace laid out as there; the
# optional lines of doc/guides/robot-setup.md (PostgreSQL client, browser, Ray) and the test
# tools; then the ROS-free part of the suite (`pytest --ros-free`, test/ros_free.py) and the
# offline demo under the venv it made. The ROS 2 wheels on PyPI need numpy 2, so what needs
# ROS 2 runs in the main stage only.
#
# The robot's Python is $ROBOT_PYTHON, as for tools/setup_robot.sh. By default it is
# Debian's own system Python with Debian's apt packages of numpy (1.x), PyYAML, Pillow,
# matplotlib and OpenCV and its EXTERNALLY-MANAGED marker left in place (the Debian 12
# stage; needs root where the apt packages are missing); tools/test_robot_ubuntu2204.sh
# passes an Ubuntu 22.04-like one (and ROBOT_PLATFORM_COLUMN: the column of the platform
# table in doc/guides/robot-setup.md that must equal what this stage installed). The
# workspace (and its venv, reused while nothing changed) lives in $SURPRISE_MEMORY_ROBOT_WS,
# default ~/.cache/surprise_memory/robot_ws; never the project's own venv. Arguments go to
# pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WS="${SURPRISE_MEMORY_ROBOT_WS:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/robot_ws}"
SYSTEM_PYTHON="${ROBOT_PYTHON:-/usr/bin/python3}"
STAGE="${ROBOT_STAGE:-robot stage}"
COLUMN="${ROBOT_PLATFORM_COLUMN:-}"
# what rosdep installs for package.xml's python3-* keys, python3-venv for the set-up step
# (test_robot_install.py checks this list against package.xml)
APT_PACKAGES=(python3-venv python3-numpy python3-yaml python3-pil python3-matplotlib
  python3-opencv python3-pytest)
start=$SECONDS

# a robot's shell: nothing of the main stage's venv, colcon install or PyPI ROS 2
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV AMENT_PREFIX_PATH CMAKE_PREFIX_PATH COLCON_PREFIX_PATH \
  LD_LIBRARY_PATH PYTHONSAFEPATH
export ROBOT_PYTHON="$SYSTEM_PYTHON"  # the set-up step's Python

if [[ ! -x "$SYSTEM_PYTHON" ]]; then
  echo "$STAGE: no $SYSTEM_PYTHON (a robot's system Python)" >&2
  exit 1
fi
missing=()
if [[ "$SYSTEM_PYTHON" == /usr/bin/python3 ]]; then  # the system's: its packages from apt
  command -v dpkg-query >/dev/null || { echo "$STAGE: needs Debian/Ubuntu" >&2; exit 1; }
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
fi
if ((${#missing[@]})); then
  if [[ "$(id -u)" != "0" ]]; then
    echo "$STAGE: missing ${missing[*]}; sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "$STAGE: apt-get install ${missing[*]}"
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
echo "$STAGE: $SYSTEM_PYTHON $("$SYSTEM_PYTHON" -V 2>&1 | cut -d' ' -f2), numpy $system_numpy," \
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

# the optional parts as doc/guides/robot-setup.md installs them: a fleet's PostgreSQL client,
# the memory browser, Ray, the MCP server (on Python 3.10 their `; python_version < "3.11"` pins)
for extra in store browser ray agents; do
  pip install -q -c venv/surprise_memory-constraints.txt -r "src/surprise_memory/requirements/$extra.txt" \
    2>&1 | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
done
# test-only, under the same constraints: requirements/test.txt's tools the tests use (the
# PostgreSQL server, Sphinx for the docs test), not its pytest (the robot's, or where that
# is older than the tests need, the one the set-up step installed), linters or stubs
mapfile -t test_tools < <(grep -vE '^\s*(#|$)|^(pytest|ruff|mypy|types-)' "$ROOT/requirements/test.txt")
pip install -q -c venv/surprise_memory-constraints.txt "${test_tools[@]%%#*}" 2>&1 \
  | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }

# after every install of the stage: the system's numpy, the system Python untouched
venv_numpy="$(python -c 'import numpy; print(numpy.__version__, numpy.__file__)')"
echo "$STAGE: the robot venv's numpy.__version__ = ${venv_numpy}"
if [[ "${venv_numpy%% *}" != "$system_numpy" ]]; then
  echo "$STAGE: FAILED: the venv's numpy is not the system's ($system_numpy)" >&2
  exit 1
fi
if [[ "$(system_packages)" != "$before" ]]; then
  echo "$STAGE: FAILED: the set-up changed the system Python's packages" >&2
  exit 1
fi
# the encoder's model class imports (transformers needs Pillow >= 9.1: Image.Resampling)
python -c 'from transformers import VJEPA2Model'
echo "$STAGE: set up in $((SECONDS - start)) s; pytest $(python -m pytest --version 2>&1 | cut -d' ' -f2)"
if [[ -n "$COLUMN" ]]; then  # the guide's platform table says what this stage installed
  python "$ROOT/tools/platform_table.py" check --column "$COLUMN" "$ROOT/doc/guides/robot-setup.md"
fi

# the package from the checkout, on PYTHONPATH as a colcon install would put it there (the
# ROS-free core needs no build; tests run commands in subprocesses too)
export PYTHONPATH="$ROOT" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$ROOT"
tests=0
python -m pytest --ros-free "$@" || tests=$?
# the offline demo (make demo's pipeline): on a full run, or where the caller asks for it
# (ROBOT_DEMO=1: CI's stages, which pass pytest a marker and still want it)
if [[ "${ROBOT_DEMO:-$(($# == 0))}" == 1 ]]; then
  python -m surprise_memory.offline.demo --out "$WS/demo_output"
fi
echo "$STAGE: done in $((SECONDS - start)) s"
exit "$tests"
