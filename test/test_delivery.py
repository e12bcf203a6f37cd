"""FrameLossEstimator and WindowSpan against cameras whose every frame and loss is known."""

from __future__ import annotations

import numpy as np
import pytest

from surprise_memory.errors import ConfigError
from surprise_memory.perception.delivery import (
    GAP_WINDOW,
    DeliveryCounts,
    FrameLossEstimator,
    WindowSpan,
    frames_missing,
)

S = 1_000_000_000
T0 = 1_700_000_000 * S


def camera(n: int, hz: float, rng: np.random.Generator, jitter: float = 0.1, t0: int = T0):
    """Stamps of ``n`` frames at ``hz`` with uniform jitter of +-``jitter`` periods."""
    period = S / hz
    noise = rng.uniform(-jitter, jitter, n) * period
    return [int(t0 + i * period + e) for i, e in enumerate(noise)]


def run(stamps: list[int], keep: np.ndarray) -> tuple[FrameLossEstimator, int]:
    """Feed the kept stamps; return the estimator and the true loss between the first and
    the last received frame."""
    est = FrameLossEstimator()
    idx = np.flatnonzero(keep)
    for i in idx:
        est.update(stamps[i])
    true_lost = int(idx[-1] - idx[0] + 1 - len(idx))
    return est, true_lost


@pytest.mark.parametrize("hz", [5.0, 30.0, 60.0])
def test_a_camera_without_loss_has_its_rate_and_no_loss(hz: float) -> None:
    rng = np.random.default_rng(1)
    stamps = camera(2000, hz, rng)
    est, _ = run(stamps, np.ones(len(stamps), dtype=bool))
    assert est.counts.lost == 0
    assert est.counts.received == 2000
    assert est.camera_hz == pytest.approx(hz, rel=0.01)
    assert est.counts.received_hz == pytest.approx(hz, rel=0.01)


@pytest.mark.parametrize("delivered", [0.99, 0.95, 0.8, 0.5, 0.19, 0.12])
@pytest.mark.parametrize("jitter", [0.0, 0.1])
def test_random_loss_is_counted_as_it_happened(delivered: float, jitter: float) -> None:
    rng = np.random.default_rng(int(delivered * 100) + int(jitter * 10))
    stamps = camera(5400, 30.0, rng, jitter=jitter)  # 3 minutes at 30 Hz
    keep = rng.random(len(stamps)) < delivered
    est, true_lost = run(stamps, keep)
    counts = est.counts
    # with jitter, a long gap (many periods: the period's error adds up) may be read one
    # off: where few gaps are of one or two periods (heavy loss), the period is less sure
    assert counts.lost == pytest.approx(true_lost, abs=5 + 0.015 * true_lost)
    true_fraction = true_lost / (true_lost + counts.received)
    assert counts.fraction_lost == pytest.approx(true_fraction, abs=0.01)
    if delivered >= 0.5:
        assert counts.lost == pytest.approx(true_lost, abs=5)
    assert est.camera_hz == pytest.approx(30.0, rel=0.02)


def test_bursts_of_loss_are_counted() -> None:
    rng = np.random.default_rng(3)
    stamps = camera(3000, 30.0, rng)
    keep = np.ones(len(stamps), dtype=bool)
    for start in range(100, 3000, 200):  # 10 frames lost every 200 (5%)
        keep[start : start + 10] = False
    est, true_lost = run(stamps, keep)
    assert est.counts.lost == true_lost == 150
    assert est.counts.fraction_lost == pytest.approx(0.05)


def test_the_first_gaps_are_judged_once_the_period_is_known() -> None:
    est = FrameLossEstimator(window=4)
    period = S // 30
    assert [est.update(T0 + k * period) for k in (0, 3, 4, 5)] == [0, 0, 0, 0]
    assert est.counts == DeliveryCounts(received=1)  # the first gap spans three periods
    assert est.update(T0 + 8 * period) == 2 + 2  # frames 1, 2 and 6, 7
    assert est.counts.received == 5
    assert est.update(T0 + 9 * period) == 0
    assert est.period_ns == pytest.approx(period, rel=0.01)
    assert est.counts.lost == 4


def test_a_stream_shorter_than_the_warm_up_is_judged_at_its_end() -> None:
    est = FrameLossEstimator()
    for k in (0, 1, 3, 4):
        est.update(T0 + k * S // 10)
    assert est.counts.lost == 0
    assert est.flush() == DeliveryCounts(received=4, lost=1, span_ns=4 * S // 10)


def test_a_camera_that_slows_down_then_speeds_up_is_followed() -> None:
    rng = np.random.default_rng(4)
    fast = camera(600, 30.0, rng)
    slow = camera(600, 15.0, rng, t0=fast[-1] + S // 15)
    again = camera(600, 30.0, rng, t0=slow[-1] + S // 30)
    est = FrameLossEstimator()
    for t in fast:
        est.update(t)
    assert est.counts.lost == 0
    for t in slow[:200]:
        est.update(t)
    # at most one window of gaps looks like every other frame lost, then the rate follows
    assert est.counts.lost <= GAP_WINDOW + 1
    assert est.camera_hz == pytest.approx(15.0, rel=0.02)
    before = est.counts.lost
    for t in slow[200:]:
        est.update(t)
    assert est.counts.lost == before
    for t in again:
        est.update(t)
    assert est.counts.lost == before  # faster: followed at the first gap
    assert est.camera_hz == pytest.approx(30.0, rel=0.02)


def test_a_pause_is_not_loss() -> None:
    rng = np.random.default_rng(5)
    first = camera(300, 30.0, rng)
    second = camera(300, 30.0, rng, t0=first[-1] + 10 * S)  # the camera stopped for 10 s
    est = FrameLossEstimator()
    for t in first + second:
        est.update(t)
    assert est.counts.lost == 0
    assert est.counts.pauses == 1
    assert est.counts.received == 600
    # the pause is not camera time the frames were expected in
    assert est.counts.received_hz == pytest.approx(30.0, rel=0.02)


def test_a_slow_camera_is_not_paused_and_its_loss_is_counted() -> None:
    est = FrameLossEstimator()
    for k in (0, 1, 2, 4, 5, 6, 7):  # 0.5 Hz: 2 s apart, one frame lost
        est.update(T0 + k * 2 * S)
    counts = est.flush()
    assert counts.pauses == 0
    assert counts.lost == 1


def test_duplicates_and_backward_jumps_are_not_loss() -> None:
    period = S // 30
    est = FrameLossEstimator()
    for k in range(100):
        est.update(T0 + k * period)
    est.update(T0 + 99 * period)  # the same frame twice
    est.update(T0)  # a bag looped: a new sequence
    for k in range(1, 100):
        est.update(T0 + k * period)
    counts = est.counts
    assert counts.duplicates == 1
    assert counts.lost == 0
    assert counts.received == 200
    assert est.period_ns == pytest.approx(period, rel=0.01)


def test_memory_stays_bounded_over_a_long_stream() -> None:
    est = FrameLossEstimator(window=8)
    period = S // 30
    for k in range(20_000):  # increasing gaps: the worst case of the minimum's deque
        est.update(T0 + k * period + k * k)
    assert len(est._gaps._items) <= 8


def test_counts_of_a_period_and_reset() -> None:
    period = S // 10
    est = FrameLossEstimator()
    for k in range(GAP_WINDOW):  # the first gaps are judged together
        est.update(T0 + k * period)
    assert est.counts == DeliveryCounts(received=1)
    est.update(T0 + GAP_WINDOW * period)
    assert est.counts == DeliveryCounts(received=GAP_WINDOW + 1, span_ns=GAP_WINDOW * period)
    est.reset()
    for k in (0, 1, 2, 3):
        est.update(T0 + k * period)
    earlier = est.flush()
    for k in (5, 6, 9, 10):
        est.update(T0 + k * period)
    period_counts = est.counts.since(earlier)
    assert period_counts == DeliveryCounts(received=4, lost=3, span_ns=7 * period)
    assert period_counts.expected == 7
    assert period_counts.fraction_lost == pytest.approx(3 / 7)
    assert period_counts.received_hz == pytest.approx(4 / 0.7)
    assert est.flush() == est.counts
    est.reset()
    assert est.counts == DeliveryCounts()
    assert est.period_ns is None and est.camera_hz is None
    assert DeliveryCounts().fraction_lost == 0.0 and DeliveryCounts().received_hz is None
    with pytest.raises(ConfigError, match="window=1"):
        FrameLossEstimator(window=1)


def test_frames_missing_from_a_run() -> None:
    period = S // 30
    assert frames_missing(63 * period, 64, period) == 0
    assert frames_missing(63 * period + period // 3, 64, period) == 0  # jitter
    assert frames_missing(126 * period, 64, period) == 63  # every other frame
    assert frames_missing(10 * period, 64, period) == 0  # closer than the period


def test_window_span_reports_the_share_of_missing_frames() -> None:
    spans = WindowSpan()
    assert spans.take() is None
    period = S // 10  # input_fps 10
    assert spans.add(15 * period, 16, period) == 0
    assert spans.add(31 * period, 16, period) == 16  # frames twice as far apart
    assert spans.add(5 * period, 16, None) == 0  # period unknown: not judged
    assert spans.add(0, 1, period) == 0  # one frame: nothing to judge
    fraction, mean_span_s, nominal_s = spans.take()  # type: ignore[misc]
    assert fraction == pytest.approx(16 / 48)
    assert mean_span_s == pytest.approx(2.3)
    assert nominal_s == pytest.approx(1.5)
    assert spans.take() is None  # a new period
