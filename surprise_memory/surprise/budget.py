"""Episode-rate budget: at most B events in any sliding window, the most surprising kept.

Beyond the paper (which stores about 1.28 episodes per minute at gamma = 1 but has no cap):
on a noisy day the gate may fire far more often, and the disk budget of the store
(``max_episodes``, ``max_store_bytes``) only evicts *after* the fact. The rule:

* B = floor(``max_episodes_per_minute`` x ``budget_window_seconds`` / 60) events at most in
  any window of ``budget_window_seconds`` (a sliding-window count of kept stamps: a token
  bucket whose tokens come back exactly one window after they were spent).
* A candidate waits ``budget_delay_seconds`` after its peak. It is then decided in stamp
  order: kept iff the window ending at its stamp holds fewer than B kept events *and*
  it is among the (B - used) highest scores of itself and the candidates still waiting
  (the later ones that it competes with for the same slots). Otherwise it is dropped as
  over budget. Ties go to the earlier candidate.

So a burst keeps its most surprising events within the lookahead of the delay, the cap
holds for every window (each window that holds kept events ends at or after one of them,
and that one was checked), and no decision waits longer than the delay. With the cap off
(rate 0) every candidate is kept at once.
"""

from __future__ import annotations

import math
from collections import deque

from surprise_memory.config import BudgetConfig
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.decisions import OVER_BUDGET, Decision
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["EpisodeBudget"]

_MAX_WAITING = 1024  # candidates held at most; beyond, the oldest is decided early


class EpisodeBudget:
    """Caps the event rate with a sliding window (see the module docstring).

    Args:
        config: Rate, window and delay.

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(self, config: BudgetConfig | None = None) -> None:
        self._config = config or BudgetConfig()
        rate = self._config.max_episodes_per_minute
        self._enabled = rate > 0
        self._cap = math.floor(rate * self._config.budget_window_seconds / 60.0 + 1e-9)
        self._window_ns = round(self._config.budget_window_seconds * NS_PER_SECOND)
        self._delay_ns = round(self._config.budget_delay_seconds * NS_PER_SECOND)
        self._waiting: list[SurpriseTrigger] = []  # by stamp
        self._kept: deque[int] = deque()  # stamps of kept events within one window
        self.suppressed = 0
        """Candidates dropped over budget since construction (not cleared by :meth:`reset`)."""

    @property
    def config(self) -> BudgetConfig:
        """The settings."""
        return self._config

    @property
    def enabled(self) -> bool:
        """True when a rate cap is set."""
        return self._enabled

    @property
    def cap(self) -> int:
        """B, the most events in one window (0 when off)."""
        return self._cap if self._enabled else 0

    @property
    def max_delay_ns(self) -> int:
        """Longest time from a candidate's peak to its decision (0 when off)."""
        return self._delay_ns if self._enabled else 0

    def reset(self) -> None:
        """Forget the waiting candidates and the window's kept events."""
        self._waiting.clear()
        self._kept.clear()

    def push(self, now_ns: int, candidates: list[SurpriseTrigger] | None = None) -> list[Decision]:
        """Add candidates and decide those that have waited long enough.

        Args:
            now_ns: Stamp of the newest frame (the budget's clock).
            candidates: New candidates from the gate (stamps at or before ``now_ns``).

        Returns:
            Decisions in stamp order (kept, or suppressed with reason ``"budget"``).

        """
        if not self._enabled:
            return [Decision(t) for t in candidates or ()]
        for t in candidates or ():
            self._waiting.append(t)
        self._waiting.sort(key=lambda t: t.stamp_ns)
        decided = []
        while self._waiting and (
            now_ns - self._waiting[0].stamp_ns > self._delay_ns or len(self._waiting) > _MAX_WAITING
        ):
            decided.append(self._decide_oldest())
        return decided

    def flush(self) -> list[Decision]:
        """Decide every waiting candidate (end of stream)."""
        decided = []
        while self._waiting:
            decided.append(self._decide_oldest())
        return decided

    def _decide_oldest(self) -> Decision:
        cand = self._waiting.pop(0)
        while self._kept and self._kept[0] <= cand.stamp_ns - self._window_ns:
            self._kept.popleft()
        free = self._cap - len(self._kept)
        # competitors: the waiting candidates that fall in the same window and beat it
        end = cand.stamp_ns + self._window_ns
        better = sum(1 for t in self._waiting if t.stamp_ns < end and t.score > cand.score)
        if free > 0 and better < free:
            self._kept.append(cand.stamp_ns)
            return Decision(cand)
        self.suppressed += 1
        return Decision(cand, OVER_BUDGET)
