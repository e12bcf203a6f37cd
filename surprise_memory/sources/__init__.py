"""Offline inputs: frames (and poses) from rosbags and video files, streamed.

A :class:`FrameSource` is an iterable of :class:`~surprise_memory.perception.frames.Frame`
in strictly increasing stamp order, read in constant memory (a two-hour bag is never loaded whole),
re-readable from the start, with bad items skipped and counted in ``stats`` instead of
raised. :func:`open_source` picks the reader from the path:

* a rosbag2 folder (``metadata.yaml``; sqlite3 or mcap storage), one of its ``.db3`` /
  ``.mcap`` files, or a ROS 1 ``.bag``: :class:`BagSource` (pure-Python ``rosbags``);
* ``.mp4 .m4v .mov .avi .mkv .webm``: :class:`VideoSource` (PyAV).

Robot poses for the episodes come from a :class:`PoseLookup`; a bag gives one with
:meth:`BagSource.pose_lookup` (odometry topic or a ``/tf`` chain).
"""

from __future__ import annotations

from pathlib import Path

from surprise_memory.errors import InputError
from surprise_memory.sources.bag import BAG_SUFFIXES, IMAGE_TYPES, BagSource
from surprise_memory.sources.bag_poses import POSE_TYPES
from surprise_memory.sources.base import FrameSource, SourceStats
from surprise_memory.sources.pose_lookup import (
    ChainedPoseLookup,
    Pose,
    PoseLookup,
    SampledPoseLookup,
)
from surprise_memory.sources.video import VIDEO_SUFFIXES, VideoSource

__all__ = [
    "BAG_SUFFIXES",
    "IMAGE_TYPES",
    "POSE_TYPES",
    "VIDEO_SUFFIXES",
    "BagSource",
    "ChainedPoseLookup",
    "FrameSource",
    "Pose",
    "PoseLookup",
    "SampledPoseLookup",
    "SourceStats",
    "VideoSource",
    "open_source",
]


def open_source(
    path: str | Path,
    image_topic: str | None = None,
    *,
    fps: float | None = None,
) -> BagSource | VideoSource:
    """Open a bag or a video file as a frame source, chosen by the path.

    Args:
        path: rosbag2 folder or storage file, ROS 1 ``.bag``, or video file.
        image_topic: Camera topic of a bag (required when it holds several image topics);
            must be ``None`` for a video.
        fps: Keep at most this many frames per second (``None``/0: all).

    Returns:
        A :class:`BagSource` or a :class:`VideoSource`.

    Raises:
        InputError: The path is missing or of no known kind, or the bag's topic choice
            fails (see :class:`BagSource`).
        ConfigError: ``fps`` is out of range.

    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"input {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if path.is_dir() or suffix in BAG_SUFFIXES:
        return BagSource(path, image_topic, fps=fps)
    if suffix in VIDEO_SUFFIXES:
        if image_topic is not None:
            raise InputError(
                f"image_topic={image_topic!r} was given for the video file {str(path)!r}; "
                "topics exist only in bags"
            )
        return VideoSource(path, fps=fps)
    raise InputError(
        f"input {str(path)!r} is of no known kind: expected a rosbag2 folder (metadata.yaml), "
        f"a {'/'.join(BAG_SUFFIXES)} file, or a video ({' '.join(VIDEO_SUFFIXES)})"
    )
