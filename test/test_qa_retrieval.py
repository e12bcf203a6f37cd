"""The QA world, its questions, and the retrieval answerer end to end (in process and over DDS).

The short world (:mod:`qa_helpers`: 3 minutes, two streets) is processed once with the
shipped small models; ``eval-qa`` asks its questions of the store with the ``retrieval``
answerer and writes a run folder; the same questions through a memory node's
``retrieve_episodes`` service (the installed memory_node over DDS, ``--service``) get the
same answers.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import synthetic_frames as sf
from qa_helpers import QA_SECONDS, QA_SEED, QaWorldStore
from ros_helpers import serving_memory_node

from surprise_memory.cli import main as cli_main
from surprise_memory.evaluation.qa.answerers import search_words
from surprise_memory.evaluation.qa.run import QaRun
from surprise_memory.evaluation.qa.world_questions import PHRASINGS, world_questions
from surprise_memory.offline.synthetic.captions import TRAIN_PHRASES
from surprise_memory.offline.synthetic.qa_world import QA_EVENT_SPANS, qa_world
from surprise_memory.perception.encoders import SYNTHETIC_EMBEDDER_MODEL, SYNTHETIC_MODEL_NAME
from surprise_memory.stamps import NS_PER_SECOND

NS = "/surprise_memory_qa"


# ------------------------------------------------------------------------------ the world
def test_the_world_is_a_pure_function_of_its_seed_and_length() -> None:
    a, b = qa_world(11, 600), qa_world(11, 600)
    assert a.ground_truth() == b.ground_truth()
    assert qa_world(12, 600).ground_truth() != a.ground_truth()
    first = next(a.frames())
    assert (first.rgb == next(b.frames()).rgb).all()


def test_the_route_is_continuous_and_events_are_where_the_robot_was() -> None:
    world = qa_world(13, 300)
    truth = world.ground_truth()
    assert len(truth["legs"]) >= 4  # many places
    samples = list(world.odometry())
    stamps = [s for s, _ in samples]
    assert stamps == sorted(set(stamps)) and stamps[0] == world.start_ns
    step = max(math.dist(p.position, q.position) for (_, p), (_, q) in itertools.pairwise(samples))
    assert step <= 0.5 * 0.05 + 1e-6  # 0.5 m/s at 20 Hz, no jump between streets
    by_stamp = dict(samples)
    for event in truth["events"]:
        stamp = world.start_ns + round(event["start_s"] * NS_PER_SECOND)
        nearest = min(by_stamp, key=lambda s: abs(s - stamp))
        assert math.dist(by_stamp[nearest].position, event["position"]) < 1e-5
        assert event["end_s"] - event["start_s"] == pytest.approx(QA_EVENT_SPANS[event["kind"]])
    colours = [e["colour"] for e in truth["events"] if e["kind"] == "object_appears"]
    assert len(colours) == len(set(colours)) and "grey" not in colours
    frames = list(world.frames())
    assert len(frames) == world.frame_count == 3000
    assert all(b.stamp_ns > a.stamp_ns for a, b in itertools.pairwise(frames))


def test_a_twenty_minute_world_has_dozens_of_events_and_quiet_stretches() -> None:
    truth = qa_world(3, 1200).ground_truth()
    kinds = {e["kind"] for e in truth["events"]}
    assert kinds == set(QA_EVENT_SPANS) and len(truth["events"]) >= 20
    starts = sorted(e["start_s"] for e in truth["events"])
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert max(gaps) >= 120  # a long quiet stretch


def test_questions_hold_their_answers_at_their_asking_time() -> None:
    truth = qa_world(11, 600).ground_truth()
    questions = world_questions(truth, 11)
    assert {q.type for q in questions} == {"time", "position", "binary", "duration"}
    assert {q.truth.yes for q in questions if q.type == "binary"} == {True, False}
    events = truth["events"]
    for q in questions:
        assert q.asked_at_s is not None and 0 <= q.asked_at_s <= truth["duration_s"]
        if q.type == "time":  # the event asked about happened before the asking
            assert q.truth.time_s is not None and q.truth.time_s < q.asked_at_s
        if q.type == "binary" and not q.truth.yes:  # nothing of the kind yet
            kind = {"object": "object_appears", "person": "person_crosses"}.get(q.category)
            before = [e for e in events if e["kind"] == kind and e["start_s"] < q.asked_at_s]
            assert kind is None or not before
    assert world_questions(truth, 11) == questions


def test_no_phrasing_is_a_training_caption() -> None:
    captions = {
        text.format(c=c).lower()
        for texts in TRAIN_PHRASES.values()
        for text in texts
        for c in ("red", "blue", "coloured", "green", "yellow", "orange", "cyan", "pink")
    }
    asked = [
        p.format(a_c="a red").rstrip("?").lower()
        for kinds in PHRASINGS.values()
        for texts in kinds.values()
        for p in texts
    ]
    for text in asked:
        assert text not in captions, text
        assert search_words(text).lower() not in captions, text


# ------------------------------------------------------------------------------ eval-qa
@pytest.fixture(scope="module")
def retrieval_run(qa_world_store: QaWorldStore, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qa_run") / "run"
    store = f"{qa_world_store.sequence}={qa_world_store.store}"
    args = ["eval-qa", str(qa_world_store.questions_file), "--store", store, "--out", str(out)]
    assert cli_main(args) == 0
    return out


def test_eval_qa_writes_every_answer_score_and_transcript(
    retrieval_run: Path, qa_world_store: QaWorldStore
) -> None:
    run = QaRun.open(retrieval_run)
    records = run.records()
    assert len(records) == len(qa_world_store.questions)
    settings = json.loads((retrieval_run / "settings.json").read_text())
    assert settings["answerer"] == {
        "name": "retrieval",
        "qa_yes_threshold": 0.58,
        "qa_place_margin": 0.0,
        "qa_max_results": 20,
        "still_threshold": 0.58,
        "place_radius_m": 5.0,
        "still_pass_s": 30.0,
        "still_drop": None,
        "generic_threshold": None,  # qa_generic_threshold 1.0: not asked
    }
    assert settings["embedders"] == {
        qa_world_store.sequence: f"{SYNTHETIC_EMBEDDER_MODEL}:{SYNTHETIC_MODEL_NAME}"
    }
    by_id = {q.id: q for q in qa_world_store.questions}
    origin = qa_world_store.world.start_ns
    for (qid, _), record in records.items():
        asked = by_id[qid].asked_at_s
        assert asked is not None and record["error"] is None and record["transcript"], record
        for call in record["transcript"]:
            assert call["tool"] == "search_episodic_memory"
            for episode in call["result"]["episodes"]:  # the memory is cut at the asking
                assert episode["end_time"] <= asked + 1e-6
        assert record["score"]["status"] in ("scored", "unanswered")
    summary = json.loads((retrieval_run / "summary.json").read_text())
    assert summary["all"]["counts"]["errors"] == 0
    assert summary["yes_threshold_fit"]["place_margin"] == 0.0  # a memory without places
    generic = summary["generic_threshold_fit"]  # fitted on the run's binary questions
    assert generic["n"] >= 1 and -1.0 <= generic["threshold"] <= 1.0
    text = (retrieval_run / "summary.md").read_text()
    assert "question accuracy" in text and "## by category" in text
    assert origin == qa_world_store.truth["start_ns"]


def test_the_retrieval_answerer_finds_the_events_of_the_short_world(retrieval_run: Path) -> None:
    summary = json.loads((retrieval_run / "summary.json").read_text())
    # every scripted event of this world is in an episode of the surprise gate: the light
    # and the crossing are answered within seconds, the balls' binaries right
    light = summary["by_category"]["light"]
    person = summary["by_category"]["person"]
    assert light["time_error_min"]["mean"] < 0.1 and person["time_error_min"]["mean"] < 0.1
    assert summary["by_category"]["object"]["question_accuracy"]["mean"] == 1.0
    assert summary["all"]["question_accuracy"]["mean"] >= 0.75


def test_resume_of_a_finished_run_asks_nothing_again(
    retrieval_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (retrieval_run / "results.jsonl").read_text().count("\n")
    assert cli_main(["eval-qa", "--resume", str(retrieval_run)]) == 0
    assert (retrieval_run / "results.jsonl").read_text().count("\n") == lines
    assert "--resume RUN takes" in _refused(
        ["eval-qa", "x.jsonl", "--resume", str(retrieval_run)], capsys
    )


def _refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(args) == 1
    return capsys.readouterr().err


def test_a_run_folder_is_never_overwritten(
    retrieval_run: Path, qa_world_store: QaWorldStore, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"{qa_world_store.sequence}={qa_world_store.store}"
    args = ["eval-qa", str(qa_world_store.questions_file), "--store", store]
    assert "not empty" in _refused([*args, "--out", str(retrieval_run)], capsys)


# ------------------------------------------------------------------------------ over DDS
@pytest.mark.ros
def test_the_memory_nodes_service_gives_the_same_answers(
    retrieval_run: Path, qa_world_store: QaWorldStore, tmp_path: Path
) -> None:
    params = sf.node_params(
        str(qa_world_store.store),
        embedder_model=SYNTHETIC_EMBEDDER_MODEL,
        embedder_weights=SYNTHETIC_MODEL_NAME,
    )
    out = tmp_path / "over_dds"
    service = f"{qa_world_store.sequence}={NS}/retrieve_episodes"
    with serving_memory_node(params, tmp_path, NS, "qa_test"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "surprise_memory",
                "eval-qa",
                str(qa_world_store.questions_file),
                "--service",
                service,
                "--out",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=os.environ.copy(),
            cwd=tmp_path,  # the colcon install's package (with its msg modules), not the checkout
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    here = _answers(retrieval_run)
    there = _answers(out)
    assert there.keys() == here.keys()
    for qid, answer in here.items():
        assert _close(there[qid], answer), (qid, there[qid], answer)


def _answers(folder: Path) -> dict[str, Any]:
    return {qid: r["answer"] for (qid, _), r in QaRun.open(folder).records().items()}


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-3
    return bool(a == b)


def test_the_short_world_is_the_one_the_helpers_describe() -> None:
    truth = qa_world(QA_SEED, QA_SECONDS).ground_truth()
    assert len(truth["legs"]) == 2
    assert {e["kind"] for e in truth["events"]} == set(QA_EVENT_SPANS)
