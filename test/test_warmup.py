"""Start-up: windows padded with the first frame never enter the scorer (issue 12, item 9).

The paper's s(t) is a Gaussian over real windows. With ``clip_warmup: pad`` the first M-1
windows repeat the first frame; they must not enter the scorer's window or the gate's
history, so both warm-up policies give the same scores and events.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from surprise_memory.config import EncoderConfig
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process
from surprise_memory.offline.run_record import read_scores
from surprise_memory.offline.synthetic import SyntheticScene, write_synthetic_bag
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    TINY_VIDEO_WEIGHTS,
    ImageTextEmbedder,
    VideoEncoder,
)

SCENE = SyntheticScene(seed=4, duration_s=8.0, fps=10.0, width=48, height=32)
VALUES = {
    "encoder_weights": TINY_VIDEO_WEIGHTS,
    "encoder_device": "cpu",
    "clip_frames": 8,
    "window": 8,
    "warmup": 8,
    "nms_seconds": 0.5,
    "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
    "embedder_weights": "random",
    "embedder_device": "cpu",
    "episode_frames": 2,
}


def test_wait_is_the_default() -> None:
    assert EncoderConfig().clip_warmup == "wait"


def test_padded_windows_are_not_scored(tmp_path: Path) -> None:
    bag = tmp_path / "rec"
    write_synthetic_bag(bag, SCENE)
    settings = PipelineSettings.from_mapping(VALUES)
    encoder = VideoEncoder.from_config(settings.encoder)
    embedder = ImageTextEmbedder.from_config(settings.embedder)
    runs = {}
    for warmup in ("pad", "wait"):
        s = PipelineSettings.from_mapping({**VALUES, "clip_warmup": warmup})
        pipe = OfflinePipeline(s, encoder=encoder, embedder=embedder)
        summary = process(bag, tmp_path / warmup, pipeline=pipe)
        runs[warmup] = (summary, read_scores(tmp_path / warmup / "scores.csv"))
    (pad, pad_scores), (wait, wait_scores) = runs["pad"], runs["wait"]
    assert pad.padded_windows == 8 - 1 and wait.padded_windows == 0
    assert pad.windows == wait.windows == SCENE.frame_count - 7
    assert pad.scored == wait.scored == SCENE.frame_count - 7 - 8  # W real windows first
    assert list(pad_scores["stamp_ns"]) == list(wait_scores["stamp_ns"])
    assert list(pad_scores["score"]) == pytest.approx(list(wait_scores["score"]), rel=1e-6)
    assert (pad.events, pad.episodes) == (wait.events, wait.episodes)
