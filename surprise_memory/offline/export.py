"""Episodes as a recording: an MCAP file in the rosbag2 layout, for Foxglove and ``ros2 bag``.

:func:`export_episodes` writes chosen episodes of a store (either backend) as a rosbag2
folder (``metadata.yaml`` + one ``.mcap``) with the message definitions inside, so that
Foxglove, ``ros2 bag play``, the ``mcap`` tools and ``surprise-memory process`` all read it
without this package. Each message is logged at its own stamp:

* ``/surprise_memory/episode_preview/compressed`` (``sensor_msgs/msg/CompressedImage``):
  each frame at its stamp, the stored JPEG bytes, in its camera's optical frame (else
  ``camera``); a named camera's frames on a topic of their own,
  ``/surprise_memory/episode_preview/<camera>/compressed`` (:func:`frames_topic`);
* ``/surprise_memory/episode_pose`` (``geometry_msgs/msg/PoseStamped``) and ``/tf``
  (``tf2_msgs/msg/TFMessage``: the pose's frame -> :data:`EXPORT_TF_CHILD`, and, where the
  camera's pose is known, -> :data:`EXPORT_TF_CHILD` ``/camera``: where it was and looked):
  at the trigger, for episodes with a pose;
* ``/surprise_memory/episode_markers`` (``visualization_msgs/msg/MarkerArray``): at each
  trigger, the episodes so far, drawn as the memory node draws them;
* ``/surprise_memory/episode_surprise/score`` and ``.../threshold`` (``std_msgs/msg/Float64``):
  s(t) and tau over the episode's window (from ``scores.csv`` beside a processed store),
  else at the trigger only;
* ``/surprise_memory/episode_info`` (``diagnostic_msgs/msg/DiagnosticArray``): at the
  trigger, the episode's id, robot, models, scores, snapshot notes and its picture
  (``trigger_frame``: the index and stamp of the trigger's frame, the rule of every view),
  its ``kind`` and ``place_key``.

Place keyframes (kind ``place``, :mod:`~surprise_memory.memory.places`) among the records
are marked apart: their frame on ``/surprise_memory/place_keyframes/compressed`` (a named
camera's on ``.../place_keyframes/<camera>/compressed``, :func:`places_topic`), their pose
on ``/surprise_memory/place_pose`` and in ``/tf`` as :data:`EXPORT_PLACE_TF_CHILD`, their
info with ``kind: place``; no marker and no surprise curve (they did not surprise).

The frame and marker topics are the live memory node's, so one Foxglove layout
(``config/foxglove_layout.json``) shows the robot live and an exported file alike.
Written with ``rosbags`` (already the package's bag reader and writer: pure Python, no ROS
install, the rosbag2 folder layout and the message definitions written for us).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.episode_markers import EpisodeMarker, episode_marker
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "EXPORT_PLACE_TF_CHILD",
    "EXPORT_TF_CHILD",
    "EXPORT_TOPICS",
    "PLACE_TOPICS",
    "ExportSummary",
    "export_episodes",
    "frames_topic",
    "places_topic",
]

EXPORT_TOPICS: dict[str, tuple[str, str]] = {
    "frames": ("/surprise_memory/episode_preview/compressed", "sensor_msgs/msg/CompressedImage"),
    "pose": ("/surprise_memory/episode_pose", "geometry_msgs/msg/PoseStamped"),
    "tf": ("/tf", "tf2_msgs/msg/TFMessage"),
    "markers": ("/surprise_memory/episode_markers", "visualization_msgs/msg/MarkerArray"),
    "score": ("/surprise_memory/episode_surprise/score", "std_msgs/msg/Float64"),
    "threshold": ("/surprise_memory/episode_surprise/threshold", "std_msgs/msg/Float64"),
    "info": ("/surprise_memory/episode_info", "diagnostic_msgs/msg/DiagnosticArray"),
}
"""Each exported stream: (topic, message type), by role."""

PLACE_TOPICS: dict[str, tuple[str, str]] = {
    "places": ("/surprise_memory/place_keyframes/compressed", "sensor_msgs/msg/CompressedImage"),
    "place_pose": ("/surprise_memory/place_pose", "geometry_msgs/msg/PoseStamped"),
}
"""The streams of place keyframes, written when the records hold any: (topic, type) by role."""

EXPORT_TF_CHILD = "surprise_memory/episode"
"""The tf child frame placed at each episode's pose (parent: the pose's frame)."""

EXPORT_PLACE_TF_CHILD = "surprise_memory/place"
"""The tf child frame placed at each place keyframe's pose."""

JPEG_FORMAT = "rgb8; jpeg compressed bgr8"
"""``CompressedImage.format`` of the frames (as ``compressed_image_transport`` writes it)."""

_ARROWS_NS, _LABELS_NS = "episodes", "episode_labels"  # as the memory node's markers


def frames_topic(camera: str) -> str:
    """The topic of a camera's exported frames (the one unnamed camera's: the node's)."""
    topic = EXPORT_TOPICS["frames"][0]
    if not camera:
        return topic
    return topic.replace("/compressed", f"/{camera}/compressed")


def places_topic(camera: str) -> str:
    """The topic of a camera's exported place keyframes."""
    topic = PLACE_TOPICS["places"][0]
    return topic.replace("/compressed", f"/{camera}/compressed") if camera else topic


def _frames_role(rec: EpisodeRecord, roles: dict[str, tuple[str, str]]) -> str:
    """The role (and, added to ``roles``, the topic) of a record's frames."""
    msgtype = EXPORT_TOPICS["frames"][1]
    name = rec.camera.name
    if rec.kind == PLACE:
        roles.setdefault("place_pose", PLACE_TOPICS["place_pose"])
        role = "places" if not name else f"places/{name}"
        roles.setdefault(role, (places_topic(name), msgtype))
        return role
    role = "frames" if not name else f"frames/{name}"
    roles.setdefault(role, (frames_topic(name), msgtype))
    return role


@dataclass(frozen=True)
class ExportSummary:
    """What :func:`export_episodes` wrote.

    Attributes:
        path: The rosbag2 folder.
        mcap: The MCAP file inside it.
        episodes: Ids of the episodes written, by trigger stamp.
        messages: Messages written per topic.

    """

    path: Path
    mcap: Path
    episodes: tuple[str, ...]
    messages: dict[str, int] = field(default_factory=dict)


def export_episodes(
    store: Any,
    records: Sequence[EpisodeRecord],
    out: str | Path,
    *,
    origin_ns: int | None = None,
    scores: Mapping[str, npt.NDArray[Any]] | None = None,
    marker_size_m: float = 0.5,
) -> ExportSummary:
    """Write ``records`` (episodes of ``store``) as an MCAP rosbag2 folder at ``out``.

    Args:
        store: The open store the records come from (frames and snapshot notes are read
            from it).
        records: The episodes to write (any order; written by trigger stamp).
        out: The rosbag2 folder to create (must not exist).
        origin_ns: The store's time origin, for the markers' labels (None = not known).
        scores: The run's ``scores.csv`` columns (as
            :func:`~surprise_memory.offline.run_record.read_scores` reads them) for the
            surprise curve around each trigger; None = the trigger's values only.
        marker_size_m: Arrow length at the threshold (the node's ``marker_size_m``).

    Returns:
        What was written.

    Raises:
        InputError: No episodes, or ``out`` exists.
        StoreError: A frame cannot be read, or the file cannot be written.

    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    if not records:
        raise InputError("no episodes to export")
    path = Path(out)
    if path.exists():
        raise InputError(f"{path} exists; export writes a new rosbag2 folder")
    records = sorted(records, key=lambda r: (r.stamp_ns, r.id))
    typestore = get_typestore(Stores.ROS2_KILTED)
    msgs = _Messages(typestore)
    notes = store.snapshot_notes([r.id for r in records])
    timeline: list[tuple[int, str, Any]] = []  # (log time, role, message)
    shown: list[EpisodeMarker] = []
    roles = dict(EXPORT_TOPICS)
    for rec in records:
        role = _frames_role(rec, roles)
        place = rec.kind == PLACE
        for i, stamp in enumerate(rec.frame_stamps_ns):
            jpeg = store.frame_jpeg(rec.id, i)
            timeline.append((stamp, role, msgs.compressed(stamp, jpeg, rec.camera.frame_id)))
        if rec.pose_valid and rec.pose.is_finite():
            timeline.append((rec.stamp_ns, "place_pose" if place else "pose", msgs.pose(rec)))
            timeline.append((rec.stamp_ns, "tf", msgs.tf(rec)))
        if place:
            timeline.append((rec.stamp_ns, "info", msgs.info(rec, [], origin_ns)))
            continue
        marker = episode_marker(rec, origin_ns, marker_size_m)
        if marker is not None:
            shown.append(marker)
            timeline.append((rec.stamp_ns, "markers", msgs.markers(rec.stamp_ns, shown)))
        for stamp, score, tau in _curve(rec, scores):
            timeline.append((stamp, "score", msgs.number(score)))
            timeline.append((stamp, "threshold", msgs.number(tau)))
        info = msgs.info(rec, notes.get(rec.id, []), origin_ns)
        timeline.append((rec.stamp_ns, "info", info))
    timeline.sort(key=lambda item: item[0])  # stable: roles keep their order at one stamp
    counts = {role: 0 for role in roles}
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    try:
        writer.open()
        conns = {
            role: writer.add_connection(topic, msgtype, typestore=typestore)
            for role, (topic, msgtype) in roles.items()
        }
        for stamp, role, msg in timeline:
            writer.write(conns[role], stamp, typestore.serialize_cdr(msg, msg.__msgtype__))
            counts[role] += 1
        export = {"episodes": [r.id for r in records], "origin_ns": origin_ns}
        writer.set_custom_data("surprise_memory.export", json.dumps(export))
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {exc}") from exc
    finally:
        writer.close()
    mcap = next(path.glob("*.mcap"))
    topics = {roles[role][0]: n for role, n in counts.items()}
    return ExportSummary(path, mcap, tuple(r.id for r in records), topics)


def _curve(
    rec: EpisodeRecord, scores: Mapping[str, npt.NDArray[Any]] | None
) -> list[tuple[int, float, float]]:
    """(stamp, s, tau) over the episode's window from the run's scores; else the trigger's."""
    if scores is not None and len(scores.get("stamp_ns", ())):
        stamps = np.asarray(scores["stamp_ns"], dtype=np.int64)
        inside = (stamps >= rec.start_ns) & (stamps <= rec.end_ns)
        if inside.any():
            return [
                (int(t), float(s), float(tau))
                for t, s, tau in zip(
                    stamps[inside], scores["score"][inside], scores["tau"][inside], strict=True
                )
            ]
    return [(rec.stamp_ns, rec.surprise, rec.threshold)]


def _time(typestore: Any, stamp_ns: int) -> Any:
    sec, nanosec = divmod(stamp_ns, NS_PER_SECOND)
    return typestore.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


class _Messages:
    """The exported messages, built as ``rosbags`` message objects."""

    def __init__(self, typestore: Any) -> None:
        self._ts = typestore
        self._t = typestore.types

    def _header(self, stamp_ns: int, frame_id: str) -> Any:
        return self._t["std_msgs/msg/Header"](stamp=_time(self._ts, stamp_ns), frame_id=frame_id)

    def _pose(self, position: Sequence[float], orientation: Sequence[float]) -> Any:
        t = self._t
        return t["geometry_msgs/msg/Pose"](
            position=t["geometry_msgs/msg/Point"](x=position[0], y=position[1], z=position[2]),
            orientation=t["geometry_msgs/msg/Quaternion"](
                x=orientation[0], y=orientation[1], z=orientation[2], w=orientation[3]
            ),
        )

    def compressed(self, stamp_ns: int, jpeg: bytes, frame_id: str) -> Any:
        return self._t["sensor_msgs/msg/CompressedImage"](
            header=self._header(stamp_ns, frame_id or "camera"),
            format=JPEG_FORMAT,
            data=np.frombuffer(jpeg, dtype=np.uint8),
        )

    def pose(self, rec: EpisodeRecord) -> Any:
        p = rec.pose
        return self._t["geometry_msgs/msg/PoseStamped"](
            header=self._header(rec.stamp_ns, p.frame_id),
            pose=self._pose(p.position, (p.qx, p.qy, p.qz, p.qw)),
        )

    def tf(self, rec: EpisodeRecord) -> Any:
        child = EXPORT_PLACE_TF_CHILD if rec.kind == PLACE else EXPORT_TF_CHILD
        transforms = [self._transform(rec.stamp_ns, rec.pose, child)]
        camera = rec.camera.pose
        if camera is not None and camera.frame_id == rec.pose.frame_id:
            transforms.append(self._transform(rec.stamp_ns, camera, f"{child}/camera"))
        return self._t["tf2_msgs/msg/TFMessage"](transforms=transforms)

    def _transform(self, stamp_ns: int, p: Pose, child: str) -> Any:
        t = self._t
        return t["geometry_msgs/msg/TransformStamped"](
            header=self._header(stamp_ns, p.frame_id),
            child_frame_id=child,
            transform=t["geometry_msgs/msg/Transform"](
                translation=t["geometry_msgs/msg/Vector3"](x=p.x, y=p.y, z=p.z),
                rotation=t["geometry_msgs/msg/Quaternion"](x=p.qx, y=p.qy, z=p.qz, w=p.qw),
            ),
        )

    def markers(self, stamp_ns: int, shown: Sequence[EpisodeMarker]) -> Any:
        t = self._t
        marker_t = t["visualization_msgs/msg/Marker"]

        def marker(ns: str, i: int, kind: int, m: EpisodeMarker, **kw: Any) -> Any:
            values: dict[str, Any] = {
                "header": self._header(stamp_ns, m.frame_id),
                "ns": ns,
                "id": i,
                "type": kind,
                "action": marker_t.ADD,
                "pose": self._pose(m.position, m.orientation),
                "scale": t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
                "color": t["std_msgs/msg/ColorRGBA"](
                    r=m.rgba[0], g=m.rgba[1], b=m.rgba[2], a=m.rgba[3]
                ),
                "lifetime": t["builtin_interfaces/msg/Duration"](sec=0, nanosec=0),
                "frame_locked": False,
                "points": [],
                "colors": [],
                "texture_resource": "",
                "texture": t["sensor_msgs/msg/CompressedImage"](
                    header=self._header(0, ""), format="", data=np.zeros(0, np.uint8)
                ),
                "uv_coordinates": [],
                "text": "",
                "mesh_resource": "",
                "mesh_file": t["visualization_msgs/msg/MeshFile"](
                    filename="", data=np.zeros(0, np.uint8)
                ),
                "mesh_use_embedded_materials": False,
            }
            values.update(kw)
            return marker_t(**values)

        out = [marker("", 0, marker_t.ARROW, shown[0], action=marker_t.DELETEALL)]
        for i, m in enumerate(shown):
            out.append(
                marker(
                    _ARROWS_NS,
                    i,
                    marker_t.ARROW,
                    m,
                    scale=t["geometry_msgs/msg/Vector3"](x=m.length_m, y=m.width_m, z=m.width_m),
                )
            )
            out.append(
                marker(
                    _LABELS_NS,
                    i,
                    marker_t.TEXT_VIEW_FACING,
                    m,
                    pose=self._pose(m.label_position, (0.0, 0.0, 0.0, 1.0)),
                    scale=t["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=m.label_height_m),
                    text=m.label,
                )
            )
        return t["visualization_msgs/msg/MarkerArray"](markers=out)

    def number(self, value: float) -> Any:
        return self._t["std_msgs/msg/Float64"](data=float(value))

    def info(self, rec: EpisodeRecord, notes: Sequence[SnapshotNote], origin_ns: int | None) -> Any:
        t = self._t
        kv = t["diagnostic_msgs/msg/KeyValue"]
        trigger = trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns)  # its picture
        values = {
            "id": rec.id,
            "robot_id": rec.robot_id,
            "stamp_ns": str(rec.stamp_ns),
            "time_s": "" if origin_ns is None else f"{(rec.stamp_ns - origin_ns) / 1e9:.3f}",
            "surprise": f"{rec.surprise:.6g}",
            "threshold": f"{rec.threshold:.6g}" if math.isfinite(rec.threshold) else "",
            "encoder_model": rec.encoder_model,
            "encoder_pretrained": str(rec.encoder_pretrained).lower(),
            "embedder_model": rec.embedder_model,
            "embedder_pretrained": str(rec.embedder_pretrained).lower(),
            "frames": str(len(rec.frame_stamps_ns)),
            "trigger_frame": str(trigger),
            "trigger_frame_stamp_ns": str(rec.frame_stamps_ns[trigger])
            if rec.frame_stamps_ns
            else "",
            "pose_frame": rec.pose.frame_id if rec.pose_valid else "",
            "camera": rec.camera.name,
            "camera_frame": rec.camera.frame_id,
            "view_yaw_deg": "" if rec.camera.yaw is None else f"{math.degrees(rec.camera.yaw):.1f}",
            "snapshots": json.dumps([n.as_dict() for n in notes]),
            "kind": rec.kind,
            "place_key": rec.place_key,
        }
        place = rec.kind == PLACE
        status = t["diagnostic_msgs/msg/DiagnosticStatus"](
            level=0,
            name=f"surprise_memory: {'place keyframe' if place else 'episode'} {rec.id}",
            message=f"the view of place {rec.place_key}"
            if place
            else f"surprise {rec.surprise:.3f} above its threshold",
            hardware_id=rec.robot_id,
            values=[kv(key=k, value=v) for k, v in values.items()],
        )
        return t["diagnostic_msgs/msg/DiagnosticArray"](
            header=self._header(rec.stamp_ns, ""), status=[status]
        )
