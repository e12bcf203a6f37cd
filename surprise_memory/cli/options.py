"""The command line's shared pieces: options generated from the config schema, small parsers.

Each setting ``name`` becomes ``--name-with-hyphens`` (the underscore spelling ``--name`` is
accepted too), with the setting's description, range and default in ``--help``. The
defaults are not repeated here: an option left out parses as None and the config
dataclass's default applies, so the command line, the node parameters and
``config/surprise_memory.yaml`` agree; :class:`HelpFormatter` shows that default once
(never the None the option parses to).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from surprise_memory.config import ComponentConfig, PlacesConfig, Setting, settings_of

__all__ = [
    "ALIASES",
    "EXIT_INCOMPLETE",
    "PLACE_STATUS_SETTINGS",
    "PROG",
    "HelpFormatter",
    "add_config_options",
    "add_place_status_options",
    "add_setting",
    "add_time_place_options",
    "given",
    "note",
    "option_strings",
    "place_status_config",
]

PROG = "surprise-memory"

EXIT_INCOMPLETE = 3
"""Exit status of a job of many tasks that ran, but where some failed (listed by it)."""

ALIASES = {
    "encoder_batch": ("--batch",),
    "encoder_weights": ("--weights",),
    "gate_mode": ("--gate",),  # --gate uniform|random: the paper's baselines
    "goal_standoff_meters": ("--standoff",),
    "query_device": ("--device",),  # serve: as query's --device
    "mcp_query_device": ("--device",),  # mcp: likewise
}
"""Short extra spellings of some settings' options."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every subcommand's ``--help``: each option's default said once, where it has one.

    argparse's defaults formatter appends "(default: None)" to an option that parses to
    None when left out: a setting (whose help already names the schema's default) or an
    option whose help says what its absence means.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


def option_strings(name: str) -> list[str]:
    """The spellings of a setting's option: ``--a-b`` first, then ``--a_b`` when different."""
    hyphen = "--" + name.replace("_", "-")
    return [hyphen] if "_" not in name else [hyphen, "--" + name]


def _setting_help(spec: Setting, default: Any = None) -> str:
    parts = [spec.description.replace("%", "%%")]
    if spec.low is not None or spec.high is not None:
        low = "" if spec.low is None else f"{spec.low:g}"
        high = "" if spec.high is None else f"{spec.high:g}"
        parts.append(f"[{low}..{high}]")
    value = spec.default if default is None else default
    parts.append(f"(default: {value!r})")
    return " ".join(parts)


def add_setting(
    group: argparse._ArgumentGroup,
    spec: Setting,
    *,
    extra: Sequence[str] = (),
    default: Any = None,
) -> None:
    """Add one setting as an option whose parsed default is None (= the config's default)."""
    flags = [*option_strings(spec.name), *extra]
    kwargs: dict[str, Any] = {
        "dest": spec.name,
        "default": None,
        "help": _setting_help(spec, default),
    }
    if spec.type is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
        flags = option_strings(spec.name)[:1]  # --x / --no-x
    else:
        kwargs["type"] = spec.type
        kwargs["metavar"] = spec.name.upper() if spec.choices is None else None
        if spec.choices is not None:
            kwargs["choices"] = spec.choices
    group.add_argument(*flags, **kwargs)


def add_config_options(
    parser: argparse.ArgumentParser,
    configs: Sequence[type[ComponentConfig]],
    excluded: Sequence[str] = (),
) -> None:
    """Add every setting of ``configs`` (but ``excluded``) as options, a group per config."""
    for cls in configs:
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        group = parser.add_argument_group(f"{cls.component} settings", doc)
        for spec in settings_of(cls):
            if spec.name not in excluded:
                add_setting(group, spec, extra=ALIASES.get(spec.name, ()))


def add_time_place_options(parser: argparse.ArgumentParser) -> None:
    """``--start``/``--end`` (trigger times) and ``--near``/``--near-frame``/``--radius``.

    The commands that pick episodes (``query``, ``goto``) take them alike; times parse with
    :func:`surprise_memory.stamps.parse_time`, places with
    :func:`~surprise_memory.memory.retrieval.parse_point`.
    """
    parser.add_argument("--start", help="earliest trigger time (see above)")
    parser.add_argument("--end", help="latest trigger time (see above)")
    parser.add_argument("--near", metavar="X,Y[,Z]", help="place in metres, in --near-frame")
    parser.add_argument(
        "--near-frame",
        metavar="FRAME",
        help="frame of --near (e.g. map); default: the poses' frame when they all share one",
    )
    parser.add_argument("--radius", type=float, metavar="M", help="keep episodes within M metres")


PLACE_STATUS_SETTINGS = (
    "place_status_radius_m",
    "place_status_pass_seconds",
    "place_still_there_similarity",
)
"""The places' settings that 'is it still there?' takes from a reader: the radius and the
threshold. The cells and sectors are the store's, read from its place keyframes' keys
(:func:`~surprise_memory.memory.place_status.places_as_stored`)."""


def add_place_status_options(parser: argparse.ArgumentParser) -> None:
    """Add the options of :data:`PLACE_STATUS_SETTINGS` to ``parser``, as one group.

    For the commands that say whether an episode's place still looks the same
    (``query``, ``goto``, ``serve``).
    """
    group = parser.add_argument_group(
        "'is it still there?' settings",
        "when an episode's place was last seen, and whether it still looks the same (the "
        "cells and sectors are the store's, as its place keyframes were kept)",
    )
    for spec in settings_of(PlacesConfig):
        if spec.name in PLACE_STATUS_SETTINGS:
            add_setting(group, spec)


def place_status_config(args: argparse.Namespace) -> PlacesConfig:
    """The :class:`~surprise_memory.config.PlacesConfig` of the options given.

    The settings not given keep their defaults; the values are checked against the
    schema's ranges.

    Raises:
        ConfigError: A value is out of its range.

    """
    return PlacesConfig.from_mapping(given(args, [PlacesConfig]))


def given(args: argparse.Namespace, configs: Sequence[type[ComponentConfig]]) -> dict[str, Any]:
    """The settings of ``configs`` that were given on the command line, by name."""
    names = {s.name for cls in configs for s in settings_of(cls)}
    return {k: v for k, v in vars(args).items() if k in names and v is not None}


def note(message: str) -> None:
    """Print one line about the run on standard error, prefixed with the command's name."""
    print(f"{PROG}: {message}", file=sys.stderr)
