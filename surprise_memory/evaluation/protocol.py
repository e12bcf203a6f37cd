"""The Kinetics-GEBD / TAPOS evaluation protocol: matching and scoring boundaries.

Generic event boundary detection (Shou et al., "Generic Event Boundary Detection: A
Benchmark for Event Segmentation", ICCV 2021) is scored by the evaluation of the LOVEU
challenge (``Challenge_eval_Code/eval.py`` of the Kinetics-GEBD repository, and the
``do_eval`` function that later GEBD code bases share). This module re-implements its
semantics; every rule below was checked against that script:

1. **Ground truth.** A pickle ``{video_id: record}`` as released
   (``k400_mr345_val_min_change_duration0.3.pkl``): ``video_duration`` (seconds),
   ``f1_consis_avg`` (the annotators' mutual consistency), ``substages_timestamps`` (one
   list of boundary times in seconds per annotator; an annotator may have none), plus
   ``fps``, ``num_frames``, ``path_video``, ``substages_myframeidx`` ... that the scoring
   does not read. Only the first three are required here.
2. **Consistency filter.** A video with ``f1_consis_avg < 0.3`` is left out entirely (its
   predictions and its boundaries count nowhere); 0.3 itself is kept.
3. **Predictions** ``{video_id: [seconds, ...]}``. Ids absent from the ground truth are
   ignored. Per video, predictions outside ``[0, video_duration]`` (both ends included)
   are dropped; the rest are kept in the given order, duplicates included.
4. **No prediction.** A kept video whose id is absent from the predictions, or whose
   prediction list is empty after step 3, adds the number of boundaries of its *first*
   annotator (``substages_timestamps[0]``, there is no detection to pick a better one by)
   to the positives, all missed, and nothing to the detections. (The very first 2021
   challenge script skipped absent ids instead; ``missing="skip"`` reproduces that.)
5. **Matching, per annotator.** With tolerance ``threshold * video_duration`` (seconds), the
   annotator's boundaries are visited in their stored order; each takes the nearest
   detection still unmatched (the first one on a tie) if its distance is ``<=`` the
   tolerance, and that detection is then used up. This is greedy, not an optimal
   assignment, and a boundary whose nearest detection is too far does not look further.
   Each detection matches at most once, so duplicates beyond the first are false positives.
6. **Per-annotator F1.** tp = matches, fn = positives - tp, fp = detections - tp; recall = 1
   when the annotator has no boundary, precision = 0 when tp + fp = 0, F1 = 0 when
   precision + recall = 0.
7. **Best annotator.** The annotator with the highest F1 (the first one on a tie) gives the
   video's tp and positives; the video's detections count once.
8. **Micro-average.** tp, positives and detections are summed over the videos; recall =
   tp / positives (1 when there is none), precision = tp / detections (0 when there is
   none), F1 their harmonic mean (0 when both are 0).
9. **Thresholds.** The relative distances 0.05, 0.1, ..., 0.5 (these literal floats, so a
   distance exactly at the tolerance rounds the same way as in the official loop); the
   headline figure is the plain mean of the ten F1 values (precision and recall likewise).

The files are read and checked by :mod:`surprise_memory.evaluation.annotations`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from surprise_memory.errors import ConfigError
from surprise_memory.evaluation.annotations import (
    GebdVideo,
    parse_ground_truth,
    parse_predictions,
)

__all__ = [
    "MIN_CONSISTENCY",
    "REL_DIS_THRESHOLDS",
    "GebdResult",
    "ThresholdResult",
    "VideoScore",
    "evaluate_gebd",
    "evaluate_threshold",
    "evaluate_video",
    "match_boundaries",
]

REL_DIS_THRESHOLDS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
"""Relative distance thresholds of the protocol (fraction of the video's duration)."""

MIN_CONSISTENCY = 0.3
"""Videos with ``f1_consis_avg`` below this are left out of the evaluation."""

MissingPolicy = Literal["count", "skip"]


def match_boundaries(
    truth: Sequence[float], detections: Sequence[float], tolerance_s: float
) -> int:
    """Count the true positives of one annotator by the protocol's greedy matching.

    The boundaries in ``truth`` are visited in their given order; each takes the nearest
    detection not yet used (the first one on a tie) when it lies within ``tolerance_s``
    (inclusive), using it up. A boundary whose nearest free detection is too far stays
    unmatched even if a farther assignment would have matched it.

    Args:
        truth: One annotator's boundary times, seconds, in the stored order.
        detections: Detected boundary times, seconds (after the range filter).
        tolerance_s: Largest distance of a match, seconds.

    Returns:
        The number of matched boundaries (tp).

    """
    free = list(detections)
    tp = 0
    for t in truth:
        if not free:
            break
        best = min(range(len(free)), key=lambda j: abs(t - free[j]))
        if abs(t - free[best]) <= tolerance_s:
            tp += 1
            del free[best]
    return tp


def _prf(tp: int, num_pos: int, num_det: int) -> tuple[float, float, float]:
    """(precision, recall, F1) with the protocol's conventions for empty counts."""
    recall = 1.0 if num_pos == 0 else tp / num_pos
    precision = 0.0 if num_det == 0 else tp / num_det
    f1 = 0.0 if precision + recall == 0 else 2 * recall * precision / (recall + precision)
    return precision, recall, f1


@dataclass(frozen=True)
class VideoScore:
    """How one video counts at one threshold.

    Attributes:
        video_id: The video.
        status: ``"evaluated"``; ``"no_prediction"`` (absent, or empty after the range
            filter: its first annotator's boundaries count as missed); ``"skipped"``
            (``f1_consis_avg`` below 0.3, or absent with ``missing="skip"``).
        annotator: Index of the best-F1 annotator (None unless evaluated).
        tp: Matched boundaries of that annotator.
        num_pos: Boundaries of that annotator (of annotator 0 for ``no_prediction``).
        num_det: Detections kept after the range filter.
        dropped: Detections dropped for lying outside ``[0, duration]``.
        f1: F1 of this video alone against the chosen annotator.

    """

    video_id: str
    status: Literal["evaluated", "no_prediction", "skipped"]
    annotator: int | None
    tp: int
    num_pos: int
    num_det: int
    dropped: int
    f1: float


def evaluate_video(
    video: GebdVideo,
    detections: Sequence[float] | None,
    threshold: float,
    *,
    missing: MissingPolicy = "count",
) -> VideoScore:
    """Score one video at one relative distance threshold (protocol steps 2-7).

    Args:
        video: The video's ground truth.
        detections: Its predicted boundary times in seconds, None when it has no entry.
        threshold: Relative distance; the tolerance is ``threshold * video.duration_s``.
        missing: ``"count"`` (default, the challenge's later script): an absent video's
            boundaries count as missed; ``"skip"`` (the first 2021 script): it is left out.

    Returns:
        The video's counts.

    """
    skipped = VideoScore(video.video_id, "skipped", None, 0, 0, 0, 0, 0.0)
    if video.consistency < MIN_CONSISTENCY:
        return skipped
    if detections is None and missing == "skip":
        return skipped
    all_det = [] if detections is None else list(detections)
    kept = [d for d in all_det if 0.0 <= d <= video.duration_s]
    dropped = len(all_det) - len(kept)
    if not kept:
        return VideoScore(
            video.video_id, "no_prediction", None, 0, len(video.annotations[0]), 0, dropped, 0.0
        )
    tolerance = threshold * video.duration_s
    best = (-1.0, 0, 0, 0)  # f1, annotator, tp, num_pos
    for k, truth in enumerate(video.annotations):
        tp = match_boundaries(truth, kept, tolerance)
        f1 = _prf(tp, len(truth), len(kept))[2]
        if f1 > best[0]:  # strict: the first annotator wins a tie, like argmax
            best = (f1, k, tp, len(truth))
    f1, k, tp, num_pos = best
    return VideoScore(video.video_id, "evaluated", k, tp, num_pos, len(kept), dropped, f1)


@dataclass(frozen=True)
class ThresholdResult:
    """Dataset totals at one relative distance threshold (micro-averaged)."""

    threshold: float
    tp: int
    num_pos: int
    num_det: int

    @property
    def precision(self) -> float:
        """Matched detections / detections (0 without detections)."""
        return _prf(self.tp, self.num_pos, self.num_det)[0]

    @property
    def recall(self) -> float:
        """Matched boundaries / positives (1 without positives)."""
        return _prf(self.tp, self.num_pos, self.num_det)[1]

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall (0 when both are 0)."""
        return _prf(self.tp, self.num_pos, self.num_det)[2]


def _as_ground_truth(ground_truth: Mapping[str, Any]) -> dict[str, GebdVideo]:
    if all(isinstance(v, GebdVideo) for v in ground_truth.values()):
        return dict(ground_truth)
    return parse_ground_truth(ground_truth)


def evaluate_threshold(
    ground_truth: Mapping[str, Any],
    predictions: Mapping[str, Sequence[float]],
    threshold: float,
    *,
    missing: MissingPolicy = "count",
) -> ThresholdResult:
    """F1 / precision / recall over a dataset at one threshold (protocol steps 1-8).

    Args:
        ground_truth: Parsed (:func:`parse_ground_truth`) or raw ground truth.
        predictions: ``{video_id: [seconds, ...]}``; ids not in the ground truth are ignored.
        threshold: Relative distance, a fraction of each video's duration.
        missing: See :func:`evaluate_video`.

    Raises:
        InputError: Malformed ground truth or predictions.
        ConfigError: ``threshold`` not in (0, 1] or ``missing`` unknown.

    """
    _check_threshold(threshold)
    _check_missing(missing)
    gt = _as_ground_truth(ground_truth)
    preds = parse_predictions(predictions)
    tp = num_pos = num_det = 0
    for vid, video in gt.items():
        score = evaluate_video(video, preds.get(vid), threshold, missing=missing)
        tp += score.tp
        num_pos += score.num_pos
        num_det += score.num_det
    return ThresholdResult(threshold=threshold, tp=tp, num_pos=num_pos, num_det=num_det)


def _check_threshold(threshold: float) -> None:
    if not (isinstance(threshold, int | float) and 0.0 < threshold <= 1.0):
        raise ConfigError(f"threshold={threshold!r}: must be a relative distance in (0, 1]")


def _check_missing(missing: str) -> None:
    if missing not in ("count", "skip"):
        raise ConfigError(f"missing={missing!r}: must be one of count, skip")


@dataclass(frozen=True)
class GebdResult:
    """The protocol's results over a dataset, one entry per threshold.

    Attributes:
        per_threshold: Totals at each relative distance threshold.
        videos: Number of videos in the ground truth.
        evaluated: Videos scored with at least one kept detection.
        no_prediction: Kept videos with no (kept) detection: their boundaries all missed.
        skipped: Videos left out (``f1_consis_avg`` < 0.3, or absent with ``missing="skip"``).
        dropped_detections: Detections outside ``[0, duration]`` of their video.
        unknown_ids: Prediction ids not in the ground truth (ignored).

    """

    per_threshold: tuple[ThresholdResult, ...]
    videos: int
    evaluated: int
    no_prediction: int
    skipped: int
    dropped_detections: int
    unknown_ids: int

    @property
    def thresholds(self) -> tuple[float, ...]:
        """The relative distance thresholds."""
        return tuple(r.threshold for r in self.per_threshold)

    @property
    def mean_f1(self) -> float:
        """Mean of the F1 values over the thresholds (the headline figure)."""
        return float(np.mean([r.f1 for r in self.per_threshold]))

    @property
    def mean_precision(self) -> float:
        """Mean of the precision values over the thresholds."""
        return float(np.mean([r.precision for r in self.per_threshold]))

    @property
    def mean_recall(self) -> float:
        """Mean of the recall values over the thresholds."""
        return float(np.mean([r.recall for r in self.per_threshold]))

    def f1_at(self, threshold: float) -> float:
        """F1 at one of the evaluated thresholds.

        Raises:
            ConfigError: ``threshold`` was not evaluated.

        """
        for r in self.per_threshold:
            if math.isclose(r.threshold, threshold, rel_tol=0.0, abs_tol=1e-9):
                return r.f1
        raise ConfigError(f"threshold={threshold!r}: not evaluated (have {self.thresholds})")

    def as_dict(self) -> dict[str, Any]:
        """Plain data for a JSON report."""
        return {
            "thresholds": list(self.thresholds),
            "f1": [r.f1 for r in self.per_threshold],
            "precision": [r.precision for r in self.per_threshold],
            "recall": [r.recall for r in self.per_threshold],
            "tp": [r.tp for r in self.per_threshold],
            "num_pos": [r.num_pos for r in self.per_threshold],
            "num_det": [r.num_det for r in self.per_threshold],
            "mean": {
                "f1": self.mean_f1,
                "precision": self.mean_precision,
                "recall": self.mean_recall,
            },
            "videos": {
                "total": self.videos,
                "evaluated": self.evaluated,
                "no_prediction": self.no_prediction,
                "skipped": self.skipped,
            },
            "dropped_detections": self.dropped_detections,
            "unknown_ids": self.unknown_ids,
        }

    def format_table(self, title: str = "GEBD") -> str:
        """The per-threshold F1 / precision / recall as a text table, mean last."""
        head = f"{'Rel.Dis.':<10}" + "".join(f"{t:>7.2f}" for t in self.thresholds) + "    mean"
        lines = [
            f"[{title}] {self.evaluated} videos scored, {self.no_prediction} without "
            f"prediction, {self.skipped} skipped",
            head,
        ]
        for name, values, mean in (
            ("F1", [r.f1 for r in self.per_threshold], self.mean_f1),
            ("Precision", [r.precision for r in self.per_threshold], self.mean_precision),
            ("Recall", [r.recall for r in self.per_threshold], self.mean_recall),
        ):
            lines.append(f"{name:<10}" + "".join(f"{v:>7.3f}" for v in values) + f"{mean:>8.3f}")
        return "\n".join(lines)


def evaluate_gebd(
    ground_truth: Mapping[str, Any],
    predictions: Mapping[str, Sequence[float]],
    thresholds: Sequence[float] = REL_DIS_THRESHOLDS,
    *,
    missing: MissingPolicy = "count",
) -> GebdResult:
    """Evaluate predictions by the Kinetics-GEBD protocol at each threshold.

    Args:
        ground_truth: Parsed (:func:`parse_ground_truth`) or raw ground truth.
        predictions: ``{video_id: [seconds, ...]}``.
        thresholds: Relative distance thresholds (default: 0.05 .. 0.50 in steps of 0.05).
        missing: ``"count"`` (default) or ``"skip"``, see :func:`evaluate_video`.

    Returns:
        Totals per threshold and the video counts.

    Raises:
        InputError: Malformed ground truth or predictions.
        ConfigError: A threshold not in (0, 1], no threshold, or ``missing`` unknown.

    """
    if len(thresholds) == 0:
        raise ConfigError("thresholds: give at least one relative distance")
    for t in thresholds:
        _check_threshold(t)
    _check_missing(missing)
    gt = _as_ground_truth(ground_truth)
    preds = parse_predictions(predictions)
    per = tuple(evaluate_threshold(gt, preds, t, missing=missing) for t in thresholds)
    # video counts do not depend on the threshold: take them at the first one
    scores = [
        evaluate_video(v, preds.get(k), thresholds[0], missing=missing) for k, v in gt.items()
    ]
    return GebdResult(
        per_threshold=per,
        videos=len(gt),
        evaluated=sum(s.status == "evaluated" for s in scores),
        no_prediction=sum(s.status == "no_prediction" for s in scores),
        skipped=sum(s.status == "skipped" for s in scores),
        dropped_detections=sum(s.dropped for s in scores),
        unknown_ids=sum(vid not in gt for vid in preds),
    )
