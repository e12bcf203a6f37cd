"""The robot's cameras: one setting, ``cameras``, read into one :class:`CameraSpec` each.

``cameras`` is a comma-separated list; empty (the default) is today's one camera: no name,
the nodes' ``image`` input. Each entry is a name, optionally followed by ``:key=value``
fields::

    front,left,rear
    front:topic=/front/image_raw:frame=front_optical:yaw=0, rear:topic=/rear/image_raw:yaw=180

* ``topic``: the camera's image topic; default ``<name>/image``, relative to the node
  (remappable: the launch file remaps it onto ``<name>_image_topic``).
* ``frame``: the camera's optical frame (z forward, x right, y down, as REP 103 has
  image frames); default the image header's ``frame_id``.
* ``yaw``: degrees, the direction the camera looks, about the robot frame's z axis (0 =
  forward, 90 = left); used where tf does not know the camera's mounting (tf2_ros not
  installed, no ``/tf_static`` for the camera): the camera's pose is then the robot's,
  turned by it. Omitted: only tf gives the camera's pose.

A name is a letter then letters, digits or ``_`` (at most 32): it is part of topic, launch
argument and diagnostics names. Parsing is ROS-free and checks everything once; the nodes,
the scorer and the offline command read the same :class:`CameraSpec` tuple.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import ClassVar

from surprise_memory.config.schema import ComponentConfig, setting
from surprise_memory.errors import ConfigError

__all__ = ["CAMERA_NAME_PATTERN", "CameraSpec", "CamerasConfig", "parse_cameras"]

CAMERA_NAME_PATTERN = r"[A-Za-z][A-Za-z0-9_]{0,31}"
"""What a camera name may be (it becomes part of topic and parameter names)."""

_NAME_RE = re.compile(CAMERA_NAME_PATTERN)
_TOPIC_RE = re.compile(r"[~/A-Za-z_{][A-Za-z0-9_/~{}]*")
_FRAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")
_FIELDS = ("topic", "frame", "yaw")
_YAW_LIMIT = 360.0


@dataclass(frozen=True)
class CameraSpec:
    """One camera of the robot.

    Attributes:
        name: Its name; "" = the one unnamed camera (``cameras`` empty).
        topic: The image topic the nodes subscribe (``image`` for the unnamed camera,
            ``<name>/image`` when none is given; relative names are remappable).
        frame: Its optical frame; "" = the image header's ``frame_id``.
        yaw_deg: Where it looks about the robot's z axis, degrees; None = unknown (only
            tf gives its pose).

    """

    name: str = ""
    topic: str = "image"
    frame: str = ""
    yaw_deg: float | None = None

    @property
    def label(self) -> str:
        """How messages name it: ``camera 'front'``, or ``the camera`` when unnamed."""
        return f"camera {self.name!r}" if self.name else "the camera"

    @property
    def prefix(self) -> str:
        """Its diagnostics keys' prefix: ``front.`` (empty for the unnamed camera)."""
        return f"{self.name}." if self.name else ""


def _entry(text: str) -> CameraSpec:
    name, *fields = (part.strip() for part in text.split(":"))
    if not _NAME_RE.fullmatch(name):
        raise ConfigError(
            f"cameras: camera name {name!r}: use a letter, then letters, digits or '_' (at "
            "most 32); e.g. cameras: front,left,rear"
        )
    values: dict[str, str] = {}
    for field in fields:
        key, eq, value = (s.strip() for s in field.partition("="))
        if not eq or key not in _FIELDS:
            raise ConfigError(
                f"cameras: camera {name!r}: {field!r} is not one of {', '.join(_FIELDS)} "
                "given as key=value (e.g. front:topic=/front/image_raw:frame=front_optical)"
            )
        if key in values:
            raise ConfigError(f"cameras: camera {name!r} gives {key} twice")
        values[key] = value
    topic = values.get("topic", f"{name}/image")
    if not _TOPIC_RE.fullmatch(topic) or "//" in topic or topic.endswith("/"):
        raise ConfigError(f"cameras: camera {name!r}: {topic!r} is not a ROS topic name")
    frame = values.get("frame", "")
    if "frame" in values and not _FRAME_RE.fullmatch(frame):
        raise ConfigError(
            f"cameras: camera {name!r}: frame {frame!r}: use letters, digits, '_', '.', '/', '-'"
        )
    yaw: float | None = None
    if "yaw" in values:
        try:
            yaw = float(values["yaw"])
        except ValueError:
            yaw = math.nan
        if not math.isfinite(yaw) or abs(yaw) > _YAW_LIMIT:
            raise ConfigError(
                f"cameras: camera {name!r}: yaw={values['yaw']!r}: degrees in "
                f"-{_YAW_LIMIT:g}..{_YAW_LIMIT:g}"
            )
    return CameraSpec(name, topic, frame, yaw)


def parse_cameras(text: str) -> tuple[CameraSpec, ...]:
    """The cameras a ``cameras`` value names (see the module doc).

    Args:
        text: The setting's value.

    Returns:
        One spec per camera, in the order given; one unnamed camera for an empty value.

    Raises:
        ConfigError: An entry breaks the grammar, a name repeats, or two cameras share
            a topic.

    """
    entries = [e.strip() for e in text.split(",")]
    if not any(entries):
        return (CameraSpec(),)
    if not all(entries):
        raise ConfigError(f"cameras={text!r}: an empty entry between commas")
    specs = tuple(_entry(e) for e in entries)
    for attr in ("name", "topic"):
        values = [getattr(s, attr) for s in specs]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ConfigError(f"cameras={text!r}: {attr} {', '.join(twice)} given twice")
    return specs


@dataclass(frozen=True)
class CamerasConfig(ComponentConfig):
    """Which cameras the nodes read (one, unnamed, unless ``cameras`` names several)."""

    component: ClassVar[str] = "cameras"

    cameras: str = setting(
        "",
        "The robot's cameras, comma-separated: name[:topic=T][:frame=F][:yaw=DEG] each "
        "(e.g. front,left,rear). Empty = one unnamed camera on the node's `image` input. "
        "A camera's topic defaults to <name>/image (the launch file remaps it onto "
        "<name>_image_topic), its frame to the image header's frame_id; yaw (degrees, 0 = "
        "forward, 90 = left) gives its viewing direction where tf does not know its "
        "mounting. One encoder batches all cameras; each has its own surprise and gate.",
        read_only=True,
    )

    def validate(self) -> None:
        """The value must parse (:func:`parse_cameras`)."""
        parse_cameras(self.cameras)

    @property
    def specs(self) -> tuple[CameraSpec, ...]:
        """The cameras, one :class:`CameraSpec` each."""
        return parse_cameras(self.cameras)

    def spec(self, name: str) -> CameraSpec | None:
        """The camera named ``name`` (None when it is not one of them)."""
        return next((s for s in self.specs if s.name == name), None)
