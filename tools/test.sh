#!/usr/bin/env bash
# The README's test command (`make test`, also .ci/run): set up the venv, colcon build,
# lint and type-check, then run the whole test suite against the colcon install, and beside
# it the robot stages (tools/test_robot.sh: Debian 12's system Python;
# tools/test_robot_ubuntu2204.sh: an Ubuntu 22.04-like Python 3.10).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# An apt ROS 2 already sourced (ROS_DISTRO set) is the environment: its python, the pip
# packages of the README's apt path and the pytest on PATH (the one its launch_testing
# accepts). Without it, the venv of PyPI ROS 2 wheels is made or reused.
if [[ -z "${ROS_DISTRO:-}" ]]; then
  bash "$ROOT/tools/setup_venv.sh"
fi
bash "$ROOT/tools/setup_system.sh"
# The robot stages (a robot's system Python with apt's numpy 1.x, the README's robot set-up,
# the ROS-free tests, the demo), only on a full run (with arguments, the caller chose which
# tests to run). The main suite's tests mostly wait (DDS timers, subprocesses, servers,
# Chromium: quiet, one pytest keeps a third of this 2-core machine busy), so it runs in two
# pytest-xdist workers, whole files to each, and the robot stages run one after the other
# beside it: every test has two busy processes beside it, as the suite must pass with anyway.
# They start as soon as the system's packages are in (they use neither the colcon build nor
# the lint), so that the build and the type-check run beside them too: the two stages one
# after the other take about as long as the main suite plus its build and lint, and CI ends
# with the later of the two.
# Measured on a fresh clone (2 cores, 2026-11-30): one pytest with both robot stages beside
# it took 44-47 min (the main suite 42-43, each robot stage 17-18); this way 33 min (the main
# suite 26, the robot stages 15 and 14; alone, the main suite takes 21 in two workers), and
# 30.7 min with the stages started before the build (main suite 26.5, stages 14.5 and 16).
# Their logs are printed after the main suite's, so that each reports even when another fails.
robot=0
jammy=0
if [[ $# -eq 0 ]]; then
  logs="$(mktemp -d)"
  # The robot stages leave out the `slow` tests (the consumers of a 24,576-episode store,
  # about a minute; the index's own recall tests run in every stage; the redaction tests on
  # scikit-image's photographs, requirements/photos.txt, which the robot route does not
  # install; a merge killed in its middle, 30-100 s): the main stage runs them, and CI
  # stays near 30 min
  robot_stage() {  # NAME SCRIPT: the stage's log and exit status land in $logs/NAME.*
    local rc=0
    ROBOT_DEMO=1 bash "$ROOT/tools/$2" -m "not slow" --durations=15 >"$logs/$1.log" 2>&1 || rc=$?
    echo "$rc" >"$logs/$1.rc"
  }
  (robot_stage debian12 test_robot.sh; robot_stage ubuntu2204 test_robot_ubuntu2204.sh) &
  stages=$!
  # a build or lint that fails ends the run: the stages (and their pytest) end with it
  stop_tree() {  # PID: the process and all its descendants
    local child
    for child in $(pgrep -P "$1" || true); do stop_tree "$child"; done
    kill "$1" 2>/dev/null || true
  }
  trap '[[ -n "${stages:-}" ]] && stop_tree "$stages"' EXIT
fi
bash "$ROOT/tools/build.sh"
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [[ -z "${ROS_DISTRO:-}" ]] || { command -v ruff && command -v mypy; } >/dev/null; then
  echo "== ruff"
  ruff check surprise_memory test tools benchmarks launch scripts doc
  ruff format --check surprise_memory test tools benchmarks launch scripts doc
  echo "== mypy"
  mypy surprise_memory benchmarks  # one run: the benchmarks import the package
else  # lint is the venv's job (requirements/dev.txt); an apt ROS shell may not have it
  echo "== ruff, mypy: not on PATH, lint skipped (pip install -r requirements/test.txt)"
fi
echo "== pytest ($(command -v pytest))"
# `pytest`, not `python -m pytest`: the latter puts the repo root on sys.path, and the source
# tree (which lacks the generated msg/srv modules) would shadow the colcon install.
main=0
options=()
if [[ $# -eq 0 ]]; then
  options+=(--durations=25)  # a full run lists its slowest tests: where CI's 30 minutes go
  # two workers where pytest-xdist is installed (requirements/test.txt; an apt ROS shell
  # may lack it, and then the suite runs in one process, as a robot's pytest would)
  if pytest -p xdist --version >/dev/null 2>&1; then
    options+=(-n 2 --dist loadfile)
  fi
fi
pytest "${options[@]}" "$@" || main=$?
if [[ $# -eq 0 ]]; then
  wait "$stages"
  stages=""
  robot="$(cat "$logs/debian12.rc")"
  echo "== robot stage, Debian 12 (tools/test_robot.sh), run beside the main suite: exit $robot"
  cat "$logs/debian12.log"
  jammy="$(cat "$logs/ubuntu2204.rc")"
  echo "== robot stage, Ubuntu 22.04-like (tools/test_robot_ubuntu2204.sh), run beside" \
    "the main suite: exit $jammy"
  cat "$logs/ubuntu2204.log"
  rm -r "$logs"
fi
for rc in "$main" "$robot" "$jammy"; do
  ((rc == 0)) || exit "$rc"
done
