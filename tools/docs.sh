#!/usr/bin/env bash
# `make docs`: set up, build, then the Sphinx site of doc/ into doc/_build/html, with warnings
# as errors (as test/test_docs.py builds it). The API pages import the colcon install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [[ -z "${ROS_DISTRO:-}" ]]; then
  bash "$ROOT/tools/setup_venv.sh"
fi
bash "$ROOT/tools/build.sh"
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"
set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
set -u
cd "$ROOT/doc"  # not the checkout's root: its source tree would shadow the colcon install
sphinx-build -W --keep-going -j auto -q -b html . _build/html
echo "documentation: $ROOT/doc/_build/html/index.html"
