"""The paper's equal-budget baselines: uniform and random episodic memory.

The paper compares surprise-gated memory with memories that store as many episodes at
fixed intervals (uniform) or at random times (random). :class:`BaselineGate` takes the
place of :class:`~surprise_memory.surprise.gate.SurpriseGate` (same ``push`` / ``flush`` /
``reset`` shape) and ignores the scores for its decisions:

* time is cut into slots of L = 60 / rate seconds from the origin (the first frame of the
  recording: :meth:`BaselineGate.start`, else the first frame pushed);
* ``uniform``: one event per slot, at its middle (k + 0.5) L;
* ``random``: one event per slot at a uniformly random time in it, from a seeded generator
  (stratified random sampling: the count is exact, as for uniform, where a coin flip per
  frame would make the count itself random).

Each slot time fires at the first frame at or after it; a frame fires at most once, so
slot times that fall before the first scored frame fire on the following frames and no slot
is lost. With ``--budget-from STORE`` the rate is that run's episodes per minute, so a
recording of the same length gets the same number of events. Delay: none (a slot's event is
the first frame past its time). The trigger carries the frame's score and a NaN threshold.
"""

from __future__ import annotations

import math

import numpy as np

from surprise_memory.config import BaselineConfig
from surprise_memory.errors import ConfigError, InputError
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["BaselineGate"]


class BaselineGate:
    """Uniform or random events at a fixed rate (see the module docstring).

    Args:
        config: ``gate_mode`` (uniform or random), the rate and the seed.

    Raises:
        ConfigError: ``gate_mode`` is ``surprise`` (use ``SurpriseGate``) or the rate is 0.

    """

    def __init__(self, config: BaselineConfig) -> None:
        if config.gate_mode not in ("uniform", "random"):
            raise ConfigError(
                f"gate_mode={config.gate_mode!r}: BaselineGate is the uniform or random gate"
            )
        self._config = config
        self._slot_ns = 60.0 * NS_PER_SECOND / config.baseline_episodes_per_minute
        self.reset()

    @property
    def config(self) -> BaselineConfig:
        """The settings."""
        return self._config

    @property
    def threshold(self) -> float:
        """No threshold: NaN."""
        return math.nan

    @property
    def history_size(self) -> int:
        """No score history: 0."""
        return 0

    @property
    def max_delay_ns(self) -> int:
        """Events are decided by the frame that carries them: 0."""
        return 0

    @property
    def slot_ns(self) -> float:
        """L, the length of one slot in nanoseconds."""
        return self._slot_ns

    def reset(self) -> None:
        """Forget the origin and the slots used; the random times start over from the seed."""
        self._origin: int | None = None
        self._slot = 0
        self._next_ns = math.inf
        self._last: int | None = None
        self._rng = np.random.default_rng(self._config.baseline_seed)

    def start(self, origin_ns: int) -> None:
        """Set time zero of the slots (the recording's first frame), before any push."""
        if self._origin is None:
            self._origin = int(origin_ns)
            self._next_ns = self._slot_time(0)

    def _slot_time(self, k: int) -> float:
        assert self._origin is not None
        offset = 0.5 if self._config.gate_mode == "uniform" else float(self._rng.random())
        return self._origin + (k + offset) * self._slot_ns

    def push(self, stamp_ns: int, score: float, kl: float = math.nan) -> list[SurpriseTrigger]:
        """Feed one scored frame.

        Args:
            stamp_ns: The frame's stamp, strictly increasing.
            score: Its surprise (carried into the trigger, not used to decide).
            kl: Its KL, carried likewise.

        Returns:
            A trigger at this frame when a slot time has come, else nothing.

        Raises:
            InputError: The stamp is not after the previous one.

        """
        stamp_ns = int(stamp_ns)
        if self._last is not None and stamp_ns <= self._last:
            raise InputError(
                f"stamp {stamp_ns} ns is not after the previous stamp {self._last} ns "
                "(time went backwards: reset the gate to start a new sequence)"
            )
        self._last = stamp_ns
        self.start(stamp_ns)
        if stamp_ns < self._next_ns:
            return []
        self._slot += 1
        self._next_ns = self._slot_time(self._slot)
        return [SurpriseTrigger(stamp_ns, float(score), math.nan, stamp_ns, float(kl))]

    def flush(self) -> list[SurpriseTrigger]:
        """Nothing is ever pending."""
        return []
