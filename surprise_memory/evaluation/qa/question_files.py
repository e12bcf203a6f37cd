"""Question files: reading OC-NaVQA's CSV or our JSON Lines by the suffix, writing ours.

:func:`read_questions` picks the reader by the file's suffix (``.csv``:
:func:`~.oc_navqa.read_oc_navqa`; ``.jsonl``: our format, :mod:`.questions`), checks
that ids are unique and lists the questions that disagree with themselves
(:mod:`.consistency`); :func:`write_questions` writes our format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from surprise_memory.errors import InputError
from surprise_memory.evaluation.qa.consistency import check_questions
from surprise_memory.evaluation.qa.oc_navqa import read_oc_navqa
from surprise_memory.evaluation.qa.questions import (
    Question,
    QuestionFile,
    check_unique_ids,
    question_from_dict,
)

__all__ = ["read_questions", "write_questions"]


def read_questions(path: str | Path, **options: Any) -> QuestionFile:
    """Read a question file: OC-NaVQA's CSV (``.csv``) or our JSON Lines (``.jsonl``).

    Args:
        path: The file.
        **options: For the CSV: those of :func:`~.oc_navqa.read_oc_navqa`.

    Returns:
        The questions, every line that could not be used with the reason, and the
        questions that disagree with themselves (``inconsistent``, with the reasons).

    Raises:
        InputError: The file cannot be read, has no usable question, its format is not
            known by its suffix, or two questions share an id.

    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"question file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        read = read_oc_navqa(path, **options)
    elif suffix in (".jsonl", ".ndjson"):
        if options:
            raise InputError(f"options {sorted(options)} apply to OC-NaVQA's CSV only")
        read = _read_jsonl(path)
    else:
        raise InputError(
            f"question file {str(path)!r}: expected OC-NaVQA's .csv or our .jsonl format"
        )
    check_unique_ids(read.questions)
    check_questions(read)
    if not read.questions:
        reasons = "; ".join(f"line {n}: {why}" for n, why in read.rejected[:3])
        raise InputError(f"{path}: no usable question" + (f" ({reasons})" if reasons else ""))
    return read


def _read_jsonl(path: Path) -> QuestionFile:
    out = QuestionFile(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            out.questions.append(question_from_dict(item, f"{path.name}:{number}"))
        except (json.JSONDecodeError, InputError) as exc:
            out.rejected.append((number, str(exc)))
    return out


def write_questions(path: str | Path, questions: Iterable[Question]) -> Path:
    """Write ``questions`` in our JSON Lines format; returns the path."""
    path = Path(path)
    text = "".join(json.dumps(q.as_dict(), ensure_ascii=False) + "\n" for q in questions)
    path.write_text(text, encoding="utf-8")
    return path
