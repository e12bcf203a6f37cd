"""The episode-rate budget: the cap holds in every window, the most surprising are kept."""

from __future__ import annotations

import numpy as np
import pytest

from surprise_memory.config import BudgetConfig, ConfigError
from surprise_memory.surprise.budget import EpisodeBudget
from surprise_memory.surprise.decisions import OVER_BUDGET, Decision
from surprise_memory.surprise.gate import SurpriseTrigger

NS = 1_000_000_000


def _run(
    budget: EpisodeBudget, candidates: list[tuple[float, float]], end_s: float
) -> list[Decision]:
    """Feed candidates (time s, score) as a gate would, with a frame every 0.1 s."""
    out: list[Decision] = []
    pending = sorted(candidates)
    t = 0.0
    while t <= end_s:
        now = round(t * NS)
        new = [
            SurpriseTrigger(round(s * NS), sc, 1.0, now)
            for s, sc in pending
            if round(s * NS) <= now
        ]
        pending = [(s, sc) for s, sc in pending if round(s * NS) > now]
        decided = budget.push(now, new)
        for d in decided:  # bounded delay
            assert now - d.trigger.stamp_ns <= budget.max_delay_ns + NS // 10
        out += decided
        t = round(t + 0.1, 6)
    return out + budget.flush()


def test_off_keeps_everything_at_once() -> None:
    b = EpisodeBudget()
    t = SurpriseTrigger(5, 1.0, 0.5, 5)
    assert b.push(5, [t]) == [Decision(t)]
    assert b.max_delay_ns == 0 and b.cap == 0


@pytest.mark.parametrize(
    ("candidates", "kept"),
    [
        # a burst of 4 within 10 s, cap 2 per minute: the two highest survive
        ([(10, 1.0), (12, 5.0), (14, 2.0), (16, 4.0)], {12, 16}),
        # far apart: all kept
        ([(10, 1.0), (80, 1.0), (150, 1.0)], {10, 80, 150}),
        # the window slides: 2 early, 2 more a minute later
        ([(10, 3.0), (11, 2.0), (12, 1.0), (75, 1.0), (76, 2.0)], {10, 11, 75, 76}),
        # ties go to the earlier
        ([(10, 2.0), (11, 2.0), (12, 2.0)], {10, 11}),
    ],
)
def test_keeps_the_most_surprising(candidates: list[tuple[float, float]], kept: set[float]) -> None:
    b = EpisodeBudget(BudgetConfig(max_episodes_per_minute=2, budget_delay_seconds=10.0))
    decisions = _run(b, candidates, 200)
    assert {round(d.trigger.stamp_ns / NS) for d in decisions if d.kept} == kept
    dropped = [d for d in decisions if not d.kept]
    assert all(d.reason == OVER_BUDGET for d in dropped)
    assert b.suppressed == len(dropped) == len(candidates) - len(kept)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cap_holds_in_every_window(seed: int) -> None:
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, 600, 120)).round(1)
    cands = [
        (float(t), float(s)) for t, s in zip(np.unique(times), rng.uniform(1, 9, 120), strict=False)
    ]
    b = EpisodeBudget(
        BudgetConfig(max_episodes_per_minute=3, budget_window_seconds=60, budget_delay_seconds=5)
    )
    kept = sorted(d.trigger.stamp_ns for d in _run(b, cands, 620) if d.kept)
    assert len(kept) >= 25  # it uses its budget: about 3 per minute over 10 minutes
    for i, k in enumerate(kept):
        in_window = [x for x in kept[i:] if x < k + 60 * NS]
        assert len(in_window) <= 3


def test_config_rules() -> None:
    with pytest.raises(ConfigError, match="at least one event"):
        BudgetConfig(max_episodes_per_minute=0.5, budget_window_seconds=60)
    assert (
        EpisodeBudget(BudgetConfig(max_episodes_per_minute=0.5, budget_window_seconds=120)).cap == 1
    )
