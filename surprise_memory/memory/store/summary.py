"""One episode in brief, as a listing shows it: :class:`EpisodeSummary`.

What the memory browser's timeline and map need of every episode of a store, read by
``summaries()`` of both backends from the same columns (:data:`SUMMARY_COLUMNS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from surprise_memory.memory.camera_view import viewing_yaw
from surprise_memory.memory.pose import Pose

__all__ = ["SUMMARY_COLUMNS", "EpisodeSummary"]


class EpisodeSummary(NamedTuple):
    """One episode in brief: what a listing needs to place it on a timeline and a map.

    A named tuple, not a dataclass: a listing makes one per stored episode (10,000 and
    more), and a tuple is made several times faster.

    Attributes:
        id: Episode id.
        robot_id: The robot that recorded it.
        stamp_ns: Trigger stamp, int ns.
        surprise: Surprise s(t) of the trigger frame.
        threshold: Gate threshold tau at the trigger (NaN when unknown).
        pose_valid: Whether its pose is known.
        x: Position in metres in ``pose_frame`` (0 without a pose).
        y: Position in metres.
        z: Position in metres.
        pose_frame: The frame of its pose (e.g. ``map``; empty when unknown).
        camera: The camera that saw it ("" = the one unnamed camera).
        view_yaw: Where that camera looked, radians about z in ``pose_frame``'s ground
            plane (NaN when its pose is unknown): a map's arrow.
        kind: ``"episode"`` (a surprise episode) or ``"place"`` (a place keyframe).
        pose_sigma_m: Its pose's horizontal 1-sigma uncertainty in metres (NaN = unknown;
            :mod:`~surprise_memory.memory.pose_trust`).
        map_id: The map its pose is on ("" = unknown).

    """

    id: str
    robot_id: str
    stamp_ns: int
    surprise: float
    threshold: float
    pose_valid: bool
    x: float
    y: float
    z: float
    pose_frame: str
    camera: str = ""
    view_yaw: float = math.nan
    kind: str = "episode"
    pose_sigma_m: float = math.nan
    map_id: str = ""

    @property
    def position(self) -> tuple[float, float, float]:
        """(x, y, z) in metres."""
        return (self.x, self.y, self.z)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> EpisodeSummary:
        """From a row of the columns :data:`SUMMARY_COLUMNS` (a NULL threshold: unknown).

        Both backends' drivers give the columns' Python types already (text, int, float);
        only the NULL threshold and SQLite's 0/1 for a boolean need converting.
        """
        ep_id, robot, stamp, surprise, threshold, valid, x, y, z, frame = row[:10]
        camera, camera_valid, *q, kind, sigma, map_id = row[10:]
        yaw = None
        if camera_valid:
            yaw = viewing_yaw(Pose(qx=q[0], qy=q[1], qz=q[2], qw=q[3]))
        return cls(
            ep_id,
            robot,
            stamp,
            surprise,
            math.nan if threshold is None else threshold,
            bool(valid),
            x,
            y,
            z,
            frame,
            camera,
            math.nan if yaw is None else yaw,
            kind,
            math.nan if sigma is None else sigma,
            map_id,
        )


SUMMARY_COLUMNS = (
    "id, robot_id, stamp_ns, surprise, threshold, pose_valid, pos_x, pos_y, pos_z, "
    "pose_frame_id, camera, camera_pose_valid, cam_qx, cam_qy, cam_qz, cam_qw, kind, "
    "pose_sigma_m, map_id"
)
"""The ``episodes`` columns :meth:`EpisodeSummary.from_row` reads, in order (both backends)."""
