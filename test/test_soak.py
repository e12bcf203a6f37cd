"""The live nodes for 3 minutes at 30 Hz, 640x480: memory stops growing (issue 12).

Runs ``benchmarks/soak_nodes.py`` (the 60-minute version is in ``make bench``) and checks
that after the warm-up no node's resident memory floor (the smallest sample of each 30 s)
grows by more than a few MB a minute: the
frame history, the gate's history, the queues and the in-memory index are all bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SLOPE_MB_PER_MIN = 5.0


def test_three_minutes_at_camera_rate_hold_memory_flat(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "soak_nodes.py"), "--minutes", "3"]
    cmd += ["--fps", "30", "--size", "640x480", "--warmup-s", "60", "--out", str(out)]
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    print(proc.stdout[-4000:], proc.stderr[-4000:])
    assert proc.returncode == 0
    result = json.loads((out / "soak.json").read_text())
    assert (out / "soak.png").stat().st_size > 0
    assert result["frames_published"] > 0.9 * 3 * 60 * 30
    for name, fig in result["nodes"].items():  # the floor: transients come and go
        assert fig["floor_slope_mb_per_min"] < MAX_SLOPE_MB_PER_MIN, (name, fig)
    stored = result["diagnostics"].get("memory_node", {}).get("episodes_stored", "0")
    assert int(stored) > 0  # the memory node did real work: episodes were stored
