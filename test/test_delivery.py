"""FrameLossEstimator and WindowSpan against cameras whose every frame and loss is known."""

from __future__ import annotations

import numpy as np
import pytest

from surprise_memory.errors import ConfigError
from surprise_memory.perception.delivery import (
    CONFIRM_FRAMES,
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
    assert est.period_ns is None  # a first guess until the gaps are judged
    assert est.update(T0 + 8 * period) == 0  # judged: 1, 2 and 6, 7 skipped ...
    assert est.counts.received == 5 and est.period_ns == pytest.approx(period, rel=0.01)
    # ... and counted lost once CONFIRM_FRAMES frames came after them without landing there
    after = [est.update(T0 + k * period) for k in range(9, 9 + CONFIRM_FRAMES)]
    assert sum(after) == 4
    assert est.counts.lost == 4


def test_a_late_frame_gives_back_the_slot_it_seemed_to_skip() -> None:
    """A stall holds frame 10 up by 0.9 periods and frame 11 comes out right after it: the
    gap 9-10 spans nearly two periods, and 10-11 almost none; nothing was lost."""
    period = S // 12
    est = FrameLossEstimator(window=8)
    stamps = [T0 + k * period for k in range(40)]
    stamps[10] += 9 * period // 10
    stamps[11] = stamps[10] + period // 50
    for t in stamps:
        est.update(t)
    assert est.flush().lost == 0
    dropped = FrameLossEstimator(window=8)  # frame 10 really lost: counted
    for t in stamps[:10] + stamps[11:]:
        dropped.update(t)
    assert dropped.flush().lost == 1


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
    for k in range(20_000):
        est.update(T0 + k * period + k * k)
    assert len(est._gaps) <= 8 and len(est._anchors) <= 4 and est._warmup is None


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
    for k in (5, 6, 9, 10, 11, 12, 13, 14, 15, 16):  # CONFIRM_FRAMES after the last skip
        est.update(T0 + k * period)
    period_counts = est.counts.since(earlier)
    assert period_counts == DeliveryCounts(received=10, lost=3, span_ns=13 * period)
    assert period_counts.expected == 13
    assert period_counts.fraction_lost == pytest.approx(3 / 13)
    assert period_counts.received_hz == pytest.approx(10 / 1.3)
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


def stamped_when_published(
    n: int, hz: float, rng: np.random.Generator, keep: np.ndarray | None = None
) -> list[int]:
    """Stamps of a driver that stamps each frame when it publishes it, on a busy machine.

    Frame i is taken at i periods; its publication waits for the scheduler (a tenth of a
    period on average, exponential) and, one time in 20, for a stall of 0.35-0.85 periods
    (30-70 ms at 12 Hz); a frame held up that way comes out right before the next one
    (gaps down to 1 ms). Frames not in ``keep`` are taken and never published (the driver
    dropped them).
    """
    period = S / hz
    stamps, last = [], -float(S)
    for i in range(n):
        stall = rng.uniform(0.35, 0.85) * period if rng.random() < 0.05 else 0.0
        delay = rng.exponential(0.1 * period) + stall
        t = max(i * period, last + 1e6) + delay
        last = t
        if keep is None or keep[i]:
            stamps.append(T0 + int(t))
    return stamps


def periods_over_warn(stamps: list[int], hz: float, warn: float = 0.05) -> tuple[int, int]:
    """Diagnostics periods of 1 s whose camera loss, and whose 8-frame windows' missing
    frames (:class:`WindowSpan` at the estimated period), passed ``warn``."""
    est, spans = FrameLossEstimator(), WindowSpan()
    camera_warns = window_warns = 0
    earlier = est.counts
    per_period = round(hz)
    for i, t in enumerate(stamps):
        est.update(t)
        if i >= 7 and est.period_ns is not None:
            spans.add(t - stamps[i - 7], 8, est.period_ns)
        if i % per_period == per_period - 1:
            counts = est.counts
            camera_warns += counts.since(earlier).fraction_lost > warn
            earlier = counts
            figures = spans.take()
            window_warns += figures is not None and figures[0] > warn
    return camera_warns, window_warns


@pytest.mark.parametrize("hz", [12.0, 30.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_camera_stamped_when_published_under_load_loses_nothing(hz: float, seed: int) -> None:
    """The stamps jitter by up to most of a period (gaps of 0.01 to 2 periods), every frame
    arrives: no frame is counted lost, the rate is the camera's, and no period warns,
    neither for the camera nor for the encoder's windows. (Judged against the smallest
    recent gap, the period fell to a fraction of the truth: hundreds of frames "lost", and
    windows "spanning 0.58 s instead of 0.38 s".)"""
    rng = np.random.default_rng(seed)
    stamps = stamped_when_published(int(150 * hz), hz, rng)  # 2.5 minutes
    assert min(np.diff(stamps)) < 0.1 * S / hz and max(np.diff(stamps)) > 1.4 * S / hz
    est, true_lost = run(stamps, np.ones(len(stamps), dtype=bool))
    assert true_lost == 0 and est.flush().lost == 0
    assert est.camera_hz == pytest.approx(hz, rel=0.02)
    assert periods_over_warn(stamps, hz) == (0, 0)


@pytest.mark.parametrize("dropped", [0.1, 0.3])
def test_real_loss_under_the_same_jitter_is_counted(dropped: float) -> None:
    """The same driver drops frames (taken, never published): they are counted, and the
    periods in which it dropped one warn."""
    hz = 12.0
    n = int(150 * hz)
    rng = np.random.default_rng(int(dropped * 10))
    keep = rng.random(n) >= dropped
    keep[0] = keep[-1] = True
    stamps = stamped_when_published(n, hz, rng, keep)
    est = FrameLossEstimator()
    for t in stamps:
        est.update(t)
    true_lost = n - len(stamps)
    assert est.flush().lost == pytest.approx(true_lost, rel=0.05)
    assert est.camera_hz == pytest.approx(hz, rel=0.02)
    received = np.flatnonzero(keep)
    per = round(hz)  # the periods (12 received frames each) in which a frame was dropped
    lossy = sum(
        received[j + per - 1] - received[j] + 1 > per for j in range(0, len(received) - per, per)
    )
    camera_warns, window_warns = periods_over_warn(stamps, hz)
    assert lossy > 60 and camera_warns >= 0.8 * lossy and window_warns >= 0.8 * lossy


def test_a_burst_dropped_by_a_jittering_driver_is_counted_whole() -> None:
    hz = 12.0
    n = 1800
    keep = np.ones(n, dtype=bool)
    for start in range(100, n - 12, 300):  # 6 frames dropped every 300
        keep[start : start + 6] = False
    stamps = stamped_when_published(n, hz, np.random.default_rng(7), keep)
    est = FrameLossEstimator()
    for t in stamps:
        est.update(t)
    assert est.flush().lost == n - len(stamps) == 36


def test_the_frames_missing_between_two_received_frames_are_those_never_sent() -> None:
    """What the encoder's windows ask: between two received frames, the frames the camera
    took that never arrived, once settled; jitter of the stamps moves none."""
    hz = 12.0
    n = 600
    keep = np.ones(n, dtype=bool)
    keep[[200, 201, 350]] = False
    stamps = stamped_when_published(n, hz, np.random.default_rng(11), keep)
    est = FrameLossEstimator()
    received = np.flatnonzero(keep)
    assert est.missing_between(0, 1) is None  # nothing placed yet
    for t in stamps:
        est.update(t)
    assert est.frames_seen == len(stamps)
    last = len(stamps) - 1
    assert est.missing_between(last - 8, last) is None  # not settled yet
    windows = [(i, i + 7) for i in range(len(stamps) - 7 - CONFIRM_FRAMES)]
    for first, end in windows:
        truth = int(received[end] - received[first]) - (end - first)
        assert est.missing_between(first, end) == truth, (first, end)
