#!/usr/bin/env bash
# The README's main job (`make demo`): set up, build, and run the demo on an embedded default.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash "$ROOT/tools/setup_venv.sh"
bash "$ROOT/tools/build.sh"
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
set -u
cd "${TMPDIR:-/tmp}"  # run from outside the checkout so the colcon install is what is imported
# outputs in the checkout's demo_output/ (git-ignored); a later --out in "$@" wins
python -m surprise_memory.offline.demo --out "$ROOT/demo_output" "$@"
echo "to use surprise-memory and the nodes in your shell: source $ROOT/tools/activate.sh"
