"""One params file for both shapes: ``pipeline_node`` takes the split nodes' sections.

rcl gives a node only the sections of a params file that match its name (``/**/memory_node``)
or every node (``/**``). A file written for the three nodes of the split would then leave
``pipeline_node`` at its defaults: the edits made for the split would silently do nothing in
one process. The launch file therefore hands ``pipeline_node`` the sections it would read as
each of the three nodes, merged by :func:`one_process_parameters`. ROS-free (PyYAML only).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import yaml

from surprise_memory.config import SPLIT_NODE_CONFIGS, parse_cameras
from surprise_memory.errors import ConfigError

__all__ = ["camera_remappings", "one_process_parameters"]

PIPELINE_NODE = "pipeline_node"
_ORDER = (*SPLIT_NODE_CONFIGS, PIPELINE_NODE)


def _flatten(prefix: str, value: Any, into: dict[str, Any]) -> None:
    # nested parameter names (qos_overrides./topic.subscription.depth) merge key by key
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), inner, into)
    else:
        into[prefix] = value


def _rank(section: str) -> int | None:
    """Where a section applies in the merge: 0 for every node, then by node; None: not ours."""
    if section == "/**":
        return 0
    name = section.rstrip("/").rsplit("/", 1)[-1]
    return _ORDER.index(name) + 1 if name in _ORDER else None


def one_process_parameters(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parameters ``pipeline_node`` takes from a params file, as flat dotted names.

    The sections apply in this order, a later one overriding a setting an earlier one gave:
    those for every node (``/**``), then those of ``encoder_node``, ``scorer_node`` and
    ``memory_node`` (a setting two of them share, such as ``input_silent_seconds``, from
    the later), then a ``pipeline_node`` section if the file has one.

    Args:
        path: A ROS 2 params file (``<node>: {ros__parameters: {...}}`` sections).

    Returns:
        Parameter name -> value, ready for a launch_ros ``parameters`` entry.

    Raises:
        ConfigError: The file cannot be read or is not a params file.

    """
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"params file {os.fspath(path)!r}: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"params file {os.fspath(path)!r}: expected sections by node name")
    ranked = [(_rank(str(k)), str(k), v) for k, v in data.items()]
    ours = [(rank, section, body) for rank, section, body in ranked if rank is not None]
    merged: dict[str, Any] = {}
    for _, section, body in sorted(ours, key=lambda item: item[0]):  # stable: file order
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters"), dict):
            raise ConfigError(
                f"params file {os.fspath(path)!r}: section {section!r} has no "
                "ros__parameters mapping"
            )
        _flatten("", body["ros__parameters"], merged)
    return merged


def camera_remappings(
    cameras: str, image_topic: str, topic_of: Callable[[str], str | None]
) -> list[tuple[str, str]]:
    """The camera inputs' remappings the launch file gives the nodes that take frames.

    One unnamed camera (``cameras`` empty): its ``image`` input onto ``image_topic``, as
    before cameras were named. Named cameras: each one's default input ``<name>/image``
    onto the launch argument ``<name>_image_topic`` (``topic_of(name)``), else onto
    ``/<name>/image_raw``; a camera given its own ``topic=`` is not remapped.

    Args:
        cameras: The ``cameras`` value (the launch argument, else the params file's).
        image_topic: The ``image_topic`` launch argument.
        topic_of: A camera name -> its ``<name>_image_topic`` argument, None when not given.

    Returns:
        ``(from, to)`` pairs.

    Raises:
        ConfigError: ``cameras`` does not parse.

    """
    specs = parse_cameras(cameras)
    if len(specs) == 1 and not specs[0].name:
        return [("image", image_topic)]
    return [
        (spec.topic, topic_of(spec.name) or f"/{spec.name}/image_raw")
        for spec in specs
        if spec.topic == f"{spec.name}/image"
    ]
