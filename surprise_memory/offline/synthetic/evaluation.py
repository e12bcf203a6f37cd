"""Scoring a pipeline on a synthetic scene: scripted events found, sentences answered.

:func:`evaluate_scene` runs the offline pipeline (the gate as configured) over a scene's
frames into a new store, then checks two things against the ground truth:

* **events**: each scripted event is *found* when a decided event lies within
  :data:`MATCH_S` seconds of its start (greedy, each event used once);
  :func:`f1_counts` sums true positives, scripted events and decided events for an F1;
* **text retrieval**: for each scripted event kind and each held-out paraphrase
  (:data:`~.captions.HELD_OUT_QUERIES`), the rank of the first episode that shows an event
  of that kind (:func:`episode_event`), so recall@k follows.

The demo, the tests and ``benchmarks/bench_synthetic_models.py`` share it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from surprise_memory.memory.places import EPISODE
from surprise_memory.offline.synthetic.captions import HELD_OUT_QUERIES
from surprise_memory.offline.synthetic.scene import (
    SyntheticScene,
    ground_truth,
    synthetic_frames,
    synthetic_odometry,
)
from surprise_memory.stamps import NS_PER_SECOND

if TYPE_CHECKING:
    from surprise_memory.offline.pipeline import OfflinePipeline

__all__ = [
    "MATCH_S",
    "SceneEvaluation",
    "episode_event",
    "evaluate_scene",
    "f1_counts",
    "match_events",
]

MATCH_S = 1.0
"""A scripted event is found when a decided event lies within this many seconds of its start."""


def match_events(
    found_s: Sequence[float],
    truth_s: Sequence[float],
    truth_end_s: Sequence[float] | None = None,
) -> list[float | None]:
    """For each scripted event, the nearest decided event within :data:`MATCH_S` (or None).

    The distance is to the event's start, or, with ``truth_end_s``, to its span
    ``[start, end]`` (0 inside it: a person seen mid-crossing is that crossing). Greedy in
    the order of ``truth_s``; each decided event matches at most once.
    """
    ends = list(truth_s) if truth_end_s is None else list(truth_end_s)
    used: set[int] = set()
    out: list[float | None] = []
    for t, end in zip(truth_s, ends, strict=True):
        near = [(max(t - f, f - end, 0.0), i) for i, f in enumerate(found_s) if i not in used]
        best = min(near, default=None)
        if best is None or best[0] > MATCH_S:
            out.append(None)
            continue
        used.add(best[1])
        out.append(found_s[best[1]])
    return out


def f1_counts(tp: int, scripted: int, decided: int) -> tuple[float, float, float]:
    """(precision, recall, F1) from counts; 0 where undefined."""
    precision = tp / decided if decided else 0.0
    recall = tp / scripted if scripted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def episode_event(offset_s: float, truth: Mapping[str, Any], margin_s: float = 2.0) -> str | None:
    """The scripted event an episode peaking ``offset_s`` after the start shows, if any.

    Of the events whose span, widened by ``margin_s`` each side (the episode's reach),
    holds the peak: the one whose start is nearest.
    """
    best: tuple[float, str] | None = None
    for ev in truth["events"]:
        if ev["start_s"] - margin_s <= offset_s <= ev["end_s"] + margin_s:
            gap = abs(offset_s - ev["start_s"])
            if best is None or gap < best[0]:
                best = (gap, str(ev["name"]))
    return None if best is None else best[1]


@dataclass
class SceneEvaluation:
    """What :func:`evaluate_scene` found on one scene.

    Attributes:
        seed: The scene's seed.
        events_s: Decided events, seconds from the start.
        matches: Per scripted event (in order): the decided event within
            :data:`MATCH_S` of its start, or None.
        span_matches: The same, within :data:`MATCH_S` of its span (start to end).
        kinds: The scripted events' kinds, in order.
        ranks: Per (kind, query): 1-based rank of the first episode of that kind among
            the text hits (None: not among them, or text search unavailable).

    """

    seed: int
    events_s: list[float]
    matches: list[float | None]
    span_matches: list[float | None]
    kinds: list[str]
    ranks: dict[tuple[str, str], int | None] = field(default_factory=dict)

    @property
    def found(self) -> int:
        """Scripted events found (within :data:`MATCH_S` of the start)."""
        return sum(m is not None for m in self.matches)

    @property
    def found_in_span(self) -> int:
        """Scripted events found (within :data:`MATCH_S` of the span)."""
        return sum(m is not None for m in self.span_matches)


def evaluate_scene(
    pipeline: OfflinePipeline,
    scene: SyntheticScene,
    store_dir: str | Path,
    *,
    queries: Mapping[str, Sequence[str]] | None = None,
    max_results: int = 5,
    text_on_random: bool = False,
) -> SceneEvaluation:
    """Run ``pipeline`` over ``scene`` (poses from its odometry) into ``store_dir``; score it.

    Text queries run only when the pipeline's embedder is trained, or ``text_on_random``
    (for a benchmark's random baseline; ``ranks`` stays empty otherwise); each is embedded
    by that embedder and searched in the store.
    """
    from surprise_memory.memory.store import EpisodeStore
    from surprise_memory.sources.pose_lookup import SampledPoseLookup

    truth = ground_truth(scene)
    poses = SampledPoseLookup(
        [(o.stamp_ns, o.pose) for o in synthetic_odometry(scene)],
        frame_id=scene.odom_frame,
        child_frame_id=scene.base_frame,
    )
    pipeline.run(
        synthetic_frames(scene),
        store_dir,
        pose_lookup=poses,
        input_info={"synthetic_seed": scene.seed},
    )
    run = json.loads((Path(store_dir) / "run.json").read_text(encoding="utf-8"))
    events = [(e["stamp_ns"] - scene.start_ns) / NS_PER_SECOND for e in run["events"]]
    kinds = [str(ev["name"]) for ev in truth["events"]]
    starts = [ev["start_s"] for ev in truth["events"]]
    ends = [ev["end_s"] for ev in truth["events"]]
    result = SceneEvaluation(
        scene.seed,
        events,
        match_events(events, starts),
        match_events(events, starts, ends),
        kinds,
    )
    if not (pipeline.embedder.pretrained or text_on_random):
        return result
    table = HELD_OUT_QUERIES if queries is None else queries
    with EpisodeStore(store_dir, read_only=True) as store:
        for kind in dict.fromkeys(kinds):
            for text in table.get(kind, ()):
                q = pipeline.embedder.embed_text([text])[0]
                hits = store.search(
                    embedding=q,
                    embedder_model=pipeline.embedder.model_name,
                    max_results=max_results,
                    kinds=frozenset({EPISODE}),  # the surprise episodes' ranks, not the places'
                )
                rank = None
                for i, hit in enumerate(hits, start=1):
                    offset = (hit.episode.stamp_ns - scene.start_ns) / NS_PER_SECOND
                    if episode_event(offset, truth) == kind:
                        rank = i
                        break
                result.ranks[(kind, text)] = rank
    return result
