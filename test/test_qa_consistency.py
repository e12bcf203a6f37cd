"""Questions that disagree with themselves: listed by ``eval-qa --dry-run``, left out on ask.

``test/fixtures/oc_navqa/`` is a small file of OC-NaVQA's format of our own (not the
dataset) and a ``navqa`` folder of ReMEmbR's ``qa_unfilled.json`` layout giving each
question its window: one answer seen before its window, one after its asking, a duration
answered in seconds, one whose text says another number, one asked in seconds; and
consistent ones beside them (a duration whose parsable answer is its span rounded as
written, 0.9 min answered 1).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from qa_helpers import QaWorldStore

from surprise_memory.cli import main as cli_main
from surprise_memory.evaluation.qa.consistency import (
    AFTER_ASKED,
    BEFORE_WINDOW,
    UNITS,
    duration_problems,
    problem_kinds,
    time_problems,
)
from surprise_memory.evaluation.qa.oc_navqa import read_remembr_question_windows
from surprise_memory.evaluation.qa.question_files import read_questions, write_questions
from surprise_memory.evaluation.qa.questions import Answer, Question

FIXTURE = Path(__file__).parent / "fixtures" / "oc_navqa"
CSV = FIXTURE / "oc_navqa_small.csv"
WINDOWS = FIXTURE / "navqa"
INCONSISTENT = {
    "MEDIUM_before1": [BEFORE_WINDOW],
    "SHORT_after1": [AFTER_ASKED],
    "MEDIUM_dur_seconds1": [UNITS, UNITS],  # the span in seconds; the text says seconds
    "16_LONG_dur_text1": [UNITS],
    "16_SHORT_dur_asks1": [UNITS],
}


def _kinds(reasons: list[str]) -> list[str]:
    return [
        next(k for k in (BEFORE_WINDOW, AFTER_ASKED, UNITS) if r.startswith(k)) for r in reasons
    ]


def test_the_file_lists_the_questions_that_disagree_with_themselves() -> None:
    read = read_questions(CSV, question_windows=read_remembr_question_windows(WINDOWS))
    assert len(read.questions) == 10 and not read.rejected
    assert {q: _kinds(r) for q, r in read.inconsistent.items()} == INCONSISTENT
    assert problem_kinds(read) == {BEFORE_WINDOW: 1, AFTER_ASKED: 1, UNITS: 3}
    by_id = {q.id: q for q in read.questions}
    before = by_id["MEDIUM_before1"]
    # 7:52:00 against a window from 7:55:00 (sequence 0 starts 7:49:45.589 at UTC-8)
    assert before.evidence_s == (pytest.approx(134.410882),)
    assert before.window_start_s == pytest.approx(314.410882)
    assert before.asked_at_s == pytest.approx(614.410882)
    assert "180 s before the window starts" in read.inconsistent["MEDIUM_before1"][0]
    assert "120 s after it is asked" in read.inconsistent["SHORT_after1"][0]
    assert "span in seconds (90 s = 1.50 min)" in read.inconsistent["MEDIUM_dur_seconds1"][0]
    assert "its text says 20 minutes" in read.inconsistent["16_LONG_dur_text1"][0]
    # the rounding as written: 0.9 min answered "1", 2.37 min answered "2.3" agree
    assert "SHORT_dur_rounded1" not in read.inconsistent
    assert "LONG_dur_ok1" not in read.inconsistent
    # without windows only the units can be checked
    alone = read_questions(CSV)
    assert set(alone.inconsistent) == {q for q, k in INCONSISTENT.items() if UNITS in k}


@pytest.mark.parametrize(
    ("minutes", "span_s", "text", "question", "problems"),
    [
        ("0.75", 45.0, "I was waiting for .75 minutes", "", 0),
        ("1.8", 110.0, "It took me 1.8 minutes", "", 0),
        ("9", 542.0, "It took me 9 minutes to get inside", "", 0),
        ("4.5", 330.0, "", "", 1),  # 5.5 min apart
        ("3", -180.0, "", "", 1),  # clock times backwards
        ("2", 120.0, "about 2 hours", "", 1),
        ("2", 120.0, "", "How many hours did it take?", 1),
    ],
)
def test_duration_units_within_the_rounding_as_written(
    minutes: str, span_s: float, text: str, question: str, problems: int
) -> None:
    found = duration_problems(minutes, span_s=span_s, answer_text=text, question=question)
    assert len(found) == problems, found
    assert all(reason.startswith(UNITS) for reason in found)


def test_our_format_carries_the_window_and_the_answers_time(tmp_path: Path) -> None:
    q = Question(
        "a", "s", "When?", "time", Answer(time_s=50.0), asked_at_s=40.0, window_start_s=10.0
    )
    assert [r.split(":")[0] for r in time_problems(q)] == [AFTER_ASKED]
    seen = replace(q, id="b", asked_at_s=60.0, evidence_s=(5.0, 20.0))
    assert [r.split(":")[0] for r in time_problems(seen)] == [BEFORE_WINDOW]
    read = read_questions(write_questions(tmp_path / "q.jsonl", [q, seen]))
    assert [x.as_dict() for x in read.questions] == [q.as_dict(), seen.as_dict()]
    assert set(read.inconsistent) == {"a", "b"}  # b: its evidence, not its true time


def test_dry_run_lists_them_with_their_counts(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval-qa", str(CSV), "--dry-run", "--question-times", str(WINDOWS)]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "10 questions, 0 rows rejected" in out
    assert (
        f"inconsistent: 5 of 10 questions ({BEFORE_WINDOW}: 1; {AFTER_ASKED}: 1; {UNITS}: 3)" in out
    )
    for qid in INCONSISTENT:
        assert f"    {qid} (oc_navqa_small.csv:" in out
    assert "LONG_ok1 (" not in out


def test_skip_inconsistent_leaves_them_out_and_the_summary_says_how_many(
    qa_world_store: QaWorldStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asked = [q for q in qa_world_store.questions if q.asked_at_s is not None][:6]
    late = [replace(q, evidence_s=(float(q.asked_at_s or 0.0) + 30.0,)) for q in asked[:2]]
    path = write_questions(tmp_path / "q.jsonl", late + asked[2:])
    out = tmp_path / "run"
    argv = ["eval-qa", str(path), "--store", str(qa_world_store.store), "--out", str(out)]
    assert cli_main([*argv, "--skip-inconsistent"]) == 0
    printed = capsys.readouterr().out
    assert "2 inconsistent question(s) left out" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["inconsistent"] == {"count": 2, "left_out": True}
    assert summary["all"]["counts"]["questions"] == 4
    asked_ids = {json.loads(line)["id"] for line in (out / "results.jsonl").open()}
    assert asked_ids == {q.id for q in asked[2:]}
    settings = json.loads((out / "settings.json").read_text())
    assert set(settings["inconsistent"]["questions"]) == {q.id for q in late}
    assert "2 question(s) of the file disagree" in (out / "summary.md").read_text()
    # without the flag they are asked, and the summary still says so
    assert cli_main([*argv[:-1], str(tmp_path / "all")]) == 0
    assert "2 inconsistent question(s) asked and scored" in capsys.readouterr().out
    every = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert every["all"]["counts"]["questions"] == 6
