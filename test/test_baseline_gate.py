"""The uniform and random baseline gates store the given number of events."""

from __future__ import annotations

import pytest

from surprise_memory.config import BaselineConfig, ConfigError
from surprise_memory.errors import InputError
from surprise_memory.surprise.baseline import BaselineGate

NS = 1_000_000_000


def _stamps(gate: BaselineGate, duration_s: float, fps: float, skip_s: float = 0.0) -> list[int]:
    """Feed a recording from 0 to duration_s; scores start after skip_s (scorer warm-up)."""
    gate.start(0)
    out = []
    n = int(duration_s * fps)
    for i in range(n + 1):
        stamp = round(i * NS / fps)
        if stamp < skip_s * NS:
            continue
        out += [t.stamp_ns for t in gate.push(stamp, 1.0 + i)]
    return out + [t.stamp_ns for t in gate.flush()]


@pytest.mark.parametrize("mode", ["uniform", "random"])
@pytest.mark.parametrize(("episodes", "duration_s"), [(30, 1380.0), (3, 24.0), (7, 100.0)])
def test_count_matches_the_budget(mode: str, episodes: int, duration_s: float) -> None:
    rate = episodes * 60.0 / duration_s  # what --budget-from computes
    gate = BaselineGate(BaselineConfig(gate_mode=mode, baseline_episodes_per_minute=rate))
    # skip 6.4 s: the scorer's W windows give no score; slots there fire on later frames
    assert len(_stamps(gate, duration_s, 10.0, skip_s=6.4)) == episodes


def test_uniform_fires_at_slot_middles() -> None:
    gate = BaselineGate(BaselineConfig(gate_mode="uniform", baseline_episodes_per_minute=6))
    assert _stamps(gate, 60, 10) == [round((5 + 10 * k) * NS) for k in range(6)]


def test_random_is_seeded_and_one_per_slot() -> None:
    def run(seed: int) -> list[int]:
        cfg = BaselineConfig(gate_mode="random", baseline_episodes_per_minute=6, baseline_seed=seed)
        return _stamps(BaselineGate(cfg), 60, 10)

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    assert [s // (10 * NS) for s in a] == list(range(6))  # one in each 10 s slot


def test_trigger_carries_the_frame_score() -> None:
    gate = BaselineGate(BaselineConfig(gate_mode="uniform", baseline_episodes_per_minute=60))
    gate.start(0)
    assert gate.push(NS // 2, 3.5, 0.1)[0].score == 3.5


def test_config_and_input_errors() -> None:
    with pytest.raises(ConfigError, match="budget-from"):
        BaselineConfig(gate_mode="uniform")
    with pytest.raises(ConfigError):
        BaselineGate(BaselineConfig())
    gate = BaselineGate(BaselineConfig(gate_mode="uniform", baseline_episodes_per_minute=1))
    gate.push(5, 1.0)
    with pytest.raises(InputError):
        gate.push(5, 1.0)
