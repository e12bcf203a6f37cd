"""Settings every live node has, and which component configs each node declares."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.cameras import CamerasConfig
from surprise_memory.config.display import DisplayConfig
from surprise_memory.config.fleet import FleetConfig
from surprise_memory.config.memory import EpisodeConfig, PoseConfig, StoreConfig
from surprise_memory.config.navigation import NavigationConfig
from surprise_memory.config.perception import CameraConfig, EmbedderConfig, EncoderConfig
from surprise_memory.config.places import PlacesConfig
from surprise_memory.config.schema import ComponentConfig, Setting, setting, settings_of
from surprise_memory.config.snapshot import SnapshotConfig
from surprise_memory.config.surprise import (
    BaselineConfig,
    BudgetConfig,
    GateConfig,
    HabituationConfig,
    ScorerConfig,
)

__all__ = ["ALL_CONFIGS", "NODE_CONFIGS", "SPLIT_NODE_CONFIGS", "NodeConfig", "iter_settings"]


@dataclass(frozen=True)
class NodeConfig(ComponentConfig):
    """Settings every live node has: its diagnostics (``/diagnostics``)."""

    component: ClassVar[str] = "node"

    autostart: bool = setting(
        True,
        "Configure and activate the managed (lifecycle) node at start; false leaves the "
        "transitions to a lifecycle manager (<node>/change_state).",
        read_only=True,
    )
    diagnostics_period_seconds: float = setting(
        5.0,
        "Seconds between two /diagnostics messages of the node (wall time); the WARN/ERROR "
        "levels judge what happened in the last period.",
        low=0.1,
        high=3600.0,
        read_only=True,
    )
    input_silent_seconds: float = setting(
        10.0,
        "Diagnostics WARN when a streaming input (camera, embeddings) delivered nothing for "
        "this many seconds (wall time): its publisher is gone or stalled.",
        low=0.1,
        high=86400.0,
    )


ALL_CONFIGS: tuple[type[ComponentConfig], ...] = (
    ScorerConfig,
    GateConfig,
    EncoderConfig,
    EmbedderConfig,
    StoreConfig,
    FleetConfig,
    PoseConfig,
    CamerasConfig,
    CameraConfig,
    EpisodeConfig,
    PlacesConfig,
    HabituationConfig,
    BudgetConfig,
    BaselineConfig,
    NavigationConfig,
    DisplayConfig,
    SnapshotConfig,
    NodeConfig,
)
"""Every component config; their field names form one flat namespace."""

SPLIT_NODE_CONFIGS: dict[str, tuple[type[ComponentConfig], ...]] = {
    "encoder_node": (NodeConfig, CamerasConfig, CameraConfig, EncoderConfig),
    "scorer_node": (
        NodeConfig,
        CamerasConfig,
        ScorerConfig,
        GateConfig,
        HabituationConfig,
        BudgetConfig,
        PoseConfig,
    ),
    "memory_node": (
        NodeConfig,
        CamerasConfig,
        CameraConfig,
        EpisodeConfig,
        EmbedderConfig,
        StoreConfig,
        FleetConfig,
        NavigationConfig,
        DisplayConfig,
        SnapshotConfig,
    ),
}
"""The configs of the three nodes of the split pipeline."""

NODE_CONFIGS: dict[str, tuple[type[ComponentConfig], ...]] = {
    **SPLIT_NODE_CONFIGS,
    # the one-process pipeline: the union, each config once
    "pipeline_node": tuple(dict.fromkeys(c for cs in SPLIT_NODE_CONFIGS.values() for c in cs)),
}
"""The component configs whose settings each ROS node declares as parameters."""


def iter_settings() -> Iterator[tuple[type[ComponentConfig], Setting]]:
    """Yield every (config class, setting) pair of the package."""
    for cls in ALL_CONFIGS:
        for spec in settings_of(cls):
            yield cls, spec
