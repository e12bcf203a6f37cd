"""Kinetics-GEBD ground truth and predictions: reading, checking and writing the files.

The ground truth is the released annotation pickle (``{video_id: record}``, step 1 of the
protocol in :mod:`surprise_memory.evaluation.protocol`); predictions are
``{video_id: [seconds, ...]}`` (step 3), the official submission format. Both are also
read from (and predictions written to) ``.json`` files of the same structure. Every check
names the video and the field that is wrong.

Security: the ground truth and prediction files are pickles, and loading a pickle can run
code. Load only files you trust (the released annotation, your own predictions).
"""

from __future__ import annotations

import json
import math
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from surprise_memory.errors import InputError

__all__ = [
    "GebdVideo",
    "load_ground_truth",
    "load_predictions",
    "parse_ground_truth",
    "parse_predictions",
    "save_predictions",
]


@dataclass(frozen=True)
class GebdVideo:
    """The ground truth of one video, as read from the annotation pickle.

    Attributes:
        video_id: The key of the video in the pickle (a YouTube id for Kinetics-GEBD).
        duration_s: ``video_duration`` in seconds (> 0); tolerances are fractions of it.
        consistency: ``f1_consis_avg``; below
            :data:`~surprise_memory.evaluation.protocol.MIN_CONSISTENCY` the video is skipped.
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
