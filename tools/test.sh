#!/usr/bin/env bash
# The README's test command (`make test`, also .ci/run): set up the venv, colcon build,
# lint and type-check, then run the whole test suite against the colcon install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash "$ROOT/tools/setup_venv.sh"
bash "$ROOT/tools/setup_system.sh"
bash "$ROOT/tools/build.sh"
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
echo "== ruff"
ruff check surprise_memory test tools benchmarks launch scripts
ruff format --check surprise_memory test tools benchmarks launch scripts
echo "== mypy"
mypy surprise_memory
echo "== pytest"
# `pytest`, not `python -m pytest`: the latter puts the repo root on sys.path, and the source
# tree (which lacks the generated msg/srv modules) would shadow the colcon install.
pytest "$@"
