"""Evaluation of the event detector the way the field measures it.

``gebd``: the Kinetics-GEBD / TAPOS generic event boundary detection protocol (Shou et al.,
ICCV 2021; the LOVEU challenge's evaluation): loading the ground-truth pickle and the
predictions, F1 / precision / recall at relative distance thresholds 0.05 .. 0.50, the
detector adapter that runs the project's own scorer and gate on one video (causal, and
with tau over the whole video), and the comparison table with the paper's figure.

Like the rest of the core, nothing here imports rclpy.
"""

from __future__ import annotations

from surprise_memory.evaluation.gebd import (
    MIN_CONSISTENCY,
    PAPER_GEBD_ROW,
    REL_DIS_THRESHOLDS,
    GebdDetection,
    GebdDetector,
    GebdResult,
    GebdVideo,
    TableRow,
    ThresholdResult,
    VideoScore,
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
    parse_predictions,
    print_comparison_table,
    save_predictions,
)

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
