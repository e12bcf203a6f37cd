"""Node parameters from the one config schema: declaration with descriptors, validation."""

from __future__ import annotations

import math
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.node import Node
from rclpy.parameter import Parameter

from surprise_memory.config import ComponentConfig, Setting, settings_of
from surprise_memory.errors import ConfigError

__all__ = ["declare_settings", "settings_change_validator"]


def _descriptor(spec: Setting) -> ParameterDescriptor:
    desc = ParameterDescriptor(
        name=spec.name, description=spec.description, read_only=spec.read_only
    )
    if spec.type is float and (spec.low is not None or spec.high is not None):
        desc.floating_point_range = [
            FloatingPointRange(
                from_value=float(spec.low if spec.low is not None else -math.inf),
                to_value=float(spec.high if spec.high is not None else math.inf),
                step=0.0,
            )
        ]
    elif spec.type is int and (spec.low is not None or spec.high is not None):
        desc.integer_range = [
            IntegerRange(
                from_value=int(spec.low if spec.low is not None else -(2**63)),
                to_value=int(spec.high if spec.high is not None else 2**63 - 1),
                step=1,
            )
        ]
    if spec.choices:
        desc.additional_constraints = "one of: " + ", ".join(spec.choices)
    return desc


def declare_settings(node: Node, *config_types: type[ComponentConfig]) -> dict[str, Any]:
    """Declare every setting of the given configs as a parameter; return their values.

    Each parameter gets the setting's default, type, description, range and read-only flag
    (``ros2 param describe`` shows them). Values come from the params file / command line.

    Raises:
        ConfigError: A parameter was given a value of the wrong type.

    """
    values: dict[str, Any] = {}
    for cls in config_types:
        for spec in settings_of(cls):
            try:
                param = node.declare_parameter(spec.name, spec.default, _descriptor(spec))
            except Exception as exc:  # rclpy raises several types for a bad override
                raise ConfigError(f"parameter {spec.name}: {exc}") from exc
            values[spec.name] = param.value
    return values


def settings_change_validator(
    *config_types: type[ComponentConfig],
) -> Any:
    """A parameter callback that validates changes with the config's own rules."""
    specs = {s.name: s for cls in config_types for s in settings_of(cls)}

    def validate(params: list[Parameter[Any]]) -> SetParametersResult:
        for p in params:
            spec = specs.get(p.name)
            if spec is None:
                continue
            try:
                spec.check(p.value)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    return validate
