# Enter the project's environment in an interactive shell: `source tools/activate.sh`.
# Activates the venv (or uses an apt ROS 2 already sourced) and the colcon install, so that
# `surprise-memory`, `ros2 run surprise_memory ...` (with an apt ROS) and python find the package.
_sm_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROOT="$_sm_root" source "$_sm_root/tools/env.sh"
if [[ -f "$_sm_root/install/setup.bash" ]]; then
  # shellcheck disable=SC1091
  source "$_sm_root/install/setup.bash"
else
  echo "surprise_memory: no colcon install yet; run 'make demo' or 'bash tools/build.sh' first" >&2
fi
unset _sm_root
