"""SurpriseGate: hand-checked sequences, a brute-force reference, spikes and noise rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.surprise.gate import SurpriseGate, SurpriseTrigger
from surprise_memory.surprise.robust import MAD_TO_SIGMA

S = 1_000_000_000  # one second in ns


def _run(gate: SurpriseGate, stamps: list[int], scores: list[float]) -> list[SurpriseTrigger]:
    out: list[SurpriseTrigger] = []
    for t, s in zip(stamps, scores, strict=True):
        out += gate.push(t, s)
    return out + gate.flush()


def _reference(
    stamps: list[int], scores: list[float], gamma: float, history: int, warmup: int, radius_ns: int
) -> list[tuple[int, float]]:
    """The gate's rule written directly over the whole series, O(n^2): (stamp, tau) of peaks."""
    peaks = []
    n = len(scores)
    for p in range(1, n - 1):
        past = np.asarray(scores[max(0, p + 1 - history) : p + 1])
        if len(past) < warmup:
            continue
        med = float(np.median(past))
        tau = med + gamma * MAD_TO_SIGMA * float(np.median(np.abs(past - med)))
        if not scores[p] > tau:
            continue
        before = [
            q for q in range(n) if q < p and (stamps[p] - stamps[q] <= radius_ns or q == p - 1)
        ]
        after = [
            q for q in range(n) if q > p and (stamps[q] - stamps[p] <= radius_ns or q == p + 1)
        ]
        if all(scores[p] > scores[q] for q in before) and all(
            scores[p] >= scores[q] for q in after
        ):
            peaks.append((stamps[p], tau))
    return peaks


def test_hand_checked_local_maxima() -> None:
    gate = SurpriseGate(gamma=1.0, warmup=3, nms_seconds=0.0)
    stamps = [i * S for i in range(8)]
    scores = [1.0, 2.0, 1.0, 5.0, 1.0, 1.0, 9.0, 1.0]
    events = []
    for t, s in zip(stamps, scores, strict=True):
        got = gate.push(t, s)
        if t == 4 * S:  # the peak at 3 s is decided by the next, lower frame
            assert [e.stamp_ns for e in got] == [3 * S]
        events += got
    events += gate.flush()
    # at 3 s the history is 1 2 1 5: median 1.5, MAD 0.5
    assert [e.stamp_ns for e in events] == [3 * S, 6 * S]
    assert events[0].score == 5.0
    assert events[0].threshold == pytest.approx(1.5 + MAD_TO_SIGMA * 0.5)
    assert events[0].decided_ns == 4 * S
    # at 6 s: sorted 1 1 1 1 2 5 9, median 1, MAD 0 -> tau 1
    assert events[1].threshold == pytest.approx(1.0)
    assert events[1].decided_ns == 7 * S


def test_suppression_keeps_the_higher_peak() -> None:
    gate = SurpriseGate(gamma=1.0, warmup=3, nms_seconds=3.0)
    stamps = [i * S for i in range(8)]
    scores = [1.0, 2.0, 1.0, 5.0, 1.0, 1.0, 9.0, 1.0]
    events = _run(gate, stamps, scores)
    # 5 at 3 s is within 3 s of 9 at 6 s: only 9 survives, decided at end of stream
    assert [(e.stamp_ns, e.score) for e in events] == [(6 * S, 9.0)]
    assert events[0].decided_ns == 7 * S


def test_plateau_triggers_once_on_its_first_frame() -> None:
    gate = SurpriseGate(gamma=0.0, warmup=3, nms_seconds=0.0)
    scores = [1.0, 1.0, 1.0, 4.0, 4.0, 4.0, 1.0, 1.0]
    events = _run(gate, [i * S for i in range(8)], scores)
    assert [e.stamp_ns for e in events] == [3 * S]


def test_last_frame_is_never_a_peak() -> None:
    gate = SurpriseGate(gamma=0.0, warmup=3, nms_seconds=0.0)
    events = _run(gate, [i * S for i in range(5)], [1.0, 1.0, 1.0, 1.0, 9.0])
    assert events == []


@pytest.mark.parametrize("seed", range(6))
def test_equals_brute_force_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    gaps = rng.integers(20_000_000, 200_000_000, size=n)  # irregular 5..50 Hz frames
    stamps = [int(x) for x in np.cumsum(gaps)]
    scores = [float(x) for x in rng.gamma(2.0, size=n).round(1)]  # rounding makes ties
    gamma, history, warmup = [0.5, 1.0, 2.0][seed % 3], [20, 100, 1000][seed % 3], 10
    radius_s = [0.0, 0.1, 0.35][seed % 3]
    gate = SurpriseGate(gamma=gamma, history=history, warmup=warmup, nms_seconds=radius_s)
    events = _run(gate, stamps, scores)
    expected = _reference(stamps, scores, gamma, history, warmup, round(radius_s * S))
    assert [e.stamp_ns for e in events] == [p for p, _ in expected]
    for e, (_, tau) in zip(events, expected, strict=True):
        assert e.threshold == pytest.approx(tau)
        assert e.decided_ns > e.stamp_ns
        # bounded delay: decided by the first frame past the radius
        later = [t for t in stamps if t > e.stamp_ns + round(radius_s * S)]
        bound = later[0] if later else stamps[-1]
        assert e.decided_ns <= max(bound, stamps[stamps.index(e.stamp_ns) + 1])


def test_known_spikes_are_found_exactly_once_each() -> None:
    rng = np.random.default_rng(7)
    fps, seconds = 10, 600
    t = np.arange(fps * seconds) / fps
    scores = 1.0 + 0.1 * np.sin(2 * np.pi * t / 7.0) + 0.005 * rng.normal(size=t.size)
    spike_times = [60.0, 95.5, 200.0, 201.7, 333.3, 480.0]  # two of them 1.7 s apart
    for st in spike_times:
        i = round(st * fps)
        scores[i - 2 : i + 3] += np.array([0.8, 1.6, 2.5, 1.4, 0.6])  # peak at i
    stamps = [round(x * S) for x in t]
    gate = SurpriseGate(gamma=1.5, nms_seconds=1.0)
    events = _run(gate, stamps, list(scores))
    assert [e.stamp_ns for e in events] == [round(st * fps) * S // fps for st in spike_times]
    for e in events:
        assert e.decided_ns - e.stamp_ns <= gate.max_delay_ns + S // fps


@pytest.mark.parametrize("gamma", [1.0, 2.0])
def test_noise_trigger_rate_matches_gamma(gamma: float) -> None:
    """On i.i.d. Gaussian scores a frame triggers iff it is the maximum of its 2r+1
    neighbourhood and above tau ~ gamma (in units of sigma): rate (1 - Phi(gamma)^(2r+1))/(2r+1)."""
    rng = np.random.default_rng(11)
    n, fps, r = 40_000, 10, 3
    gate = SurpriseGate(gamma=gamma, history=3000, warmup=500, nms_seconds=r / fps)
    scores = rng.normal(size=n)
    events = _run(gate, [i * S // fps for i in range(n)], list(scores))
    phi = 0.5 * (1 + math.erf(gamma / math.sqrt(2)))
    expected = (1 - phi ** (2 * r + 1)) / (2 * r + 1) * (n - 500)
    assert len(events) == pytest.approx(expected, rel=0.1)


def test_warmup_holds_back_triggers_and_threshold() -> None:
    gate = SurpriseGate(warmup=5, nms_seconds=0.0)
    for i, s in enumerate([1.0, 9.0, 1.0, 1.0]):
        assert gate.push(i * S, s) == []
        assert math.isnan(gate.threshold)
    gate.push(4 * S, 1.0)
    assert gate.threshold == pytest.approx(1.0)
    assert gate.flush() == []  # the 9 at 1 s came during warm-up


def test_bad_input_raises_and_keeps_state() -> None:
    gate = SurpriseGate(warmup=3, nms_seconds=0.0)
    gate.push(1 * S, 1.0)
    with pytest.raises(InputError, match="finite"):
        gate.push(2 * S, math.nan)
    with pytest.raises(InputError, match="not after"):
        gate.push(1 * S, 1.0)
    with pytest.raises(InputError, match="went backwards"):
        gate.push(0, 1.0)
    assert gate.history_size == 1
    gate.reset()
    assert gate.history_size == 0 and gate.last_stamp_ns is None
    assert gate.push(0, 1.0) == []  # after reset an earlier stamp starts a new sequence


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"gamma": -1.0}, "gamma"),
        ({"history": 2}, "history"),
        ({"warmup": 50, "history": 10}, "warmup"),
        ({"nms_seconds": -0.5}, "nms_seconds"),
        ({"gamma": math.inf}, "finite"),
    ],
)
def test_invalid_settings_name_the_rule(kwargs: dict[str, float], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SurpriseGate(**kwargs)  # type: ignore[arg-type]
