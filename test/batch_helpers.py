"""What the many-recordings tests share: tiny settings, a small fleet, GEBD videos, store contents.

The fleet: three synthetic rosbag2 recordings of two robots (one bag names its robot in
``metadata.yaml``'s ``custom_data``) and one corrupt recording (a rosbag2 folder whose
database was cut short: the bag reader refuses it as malformed).
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from synthetic_frames import OFFLINE

from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.store import open_store
from surprise_memory.offline.pipeline import PipelineSettings
from surprise_memory.offline.synthetic import (
    SyntheticScene,
    write_synthetic_bag,
    write_synthetic_video,
)

TINY = {
    **OFFLINE,
    "episode_before_seconds": 1.0,
    "episode_after_seconds": 1.0,
    "episode_frames": 2,
}
"""Pipeline settings of the tiny presets (random weights, CPU)."""

TINY_ARGS = [
    arg for name, value in TINY.items() for arg in ("--" + name.replace("_", "-"), str(value))
]
"""The same settings as command-line options."""

# recording key -> (scene seed, robot id in the bag's metadata or None)
GOOD = {
    "robot_a/run1": (0, None),
    "robot_a/run2": (1, None),
    "robot_b/run1": (2, "beta"),
}
CORRUPT = "robot_c/cut"
"""Key of the corrupt recording."""
GOOD_VIDEOS = ("vidA", "vidB", "vidC")
"""Ids of the GEBD fixture's videos."""
BROKEN_VIDEO = "vidD"
"""Id of its corrupt video file."""


def settings(**extra: Any) -> PipelineSettings:
    """The tiny settings (plus ``extra``)."""
    return PipelineSettings.from_mapping({**TINY, **extra})


def make_fleet(root: Path, keys: tuple[str, ...] = tuple(GOOD)) -> Path:
    """Write the fleet (these of its good recordings) under ``root/fleet``; returns that folder."""
    fleet = root / "fleet"
    for key in keys:
        seed, robot = GOOD[key]
        (fleet / key).parent.mkdir(parents=True, exist_ok=True)
        scene = SyntheticScene(seed=seed, duration_s=6.0, width=64, height=48)
        write_synthetic_bag(fleet / key, scene, custom_data={"robot_id": robot} if robot else None)
    cut = fleet / CORRUPT
    cut.parent.mkdir(parents=True)
    shutil.copytree(fleet / keys[0], cut)
    db = next(cut.glob("*.db3"))
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])
    return fleet


def episodes(
    location: str | Path, robot_id: str | None = None, kinds: tuple[str, ...] = (EPISODE,)
) -> list[dict[str, Any]]:
    """Every episode of a store (of one robot), by stamp: fields, JPEG bytes, embeddings.

    ``kinds``: the surprise episodes by default; ``RECORD_KINDS`` adds the place keyframes.
    """
    out = []
    with open_store(str(location), read_only=True) as store:
        for ep_id in store.episode_ids():
            rec = store.get(ep_id)
            if (robot_id is not None and rec.robot_id != robot_id) or rec.kind not in kinds:
                continue
            out.append(
                {
                    "id": rec.id,
                    "kind": rec.kind,
                    "robot_id": rec.robot_id,
                    "stamp_ns": rec.stamp_ns,
                    "surprise": rec.surprise,
                    "threshold": rec.threshold,
                    "frame_stamps_ns": rec.frame_stamps_ns,
                    "pose": (rec.pose_valid, rec.pose.position),
                    "jpegs": rec.load_jpegs(),
                    "embeddings": np.asarray(store.embeddings(ep_id)),
                }
            )
    return sorted(out, key=lambda e: e["stamp_ns"])


def assert_same_episodes(
    got: list[dict[str, Any]], want: list[dict[str, Any]], *, same_ids: bool = True
) -> None:
    """Equal episodes: fields, JPEG bytes and embeddings (float16 as stored) exactly."""
    assert len(got) == len(want) > 0
    for g, w in zip(got, want, strict=True):
        for field in ("kind", "stamp_ns", "surprise", "frame_stamps_ns", "pose", "jpegs"):
            assert g[field] == w[field], field
        # NaN: no threshold (a place keyframe's)
        np.testing.assert_array_equal(g["threshold"], w["threshold"])
        np.testing.assert_array_equal(g["embeddings"], w["embeddings"])
        if same_ids:
            assert g["id"] == w["id"]


def gebd_fixture(root: Path) -> tuple[Path, Path]:
    """Three short synthetic videos, one corrupt file, and their ground-truth pickle."""
    videos = root / "videos"
    videos.mkdir()
    gt: dict[str, Any] = {}
    for i, vid in enumerate(GOOD_VIDEOS):
        scene = SyntheticScene(seed=20 + i, duration_s=5.0, width=64, height=48)
        write_synthetic_video(videos / f"{vid}.mp4", scene)
        times = [round(e.start_s, 2) for e in scene.scripted_events]
        gt[vid] = {
            "fps": scene.fps,
            "num_frames": scene.frame_count,
            "video_duration": scene.duration_s,
            "f1_consis_avg": 0.8,
            "substages_timestamps": [times, times[1:]],
        }
    (videos / f"{BROKEN_VIDEO}.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"broken" * 100)
    gt[BROKEN_VIDEO] = dict(gt["vidA"])
    gt["vidE"] = dict(gt["vidA"])  # no file: missed
    annotations = root / "gt.pkl"
    annotations.write_bytes(pickle.dumps(gt))
    return videos, annotations


REPO = Path(__file__).resolve().parents[1]
_MAIN_WITHOUT_RAY = (
    "import sys\n"
    "from surprise_memory.cli import main\n"
    "status = main(sys.argv[1:])\n"
    "assert 'ray' not in sys.modules, 'ray was imported'\n"
    "raise SystemExit(status)\n"
)


def command(cwd: Path, *args: str, ray: bool = True) -> subprocess.CompletedProcess[str]:
    """``surprise-memory ARGS --no-progress`` in a new process (the repository on the path).

    With ``ray=False`` the process also fails (an AssertionError, status 1) when the
    command imported Ray.
    """
    how = ["-m", "surprise_memory"] if ray else ["-c", _MAIN_WITHOUT_RAY]
    return subprocess.run(
        [sys.executable, *how, *args, "--no-progress"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
