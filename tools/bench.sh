#!/usr/bin/env bash
# The performance suite (`make bench`): set up and build like the other tools, add the
# benchmark-only packages (requirements/bench.txt) to the venv when missing, then run
# benchmarks/run_all.py against the colcon install. Arguments go to run_all.py
# (--quick, --json FILE, --only SECTION ...).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash "$ROOT/tools/setup_venv.sh"
bash "$ROOT/tools/build.sh"
unset PYTHONPATH  # only the colcon install (set up by setup.bash below) provides the package
# shellcheck source=tools/env.sh
source "$ROOT/tools/env.sh"

# benchmark-only pins, installed once (quietly) when one is missing or at another version
if ! python - "$ROOT/requirements/bench.txt" <<'PY'
import importlib.metadata as md
import sys

for line in open(sys.argv[1], encoding="utf-8"):
    spec = line.split("#", 1)[0].strip()
    if not spec:
        continue
    name, _, want = spec.partition("==")
    try:
        have = md.version(name.strip())
    except md.PackageNotFoundError:
        sys.exit(1)
    if want and have != want.strip():
        sys.exit(1)
PY
then
  echo "bench: installing requirements/bench.txt into the venv"
  python -m pip --disable-pip-version-check install -q -c "$ROOT/requirements/constraints.txt" \
    -r "$ROOT/requirements/bench.txt" 2>&1 \
    | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
fi

set +u  # colcon's setup scripts read unset variables
# shellcheck disable=SC1091
source "$ROOT/install/setup.bash"
set -u
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "${TMPDIR:-/tmp}"  # outside the checkout, so the colcon install is what is imported
python "$ROOT/benchmarks/run_all.py" "$@"
