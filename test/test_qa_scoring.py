"""Scores as ReMEmbR's eval.py sets them, on cases computed by hand; the summary's columns."""

from __future__ import annotations

import math

import pytest

from surprise_memory.evaluation.qa.answerers import search_words, split_between
from surprise_memory.evaluation.qa.questions import Answer, Question
from surprise_memory.evaluation.qa.scoring import (
    ScoredAnswer,
    columns_of,
    score_answer,
    spread,
    summarize,
    summary_markdown,
)
from surprise_memory.evaluation.qa.thresholds import (
    fit_generic_threshold,
    fit_still_drop,
    fit_yes_threshold,
    fit_yes_thresholds,
    reaches_yes,
)


def _q(kind: str, truth: Answer, qid: str = "q", **extra: str) -> Question:
    return Question(qid, extra.get("sequence", "s"), "?", kind, truth, extra.get("category", ""))


def test_binary_is_right_or_wrong_and_no_answer_counts_wrong() -> None:
    q = _q("binary", Answer(yes=True))
    assert score_answer(q, Answer(yes=True)).value == 1.0
    assert score_answer(q, Answer(yes=False)).value == 0.0
    unanswered = score_answer(q, None)
    assert (unanswered.value, unanswered.status) == (0.0, "unanswered")


def test_position_error_is_the_l2_distance_in_metres() -> None:
    q = _q("position", Answer(position=(1.0, 2.0, 3.0)))
    # (4, 6, 3) - (1, 2, 3) = (3, 4, 0): 5 m
    assert score_answer(q, Answer(position=(4.0, 6.0, 3.0))).value == pytest.approx(5.0)
    # (2, 4, 5) - (1, 2, 3) = (1, 2, 2): 3 m, z counts as ReMEmbR's norm counts it
    assert score_answer(q, Answer(position=(2.0, 4.0, 5.0))).value == pytest.approx(3.0)
    assert score_answer(q, None).status == "unanswered"


def test_time_error_is_absolute_minutes_the_same_as_minutes_ago() -> None:
    q = _q("time", Answer(time_s=600.0))  # 10:00 into the recording
    # asked at 20:00: truth "10 minutes ago"; answered 11:30, "8.5 minutes ago": 1.5 min
    assert score_answer(q, Answer(time_s=690.0)).value == pytest.approx(1.5)
    assert score_answer(q, Answer(time_s=570.0)).value == pytest.approx(0.5)


def test_duration_error_is_absolute_minutes() -> None:
    q = _q("duration", Answer(minutes=2.3))
    assert score_answer(q, Answer(minutes=0.75)).value == pytest.approx(1.55)
    assert score_answer(q, Answer(minutes=3.0)).value == pytest.approx(0.7)


def test_text_is_judged_or_unscored_and_an_error_has_no_score() -> None:
    q = _q("text", Answer(text="a red car"))
    assert score_answer(q, Answer(text="red")).status == "unscored"
    assert score_answer(q, Answer(text="red"), judged=True).value == 1.0
    assert score_answer(q, Answer(text="blue"), judged=False).value == 0.0
    failed = score_answer(_q("binary", Answer(yes=True)), None, error="endpoint down")
    assert (failed.value, failed.status) == (None, "error")


def _scored(run: int = 0) -> list[ScoredAnswer]:
    cases = [
        ("b1", "binary", Answer(yes=True), Answer(yes=True), "object"),  # 1
        ("b2", "binary", Answer(yes=False), Answer(yes=True), "object"),  # 0
        ("b3", "binary", Answer(yes=False), None, "person"),  # unanswered: 0
        ("b4", "binary", Answer(yes=True), Answer(yes=True), "person"),  # 1
        (
            "p1",
            "position",
            Answer(position=(0.0, 0.0, 0.0)),
            Answer(position=(3.0, 4.0, 0.0)),
            "object",
        ),  # 5
        (
            "p2",
            "position",
            Answer(position=(0.0, 0.0, 0.0)),
            Answer(position=(0.0, 0.0, 10.0)),
            "person",
        ),  # 10
        ("p3", "position", Answer(position=(0.0, 0.0, 0.0)), None, "person"),  # left out
        ("t1", "time", Answer(time_s=0.0), Answer(time_s=60.0), "person"),  # 1 min
        ("t2", "time", Answer(time_s=0.0), Answer(time_s=180.0), "object"),  # 3 min
        ("d1", "duration", Answer(minutes=1.0), Answer(minutes=3.0), "object"),  # 2 min
        ("x1", "text", Answer(text="red"), Answer(text="red"), "object"),  # unscored
    ]
    out = []
    for qid, kind, truth, given, category in cases:
        q = _q(kind, truth, qid, category=category)
        out.append(ScoredAnswer(q, run, score_answer(q, given)))
    return out


def test_the_three_columns_by_hand() -> None:
    c = columns_of(_scored())
    assert c["question_accuracy"] == pytest.approx(2 / 4)
    assert c["positional_error_m"] == pytest.approx((5 + 10) / 2)
    assert c["temporal_error_min"] == pytest.approx((1 + 3 + 2) / 3)  # time and duration
    assert c["time_error_min"] == pytest.approx(2.0)
    assert c["duration_error_min"] == pytest.approx(2.0)
    assert c["text_accuracy"] is None
    assert (c["questions"], c["scored"], c["unanswered"], c["unscored"]) == (11, 8, 2, 1)


def test_mean_and_sample_spread_over_runs() -> None:
    s = spread([0.5, 0.7, None, 0.9])
    assert s["mean"] == pytest.approx(0.7) and s["n"] == 3
    assert s["std"] == pytest.approx(0.2)  # sqrt(((-.2)^2 + 0 + .2^2) / 2)
    assert spread([]) == {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    assert spread([3.0])["std"] == 0.0


def test_summary_per_category_and_over_runs() -> None:
    first = _scored(0)
    second = [  # run 1: b2 now right
        ScoredAnswer(s.question, 1, score_answer(s.question, Answer(yes=False)))
        if s.question.id == "b2"
        else ScoredAnswer(s.question, 1, s.score)
        for s in first
    ]
    summary = summarize(first + second)
    acc = summary["all"]["question_accuracy"]
    assert acc["mean"] == pytest.approx((0.5 + 0.75) / 2)
    assert acc["std"] == pytest.approx(math.sqrt(2 * 0.125**2))
    assert summary["all"]["runs"] == 2
    obj = summary["by_category"]["object"]
    assert obj["positional_error_m"]["mean"] == pytest.approx(5.0)
    assert obj["temporal_error_min"]["mean"] == pytest.approx((3 + 2) / 2)
    assert list(summary["by_type"]) == ["binary", "position", "time", "duration", "text"]
    text = summary_markdown(summary)
    assert "| object | 12 |" in text and "0.625 ± 0.177" in text


def test_fit_yes_threshold_takes_the_middle_of_the_best_gap() -> None:
    pairs = [(0.9, True), (0.8, True), (0.7, False), (0.4, False), (None, False)]
    fit = fit_yes_threshold(pairs)
    assert fit["threshold"] == pytest.approx(0.75) and fit["accuracy"] == 1.0
    # no separating cut: the best one gets 4 of 5
    fit = fit_yes_threshold([(0.9, True), (0.8, False), (0.7, True), (0.6, False), (0.5, False)])
    assert fit["accuracy"] == pytest.approx(0.8)
    assert fit_yes_threshold([])["threshold"] is None


def test_fit_generic_threshold_fits_only_the_questions_that_reach_the_yes_threshold() -> None:
    # (best similarity, cosine of the words to an empty caption, true answer)
    answers = [
        (0.70, 0.99, False),  # a lure: high similarity, words that name nothing known
        (0.72, 0.98, False),
        (0.71, 0.30, True),  # landmarks
        (0.66, 0.40, True),
        (0.20, 0.99, True),  # below the yes-threshold: a no whatever its words
        (0.90, None, True),  # a memory that embeds text itself gives no cosine
    ]

    def reaching(threshold: float) -> list[tuple[bool, float | None, bool]]:
        details = [({"best_similarity": best}, cos, yes) for best, cos, yes in answers]
        return [(reaches_yes(d, threshold), cos, yes) for d, cos, yes in details]

    fit = fit_generic_threshold(reaching(0.6))
    assert fit["n"] == 4 and fit["accuracy"] == 1.0
    assert fit["threshold"] == pytest.approx((0.40 + 0.98) / 2)
    assert fit_generic_threshold(reaching(0.95))["threshold"] == 1.0  # none


def test_reaches_yes_asks_a_place_keyframe_for_the_margin_more() -> None:
    both = {"best_episode_similarity": 0.55, "best_place_similarity": 0.65}
    assert reaches_yes(both, 0.6) and not reaches_yes(both, 0.6, place_margin=0.1)
    assert reaches_yes({**both, "best_episode_similarity": 0.61}, 0.6, place_margin=0.1)
    assert not reaches_yes({"best_similarity": None}, 0.6)  # an empty memory


def test_fit_yes_thresholds_fits_a_place_margin_where_place_views_match_by_chance() -> None:
    # (best episode, best place keyframe, true answer): the true no meet ordinary place views
    # that match their words as well as a true yes's episode does
    answers = [
        (0.70, 0.66, True),
        (0.68, 0.60, True),
        (None, 0.74, True),  # a landmark only the place keyframes show
        (0.30, 0.67, False),
        (0.25, 0.69, False),
        (0.20, 0.45, False),
    ]
    fit = fit_yes_thresholds(answers)
    assert fit["accuracy"] == 1.0 and fit["n"] == 6
    threshold, margin = fit["threshold"], fit["place_margin"]
    assert 0.30 < threshold <= 0.68 and threshold + margin == pytest.approx((0.69 + 0.74) / 2)
    # one threshold for both kinds gets one wrong at best
    one = fit_yes_threshold((max(s for s in (e, p) if s is not None), y) for e, p, y in answers)
    assert one["accuracy"] == pytest.approx(5 / 6)
    # a memory without place keyframes: the single fit, no margin
    plain = [(e, None, y) for e, _, y in answers if e is not None]
    assert fit_yes_thresholds(plain) == {
        **fit_yes_threshold((e, y) for e, _, y in plain),
        "place_margin": 0.0,
    }


def test_the_retrieval_answerers_query_and_duration_split() -> None:
    assert search_words("When did somebody last walk past?") == "somebody walk past"
    assert search_words("When did you?") == "When did you?"  # nothing left: as asked
    assert split_between("How long was it between the lights going down and a ball?") == (
        "the lights going down",
        "a ball",
    )
    assert split_between("How long were you in the building for?") is None


def test_fit_still_drop_fits_the_questions_the_still_threshold_leaves_open() -> None:
    # (latest pass's best similarity, best earlier view's, still there)
    answers = [
        (0.70, 0.20, True),  # reaches the still-threshold: a yes whatever came before
        (0.30, 0.32, True),  # a faint thing that looks as it did
        (0.25, 0.35, True),
        (0.10, 0.40, False),  # lost from its views
        (0.05, 0.45, False),
        (0.20, None, False),  # no earlier view: the threshold decides
    ]
    fit = fit_still_drop(answers, still_threshold=0.6)
    assert fit["n"] == 4 and fit["accuracy"] == 1.0
    assert fit["threshold"] == pytest.approx(-((-0.10) + (-0.30)) / 2)  # between the two
    assert fit_still_drop(answers, still_threshold=0.0)["threshold"] is None  # none left
