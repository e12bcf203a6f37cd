"""How a setting is declared once and checked: :func:`setting`, :class:`Setting`, the base config.

Each component has one frozen dataclass whose fields are declared with :func:`setting`,
which records the description and allowed range once; :class:`ComponentConfig` validates
values from those declarations and names the rule a value broke.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from surprise_memory.errors import ConfigError

__all__ = ["ComponentConfig", "Setting", "setting", "settings_of"]

_META_KEY = "surprise_memory"


@dataclass(frozen=True)
class Setting:
    """The declaration of one setting: what it means and which values are allowed."""

    name: str
    type: type
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None
    read_only: bool = False

    def check(self, value: Any) -> Any:
        """Return ``value`` converted to the setting's type, or raise :class:`ConfigError`."""
        value = _coerce(self, value)
        if self.type in (int, float):
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{self.name}={value!r}: must be a finite number")
            if self.low is not None and value < self.low:
                raise ConfigError(f"{self.name}={value!r}: must be >= {self.low}")
            if self.high is not None and value > self.high:
                raise ConfigError(f"{self.name}={value!r}: must be <= {self.high}")
        if self.choices is not None and value not in self.choices:
            raise ConfigError(f"{self.name}={value!r}: must be one of {', '.join(self.choices)}")
        return value


def _coerce(spec: Setting, value: Any) -> Any:
    if spec.type is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{spec.name}={value!r}: must be true or false")
    if spec.type is int:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{spec.name}={value!r}: must be an integer")
        if isinstance(value, float) and not value.is_integer():
            raise ConfigError(f"{spec.name}={value!r}: must be an integer")
        return int(value)
    if spec.type is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{spec.name}={value!r}: must be a number")
        return float(value)
    if spec.type is str:
        if not isinstance(value, str):
            raise ConfigError(f"{spec.name}={value!r}: must be a string")
        return value
    raise ConfigError(f"{spec.name}: unsupported setting type {spec.type.__name__}")


def setting(
    default: Any,
    description: str,
    *,
    low: float | None = None,
    high: float | None = None,
    choices: Sequence[str] | None = None,
    read_only: bool = False,
) -> Any:
    """Declare a config field with its description and allowed range.

    Args:
        default: The one default of the setting.
        description: What it means, with units; shown by ``ros2 param describe`` and ``--help``.
        low: Smallest allowed value (numbers), inclusive.
        high: Largest allowed value (numbers), inclusive.
        choices: Allowed values (strings).
        read_only: True where a change at runtime would be wrong (model, window sizes).

    """
    meta = {
        "description": description,
        "low": low,
        "high": high,
        "choices": tuple(choices) if choices is not None else None,
        "read_only": read_only,
    }
    return field(default=default, metadata={_META_KEY: meta})


T = TypeVar("T", bound="ComponentConfig")


def settings_of(config_type: type[ComponentConfig]) -> list[Setting]:
    """Return the declared settings of a config class, in field order."""
    result = []
    for f in dataclasses.fields(config_type):
        meta = f.metadata.get(_META_KEY)
        if meta is None:
            raise ConfigError(f"{config_type.__name__}.{f.name} is not declared with setting()")
        type_ = {"int": int, "float": float, "bool": bool, "str": str}[str(f.type)]
        result.append(Setting(name=f.name, type=type_, default=f.default, **meta))
    return result


@dataclass(frozen=True)
class ComponentConfig:
    """Base of the component configs: validation from the declared settings."""

    component: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for spec in settings_of(type(self)):
            # frozen: write the coerced value (e.g. int 2 -> float 2.0) past __setattr__
            object.__setattr__(self, spec.name, spec.check(getattr(self, spec.name)))
        self.validate()

    def validate(self) -> None:
        """Check rules between fields; a subclass overrides it where it has such rules."""

    @classmethod
    def from_mapping(cls: type[T], values: Mapping[str, Any], *, strict: bool = False) -> T:
        """Build a config from a mapping, taking only this component's keys.

        Args:
            values: Setting names to values (node parameters, parsed YAML, CLI options).
            strict: Raise on keys that belong to no field of this config.

        Raises:
            ConfigError: A value is invalid, or (strict) a key is unknown.

        """
        names = {f.name for f in dataclasses.fields(cls)}
        if strict:
            unknown = sorted(set(values) - names)
            if unknown:
                raise ConfigError(f"unknown {cls.component} settings: {', '.join(unknown)}")
        return cls(**{k: v for k, v in values.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for reports and the store's run record)."""
        return dataclasses.asdict(self)
