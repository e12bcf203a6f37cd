"""The live nodes for 3 minutes at 30 Hz, 640x480: memory stops growing (issue 12), and no
camera frame is lost silently (issue 20).

Runs ``benchmarks/soak_nodes.py`` (the 60-minute version is in ``make bench``) and checks
that each node's resident memory has a floor slope (the growth of each 30 s window's
minimum) under a few MB per minute, fitted after the warm-up and on one side of the first
stored episode (whose one-time allocations are a step, not growth; when the random-weight
gate fires is chance): the frame history, the gate's history,
the queues and the in-memory index are all bounded. With glibc's default (adaptive) mmap
threshold the memory node's floor rose by 34 MB/min here; see benchmarks/RESULTS.md.

Delivery, with the shipped configuration (``config/fastdds_large_frames.xml`` for the
camera's process and the nodes): the middleware loses next to nothing (Fast DDS's defaults
delivered 19% of these frames), and what each camera node took in is what it says on
``/diagnostics``: its own count (by the publisher's sequence numbers, or the stamps) agrees
with the test's within two points, and a node that took in under 95% said WARN "camera
frames lost". On a busy
machine a node starved of CPU loses frames in its own queue; that is reported, not
hidden, which is the bar a loaded CI machine can hold (the 95% itself is measured on a
quiet one: benchmarks/bench_frame_delivery.py, RESULTS.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from surprise_memory.config import CameraConfig

ROOT = Path(__file__).resolve().parents[1]
MAX_FLOOR_SLOPE_MB_PER_MIN = 5.0
CAMERA_LOSS_WARN = CameraConfig().camera_loss_warn

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_frame_delivery import rows  # noqa: E402
from soak_cameras import camera_delivery, camera_topics  # noqa: E402
from soak_nodes import fit_window  # noqa: E402


def test_the_fit_never_spans_the_first_episode() -> None:
    assert fit_window(60.0, 180.0, None, 5.0) == (60.0, 180.0)
    assert fit_window(60.0, 180.0, 31.0, 5.0) == (60.0, 180.0)  # in the warm-up
    assert fit_window(60.0, 180.0, 95.0, 5.0) == (100.0, 180.0)  # early: after it
    assert fit_window(60.0, 180.0, 171.0, 5.0) == (60.0, 166.0)  # late: a sample before it
    # built before it was announced, on a loaded machine: the step was the 125 s sample
    assert fit_window(60.0, 180.0, 126.0, 5.0) == (60.0, 121.0)
    # a 3-minute run keeps at least the 55 s its test fits, wherever the episode lands
    spans = [fit_window(60.0, 180.0, t / 2, 5.0) for t in range(0, 361)]
    assert min(to - start for start, to in spans) >= 55.0
    assert fit_window(60.0, 3600.0, 95.0, 5.0) == (100.0, 3600.0)


def test_cameras_are_named_and_get_their_own_topics() -> None:
    assert camera_topics(1) == {"": "/bench_camera/image_raw"}  # the unnamed one, as before
    assert camera_topics(3) == {
        "front": "/surprise_memory/front/image",
        "left": "/surprise_memory/left/image",
        "rear": "/surprise_memory/rear/image",
    }
    for wrong in (0, 5):
        with pytest.raises(ValueError, match="1 to 4"):
            camera_topics(wrong)


def test_each_cameras_delivery_comes_from_its_own_diagnostics_keys() -> None:
    values = {
        "frames_in": "290",  # the node's total: not any one camera's
        "front.camera_frames_received": "100",
        "front.camera_frames_lost": "0",
        "left.camera_frames_received": "90",
        "left.camera_frames_lost": "10",
        "left.camera_frames_lost_in_transport": "4",
        # rear said nothing: none received
    }
    got = camera_delivery(
        {"front": 100, "left": 100, "rear": 100}, values, {"left": 2}, {"front": 100, "left": 95}
    )
    assert got["front"] == {
        "published": 100,
        "received": 100,
        "delivered": 1.0,
        "lost": 0,
        "lost_in_transport": 0,
        "estimated": 1.0,
        "loss_warnings": 0,
        "bare": 1.0,
    }
    assert (got["left"]["delivered"], got["left"]["estimated"]) == (0.9, 0.9)
    assert (got["left"]["lost_in_transport"], got["left"]["loss_warnings"]) == (4, 2)
    assert got["left"]["bare"] == 0.95
    assert got["rear"]["received"] == 0 and got["rear"]["delivered"] == 0.0
    assert got["rear"]["bare"] == 0.0
    # a row per node and camera in the benchmark's table; one camera keeps its one row
    result = {
        "frames_published": 300,
        "diagnostics": {"encoder_node": values},
        "delivery": {"encoder_node": {"cameras": got}, "bare_subscriber": {"delivered": 0.65}},
    }
    assert rows(result)[1] == ("encoder_node left", "90.0%", "90.0%", "40% of lost", "95.0%")
    assert [r[0] for r in rows(result)] == [f"encoder_node {c}" for c in ("front", "left", "rear")]
    one = {
        "frames_published": 100,
        "diagnostics": {"pipeline_node": {"camera_frames_lost_in_transport": "0"}},
        "delivery": {
            "pipeline_node": {"delivered": 0.98, "estimated": 0.98, "lost": 2},
            "bare_subscriber": {"delivered": 1.0},
        },
    }
    assert rows(one) == [("pipeline_node", "98.0%", "98.0%", "0% of lost", "100.0%")]


@pytest.mark.ros  # the live nodes over DDS: the main stage only
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
    # the camera kept its rate from when the nodes had subscribed (models loaded)
    assert result["frames_published"] > 0.9 * (3 * 60 - result["first_frame_s"]) * 30
    # the fitted span (never across the first episode's one-time step) holds two floor windows
    assert result["fit_to_s"] - result["fit_from_s"] >= 55.0, result["episodes_stored_s"]
    for name, figures in result["nodes"].items():
        assert figures["floor_slope_mb_per_min"] < MAX_FLOOR_SLOPE_MB_PER_MIN, (name, figures)
    published = result["frames_published"]
    for name in ("encoder_node", "memory_node"):
        got = result["delivery"][name]
        # no silent loss: the node's own figure is the test's
        assert abs(got["estimated"] - got["delivered"]) <= 0.02, (name, got)
        if got["delivered"] < 1.0 - CAMERA_LOSS_WARN:
            assert got["loss_warnings"] > 0, (name, got)
        # the shipped profile works: next to nothing lost in transport
        in_transport = int(result["diagnostics"][name]["camera_frames_lost_in_transport"])
        assert in_transport <= 0.02 * published, (name, got, in_transport)
