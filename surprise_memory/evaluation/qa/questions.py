"""A question about a recording, its true answer, and the question files that hold them.

Five types, as OC-NaVQA and ReMEmbR's NaVQA have them (:data:`QUESTION_TYPES`):

=========  ===========================================  ==================================
type       the true answer (:class:`Answer`)            an answer given is
=========  ===========================================  ==================================
binary     ``yes``: true or false                       yes or no
position   ``position``: [x, y, z] in metres            [x, y, z] in metres
time       ``time_s``: seconds since the origin         seconds since the origin
duration   ``minutes``: a length of time in minutes     minutes
text       ``text``: a sentence                         a sentence (judged by an LLM)
=========  ===========================================  ==================================

**Time base.** Every time of a question counts seconds from its ``origin_ns`` (int ns since
the epoch): for OC-NaVQA, DAAAM's start time of the sequence (:mod:`.oc_navqa`); for our
synthetic world, the recording's first frame; None = the origin of the store the question
is asked of (the first frame its writer saw). ``asked_at_s`` is the robot's current time
when the question is asked (ReMEmbR's question ``end_time``): the memory is cut there, as
DAAAM and ReMEmbR cut theirs; None = the whole recording.

**Our JSON Lines format** (``.jsonl``), one question per line, for any recording::

    {"id": "w7-q3", "sequence": "world-7", "type": "time",
     "question": "When did the green ball show up?",
     "answer": {"time_s": 312.4}, "category": "object", "asked_at_s": 600.0,
     "origin_ns": 1700000000000000000}

``answer`` holds the one key of the type (``yes``, ``position``, ``time_s``, ``minutes``,
``text``); ``category``, ``horizon``, ``asked_at_s`` and ``origin_ns`` may be left out, and
so may ``evidence_s`` (when the answer was seen, seconds since the origin: OC-NaVQA's
"Timestamp with answer") and ``window_start_s`` (the start of the question's own window,
ReMEmbR's ``start_time``; ``asked_at_s`` is its end), which :mod:`.consistency` checks.
:mod:`.question_files` reads and writes it (and reads OC-NaVQA's CSV, by the file's
suffix); a line that cannot be used is reported with its number and why, never skipped
silently.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surprise_memory.errors import InputError

__all__ = [
    "ANSWER_KEYS",
    "QUESTION_TYPES",
    "Answer",
    "Question",
    "QuestionFile",
    "answer_of",
    "check_unique_ids",
    "finite",
    "natural_order",
    "point",
    "question_from_dict",
]

QUESTION_TYPES = ("binary", "position", "time", "duration", "text")
"""The question types, in the order the summaries list them."""

ANSWER_KEYS = {
    "binary": "yes",
    "position": "position",
    "time": "time_s",
    "duration": "minutes",
    "text": "text",
}
"""The key of a question's true answer, per type (our JSON Lines format)."""


@dataclass(frozen=True)
class Answer:
    """An answer to a question, true or given: the one field of its type is set.

    Attributes:
        yes: binary: whether the answer is yes.
        position: position: [x, y, z] in metres.
        time_s: time: seconds since the question's origin.
        minutes: duration: minutes.
        text: text: the reference sentence.

    """

    yes: bool | None = None
    position: tuple[float, float, float] | None = None
    time_s: float | None = None
    minutes: float | None = None
    text: str | None = None

    def as_dict(self, kind: str) -> dict[str, Any]:
        """The JSON form of our format: ``{key: value}`` of the type ``kind``."""
        key = ANSWER_KEYS[kind]
        value = getattr(self, key)
        return {key: list(value) if isinstance(value, tuple) else value}

    def given(self, kind: str) -> bool:
        """Whether the field of the type ``kind`` is set."""
        return getattr(self, ANSWER_KEYS[kind]) is not None


@dataclass(frozen=True)
class Question:
    """One question about one recording (a *sequence*), with its true answer.

    Attributes:
        id: Unique id in its file.
        sequence: Which recording it is about (the store it is asked of).
        text: The question, as asked.
        type: One of :data:`QUESTION_TYPES`.
        truth: Its true answer.
        category: Free label (OC-NaVQA's "Question Category", our world's event kind).
        horizon: ReMEmbR's length category (SHORT, MEDIUM, LONG), where known.
        asked_at_s: The robot's current time when asked, seconds since the origin; None =
            after the whole recording.
        origin_ns: Time zero of the question's times (int ns since the epoch); None = the
            store's origin.
        source: Where it was read (``file:line``), for messages.
        evidence_s: When the answer was seen, seconds since the origin (OC-NaVQA's
            "Timestamp with answer"; two for a duration); empty = not known.
        window_start_s: Start of the question's own window (ReMEmbR's ``start_time``),
            seconds since the origin; None = not known.

    """

    id: str
    sequence: str
    text: str
    type: str
    truth: Answer
    category: str = ""
    horizon: str = ""
    asked_at_s: float | None = None
    origin_ns: int | None = None
    source: str = ""
    evidence_s: tuple[float, ...] = ()
    window_start_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The question as one line of our JSON Lines format."""
        out: dict[str, Any] = {
            "id": self.id,
            "sequence": self.sequence,
            "type": self.type,
            "question": self.text,
            "answer": self.truth.as_dict(self.type),
        }
        for key, value in (
            ("category", self.category),
            ("horizon", self.horizon),
            ("asked_at_s", self.asked_at_s),
            ("origin_ns", self.origin_ns),
            ("evidence_s", list(self.evidence_s)),
            ("window_start_s", self.window_start_s),
        ):
            if value not in ("", None, []):
                out[key] = value
        return out


@dataclass
class QuestionFile:
    """What :func:`read_questions` read.

    Attributes:
        path: The file.
        questions: The usable questions, in file order.
        rejected: ``(line, reason)`` of each row or line that could not be used.
        notes: Things about the file worth saying that cost no question (e.g. a header
            column that no row fills).
        inconsistent: ``{question id: reasons}`` of the questions whose own fields disagree
            (an answer seen outside the question's window or after it is asked, units
            that disagree: :mod:`.consistency`); they are kept, and listed.

    """

    path: Path
    questions: list[Question] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    inconsistent: dict[str, list[str]] = field(default_factory=dict)

    def counts(self, key: str) -> dict[str, int]:
        """Questions per value of ``key`` (``type``, ``sequence``, ``category``, ``horizon``)."""
        counted = Counter(str(getattr(q, key)) for q in self.questions)
        if key == "type":
            return {t: counted[t] for t in QUESTION_TYPES if counted[t]}
        return dict(sorted(counted.items(), key=lambda kv: natural_order(kv[0])))

    @property
    def sequences(self) -> list[str]:
        """The sequences asked about, in natural order (``2`` before ``10``)."""
        return list(self.counts("sequence"))


def natural_order(text: str) -> tuple[int, int | str]:
    """Sort key of labels: numbers by value first (``2`` before ``10``), then the rest."""
    return (0, int(text)) if text.isdigit() else (1, text)


def check_unique_ids(questions: Iterable[Question]) -> None:
    """Raise :class:`InputError` naming the first id two questions share."""
    seen: dict[str, str] = {}
    for q in questions:
        if q.id in seen:
            raise InputError(f"question id {q.id!r} is used twice ({seen[q.id]}, {q.source})")
        seen[q.id] = q.source


def question_from_dict(item: Any, source: str = "") -> Question:
    """A question from one record of our JSON Lines format (see the module docstring).

    Raises:
        InputError: A field is missing or of the wrong kind; the message names it.

    """
    if not isinstance(item, Mapping):
        raise InputError("a question must be a JSON object")
    unknown = sorted(
        set(item)
        - {"id", "sequence", "type", "question", "answer", "category", "horizon"}
        - {"asked_at_s", "origin_ns", "evidence_s", "window_start_s"}
    )
    if unknown:
        raise InputError(f"unknown fields {unknown}")
    kind = _text(item, "type")
    if kind not in QUESTION_TYPES:
        raise InputError(f"type {kind!r}: must be one of {', '.join(QUESTION_TYPES)}")
    answer = item.get("answer")
    if not isinstance(answer, Mapping) or set(answer) != {ANSWER_KEYS[kind]}:
        raise InputError(f"answer: a {kind} question needs {{{ANSWER_KEYS[kind]!r}: ...}}")
    asked = item.get("asked_at_s")
    start = item.get("window_start_s")
    evidence = item.get("evidence_s", [])
    if isinstance(evidence, str) or not isinstance(evidence, Sequence):
        raise InputError(f"evidence_s={evidence!r}: must be a list of seconds")
    origin = item.get("origin_ns")
    if origin is not None and (isinstance(origin, bool) or not isinstance(origin, int)):
        raise InputError(f"origin_ns={origin!r}: must be an integer of ns since the epoch")
    return Question(
        id=_text(item, "id"),
        sequence=_text(item, "sequence"),
        text=_text(item, "question"),
        type=kind,
        truth=answer_of(kind, answer[ANSWER_KEYS[kind]]),
        category=str(item.get("category") or ""),
        horizon=str(item.get("horizon") or ""),
        asked_at_s=None if asked is None else finite(asked, "asked_at_s", low=0.0),
        origin_ns=origin,
        source=source,
        evidence_s=tuple(finite(t, "evidence_s", low=0.0) for t in evidence),
        window_start_s=None if start is None else finite(start, "window_start_s", low=0.0),
    )


def _text(item: Mapping[str, Any], key: str) -> str:
    value = item.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and key in ("id", "sequence"):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{key}: a non-empty string is needed")
    return value.strip()


def finite(value: Any, name: str, *, low: float | None = None) -> float:
    """``value`` as a finite float (at least ``low``), else :class:`InputError` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"{name}={value!r}: must be a finite number")
    if low is not None and value < low:
        raise InputError(f"{name}={value!r}: must be >= {low:g}")
    return float(value)


def answer_of(kind: str, value: Any) -> Answer:
    """An :class:`Answer` to a ``kind`` question from its JSON value (ours, or an agent's).

    Raises:
        InputError: The value does not fit the type.

    """
    if kind == "binary":
        if not isinstance(value, bool):
            raise InputError(f"answer yes={value!r}: must be true or false")
        return Answer(yes=value)
    if kind == "position":
        return Answer(position=point(value, "answer position"))
    if kind == "time":
        return Answer(time_s=finite(value, "answer time_s", low=0.0))
    if kind == "duration":
        return Answer(minutes=finite(value, "answer minutes", low=0.0))
    if not isinstance(value, str) or not value.strip():
        raise InputError("answer text: a non-empty string is needed")
    return Answer(text=value.strip())


def point(value: Any, name: str) -> tuple[float, float, float]:
    """``[x, y, z]`` (three finite numbers) as a tuple, else :class:`InputError` naming it."""
    if not isinstance(value, Sequence) or isinstance(value, str) or len(value) != 3:
        raise InputError(f"{name}={value!r}: must be [x, y, z] in metres")
    x, y, z = (finite(v, name) for v in value)
    return (x, y, z)
