"""RollingMedianMAD against numpy's median over the same bounded history."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surprise_memory.surprise.robust import MAD_TO_SIGMA, RollingMedianMAD


def _reference(values: list[float]) -> tuple[float, float]:
    x = np.asarray(values)
    med = float(np.median(x))
    return med, float(np.median(np.abs(x - med)))


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 50])
@pytest.mark.parametrize("kind", ["normal", "ties", "heavy"])
def test_matches_numpy_over_sliding_history(capacity: int, kind: str) -> None:
    rng = np.random.default_rng(capacity)
    if kind == "normal":
        data = rng.normal(size=400)
    elif kind == "ties":
        data = rng.integers(0, 4, size=400).astype(float)  # many equal values
    else:
        data = rng.standard_cauchy(size=400)
    stats = RollingMedianMAD(capacity)
    for i, v in enumerate(data):
        stats.push(float(v))
        window = list(data[max(0, i + 1 - capacity) : i + 1])
        med, mad = _reference(window)
        assert len(stats) == len(window)
        assert stats.median() == pytest.approx(med, abs=1e-12)
        assert stats.mad() == pytest.approx(mad, abs=1e-12)


def test_hand_checked_values_and_threshold() -> None:
    stats = RollingMedianMAD(10)
    for v in [1.0, 2.0, 1.0, 5.0]:
        stats.push(v)
    # sorted 1 1 2 5: median 1.5; deviations .5 .5 .5 3.5: MAD .5
    assert stats.median() == 1.5
    assert stats.mad() == 0.5
    assert stats.threshold(2.0) == pytest.approx(1.5 + 2.0 * MAD_TO_SIGMA * 0.5)


def test_empty_and_clear() -> None:
    stats = RollingMedianMAD(3)
    assert math.isnan(stats.median()) and math.isnan(stats.mad())
    stats.push(4.0)
    assert stats.median() == 4.0 and stats.mad() == 0.0
    stats.clear()
    assert len(stats) == 0


def test_rejects_zero_capacity() -> None:
    with pytest.raises(ValueError, match="capacity"):
        RollingMedianMAD(0)
