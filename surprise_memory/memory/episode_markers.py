"""What the stored episodes look like on a robot's display (RViz, Foxglove), without ROS.

The memory node shows its robot's newest episodes as markers (``episode_markers``); this
module decides what each marker is, and which episodes get one:

* :func:`episode_marker`: one episode -> :class:`EpisodeMarker` (an arrow at the robot's
  pose in its frame, pointing where its camera looked, level, when the camera's pose is
  known, else where the robot faced; longer and redder the further the surprise rose
  above its threshold; a label with the time, a short id and the camera's name), or None
  for an episode without a valid pose.
* :func:`surprise_level`, :func:`level_rgba`, :func:`episode_label`, :func:`short_id`:
  the pieces of a marker.
* :func:`newest_episodes`: a robot's newest episodes, at most a given number, read from
  any store backend with the ordinary retrieval query (newest trigger stamp first), page
  by page within the store's ``max_results_cap``.

The ROS messages are built from :class:`EpisodeMarker` in
:mod:`surprise_memory.nodes.episode_display`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from surprise_memory.memory.camera_view import yaw_pose
from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store.interface import EpisodeStoreBackend
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "LABEL_HEIGHT",
    "LABEL_RISE",
    "SHAFT_WIDTH",
    "EpisodeMarker",
    "episode_label",
    "episode_marker",
    "level_rgba",
    "marker_orientation",
    "newest_episodes",
    "short_id",
    "surprise_level",
]

SHORT_ID_CHARS = 6
"""Characters of an episode id in its label: the random tail of a generated id
(``ep-<stamp>-<6 hex>``), which tells apart episodes of the same second."""

SHAFT_WIDTH = 0.2
"""Width of an arrow's shaft, as a fraction of ``marker_size_m``."""

LABEL_HEIGHT = 0.4
"""Height of a label's letters, as a fraction of ``marker_size_m``."""

LABEL_RISE = 0.8
"""Height of a label's centre above the robot's position, as a fraction of ``marker_size_m``
(clear of the arrow, so two lines of text do not hide it)."""

UNKNOWN_RGBA = (0.6, 0.6, 0.6, 0.9)
"""Colour of an episode whose threshold is unknown (grey: its surprise has no scale)."""


@dataclass(frozen=True)
class EpisodeMarker:
    """One episode as a display draws it.

    Attributes:
        episode_id: The episode.
        frame_id: The frame of its pose (``map``, or ``odom`` for an odometry fallback).
        position: The robot's position at the trigger, metres, in ``frame_id``.
        orientation: Where the camera looked then (level), else the robot's orientation,
            unit quaternion (x, y, z, w).
        length_m: Length of the arrow (``marker_size_m`` at the threshold, up to twice it).
        width_m: Width and height of the arrow's shaft.
        rgba: Colour, each channel in [0, 1].
        label: Text shown above the arrow (two lines).
        label_position: Where the label is, metres, in ``frame_id``.
        label_height_m: Height of the label's letters.

    """

    episode_id: str
    frame_id: str
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    length_m: float
    width_m: float
    rgba: tuple[float, float, float, float]
    label: str
    label_position: tuple[float, float, float]
    label_height_m: float


def short_id(episode_id: str) -> str:
    """The last :data:`SHORT_ID_CHARS` characters of an episode id (the whole of a short one)."""
    return episode_id[-SHORT_ID_CHARS:]


def surprise_level(surprise: float, threshold: float) -> float | None:
    """How far the surprise rose above its threshold: 0 at tau, 1 at twice tau or more.

    Args:
        surprise: s(t) at the trigger.
        threshold: tau in force then (NaN when unknown).

    Returns:
        ``clip(s / tau - 1, 0, 1)``; None when tau is not a positive finite number or s is
        not finite (the surprise then has no scale to be drawn on).

    """
    if not (math.isfinite(threshold) and threshold > 0.0 and math.isfinite(surprise)):
        return None
    return min(max(surprise / threshold - 1.0, 0.0), 1.0)


def level_rgba(level: float | None) -> tuple[float, float, float, float]:
    """Colour of a surprise level: yellow at the threshold to red at twice it; grey if unknown."""
    if level is None:
        return UNKNOWN_RGBA
    return (1.0, 1.0 - level, 0.0, 1.0)


def episode_label(record: EpisodeRecord, origin_ns: int | None) -> str:
    """The label of an episode: its time, short id, surprise, threshold and pose trust.

    The pose's uncertainty and map are shown where they are known (:meth:`PoseTrust.brief
    <surprise_memory.memory.pose_trust.PoseTrust.brief>`).

    Times are seconds since the store's origin (its recording start), as in
    ``surprise-memory query``, the report and the agent tool; without an origin, seconds
    of the trigger stamp.

    Args:
        record: The episode.
        origin_ns: The store's time origin, int ns (None = not known).

    """
    seconds = (record.stamp_ns - (origin_ns or 0)) / NS_PER_SECOND
    tau = f"{record.threshold:.2f}" if math.isfinite(record.threshold) else "?"
    camera = f"  {record.camera.name}" if record.camera.name else ""
    trust = record.pose_trust.brief()
    return (
        f"{seconds:.1f} s  {short_id(record.id)}{camera}\n"
        f"surprise {record.surprise:.2f} (tau {tau})" + (f"  {trust}" if trust else "")
    )


def episode_marker(
    record: EpisodeRecord, origin_ns: int | None, size_m: float
) -> EpisodeMarker | None:
    """The marker of one episode, or None when it has no pose a display could place.

    Args:
        record: The episode.
        origin_ns: The store's time origin, int ns, for the label (None = not known).
        size_m: Arrow length at the threshold, metres (``marker_size_m``).

    Returns:
        The marker; None when the pose is not valid, not finite, or has no frame.

    """
    pose = record.pose
    if not record.pose_valid or not pose.frame_id or not pose.is_finite():
        return None
    level = surprise_level(record.surprise, record.threshold)
    return EpisodeMarker(
        episode_id=record.id,
        frame_id=pose.frame_id,
        position=pose.position,
        orientation=marker_orientation(record),
        length_m=size_m * (1.0 + (level or 0.0)),
        width_m=size_m * SHAFT_WIDTH,
        rgba=level_rgba(level),
        label=episode_label(record, origin_ns),
        label_position=(pose.x, pose.y, pose.z + size_m * LABEL_RISE),
        label_height_m=size_m * LABEL_HEIGHT,
    )


def marker_orientation(record: EpisodeRecord) -> tuple[float, float, float, float]:
    """Where an episode's arrow points: its camera's viewing direction, level, when known.

    The camera's pose counts when it is in the robot pose's frame and its optical axis is
    not vertical; otherwise the arrow takes the robot's orientation, as before cameras.

    Returns:
        A unit quaternion (x, y, z, w).

    """
    pose, camera = record.pose, record.camera.pose
    yaw = record.camera.yaw if camera is not None and camera.frame_id == pose.frame_id else None
    if yaw is None:
        return (pose.qx, pose.qy, pose.qz, pose.qw)
    level = yaw_pose(0.0, 0.0, 0.0, yaw)
    return (level.qx, level.qy, level.qz, level.qw)


def newest_episodes(
    store: EpisodeStoreBackend, limit: int, *, robot_id: str | None = None
) -> list[EpisodeRecord]:
    """A robot's newest surprise episodes (by trigger stamp), at most ``limit``, newest first.

    Place keyframes (kind ``place``) are left out: markers show what surprised the robot.

    Read with retrieval queries (no embedding: newest first) of at most the store's
    ``max_results_cap`` each, every page ending at the oldest stamp of the one before
    (inclusive, so episodes sharing that stamp are not skipped unless more than a page of
    them do; those already read are not repeated).

    Args:
        store: Any store backend.
        limit: Most episodes wanted (0 = none).
        robot_id: Only this robot's episodes; None = every robot's.

    Returns:
        The episodes, newest first.

    Raises:
        StoreError: The store cannot be read.

    """
    found: dict[str, EpisodeRecord] = {}
    end_ns: int | None = None
    page = store.config.max_results_cap
    while len(found) < limit:
        want = min(page, limit - len(found) + 1)  # one more: a stamp shared across pages
        query = RetrievalQuery(
            end_ns=end_ns, max_results=want, robot_id=robot_id, kinds=frozenset({EPISODE})
        )
        hits = store.retrieve(query)
        new = [h.episode for h in hits if h.episode.id not in found]
        for record in new[: limit - len(found)]:
            found[record.id] = record
        if len(hits) < want:
            break  # the store has no older episodes
        oldest = hits[-1].episode.stamp_ns
        # a page of one stamp only (a fleet's robots at the same instant): step past it
        end_ns = oldest if new else oldest - 1
        if end_ns < 1:  # 0 would mean "no end" to a query
            break
    return list(found.values())
