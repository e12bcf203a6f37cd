"""Habituation on a recording where one event recurs: repeats stored, novel events found, rate.

The synthetic scene of :func:`~surprise_memory.offline.synthetic.recurring_events` shows the
same panel N times among M novel events, with ground truth. One pass runs the paper's
scorer and gate over an embedding stream; every gate candidate then goes (a) straight to
memory, as in the paper, and (b) through
:class:`~surprise_memory.surprise.habituation.Habituation`. For each: how many of the N
passes got an event (goal with habituation: at most 2), how many of the M novel events got
one (goal: as many as the paper's gate), and events per minute.

An occurrence counts as found when an event's stamp lies in [start - ``match_before_s``,
end + ``match_after_s``] of it (the window encoder sees a change a little after it
starts; a panel also surprises when it leaves).

Two embedding streams are offered, because the tiny random V-JEPA-2 preset the tests run
carries no learned meaning: :func:`encoder_embeddings` (the real architecture; with
trained weights this is the real measurement) and :func:`signature_embeddings` (the
generator's colour thumbnail :func:`~surprise_memory.offline.synthetic.frame_signature`, a
deterministic, ground-truth-free signal that shows the mechanism on content a model
would certainly tell apart). On this scene both separate the panel from the novel events
(see :mod:`surprise_memory.surprise.habituation`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from surprise_memory.config import GateConfig, HabituationConfig, ScorerConfig
from surprise_memory.offline.synthetic import (
    RECURRING_KIND,
    SyntheticScene,
    frame_signature,
    ground_truth,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.habituation import Habituation
from surprise_memory.surprise.scorer import SurpriseScorer

if TYPE_CHECKING:
    from surprise_memory.config import EncoderConfig
    from surprise_memory.perception.encoders import VideoEncoder

__all__ = [
    "GateFigures",
    "HabituationEvaluation",
    "encoder_embeddings",
    "evaluate_habituation",
    "signature_embeddings",
]

Embeddings = tuple[list[int], npt.NDArray[np.float64]]
"""Stamps (int ns) and one embedding per stamp (rows)."""


@dataclass(frozen=True)
class GateFigures:
    """The figures of one gate on the recurring-event scene.

    Attributes:
        name: Which gate ("paper gate", "habituation").
        repeats: N, passes of the recurring panel.
        repeats_stored: Passes with at least one event.
        novel: M, novel events.
        novel_found: Novel events with at least one event.
        events: Events kept (episodes that would be stored).
        suppressed: Gate candidates suppressed.
        per_minute: ``events`` per minute of the recording.
        found_novel: Which novel events were found (by index in the ground truth's order).

    """

    name: str
    repeats: int
    repeats_stored: int
    novel: int
    novel_found: int
    events: int
    suppressed: int
    per_minute: float
    found_novel: tuple[int, ...] = ()


@dataclass(frozen=True)
class HabituationEvaluation:
    """The evaluation's result: one row per gate, and what produced it."""

    signal: str
    duration_s: float
    paper: GateFigures
    habituation: GateFigures
    settings: dict[str, Any]

    def format(self) -> str:
        """A small table for the terminal (and the CI log)."""
        lines = [
            f"recurring-event scene, {self.duration_s:.0f} s, embeddings: {self.signal}",
            f"{'gate':<14}{'repeats stored':>16}{'novel found':>13}{'events':>8}"
            f"{'suppressed':>12}{'per minute':>12}",
        ]
        for row in (self.paper, self.habituation):
            lines.append(
                f"{row.name:<14}{f'{row.repeats_stored} of {row.repeats}':>16}"
                f"{f'{row.novel_found} of {row.novel}':>13}{row.events:>8}"
                f"{row.suppressed:>12}{row.per_minute:>12.2f}"
            )
        return "\n".join(lines)


def signature_embeddings(frames: Iterable[Frame]) -> Embeddings:
    """The frames' colour-thumbnail signatures (model-free, ground-truth-free)."""
    stamps, rows = [], []
    for frame in frames:
        stamps.append(frame.stamp_ns)
        rows.append(frame_signature(frame))
    return stamps, np.asarray(rows, dtype=np.float64)


def encoder_embeddings(
    frames: Iterable[Frame], encoder: VideoEncoder, config: EncoderConfig
) -> Embeddings:
    """The window embeddings z_t of a video encoder, batched, with their windows' stamps."""
    sampler = encoder.make_sampler(config)
    stamps: list[int] = []
    windows: list[npt.NDArray[np.uint8]] = []
    rows: list[npt.NDArray[np.float32]] = []
    for frame in frames:
        window = sampler.push(frame)
        if window is None:
            continue
        stamps.append(window.stamp_ns)
        windows.append(np.array(window.frames))
        if len(windows) == config.encoder_batch:
            rows += list(encoder.encode_windows(windows, prepared=True))
            windows = []
    if windows:
        rows += list(encoder.encode_windows(windows, prepared=True))
    return stamps, np.asarray(rows, dtype=np.float64)


def evaluate_habituation(
    scene: SyntheticScene,
    embeddings: Embeddings,
    *,
    signal: str,
    scorer: ScorerConfig | None = None,
    gate: GateConfig | None = None,
    habituation: HabituationConfig | None = None,
    match_before_s: float = 0.5,
    match_after_s: float = 2.0,
) -> HabituationEvaluation:
    """Run the paper's gate, with and without habituation, and score both on the truth.

    Args:
        scene: The scene the embeddings come from (its ground truth is used).
        embeddings: Stamps and embeddings (:func:`signature_embeddings`,
            :func:`encoder_embeddings`).
        signal: What the embeddings are, for the printout.
        scorer: Scorer settings (default: the paper's W = 64).
        gate: Gate settings (default: the paper's).
        habituation: Habituation settings (``habituation`` is forced on).
        match_before_s: An event this long before an occurrence still counts for it.
        match_after_s: An event this long after an occurrence's end still counts for it.

    Returns:
        One row for the paper's gate, one with habituation.

    """
    scorer_cfg = scorer or ScorerConfig()
    gate_cfg = gate or GateConfig()
    hab_cfg = HabituationConfig(
        **{**(habituation or HabituationConfig()).as_dict(), "habituation": True}
    )
    sc = SurpriseScorer.from_config(scorer_cfg)
    gt = SurpriseGate.from_config(gate_cfg)
    hab = Habituation(hab_cfg, gt.max_delay_ns)
    candidates: list[int] = []
    kept: list[int] = []
    stamps, z = embeddings
    for stamp, row in zip(stamps, z, strict=True):
        deviation = row - sc.mean if sc.ready else None
        result = sc.update(row)
        if result is None or deviation is None:
            continue
        hab.observe(stamp, deviation)
        for trigger in gt.push(stamp, result.score, result.kl):
            candidates.append(trigger.stamp_ns)
            if hab.push(trigger).kept:
                kept.append(trigger.stamp_ns)
    for trigger in gt.flush():
        candidates.append(trigger.stamp_ns)
        if hab.push(trigger).kept:
            kept.append(trigger.stamp_ns)
    truth = ground_truth(scene)["events"]
    settings = {
        "scorer": scorer_cfg.as_dict(),
        "gate": gate_cfg.as_dict(),
        "habituation": hab_cfg.as_dict(),
        "match_before_s": match_before_s,
        "match_after_s": match_after_s,
    }

    def figures(name: str, events: Sequence[int]) -> GateFigures:
        found = [
            any(
                e["start_ns"] - match_before_s * NS_PER_SECOND
                <= s
                <= e["end_ns"] + match_after_s * NS_PER_SECOND
                for s in events
            )
            for e in truth
        ]
        repeat = [e["name"] == RECURRING_KIND for e in truth]
        novel_idx = tuple(
            i for i, (f, r) in enumerate(zip(found, repeat, strict=True)) if f and not r
        )
        return GateFigures(
            name=name,
            repeats=sum(repeat),
            repeats_stored=sum(f for f, r in zip(found, repeat, strict=True) if r),
            novel=len(truth) - sum(repeat),
            novel_found=len(novel_idx),
            events=len(events),
            suppressed=len(candidates) - len(events),
            per_minute=len(events) / (scene.duration_s / 60.0),
            found_novel=novel_idx,
        )

    return HabituationEvaluation(
        signal=signal,
        duration_s=scene.duration_s,
        paper=figures("paper gate", candidates),
        habituation=figures("habituation", kept),
        settings=settings,
    )
