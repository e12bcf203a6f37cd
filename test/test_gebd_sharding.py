"""GEBD detection in shards (no Ray): equal to one pass, failures reported, checkpoints resume.

The same shards on Ray are in test_ray_jobs.py.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from batch_helpers import BROKEN_VIDEO as BROKEN
from batch_helpers import GOOD_VIDEOS as GOOD
from batch_helpers import command, gebd_fixture

from surprise_memory.config import EncoderConfig
from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.evaluation import GebdDetector, detect_videos, evaluate_gebd
from surprise_memory.evaluation.sharding import (
    ShardCheckpoints,
    detect_in_shards,
    plan_shards,
    video_files,
)
from surprise_memory.offline.inputs import FoundRecording, expand_inputs
from surprise_memory.perception.encoders import TINY_VIDEO_WEIGHTS, VideoEncoder

ENCODER = EncoderConfig(encoder_weights=TINY_VIDEO_WEIGHTS, encoder_device="cpu", clip_frames=8)
DETECTOR = {"window": 16, "warmup": 8, "nms_seconds": 0.5}


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return gebd_fixture(tmp_path_factory.mktemp("gebd"))


@pytest.fixture(scope="module")
def one_pass(fixture_dir: tuple[Path, Path]) -> tuple[dict[str, list[float]], ...]:
    """The unsharded path: detect_videos over the good videos, one encoder, in order."""
    videos, _ = fixture_dir
    causal, offline, missing = detect_videos(
        GOOD, videos, VideoEncoder.from_config(ENCODER), ENCODER, GebdDetector(**DETECTOR)
    )
    assert not missing and any(causal.values())
    return causal, offline


def pairs(videos: Path) -> list[tuple[str, Path]]:
    files = video_files(expand_inputs([str(videos)], videos_only=True))
    return [(vid, files[vid]) for vid in (*GOOD, BROKEN)]


def test_shards_are_cut_in_order_with_stable_names(fixture_dir: tuple[Path, Path]) -> None:
    videos, _ = fixture_dir
    shards = plan_shards(pairs(videos), 3)
    assert [s.units for s in shards] == [3, 1]
    assert [v for v, _ in shards[0].videos] == list(GOOD)
    assert shards == plan_shards(pairs(videos), 3)
    assert shards[0].key.startswith("shard-00000-") and shards[1].key.startswith("shard-00001-")
    with pytest.raises(ConfigError, match="shard_size=0"):
        plan_shards(pairs(videos), 0)


def test_video_files_prefer_mp4_like_find_video(tmp_path: Path) -> None:
    for name in ("a.mkv", "a.mp4", "b.webm"):
        (tmp_path / name).write_bytes(b"")
    found = [FoundRecording(p, p.name) for p in sorted(tmp_path.iterdir())]
    assert video_files(found) == {"a": tmp_path / "a.mp4", "b": tmp_path / "b.webm"}


def test_shards_give_the_one_pass_predictions_and_report_the_broken_video(
    fixture_dir: tuple[Path, Path], one_pass: tuple[dict[str, list[float]], ...], tmp_path: Path
) -> None:
    videos, annotations = fixture_dir
    shards = plan_shards(pairs(videos), 2)
    checkpoints = ShardCheckpoints(tmp_path / "ckpt", {"encoder": ENCODER.as_dict()})
    preds = detect_in_shards(shards, ENCODER, DETECTOR, checkpoints=checkpoints)
    causal, offline = one_pass
    assert preds.causal == causal and preds.offline == offline
    assert list(preds.failed) == [BROKEN] and "InputError" in preds.failed[BROKEN]
    assert preds.model is not None and preds.model.startswith("random:tiny")
    gt = pickle.loads(annotations.read_bytes())
    assert evaluate_gebd(gt, preds.causal).as_dict() == evaluate_gebd(gt, causal).as_dict()

    # a re-run takes the finished shard and redoes the one with a failed video
    saved = json.loads((tmp_path / "ckpt" / f"{shards[1].key}.json").read_text())
    assert list(saved["failed"]) == [BROKEN]
    again = detect_in_shards(shards, ENCODER, DETECTOR, checkpoints=checkpoints)
    assert again.from_checkpoint == 1 and again.causal == causal and list(again.failed) == [BROKEN]
    with pytest.raises(StoreError, match="other settings"):
        ShardCheckpoints(tmp_path / "ckpt", {"encoder": {**ENCODER.as_dict(), "clip_frames": 16}})


def test_eval_gebd_runs_shards_without_importing_ray(
    fixture_dir: tuple[Path, Path], one_pass: tuple[dict[str, list[float]], ...], tmp_path: Path
) -> None:
    videos, annotations = fixture_dir
    args = ["eval-gebd", "--annotations", str(annotations), "--videos", str(videos)]
    args += ["--weights", TINY_VIDEO_WEIGHTS, "--device", "cpu", "--clip-frames", "8"]
    args += ["--window", "16", "--warmup", "8", "--nms-seconds", "0.5", "--shard-size", "2"]
    proc = command(tmp_path, *args, "--out", "results.json", ray=False)
    assert proc.returncode == 3, proc.stderr  # a video failed: listed, status 3
    assert f"FAILED {BROKEN}: InputError" in proc.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["failed_videos"]) == [BROKEN] and results["missing_videos"] == ["vidE"]
    gt = pickle.loads(annotations.read_bytes())
    assert results["results"]["causal"] == evaluate_gebd(gt, one_pass[0]).as_dict()
    assert results["results"]["offline"] == evaluate_gebd(gt, one_pass[1]).as_dict()
