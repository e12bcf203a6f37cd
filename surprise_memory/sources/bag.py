"""Frames and poses from a rosbag, read with the pure-Python ``rosbags`` library (no ROS).

Reads rosbag2 folders (sqlite3 and mcap storage) and ROS 1 ``.bag`` files through
``rosbags.highlevel.AnyReader``, one message at a time: a bag is never loaded whole.

Stamps. A frame's stamp is its message's ``header.stamp`` (the capture time), not the
time the recorder received it. A zero header stamp (drivers that never set it) is
replaced by the bag's log time for that message and counted in
``stats.zero_stamp``. Bags are stored in receive order, which may differ a little from
header order (several cameras, network jitter): a small reorder buffer
(``reorder_depth`` messages) puts frames back in stamp order; a frame that still comes
too late, or repeats a stamp, is dropped and counted (``stats.out_of_order``), so the
stream's stamps strictly increase.

Pixels. Messages are converted by :func:`surprise_memory.perception.frames.rgb_from_image_msg`, the
project's one conversion (the live nodes use it too). A frame it refuses (depth or
unknown encoding, zero size, ``step``/``data`` length mismatch, compressed data that is
not a decodable JPEG or PNG) is skipped, logged as a "bad frame" with the reason, and
counted in ``stats.bad``; the stream goes on.

Poses (:meth:`BagSource.pose_lookup`): from an odometry topic (``nav_msgs/msg/Odometry``),
a ``geometry_msgs/msg/PoseStamped`` or ``PoseWithCovarianceStamped`` topic (e.g.
``/amcl_pose``), or from a ``/tf`` chain; :mod:`surprise_memory.sources.bag_poses` reads
them (how far tf goes is described there).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.typesys import Stores, get_typestore

from surprise_memory.errors import ConfigError, InputError
from surprise_memory.perception.frames import Frame, rgb_from_image_msg
from surprise_memory.sources.bag_poses import POSE_TYPES, BagPoseReader, strip_frame
from surprise_memory.sources.base import (
    SkipLog,
    SourceStats,
    Subsampler,
    check_fps,
    estimate_frames,
)
from surprise_memory.sources.pose_lookup import PoseLookup
from surprise_memory.stamps import NS_PER_SECOND, stamp_to_ns

__all__ = [
    "BAG_SUFFIXES",
    "IMAGE_TYPES",
    "BagSource",
    "bag_image_topics",
    "bag_paths",
]

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
"""Message types a camera topic may have."""

BAG_SUFFIXES = (".bag", ".db3", ".mcap")
"""Suffixes of bag files (a rosbag2 storage file is read through its folder)."""


def bag_paths(path: str | Path) -> list[Path]:
    """Return what ``AnyReader`` opens for ``path``: a rosbag2 folder or a ROS 1 bag.

    Accepts a rosbag2 folder (with ``metadata.yaml``), one of its ``.db3``/``.mcap``
    files, or a ROS 1 ``.bag`` file.

    Raises:
        InputError: The path is missing or is none of these.

    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"bag {str(path)!r} does not exist")
    if path.is_dir():
        if (path / "metadata.yaml").is_file():
            return [path]
        raise InputError(
            f"folder {str(path)!r} has no metadata.yaml: expected a rosbag2 folder "
            "(a bag written by ros2 bag record, or repaired with `ros2 bag reindex`)"
        )
    if path.suffix == ".bag":
        return [path]
    if path.suffix in {".db3", ".mcap"}:
        if (path.parent / "metadata.yaml").is_file():
            return [path.parent]
        raise InputError(
            f"{str(path)!r} is a rosbag2 storage file without a metadata.yaml beside it; "
            "expected the rosbag2 folder (`ros2 bag reindex` writes a missing metadata.yaml)"
        )
    raise InputError(
        f"{str(path)!r} is not a bag: expected a rosbag2 folder, a .db3/.mcap file in one, "
        "or a ROS 1 .bag file"
    )


def _default_typestore() -> Any:
    # used only for bags that carry no message definitions (rosbag2 before Iron)
    return get_typestore(Stores.LATEST)


def _open_reader(paths: Sequence[Path]) -> AnyReader:
    try:
        reader = AnyReader(list(paths), default_typestore=_default_typestore())
        reader.open()
    except (AnyReaderError, FileNotFoundError) as err:
        raise InputError(f"cannot read bag {', '.join(map(str, paths))}: {err}") from err
    return reader


def bag_image_topics(path: str | Path) -> list[str]:
    """The image topics of a bag, sorted (one source per camera reads each).

    Raises:
        InputError: Not a bag, or it cannot be read.

    """
    reader = _open_reader(bag_paths(path))
    try:
        return sorted(n for n, info in reader.topics.items() if info.msgtype in IMAGE_TYPES)
    finally:
        reader.close()


class BagSource:
    """Frames of one image topic of a bag, in stamp order, in constant memory.

    Args:
        path: A rosbag2 folder, one of its storage files, or a ROS 1 ``.bag``.
        image_topic: The camera topic (``sensor_msgs/msg/Image`` or ``CompressedImage``).
            Required when the bag holds several image topics; detected when it holds one.
        fps: Keep at most this many frames per second of stamps (``None``/0: all).
        reorder_depth: Messages held to put header stamps back in order (0: none).

    Raises:
        InputError: The bag cannot be read, holds no image topic, the topic is missing or
            not an image topic, or several image topics exist and none was named.
        ConfigError: ``fps`` or ``reorder_depth`` is out of range.

    """

    def __init__(
        self,
        path: str | Path,
        image_topic: str | None = None,
        *,
        fps: float | None = None,
        reorder_depth: int = 8,
    ) -> None:
        if reorder_depth < 0:
            raise ConfigError(f"reorder_depth={reorder_depth}: must be >= 0")
        self._path = Path(path)
        self._paths = bag_paths(self._path)
        self._fps = check_fps(fps)
        self._reorder_depth = int(reorder_depth)
        self._stats = SourceStats()
        reader = _open_reader(self._paths)
        try:
            self._topics = {
                name: (info.msgtype or "", int(info.msgcount))
                for name, info in reader.topics.items()
            }
            self._start_ns = int(reader.start_time) if reader.message_count else 0
            self._end_ns = int(reader.end_time) if reader.message_count else 0
        finally:
            reader.close()
        self._topic = self._select_topic(image_topic)

    def _select_topic(self, image_topic: str | None) -> str:
        images = self.image_topics()
        listing = ", ".join(
            f"{t} ({self._topics[t][0]}, {self._topics[t][1]} msgs)" for t in images
        )
        if image_topic is not None:
            if image_topic in images:
                return image_topic
            if image_topic in self._topics:
                raise InputError(
                    f"topic {image_topic!r} has type {self._topics[image_topic][0]}, expected "
                    f"{' or '.join(IMAGE_TYPES)}; image topics in the bag: {listing or 'none'}"
                )
            raise InputError(
                f"topic {image_topic!r} is not in bag {str(self._path)!r}; "
                f"image topics in it: {listing or 'none'}"
            )
        if not images:
            raise InputError(
                f"bag {str(self._path)!r} holds no image topic ({' or '.join(IMAGE_TYPES)}); "
                f"its topics: {', '.join(f'{t} ({v[0]})' for t, v in self._topics.items())}"
            )
        if len(images) > 1:
            raise InputError(
                f"bag {str(self._path)!r} holds {len(images)} image topics; choose one with "
                f"image_topic (--image-topic), or process several cameras with --cameras "
                f"NAME[:topic=T],... or --all-cameras: {listing}"
            )
        return images[0]

    # --- metadata -----------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The path given."""
        return self._path

    @property
    def image_topic(self) -> str:
        """The camera topic read."""
        return self._topic

    @property
    def stream_name(self) -> str:
        """The camera topic read (the :class:`FrameSource` name of the stream)."""
        return self._topic

    @property
    def message_type(self) -> str:
        """Type of the camera topic (``sensor_msgs/msg/Image`` or ``CompressedImage``)."""
        return self._topics[self._topic][0]

    @property
    def topics(self) -> dict[str, str]:
        """Every topic of the bag and its message type."""
        return {name: msgtype for name, (msgtype, _) in self._topics.items()}

    def image_topics(self) -> list[str]:
        """The bag's topics whose type is an image type, sorted."""
        return sorted(t for t, (msgtype, _) in self._topics.items() if msgtype in IMAGE_TYPES)

    def pose_topics(self) -> list[str]:
        """The bag's topics :meth:`pose_lookup` can use (odometry, poses, ``/tf``), sorted."""
        return sorted(
            t
            for t, (msgtype, _) in self._topics.items()
            if msgtype in POSE_TYPES and t != "/tf_static"
        )

    @property
    def start_ns(self) -> int:
        """Log time of the bag's first message (any topic)."""
        return self._start_ns

    @property
    def duration_ns(self) -> int | None:
        """Log time span of the bag (all topics)."""
        return max(0, self._end_ns - self._start_ns)

    @property
    def message_count(self) -> int:
        """Messages on the camera topic."""
        return self._topics[self._topic][1]

    @property
    def estimated_frames(self) -> int | None:
        """Frames a pass should yield after subsampling (an estimate for a progress bar)."""
        return estimate_frames(self.message_count, self.duration_ns, self._fps)

    @property
    def fps(self) -> float | None:
        """The subsampling rate, ``None`` when every frame is kept."""
        return self._fps

    @property
    def stats(self) -> SourceStats:
        """Counters of the current or last pass."""
        return self._stats

    def describe(self) -> str:
        """One line: bag, topic, type, duration and frame count."""
        seconds = (self.duration_ns or 0) / NS_PER_SECOND
        rate = f", subsampled to {self._fps:g} fps" if self._fps else ""
        return (
            f"bag {self._path} topic {self._topic} ({self.message_type}): "
            f"{self.message_count} frames over {seconds:.1f} s{rate}"
        )

    # --- frames -------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Frame]:
        """Yield the topic's frames in strictly increasing stamp order (see module doc)."""
        stats = self._stats = SourceStats()
        skips = SkipLog(f"{self._path}:{self._topic}")
        subsampler = Subsampler(self._fps)
        pending: list[tuple[int, int, Any]] = []  # heap of (stamp, arrival, message)
        arrival = itertools.count()
        last: int | None = None

        def release(stamp_ns: int, msg: Any) -> Iterator[Frame]:
            nonlocal last
            if last is not None and stamp_ns <= last:
                stats.out_of_order += 1
                skips.skip("out-of-order frame", f"stamp {stamp_ns} ns is not after {last} ns")
                return
            last = stamp_ns
            if not subsampler.keep(stamp_ns):
                stats.subsampled += 1
                return
            try:
                rgb = rgb_from_image_msg(msg)
            except Exception as err:  # a bad frame never ends the stream (InputError mostly)
                stats.bad += 1
                skips.skip("bad frame", f"stamp {stamp_ns} ns: {err}")
                return
            stats.yielded += 1
            yield Frame(rgb=rgb, stamp_ns=stamp_ns, frame_id=strip_frame(msg.header.frame_id))

        reader = _open_reader(self._paths)
        try:
            connections = [c for c in reader.connections if c.topic == self._topic]
            for connection, log_ns, raw in reader.messages(connections=connections):
                stats.read += 1
                try:
                    msg: Any = reader.deserialize(raw, connection.msgtype)
                    stamp_ns = stamp_to_ns(msg.header.stamp)
                except Exception as err:  # a corrupt message never ends the stream
                    stats.bad += 1
                    skips.skip("bad message", f"log time {log_ns} ns: {err}")
                    continue
                if stamp_ns == 0:
                    stats.zero_stamp += 1
                    skips.skip("zero header stamp", f"log time {log_ns} ns used instead")
                    stamp_ns = int(log_ns)
                heapq.heappush(pending, (stamp_ns, next(arrival), msg))
                if len(pending) > self._reorder_depth:
                    stamp_ns, _, msg = heapq.heappop(pending)
                    yield from release(stamp_ns, msg)
            while pending:
                stamp_ns, _, msg = heapq.heappop(pending)
                yield from release(stamp_ns, msg)
        finally:
            reader.close()
            skips.summary(stats)

    # --- poses --------------------------------------------------------------------------

    def pose_lookup(
        self,
        pose_topic: str,
        *,
        map_frame: str = "map",
        base_frame: str = "base_link",
        max_gap_ns: int = 500_000_000,
        parent_max_gap_ns: int | None = None,
        interpolate: bool = True,
        history_ns: int | None = 300 * NS_PER_SECOND,
        tf_scan_messages: int = 2000,
    ) -> PoseLookup:
        """Build a pose lookup from a topic of the same bag.

        Samples are read lazily by a reader of their own as queries advance; close the
        lookup when done.

        Args:
            pose_topic: An odometry, pose or tf topic (see :data:`POSE_TYPES`). An
                odometry topic gives ``header.frame_id <- child_frame_id`` (usually
                ``odom <- base_link``); a tf topic gives ``map_frame <- base_frame``.
            map_frame: Fixed frame of the tf chain.
            base_frame: Robot frame of the tf chain.
            max_gap_ns: Largest time from a query to a usable sample (the chain's last,
                fastest edge, and odometry/pose topics).
            parent_max_gap_ns: The same for the other dynamic tf edges (e.g. a
                localiser's ``map -> odom`` at 1 Hz); default ``max_gap_ns``.
            interpolate: Interpolate between samples (else nearest).
            history_ns: Samples kept behind the newest query (bounded memory); ``None``
                keeps all. Queries must not go back further than this.
            tf_scan_messages: Messages of ``/tf`` read to find the chain's edges.

        Raises:
            InputError: The topic is missing or not a pose type, or no tf chain joins
                ``map_frame`` to ``base_frame``.

        """
        if pose_topic not in self._topics:
            raise InputError(
                f"pose topic {pose_topic!r} is not in bag {str(self._path)!r}; topics usable "
                f"for poses: {', '.join(self.pose_topics()) or 'none'}"
            )
        reader = BagPoseReader(self._messages, self.topics)
        return reader.lookup(
            pose_topic,
            map_frame=map_frame,
            base_frame=base_frame,
            max_gap_ns=max_gap_ns,
            parent_max_gap_ns=parent_max_gap_ns,
            interpolate=interpolate,
            history_ns=history_ns,
            tf_scan_messages=tf_scan_messages,
        )

    def _messages(self, topics: Sequence[str]) -> Generator[tuple[int, Any], None, None]:
        """(log time, message) of ``topics``, deserialized; bad messages are skipped."""
        reader = _open_reader(self._paths)
        skips = SkipLog(f"{self._path}:{','.join(topics)}")
        try:
            connections = [c for c in reader.connections if c.topic in topics]
            for connection, log_ns, raw in reader.messages(connections=connections):
                try:
                    msg = reader.deserialize(raw, connection.msgtype)
                except Exception as err:
                    skips.skip("bad message", f"log time {log_ns} ns: {err}")
                    continue
                yield int(log_ns), msg
        finally:
            reader.close()
