"""Which camera saw an episode, where it was and where it looked: :class:`CameraView`.

A camera's frame is its *optical* frame, as REP 103 has image frames: z forward (the
viewing direction), x right, y down. Its pose at an episode's trigger comes from tf
(``map <- optical frame``: the robot's pose and the mounting in one lookup) or, where tf
does not know the mounting, from the robot's pose turned by the camera's configured yaw
(:func:`mounting_pose`, the ``cameras`` setting's ``yaw=``). What a navigation goal or a
map arrow needs of it is the viewing direction on the ground, :func:`viewing_yaw`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from surprise_memory.memory.pose import Pose, compose

__all__ = [
    "OPTICAL_IN_BODY",
    "CameraView",
    "mounting_pose",
    "viewing_yaw",
    "yaw_pose",
]

OPTICAL_IN_BODY = Pose(qx=-0.5, qy=0.5, qz=-0.5, qw=0.5)
"""A camera's optical frame (z forward, x right, y down) in its body frame (x forward, y
left, z up): the fixed turn between ``camera_link`` and ``camera_optical_frame``."""

_MIN_HORIZONTAL = 1e-6  # below this the optical axis is vertical: no direction on the ground


@dataclass(frozen=True)
class CameraView:
    """The camera of an episode.

    Attributes:
        name: The camera's name (the ``cameras`` setting); "" = the one unnamed camera
            (a one-camera robot, or a store older than cameras).
        frame_id: Its optical frame (the images' ``frame_id``, or the one configured);
            "" = unknown.
        pose: The optical frame's pose at the trigger, in a fixed frame
            (``pose.frame_id``, the robot pose's); None = unknown.

    """

    name: str = ""
    frame_id: str = ""
    pose: Pose | None = None

    @property
    def yaw(self) -> float | None:
        """Where the camera looked, on the ground (:func:`viewing_yaw`); None = unknown."""
        return None if self.pose is None else viewing_yaw(self.pose)


def viewing_yaw(pose: Pose) -> float | None:
    """The heading, in radians about its frame's z axis, of an optical frame's z axis.

    The direction the camera looked, projected on the ground plane: a camera pitched
    down still has the heading it faced.

    Args:
        pose: An optical frame's pose.

    Returns:
        ``atan2(y, x)`` of the optical axis, or None when it points straight up or down
        (no direction on the ground).

    """
    ax, ay, _ = compose(Pose(qx=pose.qx, qy=pose.qy, qz=pose.qz, qw=pose.qw), Pose(z=1.0)).position
    if math.hypot(ax, ay) < _MIN_HORIZONTAL:
        return None
    return math.atan2(ay, ax)


def yaw_pose(x: float, y: float, z: float, yaw: float, frame_id: str = "") -> Pose:
    """A pose at (x, y, z) turned by ``yaw`` radians about z (level: no roll or pitch)."""
    return Pose(x, y, z, 0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0), frame_id)


def mounting_pose(yaw_deg: float) -> Pose:
    """The optical frame of a level camera at the robot frame's origin, looking ``yaw_deg``.

    What the ``cameras`` setting's ``yaw=`` stands for where tf has no mounting: the
    camera's position is taken as the robot's (its offset of centimetres to a metre is
    left out) and its axis as level.

    Args:
        yaw_deg: Degrees about the robot's z axis; 0 = forward, 90 = left.

    Returns:
        ``robot frame <- optical frame``.

    """
    return compose(yaw_pose(0.0, 0.0, 0.0, math.radians(yaw_deg)), OPTICAL_IN_BODY)
