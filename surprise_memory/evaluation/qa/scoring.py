"""Scores of answers, as ReMEmbR's ``eval.py`` sets them, and the summary of a run.

**Per question** (ReMEmbR's ``remembr/scripts/eval.py``, ``evaluate_output``):

* binary: correct (1) or not (0). A reply with no yes/no counts as wrong: ``eval.py``
  counts such a question in ``num_binary`` but adds no success;
* position: the L2 distance between the answered and the true [x, y, z], metres
  (``np.linalg.norm(answer - pred_pos)``);
* time: the absolute difference in minutes. ReMEmbR compares "minutes ago" before the
  question's current time; both count back from the same current time, so the
  difference is that of the two times themselves;
* duration: the absolute difference in minutes;
* text: judged by an LLM where one is configured (1 or 0), else *unscored*
  (``eval.py`` skips text questions).

A position, time or duration question the answerer left unanswered has no error: it is
counted as *unanswered* and left out of the mean, which then says over how many it is. A
question whose answerer failed (an endpoint down, a timeout) is an *error*, left out of
every figure and listed, so that ``--resume`` can ask it again.

**The paper's three columns**, per run:

* *question accuracy*: the share of binary questions answered right. ReMEmbR's
  ``eval.py`` reports it as "Binary QA accuracy"; neither DAAAM's code nor its
  ``DATA.md`` defines another, so text questions (judged) are reported apart, as *text
  accuracy*, not mixed in (our choice, written down here and in the guide);
* *positional error*: the mean L2 error of the position questions, metres;
* *temporal error*: the mean absolute error of the time and the duration questions
  together, minutes (``eval.py`` keeps them apart as "Temporal" and "Duration"; the
  paper has one temporal column; each is also given alone).

:func:`summarize` gives them for all questions, per type, category, sequence and horizon,
each as the mean and spread over the runs (:func:`spread`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from surprise_memory.evaluation.qa.questions import (
    QUESTION_TYPES,
    Answer,
    Question,
    natural_order,
)

__all__ = [
    "COLUMNS",
    "MEASURES",
    "QuestionScore",
    "ScoredAnswer",
    "columns_of",
    "score_answer",
    "spread",
    "summarize",
    "summary_markdown",
]

MEASURES = {
    "binary": "correct",
    "position": "position_error_m",
    "time": "time_error_min",
    "duration": "duration_error_min",
    "text": "text_correct",
}
"""The per-question measure of each type."""

COLUMNS = {
    "question_accuracy": "question accuracy",
    "positional_error_m": "positional error (m)",
    "temporal_error_min": "temporal error (min)",
    "time_error_min": "time error (min)",
    "duration_error_min": "duration error (min)",
    "text_accuracy": "text accuracy (judged)",
}
"""The columns of a summary, and their headings."""

_GROUPS = ("type", "category", "sequence", "horizon")


@dataclass(frozen=True)
class QuestionScore:
    """The score of one answer.

    Attributes:
        measure: What ``value`` is (:data:`MEASURES` of the question's type).
        value: The score, or None when there is none (unanswered, unscored, error).
        status: ``scored``; ``unanswered`` (a binary counts 0 then); ``unscored`` (a text
            question with no judge); ``error`` (the answerer failed).

    """

    measure: str
    value: float | None
    status: str

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"measure": self.measure, "value": self.value, "status": self.status}


def score_answer(
    question: Question,
    answer: Answer | None,
    *,
    error: str | None = None,
    judged: bool | None = None,
) -> QuestionScore:
    """Score ``answer`` to ``question`` (see the module docstring).

    Args:
        question: The question, with its true answer.
        answer: What the answerer answered (None or the type's field unset: unanswered).
        error: Why the answerer failed, if it did (the question is then an error).
        judged: A text question: whether a judge found the answer right (None: no judge).

    Returns:
        The score.

    """
    kind = question.type
    measure = MEASURES[kind]
    given = answer is not None and answer.given(kind)
    if error is not None:
        return QuestionScore(measure, None, "error")
    if not given:  # a binary with no yes/no counts as wrong, as in eval.py
        return QuestionScore(measure, 0.0 if kind == "binary" else None, "unanswered")
    assert answer is not None
    if kind == "text" and judged is None:
        return QuestionScore(measure, None, "unscored")
    return QuestionScore(measure, _error(kind, question.truth, answer, judged), "scored")


def _error(kind: str, truth: Answer, answer: Answer, judged: bool | None) -> float:
    """The measure of an answer given (see the module docstring)."""
    if kind == "binary":
        return float(answer.yes == truth.yes)
    if kind == "text":
        return float(bool(judged))
    if kind == "position":
        assert answer.position is not None and truth.position is not None
        return math.dist(answer.position, truth.position)
    if kind == "time":
        assert answer.time_s is not None and truth.time_s is not None
        return abs(answer.time_s - truth.time_s) / 60.0
    assert answer.minutes is not None and truth.minutes is not None
    return abs(answer.minutes - truth.minutes)


@dataclass(frozen=True)
class ScoredAnswer:
    """One question's score in one run (what a summary is made of)."""

    question: Question
    run: int
    score: QuestionScore


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def columns_of(scored: Iterable[ScoredAnswer]) -> dict[str, Any]:
    """The columns (:data:`COLUMNS`) and counts over ``scored`` (one run's, usually).

    A column is None where no question of its kind has a score.
    """
    items = list(scored)

    def values(*kinds: str) -> list[float]:
        return [
            s.score.value for s in items if s.question.type in kinds and s.score.value is not None
        ]

    statuses = [s.score.status for s in items]
    return {
        "question_accuracy": _mean(values("binary")),
        "positional_error_m": _mean(values("position")),
        "temporal_error_min": _mean(values("time", "duration")),
        "time_error_min": _mean(values("time")),
        "duration_error_min": _mean(values("duration")),
        "text_accuracy": _mean(values("text")),
        "questions": len(items),
        "scored": statuses.count("scored"),
        "unanswered": statuses.count("unanswered"),
        "unscored": statuses.count("unscored"),
        "errors": statuses.count("error"),
    }


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """Mean and spread of a figure over runs or seeds (None values are left out).

    Returns:
        ``mean``, ``std`` (sample standard deviation; 0 for one value), ``min``, ``max``
        and ``n``; the figures are None when no value is given.

    """
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    mean = sum(kept) / len(kept)
    var = sum((v - mean) ** 2 for v in kept) / (len(kept) - 1) if len(kept) > 1 else 0.0
    return {"mean": mean, "std": math.sqrt(var), "min": min(kept), "max": max(kept), "n": len(kept)}


def _over_runs(items: list[ScoredAnswer]) -> dict[str, Any]:
    runs = sorted({s.run for s in items})
    per_run = [columns_of(s for s in items if s.run == r) for r in runs]
    out: dict[str, Any] = {key: spread(c[key] for c in per_run) for key in COLUMNS}
    totals = columns_of(items)
    out["counts"] = {
        k: totals[k] for k in ("questions", "scored", "unanswered", "unscored", "errors")
    }
    out["runs"] = len(runs)
    return out


def summarize(
    scored: Iterable[ScoredAnswer],
    groups: Sequence[str] = _GROUPS,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The summary of a run: all questions, then per value of each of ``groups``.

    Args:
        scored: Every question's score in every run.
        groups: Question fields to break the figures down by (empty values left out).
        extra: More entries for the summary (e.g. a fitted threshold).

    Returns:
        ``{"all": ..., "by_type": {...}, "by_category": {...}, ...}``: each entry holds
        every column as :func:`spread` over the runs, plus ``counts`` and ``runs``.

    """
    items = list(scored)
    out: dict[str, Any] = {"all": _over_runs(items)}
    for key in groups:
        values = dict.fromkeys(str(getattr(s.question, key)) for s in items)
        order: Callable[[str], Any] = QUESTION_TYPES.index if key == "type" else natural_order
        out[f"by_{key}"] = {
            value: _over_runs([s for s in items if str(getattr(s.question, key)) == value])
            for value in sorted((v for v in values if v), key=order)
        }
    out["errors"] = [
        {"id": s.question.id, "run": s.run} for s in items if s.score.status == "error"
    ]
    out.update(extra or {})
    return out


def _cell(figure: Mapping[str, Any], digits: int) -> str:
    if figure["mean"] is None:
        return "–"
    text = f"{figure['mean']:.{digits}f}"
    if figure["n"] > 1:
        text += f" ± {figure['std']:.{digits}f}"
    return text


def summary_markdown(summary: Mapping[str, Any], title: str = "QA run") -> str:
    """The summary as Markdown tables (the paper's three columns first)."""
    heads = ["questions", *(COLUMNS[k] for k in COLUMNS), "unanswered", "errors"]
    lines = [f"# {title}", ""]
    sections = [("all questions", {"all": summary["all"]})]
    sections += [
        (f"by {key.removeprefix('by_')}", summary[key])
        for key in summary
        if key.startswith("by_") and summary[key]
    ]
    for name, rows in sections:
        lines += [f"## {name}", "", "| | " + " | ".join(heads) + " |"]
        lines.append("|---" * (len(heads) + 1) + "|")
        for label, row in rows.items():
            counts = row["counts"]
            cells = [str(counts["questions"])]
            cells += [_cell(row[k], 3 if k.endswith("accuracy") else 2) for k in COLUMNS]
            cells += [str(counts["unanswered"]), str(counts["errors"])]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    runs = summary["all"]["runs"]
    lines.append(f"Mean ± sample standard deviation over {runs} run(s) where there are several.")
    inconsistent = summary.get("inconsistent", {})
    if inconsistent.get("count"):
        how = "left out (--skip-inconsistent)" if inconsistent["left_out"] else "asked and scored"
        lines += [
            "",
            f"{inconsistent['count']} question(s) of the file disagree with themselves (an "
            f"answer seen outside the question's window or after it is asked, or units that "
            f"disagree): {how}; settings.json lists them and why.",
        ]
    return "\n".join(lines) + "\n"
