"""Evaluation of the event detector the way the field measures it.

The Kinetics-GEBD / TAPOS generic event boundary detection benchmark (Shou et al., ICCV
2021; the LOVEU challenge's evaluation), in four modules:

* ``annotations``: reading and checking the ground-truth pickle and the predictions,
  writing predictions in the submission format;
* ``protocol``: F1 / precision / recall at relative distance thresholds 0.05 .. 0.50 by the
  official rules (boundary matching, per-video and per-threshold scoring);
* ``detector``: the adapter that runs the project's own scorer and gate on one video
  (causal, and with tau over the whole video), and on the video files of a folder;
* ``tables``: the comparison table of the measured rows with the paper's figure.

``sharding`` runs the detector over shards of videos, here or on a Ray cluster, with
checkpoints to resume (``eval-gebd --ray``, ``--checkpoint``); import it from its module.

Beyond GEBD, ``habituation`` measures habituation on the synthetic recurring-event scene
(repeats stored, novel events found, events per minute); import it from its module.

Like the rest of the core, nothing here imports rclpy.
"""

from __future__ import annotations

from surprise_memory.evaluation.annotations import (
    GebdVideo,
    load_ground_truth,
    load_predictions,
    parse_ground_truth,
    parse_predictions,
    save_predictions,
)
from surprise_memory.evaluation.detector import (
    GebdDetection,
    GebdDetector,
    detect_video,
    detect_videos,
    find_video,
    frame_stamps_ns,
    offline_peaks,
)
from surprise_memory.evaluation.protocol import (
    MIN_CONSISTENCY,
    REL_DIS_THRESHOLDS,
    GebdResult,
    ThresholdResult,
    VideoScore,
    evaluate_gebd,
    evaluate_threshold,
    evaluate_video,
    match_boundaries,
)
from surprise_memory.evaluation.tables import (
    PAPER_GEBD_ROW,
    TableRow,
    format_comparison_table,
    measured_row,
    print_comparison_table,
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
    "detect_video",
    "detect_videos",
    "evaluate_gebd",
    "evaluate_threshold",
    "evaluate_video",
    "find_video",
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
