"""GEBD evaluation: the protocol on hand-worked fixtures, the detector adapter, the table.

Every expected figure is worked out by hand in the comments. Unless said otherwise a video
lasts 10 s, so the tolerance at relative distance 0.05 is 0.05 * 10 = 0.5 s, at 0.10 1.0 s,
..., at 0.50 5.0 s (each of these products is exact in binary floating point).
"""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.evaluation import (
    PAPER_GEBD_ROW,
    REL_DIS_THRESHOLDS,
    GebdDetector,
    evaluate_gebd,
    evaluate_threshold,
    evaluate_video,
    format_comparison_table,
    frame_stamps_ns,
    load_ground_truth,
    load_predictions,
    match_boundaries,
    measured_row,
    offline_peaks,
    parse_ground_truth,
    save_predictions,
)

S = 1_000_000_000


def _video(
    annotations: list[list[float]], consistency: float = 0.8, duration: float = 10.0
) -> dict[str, Any]:
    """One record in the released pickle's format (fields the scoring ignores included)."""
    fps = 30.0
    return {
        "num_frames": int(duration * fps),
        "path_video": "val/some_class/xyz.mp4",
        "fps": fps,
        "video_duration": duration,
        "path_frame": "val/some_class/xyz",
        "f1_consis": [consistency] * len(annotations),
        "f1_consis_avg": consistency,
        "substages_myframeidx": [[math.floor(t * fps) for t in a] for a in annotations],
        "substages_timestamps": annotations,
    }


def _f1s(gt: dict[str, Any], preds: dict[str, list[float]], **kw: Any) -> list[float]:
    return [r.f1 for r in evaluate_gebd(gt, preds, **kw).per_threshold]


# ---------------------------------------------------------------------------- protocol


def test_thresholds_are_the_official_list() -> None:
    assert REL_DIS_THRESHOLDS == (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def test_perfect_prediction() -> None:
    # annotator 0 [2, 5, 8] is matched exactly: tp 3, positives 3, detections 3 -> F1 1
    # (annotator 1 [2, 5]: P 2/3, R 1, F1 0.8; annotator 2 [5]: F1 0.5; the best is 0)
    gt = {"a": _video([[2.0, 5.0, 8.0], [2.0, 5.0], [5.0]])}
    result = evaluate_gebd(gt, {"a": [2.0, 5.0, 8.0]})
    assert [r.f1 for r in result.per_threshold] == [1.0] * 10
    assert result.mean_f1 == 1.0
    assert result.mean_precision == 1.0
    assert result.mean_recall == 1.0
    assert [(r.tp, r.num_pos, r.num_det) for r in result.per_threshold] == [(3, 3, 3)] * 10
    assert (result.videos, result.evaluated, result.no_prediction, result.skipped) == (1, 1, 0, 0)


@pytest.mark.parametrize(
    ("prediction", "expected_f1", "expected_mean"),
    [
        # 0.5 s off: exactly the tolerance at 0.05 (0.5 <= 0.5 counts): F1 1 everywhere
        (4.5, [1.0] * 10, 1.0),
        # 0.6 s off: missed at 0.05 (tp 0, P 0, R 0 -> F1 0), matched from 0.10 (1.0 s) on:
        # mean = 9 / 10
        (4.6, [0.0] + [1.0] * 9, 0.9),
        # 1.6 s off: matched from 0.20 (2.0 s) on, not at 0.15 (1.5 s): mean = 7 / 10
        (5.6, [0.0] * 3 + [1.0] * 7, 0.7),
    ],
)
def test_off_by_threshold(
    prediction: float, expected_f1: list[float], expected_mean: float
) -> None:
    gt = {"a": _video([[4.0]])}
    result = evaluate_gebd(gt, {"a": [prediction]})
    assert [r.f1 for r in result.per_threshold] == expected_f1
    assert result.mean_f1 == pytest.approx(expected_mean)


def test_duplicate_predictions_are_matched_once() -> None:
    # boundary 5.0; detections 5.0, 5.0, 5.1: the first 5.0 is used up by the only
    # boundary, the other two are false positives: tp 1, positives 1, detections 3
    # -> P 1/3, R 1, F1 = 2 * (1/3) * 1 / (4/3) = 0.5 at every threshold
    gt = {"a": _video([[5.0]])}
    result = evaluate_gebd(gt, {"a": [5.0, 5.0, 5.1]})
    assert [(r.tp, r.num_pos, r.num_det) for r in result.per_threshold] == [(1, 1, 3)] * 10
    assert result.per_threshold[0].precision == pytest.approx(1 / 3)
    assert result.mean_f1 == pytest.approx(0.5)


def _with_missing() -> dict[str, Any]:
    return {
        "a": _video([[2.0, 5.0, 8.0], [2.0, 5.0], [5.0]]),
        # no prediction for b: its FIRST annotator's 2 boundaries count as missed (not the
        # 4 of annotator 1, nor the best-F1 choice)
        "b": _video([[3.0, 7.0], [1.0, 3.0, 7.0, 9.0], [7.0]]),
    }


def test_missing_video_counts_its_first_annotators_boundaries_as_missed() -> None:
    # a: tp 3, pos 3, det 3; b: pos 2 -> tp 3, pos 5, det 3:
    # P 1, R 3/5, F1 = 2 * 0.6 / 1.6 = 0.75
    result = evaluate_gebd(_with_missing(), {"a": [2.0, 5.0, 8.0]})
    assert [(r.tp, r.num_pos, r.num_det) for r in result.per_threshold] == [(3, 5, 3)] * 10
    assert result.mean_f1 == pytest.approx(0.75)
    assert result.mean_recall == pytest.approx(0.6)
    assert (result.evaluated, result.no_prediction) == (1, 1)


@pytest.mark.parametrize(
    "b_prediction",
    [
        [],  # empty list: counted as missed, even under missing="skip"
        [-0.1, 10.5],  # both outside [0, 10]: dropped, then the list is empty
    ],
)
def test_empty_prediction_counts_as_missed(b_prediction: list[float]) -> None:
    preds = {"a": [2.0, 5.0, 8.0], "b": b_prediction}
    for missing in ("count", "skip"):
        assert _f1s(_with_missing(), preds, missing=missing) == pytest.approx([0.75] * 10)
    result = evaluate_gebd(_with_missing(), preds)
    assert result.dropped_detections == len(b_prediction)


def test_missing_skip_reproduces_the_first_challenge_script() -> None:
    # missing="skip": b is left out -> tp 3, pos 3, det 3 -> F1 1
    result = evaluate_gebd(_with_missing(), {"a": [2.0, 5.0, 8.0]}, missing="skip")
    assert result.mean_f1 == 1.0
    assert (result.evaluated, result.no_prediction, result.skipped) == (1, 0, 1)


def test_range_filter_keeps_both_ends() -> None:
    # 0.0 and 10.0 lie in [0, duration] and are kept: boundaries [0.2, 9.8] both match at
    # 0.05 (0.2 <= 0.5): tp 2, pos 2, det 2 -> F1 1; 10.01 is dropped
    gt = {"a": _video([[0.2, 9.8]])}
    result = evaluate_gebd(gt, {"a": [0.0, 10.0, 10.01]})
    assert result.per_threshold[0].num_det == 2
    assert result.mean_f1 == 1.0
    assert result.dropped_detections == 1


def test_low_consistency_video_is_skipped_and_0_3_is_kept() -> None:
    gt = {
        "a": _video([[5.0]]),
        # f1_consis_avg 0.29 < 0.3: ignored, predictions and boundaries alike
        "low": _video([[5.0]], consistency=0.29),
        # exactly 0.3 is not < 0.3: evaluated
        "edge": _video([[5.0]], consistency=0.3),
    }
    # a: tp 1 pos 1 det 1; low: nothing (its 2 wrong detections would add 2 FP);
    # edge: detection 9.0 is 4 s from 5.0: at 0.05..0.35 (tolerance <= 3.5 s) it is missed
    # (tp 0, pos 1, det 1) -> tp 1, pos 2, det 2 -> P 0.5 R 0.5 F1 0.5; from 0.40 (4.0 s)
    # on it is matched -> F1 1. Mean = (7 * 0.5 + 3 * 1) / 10 = 0.65
    preds = {"a": [5.0], "low": [1.0, 2.0], "edge": [9.0]}
    result = evaluate_gebd(gt, preds)
    assert [r.f1 for r in result.per_threshold] == pytest.approx([0.5] * 7 + [1.0] * 3)
    assert result.mean_f1 == pytest.approx(0.65)
    assert (result.evaluated, result.skipped) == (2, 1)
    assert evaluate_video(parse_ground_truth(gt)["low"], [1.0], 0.05).status == "skipped"


def test_best_annotator_is_chosen_per_video() -> None:
    # detection [1.0] at 0.05 (0.5 s):
    #   annotator 0 [1, 9]: tp 1, pos 2, det 1 -> P 1, R 0.5, F1 2/3
    #   annotator 1 [1]:    tp 1, pos 1, det 1 -> F1 1   <- best
    #   annotator 2 [5]:    4 s away, tp 0     -> F1 0
    # the dataset counts annotator 1: tp 1, pos 1 -> F1 1 (annotator 0 would give 2/3)
    gt = parse_ground_truth({"a": _video([[1.0, 9.0], [1.0], [5.0]])})
    score = evaluate_video(gt["a"], [1.0], 0.05)
    assert (score.annotator, score.tp, score.num_pos, score.num_det) == (1, 1, 1, 1)
    assert evaluate_gebd(gt, {"a": [1.0]}).mean_f1 == 1.0
    # at 0.50 (5 s) annotator 2 matches too (F1 1): a tie goes to the first, annotator 1
    assert evaluate_video(gt["a"], [1.0], 0.5).annotator == 1


def test_annotator_tie_goes_to_the_first() -> None:
    gt = parse_ground_truth({"a": _video([[5.0, 6.0], [5.0, 7.0]])})
    # detection 5.0: both annotators tp 1 of 2 -> F1 2/3 each: annotator 0
    assert evaluate_video(gt["a"], [5.0], 0.05).annotator == 0


def test_matching_is_greedy_in_annotation_order() -> None:
    # boundaries [4.0, 4.45], detections [4.3, 3.6], tolerance 0.5:
    # 4.0 takes its nearest, 4.3 (0.3 < 0.4); 4.45 is left with 3.6 at 0.85 > 0.5: tp 1.
    # (An optimal assignment, 4.0-3.6 and 4.45-4.3, would find 2.)
    assert match_boundaries([4.0, 4.45], [4.3, 3.6], 0.5) == 1
    # the same boundaries stored the other way round: 4.45 takes 4.3 (0.15), 4.0 takes 3.6
    # (0.4): tp 2 -- the stored order matters, as in the official script
    assert match_boundaries([4.45, 4.0], [4.3, 3.6], 0.5) == 2
    # video level: tp 1, pos 2, det 2 -> P 0.5 R 0.5 F1 0.5 at 0.05
    gt = {"a": _video([[4.0, 4.45]])}
    assert evaluate_threshold(gt, {"a": [4.3, 3.6]}, 0.05).f1 == pytest.approx(0.5)


def test_nearest_detection_tie_takes_the_first() -> None:
    # 5.0 is 0.25 from 4.75 and from 5.25 (exact binary values): it takes 4.75 (first);
    # then 5.375 takes 5.25 (0.125 <= 0.3): tp 2. Taking 5.25 first would leave 5.375
    # with 4.75 at 0.625 > 0.3: tp 1.
    assert match_boundaries([5.0, 5.375], [4.75, 5.25], 0.3) == 2
    assert match_boundaries([5.0, 5.375], [5.25, 4.75], 0.3) == 1


def test_far_nearest_detection_does_not_look_further() -> None:
    assert match_boundaries([5.0], [5.1, 5.2], 0.05) == 0
    assert match_boundaries([], [1.0], 1.0) == 0
    assert match_boundaries([1.0], [], 1.0) == 0


def test_micro_average_across_videos() -> None:
    gt = {
        "g": _video([[5.0]]),  # detection 5.0: tp 1, pos 1, det 1 (F1 1)
        "h": _video([[2.0, 5.0, 8.0]]),  # detection 0.5: 1.5 s from 2.0
    }
    preds = {"g": [5.0], "h": [0.5]}
    # at 0.05 and 0.10 (0.5 s, 1.0 s), h: tp 0, pos 3, det 1 -> totals tp 1, pos 4, det 2:
    #   P 1/2, R 1/4, F1 = 2 * (1/8) / (3/4) = 1/3   (the mean of per-video F1s, 1/2, differs)
    # from 0.15 (1.5 s, 1.5 <= 1.5) on, h: tp 1 -> totals tp 2, pos 4, det 2:
    #   P 1, R 1/2, F1 2/3
    # mean F1 = (2 * 1/3 + 8 * 2/3) / 10 = 0.6
    result = evaluate_gebd(gt, preds)
    assert [r.f1 for r in result.per_threshold] == pytest.approx([1 / 3] * 2 + [2 / 3] * 8)
    assert result.mean_f1 == pytest.approx(0.6)
    assert result.per_threshold[0].recall == pytest.approx(0.25)
    assert result.mean_precision == pytest.approx((2 * 0.5 + 8 * 1.0) / 10)


def test_annotator_without_boundaries() -> None:
    # annotator with no boundary: R 1 (by convention), P 0 -> F1 0
    gt = parse_ground_truth({"i": _video([[]]), "j": _video([[], [5.0]])})
    assert evaluate_video(gt["i"], [5.0], 0.05).f1 == 0.0
    # j: annotator 1 [5.0] gives F1 1 and is chosen
    assert evaluate_video(gt["j"], [5.0], 0.05).annotator == 1
    # dataset of i alone: tp 0, pos 0, det 1 -> R 1, P 0, F1 0
    r = evaluate_threshold({"i": _video([[]])}, {"i": [5.0]}, 0.05)
    assert (r.recall, r.precision, r.f1) == (1.0, 0.0, 0.0)
    # nothing at all: R 1, P 0, F1 0
    r = evaluate_threshold({"i": _video([[]])}, {}, 0.05)
    assert (r.tp, r.num_pos, r.num_det, r.f1) == (0, 0, 0, 0.0)


def test_unknown_prediction_ids_are_ignored() -> None:
    gt = {"a": _video([[5.0]])}
    result = evaluate_gebd(gt, {"a": [5.0], "not_in_gt": [1.0, 2.0]})
    assert result.mean_f1 == 1.0
    assert result.unknown_ids == 1


def test_result_report() -> None:
    gt = {"g": _video([[5.0]]), "h": _video([[2.0, 5.0, 8.0]])}
    result = evaluate_gebd(gt, {"g": [5.0], "h": [0.5]})
    data = json.loads(json.dumps(result.as_dict()))
    assert data["mean"]["f1"] == pytest.approx(0.6)
    assert data["tp"][:3] == [1, 1, 2]
    assert result.f1_at(0.15) == pytest.approx(2 / 3)
    with pytest.raises(ConfigError, match="not evaluated"):
        result.f1_at(0.07)
    table = result.format_table()
    assert "0.600" in table and "Rel.Dis." in table


# ---------------------------------------------------------------------------- files


def test_official_pickle_files_round_trip(tmp_path: Path) -> None:
    gt_path = tmp_path / "k400_mr345_val_min_change_duration0.3.pkl"
    with gt_path.open("wb") as f:
        pickle.dump(_with_missing(), f, protocol=pickle.HIGHEST_PROTOCOL)
    gt = load_ground_truth(gt_path)
    assert gt["b"].annotations[1] == (1.0, 3.0, 7.0, 9.0)
    assert (gt["b"].fps, gt["b"].num_frames, gt["b"].duration_s) == (30.0, 300, 10.0)

    pred_path = tmp_path / "submission.pkl"
    save_predictions(pred_path, {"a": np.array([2.0, 5.0, 8.0])})
    with pred_path.open("rb") as f:  # the official format: a dict of plain lists
        assert pickle.load(f) == {"a": [2.0, 5.0, 8.0]}
    assert evaluate_gebd(gt, load_predictions(pred_path)).mean_f1 == pytest.approx(0.75)

    json_path = tmp_path / "submission.json"
    save_predictions(json_path, {"a": [2.0, 5.0, 8.0]})
    assert load_predictions(json_path) == {"a": (2.0, 5.0, 8.0)}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "expected a dict"),
        ({"a": [1.0]}, "expected a dict per video"),
        ({"a": {"video_duration": 10.0, "f1_consis_avg": 0.5}}, "substages_timestamps"),
        ({"a": {**_video([[1.0]]), "video_duration": -1.0}}, "must be > 0"),
        ({"a": {**_video([[1.0]]), "video_duration": "10"}}, "expected a number"),
        ({"a": {**_video([[1.0]]), "substages_timestamps": []}}, "non-empty list"),
        ({"a": {**_video([[1.0]]), "substages_timestamps": [[1.0, "x"]]}}, r"\[0\]\[1\]"),
        ({"a": {**_video([[1.0]]), "substages_timestamps": [[math.nan]]}}, "finite"),
        ({7: _video([[1.0]])}, "strings"),
    ],
)
def test_malformed_ground_truth(data: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_ground_truth(data)


@pytest.mark.parametrize(
    ("preds", "message"),
    [
        ([1.0], "expected a dict"),
        ({"a": 5.0}, "list of seconds"),
        ({"a": "5.0"}, "list of seconds"),
        ({"a": [5.0, math.nan]}, "finite"),
        ({"a": [True]}, "expected a number"),
        ({"a": np.zeros((2, 2))}, "1-D"),
    ],
)
def test_malformed_predictions(preds: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        evaluate_gebd({"a": _video([[5.0]])}, preds)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_ground_truth(tmp_path / "nope.pkl")
    bad = tmp_path / "bad.pkl"
    bad.write_bytes(b"this is not a pickle")
    with pytest.raises(InputError, match="cannot read"):
        load_predictions(bad)
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read"):
        load_ground_truth(bad_json)


def test_bad_settings() -> None:
    gt = {"a": _video([[5.0]])}
    with pytest.raises(ConfigError, match="threshold"):
        evaluate_gebd(gt, {}, thresholds=[0.0])
    with pytest.raises(ConfigError, match="at least one"):
        evaluate_gebd(gt, {}, thresholds=[])
    with pytest.raises(ConfigError, match="missing"):
        evaluate_gebd(gt, {}, missing="drop")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- detector


def _stream(
    changes: list[int], n: int, dim: int = 32, fps: float = 30.0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise-constant means (jumps of about 3 sigma per dimension) plus unit noise."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(len(changes) + 1, dim)) * 3.0
    segment = np.searchsorted(changes, np.arange(n), side="right")
    return means[segment] + rng.normal(size=(n, dim)), frame_stamps_ns(n, fps)


def test_detector_finds_known_change_points() -> None:
    # changes at frames 60, 120, 200 of a 300-frame, 30 frame/s clip: 2.0 s, 4.0 s, 6.667 s.
    # The frame right after a change is the most surprising of its neighbourhood (the
    # window still holds only the old segment); gamma 3 keeps the noise peaks below tau.
    z, t = _stream([60, 120, 200], 300)
    det = GebdDetector(window=16, gamma=3.0, warmup=8, nms_seconds=0.5).detect(z, t)
    expected = [2.0, 4.0, 200 / 30]
    assert det.causal_s == pytest.approx(expected)
    assert det.offline_s == pytest.approx(expected)
    assert det.frames == 300 and det.scores.size == 300 - 16
    # end to end through the protocol: F1 1 at every threshold, both variants
    gt = {"clip": _video([expected])}
    for mode in ("causal", "offline"):
        assert evaluate_gebd(gt, {"clip": list(det.boundaries(mode))}).mean_f1 == 1.0


def test_detector_with_the_papers_gamma_keeps_the_changes() -> None:
    # gamma 1 also fires on noise peaks, but every true change is among its boundaries
    z, t = _stream([60, 120, 200], 300)
    det = GebdDetector(gamma=1.0).detect(z, t)
    for change in (2.0, 4.0, 200 / 30):
        assert min(abs(b - change) for b in det.causal_s) < 1e-9
        assert min(abs(b - change) for b in det.offline_s) < 1e-9


def test_detector_is_reset_per_video_and_honours_origin() -> None:
    detector = GebdDetector(gamma=3.0)
    z, t = _stream([60, 120, 200], 300)
    first = detector.detect(z, t)
    # a second video with other content and stamps starting at 100 s: same relative result
    z2, _ = _stream([90], 200, seed=1)
    second = detector.detect(z2, frame_stamps_ns(200, 30.0, start_ns=100 * S), origin_ns=100 * S)
    assert second.causal_s == pytest.approx([3.0])
    # running the first video again gives exactly the first result
    assert detector.detect(z, t).causal_s == first.causal_s


def test_detect_scores_matches_detect() -> None:
    z, t = _stream([60, 120, 200], 300)
    detector = GebdDetector(gamma=3.0)
    det = detector.detect(z, t)
    again = detector.detect_scores(det.scores, det.stamps_ns)
    assert again.causal_s == det.causal_s
    assert again.offline_s == det.offline_s


def test_short_video_has_no_boundary_and_counts_as_missed() -> None:
    # 16 frames with W = 16: no frame is scored, so no boundary; the protocol then counts
    # the clip's one boundary as missed: tp 0, pos 1, det 0 -> F1 0
    z, t = _stream([8], 16)
    det = GebdDetector(window=16).detect(z, t)
    assert det.causal_s == () and det.offline_s == () and det.scores.size == 0
    assert math.isnan(det.offline_threshold)
    result = evaluate_gebd({"c": _video([[8 / 30]])}, {"c": list(det.causal_s)})
    assert result.mean_f1 == 0.0 and result.no_prediction == 1
    # with a smaller window the same clip is scored
    assert GebdDetector(window=4, warmup=3).detect(z, t).scores.size == 12


def test_detector_errors() -> None:
    z, t = _stream([60], 100)
    z[70, 3] = math.nan
    with pytest.raises(InputError, match="frame 70"):
        GebdDetector().detect(z, t)
    with pytest.raises(InputError, match="one stamp each"):
        GebdDetector().detect(z, t[:-1])
    with pytest.raises(InputError, match="not after"):
        GebdDetector().detect_scores([1.0, 2.0, 1.0], [0, 2, 1])
    with pytest.raises(ConfigError):
        GebdDetector(window=1)


def test_offline_peaks_hand_checked() -> None:
    stamps = [i * S for i in range(8)]
    scores = [1.0, 2.0, 1.0, 5.0, 1.0, 1.0, 9.0, 1.0]
    # median 1; absolute deviations [0,1,0,4,0,0,8,0] have median 0 -> tau = 1 for any gamma
    # no suppression: every local maximum above 1: frames 1 (2), 3 (5), 6 (9)
    idx, tau = offline_peaks(stamps, scores, gamma=1.0, nms_seconds=0.0)
    assert idx.tolist() == [1, 3, 6] and tau == 1.0
    # radius 2 s: frame 1 sees frame 3 (5 > 2) within 2 s after it and is suppressed
    idx, _ = offline_peaks(stamps, scores, gamma=1.0, nms_seconds=2.0)
    assert idx.tolist() == [3, 6]
    # a plateau: the earlier frame wins (strictly above earlier, at least the later)
    idx, _ = offline_peaks(stamps[:4], [1.0, 3.0, 3.0, 1.0], gamma=0.0, nms_seconds=0.0)
    assert idx.tolist() == [1]
    # first and last frames are never peaks
    idx, _ = offline_peaks(stamps[:3], [9.0, 1.0, 9.0], gamma=0.0, nms_seconds=0.0)
    assert idx.tolist() == []
    with pytest.raises(ConfigError):
        offline_peaks(stamps, scores, gamma=-1.0, nms_seconds=0.0)
    with pytest.raises(InputError, match="equal length"):
        offline_peaks(stamps, scores[:-1], gamma=1.0, nms_seconds=0.0)


# ---------------------------------------------------------------------------- table


def test_comparison_table_marks_measured_and_published() -> None:
    gt = {"g": _video([[5.0]]), "h": _video([[2.0, 5.0, 8.0]])}
    result = evaluate_gebd(gt, {"g": [5.0], "h": [0.5]})
    row = measured_row(
        result,
        weights="tiny preset, random init",
        mode="causal",
        dataset="unit-test fixture",
        settings=GebdDetector().settings,
    )
    assert row.measured and row.mean_f1 == pytest.approx(0.6)
    assert row.f1_at_05 == pytest.approx(1 / 3)
    table = format_comparison_table([row])
    assert PAPER_GEBD_ROW.mean_f1 == 0.833
    lines = table.splitlines()
    published = next(line for line in lines if line.startswith("published"))
    measured = next(line for line in lines if line.startswith("measured"))
    assert published.rstrip().endswith("0.833")
    assert measured.rstrip().endswith("0.600") and "0.333" in measured
    assert "weights tiny preset, random init" in table
    assert "Worth Remembering" in table
