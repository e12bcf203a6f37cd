"""Kinetics-GEBD / TAPOS evaluation protocol, and the surprise detector run per video.

Protocol
========
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

Detector
========
:class:`GebdDetector` runs the project's own
:class:`~surprise_memory.surprise.scorer.SurpriseScorer` and
:class:`~surprise_memory.surprise.gate.SurpriseGate`, reset per video, over the embeddings of one
video and returns boundary times in seconds, from the causal gate and from the "offline"
variant whose tau is computed over the whole video at once (:func:`offline_peaks`).

Security: the ground truth and prediction files are pickles, and loading a pickle can run
code. Load only files you trust (the released annotation, your own predictions).
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseGate
from surprise_memory.surprise.robust import MAD_TO_SIGMA
from surprise_memory.surprise.scorer import SurpriseScorer

__all__ = [
    "MIN_CONSISTENCY",
    "PAPER_GEBD_ROW",
    "REL_DIS_THRESHOLDS",
    "GebdDetection",
    "GebdDetector",
    "GebdResult",
    "GebdVideo",
    "TableRow",
    "ThresholdResult",
    "VideoScore",
    "evaluate_gebd",
    "evaluate_threshold",
    "evaluate_video",
    "format_comparison_table",
    "frame_stamps_ns",
    "load_ground_truth",
    "load_predictions",
    "match_boundaries",
    "measured_row",
    "offline_peaks",
    "parse_ground_truth",
    "parse_predictions",
    "print_comparison_table",
    "save_predictions",
]

REL_DIS_THRESHOLDS: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
"""Relative distance thresholds of the protocol (fraction of the video's duration)."""

MIN_CONSISTENCY = 0.3
"""Videos with ``f1_consis_avg`` below this are left out of the evaluation."""

MissingPolicy = Literal["count", "skip"]


# --------------------------------------------------------------------------------------------
# Ground truth and predictions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GebdVideo:
    """The ground truth of one video, as read from the annotation pickle.

    Attributes:
        video_id: The key of the video in the pickle (a YouTube id for Kinetics-GEBD).
        duration_s: ``video_duration`` in seconds (> 0); tolerances are fractions of it.
        consistency: ``f1_consis_avg``; below :data:`MIN_CONSISTENCY` the video is skipped.
        annotations: ``substages_timestamps``: per annotator, boundary times in seconds in
            the stored order (the order matters for the greedy matching).
        fps: ``fps`` when present (not used by the scoring), else None.
        num_frames: ``num_frames`` when present (not used by the scoring), else None.

    """

    video_id: str
    duration_s: float
    consistency: float
    annotations: tuple[tuple[float, ...], ...]
    fps: float | None = None
    num_frames: int | None = None


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"{what}: expected a number, got {type(value).__name__} {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise InputError(f"{what}: expected a finite number, got {x!r}")
    return x


def _times(values: Any, what: str) -> tuple[float, ...]:
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise InputError(f"{what}: expected a 1-D list of seconds, got shape {values.shape}")
        values = values.tolist()
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InputError(f"{what}: expected a list of seconds, got {type(values).__name__}")
    return tuple(_number(v, f"{what}[{i}]") for i, v in enumerate(values))


def _video_from_record(video_id: str, record: Any) -> GebdVideo:
    where = f"ground truth video {video_id!r}"
    if not isinstance(record, Mapping):
        raise InputError(f"{where}: expected a dict per video, got {type(record).__name__}")
    missing = [
        k for k in ("video_duration", "f1_consis_avg", "substages_timestamps") if k not in record
    ]
    if missing:
        raise InputError(
            f"{where}: missing key(s) {', '.join(missing)} (expected the Kinetics-GEBD format: "
            "video_duration, f1_consis_avg, substages_timestamps per video)"
        )
    duration = _number(record["video_duration"], f"{where} video_duration")
    if duration <= 0:
        raise InputError(f"{where}: video_duration={duration!r} must be > 0 seconds")
    consistency = _number(record["f1_consis_avg"], f"{where} f1_consis_avg")
    raters = record["substages_timestamps"]
    if isinstance(raters, str | bytes) or not isinstance(raters, Sequence) or len(raters) == 0:
        raise InputError(
            f"{where}: substages_timestamps must be a non-empty list with one list of "
            f"seconds per annotator, got {raters!r:.80}"
        )
    annotations = tuple(
        _times(r, f"{where} substages_timestamps[{i}]") for i, r in enumerate(raters)
    )
    fps = record.get("fps")
    num_frames = record.get("num_frames")
    return GebdVideo(
        video_id=video_id,
        duration_s=duration,
        consistency=consistency,
        annotations=annotations,
        fps=None if fps is None else _number(fps, f"{where} fps"),
        num_frames=None if num_frames is None else int(_number(num_frames, f"{where} num_frames")),
    )


def parse_ground_truth(data: Any) -> dict[str, GebdVideo]:
    """Check and convert a ground-truth mapping (the unpickled annotation file).

    Args:
        data: ``{video_id: {"video_duration": s, "f1_consis_avg": x,
            "substages_timestamps": [[s, ...], ...], ...}}``; values that already are
            :class:`GebdVideo` pass through.

    Returns:
        ``{video_id: GebdVideo}`` in the given order.

    Raises:
        InputError: Not a mapping, a key is not a string, or a record is malformed (the
            message names the video and the field).

    """
    if not isinstance(data, Mapping):
        raise InputError(
            f"ground truth: expected a dict {{video_id: record}}, got {type(data).__name__}"
        )
    out: dict[str, GebdVideo] = {}
    for vid, record in data.items():
        if not isinstance(vid, str):
            raise InputError(f"ground truth: video ids must be strings, got {vid!r}")
        out[vid] = record if isinstance(record, GebdVideo) else _video_from_record(vid, record)
    return out


def parse_predictions(data: Any) -> dict[str, tuple[float, ...]]:
    """Check and convert predictions ``{video_id: [seconds, ...]}``.

    Args:
        data: A mapping from video id to a list (or 1-D array) of boundary times in seconds.

    Returns:
        ``{video_id: (seconds, ...)}`` with order and duplicates kept (both matter).

    Raises:
        InputError: Not a mapping, a key is not a string, or a value is not a list of
            finite numbers.

    """
    if not isinstance(data, Mapping):
        raise InputError(
            f"predictions: expected a dict {{video_id: [seconds, ...]}}, got {type(data).__name__}"
        )
    out: dict[str, tuple[float, ...]] = {}
    for vid, times in data.items():
        if not isinstance(vid, str):
            raise InputError(f"predictions: video ids must be strings, got {vid!r}")
        out[vid] = _times(times, f"predictions for video {vid!r}")
    return out


def _load(path: str | Path, what: str) -> Any:
    p = Path(path)
    try:
        if p.suffix.lower() == ".json":
            return json.loads(p.read_text(encoding="utf-8"))
        with p.open("rb") as f:
            # latin1: the released files may hold Python 2 strings
            return pickle.load(f, encoding="latin1")
    except FileNotFoundError as exc:
        raise InputError(f"{what} file not found: {p}") from exc
    except (OSError, pickle.UnpicklingError, json.JSONDecodeError, EOFError, ValueError) as exc:
        raise InputError(
            f"cannot read {what} file {p} (expected a pickle or .json): {exc}"
        ) from exc


def load_ground_truth(path: str | Path) -> dict[str, GebdVideo]:
    """Read the ground-truth pickle (``k400_mr345_val_min_change_duration0.3.pkl`` format).

    A ``.json`` file with the same structure is read too. Load only trusted pickles.

    Raises:
        InputError: The file is missing, unreadable, or not in the expected format.

    """
    return parse_ground_truth(_load(path, "ground truth"))


def load_predictions(path: str | Path) -> dict[str, tuple[float, ...]]:
    """Read predictions ``{video_id: [seconds, ...]}`` from a pickle or a ``.json`` file.

    Raises:
        InputError: The file is missing, unreadable, or not in the expected format.

    """
    return parse_predictions(_load(path, "predictions"))


def save_predictions(path: str | Path, predictions: Mapping[str, Sequence[float]]) -> None:
    """Write predictions in the official submission format (a pickle; JSON for ``.json``).

    Raises:
        InputError: The predictions are malformed.

    """
    checked = {vid: list(t) for vid, t in parse_predictions(predictions).items()}
    p = Path(path)
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(checked, indent=1), encoding="utf-8")
    else:
        with p.open("wb") as f:
            pickle.dump(checked, f, protocol=pickle.HIGHEST_PROTOCOL)


# --------------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Detector adapter
# --------------------------------------------------------------------------------------------


def frame_stamps_ns(num_frames: int, fps: float, start_ns: int = 0) -> npt.NDArray[np.int64]:
    """Stamps of frames at a constant rate: ``start_ns + round(i * 1e9 / fps)``.

    Raises:
        ConfigError: ``fps`` not positive or ``num_frames`` negative.

    """
    if not (math.isfinite(fps) and fps > 0):
        raise ConfigError(f"fps={fps!r}: must be a positive number")
    if num_frames < 0:
        raise ConfigError(f"num_frames={num_frames!r}: must be >= 0")
    return start_ns + np.round(np.arange(num_frames) * (NS_PER_SECOND / fps)).astype(np.int64)


def offline_peaks(
    stamps_ns: npt.ArrayLike, scores: npt.ArrayLike, gamma: float, nms_seconds: float
) -> tuple[npt.NDArray[np.intp], float]:
    """The paper's offline gate: peaks of the whole series above one robust threshold.

    tau = median(s) + gamma * 1.4826 * MAD(s) over *all* the scores. Frame p is a peak iff
    s(p) > tau, it has a frame before and after it, s(p) is strictly greater than every
    earlier score within ``nms_seconds`` and than the previous frame's, and at least as
    great as every later score within ``nms_seconds`` and the next frame's. This is the
    same local suppression rule as :class:`~surprise_memory.surprise.gate.SurpriseGate` (ties go to
    the earlier frame; a suppressed peak does not free its neighbours), with tau fixed.

    Args:
        stamps_ns: Stamps of the scored frames, int ns, strictly increasing.
        scores: s(t) of those frames, finite.
        gamma: Threshold multiplier (>= 0).
        nms_seconds: Suppression radius in seconds (>= 0).

    Returns:
        The indices of the peaks, ascending, and tau (NaN for an empty series).

    Raises:
        InputError: Lengths differ, a score is not finite, or stamps do not increase.
        ConfigError: ``gamma`` or ``nms_seconds`` negative.

    """
    if not (math.isfinite(gamma) and gamma >= 0):
        raise ConfigError(f"gamma={gamma!r}: must be >= 0")
    if not (math.isfinite(nms_seconds) and nms_seconds >= 0):
        raise ConfigError(f"nms_seconds={nms_seconds!r}: must be >= 0")
    t = np.asarray(stamps_ns, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if t.ndim != 1 or s.shape != t.shape:
        raise InputError(f"stamps {t.shape} and scores {s.shape} must be 1-D of equal length")
    if not np.isfinite(s).all():
        raise InputError(f"scores hold {int(np.count_nonzero(~np.isfinite(s)))} NaN/inf value(s)")
    if t.size > 1 and not (np.diff(t) > 0).all():
        raise InputError("stamps must be strictly increasing")
    if s.size == 0:
        return np.zeros(0, dtype=np.intp), math.nan
    med = float(np.median(s))
    tau = med + gamma * MAD_TO_SIGMA * float(np.median(np.abs(s - med)))
    radius = round(nms_seconds * NS_PER_SECOND)
    lo = np.searchsorted(t, t - radius, side="left")  # first index within the radius before
    hi = np.searchsorted(t, t + radius, side="right")  # one past the last within it after
    peaks = []
    for p in range(1, s.size - 1):
        if not s[p] > tau:
            continue
        before = s[min(lo[p], p - 1) : p]
        after = s[p + 1 : max(hi[p], p + 2)]
        if s[p] > before.max() and s[p] >= after.max():
            peaks.append(p)
    return np.asarray(peaks, dtype=np.intp), tau


@dataclass(frozen=True)
class GebdDetection:
    """Boundaries found in one video, by the causal gate and by the offline variant.

    Attributes:
        causal_s: Boundary times in seconds (from ``origin_ns``) of the causal gate.
        offline_s: Boundary times in seconds of :func:`offline_peaks` on the same scores.
        offline_threshold: tau of the offline variant (NaN when nothing was scored).
        stamps_ns: Stamps of the scored frames (the first ``window`` frames are not scored).
        scores: s(t) of the scored frames.
        frames: Number of frames given.

    """

    causal_s: tuple[float, ...]
    offline_s: tuple[float, ...]
    offline_threshold: float
    stamps_ns: npt.NDArray[np.int64] = field(repr=False)
    scores: npt.NDArray[np.float64] = field(repr=False)
    frames: int = 0

    def boundaries(self, mode: Literal["causal", "offline"]) -> tuple[float, ...]:
        """The boundaries of one variant."""
        return self.causal_s if mode == "causal" else self.offline_s


class GebdDetector:
    """The project's scorer and gate run on one video at a time, for GEBD.

    Each call resets a :class:`SurpriseScorer` and a :class:`SurpriseGate` (the same classes
    the robot runs), feeds the video's embeddings in order, and returns the peaks' stamps as
    seconds from ``origin_ns`` (GEBD times are seconds from the start of the video, so for a
    decoded file the presentation times with origin 0). Beside the causal gate it applies
    :func:`offline_peaks` to the same scores: tau over the whole video at once.

    **Short videos.** The scorer needs ``window`` earlier embeddings before it scores one,
    and the causal gate ``warmup`` scores before it may trigger; a boundary earlier than
    frame ``window + warmup - 1`` cannot be found causally (``window + 1`` offline). A video
    of at most ``window`` frames gets no score and no boundary, so the protocol counts all
    its boundaries as missed. Kinetics-GEBD clips last about 10 s, so the robot's W=64 at
    30 frames/s would blind the first 2 s: the defaults here are shorter (W=16, warm-up 8,
    suppression 0.5 s; the clips' boundaries are at least 0.6 s apart after the release's
    merging of changes within 2 x 0.3 s). These defaults are this adapter's choice, not the
    paper's; pass the robot's values to evaluate exactly the deployed detector.

    Args:
        window: W of the scorer.
        eps: Floor of the scorer's standard deviation.
        gamma: Threshold multiplier of both variants.
        history: Scores held by the causal gate for median and MAD (3000 holds a whole clip).
        warmup: Scores before the causal gate may trigger.
        nms_seconds: Suppression radius of both variants, seconds.

    Raises:
        ConfigError: A setting is out of range (checked by the scorer's and gate's configs).

    """

    def __init__(
        self,
        window: int = 16,
        *,
        eps: float = 1e-6,
        gamma: float = 1.0,
        history: int = 3000,
        warmup: int = 8,
        nms_seconds: float = 0.5,
    ) -> None:
        self._scorer = SurpriseScorer(window=window, eps=eps)
        self._gate = SurpriseGate(
            gamma=gamma, history=history, warmup=warmup, nms_seconds=nms_seconds
        )

    @property
    def window(self) -> int:
        """W of the scorer: the number of leading frames that get no score."""
        return self._scorer.window

    @property
    def settings(self) -> dict[str, Any]:
        """The scorer and gate settings, for a report."""
        return {"window": self._scorer.window, **self._gate.config.as_dict()}

    def detect(
        self,
        embeddings: npt.ArrayLike,
        stamps_ns: npt.ArrayLike,
        origin_ns: int = 0,
    ) -> GebdDetection:
        """Find the boundaries of one video from its per-frame embeddings.

        Args:
            embeddings: (N, D) array, one embedding per frame, in time order.
            stamps_ns: (N,) stamps in int nanoseconds, strictly increasing.
            origin_ns: Stamp of the video's time zero (boundary seconds are counted from it).

        Returns:
            Boundaries of both variants and the score series.

        Raises:
            InputError: Shapes disagree, an embedding holds NaN/inf, or stamps do not
                increase (the message names the frame).

        """
        z = np.asarray(embeddings, dtype=np.float64)
        t = np.asarray(stamps_ns, dtype=np.int64)
        if z.ndim != 2 or t.ndim != 1 or z.shape[0] != t.shape[0]:
            raise InputError(
                f"embeddings {z.shape} must be (N, D) with one stamp each, stamps are {t.shape}"
            )
        self._scorer.reset()
        scored_t: list[int] = []
        scores: list[float] = []
        kls: list[float] = []
        for i in range(z.shape[0]):
            try:
                r = self._scorer.update(z[i])
            except InputError as exc:
                raise InputError(f"frame {i}: {exc}") from exc
            if r is not None:
                scored_t.append(int(t[i]))
                scores.append(r.score)
                kls.append(r.kl)
        return self._gate_scores(
            np.asarray(scored_t, np.int64), np.asarray(scores), kls, origin_ns, z.shape[0]
        )

    def detect_scores(
        self, scores: npt.ArrayLike, stamps_ns: npt.ArrayLike, origin_ns: int = 0
    ) -> GebdDetection:
        """Find the boundaries of one video from surprise scores computed elsewhere.

        Args:
            scores: (N,) s(t) per scored frame.
            stamps_ns: (N,) their stamps in int nanoseconds, strictly increasing.
            origin_ns: Stamp of the video's time zero.

        Raises:
            InputError: Shapes disagree, a score is not finite, or stamps do not increase.

        """
        s = np.asarray(scores, dtype=np.float64)
        t = np.asarray(stamps_ns, dtype=np.int64)
        if s.ndim != 1 or s.shape != t.shape:
            raise InputError(f"scores {s.shape} and stamps {t.shape} must be 1-D of equal length")
        return self._gate_scores(t, s, [math.nan] * s.size, origin_ns, s.size)

    def _gate_scores(
        self,
        t: npt.NDArray[np.int64],
        s: npt.NDArray[np.float64],
        kls: Sequence[float],
        origin_ns: int,
        frames: int,
    ) -> GebdDetection:
        self._gate.reset()
        peaks: list[int] = []
        for i in range(s.size):
            try:
                peaks += [e.stamp_ns for e in self._gate.push(int(t[i]), float(s[i]), kls[i])]
            except InputError as exc:
                raise InputError(f"scored frame {i}: {exc}") from exc
        peaks += [e.stamp_ns for e in self._gate.flush()]
        cfg = self._gate.config
        idx, tau = offline_peaks(t, s, cfg.gamma, cfg.nms_seconds)
        return GebdDetection(
            causal_s=tuple((p - origin_ns) / NS_PER_SECOND for p in peaks),
            offline_s=tuple((int(t[i]) - origin_ns) / NS_PER_SECOND for i in idx),
            offline_threshold=tau,
            stamps_ns=t,
            scores=s,
            frames=frames,
        )


# --------------------------------------------------------------------------------------------
# Comparison table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRow:
    """One row of the GEBD comparison table.

    Attributes:
        method: What was run.
        setting: e.g. "online, unsupervised".
        mean_f1: Kinetics-GEBD F1 averaged over the relative distances 0.05 .. 0.50.
        f1_at_05: F1 at relative distance 0.05 when known, else None.
        measured: True for a number measured by this code, False for a published one.
        source: Where a published number comes from, or how a measured one was obtained
            (dataset split, weights, detector settings).

    """

    method: str
    setting: str
    mean_f1: float
    f1_at_05: float | None
    measured: bool
    source: str


PAPER_GEBD_ROW = TableRow(
    method="V-JEPA-2 Bayesian surprise + robust gate",
    setting="online, unsupervised",
    mean_f1=0.833,
    f1_at_05=None,
    measured=False,
    source=(
        'published: "Worth Remembering: Surprise-Gated Robot Episodic Memory", '
        "Kinetics-GEBD val, F1 averaged over rel. dist. 0.05..0.50"
    ),
)
"""The paper's figure. Other published rows are added only with their source named."""


def measured_row(
    result: GebdResult,
    *,
    weights: str,
    mode: Literal["causal", "offline"],
    dataset: str = "Kinetics-GEBD val",
    settings: Mapping[str, Any] | None = None,
) -> TableRow:
    """A table row for a result measured here.

    Args:
        result: The evaluation of our predictions.
        weights: The encoder weights used (hub id or folder; "random init" for the tiny
            preset), printed so that no one mistakes a smoke run for the paper's number.
        mode: ``"causal"`` (the robot's gate) or ``"offline"`` (tau over each video).
        dataset: The annotation file's split.
        settings: Detector settings to print (e.g. :attr:`GebdDetector.settings`).

    """
    detail = ", ".join(f"{k}={v}" for k, v in (settings or {}).items())
    return TableRow(
        method=f"ours: surprise + {'causal gate' if mode == 'causal' else 'offline tau'}",
        setting="online, unsupervised" if mode == "causal" else "offline, unsupervised",
        mean_f1=result.mean_f1,
        f1_at_05=result.f1_at(0.05) if 0.05 in result.thresholds else None,
        measured=True,
        source=(
            f"measured here: {dataset}, {result.evaluated + result.no_prediction} videos, "
            f"weights {weights}" + (f", {detail}" if detail else "")
        ),
    )


def format_comparison_table(
    measured: Sequence[TableRow], published: Sequence[TableRow] = (PAPER_GEBD_ROW,)
) -> str:
    """The comparison table as text: published rows first, then the measured ones.

    Each row is marked ``measured`` or ``published`` and followed by its source line.
    """
    head = f"{'':<10}{'method':<44}{'setting':<24}{'F1@0.05':>8}{'F1 mean':>9}"
    lines = ["Kinetics-GEBD: F1 averaged over relative distance 0.05..0.50", head]
    for row in (*published, *measured):
        at05 = "-" if row.f1_at_05 is None else f"{row.f1_at_05:.3f}"
        tag = "measured" if row.measured else "published"
        lines.append(f"{tag:<10}{row.method[:43]:<44}{row.setting:<24}{at05:>8}{row.mean_f1:>9.3f}")
        lines.append(f"{'':<10}  ({row.source})")
    return "\n".join(lines)


def print_comparison_table(
    measured: Sequence[TableRow], published: Sequence[TableRow] = (PAPER_GEBD_ROW,)
) -> None:
    """Print :func:`format_comparison_table`."""
    print(format_comparison_table(measured, published))
