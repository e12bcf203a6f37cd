"""SurpriseScorer: exact values, warm-up, running sums against direct recomputation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.surprise.scorer import SurpriseScorer, diagonal_gaussian_kl


def _direct(window: np.ndarray, z: np.ndarray, eps: float = 1e-6) -> tuple[float, float]:
    """The paper's formulas computed from scratch over the window."""
    w = window.shape[0]
    mu = window.mean(axis=0)
    sigma = np.maximum(window.std(axis=0, ddof=0), eps)
    score = float(np.mean(np.abs(z - mu) / sigma))
    kl = float(np.sum((z - mu) ** 2 / sigma**2) / (2 * w * w))
    return score, kl


def test_hand_checked_sequence() -> None:
    scorer = SurpriseScorer(window=2)
    assert scorer.update([0.0]) is None  # warm-up: fewer than W earlier embeddings
    assert scorer.update([2.0]) is None
    # window {0, 2}: mu 1, sigma 1 -> |4-1|/1 = 3; KL = 9 / (2*2^2) = 1.125
    r = scorer.update([4.0])
    assert r is not None and r.score == pytest.approx(3.0) and r.kl == pytest.approx(1.125)
    # window {2, 4}: mu 3, sigma 1 -> z = 3 is unsurprising
    r = scorer.update([3.0])
    assert r is not None and r.score == pytest.approx(0.0) and r.kl == pytest.approx(0.0)
    # window {4, 3}: mu 3.5, sigma 0.5 -> |5-3.5|/0.5 = 3
    r = scorer.update([5.0])
    assert r is not None and r.score == pytest.approx(3.0) and r.kl == pytest.approx(1.125)


def test_constant_dimension_does_not_divide_by_zero() -> None:
    scorer = SurpriseScorer(window=2)
    scorer.update([0.0, 7.0])
    scorer.update([2.0, 7.0])
    r = scorer.update([4.0, 7.0])  # dim 2 has sigma 0 -> floored at eps, deviation 0
    assert r is not None
    assert r.score == pytest.approx((3.0 + 0.0) / 2)
    assert r.kl == pytest.approx(9.0 / 8.0)
    r = scorer.update([4.0, 7.0 + 1e-3])  # a change of a constant dimension is huge
    assert r is not None and np.isfinite(r.score) and r.score > 100


@pytest.mark.parametrize("window", [2, 5, 64])
def test_matches_direct_recomputation(window: int) -> None:
    rng = np.random.default_rng(window)
    data = rng.normal(loc=3.0, scale=rng.uniform(0.1, 2.0, size=16), size=(600, 16))
    scorer = SurpriseScorer(window=window)
    for t, z in enumerate(data):
        r = scorer.update(z)
        if t < window:
            assert r is None
            continue
        score, kl = _direct(data[t - window : t], z)
        assert r is not None
        assert r.score == pytest.approx(score, rel=1e-6)
        assert r.kl == pytest.approx(kl, rel=1e-6)


def test_stable_over_a_million_updates() -> None:
    """Running sums with a large offset (cancellation-prone) stay equal to a recomputation."""
    rng = np.random.default_rng(0)
    window, dim, n = 64, 2, 1_000_000
    scorer = SurpriseScorer(window=window)
    block = 10_000
    last: np.ndarray | None = None
    for _ in range(0, n, block):
        data = 1e4 + rng.normal(scale=1e-2, size=(block, dim))
        for z in data:
            scorer.update(z)
        last = data
    assert last is not None
    # state after exactly n updates: the held window is the last W embeddings
    z = 1e4 + rng.normal(scale=1e-2, size=dim)
    r = scorer.update(z)
    score, kl = _direct(last[-window:], z)
    assert r is not None
    assert r.score == pytest.approx(score, rel=1e-6)
    assert r.kl == pytest.approx(kl, rel=1e-6)


def test_bad_input_raises_and_keeps_state() -> None:
    scorer = SurpriseScorer(window=2)
    scorer.update([0.0, 0.0])
    with pytest.raises(InputError, match="NaN/inf"):
        scorer.update([np.nan, 1.0])
    with pytest.raises(InputError, match="inf"):
        scorer.update([np.inf, 1.0])
    with pytest.raises(InputError, match="3 dimensions, the stream has 2"):
        scorer.update([1.0, 2.0, 3.0])
    with pytest.raises(InputError, match="1-D"):
        scorer.update(np.zeros((2, 2)))
    with pytest.raises(InputError, match="non-empty"):
        scorer.update([])
    # the rejected inputs left no trace: this is still the second embedding
    assert scorer.update([2.0, 2.0]) is None
    r = scorer.update([4.0, 4.0])
    assert r is not None and r.score == pytest.approx(3.0)


def test_reset_forgets_dimension_and_window() -> None:
    scorer = SurpriseScorer(window=2)
    for v in ([0.0], [1.0], [2.0]):
        scorer.update(v)
    scorer.reset()
    assert scorer.dim is None and not scorer.ready
    assert scorer.update([0.0, 0.0, 0.0]) is None  # a new dimension is accepted


@pytest.mark.parametrize(("window", "eps"), [(1, 1e-6), (64, 0.0), (64, -1.0)])
def test_invalid_settings(window: int, eps: float) -> None:
    with pytest.raises(ConfigError):
        SurpriseScorer(window=window, eps=eps)


def _relative_errors(window: int, make_posterior: str, trials: int = 200) -> float:
    """Median relative error of the paper's KL form against an exact Gaussian KL."""
    rng = np.random.default_rng(window)
    errors = []
    for _ in range(trials):
        dim = 32
        past = rng.normal(size=(window, dim))
        z = rng.normal(size=dim)
        mu, sigma = past.mean(0), past.std(0)
        r = SurpriseScorer(window=window)
        for row in past:
            r.update(row)
        result = r.update(z)
        assert result is not None
        grown = np.vstack([past, z])
        if make_posterior == "mean":
            # Bayesian update of the mean with the predictive spread held: the paper's model
            exact = diagonal_gaussian_kl(grown.mean(0), sigma, mu, sigma)
            approx = result.kl
        else:
            # mean and spread both refit: an extra variance term of the same order appears,
            # (u - 1)^2 / (4 W^2) per dimension with u = (z - mu)^2 / sigma^2
            exact = diagonal_gaussian_kl(grown.mean(0), grown.std(0), mu, sigma)
            u = (z - mu) ** 2 / sigma**2
            approx = result.kl + float(np.sum((u - 1) ** 2)) / (4 * window * window)
        errors.append(abs(approx - exact) / exact)
    return float(np.median(errors))


@pytest.mark.parametrize("posterior", ["mean", "mean_and_spread"])
def test_kl_form_is_leading_order_in_one_over_w(posterior: str) -> None:
    """Paper appendix: KL(t) tracks the exact KL between consecutive Gaussians as W grows."""
    errs = [_relative_errors(w, posterior) for w in (16, 64, 256, 1024)]
    assert all(a > b for a, b in itertools.pairwise(errs)), errs
    # about 1/W: with 64x the window, the error falls by more than 30x, to under 1%
    assert errs[-1] < errs[0] / 30, errs
    assert errs[-1] < 0.01, errs


def test_diagonal_gaussian_kl_known_values() -> None:
    assert diagonal_gaussian_kl([0.0], [1.0], [0.0], [1.0]) == 0.0
    # KL(N(1,1) || N(0,1)) = 1/2 ; KL(N(0,1) || N(0,2)) = ln 2 + 1/8 - 1/2
    assert diagonal_gaussian_kl([1.0], [1.0], [0.0], [1.0]) == pytest.approx(0.5)
    assert diagonal_gaussian_kl([0.0], [1.0], [0.0], [2.0]) == pytest.approx(np.log(2) - 0.375)
