"""Habituation, the rate budget and the equal-budget baselines through the offline pipeline.

Real bags, the tiny model presets, real stores; the CLI runs as subprocesses for
``--gate uniform/random --budget-from STORE``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings, process
from surprise_memory.offline.report import write_report
from surprise_memory.offline.run_record import (
    RunSummary,
    budget_from,
    load_run_record,
    read_scores,
)
from surprise_memory.offline.synthetic import SyntheticScene, recurring_events, write_synthetic_bag
from surprise_memory.perception.encoders import (
    SYNTHETIC_EMBEDDER_MODEL,
    TINY_VIDEO_WEIGHTS,
    ImageTextEmbedder,
    VideoEncoder,
)

REPO = Path(__file__).resolve().parents[1]
NS = 1_000_000_000
# the panel passes 3 times among 2 novel events
SCENE = SyntheticScene(
    seed=3,
    duration_s=44.0,
    width=64,
    height=48,
    events=recurring_events(3, 2, first_s=8.0, spacing_s=6.0),
)
VALUES = {
    "encoder_weights": TINY_VIDEO_WEIGHTS,
    "encoder_device": "cpu",
    "clip_frames": 8,
    "window": 16,
    "warmup": 8,
    "nms_seconds": 1.0,
    "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
    "embedder_weights": "random",
    "embedder_device": "cpu",
    "episode_before_seconds": 1.0,
    "episode_after_seconds": 1.0,
    "episode_frames": 2,
}


@pytest.fixture(scope="module")
def models() -> tuple[VideoEncoder, ImageTextEmbedder]:
    settings = PipelineSettings.from_mapping(VALUES)
    return (
        VideoEncoder.from_config(settings.encoder),
        ImageTextEmbedder.from_config(settings.embedder),
    )


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bag") / "rec"
    write_synthetic_bag(path, SCENE)
    return path


def _process(
    models: tuple[VideoEncoder, ImageTextEmbedder], bag: Path, out: Path, **extra: object
) -> RunSummary:
    pipe = OfflinePipeline(
        PipelineSettings.from_mapping({**VALUES, **extra}), encoder=models[0], embedder=models[1]
    )
    return process(bag, out, pipeline=pipe, pose_topic="/odom")


@pytest.fixture(scope="module")
def paper_run(
    models: tuple[VideoEncoder, ImageTextEmbedder],
    bag: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    out = tmp_path_factory.mktemp("paper") / "store"
    summary = _process(models, bag, out)
    assert summary.events == summary.candidates > 0 and summary.suppressed_habituation == 0
    return out


def _events(store: Path) -> list[int]:
    return [e["stamp_ns"] for e in load_run_record(store)["events"]]


def test_habituation_suppresses_and_records_why(
    models: tuple[VideoEncoder, ImageTextEmbedder], bag: Path, paper_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "hab"
    summary = _process(models, bag, out, habituation=True)
    paper = _events(paper_run)
    kept = _events(out)
    run = load_run_record(out)
    suppressed = run["suppressed"]
    # the same gate candidates, split into events and suppressed ones
    assert summary.candidates == len(paper)
    assert summary.suppressed_habituation == len(suppressed) > 0
    assert sorted(kept + [s["stamp_ns"] for s in suppressed]) == paper
    assert all(s["reason"] == "habituation" and s["habituation"] >= 0.5 for s in suppressed)
    assert all(s["similar_to_ns"] in kept for s in suppressed)  # it resembled a kept event
    # the panel's later passes are what was suppressed
    passes = [e for e in SCENE.scripted_events if e.kind == "panel_passes"]
    late = [round(SCENE.start_ns + p.start_s * NS) for p in passes[1:]]
    assert any(abs(s["stamp_ns"] - t) < 3 * NS for s in suppressed for t in late)
    assert run["settings"]["habituation"]["habituation"] is True
    # scores.csv: the suppressed rows say why; the events are triggered
    scores = read_scores(out / "scores.csv")
    marked = scores["stamp_ns"][scores["suppressed"] == "habituation"].tolist()
    assert marked == [s["stamp_ns"] for s in suppressed]
    assert scores["stamp_ns"][scores["triggered"] == 1].tolist() == kept
    with EpisodeStore(out, read_only=True) as store:
        episodes = [i for i in store.episode_ids() if store.get(i).kind == EPISODE]
        assert len(episodes) == len(kept) == summary.episodes
    # the report draws them apart from the episodes
    html_path, _ = write_report(out)
    page = html_path.read_text()
    assert "Suppressed candidates" in page
    assert page.count('<tr class="suppressed">') == len(suppressed)
    print(
        f"\npaper gate: {len(paper)} events; habituation: {len(kept)} kept, "
        f"{len(suppressed)} suppressed"
    )


def test_budget_caps_the_rate(
    models: tuple[VideoEncoder, ImageTextEmbedder], bag: Path, paper_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "budget"
    summary = _process(
        models,
        bag,
        out,
        max_episodes_per_minute=3.0,
        budget_window_seconds=20.0,
        budget_delay_seconds=4.0,
    )
    kept = _events(out)
    assert summary.candidates == len(_events(paper_run)) > summary.events == len(kept)
    assert summary.suppressed_budget == summary.candidates - summary.events
    for i, k in enumerate(kept):  # at most 3 * 20 / 60 = 1 per 20 s
        assert sum(1 for x in kept[i:] if x < k + 20 * NS) <= 1
    scores = read_scores(out / "scores.csv")
    assert int(np.sum(scores["suppressed"] == "budget")) == summary.suppressed_budget


def _cli(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "surprise_memory", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    if check and proc.returncode:
        pytest.fail(f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


TINY_CLI = [
    "--weights", TINY_VIDEO_WEIGHTS, "--embedder-model", SYNTHETIC_EMBEDDER_MODEL,
    "--embedder-weights", "random", "--device", "cpu", "--clip-frames", "8", "--window", "16",
    "--warmup", "8", "--episode-frames", "2", "--no-progress",
]  # fmt: skip


def test_cli_uniform_stores_as_many_episodes(bag: Path, paper_run: Path, tmp_path: Path) -> None:
    n = load_run_record(paper_run)["summary"]["episodes"]
    out = tmp_path / "uniform"
    args = ["--gate", "uniform", "--budget-from", str(paper_run), *TINY_CLI]
    _cli(tmp_path, "process", str(bag), "--out", str(out), *args)
    run = load_run_record(out)
    assert run["settings"]["baseline"]["gate_mode"] == "uniform"
    assert run["summary"]["episodes"] == n
    # evenly spaced, 60 / rate seconds apart; the first slot may come before the first scored
    # frame (M - 1 + W frames of warm-up) and then fires on it, closer to the second
    gaps = np.diff(_events(out)) / NS
    assert np.allclose(gaps[1:], gaps[1], atol=0.11) and gaps[0] <= gaps[1] + 0.11


def test_random_stores_as_many_episodes(
    models: tuple[VideoEncoder, ImageTextEmbedder], bag: Path, paper_run: Path, tmp_path: Path
) -> None:
    n = load_run_record(paper_run)["summary"]["episodes"]
    rate = budget_from(paper_run)
    runs = []
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        _process(
            models,
            bag,
            tmp_path / name,
            gate_mode="random",
            baseline_episodes_per_minute=rate,
            baseline_seed=seed,
        )
        runs.append(_events(tmp_path / name))
        assert load_run_record(tmp_path / name)["summary"]["episodes"] == n
    assert runs[0] == runs[1] != runs[2]  # seeded


def test_cli_baseline_needs_a_rate(tmp_path: Path, bag: Path) -> None:
    proc = _cli(
        tmp_path, "process", str(bag), "--out", "x", "--gate", "random", *TINY_CLI, check=False
    )
    assert proc.returncode == 1 and "budget-from" in proc.stderr and "Traceback" not in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _cli(
        tmp_path,
        "process",
        str(bag),
        "--out",
        "y",
        "--gate",
        "uniform",
        "--budget-from",
        "empty",
        *TINY_CLI,
        check=False,
    )
    assert proc.returncode == 1 and "run.json" in proc.stderr
