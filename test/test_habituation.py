"""Habituation: repeats of a kept event are suppressed, new content is kept, damping recovers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surprise_memory.config import ConfigError, HabituationConfig
from surprise_memory.errors import InputError
from surprise_memory.surprise.decisions import HABITUATION
from surprise_memory.surprise.gate import SurpriseTrigger
from surprise_memory.surprise.habituation import Habituation

NS = 1_000_000_000
D = 32
RNG = np.random.default_rng(7)
DOOR = RNG.normal(size=D)  # the latent change a recurring subject causes
OTHER = [RNG.normal(size=D) for _ in range(4)]  # changes of unrelated events


def _trigger(t_s: float) -> SurpriseTrigger:
    return SurpriseTrigger(round(t_s * NS), 5.0, 1.0, round(t_s * NS))


def _habituation(**kw: object) -> Habituation:
    return Habituation(HabituationConfig(habituation=True, **kw), lookback_ns=NS)  # type: ignore[arg-type]


def _offer(
    h: Habituation, t_s: float, d: np.ndarray, where: tuple[float, float, float] | None = None
) -> bool:
    h.observe(round(t_s * NS), d)
    return h.push(_trigger(t_s), where).kept


def _noisy(d: np.ndarray, scale: float, seed: int) -> np.ndarray:
    return d + scale * np.random.default_rng(seed).normal(size=d.size)


@pytest.mark.parametrize(
    ("sequence", "expected"),
    [
        # (time s, change, is it the door) -> kept?
        ([("door", 10), ("door", 40), ("door", 70)], [True, False, False]),
        ([("door", 10), ("o0", 40), ("door", 70), ("o1", 100)], [True, True, False, True]),
        ([("o0", 10), ("o1", 40), ("o2", 70), ("o3", 100)], [True, True, True, True]),
    ],
)
def test_repeats_suppressed_novel_kept(
    sequence: list[tuple[str, float]], expected: list[bool]
) -> None:
    h = _habituation()
    kept = []
    for i, (what, t) in enumerate(sequence):
        base = DOOR if what == "door" else OTHER[int(what[1])]
        kept.append(_offer(h, t, _noisy(base, 0.2, i)))
    assert kept == expected
    assert h.suppressed == expected.count(False)


def test_decision_says_what_it_resembled() -> None:
    h = _habituation()
    _offer(h, 10, DOOR)
    h.observe(40 * NS, 2.0 * DOOR)  # scale does not matter: cosine
    d = h.push(_trigger(40))
    assert d.reason == HABITUATION and not d.kept
    assert d.similar_to_ns == 10 * NS
    assert d.habituation == pytest.approx(math.exp(-30 / 600), rel=1e-5)


@pytest.mark.parametrize(("gap_s", "kept"), [(60, False), (300, False), (500, True), (3000, True)])
def test_damping_recovers_with_time(gap_s: float, kept: bool) -> None:
    # h = cos * exp(-dt / T) with cos = 1: suppressed while dt < T ln(1 / theta) = 416 s
    h = _habituation(habituation_recovery_seconds=600.0, habituation_similarity=0.5)
    _offer(h, 10, DOOR)
    assert _offer(h, 10 + gap_s, DOOR) is kept


@pytest.mark.parametrize(("distance_m", "kept"), [(0.0, False), (2.0, False), (20.0, True)])
def test_damping_recovers_with_distance(distance_m: float, kept: bool) -> None:
    h = _habituation(habituation_radius_m=5.0)  # exp(-d / 5) < 0.5 beyond 3.5 m
    _offer(h, 10, DOOR, (0.0, 0.0, 0.0))
    assert _offer(h, 20, DOOR, (distance_m, 0.0, 0.0)) is kept


def test_unknown_pose_ignores_distance() -> None:
    h = _habituation(habituation_radius_m=1.0)
    _offer(h, 10, DOOR, (0.0, 0.0, 0.0))
    assert not _offer(h, 20, DOOR, None)


def test_a_returning_subject_keeps_habituation_alive() -> None:
    # every 300 s: without the refresh the 4th pass (900 s after the first) would recover
    h = _habituation(habituation_recovery_seconds=600.0)
    kept = [_offer(h, t, DOOR) for t in (0, 300, 600, 900, 1200)]
    assert kept == [True, False, False, False, False]


def test_memory_is_bounded_and_forgets_the_oldest() -> None:
    h = _habituation(habituation_memory=2)
    for i, t in enumerate((10, 20, 30)):
        assert _offer(h, t, OTHER[i])
    assert h.remembered == 2
    assert _offer(h, 40, OTHER[0])  # forgotten: new again
    assert not _offer(h, 50, OTHER[2])


def test_unobserved_candidate_is_kept_and_not_remembered() -> None:
    h = _habituation()
    d = h.push(_trigger(5))
    assert d.kept and math.isnan(d.habituation) and h.remembered == 0


def test_deviations_older_than_the_gate_delay_are_dropped() -> None:
    h = _habituation()
    h.observe(10 * NS, DOOR)
    for k in range(1, 40):  # 3.9 s of frames at 10 Hz; lookback 1 s + 1 s margin
        h.observe(10 * NS + k * NS // 10, OTHER[0])
    assert h.push(_trigger(10)).kept and h.remembered == 0


def test_bad_input_and_config() -> None:
    h = _habituation()
    with pytest.raises(InputError):
        h.observe(1, np.array([1.0, np.nan]))
    with pytest.raises(InputError):
        h.observe(1, np.zeros((2, 2)))
    with pytest.raises(ConfigError, match="habituation_similarity"):
        HabituationConfig(habituation_similarity=1.5)


def test_reset_forgets() -> None:
    h = _habituation()
    _offer(h, 10, DOOR)
    h.reset()
    assert _offer(h, 20, DOOR)
