"""Writing a synthetic recording: a bag or a video file, and its ground truth beside it.

A real rosbag2 (sqlite3 or mcap) or ROS 1 bag written with ``rosbags``
(:func:`write_synthetic_bag`: ``sensor_msgs/msg/Image`` rgb8 on ``/camera/image_raw``,
``nav_msgs/msg/Odometry`` on ``/odom``, and optionally ``/tf`` + ``/tf_static`` for
``map -> odom -> base_link``), a video file via PyAV (:func:`write_synthetic_video`, or
:func:`write_video` for any frames), and the ground-truth event times as JSON beside them
(:func:`write_ground_truth` at :func:`ground_truth_path`). What is written comes from
:mod:`.scene`.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import Pose
from surprise_memory.offline.synthetic.scene import (
    SyntheticScene,
    ground_truth,
    synthetic_frames,
    synthetic_odometry,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "SyntheticRecording",
    "ground_truth_path",
    "write_ground_truth",
    "write_synthetic_bag",
    "write_synthetic_video",
    "write_video",
]

_TF_MESSAGE_MSG = "geometry_msgs/TransformStamped[] transforms"


def ground_truth_path(recording: str | Path) -> Path:
    """Where the ground truth of a bag folder, bag or video file is written: beside it."""
    recording = Path(recording)
    return recording.with_name(recording.stem + ".ground_truth.json")


def write_ground_truth(path: str | Path, truth: dict[str, Any]) -> Path:
    """Write ``truth`` (from :func:`ground_truth`) as indented JSON and return the path."""
    path = Path(path)
    path.write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return path


# --- writing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntheticRecording:
    """What :func:`write_synthetic_bag` / :func:`write_synthetic_video` wrote."""

    path: Path
    ground_truth: Path
    frames: int
    odometry: int


def _ros_types(typestore: Any, ros1: bool) -> Any:
    t = typestore.types

    def header(stamp_ns: int, frame: str, seq: int) -> Any:
        stamp = t["builtin_interfaces/msg/Time"](
            sec=stamp_ns // NS_PER_SECOND, nanosec=stamp_ns % NS_PER_SECOND
        )
        if ros1:
            return t["std_msgs/msg/Header"](seq=seq, stamp=stamp, frame_id=frame)
        return t["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)

    return t, header


def write_synthetic_bag(
    path: str | Path,
    scene: SyntheticScene | None = None,
    *,
    storage: str = "sqlite3",
    image_topic: str = "/camera/image_raw",
    odom_topic: str = "/odom",
    tf: bool = False,
    latency_ns: int = 5_000_000,
    custom_data: Mapping[str, str] | None = None,
    pose_sigma_m: float | None = None,
) -> SyntheticRecording:
    """Write the recording as a real bag, and its ground truth beside it.

    Header stamps are the capture times; each message's log (receive) time is its stamp
    plus ``latency_ns``, as a recorder would see it.

    Args:
        path: A new rosbag2 folder (``sqlite3``/``mcap``) or a new ``.bag`` file (``ros1``).
        scene: The scene; the default :class:`SyntheticScene` when ``None``.
        storage: ``"sqlite3"``, ``"mcap"`` (rosbag2, version 8 metadata) or ``"ros1"``.
        image_topic: Topic of the ``sensor_msgs/msg/Image`` (rgb8) frames.
        odom_topic: Topic of the ``nav_msgs/msg/Odometry`` samples.
        tf: Also write ``/tf`` (``odom -> base_link`` with each odometry sample) and
            ``/tf_static`` (``map -> odom``, a fixed offset of (1, 2, 0) m).
        latency_ns: Log time minus header stamp.
        pose_sigma_m: The odometry's horizontal 1-sigma position uncertainty, written as its
            pose covariance (x and y variances); None = an all-zero covariance (unknown).
        custom_data: rosbag2 only: ``custom_data`` of ``metadata.yaml`` (what
            ``ros2 bag record --custom-data KEY=VALUE`` writes, e.g. a ``robot_id``).

    Returns:
        Paths and message counts.

    Raises:
        ConfigError: Unknown ``storage``, or the path exists already.

    """
    from rosbags.rosbag1 import Writer as Writer1
    from rosbags.rosbag2 import StoragePlugin
    from rosbags.rosbag2 import Writer as Writer2
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    scene = scene or SyntheticScene()
    path = Path(path)
    if storage not in {"sqlite3", "mcap", "ros1"}:
        raise ConfigError(f"storage={storage!r}: must be one of sqlite3, mcap, ros1")
    if path.exists():
        raise ConfigError(f"{str(path)!r} exists already; the bag writer only creates new bags")
    if custom_data and storage == "ros1":
        raise ConfigError("custom_data: ROS 1 bags have no custom metadata")
    ros1 = storage == "ros1"
    typestore = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_KILTED)
    if ros1:  # noetic's store lacks tf2_msgs; its definition is one line
        typestore.register(get_types_from_msg(_TF_MESSAGE_MSG, "tf2_msgs/msg/TFMessage"))
    serialize = typestore.serialize_ros1 if ros1 else typestore.serialize_cdr
    t, header = _ros_types(typestore, ros1)
    writer: Any
    if ros1:
        writer = Writer1(path)
    else:
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        writer = Writer2(path, version=8, storage_plugin=plugin)
        for key, value in (custom_data or {}).items():
            writer.set_custom_data(key, value)

    def images() -> Iterator[tuple[int, int, str, Any]]:
        for i, frame in enumerate(synthetic_frames(scene)):
            h, w = frame.rgb.shape[:2]
            msg = t["sensor_msgs/msg/Image"](
                header=header(frame.stamp_ns, frame.frame_id, i),
                height=h,
                width=w,
                encoding="rgb8",
                is_bigendian=0,
                step=w * 3,
                data=frame.rgb.reshape(-1),
            )
            yield frame.stamp_ns + latency_ns, 0, "image", msg

    def odometry() -> Iterator[tuple[int, int, str, Any]]:
        vec = t["geometry_msgs/msg/Vector3"]
        pose_cov = np.zeros(36, np.float64)
        if pose_sigma_m is not None:
            pose_cov[0] = pose_cov[7] = pose_sigma_m**2  # x and y variances
        for i, sample in enumerate(synthetic_odometry(scene)):
            p = sample.pose
            point = t["geometry_msgs/msg/Point"](x=p.x, y=p.y, z=p.z)
            quat = t["geometry_msgs/msg/Quaternion"](x=p.qx, y=p.qy, z=p.qz, w=p.qw)
            msg = t["nav_msgs/msg/Odometry"](
                header=header(sample.stamp_ns, p.frame_id, i),
                child_frame_id=sample.child_frame_id,
                pose=t["geometry_msgs/msg/PoseWithCovariance"](
                    pose=t["geometry_msgs/msg/Pose"](position=point, orientation=quat),
                    covariance=pose_cov,
                ),
                twist=t["geometry_msgs/msg/TwistWithCovariance"](
                    twist=t["geometry_msgs/msg/Twist"](
                        linear=vec(x=sample.linear_x, y=0.0, z=0.0),
                        angular=vec(x=0.0, y=0.0, z=sample.angular_z),
                    ),
                    covariance=np.zeros(36, np.float64),
                ),
            )
            log_ns = sample.stamp_ns + latency_ns
            yield log_ns, 1, "odom", msg
            if tf:
                edge = (sample.stamp_ns, p, sample.child_frame_id)
                yield log_ns, 2, "tf", _tf_message(t, header, edge, i)

    tf_type = "tf2_msgs/msg/TFMessage"
    counts = {"image": 0, "odom": 0, "tf": 0}
    with writer:
        conns = {
            "image": writer.add_connection(
                image_topic, "sensor_msgs/msg/Image", typestore=typestore
            ),
            "odom": writer.add_connection(odom_topic, "nav_msgs/msg/Odometry", typestore=typestore),
        }
        if tf:
            conns["tf"] = writer.add_connection("/tf", tf_type, typestore=typestore)
            static = writer.add_connection("/tf_static", tf_type, typestore=typestore)
            offset = Pose(1.0, 2.0, 0.0, frame_id=scene.map_frame)
            msg = _tf_message(t, header, (scene.start_ns, offset, scene.odom_frame), 0)
            writer.write(static, scene.start_ns, serialize(msg, tf_type))
        for log_ns, _, key, msg in heapq.merge(images(), odometry()):
            writer.write(conns[key], log_ns, serialize(msg, msg.__msgtype__))
            counts[key] += 1
    truth = ground_truth(scene, image_topic=image_topic, odom_topic=odom_topic)
    gt = write_ground_truth(ground_truth_path(path), truth)
    return SyntheticRecording(path, gt, counts["image"], counts["odom"])


def _tf_message(t: Any, header: Any, edge: tuple[int, Pose, str], seq: int) -> Any:
    stamp_ns, pose, child = edge
    transform = t["geometry_msgs/msg/TransformStamped"](
        header=header(stamp_ns, pose.frame_id, seq),
        child_frame_id=child,
        transform=t["geometry_msgs/msg/Transform"](
            translation=t["geometry_msgs/msg/Vector3"](x=pose.x, y=pose.y, z=pose.z),
            rotation=t["geometry_msgs/msg/Quaternion"](x=pose.qx, y=pose.qy, z=pose.qz, w=pose.qw),
        ),
    )
    return t["tf2_msgs/msg/TFMessage"](transforms=[transform])


def write_video(
    path: str | Path,
    frames: Iterable[Frame],
    *,
    codec: str | None = None,
    rate: float = 30.0,
    time_base: Fraction = Fraction(1, 1000),
    bit_rate: int = 8_000_000,
) -> int:
    """Encode frames into a video file with PyAV, pts taken from the frame stamps.

    Presentation times are the stamps relative to the first frame's, in ``time_base``
    units, so uneven stamps give a variable-frame-rate file.

    Args:
        path: The new file; its suffix picks the container.
        frames: Frames of one size, stamps increasing.
        codec: FFmpeg encoder; default ``libvpx`` for .webm, else ``mpeg4``.
        rate: Nominal frame rate the container declares (the pts decide the timing).
        time_base: Unit of the presentation times.
        bit_rate: Target bit rate; high by default, the frames are small.

    Returns:
        Frames written.

    Raises:
        ConfigError: Frames change size, or stamps do not increase in ``time_base`` units.

    """
    import av

    path = Path(path)
    codec = codec or ("libvpx" if path.suffix.lower() == ".webm" else "mpeg4")
    count = 0
    with av.open(str(path), mode="w") as container:
        stream: Any = None
        first = last = 0
        for frame in frames:
            h, w = frame.rgb.shape[:2]
            if stream is None:
                stream = container.add_stream(codec, rate=Fraction(rate).limit_denominator(1001))
                stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
                stream.bit_rate = bit_rate
                stream.time_base = time_base
                stream.codec_context.time_base = time_base
                first, last = frame.stamp_ns, -1
            elif (w, h) != (stream.width, stream.height):
                raise ConfigError(
                    f"frame at {frame.stamp_ns} ns is {w}x{h}; the video is "
                    f"{stream.width}x{stream.height}"
                )
            pts = int(Fraction(frame.stamp_ns - first, NS_PER_SECOND) / time_base)
            if pts <= last:
                raise ConfigError(
                    f"frame at {frame.stamp_ns} ns: stamps must increase by at least one "
                    f"time_base ({time_base} s)"
                )
            last = pts
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame.rgb), format="rgb24")
            vf.pts, vf.time_base = pts, time_base
            for packet in stream.encode(vf):
                container.mux(packet)
            count += 1
        if stream is not None:
            for packet in stream.encode():
                container.mux(packet)
    return count


def write_synthetic_video(
    path: str | Path,
    scene: SyntheticScene | None = None,
    *,
    codec: str | None = None,
) -> SyntheticRecording:
    """Write the recording's frames as a video file (PyAV), and its ground truth beside it.

    The video's presentation times start at 0 for the first frame (a video has no epoch);
    the ground truth's ``start_s``/``end_s`` hold for both.
    """
    scene = scene or SyntheticScene()
    path = Path(path)
    count = write_video(path, synthetic_frames(scene), codec=codec, rate=scene.fps)
    gt = write_ground_truth(ground_truth_path(path), ground_truth(scene, image_topic=""))
    return SyntheticRecording(path, gt, count, 0)
