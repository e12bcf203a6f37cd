"""What the gate's candidates go through before they become events: habituation, then budget.

:class:`TriggerFilter` chains :class:`~.habituation.Habituation` (when on) and
:class:`~.budget.EpisodeBudget` (when a rate cap is set) behind the gate, so the scorer node
and the offline pipeline call one object in the same order. With both off (the defaults)
every candidate is kept at once and the paper's method is unchanged.

Habituation runs first and remembers what it lets through, even a candidate that the budget
drops afterwards: the robot did see that content as surprising, and the budget's choice
is about the rate, not about what is new.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy.typing as npt

from surprise_memory.config import BudgetConfig, HabituationConfig
from surprise_memory.surprise.budget import EpisodeBudget
from surprise_memory.surprise.decisions import Decision
from surprise_memory.surprise.gate import SurpriseTrigger
from surprise_memory.surprise.habituation import Habituation, Position

__all__ = ["TriggerFilter"]


class TriggerFilter:
    """Habituation and the rate budget behind a gate.

    Per scored frame: :meth:`observe` (only needed when :attr:`needs_latent`), then
    :meth:`push` with the frame's stamp and the gate's new candidates; :meth:`flush` at the
    end of the stream; :meth:`reset` when time jumps back.

    Args:
        habituation: Habituation settings (off by default).
        budget: Rate cap settings (off by default).
        gate_delay_ns: The gate's ``max_delay_ns`` (how late a candidate may come).

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(
        self,
        habituation: HabituationConfig | None = None,
        budget: BudgetConfig | None = None,
        gate_delay_ns: int = 0,
    ) -> None:
        hab = habituation or HabituationConfig()
        self._habituation = Habituation(hab, gate_delay_ns) if hab.habituation else None
        self._budget = EpisodeBudget(budget)

    @property
    def needs_latent(self) -> bool:
        """True when :meth:`observe` must be fed (habituation is on)."""
        return self._habituation is not None

    @property
    def max_delay_ns(self) -> int:
        """Longest time from a candidate's peak to its decision here (the budget's delay)."""
        return self._budget.max_delay_ns

    @property
    def suppressed(self) -> dict[str, int]:
        """Candidates suppressed so far, by reason."""
        hab = self._habituation.suppressed if self._habituation is not None else 0
        return {"habituation": hab, "budget": self._budget.suppressed}

    def reset(self) -> None:
        """Forget everything held (time jumped back)."""
        if self._habituation is not None:
            self._habituation.reset()
        self._budget.reset()

    def observe(self, stamp_ns: int, deviation: npt.ArrayLike) -> None:
        """Hold d = z - mu of a scored frame for habituation (a no-op when it is off).

        Args:
            stamp_ns: The frame's stamp, as pushed to the gate.
            deviation: Its embedding minus the scorer's window mean *before* z entered
                (``z - SurpriseScorer.mean``, taken before ``update(z)``).

        Raises:
            InputError: The deviation is not a finite non-empty 1-D array.

        """
        if self._habituation is not None:
            self._habituation.observe(stamp_ns, deviation)

    def push(
        self,
        now_ns: int,
        candidates: list[SurpriseTrigger],
        position_at: Callable[[int], Position | None] | None = None,
    ) -> list[Decision]:
        """Pass the gate's new candidates through; return what is decided now.

        Args:
            now_ns: Stamp of the newest scored frame.
            candidates: What the gate returned for that frame.
            position_at: The robot position at a stamp, when known (habituation by place).

        Returns:
            Decisions in stamp order: kept ones become events; the others carry the reason.

        """
        decisions: list[Decision] = []
        passed = []
        for trigger in candidates:
            if self._habituation is None:
                passed.append(trigger)
                continue
            where = position_at(trigger.stamp_ns) if position_at is not None else None
            decision = self._habituation.push(trigger, where)
            if decision.kept:
                passed.append(trigger)
            else:
                decisions.append(decision)
        decisions += self._budget.push(now_ns, passed)
        decisions.sort(key=lambda d: d.trigger.stamp_ns)
        return decisions

    def flush(self) -> list[Decision]:
        """Decide everything still waiting (end of stream)."""
        return self._budget.flush()
