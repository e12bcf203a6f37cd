"""What an offline run left beside a folder store, as the page shows it: the curve and the why.

``surprise-memory process`` writes ``scores.csv`` (every scored frame) and ``run.json``
(settings, events, suppressed candidates) into the store folder
(:mod:`surprise_memory.offline.run_record`). A store written by a live memory node, or a
PostgreSQL store, has neither: the page then shows the episodes without a curve and says
only what each episode records (its surprise and threshold).

* :class:`RunFiles`: reads both files once and again only when they change on disk (of
  the scores, only the curve cut from them is kept).
* :func:`surprise_curve`: the per-frame scores cut down to at most ``points`` buckets
  (each keeps its highest score, so no peak is lost), with the events and suppressed
  candidates as times.
* :func:`why_kept`: the sentences that say why an episode was stored.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import StoreError
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.offline.run_record import (
    RUN_RECORD,
    SCORES_CSV,
    finite_or_none,
    load_run_record,
    read_scores,
)
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["CURVE_POINTS", "RunFiles", "surprise_curve", "why_kept"]

CURVE_POINTS = 2000
"""Most points of the surprise curve sent to the page (a day at 10 Hz is 864,000 frames)."""


class RunFiles:
    """The run record and the curve of a folder store, re-read only when a file changes.

    Args:
        folder: The store folder; None for a store without one (PostgreSQL).
        points: Buckets of the curve (see :func:`surprise_curve`).

    """

    def __init__(self, folder: Path | None, points: int = CURVE_POINTS) -> None:
        self._folder = folder
        self._points = points
        self._lock = threading.Lock()
        self._run: tuple[tuple[int, int] | None, dict[str, Any] | None] = (None, None)
        # the curve as sent, with the file signature and the origin it was computed for
        self._curve: tuple[Any, dict[str, Any] | None] = (None, None)

    @staticmethod
    def _signature(path: Path) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def run(self) -> dict[str, Any] | None:
        """The store's ``run.json``; None when there is none or it cannot be read."""
        if self._folder is None:
            return None
        sig = self._signature(self._folder / RUN_RECORD)
        with self._lock:
            if sig != self._run[0]:
                try:
                    record = load_run_record(self._folder) if sig is not None else None
                except StoreError:
                    record = None  # half-written or foreign: shown as "no run record"
                self._run = (sig, record)
            return self._run[1]

    def curve(self, origin_ns: int | None) -> dict[str, Any] | None:
        """The surprise curve of ``scores.csv`` for the page; None when there is none.

        Raises:
            StoreError: The file exists but is not a scores file.

        """
        if self._folder is None:
            return None
        run = self.run() or {}
        path = self._folder / str(run.get("scores_csv", SCORES_CSV))
        sig = self._signature(path)
        if sig is None:
            return None
        key = (sig, origin_ns)
        with self._lock:  # one reader at a time: a day's file takes seconds to read
            if key != self._curve[0]:
                self._curve = (key, surprise_curve(read_scores(path), origin_ns, self._points))
            return self._curve[1]


def surprise_curve(
    scores: Mapping[str, npt.NDArray[Any]], origin_ns: int | None, points: int = CURVE_POINTS
) -> dict[str, Any]:
    """The per-frame scores as at most ``points`` points, seconds from the origin.

    Frames are put into ``points`` equal spans of time; each span keeps its frame of
    highest score (and that frame's tau), so the peaks the gate saw stay on the curve.

    Args:
        scores: Columns of ``scores.csv`` (:func:`~surprise_memory.offline.run_record.read_scores`).
        origin_ns: Time zero; None = the first scored frame.
        points: Most points returned (>= 1).

    Returns:
        ``t``, ``score``, ``tau`` (lists, tau None where not yet defined), ``events`` (times
        of the triggered frames), ``suppressed`` (``{t, reason}``), ``frames`` (rows read).

    """
    stamps = np.asarray(scores["stamp_ns"], dtype=np.int64)
    score = np.asarray(scores["score"], dtype=np.float64)
    tau = np.asarray(scores["tau"], dtype=np.float64)
    n = int(stamps.size)
    if n == 0:
        return {"t": [], "score": [], "tau": [], "events": [], "suppressed": [], "frames": 0}
    zero = int(stamps[0]) if origin_ns is None else origin_ns
    t = (stamps - zero) / NS_PER_SECOND
    if n > points:
        span = float(t[-1] - t[0]) or 1.0
        bucket = np.minimum(((t - t[0]) / span * points).astype(np.int64), points - 1)
        starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
        # the highest score of each bucket: sort by (bucket, score), take each bucket's last
        order = np.lexsort((np.nan_to_num(score, nan=-np.inf), bucket))
        ends = np.r_[starts[1:], n] - 1
        keep = np.sort(order[ends])
    else:
        keep = np.arange(n)
    triggered = np.asarray(scores["triggered"]) == 1
    reasons = np.asarray(scores["suppressed"], dtype=str)
    suppressed = np.flatnonzero(reasons != "")
    return {
        "t": t[keep].tolist(),
        "score": [finite_or_none(v) for v in score[keep].tolist()],
        "tau": [finite_or_none(v) for v in tau[keep].tolist()],
        "events": t[triggered].tolist(),
        "suppressed": [{"t": float(t[i]), "reason": str(reasons[i])} for i in suppressed],
        "frames": n,
    }


def _seconds(ns: int, origin_ns: int | None) -> str:
    return f"{(ns - (origin_ns or 0)) / NS_PER_SECOND:.2f} s"


def why_kept(rec: EpisodeRecord, run: Mapping[str, Any] | None, origin_ns: int | None) -> list[str]:
    """Why this episode was stored, in a few sentences, from what the store and run recorded.

    Args:
        rec: The episode.
        run: The store's run record (``run.json``), None when there is none.
        origin_ns: Time zero of the times named.

    Returns:
        Sentences, most important first.

    """
    settings: Mapping[str, Any] = (run or {}).get("settings") or {}
    gate = settings.get("gate") or {}
    mode = (settings.get("baseline") or {}).get("gate_mode", "surprise")
    notes: list[str] = []
    if mode != "surprise":
        notes.append(
            f"Stored by the {mode} baseline gate (one episode per slot of an equal budget), "
            "not by its surprise."
        )
    elif math.isfinite(rec.threshold) and rec.threshold > 0:
        gamma = gate.get("gamma")
        nms = gate.get("nms_seconds")
        notes.append(
            f"Surprise s = {rec.surprise:.3f} was above the threshold τ = {rec.threshold:.3f} "
            f"({rec.surprise / rec.threshold:.2f} × τ; τ = median + "
            f"{'γ' if gamma is None else f'{gamma:g}'} × 1.4826 × MAD of the scores so far)"
            + ("" if nms is None else f" and the highest within ±{nms:g} s")
            + ": the gate's event."
        )
    else:
        notes.append(f"Surprise s = {rec.surprise:.3f} at the trigger (no threshold recorded).")
    events: Sequence[Mapping[str, Any]] = (run or {}).get("events") or []
    event = next((e for e in events if e.get("stamp_ns") == rec.stamp_ns), None)
    if event is not None and isinstance(event.get("decided_ns"), int):
        kl = event.get("kl")
        notes.append(
            f"Decided {(event['decided_ns'] - rec.stamp_ns) / NS_PER_SECOND:.2f} s after its "
            "peak (the gate waits to see that no higher score follows)"
            + ("" if kl is None else f"; KL {kl:.3g}")
            + "."
        )
    habituation = settings.get("habituation") or {}
    suppressed: Sequence[Mapping[str, Any]] = (run or {}).get("suppressed") or []
    if habituation.get("habituation"):
        theta = habituation.get("habituation_similarity")
        repeats = [c for c in suppressed if c.get("similar_to_ns") == rec.stamp_ns]
        notes.append(
            "Habituation was on: it did not resemble a recently kept event enough to be "
            f"suppressed (h below θ = {theta})."
            + (
                f" {len(repeats)} later candidate(s) were suppressed as repeats of it (at "
                + ", ".join(_seconds(int(c["stamp_ns"]), origin_ns) for c in repeats[:5])
                + ("…" if len(repeats) > 5 else "")
                + ")."
                if repeats
                else ""
            )
        )
    budget = settings.get("budget") or {}
    rate = budget.get("max_episodes_per_minute") or 0
    if rate > 0:
        dropped = sum(1 for c in suppressed if c.get("reason") == "budget")
        notes.append(
            f"Kept within the rate budget of {rate:g} episodes per minute "
            f"(window {budget.get('budget_window_seconds')} s); {dropped} candidate(s) of this "
            "run were dropped over it."
        )
    if not rec.encoder_pretrained:
        notes.append(
            "The video encoder had random (untrained) weights: the surprise shows the pipeline "
            "working, not a meaningful event."
        )
    if run is None:
        notes.append(
            "No run record beside the store (a live memory node or a database store): the "
            "scores around the trigger were not kept."
        )
    return notes
