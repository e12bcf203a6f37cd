"""Settings of the surprise stage: the scorer, the gate, and the filters after the gate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["BaselineConfig", "BudgetConfig", "GateConfig", "HabituationConfig", "ScorerConfig"]


@dataclass(frozen=True)
class ScorerConfig(ComponentConfig):
    """Settings of :class:`surprise_memory.surprise.scorer.SurpriseScorer` (s(t) and KL(t))."""

    component: ClassVar[str] = "scorer"

    window: int = setting(
        64,
        "W: number of earlier embeddings whose per-dimension mean and standard deviation "
        "form the predictive Gaussian (paper: 64).",
        low=2,
        high=100_000,
        read_only=True,
    )
    eps: float = setting(
        1e-6,
        "Floor of the per-dimension standard deviation, so constant dimensions do not "
        "divide by zero.",
        low=1e-12,
        high=1.0,
        read_only=True,
    )


@dataclass(frozen=True)
class GateConfig(ComponentConfig):
    """Settings of the :class:`~surprise_memory.surprise.gate.SurpriseGate` (τ, peaks, NMS)."""

    component: ClassVar[str] = "gate"

    gamma: float = setting(
        1.0,
        "gamma: robust threshold tau = median(s) + gamma * 1.4826 * MAD(s) (paper: 1.0; higher "
        "= fewer events).",
        low=0.0,
        high=100.0,
    )
    history: int = setting(
        3000,
        "Scores kept for the running median and MAD (oldest out first); 3000 = 5 min at 10 Hz.",
        low=3,
        high=1_000_000,
        read_only=True,
    )
    warmup: int = setting(
        32,
        "Scores needed in the history before the gate may trigger (tau is NaN before).",
        low=3,
        high=1_000_000,
        read_only=True,
    )
    nms_seconds: float = setting(
        1.0,
        "Non-maximum suppression radius in seconds: a peak is kept only if no score within "
        "this time before or after it is higher. It is also the gate's decision delay.",
        low=0.0,
        high=3600.0,
        read_only=True,
    )

    def validate(self) -> None:
        """Warm-up must fit in the history."""
        if self.warmup > self.history:
            raise ConfigError(
                f"warmup={self.warmup}: must be <= history={self.history} "
                "(the gate could never leave warm-up)"
            )


@dataclass(frozen=True)
class HabituationConfig(ComponentConfig):
    """Habituation: gate candidates that resemble recently kept ones are suppressed (off: paper)."""

    component: ClassVar[str] = "habituation"

    habituation: bool = setting(
        False,
        "Suppress gate candidates whose latent change z - mu resembles that of recently kept "
        "events (beyond the paper; off = the paper's gate exactly).",
    )
    habituation_similarity: float = setting(
        0.5,
        "theta: a candidate is suppressed when max over remembered events of cos(d, d_k) * "
        "exp(-dt/T) * exp(-dist/R) reaches it (d = z - mu at the peak; 1 = only identical "
        "changes).",
        low=0.0,
        high=1.0,
    )
    habituation_recovery_seconds: float = setting(
        600.0,
        "T: time constant in seconds over which habituation to a remembered event fades.",
        low=1.0,
        high=1e7,
    )
    habituation_radius_m: float = setting(
        0.0,
        "R: distance in metres over which habituation fades with the robot's displacement "
        "between the two events (0 = place ignored; also ignored when either pose is unknown).",
        low=0.0,
        high=1e6,
    )
    habituation_memory: int = setting(
        32,
        "Most recent kept events remembered for habituation (cost per candidate: this many "
        "dot products of size D).",
        low=1,
        high=100_000,
        read_only=True,
    )


@dataclass(frozen=True)
class BudgetConfig(ComponentConfig):
    """Episode-rate budget: at most so many events per sliding window, the most surprising kept."""

    component: ClassVar[str] = "budget"

    max_episodes_per_minute: float = setting(
        0.0,
        "Rate cap: at most max_episodes_per_minute * budget_window_seconds / 60 events in any "
        "budget window; over it, the least surprising candidates are dropped. 0 = no cap.",
        low=0.0,
        high=6000.0,
    )
    budget_window_seconds: float = setting(
        60.0,
        "Length in seconds of the sliding window the rate cap counts events in.",
        low=1.0,
        high=86_400.0,
    )
    budget_delay_seconds: float = setting(
        5.0,
        "How long after its peak a candidate waits, when the cap is on, so that a more "
        "surprising later one can take its place; adds to the gate's delay (the memory "
        "node's frame_history_seconds must cover it).",
        low=0.0,
        high=600.0,
    )

    def validate(self) -> None:
        """A window must allow at least one event."""
        rate = self.max_episodes_per_minute
        if rate > 0 and rate * self.budget_window_seconds / 60.0 < 1.0:
            raise ConfigError(
                f"max_episodes_per_minute={rate} with budget_window_seconds="
                f"{self.budget_window_seconds}: the window must allow at least one event "
                "(raise either)"
            )


@dataclass(frozen=True)
class BaselineConfig(ComponentConfig):
    """Which gate decides events offline: the paper's surprise gate or an equal-budget baseline."""

    component: ClassVar[str] = "baseline"

    gate_mode: str = setting(
        "surprise",
        "surprise: the paper's gate; uniform: one event per interval of 60 / "
        "baseline_episodes_per_minute seconds, at its middle; random: one at a seeded random "
        "time in each such interval (the paper's baselines at equal budget).",
        choices=("surprise", "uniform", "random"),
        read_only=True,
    )
    baseline_episodes_per_minute: float = setting(
        0.0,
        "Event rate of the uniform and random gates (set by --budget-from STORE to that "
        "run's episodes per minute).",
        low=0.0,
        high=6000.0,
        read_only=True,
    )
    baseline_seed: int = setting(
        0, "Seed of the random gate's event times.", low=0, high=2**31 - 1, read_only=True
    )

    def validate(self) -> None:
        """The baselines need a rate."""
        if self.gate_mode != "surprise" and self.baseline_episodes_per_minute <= 0:
            raise ConfigError(
                f"gate_mode={self.gate_mode!r} needs baseline_episodes_per_minute > 0 "
                "(or --budget-from STORE to copy a surprise run's rate)"
            )
