"""Conversions between ROS messages and core types: stamps, poses, images, stored records.

A stored record goes out with its kind and, where asked, its place status
(:func:`episode_to_msg`), and comes back through :func:`record_kind_from_msg` and
:func:`place_status_from_msg`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose as PoseMsg

from surprise_memory.errors import InputError
from surprise_memory.memory.places import EPISODE, RECORD_KINDS, PlaceStatus
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.store import EpisodeRecord
from surprise_memory.msg import Episode
from surprise_memory.stamps import split_ns, stamp_to_ns

__all__ = [
    "episode_to_msg",
    "image_msg_from_rgb",
    "jpeg_msgs",
    "ns_to_time",
    "place_status_from_msg",
    "pose_from_msg",
    "pose_to_msg",
    "record_kind_from_msg",
    "time_to_ns",
]


def time_to_ns(stamp: Time) -> int:
    """builtin_interfaces/Time -> int nanoseconds."""
    return stamp_to_ns(stamp)


def ns_to_time(ns: int) -> Time:
    """Int nanoseconds -> builtin_interfaces/Time (negative clamps to zero)."""
    sec, nanosec = split_ns(ns)
    return Time(sec=sec, nanosec=nanosec)


def pose_to_msg(pose: Pose) -> PoseMsg:
    """Core Pose -> geometry_msgs/Pose (the frame goes into the enclosing header)."""
    msg = PoseMsg()
    msg.position.x, msg.position.y, msg.position.z = pose.x, pose.y, pose.z
    o = msg.orientation
    o.x, o.y, o.z, o.w = pose.qx, pose.qy, pose.qz, pose.qw
    return msg


def pose_from_msg(msg: PoseMsg, frame_id: str) -> Pose:
    """geometry_msgs/Pose in ``frame_id`` -> core Pose."""
    p, o = msg.position, msg.orientation
    return Pose(p.x, p.y, p.z, o.x, o.y, o.z, o.w, frame_id)


def image_msg_from_rgb(rgb: Any, stamp_ns: int = 0, frame_id: str = "") -> Any:
    """An (H, W, 3) uint8 RGB array -> sensor_msgs/Image (rgb8)."""
    import numpy as np
    from sensor_msgs.msg import Image

    arr = np.ascontiguousarray(rgb, dtype=np.uint8)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 RGB array, got shape {arr.shape}")
    msg = Image(height=arr.shape[0], width=arr.shape[1], encoding="rgb8", is_bigendian=0)
    msg.step = arr.shape[1] * 3
    msg.data = arr.tobytes()
    msg.header.stamp = ns_to_time(stamp_ns)
    msg.header.frame_id = frame_id
    return msg


def jpeg_msgs(jpegs: Sequence[bytes], stamps_ns: Sequence[int], frame_id: str) -> list[Any]:
    """Stored JPEG bytes -> sensor_msgs/CompressedImage (format ``jpeg``), sent as they are.

    Args:
        jpegs: One JPEG per frame.
        stamps_ns: Each frame's stamp, int ns (pairs with ``jpegs``; the shorter one ends it).
        frame_id: The ``frame_id`` of every message.

    """
    from sensor_msgs.msg import CompressedImage

    out = []
    for data, stamp in zip(jpegs, stamps_ns, strict=False):
        image = CompressedImage(format="jpeg", data=data)
        image.header.stamp = ns_to_time(stamp)
        image.header.frame_id = frame_id
        out.append(image)
    return out


def episode_to_msg(
    record: EpisodeRecord, jpegs: Sequence[bytes] = (), place_status: PlaceStatus | None = None
) -> Episode:
    """A stored record (a surprise episode or a place keyframe) as a surprise_memory/Episode.

    Args:
        record: The record; its ``kind`` and ``place_key`` go with it.
        jpegs: Its stored JPEG bytes, one per frame, sent as they are (``CompressedImage``,
            format ``jpeg``, each with its frame's stamp); empty = no images.
        place_status: Whether its place still looks so, where the retrieval asked for it;
            None = not asked or no place (``place_status_valid`` false).

    """
    msg = Episode(
        id=record.id,
        robot_id=record.robot_id,
        start=ns_to_time(record.start_ns),
        end=ns_to_time(record.end_ns),
        pose=pose_to_msg(record.pose),
        pose_valid=record.pose_valid,
        surprise=record.surprise,
        threshold=record.threshold,
        frame_stamps=[ns_to_time(t) for t in record.frame_stamps_ns],
        frame_uris=list(record.frame_paths),
        camera=record.camera.name,
        camera_frame_id=record.camera.frame_id,
        camera_pose_valid=record.camera.pose is not None,
        pose_sigma_m=record.pose_trust.sigma_m or 0.0,
        pose_sigma_valid=record.pose_trust.sigma_m is not None,
        map_id=record.pose_trust.map_id,
        kind=record.kind,
        place_key=record.place_key,
    )
    _fill_place_status(msg, place_status)
    if record.camera.pose is not None:
        msg.camera_pose = pose_to_msg(record.camera.pose)
    else:
        msg.camera_pose.orientation.w = 1.0
    msg.header.stamp = ns_to_time(record.stamp_ns)
    msg.header.frame_id = record.pose.frame_id
    msg.frames = jpeg_msgs(jpegs, record.frame_stamps_ns, record.pose.frame_id)
    return msg


_STILL_THERE_CODE = {
    None: Episode.STILL_THERE_UNKNOWN,
    True: Episode.STILL_THERE_YES,
    False: Episode.STILL_THERE_NO,
}
_STILL_THERE = {code: value for value, code in _STILL_THERE_CODE.items()}


def _fill_place_status(msg: Episode, status: PlaceStatus | None) -> None:
    """Set the message's place status fields (unset and invalid for None)."""
    msg.place_status_valid = status is not None
    if status is None:  # the fields stay at their zeros (no NaN on the episodes topic)
        return
    msg.place_status_key = status.place_key
    msg.last_seen = ns_to_time(status.last_seen_ns)
    msg.view_id = status.view_id or ""
    msg.view_similarity = math.nan if status.similarity is None else status.similarity
    msg.still_there = _STILL_THERE_CODE[status.still_there]


def place_status_from_msg(msg: Episode) -> PlaceStatus | None:
    """An Episode message's place status; None when it has none (not asked, or no place).

    A node before interface version 7 sends no status: ``place_status_valid`` reads false.

    Raises:
        InputError: ``still_there`` is none of the STILL_THERE_* values.

    """
    if not msg.place_status_valid:
        return None
    if msg.still_there not in _STILL_THERE:
        raise InputError(
            f"Episode {msg.id}: still_there={msg.still_there} is none of "
            f"{sorted(_STILL_THERE)} (UNKNOWN, YES, NO)"
        )
    similarity = float(msg.view_similarity)
    return PlaceStatus(
        place_key=msg.place_status_key,
        last_seen_ns=time_to_ns(msg.last_seen),
        similarity=similarity if math.isfinite(similarity) else None,
        still_there=_STILL_THERE[msg.still_there],
        view_id=msg.view_id or None,
    )


def record_kind_from_msg(msg: Episode) -> str:
    """An Episode message's record kind: ``"episode"`` or ``"place"``.

    Empty (a node before interface version 7, which served surprise episodes only) reads
    as an episode.

    Raises:
        InputError: Any other kind (a node newer than this client, or a broken one).

    """
    kind = str(msg.kind) or EPISODE
    if kind not in RECORD_KINDS:
        raise InputError(f"Episode {msg.id}: kind={kind!r} is none of {', '.join(RECORD_KINDS)}")
    return kind
