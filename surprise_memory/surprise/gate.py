"""Causal event gate: robust threshold, local maxima and non-maximum suppression."""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass

from surprise_memory.config import GateConfig
from surprise_memory.errors import InputError
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.robust import RollingMedianMAD

__all__ = ["SurpriseGate", "SurpriseTrigger"]


@dataclass(frozen=True)
class SurpriseTrigger:
    """One gated event.

    Attributes:
        stamp_ns: Stamp of the peak frame (int nanoseconds), not of the decision.
        score: Surprise s(t) of the peak frame.
        threshold: tau in force at the peak frame.
        decided_ns: Stamp of the frame whose arrival decided the event (or of the last frame
            for events decided by ``flush``).
        kl: KL(t) of the peak frame when the caller gave it to ``push``, else NaN.

    """

    stamp_ns: int
    score: float
    threshold: float
    decided_ns: int
    kl: float = math.nan


@dataclass
class _Candidate:
    stamp_ns: int
    score: float
    threshold: float
    kl: float
    followers: int = 0  # frames seen after it


class SurpriseGate:
    """Online version of the paper's gate (events at peaks of s above a robust threshold).

    Offline, the paper triggers at every local maximum of s(t) above
    tau = median(s) + gamma * 1.4826 * MAD(s) over the whole sequence, then suppresses
    clustered peaks. The paper does not say how to do this causally; the choices here:

    * **Threshold.** tau_t = median + gamma * 1.4826 * MAD over the ``history`` most recent
      scores *including* s(t) (exact, see :class:`RollingMedianMAD`). A frame is compared
      with the tau of its own time, so the decision does not depend on the delay, and the
      tau published with each frame's score is the one that frame is judged by. No trigger
      before ``warmup`` scores are held (tau is NaN then).
    * **Peaks and suppression in one rule.** Frame p triggers iff s(p) > tau_p and s(p) is
      the largest score of all frames with a stamp within ``nms_seconds`` of it, and of its
      immediate neighbours (so it is a local maximum even when frames are further apart
      than the radius). Ties go to the earlier frame (strictly greater than every earlier
      score, at least as great as every later one). Unlike greedy NMS, a peak suppressed by
      a higher neighbour stays suppressed even if that neighbour is itself suppressed: this
      keeps the decision local, hence bounded in delay.
    * **Delay.** Peak p is decided at the first frame after it whose stamp is more than
      ``nms_seconds`` after p's (at least one frame later): the maximum delay is
      ``nms_seconds`` plus one frame interval. At most one candidate is pending at a time
      (a later candidate within the radius is higher, so it replaces the pending one).
    * **End of stream.** ``flush()`` decides a pending candidate on the frames seen; the
      very last frame is never a peak (it has no right neighbour, as in ``find_peaks``).

    Per frame: an O(log history) threshold update and an amortised O(1) window maximum.

    Args:
        gamma: Threshold multiplier (paper: 1.0).
        history: Number of most recent scores for median and MAD.
        warmup: Scores needed before the first trigger.
        nms_seconds: Suppression radius and decision delay, in seconds.

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(
        self,
        gamma: float = 1.0,
        history: int = 3000,
        warmup: int = 32,
        nms_seconds: float = 1.0,
    ) -> None:
        self._config = GateConfig(
            gamma=gamma, history=history, warmup=warmup, nms_seconds=nms_seconds
        )
        self._gamma = self._config.gamma
        self._radius_ns = round(self._config.nms_seconds * NS_PER_SECOND)
        self._stats = RollingMedianMAD(self._config.history)
        # (stamp, score) of recent frames with decreasing scores: the front is the largest
        # score within the radius before the newest frame (monotonic-queue maximum)
        self._left: deque[tuple[int, float]] = deque()
        self._last: tuple[int, float] | None = None
        self._pending: _Candidate | None = None
        self._threshold = math.nan

    @classmethod
    def from_config(cls, config: GateConfig) -> SurpriseGate:
        """Build a gate from its config dataclass."""
        return cls(
            gamma=config.gamma,
            history=config.history,
            warmup=config.warmup,
            nms_seconds=config.nms_seconds,
        )

    @property
    def config(self) -> GateConfig:
        """The gate's settings."""
        return self._config

    @property
    def gamma(self) -> float:
        """The threshold multiplier; may be changed between frames (takes effect at the next)."""
        return self._gamma

    @gamma.setter
    def gamma(self, value: float) -> None:
        self._config = dataclasses.replace(self._config, gamma=value)  # validates
        self._gamma = self._config.gamma

    @property
    def threshold(self) -> float:
        """Tau at the most recent frame (NaN during warm-up)."""
        return self._threshold

    @property
    def history_size(self) -> int:
        """Scores currently held for median and MAD."""
        return len(self._stats)

    @property
    def max_delay_ns(self) -> int:
        """Time after a peak by which it is decided, excluding one frame interval."""
        return self._radius_ns

    @property
    def last_stamp_ns(self) -> int | None:
        """Stamp of the most recent frame pushed, None before any."""
        return None if self._last is None else self._last[0]

    def reset(self) -> None:
        """Forget every score and any pending candidate (e.g. after time jumped back)."""
        self._stats.clear()
        self._left.clear()
        self._last = None
        self._pending = None
        self._threshold = math.nan

    def push(self, stamp_ns: int, score: float, kl: float = math.nan) -> list[SurpriseTrigger]:
        """Feed the score of one frame.

        Args:
            stamp_ns: The frame's stamp in integer nanoseconds, strictly increasing.
            score: The frame's surprise s(t), finite.
            kl: Optional KL(t) of the frame, carried into a trigger at this frame.

        Returns:
            The triggers decided by this frame (empty, or one earlier peak).

        Raises:
            InputError: The score is not finite, or the stamp is not after the previous
                one. The gate's state is unchanged.

        """
        stamp_ns = int(stamp_ns)
        score = float(score)
        if not math.isfinite(score):
            raise InputError(f"surprise score must be finite, got {score!r} at stamp {stamp_ns}")
        if self._last is not None and stamp_ns <= self._last[0]:
            raise InputError(
                f"stamp {stamp_ns} ns is not after the previous stamp {self._last[0]} ns "
                "(time went backwards: reset the gate to start a new sequence)"
            )
        self._stats.push(score)
        warm = len(self._stats) >= self._config.warmup
        self._threshold = self._stats.threshold(self._gamma) if warm else math.nan

        decided = self._advance_pending(stamp_ns, score)

        # left window: drop frames older than the radius, then read the maximum
        while self._left and stamp_ns - self._left[0][0] > self._radius_ns:
            self._left.popleft()
        left_max = self._left[0][1] if self._left else -math.inf
        if self._last is not None:
            left_max = max(left_max, self._last[1])
        if warm and self._last is not None and score > self._threshold and score > left_max:
            # any pending candidate is dead or decided by now: this score beat it
            self._pending = _Candidate(stamp_ns, score, self._threshold, float(kl))

        while self._left and self._left[-1][1] <= score:
            self._left.pop()
        self._left.append((stamp_ns, score))
        self._last = (stamp_ns, score)
        return decided

    def _advance_pending(self, stamp_ns: int, score: float) -> list[SurpriseTrigger]:
        cand = self._pending
        if cand is None or cand.stamp_ns == stamp_ns:
            return []
        within = stamp_ns - cand.stamp_ns <= self._radius_ns
        if (within or cand.followers == 0) and score > cand.score:
            self._pending = None  # a later, higher frame: not a peak
            return []
        cand.followers += 1
        if within:
            return []
        self._pending = None
        return [self._trigger(cand, stamp_ns)]

    def flush(self) -> list[SurpriseTrigger]:
        """Decide what is pending at the end of the stream, then forget it.

        Returns:
            The pending peak if it has been followed by at least one lower frame.

        """
        cand, self._pending = self._pending, None
        if cand is None or cand.followers == 0 or self._last is None:
            return []
        return [self._trigger(cand, self._last[0])]

    @staticmethod
    def _trigger(cand: _Candidate, decided_ns: int) -> SurpriseTrigger:
        return SurpriseTrigger(
            stamp_ns=cand.stamp_ns,
            score=cand.score,
            threshold=cand.threshold,
            decided_ns=decided_ns,
            kl=cand.kl,
        )
