"""Habituation: a candidate that resembles recently kept events is suppressed.

Beyond the paper, which names the limitation ("surprising, yet re-appearing subjects will
continue to trigger event storage"). The rule, per candidate c that the gate emits::

    h(c) = max_k  cos(d_c, d_k) * exp(-(t_c - t_k) / T) * exp(-|p_c - p_k| / R)

over the ``habituation_memory`` most recent kept events k; c is suppressed when
h(c) >= theta (``habituation_similarity``). Negative cosines count as 0. When c is
suppressed, the event k that gave h takes c's stamp and position (not its vector): a
subject that keeps coming back keeps the robot habituated, and the damping recovers only
once it stays away (time constant T) or the robot is elsewhere (R; off when 0 or when a pose
is unknown). A kept candidate joins the memory.

Why d = z - mu, the change of the V-JEPA-2 latent z at the peak frame against the mean mu
of the scorer's window (the same difference the surprise s(t) is made of): mu holds the
scene of the last W frames, so d is what the event *added* to it, and it does not depend
on where the robot was or what the scene around looked like. On the synthetic recording
with a recurring panel (:mod:`surprise_memory.evaluation.habituation`), cos(d, d') is 0.5 to
0.97 between passes of the panel and at most about 0.4 between the panel and other events,
even with the tiny random encoder, while the raw z are 0.6 to 0.97 alike whatever happened.
The PE-Core frame embeddings would say more about *what* is seen, but they exist only in
the memory node, after the decision, and cost a forward pass per frame; the pose alone
cannot tell a door from a person at the same place. So the latent decides what is alike,
and the pose (optional) when it is somewhere else.

Cost: O(D) per frame (one deviation copied into a short ring, so the peak's d is still there
when the gate decides, up to its delay later) and O(``habituation_memory`` x D) per
candidate; candidates are rare (about 1-2 per minute).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from surprise_memory.config import HabituationConfig
from surprise_memory.errors import InputError
from surprise_memory.stamps import NS_PER_SECOND
from surprise_memory.surprise.decisions import HABITUATION, Decision
from surprise_memory.surprise.gate import SurpriseTrigger

__all__ = ["Habituation", "Position"]

Position = tuple[float, float, float]
"""A robot position in metres (x, y, z in one fixed frame)."""

_RING_MAX = 4096  # most per-frame deviations held (bounds memory at any frame rate)
_MARGIN_NS = NS_PER_SECOND  # deviations kept beyond the gate's delay, for slow frame rates


@dataclass
class _Remembered:
    stamp_ns: int
    position: Position | None
    direction: npt.NDArray[np.float32]  # unit vector of d


class Habituation:
    """Suppresses gate candidates that resemble recently kept events (see the module docstring).

    Feed every scored frame's deviation with :meth:`observe`, then each candidate the gate
    emits with :meth:`push`; it decides at once (no delay of its own).

    Args:
        config: theta, T, R and the memory size.
        lookback_ns: How long after a frame its deviation may still be asked for (the gate's
            ``max_delay_ns``); older ones are dropped.

    Raises:
        ConfigError: A setting is out of range.

    """

    def __init__(self, config: HabituationConfig | None = None, lookback_ns: int = 0) -> None:
        self._config = config or HabituationConfig()
        self._lookback_ns = max(0, int(lookback_ns)) + _MARGIN_NS
        self._recovery_ns = self._config.habituation_recovery_seconds * NS_PER_SECOND
        self._radius = self._config.habituation_radius_m
        self._ring: deque[tuple[int, npt.NDArray[np.float32]]] = deque(maxlen=_RING_MAX)
        self._memory: deque[_Remembered] = deque(maxlen=self._config.habituation_memory)
        self.suppressed = 0
        """Candidates suppressed since construction (not cleared by :meth:`reset`)."""

    @property
    def config(self) -> HabituationConfig:
        """The settings."""
        return self._config

    @property
    def max_delay_ns(self) -> int:
        """Decision delay added to the gate's: none, a candidate is decided when pushed."""
        return 0

    @property
    def remembered(self) -> int:
        """Events currently remembered."""
        return len(self._memory)

    def reset(self) -> None:
        """Forget the deviations and the remembered events (e.g. after time jumped back)."""
        self._ring.clear()
        self._memory.clear()

    def observe(self, stamp_ns: int, deviation: npt.ArrayLike) -> None:
        """Hold the latent change d = z - mu of one scored frame until the gate has decided it.

        Args:
            stamp_ns: The frame's stamp (the one pushed to the gate), increasing.
            deviation: z - mu, the embedding minus the scorer's window mean before z entered.

        Raises:
            InputError: ``deviation`` is not a finite non-empty 1-D array.

        """
        d = np.asarray(deviation, dtype=np.float32)
        if d.ndim != 1 or d.size == 0 or not np.isfinite(d).all():
            raise InputError(f"deviation must be a finite non-empty 1-D array, got shape {d.shape}")
        ring = self._ring
        stamp_ns = int(stamp_ns)
        if ring and ring[-1][0] >= stamp_ns:  # time went back without a reset: start over
            ring.clear()
        while ring and ring[0][0] < stamp_ns - self._lookback_ns:
            ring.popleft()
        ring.append((stamp_ns, d.copy()))

    def push(self, trigger: SurpriseTrigger, position: Position | None = None) -> Decision:
        """Decide one gate candidate: kept (and remembered) or suppressed.

        Args:
            trigger: The candidate; its deviation must have been observed at its stamp.
            position: The robot position at the candidate's stamp, when known.

        Returns:
            The decision; h and the stamp of the most similar remembered event with it. A
            candidate whose deviation was not observed (or is zero) is kept and not
            remembered, with h NaN.

        """
        direction = self._direction_at(trigger.stamp_ns)
        if direction is None:
            return Decision(trigger)
        best, best_k = 0.0, None
        for k in self._memory:
            h = self._level(direction, trigger.stamp_ns, position, k)
            if h > best:
                best, best_k = h, k
        if best_k is not None and best >= self._config.habituation_similarity:
            self.suppressed += 1
            similar = best_k.stamp_ns
            best_k.stamp_ns = max(best_k.stamp_ns, trigger.stamp_ns)  # the subject came back
            best_k.position = position if position is not None else best_k.position
            return Decision(trigger, HABITUATION, best, similar)
        self._memory.append(_Remembered(trigger.stamp_ns, position, direction))
        similar_to = None if best_k is None else best_k.stamp_ns
        return Decision(trigger, habituation=best, similar_to_ns=similar_to)

    def _direction_at(self, stamp_ns: int) -> npt.NDArray[np.float32] | None:
        for stamp, d in reversed(self._ring):
            if stamp == stamp_ns:
                norm = float(np.linalg.norm(d))
                return d / norm if norm > 0 and math.isfinite(norm) else None
            if stamp < stamp_ns:
                break
        return None

    def _level(
        self,
        direction: npt.NDArray[np.float32],
        stamp_ns: int,
        position: Position | None,
        k: _Remembered,
    ) -> float:
        if direction.shape != k.direction.shape:
            return 0.0
        h = max(0.0, float(np.dot(direction, k.direction)))
        h *= math.exp(-abs(stamp_ns - k.stamp_ns) / self._recovery_ns)
        if self._radius > 0 and position is not None and k.position is not None:
            h *= math.exp(-math.dist(position, k.position) / self._radius)
        return h
