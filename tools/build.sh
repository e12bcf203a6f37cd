#!/usr/bin/env bash
# colcon build of the package against the venv's ROS 2 (or an apt ROS 2 already sourced).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"
colcon --log-base "$ROOT/log" build --base-paths "$ROOT" \
  --build-base "$ROOT/build" --install-base "$ROOT/install" \
  --event-handlers console_cohesion- status- summary+ \
  --cmake-args -DPython3_EXECUTABLE="$(command -v python)" -DBUILD_TESTING=OFF \
  >"$ROOT/log/colcon_build.out" 2>&1 || { cat "$ROOT/log/colcon_build.out"; exit 1; }
tail -n 2 "$ROOT/log/colcon_build.out"
