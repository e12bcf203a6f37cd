#!/usr/bin/env bash
# System packages the tests need beyond the venv: Debian's Chromium (the report test opens
# the HTML report in a real headless browser) and its driver, chromium-driver (the memory
# browser's page tests drive it through Selenium). Installed only when missing; needs root.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[[ -x /usr/bin/chromedriver ]] || missing+=(chromium-driver)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  echo "setup_system: ${missing[*]} missing; install (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "setup_system: installing ${missing[*]} (Debian packages)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
