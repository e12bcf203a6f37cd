"""Node parameters from the one config schema: declaration with descriptors, validation."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
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
from surprise_memory.errors import ConfigError, SurpriseMemoryError

__all__ = ["LiveSettings", "declare_settings", "settings_change_validator"]


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


Applier = Callable[[Any], None]
"""Applies one component's new config to the node's live objects (raises to refuse)."""


class LiveSettings:
    """A node's settings kept current: each change validated, then applied live.

    Every writable (not read-only) setting of the node's configs must belong to a config
    that has an applier: a node that declared a writable parameter it does not apply fails
    at start, so ``ros2 param set`` can never be accepted and silently ignored. A change
    is refused with a reason (``ros2 param set`` prints it) when the value is outside the
    setting's range or ``choices``, when it breaks a rule between settings (the config's
    ``validate``), or when the applier refuses it; otherwise the config rebuilt from the
    current values and the change goes to the applier. Several parameters set at once are
    all validated before any is applied.

    Args:
        node: The node (its set-parameters callback is registered here).
        values: The declared parameters' start values (:func:`declare_settings`).
        configs: The node's config classes.
        appliers: Config class -> applier, for every class with a writable setting.

    Raises:
        ConfigError: A config with writable settings has no applier.

    """

    def __init__(
        self,
        node: Node,
        values: Mapping[str, Any],
        configs: Iterable[type[ComponentConfig]],
        appliers: Mapping[type[ComponentConfig], Applier],
    ) -> None:
        self._configs = tuple(configs)
        self._owner = {s.name: cls for cls in self._configs for s in settings_of(cls)}
        self._specs = {s.name: s for cls in self._configs for s in settings_of(cls)}
        for cls in self._configs:
            writable = [s.name for s in settings_of(cls) if not s.read_only]
            if writable and cls not in appliers:
                raise ConfigError(
                    f"{node.get_name()}: {', '.join(writable)} writable but not applied live"
                )
        self._appliers = dict(appliers)
        self._values = dict(values)
        self.applied = 0
        self._node = node
        node.add_on_set_parameters_callback(self._on_set)

    def detach(self) -> None:
        """Stop applying changes (the node is cleaned up; a new configure reads them)."""
        self._node.remove_on_set_parameters_callback(self._on_set)

    def value(self, name: str) -> Any:
        """The current value of a setting."""
        return self._values[name]

    def _on_set(self, params: list[Parameter[Any]]) -> SetParametersResult:
        changed: dict[str, Any] = {}
        for p in params:
            spec = self._specs.get(p.name)
            if spec is None:  # use_sim_time, qos_overrides...: rclpy's own
                continue
            if spec.read_only:  # rclpy refuses these first; kept for a direct call
                return SetParametersResult(successful=False, reason=f"{p.name} is read-only")
            try:
                changed[p.name] = spec.check(p.value)
            except ConfigError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        if not changed:
            return SetParametersResult(successful=True)
        merged = {**self._values, **changed}
        touched = {self._owner[name] for name in changed}
        try:
            built = [(cls, cls.from_mapping(merged)) for cls in self._configs if cls in touched]
            for cls, config in built:
                self._appliers[cls](config)
        except SurpriseMemoryError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self._values = merged
        self.applied += len(changed)
        return SetParametersResult(successful=True)
