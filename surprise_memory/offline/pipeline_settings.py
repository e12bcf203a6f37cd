"""Every setting of an offline run, one config per component: :class:`PipelineSettings`.

The offline path (:mod:`surprise_memory.offline.pipeline`) reads the same component configs
as the live nodes (:data:`PIPELINE_CONFIGS`), so a setting has one name and one default
on the command line, in YAML and on a node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from surprise_memory.config import (
    BaselineConfig,
    BudgetConfig,
    CamerasConfig,
    ComponentConfig,
    EmbedderConfig,
    EncoderConfig,
    EpisodeConfig,
    GateConfig,
    HabituationConfig,
    PlacesConfig,
    PoseConfig,
    ScorerConfig,
    StoreConfig,
)

__all__ = ["PIPELINE_CONFIGS", "PipelineSettings"]

PIPELINE_CONFIGS: tuple[type[ComponentConfig], ...] = (
    EncoderConfig,
    ScorerConfig,
    GateConfig,
    HabituationConfig,
    BudgetConfig,
    BaselineConfig,
    EpisodeConfig,
    EmbedderConfig,
    StoreConfig,
    PoseConfig,
    CamerasConfig,
    PlacesConfig,
)
"""The component configs whose settings the offline pipeline reads."""


@dataclass(frozen=True)
class PipelineSettings:
    """Every setting of an offline run, one config per component (defaults = node defaults)."""

    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    scorer: ScorerConfig = field(default_factory=ScorerConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    habituation: HabituationConfig = field(default_factory=HabituationConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    embedder: EmbedderConfig = field(default_factory=EmbedderConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    pose: PoseConfig = field(default_factory=PoseConfig)
    cameras: CamerasConfig = field(default_factory=CamerasConfig)
    places: PlacesConfig = field(default_factory=PlacesConfig)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> PipelineSettings:
        """Build from a flat ``{setting name: value}`` mapping (CLI options, YAML).

        Raises:
            ConfigError: A value is invalid, or a name belongs to no pipeline setting.

        """
        from surprise_memory.config import ConfigError

        known = {f.name for c in PIPELINE_CONFIGS for f in dataclasses.fields(c)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown settings: {', '.join(unknown)}")
        return cls(
            encoder=EncoderConfig.from_mapping(values),
            scorer=ScorerConfig.from_mapping(values),
            gate=GateConfig.from_mapping(values),
            habituation=HabituationConfig.from_mapping(values),
            budget=BudgetConfig.from_mapping(values),
            baseline=BaselineConfig.from_mapping(values),
            episode=EpisodeConfig.from_mapping(values),
            embedder=EmbedderConfig.from_mapping(values),
            store=StoreConfig.from_mapping(values),
            pose=PoseConfig.from_mapping(values),
            cameras=CamerasConfig.from_mapping(values),
            places=PlacesConfig.from_mapping(values),
        )

    def as_dict(self) -> dict[str, dict[str, Any]]:
        """``{component: {setting: value}}`` for the run record."""
        return {
            "encoder": self.encoder.as_dict(),
            "scorer": self.scorer.as_dict(),
            "gate": self.gate.as_dict(),
            "habituation": self.habituation.as_dict(),
            "budget": self.budget.as_dict(),
            "baseline": self.baseline.as_dict(),
            "episode": self.episode.as_dict(),
            "embedder": self.embedder.as_dict(),
            "store": self.store.as_dict(),
            "pose": self.pose.as_dict(),
            "cameras": self.cameras.as_dict(),
            "places": self.places.as_dict(),
        }
