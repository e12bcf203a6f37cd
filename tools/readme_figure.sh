#!/usr/bin/env bash
# The README's first picture (doc/images/surprise_curve.png, also doc/index.md's), regenerated:
# runs today's `make demo` (tools/demo.sh) into a temporary folder and copies the surprise
# curve its report draws (surprise_memory.offline.report.plot_surprise, via write_report's
# report.png) over the picture. Arguments go to the demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bash "$ROOT/tools/demo.sh" --out "$out/demo" "$@"
cp "$out/demo/store/report.png" "$ROOT/doc/images/surprise_curve.png"
echo "doc/images/surprise_curve.png: $(stat -c %s "$ROOT/doc/images/surprise_curve.png") bytes"
