"""What happens to a gate candidate after the gate: kept, or suppressed and why."""

from __future__ import annotations

import math
from dataclasses import dataclass

from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["HABITUATION", "KEPT", "OVER_BUDGET", "SUPPRESSION_REASONS", "Decision"]

KEPT = ""
"""The reason of a kept candidate (none)."""
HABITUATION = "habituation"
"""Suppressed: it resembles a recently kept event (:mod:`~surprise_memory.surprise.habituation`)."""
OVER_BUDGET = "budget"
"""Suppressed: the episode-rate budget was spent on more surprising candidates (:mod:`.budget`)."""
SUPPRESSION_REASONS = (HABITUATION, OVER_BUDGET)
"""Every reason a candidate may be suppressed for, in the order the filters run."""


@dataclass(frozen=True)
class Decision:
    """The fate of one gate candidate.

    Attributes:
        trigger: The candidate as the gate emitted it (stamp of its peak frame).
        reason: :data:`KEPT` (empty) when kept, else one of :data:`SUPPRESSION_REASONS`.
        habituation: The habituation level h that was compared with theta (NaN when
            habituation is off or had nothing to compare with).
        similar_to_ns: Stamp of the remembered event that gave h, or None.

    """

    trigger: SurpriseTrigger
    reason: str = KEPT
    habituation: float = math.nan
    similar_to_ns: int | None = None

    @property
    def kept(self) -> bool:
        """True when the candidate becomes an event (an episode is stored)."""
        return self.reason == KEPT
