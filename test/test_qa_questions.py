"""Question files: OC-NaVQA's CSV (a small file of its format, written here) and our JSON Lines.

The CSV below is ours, not the dataset: DAAAM's layout (column names holding line breaks,
CR LF line ends, a tenth header column no row fills, ``[x y z]`` positions, clock times)
with made-up questions, and one malformed row per way a row can be unusable. The real
file's counts (210 questions) are in the QA guide; it is not in the repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surprise_memory.cli import main as cli_main
from surprise_memory.errors import InputError
from surprise_memory.evaluation.qa.oc_navqa import (
    START_TIMES,
    clock_seconds,
    read_oc_navqa,
    read_remembr_question_times,
)
from surprise_memory.evaluation.qa.question_files import read_questions, write_questions
from surprise_memory.evaluation.qa.questions import Answer, Question

HEADER = (
    'UUID,Seq ID,Question,"Timestamp \r\nwith answer","Type \r\n(binary, position, time, '
    'text)",Text answer,Parsable answer,"Question\r\nCategory",GT Response, GT Response FullSeq'
)
ROWS = [
    "LONG_a1,0,When did you pass the fountain?,7:59:00,time,,[minutes] ago,temporal,",
    'SHORT_a2,0,How long did you wait?,"07:56:38,07:59:00",duration,I waited 2.3 minutes,2.3,'
    "temporal reasoning,",
    "MEDIUM_a3,0,Where is the red bench?,7:57:53,position,,[position],spatial,[-79.5 78.25 -0.5]",
    "16_LONG_b1,16,Did you see a dog?,10:40:40,binary,,Yes,,",
    "16_SHORT_b2,16,Is it raining?,10:46:28,binary,,no,,",
    '16_MEDIUM_b3,16,"What did the sign say?\r\nAnswer in words.",10:44:39,text,It said STOP,,,',
    # malformed: a position with two numbers, a binary answered "maybe", an unknown type,
    # a clock time that is not one, a sequence with no start time, one field too many
    "16_SHORT_c1,16,Where is the bin?,10:53:40,position,,[position],spatial,[60.7 93.3]",
    "16_SHORT_c2,16,Was it busy?,10:53:40,binary,,maybe,,",
    "16_SHORT_c3,16,How far?,10:53:40,distance,,,,",
    "16_SHORT_c4,16,When did you stop?,25:99:00,time,,,,",
    "99_SHORT_c5,99,When did you stop?,10:53:40,time,,,,",
    "16_SHORT_c6,16,Where?,10:53:40,position,,,,[1 2 3],extra,more",
]
MALFORMED = [  # (first line, why): the header is lines 1-4, question b3 lines 10-11
    (12, "expected three numbers"),
    (13, "a binary needs yes or no"),
    (14, "type 'distance'"),
    (15, "'25:99:00' is not a time of day"),
    (16, "sequence '99' has no start time"),
    (17, "11 fields, but the header names 10 columns"),
]


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("qa") / "oc-navqa_like.csv"
    path.write_bytes(("\r\n".join([HEADER, *ROWS]) + "\r\n").encode("utf-8"))
    return path


def test_the_csv_is_read_by_its_column_names_with_their_line_breaks(csv_file: Path) -> None:
    read = read_questions(csv_file)
    assert [q.id for q in read.questions] == [
        "LONG_a1",
        "SHORT_a2",
        "MEDIUM_a3",
        "16_LONG_b1",
        "16_SHORT_b2",
        "16_MEDIUM_b3",
    ]
    by_id = {q.id: q for q in read.questions}
    # 7:59:00 at UTC-8 on sequence 0's day: 15:59:00 UTC; DAAAM's start is 15:49:45.589118
    assert by_id["LONG_a1"].truth.time_s == pytest.approx(554.410882, abs=1e-5)
    assert by_id["LONG_a1"].origin_ns == round(START_TIMES["0"] * 1e9)
    assert by_id["LONG_a1"].horizon == "LONG" and by_id["LONG_a1"].category == "temporal"
    assert by_id["SHORT_a2"].truth.minutes == 2.3  # the parsable answer, not the span
    assert by_id["MEDIUM_a3"].truth.position == (-79.5, 78.25, -0.5)
    assert by_id["16_LONG_b1"].truth.yes is True and by_id["16_SHORT_b2"].truth.yes is False
    assert by_id["16_MEDIUM_b3"].text == "What did the sign say?\r\nAnswer in words."
    assert by_id["16_MEDIUM_b3"].truth.text == "It said STOP"
    assert read.counts("type") == {"binary": 2, "position": 1, "time": 1, "duration": 1, "text": 1}
    assert read.counts("sequence") == {"0": 3, "16": 3}


def test_each_malformed_row_is_named_by_its_first_line_and_why(csv_file: Path) -> None:
    read = read_questions(csv_file)
    assert len(read.rejected) == len(MALFORMED)
    for (line, reason), (expected_line, why) in zip(read.rejected, MALFORMED, strict=True):
        assert line == expected_line, (line, reason)
        assert why in reason, reason
    # no row fills the tenth column: said once, no question lost for it
    assert len(read.notes) == 1 and "GT Response FullSeq" in read.notes[0]


def test_questions_say_where_they_were_read(csv_file: Path) -> None:
    sources = [q.source for q in read_questions(csv_file).questions]
    assert sources == [f"oc-navqa_like.csv:{n}" for n in (5, 6, 7, 8, 9, 10)]


def test_a_missing_column_or_an_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("UUID,Seq ID,Question\r\nx,0,Why?\r\n", encoding="utf-8")
    with pytest.raises(InputError, match="no column"):
        read_questions(bad)
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="empty file"):
        read_questions(empty)
    with pytest.raises(InputError, match="does not exist"):
        read_questions(tmp_path / "missing.csv")
    with pytest.raises(InputError, match=r"\.csv or our \.jsonl"):
        read_questions(bad.rename(tmp_path / "bad.txt"))


def test_clock_times_count_from_daaams_start_at_utc_minus_8() -> None:
    start = START_TIMES["3"]  # 2023-01-17 20:01:24.66 UTC = 12:01:24.66 at UTC-8
    assert clock_seconds("12:01:30", start) == pytest.approx(5.337233, abs=1e-5)
    with pytest.raises(InputError, match="within 6 h after"):
        clock_seconds("11:00:00", start)  # before the sequence began


def test_remembrs_question_times_set_when_each_question_is_asked(
    csv_file: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "navqa"
    (folder / "0").mkdir(parents=True)
    end = START_TIMES["0"] + 600.0
    item = {"id": "LONG_a1", "start_time": 0.0, "end_time": end}
    (folder / "0" / "qa_unfilled.json").write_text(json.dumps({"data": [item]}))
    times = read_remembr_question_times(folder)
    read = read_oc_navqa(csv_file, question_times=times)
    by_id = {q.id: q for q in read.questions}
    assert by_id["LONG_a1"].asked_at_s == pytest.approx(600.0)
    assert by_id["SHORT_a2"].asked_at_s is None
    with pytest.raises(InputError, match=r"qa_unfilled\.json"):
        read_remembr_question_times(tmp_path / "nothing")


def test_our_jsonl_round_trips_and_names_what_is_wrong(tmp_path: Path) -> None:
    questions = [
        Question("a", "s1", "When?", "time", Answer(time_s=12.5), "kind", "", 30.0, 10**18),
        Question("b", "s1", "Where?", "position", Answer(position=(1.0, 2.0, 3.0))),
        Question("c", "s2", "Yes?", "binary", Answer(yes=False), asked_at_s=5.0),
        Question("d", "s2", "How long?", "duration", Answer(minutes=1.5)),
        Question("e", "s2", "What?", "text", Answer(text="a cat")),
    ]
    path = write_questions(tmp_path / "q.jsonl", questions)
    assert [q.as_dict() for q in read_questions(path).questions] == [q.as_dict() for q in questions]
    lines = path.read_text().splitlines()
    lines += [
        "not json",
        json.dumps({"id": "f", "sequence": "s", "type": "time", "question": "?", "answer": {}}),
        json.dumps({"id": "g", "sequence": "s", "type": "when", "question": "?"}),
        json.dumps(
            {"id": "h", "sequence": "s", "type": "binary", "question": "?", "answer": {"yes": 1}}
        ),
    ]
    (tmp_path / "q2.jsonl").write_text("\n".join(lines) + "\n")
    read = read_questions(tmp_path / "q2.jsonl")
    assert len(read.questions) == 5
    reasons = dict(read.rejected)
    assert set(reasons) == {6, 7, 8, 9}
    assert "time question needs {'time_s'" in reasons[7]
    assert "type 'when'" in reasons[8]
    assert "must be true or false" in reasons[9]
    lines.append(lines[0])
    (tmp_path / "q3.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="'a' is used twice"):
        read_questions(tmp_path / "q3.jsonl")


def test_dry_run_prints_the_counts_and_the_rejections(
    csv_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["eval-qa", str(csv_file), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "6 questions, 6 rows rejected" in out
    assert "by type: binary: 2; position: 1; time: 1; duration: 1; text: 1" in out
    assert "by sequence: 0: 3; 16: 3" in out
    assert out.count("rejected: line") == 6 and "GT Response FullSeq" in out


def test_eval_qa_refuses_without_stores_or_out(
    csv_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert cli_main(["eval-qa", str(csv_file)]) == 1
    assert "give --out RUN" in capsys.readouterr().err
    assert cli_main(["eval-qa", str(csv_file), "--out", str(tmp_path / "r")]) == 1
    assert "no memory for sequence(s) ['0', '16']" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
