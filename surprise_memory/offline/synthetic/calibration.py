"""The gate's gamma for a video encoder, calibrated on footage where nothing happens.

The paper's gamma = 1 is its value for V-JEPA-2, at which the gate stored 1.28 episodes per
minute of CODa robot footage, events included. Another encoder's surprise fluctuates
differently where nothing happens, so the same gamma can store far more: the project's
small ``synthetic-trained-tiny`` video model stored 6.7 episodes per minute of quiet
synthetic footage at gamma = 1 (benchmarks/RESULTS.md, issue 28, fifth pass).

* :func:`quiet_event_rates`: episodes per minute the gate decides at each gamma on scenes
  with nothing scripted (every one a false event). The scores do not depend on gamma, so
  each scene is scored once and only the gate is replayed per gamma.
* :func:`calibrate_gamma`: the smallest gamma at or below a rate (the paper's, by default).
* :func:`calibrate_video_model`: both, for a video model folder, on the validation
  scenes of :func:`quiet_scenes` (the training script records the result in the model's
  card, whose ``recommended`` settings the demo, the benchmark and the tests apply).
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from surprise_memory.offline.synthetic.scene import MODEL_SCENE, SyntheticScene, synthetic_frames
from surprise_memory.stamps import NS_PER_SECOND

if TYPE_CHECKING:
    from surprise_memory.offline.pipeline import OfflinePipeline

__all__ = [
    "CALIBRATION_GAMMAS",
    "PAPER_EPISODES_PER_MINUTE",
    "VALIDATION_SEED_BASE",
    "calibrate_gamma",
    "calibrate_video_model",
    "quiet_event_rates",
    "quiet_scenes",
]

PAPER_EPISODES_PER_MINUTE = 1.28
"""The paper's storage rate at gamma = 1: about 30 episodes per 23-minute CODa sequence."""

CALIBRATION_GAMMAS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)
"""The gammas :func:`calibrate_gamma` chooses from (the paper's 1.0 first)."""

VALIDATION_SEED_BASE = 500
"""Seeds ``500 ..`` are neither trained on nor measured: settings and gamma are chosen on them."""


def quiet_scenes(scenes: int = 6, seconds: float = 120.0) -> list[SyntheticScene]:
    """Validation scenes with nothing scripted (the models' scene options)."""
    return [
        SyntheticScene(seed=VALIDATION_SEED_BASE + i, duration_s=seconds, events=(), **MODEL_SCENE)
        for i in range(scenes)
    ]


def quiet_event_rates(
    pipeline: OfflinePipeline,
    scenes: Sequence[SyntheticScene],
    work_dir: str | Path,
    gammas: Sequence[float] = CALIBRATION_GAMMAS,
) -> dict[float, float]:
    """Events per minute of scored frames that the gate decides at each gamma on ``scenes``.

    Each scene runs through ``pipeline`` once (into a new store under ``work_dir``); the
    gate, with the pipeline's other gate settings, is replayed on its ``scores.csv`` for
    each gamma.
    """
    from surprise_memory.offline.run_record import SCORES_CSV, read_scores
    from surprise_memory.surprise.gate import SurpriseGate

    series = []
    for i, scene in enumerate(scenes):
        folder = Path(work_dir) / f"quiet-{i}-seed-{scene.seed}"
        pipeline.run(synthetic_frames(scene), folder)
        scores = read_scores(folder / SCORES_CSV)
        series.append((scores["stamp_ns"].tolist(), scores["score"].tolist()))
    minutes = sum((s[-1] - s[0]) / (60 * NS_PER_SECOND) for s, _ in series if len(s) > 1)
    rates = {}
    for gamma in gammas:
        gate_config = dataclasses.replace(pipeline.settings.gate, gamma=gamma)
        events = 0
        for stamps, values in series:
            gate = SurpriseGate.from_config(gate_config)
            for stamp, value in zip(stamps, values, strict=True):
                events += len(gate.push(stamp, value))
            events += len(gate.flush())
        rates[float(gamma)] = events / minutes if minutes > 0 else float("nan")
    return rates


def calibrate_gamma(
    rates: Mapping[float, float], per_minute: float = PAPER_EPISODES_PER_MINUTE
) -> float | None:
    """The smallest gamma of ``rates`` (from :func:`quiet_event_rates`) at or below ``per_minute``.

    None when no gamma keeps quiet footage that quiet.
    """
    under = [gamma for gamma, rate in rates.items() if rate <= per_minute]
    return min(under) if under else None


def calibrate_video_model(
    video: str,
    clip_frames: int,
    log: Callable[[str], None] | None = None,
    scenes: int = 6,
    seconds: float = 120.0,
) -> tuple[float, dict[str, Any]]:
    """The calibrated gamma of the video model ``video`` (its ``encoder_weights``), and a record.

    Runs the offline pipeline (``clip_frames``, the other settings at their defaults) over
    :func:`quiet_scenes`. The record (for a model card) holds the rule, the seeds and every
    gamma's rate.

    Raises:
        ConfigError: No gamma of :data:`CALIBRATION_GAMMAS` keeps the scenes that quiet.

    """
    from surprise_memory.errors import ConfigError
    from surprise_memory.offline.pipeline import OfflinePipeline, PipelineSettings
    from surprise_memory.perception.encoders.presets import SYNTHETIC_EMBEDDER_MODEL

    pipeline = OfflinePipeline(
        PipelineSettings.from_mapping(
            {
                "encoder_weights": video,
                "encoder_device": "cpu",
                "clip_frames": clip_frames,
                # the surprise does not depend on the embedder: an untrained one will do
                "embedder_model": SYNTHETIC_EMBEDDER_MODEL,
                "embedder_weights": "random",
                "embedder_device": "cpu",
            }
        )
    )
    quiet = quiet_scenes(scenes, seconds)
    with tempfile.TemporaryDirectory() as tmp:
        rates = quiet_event_rates(pipeline, quiet, tmp)
    if log is not None:
        log("quiet episodes per minute: " + ", ".join(f"{g}: {r:.2f}" for g, r in rates.items()))
    gamma = calibrate_gamma(rates)
    if gamma is None:
        raise ConfigError(
            f"no gamma keeps the quiet scenes at or below {PAPER_EPISODES_PER_MINUTE} "
            f"episodes per minute: {rates}"
        )
    record = {
        "rule": (
            "smallest gamma whose gate stores at most the paper's "
            f"{PAPER_EPISODES_PER_MINUTE} episodes per minute on quiet validation scenes"
        ),
        "seeds": [quiet[0].seed, quiet[-1].seed],
        "seconds": seconds,
        "episodes_per_minute": {str(g): round(r, 3) for g, r in rates.items()},
    }
    return gamma, record
