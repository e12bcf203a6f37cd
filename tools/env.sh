# Sourced by the tools: the venv, the ROS environment it provides, and local-only DDS.
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
VENV="${SURPRISE_MEMORY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/surprise_memory/venv}"
mkdir -p "$ROOT/log"
if [[ -z "${ROS_DISTRO:-}" ]]; then  # no apt ROS sourced: use the PyPI wheels in the venv
  # shellcheck disable=SC1091
  source "$VENV/bin/activate"
  export AMENT_PREFIX_PATH="$VENV${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
  export CMAKE_PREFIX_PATH="$VENV${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi
# DDS discovery on this host only (tests and the demo never need the network); Humble has
# no ROS_AUTOMATIC_DISCOVERY_RANGE (Jazzy's), only ROS_LOCALHOST_ONLY
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
if [[ "${ROS_DISTRO:-}" == "humble" ]]; then
  export ROS_LOCALHOST_ONLY="${ROS_LOCALHOST_ONLY:-1}"
fi
