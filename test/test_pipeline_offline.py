"""The offline pipeline end to end (tiny presets, real bag/video, real store).

The reference ("direct core run") below feeds the core objects exactly as the live nodes
do, one window per encoder call: if the batched pipeline ever reorders an operation, its
events differ from it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from synthetic_frames import OFFLINE

from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.episodes import EpisodeAssembler
from surprise_memory.memory.place_status import record_place
from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.store import EpisodeStore
from surprise_memory.offline.pipeline import (
    OfflinePipeline,
    PipelineSettings,
    Progress,
    process,
)
from surprise_memory.offline.run_record import RunSummary, load_run_record, read_scores
from surprise_memory.offline.synthetic import (
    SyntheticScene,
    synthetic_frames,
    write_synthetic_bag,
    write_synthetic_video,
)
from surprise_memory.perception.encoders import (
    ImageTextEmbedder,
    VideoEncoder,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.sources import open_source
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.scorer import SurpriseScorer

NS = 1_000_000_000
# 24 s at 10 Hz, small frames; short windows so the tiny encoder is fast
SCENE = SyntheticScene(seed=1, duration_s=24.0, fps=10.0, width=64, height=48)
VALUES = {
    **OFFLINE,
    "episode_before_seconds": 1.0,
    "episode_after_seconds": 1.0,
    "episode_frames": 3,  # the tiny embedder is the slow part: few frames per episode
}


@pytest.fixture(scope="module")
def models() -> tuple[VideoEncoder, ImageTextEmbedder]:
    settings = PipelineSettings.from_mapping(VALUES)
    return (
        VideoEncoder.from_config(settings.encoder),
        ImageTextEmbedder.from_config(settings.embedder),
    )


def pipeline(models: tuple[VideoEncoder, ImageTextEmbedder], **extra: object) -> OfflinePipeline:
    settings = PipelineSettings.from_mapping({**VALUES, **extra})
    return OfflinePipeline(settings, encoder=models[0], embedder=models[1])


@pytest.fixture(scope="module")
def bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bag") / "rec"
    write_synthetic_bag(path, SCENE)
    return path


def live_reference(
    frames: list[Frame], settings: PipelineSettings, encoder: VideoEncoder
) -> tuple[list[SurpriseTrigger], list[tuple[int, ...]]]:
    """The nodes' order of operations, one window per encoder call."""
    sampler = encoder.make_sampler(settings.encoder)
    scorer = SurpriseScorer.from_config(settings.scorer)
    gate = SurpriseGate.from_config(settings.gate)
    assembler = EpisodeAssembler(settings.episode)
    triggers: list[SurpriseTrigger] = []
    episodes: list[tuple[int, ...]] = []
    for frame in frames:
        episodes += [tuple(f.stamp_ns for f in e.frames) for e in assembler.add_frame(frame)]
        window = sampler.push(frame)
        if window is None:
            continue
        z = encoder.encode_window(window.frames, prepared=True)
        result = scorer.update(z)
        if result is None:
            continue
        for t in gate.push(window.stamp_ns, result.score, result.kl):
            triggers.append(t)
            episodes += [tuple(f.stamp_ns for f in e.frames) for e in assembler.add_trigger(t)]
    for t in gate.flush():
        triggers.append(t)
        episodes += [tuple(f.stamp_ns for f in e.frames) for e in assembler.add_trigger(t)]
    episodes += [tuple(f.stamp_ns for f in e.frames) for e in assembler.flush()]
    return triggers, episodes


def stored(store_dir: Path) -> list[tuple[int, float, tuple[int, ...], bool]]:
    """The stored surprise episodes (not the place keyframes), oldest first."""
    with EpisodeStore(store_dir, read_only=True) as store:
        recs = sorted((store.get(i) for i in store.episode_ids()), key=lambda r: r.stamp_ns)
    return [(r.stamp_ns, r.surprise, r.frame_stamps_ns, r.pose_valid) for r in recs
            if r.kind == EPISODE]  # fmt: skip


@pytest.fixture(scope="module")
def bag_run(
    models: tuple[VideoEncoder, ImageTextEmbedder],
    bag: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, RunSummary, list[Progress], OfflinePipeline]:
    """The bag processed once, batch 8 (the default), with poses from /odom."""
    pipe = pipeline(models)
    seen: list[Progress] = []
    out = tmp_path_factory.mktemp("run") / "store"
    summary = process(bag, out, pipeline=pipe, pose_topic="/odom", progress=seen.append)
    return out, summary, seen, pipe


def test_bag_end_to_end_matches_the_live_order(
    models: tuple[VideoEncoder, ImageTextEmbedder],
    bag: Path,
    bag_run: tuple[Path, RunSummary, list[Progress], OfflinePipeline],
) -> None:
    store_dir, summary, seen, pipe = bag_run
    frames = list(open_source(bag))
    triggers, episodes = live_reference(frames, pipe.settings, models[0])
    assert triggers, "the synthetic events should trigger at least once"

    # events: same stamps, scores within float tolerance; episodes: same frames
    got = stored(store_dir)
    assert [g[0] for g in got] == [t.stamp_ns for t in triggers]
    np.testing.assert_allclose([g[1] for g in got], [t.score for t in triggers], rtol=1e-5)
    assert [g[2] for g in got] == episodes
    assert all(g[3] for g in got)  # poses from /odom

    # summary numbers
    assert summary.frames == len(frames) == SCENE.frame_count
    # clip_warmup wait: a window per frame once M = 8 frames exist
    assert summary.windows == len(frames) - 7 and summary.padded_windows == 0
    assert summary.scored == summary.windows - 16  # W = 16 embeddings before the first score
    assert summary.events == len(triggers) and summary.episodes == len(episodes)
    assert summary.duration_s == pytest.approx((len(frames) - 1) / SCENE.fps)
    assert summary.episodes_per_minute == pytest.approx(len(episodes) / (summary.duration_s / 60))
    assert summary.stored_frames == sum(len(e) for e in episodes)
    assert summary.stored_fraction == pytest.approx(summary.stored_frames / len(frames))
    assert summary.throughput_fps > 0 and summary.first_stamp_ns == frames[0].stamp_ns
    assert [p.frames for p in seen] == list(range(1, len(frames) + 1))

    # CSV: one row per scored frame, triggered where the events are
    scores = read_scores(store_dir / "scores.csv")
    assert scores["stamp_ns"].size == summary.scored
    assert np.all(np.diff(scores["stamp_ns"]) > 0)
    flagged = scores["stamp_ns"][scores["triggered"] == 1].tolist()
    assert flagged == [t.stamp_ns for t in triggers]
    assert np.isnan(scores["tau"][:7]).all() and np.isfinite(scores["tau"][7:]).all()

    # run record
    run = load_run_record(store_dir)
    assert run["status"] == "complete" and run["untrained"] is True
    assert run["models"]["encoder"]["name"] == models[0].model_name
    assert run["models"]["embedder"]["pretrained"] is False
    assert run["settings"]["gate"]["nms_seconds"] == 0.5
    assert run["input"]["kind"] == "bag" and run["input"]["pose_topic"] == "/odom"
    assert run["input"]["source_stats"]["yielded"] == len(frames)
    assert run["summary"]["events"] == len(triggers)
    assert [e["stamp_ns"] for e in run["events"]] == [t.stamp_ns for t in triggers]
    with EpisodeStore(store_dir, read_only=True) as store:
        recs = [store.get(i) for i in store.episode_ids()]
    rec = next(r for r in recs if r.kind == EPISODE)
    assert rec.encoder_model == models[0].model_name and not rec.encoder_pretrained
    assert rec.embedder_model == models[1].model_name and not rec.embedder_pretrained
    # beside them the place keyframes of the robot's route, as the live node keeps them:
    # one frame each, embedded by the same embedder, each place's key its pose's cell
    places = [r for r in recs if r.kind == PLACE]
    assert len(places) == summary.place_keyframes > 0
    assert places[0].stamp_ns == frames[0].stamp_ns  # the first frame: a new place
    for p in places:
        assert len(p.frame_stamps_ns) == 1 and p.pose_valid and not p.encoder_model
        assert p.embedder_model == models[1].model_name
        assert p.place_key == record_place(p, pipe.settings.places).key


def test_batch_1_and_8_give_the_same_events(
    models: tuple[VideoEncoder, ImageTextEmbedder],
    bag: Path,
    bag_run: tuple[Path, RunSummary, list[Progress], OfflinePipeline],
    tmp_path: Path,
) -> None:
    a = process(bag, tmp_path / "b1", pipeline=pipeline(models, encoder_batch=1))
    b = bag_run[1]
    assert bag_run[3].settings.encoder.encoder_batch == 8
    assert a.events == b.events > 0
    ga, gb = stored(tmp_path / "b1"), stored(bag_run[0])
    assert [g[0] for g in ga] == [g[0] for g in gb]
    assert [g[2] for g in ga] == [g[2] for g in gb]
    np.testing.assert_allclose([g[1] for g in ga], [g[1] for g in gb], rtol=1e-4)
    sa = read_scores(tmp_path / "b1" / "scores.csv")
    sb = read_scores(bag_run[0] / "scores.csv")
    np.testing.assert_array_equal(sa["stamp_ns"], sb["stamp_ns"])
    np.testing.assert_allclose(sa["score"], sb["score"], rtol=1e-4)
    assert not any(g[3] for g in ga) and all(g[3] for g in gb)  # poses only with a topic


def test_the_recordings_pose_covariance_is_each_episodes_uncertainty(
    models: tuple[VideoEncoder, ImageTextEmbedder], tmp_path: Path
) -> None:
    """An odometry topic with a covariance: each stored episode's pose says how far it can be
    trusted (goto's max_goal_uncertainty_m reads it); an all-zero one stays unknown."""
    for sigma, name in ((0.3, "known"), (None, "unknown")):
        bag = write_synthetic_bag(tmp_path / name, SCENE, pose_sigma_m=sigma)
        summary = process(bag.path, tmp_path / f"{name}-store", pipeline=pipeline(models),
                          pose_topic="/odom")  # fmt: skip
        assert summary.episodes > 0
        with EpisodeStore(tmp_path / f"{name}-store", read_only=True) as store:
            recs = [store.get(i) for i in store.episode_ids()]
        sigmas = [r.pose_trust.sigma_m for r in recs if r.kind == EPISODE]
        assert sigmas == [pytest.approx(sigma) if sigma else None] * len(sigmas), sigmas


def test_video_end_to_end(models: tuple[VideoEncoder, ImageTextEmbedder], tmp_path: Path) -> None:
    scene = dataclasses.replace(SCENE, duration_s=12.0)
    video = tmp_path / "rec.mp4"
    write_synthetic_video(video, scene)
    pipe = pipeline(models)
    summary = process(video, tmp_path / "store", pipeline=pipe)
    frames = list(open_source(video))
    triggers, episodes = live_reference(frames, pipe.settings, models[0])
    assert summary.frames == len(frames) == scene.frame_count
    assert frames[0].stamp_ns == 0  # presentation times, from 0
    assert [g[0] for g in stored(tmp_path / "store")] == [t.stamp_ns for t in triggers]
    assert summary.events == len(triggers) and summary.episodes == len(episodes)
    assert load_run_record(tmp_path / "store")["input"]["kind"] == "video"
    # a video has no poses: no place keyframe, and the summary says why
    assert summary.place_keyframes == 0
    assert summary.place_skipped == {"no_pose": len(frames)}
    assert f"none kept: {len(frames)} frames no_pose" in summary.format()
    with pytest.raises(InputError, match="poses come only from bags"):
        process(video, tmp_path / "other", pipeline=pipe, pose_topic="/odom")


def test_source_is_consumed_lazily(
    models: tuple[VideoEncoder, ImageTextEmbedder], tmp_path: Path
) -> None:
    """Constant memory: at most one batch of windows is read ahead of the processing (and,
    before the first window, the M - 1 frames that fill it)."""
    pulled = 0

    def frames() -> Iterator[Frame]:
        nonlocal pulled
        for f in synthetic_frames(SCENE):
            pulled += 1
            yield f

    ahead: list[int] = []
    pipe = pipeline(models, encoder_batch=4, gamma=100.0)  # no event: only the streaming
    pipe.run(frames(), tmp_path / "store", progress=lambda p: ahead.append(pulled - p.frames))
    assert pulled == SCENE.frame_count
    assert max(ahead) <= 4 + 8 - 1  # a batch of 4 windows (one per frame) + M - 1 = 7
    assert max(ahead[20:]) <= 4  # once windows flow: one batch
    assert len(ahead) == SCENE.frame_count


def test_refuses_a_store_holding_a_run(
    models: tuple[VideoEncoder, ImageTextEmbedder], tmp_path: Path
) -> None:
    scene = dataclasses.replace(SCENE, duration_s=3.0)
    pipe = pipeline(models)
    pipe.run(synthetic_frames(scene), tmp_path / "store")
    with pytest.raises(StoreError, match="already holds an offline run"):
        pipe.run(synthetic_frames(scene), tmp_path / "store")
    assert json.loads((tmp_path / "store" / "run.json").read_text())["summary"]["frames"] == 30
