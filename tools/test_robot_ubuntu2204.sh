#!/usr/bin/env bash
# CI's second robot stage (tools/test.sh runs it after the Debian 12 one): an Ubuntu 22.04
# robot (ROS 2 Humble, JetPack 6), emulated. Its system Python is a copy of pyenv's Python
# 3.10 (the version 22.04 ships), made once, into which 22.04's apt versions are installed
# as apt puts them there: numpy 1.21.5, Pillow 9.0.1, PyYAML 5.4.1, matplotlib 3.5.1 and its
# dependencies, OpenCV 4.5.4 (cv2 without pip metadata, as python3-opencv has it), pytest
# 6.2.5, pip 22.0.2, and 22.04's pip 22.0.2 / setuptools 59.6 as what `python -m venv` seeds
# (python3-pip-whl). A copy, not a venv: the robot venv made over a venv would not see its
# base's packages. Then tools/test_robot.sh with ROBOT_PYTHON pointing at it: the README's
# robot steps as written, the optional lines, the ROS-free tests and the demo.
#
# The workspace is $SURPRISE_MEMORY_ROBOT_WS-ubuntu2204 (default
# ~/.cache/surprise_memory/robot_ws-ubuntu2204), the interpreter in its system-python/;
# both are reused while this script and pyenv's Python are unchanged. Arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BASE="${SURPRISE_MEMORY_ROBOT_WS:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/robot_ws}"
WS="$BASE-ubuntu2204"
PYENV_PYTHON="${PYENV_ROOT:-$HOME/.pyenv}/versions/3.10.13"
SYSTEM="$WS/system-python"
# Ubuntu 22.04's (jammy, jammy-updates) apt packages of what package.xml's rosdep keys and
# python3-venv bring, at their versions; matplotlib's and pytest's dependencies too
APT_VERSIONS=(numpy==1.21.5 Pillow==9.0.1 matplotlib==3.5.1 cycler==0.11.0 fonttools==4.29.1
  kiwisolver==1.3.2 packaging==21.3 pyparsing==2.4.7 python-dateutil==2.8.1 six==1.16.0
  pytest==6.2.5 attrs==21.2.0 iniconfig==1.1.1 pluggy==0.13.0 py==1.10.0 toml==0.10.2)
APT_PYYAML=PyYAML==5.4.1   # no cp310 wheel on PyPI: built once from its sdist (Cython < 3)
APT_OPENCV=opencv-python-headless==4.5.4.60
APT_PIP=(pip==22.0.2 setuptools==59.6.0)

unset PYTHONPATH PYTHONHOME VIRTUAL_ENV PIP_REQUIRE_VIRTUALENV
if [[ ! -x "$PYENV_PYTHON/bin/python3.10" ]]; then
  echo "robot stage 22.04: needs pyenv's Python 3.10.13 in $PYENV_PYTHON" >&2
  exit 1
fi
make_system_python() {
  echo "robot stage 22.04: making the robot's system Python in $SYSTEM (once)"
  rm -rf "$SYSTEM" "$WS/venv"  # a new interpreter: the venv over the old one goes too
  mkdir -p "$WS"
  cp -a "$PYENV_PYTHON" "$SYSTEM"
  touch "$WS/COLCON_IGNORE"
  py="$SYSTEM/bin/python3.10"
  pip_q() {  # this machine's pip config may name local index folders that lack packages
    "$py" -m pip --disable-pip-version-check "$@" 2>&1 \
      | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
  }
  wheels="$WS/wheels"
  mkdir -p "$wheels"
  # the sdist's build needs Cython < 3 (its setup.py predates Cython 3)
  if ! compgen -G "$wheels/[Pp]y[Yy][Aa][Mm][Ll]-5.4.1-*.whl" >/dev/null; then
    echo "cython<3" > "$wheels/build-constraints.txt"
    PIP_CONSTRAINT="$wheels/build-constraints.txt" pip_q wheel -q --no-deps -w "$wheels" "$APT_PYYAML"
  fi
  pip_q install -q --no-deps "${APT_PIP[@]}"
  pip_q install -q --no-deps "${APT_VERSIONS[@]}" "$wheels"/[Pp]y[Yy][Aa][Mm][Ll]-5.4.1-*.whl "$APT_OPENCV"
  site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rm -r "$site"/opencv_python_headless-*.dist-info  # python3-opencv: cv2 without pip metadata
  # what `python3 -m venv` seeds on 22.04 (python3-pip-whl, python3-setuptools-whl)
  bundled="$SYSTEM/lib/python3.10/ensurepip/_bundled"
  rm -f "$bundled"/*.whl
  pip_q download -q --no-deps -d "$bundled" "${APT_PIP[@]}"
  sed -i -e 's/^_PIP_VERSION = .*/_PIP_VERSION = "22.0.2"/' \
    -e 's/^_SETUPTOOLS_VERSION = .*/_SETUPTOOLS_VERSION = "59.6.0"/' "$SYSTEM/lib/python3.10/ensurepip/__init__.py"
}

start=$SECONDS
# made again when the recipe (the function above, the versions) or pyenv's Python changed
want="$({ declare -f make_system_python; echo "${APT_VERSIONS[*]} $APT_PYYAML $APT_OPENCV ${APT_PIP[*]}"
  "$PYENV_PYTHON/bin/python3.10" -VV; } | sha256sum | cut -d' ' -f1)"
if [[ ! -f "$SYSTEM/.stamp" || "$(cat "$SYSTEM/.stamp")" != "$want" ]]; then
  make_system_python
  echo "$want" > "$SYSTEM/.stamp"
  echo "robot stage 22.04: system Python made in $((SECONDS - start)) s"
fi
"$SYSTEM/bin/python3" -c 'import sys, cv2, numpy, PIL, yaml, matplotlib, pytest
from importlib import metadata as m
print("robot stage 22.04: Python", sys.version.split()[0], "with numpy", numpy.__version__,
      "Pillow", PIL.__version__, "PyYAML", yaml.__version__, "matplotlib", matplotlib.__version__,
      "cv2", cv2.__version__, "(pip metadata: %s)" % ("opencv-python-headless" in
      {d.metadata["Name"] for d in m.distributions()}), "pytest", pytest.__version__)'

ROBOT_PYTHON="$SYSTEM/bin/python3" SURPRISE_MEMORY_ROBOT_WS="$WS" ROBOT_STAGE="robot stage 22.04" \
  ROBOT_PLATFORM_COLUMN="Ubuntu 22.04" \
  bash "$ROOT/tools/test_robot.sh" "$@"
