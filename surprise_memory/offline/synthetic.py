"""A deterministic synthetic camera recording with scripted events, for demos and tests.

A robot drives along a path while its camera watches a wide scene (sky, ground, buildings;
textures drawn from ``seed``). Scripted events change what the camera sees:

* ``object_appears``: a coloured object appears in the scene and stays;
* ``light_change``: the light dims (or, the next time, comes back) over a short ramp;
* ``camera_pan``: the robot turns 90 degrees to the left, so the camera pans;
* ``person_crosses``: a person-like shape walks across the image.

Everything is a pure function of the :class:`SyntheticScene` (seed included): the same
scene gives the same pixels, stamps and poses on every machine, and any frame can be
rendered on its own (:func:`render_frame`). Frames are small (128x96 by default) and come
at a fixed rate; the odometry stream comes at its own rate.

Outputs: frames in memory (:func:`synthetic_frames`), a real rosbag2 (sqlite3 or mcap) or
ROS 1 bag written with ``rosbags`` (:func:`write_synthetic_bag`: ``sensor_msgs/msg/Image``
rgb8 on ``/camera/image_raw``, ``nav_msgs/msg/Odometry`` on ``/odom``, and optionally
``/tf`` + ``/tf_static`` for ``map -> odom -> base_link``), a video file via PyAV
(:func:`write_synthetic_video`), and the ground-truth event times as JSON beside them.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import Pose
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "EVENT_KINDS",
    "GROUND_TRUTH_FORMAT",
    "OdometrySample",
    "ScriptedEvent",
    "SyntheticRecording",
    "SyntheticScene",
    "default_events",
    "ground_truth",
    "ground_truth_path",
    "render_frame",
    "synthetic_frames",
    "synthetic_odometry",
    "write_ground_truth",
    "write_synthetic_bag",
    "write_synthetic_video",
    "write_video",
]

GROUND_TRUTH_FORMAT = "surprise_memory.offline.synthetic.ground_truth/1"
"""Value of the ``format`` key of the ground-truth JSON."""

EVENT_KINDS: dict[str, str] = {
    "object_appears": "a coloured object appears in the scene and stays",
    "light_change": "the light dims (or comes back) over a short ramp",
    "camera_pan": "the robot turns 90 degrees to the left; the camera pans with it",
    "person_crosses": "a person-like shape walks across the image from left to right",
}
"""The scripted event kinds and what each does."""

_FOV_RAD = math.radians(60.0)  # horizontal field of view of the virtual camera
_DIM = 0.55  # light factor after a dimming light change
_TF_MESSAGE_MSG = "geometry_msgs/TransformStamped[] transforms"


@dataclass(frozen=True)
class ScriptedEvent:
    """One scripted event of the scene, in seconds from the start of the recording.

    Attributes:
        kind: One of :data:`EVENT_KINDS`.
        start_s: When it starts.
        end_s: When it ends (== ``start_s`` for an instant event).
        description: Free text for reports; :data:`EVENT_KINDS` text when empty.

    """

    kind: str
    start_s: float
    end_s: float
    description: str = ""


def default_events(duration_s: float) -> tuple[ScriptedEvent, ...]:
    """One event of each kind, spread over the recording (60 s: at 15, 27, 36, 48 s).

    Placed late enough that a 64-frame window and the gate's warm-up fill first at 10 fps.
    """
    d = float(duration_s)
    return (
        ScriptedEvent("object_appears", 0.25 * d, 0.25 * d),
        ScriptedEvent("light_change", 0.45 * d, 0.45 * d + min(0.5, 0.02 * d)),
        ScriptedEvent("camera_pan", 0.60 * d, 0.60 * d + min(3.0, 0.08 * d)),
        ScriptedEvent("person_crosses", 0.80 * d, 0.80 * d + min(4.0, 0.10 * d)),
    )


@dataclass(frozen=True)
class SyntheticScene:
    """Everything that determines a synthetic recording.

    Attributes:
        seed: Seed of the textures, colours and sensor noise.
        duration_s: Length of the recording in seconds.
        fps: Camera frame rate.
        width: Frame width in pixels.
        height: Frame height in pixels.
        odom_rate_hz: Odometry rate.
        speed_mps: Forward speed of the robot.
        noise: Standard deviation of the per-pixel sensor noise, in grey levels.
        start_ns: Stamp of the first frame (int nanoseconds, a realistic epoch time).
        events: The scripted events; ``None`` gives :func:`default_events`.
        camera_frame: ``frame_id`` of the images.
        odom_frame: Fixed frame of the odometry.
        base_frame: Robot frame.
        map_frame: Map frame (``map -> odom`` is a static offset in the tf output).

    Raises:
        ConfigError: A value is out of range, or an event is unknown or outside the
            recording.

    """

    seed: int = 0
    duration_s: float = 60.0
    fps: float = 10.0
    width: int = 128
    height: int = 96
    odom_rate_hz: float = 20.0
    speed_mps: float = 0.5
    noise: float = 2.0
    start_ns: int = 1_700_000_000 * NS_PER_SECOND
    events: tuple[ScriptedEvent, ...] | None = None
    camera_frame: str = "camera"
    odom_frame: str = "odom"
    base_frame: str = "base_link"
    map_frame: str = "map"
    _resolved: tuple[ScriptedEvent, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        checks: list[tuple[str, Any, bool, str]] = [
            ("duration_s", self.duration_s, 0 < self.duration_s <= 86_400, "in (0, 86400]"),
            ("fps", self.fps, 0 < self.fps <= 1000, "in (0, 1000]"),
            ("width", self.width, 16 <= self.width <= 4096, "in [16, 4096]"),
            ("height", self.height, 16 <= self.height <= 4096, "in [16, 4096]"),
            ("odom_rate_hz", self.odom_rate_hz, 0 < self.odom_rate_hz <= 1000, "in (0, 1000]"),
            ("speed_mps", self.speed_mps, 0 <= self.speed_mps <= 100, "in [0, 100]"),
            ("noise", self.noise, 0 <= self.noise <= 100, "in [0, 100]"),
            ("start_ns", self.start_ns, self.start_ns >= 0, ">= 0"),
        ]
        for name, value, ok, rule in checks:
            if not ok:
                raise ConfigError(f"{name}={value!r}: must be {rule}")
        events = default_events(self.duration_s) if self.events is None else tuple(self.events)
        for ev in events:
            if ev.kind not in EVENT_KINDS:
                raise ConfigError(
                    f"event kind {ev.kind!r}: must be one of {', '.join(EVENT_KINDS)}"
                )
            if not 0 <= ev.start_s <= ev.end_s <= self.duration_s:
                raise ConfigError(
                    f"event {ev.kind} from {ev.start_s} s to {ev.end_s} s: must satisfy "
                    f"0 <= start_s <= end_s <= duration_s={self.duration_s}"
                )
        object.__setattr__(self, "_resolved", tuple(sorted(events, key=lambda e: e.start_s)))

    @property
    def scripted_events(self) -> tuple[ScriptedEvent, ...]:
        """The events in force (given or default), by start time."""
        return self._resolved

    @property
    def frame_count(self) -> int:
        """Number of camera frames."""
        return math.floor(self.duration_s * self.fps + 1e-9)

    def frame_stamp(self, index: int) -> int:
        """Stamp of frame ``index`` in int nanoseconds."""
        return self.start_ns + round(index * NS_PER_SECOND / self.fps)

    def seconds(self, stamp_ns: int) -> float:
        """Seconds from the start of the recording."""
        return (stamp_ns - self.start_ns) / NS_PER_SECOND


@dataclass(frozen=True)
class OdometrySample:
    """One odometry sample: the pose of the base in the odom frame and its velocity.

    Attributes:
        stamp_ns: Stamp (int nanoseconds).
        pose: Pose of ``child_frame_id`` in ``pose.frame_id`` (``odom <- base_link``).
        child_frame_id: The robot frame.
        linear_x: Forward speed in m/s.
        angular_z: Turn rate in rad/s.

    """

    stamp_ns: int
    pose: Pose
    child_frame_id: str
    linear_x: float
    angular_z: float


# --- motion -------------------------------------------------------------------------------


def _smoothstep(x: float) -> float:
    x = min(1.0, max(0.0, x))
    return x * x * (3.0 - 2.0 * x)


def _yaw(scene: SyntheticScene, t: float) -> float:
    """Heading at ``t`` s: +90 degrees per camera pan, smooth over the pan."""
    yaw = 0.0
    for ev in scene.scripted_events:
        if ev.kind == "camera_pan":
            span = ev.end_s - ev.start_s
            done = 1.0 if span <= 0 else _smoothstep((t - ev.start_s) / span)
            yaw += (math.pi / 2) * done if t >= ev.start_s else 0.0
    return yaw


def synthetic_odometry(scene: SyntheticScene) -> Iterator[OdometrySample]:
    """Yield the odometry at ``odom_rate_hz`` over the recording (``odom <- base_link``).

    The robot drives forward at ``speed_mps`` and turns left with each camera pan;
    positions are integrated with the midpoint rule on a fixed step, so they are exactly
    reproducible.
    """
    step_ns = round(NS_PER_SECOND / scene.odom_rate_hz)
    count = int(scene.duration_s * NS_PER_SECOND // step_ns) + 1
    x = y = 0.0
    dt = step_ns / NS_PER_SECOND
    for i in range(count):
        t = i * dt
        yaw = _yaw(scene, t)
        if i > 0:
            mid = _yaw(scene, t - dt / 2)
            x += scene.speed_mps * dt * math.cos(mid)
            y += scene.speed_mps * dt * math.sin(mid)
        rate = (_yaw(scene, t + dt / 2) - _yaw(scene, t - dt / 2)) / dt
        pose = Pose(x, y, 0.0, 0.0, 0.0, math.sin(yaw / 2), math.cos(yaw / 2), scene.odom_frame)
        yield OdometrySample(
            scene.start_ns + i * step_ns, pose, scene.base_frame, scene.speed_mps, rate
        )


# --- rendering ----------------------------------------------------------------------------

FloatImage = npt.NDArray[np.float32]


@functools.lru_cache(maxsize=8)
def _world(scene: SyntheticScene) -> FloatImage:
    """The panorama the camera looks into: 4 frame widths around, wrapping."""
    rng = np.random.default_rng([scene.seed, 0])
    h, w = scene.height, 4 * scene.width
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    horizon = int(0.55 * h)
    sky = rng.uniform(0.55, 0.9, 3).astype(np.float32) * 255
    ground = rng.uniform(0.2, 0.45, 3).astype(np.float32) * 255
    img = np.empty((h, w, 3), np.float32)
    shade = (1.0 - 0.35 * yy[:horizon] / horizon)[..., None]
    img[:horizon] = sky * shade
    img[horizon:] = ground * (0.8 + 0.4 * (yy[horizon:] - horizon) / (h - horizon))[..., None]
    # low-frequency texture (periodic in x, so the panorama wraps without a seam)
    texture = np.zeros((h, w), np.float32)
    for _ in range(6):
        kx = int(rng.integers(1, 12))
        ky = float(rng.uniform(0.02, 0.3))
        phase = float(rng.uniform(0, 2 * math.pi))
        texture += np.sin(2 * math.pi * kx * xx / w + ky * yy + phase)
    img += 6.0 * texture[..., None]
    # buildings along the horizon
    for _ in range(int(rng.integers(8, 14))):
        bw = int(rng.integers(w // 40 + 2, w // 10 + 3))
        bh = int(rng.integers(h // 8, h // 2))
        x0 = int(rng.integers(0, w))
        color = rng.uniform(0.15, 0.85, 3).astype(np.float32) * 255
        cols = np.arange(x0, x0 + bw) % w
        img[horizon - bh : horizon, cols] = color
        for wy in range(horizon - bh + 3, horizon - 3, 6):  # rows of windows
            img[wy : wy + 2, cols[1::4]] = color * 0.5
    return img


def _camera_x(scene: SyntheticScene, t: float) -> float:
    """Left edge of the view in panorama pixels at ``t`` s (turning left moves it left)."""
    px_per_rad = scene.width / _FOV_RAD
    sway = 1.5 * math.sin(2 * math.pi * t / 7.0)  # a little shake, so nothing is frozen
    return 1.5 * scene.width - _yaw(scene, t) * px_per_rad + sway + 0.8 * t


def _disk(img: FloatImage, cx: float, cy: float, r: float, color: Any) -> None:
    h, w = img.shape[:2]
    y0, y1 = max(0, int(cy - r)), min(h, int(cy + r) + 1)
    x0, x1 = max(0, int(cx - r)), min(w, int(cx + r) + 1)
    if y0 >= y1 or x0 >= x1:
        return
    yy, xx = np.mgrid[y0:y1, x0:x1]
    mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    img[y0:y1, x0:x1][mask] = color


def _rect(img: FloatImage, box: tuple[float, float, float, float], color: Any) -> None:
    h, w = img.shape[:2]
    x0, y0, x1, y1 = box
    a, b = max(0, round(x0)), min(w, round(x1))
    c, d = max(0, round(y0)), min(h, round(y1))
    if a < b and c < d:
        img[c:d, a:b] = color


def _person(img: FloatImage, cx: float, scene: SyntheticScene, phase: float, color: Any) -> None:
    h = scene.height
    size = 0.62 * h
    feet = 0.95 * h
    head_r = 0.09 * size
    _disk(img, cx, feet - size + head_r, head_r, (224.0, 180.0, 150.0))
    torso = (cx - 0.12 * size, feet - size + 2 * head_r, cx + 0.12 * size, feet - 0.45 * size)
    _rect(img, torso, color)
    stride = 0.12 * size * math.sin(phase)
    for sign in (-1.0, 1.0):
        lx = cx + sign * stride
        _rect(
            img, (lx - 0.05 * size, feet - 0.45 * size, lx + 0.05 * size, feet), (40.0, 40.0, 60.0)
        )


def render_frame(scene: SyntheticScene, index: int) -> Frame:
    """Render frame ``index`` of the recording (any index, in any order).

    Raises:
        ConfigError: ``index`` is outside ``[0, frame_count)``.

    """
    if not 0 <= index < scene.frame_count:
        raise ConfigError(f"frame index {index}: must be in [0, {scene.frame_count})")
    stamp = scene.frame_stamp(index)
    t = scene.seconds(stamp)
    world = _world(scene).copy()
    w, h = scene.width, scene.height
    colors = np.random.default_rng([scene.seed, 1])
    light = 1.0
    dim = True
    for ev in scene.scripted_events:
        color = colors.uniform(0, 1, 3)
        if ev.kind == "object_appears" and t >= ev.start_s:
            # placed in the scene where the camera looked when it appeared, right of centre
            wx = (_camera_x(scene, ev.start_s) + 0.62 * w) % world.shape[1]
            vivid = (0.25 + 0.75 * (color / max(color.max(), 1e-6))) * 255
            _disk(world, wx, 0.62 * h, 0.16 * h, vivid)
            _disk(world, wx - world.shape[1], 0.62 * h, 0.16 * h, vivid)  # wrap-around copy
        elif ev.kind == "light_change" and t >= ev.start_s:
            span = ev.end_s - ev.start_s
            done = 1.0 if span <= 0 else min(1.0, (t - ev.start_s) / span)
            target = _DIM if dim else 1.0 / _DIM
            light *= 1.0 + (target - 1.0) * done
            dim = not dim
    x0 = _camera_x(scene, t)
    cols = (np.arange(w) + math.floor(x0)) % world.shape[1]
    img = world[:, cols].copy()
    for ev in scene.scripted_events:
        if ev.kind == "person_crosses" and ev.start_s <= t <= ev.end_s:
            span = max(ev.end_s - ev.start_s, 1e-9)
            cx = -0.2 * w + 1.4 * w * (t - ev.start_s) / span
            _person(img, cx, scene, phase=8.0 * (t - ev.start_s), color=(150.0, 40.0, 40.0))
    img *= light
    noise = np.random.default_rng([scene.seed, 2, index]).normal(0.0, scene.noise, img.shape)
    rgb = np.clip(img + noise, 0, 255).astype(np.uint8)
    return Frame(rgb=rgb, stamp_ns=stamp, frame_id=scene.camera_frame)


def synthetic_frames(scene: SyntheticScene) -> Iterator[Frame]:
    """Yield every frame of the recording in order, without writing anything."""
    for i in range(scene.frame_count):
        yield render_frame(scene, i)


# --- ground truth -------------------------------------------------------------------------


def ground_truth(
    scene: SyntheticScene,
    *,
    image_topic: str = "/camera/image_raw",
    odom_topic: str = "/odom",
) -> dict[str, Any]:
    """The ground truth of a recording as a JSON-ready dict.

    Keys: ``format``, ``seed``, ``start_ns``, ``duration_s``, ``fps``, ``width``,
    ``height``, ``frame_count``, ``image_topic``, ``odom_topic``, ``frames`` (odom,
    base, camera, map) and ``events``: for each, ``name``, ``description``,
    ``start_ns``/``end_ns`` (stamps), ``start_s``/``end_s`` (seconds from the start) and
    ``position`` ([x, y, z] of the robot in the odom frame at the start, metres).
    """
    odometry = list(_odometry_at(scene, [ev.start_s for ev in scene.scripted_events]))
    events = []
    for ev, pose in zip(scene.scripted_events, odometry, strict=True):
        events.append(
            {
                "name": ev.kind,
                "description": ev.description or EVENT_KINDS[ev.kind],
                "start_ns": scene.start_ns + round(ev.start_s * NS_PER_SECOND),
                "end_ns": scene.start_ns + round(ev.end_s * NS_PER_SECOND),
                "start_s": ev.start_s,
                "end_s": ev.end_s,
                "position": [round(c, 6) for c in pose.position],
            }
        )
    return {
        "format": GROUND_TRUTH_FORMAT,
        "seed": scene.seed,
        "start_ns": scene.start_ns,
        "duration_s": scene.duration_s,
        "fps": scene.fps,
        "width": scene.width,
        "height": scene.height,
        "frame_count": scene.frame_count,
        "image_topic": image_topic,
        "odom_topic": odom_topic,
        "frames": {
            "map": scene.map_frame,
            "odom": scene.odom_frame,
            "base": scene.base_frame,
            "camera": scene.camera_frame,
        },
        "events": events,
    }


def _odometry_at(scene: SyntheticScene, times_s: Iterable[float]) -> Iterator[Pose]:
    """The odometry pose nearest each time (times in any order)."""
    samples = list(synthetic_odometry(scene))
    for t in times_s:
        stamp = scene.start_ns + round(t * NS_PER_SECOND)
        yield min(samples, key=lambda s: abs(s.stamp_ns - stamp)).pose


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
        for i, sample in enumerate(synthetic_odometry(scene)):
            p = sample.pose
            point = t["geometry_msgs/msg/Point"](x=p.x, y=p.y, z=p.z)
            quat = t["geometry_msgs/msg/Quaternion"](x=p.qx, y=p.qy, z=p.qz, w=p.qw)
            msg = t["nav_msgs/msg/Odometry"](
                header=header(sample.stamp_ns, p.frame_id, i),
                child_frame_id=sample.child_frame_id,
                pose=t["geometry_msgs/msg/PoseWithCovariance"](
                    pose=t["geometry_msgs/msg/Pose"](position=point, orientation=quat),
                    covariance=np.zeros(36, np.float64),
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
