#!/usr/bin/env bash
# System packages the tests need beyond the venv: Debian's Chromium (the report test opens
# the HTML report in a real headless browser). Installed only when missing; needs root.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  echo "setup_system: chromium is missing; install it (Debian/Ubuntu: sudo apt-get install chromium)" >&2
  exit 1
fi
echo "setup_system: installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
