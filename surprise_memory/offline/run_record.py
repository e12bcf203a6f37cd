"""What an offline run leaves beside the store: ``scores.csv`` and ``run.json``.

* ``scores.csv`` (:data:`SCORES_HEADER`: ``stamp_ns,score,kl,tau,triggered,suppressed``):
  one row per scored frame, written by :class:`ScoresWriter` as soon as the gate and the
  trigger filter can no longer decide on it; ``triggered`` is 1 at events (episodes),
  ``suppressed`` names why a gate candidate was not kept (``habituation``, ``budget``;
  empty otherwise). Read back with :func:`read_scores` (files without the ``suppressed``
  column, from before it existed, read with it empty).
* ``run.json`` (``format`` :data:`RUN_FORMAT`): settings, model names, "untrained" when
  weights were random, input, counts and the :class:`RunSummary`, written with
  :func:`write_json`; read back with :func:`load_run_record`.

:mod:`surprise_memory.offline.pipeline` writes both; :mod:`surprise_memory.offline.report`
reads them.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
import platform
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError, StoreError

if TYPE_CHECKING:
    from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = [
    "RUN_FORMAT",
    "RUN_RECORD",
    "SCORES_CSV",
    "SCORES_HEADER",
    "RunSummary",
    "ScoresWriter",
    "budget_from",
    "finite_or_none",
    "load_run_record",
    "read_scores",
    "versions",
    "write_json",
]

SCORES_CSV = "scores.csv"
"""File name of the per-frame scores in the store folder."""
SCORES_HEADER = ("stamp_ns", "score", "kl", "tau", "triggered", "suppressed")
"""Columns of ``scores.csv``."""
_SCORES_HEADER_V1 = SCORES_HEADER[:5]  # before habituation and the budget
RUN_RECORD = "run.json"
"""File name of the run record in the store folder."""
RUN_FORMAT = "surprise_memory.run/1"
"""Value of the ``format`` key of ``run.json``."""


@dataclass
class RunSummary:
    """Counts and rates of one offline run.

    Attributes:
        frames: Camera frames processed.
        duration_s: Stamp span of those frames, seconds.
        windows: Encoder windows encoded.
        padded_windows: Warm-up windows padded with the first frame (``clip_warmup: pad``),
            skipped: the scorer only takes real windows.
        scored: Frames that got a surprise score (after the scorer's W warm-up).
        events: Events: gate candidates kept by the trigger filter.
        candidates: Gate candidates (events plus suppressed ones).
        suppressed_habituation: Candidates suppressed by habituation.
        suppressed_budget: Candidates dropped over the episode-rate budget.
        episodes: Episodes stored.
        episodes_per_minute: ``episodes`` per minute of ``duration_s``.
        stored_frames: Frames stored in episodes.
        stored_fraction: ``stored_frames / frames``.
        redacted_frames: Stored frames in which a face was blurred (``redact_faces``).
        redacted_faces: Faces blurred in the stored frames.
        rejected: Frames or embeddings a core object refused (counted, skipped).
        place_keyframes: Place keyframes stored (``place_keyframes``, with poses).
        place_skipped: Frames not kept as place keyframes, by reason (e.g. ``no_pose``).
        wall_s: Seconds of processing (models already loaded).
        load_s: Seconds to load the models.
        throughput_fps: ``frames / wall_s``.
        first_stamp_ns: Stamp of the first frame (None without frames).
        last_stamp_ns: Stamp of the last frame.

    """

    frames: int = 0
    duration_s: float = 0.0
    windows: int = 0
    padded_windows: int = 0
    scored: int = 0
    events: int = 0
    candidates: int = 0
    suppressed_habituation: int = 0
    suppressed_budget: int = 0
    episodes: int = 0
    episodes_per_minute: float = 0.0
    stored_frames: int = 0
    stored_fraction: float = 0.0
    redacted_frames: int = 0
    redacted_faces: int = 0
    rejected: int = 0
    place_keyframes: int = 0
    place_skipped: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    load_s: float = 0.0
    throughput_fps: float = 0.0
    first_stamp_ns: int | None = None
    last_stamp_ns: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain data for ``run.json``."""
        return dataclasses.asdict(self)

    def format(self) -> str:
        """The end-of-run summary, a few lines for the terminal."""
        return "\n".join(
            [
                f"frames      {self.frames} over {self.duration_s:.1f} s "
                f"({self.windows} windows encoded, {self.scored} scored)",
                f"events      {self.events} ({self.episodes} episodes stored, "
                f"{self.episodes_per_minute:.2f} per minute)"
                + (
                    f"; {self.candidates} candidates, suppressed: "
                    f"{self.suppressed_habituation} by habituation, "
                    f"{self.suppressed_budget} over budget"
                    if self.candidates > self.events
                    else ""
                ),
                f"stored      {self.stored_frames} frames = {100 * self.stored_fraction:.2f} % "
                "of the frames",
                f"places      {self.place_keyframes} place keyframes"
                + (
                    f" (none kept: {_skips(self.place_skipped)})"
                    if not self.place_keyframes and self.place_skipped
                    else ""
                ),
                f"throughput  {self.throughput_fps:.1f} frames/s ({self.wall_s:.1f} s, models "
                f"loaded in {self.load_s:.1f} s)"
                + (f"; {self.rejected} items rejected" if self.rejected else ""),
            ]
        )


def _skips(skipped: dict[str, int]) -> str:
    """Why no frame became a place keyframe: the reasons, most frames first."""
    ranked = sorted(skipped.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{n} frames {reason}" for reason, n in ranked)


class ScoresWriter:
    """Writes the per-frame scores, each row once nothing can decide on it any more.

    Args:
        path: The new ``scores.csv``; its header is written at once.
        delay_ns: The largest decision delay (the gate's ``max_delay_ns`` plus the trigger
            filter's).

    """

    def __init__(self, path: Path, delay_ns: int) -> None:
        self._file: io.TextIOWrapper = path.open("w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(SCORES_HEADER)
        self._delay_ns = delay_ns
        self._rows: deque[list[Any]] = deque()

    def add(self, stamp_ns: int, score: float, kl: float, tau: float) -> None:
        """Hold the row of a scored frame (not triggered yet) until :meth:`settle`."""
        self._rows.append([stamp_ns, score, kl, tau, 0, ""])

    def mark(self, trigger: SurpriseTrigger, suppressed: str = "") -> None:
        """Mark the held row of the trigger's stamp: triggered, or suppressed and why.

        Args:
            trigger: An event, or a suppressed gate candidate.
            suppressed: Empty for an event, else the reason it was suppressed.

        """
        for row in reversed(self._rows):
            if row[0] == trigger.stamp_ns:
                if suppressed:
                    row[5] = suppressed
                else:
                    row[4] = 1
                return

    def settle(self, now_ns: int | None) -> None:
        """Write the rows older than the gate's delay (all of them when ``now_ns`` is None)."""
        rows = self._rows
        while rows and (now_ns is None or rows[0][0] < now_ns - self._delay_ns):
            stamp, score, kl, tau, trig, why = rows.popleft()
            self._csv.writerow([stamp, repr(score), repr(kl), repr(tau), trig, why])

    def close(self) -> None:
        """Write every held row and close the file."""
        self.settle(None)
        self._file.close()


def read_scores(path: str | os.PathLike[str]) -> dict[str, npt.NDArray[Any]]:
    """Read a ``scores.csv`` into arrays keyed by column.

    ``stamp_ns`` and ``triggered`` are int64, ``suppressed`` strings, the others float.

    Raises:
        StoreError: The file is missing or its header is neither :data:`SCORES_HEADER`
            nor the older one without ``suppressed``.

    """
    path = Path(path)
    try:
        with path.open(encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            header = tuple(next(reader, ()))
            if header not in (SCORES_HEADER, _SCORES_HEADER_V1):
                raise StoreError(f"{path}: header {header} is not {SCORES_HEADER}")
            rows = list(reader)
            if header == _SCORES_HEADER_V1:
                rows = [[*r, ""] for r in rows]
    except OSError as exc:
        raise StoreError(f"cannot read the scores {path}: {exc}") from exc
    cols = list(zip(*rows, strict=True)) if rows else [() for _ in SCORES_HEADER]
    return {
        "stamp_ns": np.asarray([int(v) for v in cols[0]], dtype=np.int64),
        "score": np.asarray([float(v) for v in cols[1]], dtype=np.float64),
        "kl": np.asarray([float(v) for v in cols[2]], dtype=np.float64),
        "tau": np.asarray([float(v) for v in cols[3]], dtype=np.float64),
        "triggered": np.asarray([int(v) for v in cols[4]], dtype=np.int64),
        "suppressed": np.asarray(list(cols[5]), dtype=str),
    }


def load_run_record(store_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read ``STORE/run.json``.

    Raises:
        StoreError: Missing, unreadable, or not a run record.

    """
    path = Path(store_path) / RUN_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(
            f"{path} is missing: {Path(store_path)} was not written by `surprise-memory process`"
        ) from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"cannot read the run record {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        raise StoreError(f"{path} is not a run record (format {RUN_FORMAT})")
    return data


def budget_from(store: str | os.PathLike[str]) -> float:
    """The episodes per minute of an earlier run: its episodes over its duration.

    Args:
        store: A store folder written by ``surprise-memory process``.

    Returns:
        ``episodes * 60 / duration_s`` from its ``run.json`` summary.

    Raises:
        StoreError: No complete run record there.
        InputError: The run stored no episode or lasted no time.

    """
    run = load_run_record(store)
    summary = run.get("summary") or {}
    episodes, duration = summary.get("episodes"), summary.get("duration_s")
    if run.get("status") != "complete" or not isinstance(episodes, int):
        raise StoreError(f"{store}: the run did not complete; no budget to copy")
    if episodes <= 0 or not isinstance(duration, int | float) or duration <= 0:
        raise InputError(
            f"{store}: {episodes} episodes over {duration} s; a baseline needs a run that "
            "stored episodes"
        )
    return episodes * 60.0 / float(duration)


def versions() -> dict[str, str]:
    """Versions of the package, Python and torch, and the machine, for the run record."""
    import torch

    from surprise_memory import __version__

    return {
        "surprise_memory": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as indented JSON, atomically (numpy scalars and paths allowed)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=_json_default) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def finite_or_none(x: float) -> float | None:
    """``x``, or None when it is not finite (JSON has no inf or nan)."""
    return x if math.isfinite(x) else None
