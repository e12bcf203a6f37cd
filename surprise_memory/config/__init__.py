"""One configuration schema for the whole package.

Each component has one frozen dataclass. Every field is declared with
:func:`~surprise_memory.config.schema.setting`, which records its description and its
allowed range once; from that single declaration

* ``__post_init__`` validates a value and names the rule it broke,
* the ROS nodes declare a parameter with a ``ParameterDescriptor`` (description, range,
  read-only flag),
* ``config/surprise_memory.yaml`` lists it with the same default (a test checks this),
* the offline command line builds its ``--option`` with the same name and default,
* the documentation's parameter tables are generated from it.

Field names are unique across all component configs, so one flat namespace serves the
node parameters, the YAML and the command line. The settings live beside the stage they
belong to: :mod:`~surprise_memory.config.cameras`, :mod:`~surprise_memory.config.perception`,
:mod:`~surprise_memory.config.surprise`,
:mod:`~surprise_memory.config.memory`, :mod:`~surprise_memory.config.places`,
:mod:`~surprise_memory.config.fleet`,
:mod:`~surprise_memory.config.navigation`, :mod:`~surprise_memory.config.snapshot`,
:mod:`~surprise_memory.config.display`, :mod:`~surprise_memory.config.nodes`; this module
gathers them under one import.
"""

from __future__ import annotations

from surprise_memory.config.cameras import (
    CAMERA_NAME_PATTERN,
    CamerasConfig,
    CameraSpec,
    parse_cameras,
)
from surprise_memory.config.display import DisplayConfig
from surprise_memory.config.fleet import FleetConfig
from surprise_memory.config.memory import (
    ROBOT_ID_PATTERN,
    EpisodeConfig,
    PoseConfig,
    StoreConfig,
)
from surprise_memory.config.navigation import GOAL_FACINGS, GOAL_TRANSPORTS, NavigationConfig
from surprise_memory.config.nodes import (
    ALL_CONFIGS,
    NODE_CONFIGS,
    SPLIT_NODE_CONFIGS,
    NodeConfig,
    iter_settings,
)
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
from surprise_memory.errors import ConfigError

__all__ = [
    "ALL_CONFIGS",
    "CAMERA_NAME_PATTERN",
    "GOAL_FACINGS",
    "GOAL_TRANSPORTS",
    "NODE_CONFIGS",
    "ROBOT_ID_PATTERN",
    "SPLIT_NODE_CONFIGS",
    "BaselineConfig",
    "BudgetConfig",
    "CameraConfig",
    "CameraSpec",
    "CamerasConfig",
    "ComponentConfig",
    "ConfigError",
    "DisplayConfig",
    "EmbedderConfig",
    "EncoderConfig",
    "EpisodeConfig",
    "FleetConfig",
    "GateConfig",
    "HabituationConfig",
    "NavigationConfig",
    "NodeConfig",
    "PlacesConfig",
    "PoseConfig",
    "ScorerConfig",
    "Setting",
    "SnapshotConfig",
    "StoreConfig",
    "iter_settings",
    "parse_cameras",
    "setting",
    "settings_of",
]
