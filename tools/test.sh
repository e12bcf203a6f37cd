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
# The robot stages (a robot's system Python with apt's numpy 1.x, the README's robot set-up,
# the ROS-free tests, the demo), only on a full run (with arguments, the caller chose which
# tests to run). They run beside the main suite, not after it: the three pytest processes
# often wait (DDS timers, subprocesses, servers, Chromium), and the suite is to pass with
# two CPU-bound processes beside it anyway. Measured on a fresh clone (2 cores): one after
# another, 34 minutes (the main suite 26, the robot stages 6.5 after it); beside it, 30 (the
# main suite 29, each robot stage 10). Their logs are printed after the main suite's, so
# that each reports even when another fails.
robot=0
jammy=0
if [[ $# -eq 0 ]]; then
  logs="$(mktemp -d)"
  # The robot stages leave out the `slow` tests (the consumers of a 24,576-episode store,
  # about a minute; the index's own recall tests run in every stage): the main stage runs
  # them, and CI stays in 30 min
  bash "$ROOT/tools/test_robot.sh" -m "not slow" >"$logs/debian12.log" 2>&1 &
  debian12=$!
  bash "$ROOT/tools/test_robot_ubuntu2204.sh" -m "not slow" >"$logs/ubuntu2204.log" 2>&1 &
  ubuntu2204=$!
fi
echo "== pytest ($(command -v pytest))"
# `pytest`, not `python -m pytest`: the latter puts the repo root on sys.path, and the source
# tree (which lacks the generated msg/srv modules) would shadow the colcon install.
main=0
# a full run lists its slowest tests: where CI's 30 minutes go
durations=()
[[ $# -eq 0 ]] && durations=(--durations=25)
pytest "${durations[@]}" "$@" || main=$?
if [[ $# -eq 0 ]]; then
  wait "$debian12" || robot=$?
  echo "== robot stage, Debian 12 (tools/test_robot.sh), run beside the main suite: exit $robot"
  cat "$logs/debian12.log"
  wait "$ubuntu2204" || jammy=$?
  echo "== robot stage, Ubuntu 22.04-like (tools/test_robot_ubuntu2204.sh), run beside" \
    "the main suite: exit $jammy"
  cat "$logs/ubuntu2204.log"
  rm -r "$logs"
fi
for rc in "$main" "$robot" "$jammy"; do
  ((rc == 0)) || exit "$rc"
done
