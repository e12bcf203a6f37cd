"""A QA run folder: every question's answer, score and transcript, the summary, the settings.

``eval-qa --out RUN`` writes::

    RUN/settings.json     what decides the answers: answerer, settings, question file
                          (path, SHA-256), each sequence's memory, versions; each resume
    RUN/questions.jsonl   the questions asked, in our JSON Lines format (self-contained)
    RUN/results.jsonl     one line per attempt at a question, appended and fsynced as it
                          ends: id, run, attempt, answer, score, error, details, seconds,
                          and the whole transcript (requests, tool calls and results)
    RUN/images/           the frames sent to a vision model, by SHA-256 (transcripts
                          name them instead of repeating their base64)
    RUN/summary.json      the summary (:func:`~.scoring.summarize`), and summary.md

A question is done when its last attempt did not fail. ``--resume`` (:func:`run_questions`
on an existing folder) asks the others again, and only them: a run stopped by Ctrl-C, a
killed process or an endpoint that was down completes without losing an answer; a last
line cut short by a kill is ignored (its question is asked again).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surprise_memory.errors import InputError, StoreError
from surprise_memory.evaluation.qa.answerers import Answerer, Memory
from surprise_memory.evaluation.qa.question_files import write_questions
from surprise_memory.evaluation.qa.questions import Question, question_from_dict
from surprise_memory.evaluation.qa.scoring import (
    QuestionScore,
    ScoredAnswer,
    score_answer,
    summarize,
    summary_markdown,
)
from surprise_memory.evaluation.qa.thresholds import (
    best_by_kind,
    fit_generic_threshold,
    fit_yes_thresholds,
    reaches_yes,
)
from surprise_memory.offline.run_record import write_json

__all__ = [
    "IMAGES",
    "QUESTIONS",
    "RESULTS",
    "RUN_FORMAT",
    "SETTINGS",
    "SUMMARY_JSON",
    "SUMMARY_MD",
    "QaRun",
    "file_sha256",
    "run_questions",
    "write_summary",
]

SETTINGS = "settings.json"
QUESTIONS = "questions.jsonl"
RESULTS = "results.jsonl"
IMAGES = "images"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
RUN_FORMAT = "surprise_memory.qa_run/1"
"""Value of the ``format`` key of ``settings.json``."""


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, hex."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class QaRun:
    """An open run folder: its questions and settings.

    Attributes:
        folder: The folder.
        questions: The questions, in the order they are asked.
        settings: ``settings.json``.

    """

    folder: Path
    questions: list[Question]
    settings: dict[str, Any]

    @classmethod
    def create(
        cls, folder: str | Path, questions: list[Question], settings: Mapping[str, Any]
    ) -> QaRun:
        """Start a new run in ``folder`` (created; it must be new or empty).

        Raises:
            StoreError: The folder holds files already (resume it instead), or cannot be
                written.

        """
        folder = Path(folder).expanduser()
        if folder.exists() and any(folder.iterdir()):
            raise StoreError(
                f"{folder} is not empty: give a new --out folder, or --resume {folder}"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write_questions(folder / QUESTIONS, questions)
            record = {"format": RUN_FORMAT, "created_wall_ns": time.time_ns(), **settings}
            write_json(folder / SETTINGS, record)
        except OSError as exc:
            raise StoreError(f"cannot write the run folder {folder}: {exc}") from None
        return cls(folder, list(questions), record)

    @classmethod
    def open(cls, folder: str | Path) -> QaRun:
        """Open an existing run (to resume it, or to summarise it again).

        Raises:
            InputError: ``folder`` is not a run folder, or its files cannot be read.

        """
        folder = Path(folder).expanduser()
        try:
            settings = json.loads((folder / SETTINGS).read_text(encoding="utf-8"))
            lines = (folder / QUESTIONS).read_text(encoding="utf-8").splitlines()
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(f"{folder} is not a QA run folder ({exc})") from None
        if settings.get("format") != RUN_FORMAT:
            raise InputError(f"{folder}/{SETTINGS}: format {settings.get('format')!r}")
        questions = [
            question_from_dict(json.loads(line), f"{QUESTIONS}:{n}")
            for n, line in enumerate(lines, start=1)
            if line.strip()
        ]
        return cls(folder, questions, settings)

    def note_resume(self, changes: Mapping[str, Any]) -> None:
        """Record a resume and the settings it changed (kept for later resumes)."""
        self.settings.setdefault("resumes", []).append(
            {"wall_ns": time.time_ns(), "changed": dict(changes)}
        )
        self.settings["config"] = {**self.settings.get("config", {}), **changes}
        write_json(self.folder / SETTINGS, self.settings)

    def records(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The last attempt at each (question id, run), from ``results.jsonl``."""
        path = self.folder / RESULTS
        last: dict[tuple[str, int], dict[str, Any]] = {}
        if not path.exists():
            return last
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
                last[(str(record["id"]), int(record["run"]))] = record
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # a line cut short by a kill: its question is asked again
        return last

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one attempt's record and make it durable before going on."""
        line = json.dumps(record, ensure_ascii=False, default=_plain) + "\n"
        with (self.folder / RESULTS).open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _scored(run: QaRun) -> list[ScoredAnswer]:
    by_id = {q.id: q for q in run.questions}
    out = []
    for (qid, index), record in run.records().items():
        question = by_id.get(qid)
        if question is None:
            continue
        score = record["score"]
        out.append(
            ScoredAnswer(
                question, index, QuestionScore(score["measure"], score["value"], score["status"])
            )
        )
    return out


def write_summary(run: QaRun) -> dict[str, Any]:
    """Summarise the run's last attempts into ``summary.json`` and ``summary.md``."""
    extra: dict[str, Any] = {"answerer": run.settings.get("answerer", {}).get("name")}
    inconsistent = run.settings.get("inconsistent")
    if inconsistent:
        extra["inconsistent"] = {
            "count": len(inconsistent["questions"]),
            "left_out": bool(inconsistent["left_out"]),
        }
    if extra["answerer"] == "retrieval":
        by_id = {q.id: q for q in run.questions}
        binary = [
            (r.get("details", {}), bool(by_id[qid].truth.yes))
            for (qid, _), r in run.records().items()
            if qid in by_id and by_id[qid].type == "binary" and r.get("error") is None
        ]
        fit = fit_yes_thresholds((*best_by_kind(d), y) for d, y in binary)
        fit["note"] = (
            "the threshold (and a place keyframe's margin above it) that would have answered "
            "these binary questions best: fit them on held-out questions, then pass them as "
            "--qa-yes-threshold and --qa-place-margin"
        )
        extra["yes_threshold_fit"] = fit
        answerer = run.settings.get("answerer", {})
        used = answerer.get("qa_yes_threshold", fit["threshold"])
        margin = float(answerer.get("qa_place_margin", 0.0))
        generic = fit_generic_threshold(
            (
                reaches_yes(d, float(used if used is not None else 0.0), margin),
                d.get("generic_cos"),
                y,
            )
            for d, y in binary
        )
        generic["note"] = (
            "with the run's yes-threshold, the cosine to an empty caption that would have "
            "answered them best: fit it on held-out questions, then pass it as "
            "--qa-generic-threshold"
        )
        extra["generic_threshold_fit"] = generic
    summary = summarize(_scored(run), extra=extra)
    write_json(run.folder / SUMMARY_JSON, summary)
    title = f"QA run {run.folder.name} ({extra['answerer']})"
    (run.folder / SUMMARY_MD).write_text(summary_markdown(summary, title), encoding="utf-8")
    return summary


def run_questions(
    run: QaRun,
    answerer: Answerer,
    memories: Mapping[str, Memory],
    *,
    repeats: int = 1,
    progress: Callable[[Question, int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Ask every question not yet done, ``repeats`` times; then write the summary.

    Args:
        run: The run folder (new, or one to resume).
        answerer: Who answers.
        memories: Each sequence's memory.
        repeats: Runs (each question asked once per run).
        progress: Called after each attempt with the question, its run and its record.

    Returns:
        The summary.

    Raises:
        InputError: A question's sequence has no memory.

    """
    missing = sorted({q.sequence for q in run.questions} - set(memories))
    if missing:
        raise InputError(f"no memory for sequence(s) {missing}: give --store SEQ=PATH for each")
    done = run.records()
    for index in range(repeats):
        for question in _pending(run.questions, done, index):
            previous = done.get((question.id, index))
            attempt = 1 if previous is None else int(previous.get("attempt", 1)) + 1
            t0 = time.perf_counter()
            result = answerer.answer(question, memories[question.sequence])
            elapsed = time.perf_counter() - t0
            score = score_answer(question, result.answer, error=result.error, judged=result.judged)
            answered = result.answer.as_dict(question.type) if result.answer else None
            record = {
                "id": question.id,
                "run": index,
                "attempt": attempt,
                "sequence": question.sequence,
                "type": question.type,
                "question": question.text,
                "truth": question.truth.as_dict(question.type),
                "answer": answered,
                "score": score.as_dict(),
                "error": result.error,
                "judged": result.judged,
                "details": result.details,
                "elapsed_s": round(elapsed, 4),
                "transcript": result.transcript,
            }
            run.append(record)
            done[(question.id, index)] = record
            if progress is not None:
                progress(question, index, record)
    return write_summary(run)


def _pending(
    questions: Iterable[Question], done: Mapping[tuple[str, int], dict[str, Any]], index: int
) -> list[Question]:
    return [
        q
        for q in questions
        if (q.id, index) not in done or done[(q.id, index)].get("error") is not None
    ]
