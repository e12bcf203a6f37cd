"""The one configuration schema: validation, unique names, and the YAML that mirrors it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from surprise_memory.config import (
    ALL_CONFIGS,
    NODE_CONFIGS,
    ConfigError,
    GateConfig,
    ScorerConfig,
    iter_settings,
    settings_of,
)

YAML = Path(__file__).resolve().parents[1] / "config" / "surprise_memory.yaml"


def test_setting_names_are_unique_across_components() -> None:
    names = [spec.name for _, spec in iter_settings()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_every_setting_has_a_description_and_its_default_is_valid() -> None:
    for cls in ALL_CONFIGS:
        cls()  # defaults pass their own validation
        for spec in settings_of(cls):
            assert len(spec.description) > 20, spec.name


def test_yaml_lists_every_node_setting_with_the_same_default() -> None:
    params = yaml.safe_load(YAML.read_text())
    for node, classes in NODE_CONFIGS.items():
        section = params[f"/**/{node}"]["ros__parameters"]
        expected = {s.name: s.default for cls in classes for s in settings_of(cls)}
        assert section == expected, node


@pytest.mark.parametrize(
    ("cls", "values", "match"),
    [
        (ScorerConfig, {"window": 1}, r"window=1: must be >= 2"),
        (ScorerConfig, {"window": 2.5}, r"window=2.5: must be an integer"),
        (ScorerConfig, {"window": True}, r"must be an integer"),
        (GateConfig, {"gamma": "high"}, r"gamma='high': must be a number"),
        (GateConfig, {"nms_seconds": float("nan")}, r"finite"),
        (GateConfig, {"warmup": 10, "history": 5}, r"warmup=10: must be <= history=5"),
    ],
)
def test_invalid_values_name_the_rule(cls: type, values: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        cls(**values)


def test_from_mapping_takes_its_own_keys_and_coerces() -> None:
    cfg = GateConfig.from_mapping({"gamma": 2, "window": 8, "history": 100.0})
    assert cfg.gamma == 2.0 and isinstance(cfg.gamma, float)
    assert cfg.history == 100 and isinstance(cfg.history, int)
    with pytest.raises(ConfigError, match="unknown gate settings: window"):
        GateConfig.from_mapping({"window": 8}, strict=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.gamma = 3.0  # type: ignore[misc]
