r"""OC-NaVQA's question file as DAAAM ships it, read by its column names.

DAAAM (github.com/SashaDance/DAAAM) ships OC-NaVQA in ``data/oc-navqa_data.csv``: 210
questions over the 7 CODa sequences ReMEmbR's NaVQA uses (0, 3, 4, 6, 16, 21, 22; 30
each), a corrected derivative of ReMEmbR's ``remembr/data/navqa/data.csv`` with the same
columns. The dataset is not part of this package: the user points at DAAAM's file.

**Columns**, found by name with runs of white space folded (several names hold a line
break, ``"Timestamp \r\nwith answer"``; ReMEmbR's ``form_question_jsons.py`` keys them
with ``\n``): ``UUID``, ``Seq ID``, ``Question``, ``Timestamp with answer``, ``Type
(binary, position, time, text)``, ``Text answer``, ``Parsable answer``, ``Question
Category``, ``GT Response``.

**True answers**, as ReMEmbR's ``form_question_jsons.py`` (``parse_answer``) forms them
from the same columns, and DAAAM's ``data/DATA.md`` corrects them:

* binary: ``Parsable answer``, yes or no (any case);
* position: ``GT Response``, ``[x y z]`` in metres: DAAAM's correction, where the object
  *is* in CODa's ``dense_global`` frame (ReMEmbR's original took the robot's position
  where it was seen);
* time: the clock time of ``Timestamp with answer`` (ReMEmbR turns it into "[minutes]
  ago" before the question's current time; the absolute error in minutes is the same,
  so it is kept as a time here, :mod:`.scoring`);
* duration: ``Parsable answer`` in minutes (ReMEmbR: ``float(parsable_answer)``), not the
  span of the two clock times, which differs on some rows (0.9 min against 1 answered);
* text: ``Text answer``.

**Time base.** The clock times are wall-clock times of the sequence's day. DAAAM counts
every time from its per-sequence start time (``START_TIMES`` in
``src/daaam/utils/evaluation.py``, Unix seconds; :data:`START_TIMES` here), and its agent
answers times as seconds since it. ReMEmbR's ``form_question_jsons.py`` turns the clock
times into Unix time with ``time.mktime`` in the local zone of the machine it ran on; the
times match DAAAM's start times at UTC-8 (:data:`CLOCK_ZONE`): read so, all 210 questions
fall 6 to 1,749 s into their sequences (at Texas's UTC-6 they would fall two hours before
their sequence began). So a clock time becomes seconds since ``START_TIMES[seq]`` and
each question's ``origin_ns`` is that start time.

**Current time.** The CSV does not say when each question is asked. ReMEmbR's
``remembr/data/navqa/<seq>/qa_unfilled.json`` does (``end_time``, Unix seconds, per
question ``id``, and the window's ``start_time``); :func:`read_remembr_question_windows`
reads that folder for ``window_start_s`` and ``asked_at_s``. Without it, a question is
asked after the whole sequence (DAAAM's OC-NaVQA widened every question's context to
"from the beginning of the sequence until the current time").

**Rows that cannot be used** are reported with their first line and why. In DAAAM's file
the odd one out is the header: it names ten columns (the tenth, ``" GT Response
FullSeq"``, with a leading space) while each of the 210 question rows has nine fields;
that column is in no row, which :func:`read_oc_navqa` notes without losing a question.

**Questions that disagree with themselves** are kept and listed
(:attr:`~.questions.QuestionFile.inconsistent`, :mod:`.consistency`): each keeps its clock
times as ``evidence_s``, and a duration's parsable minutes are checked against its clock
times and its text answer here, where the numbers are read as written.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Mapping
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from surprise_memory.errors import InputError
from surprise_memory.evaluation.qa.consistency import duration_problems
from surprise_memory.evaluation.qa.questions import (
    QUESTION_TYPES,
    Answer,
    Question,
    QuestionFile,
    finite,
    natural_order,
)
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "CLOCK_ZONE",
    "COLUMNS",
    "START_TIMES",
    "clock_seconds",
    "read_oc_navqa",
    "read_remembr_question_times",
    "read_remembr_question_windows",
]

START_TIMES: dict[str, float] = {
    "0": 1673884185.589118,
    "3": 1673985684.662767,
    "4": 1674087704.955325,
    "6": 1674764557.790565,
    "16": 1675881269.033398,
    "21": 1676052119.125703,
    "22": 1676064138.910544,
}
"""Time zero of each CODa sequence, Unix seconds: DAAAM's ``START_TIMES``
(``src/daaam/utils/evaluation.py``), facts of the dataset."""

CLOCK_ZONE = timezone(timedelta(hours=-8))
"""The zone in which the CSV's clock times match :data:`START_TIMES` (see the module)."""

COLUMNS = {
    "id": "uuid",
    "sequence": "seq id",
    "question": "question",
    "timestamp": "timestamp with answer",
    "type": "type (binary, position, time, text)",
    "text_answer": "text answer",
    "parsable": "parsable answer",
    "category": "question category",
    "position": "gt response",
}
"""The columns read, by their folded lower-case names."""

_NEEDED = ("id", "sequence", "question", "timestamp", "type")
_TYPE_NEEDS = {"binary": "parsable", "position": "position", "duration": "parsable"}
_CLOCK_RE = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})$")
_HORIZON_RE = re.compile(r"(?:^|_)(SHORT|MEDIUM|LONG)_")
_MAX_OFFSET_S = 6 * 3600.0  # a CODa sequence lasts minutes; more is a wrong clock time


def _fold(name: str) -> str:
    return " ".join(name.split()).lower()


def clock_seconds(clock: str, start_unix: float) -> float:
    """Seconds from ``start_unix`` to the clock time ``H:MM:SS`` of that day at UTC-8.

    Raises:
        InputError: Not ``H:MM:SS``, or not within 6 h after the start.

    """
    found = _CLOCK_RE.match(clock.strip())
    if found is None:
        raise InputError(f"clock time {clock.strip()!r}: expected H:MM:SS")
    h, m, s = (int(v) for v in found.groups())
    day: date = datetime.fromtimestamp(start_unix, CLOCK_ZONE).date()
    try:
        when = datetime(day.year, day.month, day.day, h, m, s, tzinfo=CLOCK_ZONE)
    except ValueError:
        raise InputError(f"clock time {clock.strip()!r} is not a time of day") from None
    offset = when.timestamp() - start_unix
    if not 0.0 <= offset <= _MAX_OFFSET_S:
        raise InputError(
            f"clock time {clock.strip()!r} is {offset:+.0f} s from the sequence's start: "
            "expected within 6 h after it"
        )
    return offset


def read_remembr_question_windows(folder: str | Path) -> dict[str, tuple[float, float]]:
    """Each question's own window (Unix seconds) from ReMEmbR's ``navqa`` folder.

    Args:
        folder: ReMEmbR's ``remembr/data/navqa`` (``<seq>/qa_unfilled.json`` inside).

    Returns:
        ``{question id: (start_time, end_time)}``; the end is when it is asked.

    Raises:
        InputError: No ``qa_unfilled.json`` in it, or one cannot be read.

    """
    found: dict[str, tuple[float, float]] = {}
    files = sorted(Path(folder).glob("*/qa_unfilled.json"))
    if not files:
        raise InputError(f"{folder}: no <sequence>/qa_unfilled.json (ReMEmbR's data/navqa)")
    for path in files:
        try:
            items = json.loads(path.read_text(encoding="utf-8"))["data"]
            for item in items:
                found[str(item["id"])] = (
                    finite(item["start_time"], f"{path}: start_time"),
                    finite(item["end_time"], f"{path}: end_time"),
                )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from None
    return found


def read_remembr_question_times(folder: str | Path) -> dict[str, float]:
    """Each question's current time (Unix seconds, ``end_time``) from ReMEmbR's folder.

    Raises:
        InputError: As :func:`read_remembr_question_windows`.

    """
    return {qid: end for qid, (_, end) in read_remembr_question_windows(folder).items()}


def read_oc_navqa(
    path: str | Path,
    *,
    start_times: Mapping[str, float] | None = None,
    question_times: Mapping[str, float] | None = None,
    question_windows: Mapping[str, tuple[float, float]] | None = None,
) -> QuestionFile:
    """Read OC-NaVQA's CSV (DAAAM's ``data/oc-navqa_data.csv``, or a file of its format).

    Args:
        path: The CSV file.
        start_times: Time zero per sequence id, Unix seconds (default :data:`START_TIMES`).
        question_times: Current time per question id, Unix seconds
            (:func:`read_remembr_question_times`); None = after the whole sequence.
        question_windows: ``(start, end)`` per question id, Unix seconds
            (:func:`read_remembr_question_windows`): the end is the current time (it
            replaces ``question_times``), the start is kept to check the answer's time.

    Returns:
        The questions; each row that cannot be used with its first line and the reason;
        the duration questions whose units disagree (:mod:`.consistency`).

    Raises:
        InputError: The file cannot be read, or a needed column is missing.

    """
    path = Path(path)
    starts = dict(START_TIMES if start_times is None else start_times)
    windows = dict(question_windows or {})
    if question_times is not None:
        windows = {qid: (math.nan, end) for qid, end in question_times.items()} | windows
    out = QuestionFile(path)
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise InputError(f"{path}: empty file")
            columns = _columns(header, path)
            widths: list[int] = []
            line = reader.line_num + 1
            for row in reader:
                first, line = line, reader.line_num + 1
                if not any(cell.strip() for cell in row):
                    continue
                try:
                    question, problems = _question(
                        row, len(header), columns, starts=starts, windows=windows
                    )
                except InputError as exc:
                    out.rejected.append((first, str(exc)))
                    continue
                out.questions.append(replace(question, source=f"{path.name}:{first}"))
                if problems:
                    out.inconsistent[question.id] = problems
                widths.append(len(row))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    _note_unfilled(out, header, widths)
    return out


def _columns(header: list[str], path: Path) -> dict[str, int]:
    folded = [_fold(name) for name in header]
    columns = {key: folded.index(name) for key, name in COLUMNS.items() if name in folded}
    missing = [COLUMNS[k] for k in _NEEDED if k not in columns]
    if missing:
        raise InputError(f"{path}: no column {missing} (the header has {header})")
    return columns


def _note_unfilled(out: QuestionFile, header: list[str], widths: list[int]) -> None:
    if widths and max(widths) < len(header):
        unfilled = [name.replace("\r", "").replace("\n", " ") for name in header[max(widths) :]]
        out.notes.append(
            f"line 1 (the header) names {len(header)} columns but no question's row has more "
            f"than {max(widths)} fields: {unfilled} is in none (not needed; no question lost)"
        )


def _question(
    row: list[str],
    width: int,
    columns: dict[str, int],
    *,
    starts: Mapping[str, float],
    windows: Mapping[str, tuple[float, float]],
) -> tuple[Question, list[str]]:
    if len(row) > width:
        raise InputError(f"{len(row)} fields, but the header names {width} columns")

    def cell(key: str) -> str:
        index = columns.get(key)
        return row[index].strip() if index is not None and index < len(row) else ""

    missing = [COLUMNS[k] for k in _NEEDED if not cell(k)]
    if missing:
        raise InputError(f"{len(row)} fields; empty or missing: {missing}")
    kind = cell("type").lower()
    if kind not in QUESTION_TYPES:
        raise InputError(f"type {cell('type')!r}: must be one of {', '.join(QUESTION_TYPES)}")
    sequence = cell("sequence")
    if sequence not in starts:
        raise InputError(
            f"sequence {sequence!r} has no start time (known: "
            f"{', '.join(sorted(starts, key=natural_order))})"
        )
    start = starts[sequence]
    clocks = [c for c in cell("timestamp").split(",") if c.strip()]
    times = [clock_seconds(c, start) for c in clocks]
    qid = cell("id")
    asked = window_start = None
    if qid in windows:
        low, high = windows[qid]
        asked = max(0.0, high - start)
        window_start = None if math.isnan(low) else max(0.0, low - start)
    horizon = _HORIZON_RE.search(qid)
    question = Question(
        id=qid,
        sequence=sequence,
        text=cell("question"),
        type=kind,
        truth=_truth(kind, cell, times),
        category=cell("category"),
        horizon=horizon.group(1) if horizon else "",
        asked_at_s=asked,
        origin_ns=round(start * NS_PER_SECOND),
        evidence_s=tuple(times),
        window_start_s=window_start,
    )
    problems = []
    if kind == "duration":  # the parsable minutes were checked as a number just above
        problems = duration_problems(
            cell("parsable"),
            span_s=times[1] - times[0] if len(times) == 2 else None,
            answer_text=cell("text_answer"),
            question=cell("question"),
        )
    return question, problems


def _truth(kind: str, cell: Any, times: list[float]) -> Answer:
    need = _TYPE_NEEDS.get(kind)
    if need is not None and not cell(need):
        raise InputError(f"a {kind} question needs {COLUMNS[need]!r}")
    if kind == "binary":
        word = cell("parsable").lower()
        if word not in ("yes", "no"):
            raise InputError(f"parsable answer {cell('parsable')!r}: a binary needs yes or no")
        return Answer(yes=word == "yes")
    if kind == "position":
        return Answer(position=_bracket_point(cell("position")))
    if kind == "time":
        if len(times) != 1:
            raise InputError(f"a time question needs one clock time, not {len(times)}")
        return Answer(time_s=times[0])
    if kind == "duration":
        try:
            minutes = finite(float(cell("parsable")), "parsable answer", low=0.0)
        except ValueError:
            raise InputError(
                f"parsable answer {cell('parsable')!r}: a duration needs minutes"
            ) from None
        return Answer(minutes=minutes)
    text = cell("text_answer")
    if not text:
        raise InputError(f"a text question needs {COLUMNS['text_answer']!r}")
    return Answer(text=text)


def _bracket_point(text: str) -> tuple[float, float, float]:
    """``[x y z]`` (numpy's print of a point, as the CSV has it) as a point."""
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")):
        raise InputError(f"GT response {text!r}: expected [x y z] in metres")
    try:
        values = [float(v) for v in inner[1:-1].replace(",", " ").split()]
    except ValueError:
        values = []
    if len(values) != 3:
        raise InputError(f"GT response {text!r}: expected three numbers [x y z]")
    x, y, z = (finite(v, "GT response") for v in values)
    return (x, y, z)
