"""Questions whose own fields disagree: what a score on them rests on.

ReMEmbR's NaVQA gives each question a window (``start_time``, ``end_time`` in its
``qa_unfilled.json``; the end is when the question is asked) and the clock time at which
its answer was seen (the CSV's "Timestamp with answer"). In 22 of its 210 questions that
time lies outside the window (remembr issue #19: an assertion ``start_time <= timestamp
<= end_time`` added to ``form_question_jsons.py`` fails on them), so the memory the
question is asked of cannot hold the answer, or holds one from after the asking. Duration
answers carry their unit three times (the *Parsable answer* in minutes, the clock times'
span, the *Text answer*'s sentence), and these can disagree.

* :func:`time_problems`: each time the answer was seen (``evidence_s``, or a time
  question's true time) before the question's window starts (``window_start_s``) or
  after it is asked (``asked_at_s``), with one second of slack (clock times are whole
  seconds);
* :func:`duration_problems`: a duration's parsable minutes against the span of its two
  clock times and against a quantity with a unit in its text answer (each within the
  rounding of the numbers as written), and a question that asks for another unit;
* :func:`check_questions`: the first for every question of a file, into
  :attr:`~.questions.QuestionFile.inconsistent` (the CSV reader puts the second there).

``eval-qa --dry-run`` lists them; ``eval-qa --skip-inconsistent`` leaves them out of the
run and its summary says how many.
"""

from __future__ import annotations

import re

from surprise_memory.evaluation.qa.questions import Question, QuestionFile

__all__ = [
    "AFTER_ASKED",
    "BEFORE_WINDOW",
    "UNITS",
    "check_questions",
    "duration_problems",
    "problem_kinds",
    "time_problems",
]

BEFORE_WINDOW = "answer before the question's window"
AFTER_ASKED = "answer after the question is asked"
UNITS = "units disagree"
"""The kinds of problem, each reason's first words (:func:`problem_kinds` counts them)."""

_SLACK_S = 1.0  # clock times are whole seconds
_PER_MINUTE = {"s": 1.0 / 60.0, "m": 1.0, "h": 60.0}
_QUANTITY_RE = re.compile(
    r"(\d+(?:\.\d+)?|\.\d+)\s*(seconds?|secs?|minutes?|mins?|hours?|hrs?)\b", re.IGNORECASE
)
_ASKS_RE = re.compile(r"\bhow many (seconds|minutes|hours)\b", re.IGNORECASE)


def time_problems(question: Question) -> list[str]:
    """Why ``question``'s answer times fall outside its window or after its asking.

    Returns:
        One reason per time found outside (empty: consistent, or nothing to check).

    """
    times = question.evidence_s
    if not times and question.type == "time" and question.truth.time_s is not None:
        times = (question.truth.time_s,)
    out = []
    start, asked = question.window_start_s, question.asked_at_s
    for t in times:
        if start is not None and t < start - _SLACK_S:
            out.append(
                f"{BEFORE_WINDOW}: seen at {t:.0f} s, {start - t:.0f} s before the window "
                f"starts ({start:.0f} s)"
            )
        if asked is not None and t > asked + _SLACK_S:
            out.append(
                f"{AFTER_ASKED}: seen at {t:.0f} s, {t - asked:.0f} s after it is asked "
                f"({asked:.0f} s)"
            )
    return out


def _half_unit(number: str) -> float:
    """Half a unit of the last digit of ``number`` as written (``2.3``: 0.05)."""
    decimals = len(number.split(".", 1)[1]) if "." in number else 0
    return 0.5 * 10.0**-decimals


def duration_problems(
    minutes: str, *, span_s: float | None = None, answer_text: str = "", question: str = ""
) -> list[str]:
    """Why a duration's answer and its other statements of it disagree.

    Args:
        minutes: The answer in minutes, as written (its rounding is the tolerance).
        span_s: Seconds between the answer's two clock times; None = not two.
        answer_text: The reference sentence (``"I waited 2.3 minutes"``).
        question: The question, for the unit it asks in.

    Returns:
        The reasons, each starting with :data:`UNITS` (empty: they agree).

    """
    value = float(minutes)
    out = []
    if span_s is not None:
        span = span_s / 60.0
        if span_s < 0:
            out.append(f"{UNITS}: its clock times run backwards ({span_s:.0f} s)")
        elif abs(span - value) > _half_unit(minutes) + 2 * _SLACK_S / 60.0:
            in_seconds = abs(span_s - value) <= _half_unit(minutes) + 2 * _SLACK_S
            out.append(
                f"{UNITS}: the answer {minutes} min "
                + (
                    f"is its clock times' span in seconds ({span_s:.0f} s = {span:.2f} min)"
                    if in_seconds
                    else f"but its clock times are {span:.2f} min apart"
                )
            )
    for number, unit in _QUANTITY_RE.findall(answer_text):
        factor = _PER_MINUTE[unit[0].lower()]
        stated = float(number) * factor
        if abs(stated - value) > _half_unit(minutes) + _half_unit(number) * factor:
            out.append(f"{UNITS}: the answer is {minutes} min but its text says {number} {unit}")
    asks = _ASKS_RE.search(question)
    if asks and asks.group(1).lower() != "minutes":
        out.append(f"{UNITS}: the question asks how many {asks.group(1)}; answers are minutes")
    return out


def check_questions(read: QuestionFile) -> QuestionFile:
    """Add each question's :func:`time_problems` to ``read.inconsistent``; returns ``read``."""
    for q in read.questions:
        problems = time_problems(q)
        if problems:
            read.inconsistent.setdefault(q.id, []).extend(problems)
    return read


def problem_kinds(read: QuestionFile) -> dict[str, int]:
    """Questions per kind of problem (one question may count under several)."""
    kinds = (BEFORE_WINDOW, AFTER_ASKED, UNITS)
    return {
        kind: sum(
            any(r.startswith(kind) for r in reasons) for reasons in read.inconsistent.values()
        )
        for kind in kinds
    }
