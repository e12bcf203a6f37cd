"""An episode's camera in the stores' rows: its columns, their values, the check of an add.

Both backends keep an episode's :class:`~surprise_memory.memory.camera_view.CameraView` in
the same eleven columns of ``episodes`` (SQLite schema 6, PostgreSQL schema 5): the
camera's name and optical frame, then its pose at the trigger (validity, position,
orientation, frame). A store older than cameras gets them empty: one unnamed camera whose
pose is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from surprise_memory.config import CAMERA_NAME_PATTERN
from surprise_memory.errors import InputError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose import Pose

__all__ = [
    "CAMERA_COLUMNS",
    "CAMERA_COLUMN_TYPES",
    "camera_from_row",
    "camera_values",
    "check_camera",
    "pose_values",
]

CAMERA_COLUMN_TYPES = (
    ("camera", "text", "''"),
    ("camera_frame_id", "text", "''"),
    ("camera_pose_valid", "bool", "0"),
    ("cam_x", "float", "0"),
    ("cam_y", "float", "0"),
    ("cam_z", "float", "0"),
    ("cam_qx", "float", "0"),
    ("cam_qy", "float", "0"),
    ("cam_qz", "float", "0"),
    ("cam_qw", "float", "1"),
    ("camera_pose_frame_id", "text", "''"),
)
"""(column, its type (text, bool or float), default of the rows stored before cameras), in
row order; each backend's schema names the types in its own SQL."""

CAMERA_COLUMNS = ", ".join(name for name, _, _ in CAMERA_COLUMN_TYPES)
"""The camera's columns, comma-separated, in row order."""

_NAME_RE = re.compile(CAMERA_NAME_PATTERN)
_FRAME_MAX = 256


def camera_values(camera: CameraView) -> tuple[object, ...]:
    """A camera's row values, in :data:`CAMERA_COLUMNS` order."""
    p = camera.pose
    pose = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, "") if p is None else pose_values(p)
    return (camera.name, camera.frame_id, p is not None, *pose)


def pose_values(p: Pose) -> tuple[float | str, ...]:
    """A pose's row values as both stores keep them: x, y, z, qx, qy, qz, qw, frame."""
    return (
        float(p.x),
        float(p.y),
        float(p.z),
        float(p.qx),
        float(p.qy),
        float(p.qz),
        float(p.qw),
        p.frame_id,
    )


def camera_from_row(values: Sequence[object]) -> CameraView:
    """The camera of a row's :data:`CAMERA_COLUMNS` values (as :func:`camera_values` gives)."""
    name, frame, valid, x, y, z, qx, qy, qz, qw, pose_frame = values
    pose = None
    if valid:
        pose = Pose(
            float(x),  # type: ignore[arg-type]
            float(y),  # type: ignore[arg-type]
            float(z),  # type: ignore[arg-type]
            float(qx),  # type: ignore[arg-type]
            float(qy),  # type: ignore[arg-type]
            float(qz),  # type: ignore[arg-type]
            float(qw),  # type: ignore[arg-type]
            str(pose_frame),
        )
    return CameraView(str(name), str(frame), pose)


def check_camera(camera: CameraView) -> CameraView:
    """Check the camera of an add: a name (or "", unnamed), a frame name, a finite pose.

    Returns:
        The camera.

    Raises:
        InputError: Not a :class:`CameraView`, a name that breaks the cameras' rule, a
            frame that is not a short printable string, or a pose that is not finite or
            whose rotation is zero.

    """
    if not isinstance(camera, CameraView):
        raise InputError(f"camera is a {type(camera).__name__}: expected a CameraView")
    if not isinstance(camera.name, str) or (camera.name and not _NAME_RE.fullmatch(camera.name)):
        raise InputError(
            f"camera name {camera.name!r}: a letter, then letters, digits or '_' (at most "
            '32); "" = the one unnamed camera'
        )
    frame = camera.frame_id
    if not isinstance(frame, str) or len(frame) > _FRAME_MAX or not frame.isprintable():
        raise InputError(f"camera frame {frame!r}: must be a printable string (at most 256)")
    pose = camera.pose
    if pose is not None:
        if not isinstance(pose, Pose) or not pose.is_finite():
            raise InputError(f"camera pose {pose}: must be a finite Pose or None")
        if pose.qx**2 + pose.qy**2 + pose.qz**2 + pose.qw**2 == 0.0:
            raise InputError("camera pose orientation is the zero quaternion")
    return camera
