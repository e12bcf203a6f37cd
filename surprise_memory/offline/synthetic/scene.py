"""The scene of a synthetic recording: scripted events, odometry, rendering, ground truth.

A robot drives along a path while its camera watches a wide scene (sky, ground, buildings;
textures drawn from ``seed``). Scripted events change what the camera sees:

* ``object_appears``: a coloured object appears in the scene and stays;
* ``light_change``: the light dims (or, the next time, comes back) over a short ramp;
* ``camera_pan``: the robot turns 90 degrees to the left, so the camera pans;
* ``person_crosses``: a person-like shape walks across the image;
* ``panel_passes``: the same striped panel slides into view, stays, and slides out again,
  identical every time (a re-appearing subject, like an automatic door on a patrol route;
  :func:`recurring_events` scripts it N times among M novel events).

:func:`frame_signature` is a small deterministic embedding of any frame (a colour
thumbnail), free of ground truth, for evaluations that must not depend on what random
model weights happen to separate.

Everything is a pure function of the :class:`SyntheticScene` (seed included): the same
scene gives the same pixels, stamps and poses on every machine, and any frame can be
rendered on its own (:func:`render_frame`). Frames are small (128x96 by default) and come
at a fixed rate; the odometry stream comes at its own rate.

Nothing here writes files: frames in memory (:func:`synthetic_frames`), odometry
(:func:`synthetic_odometry`) and the ground truth as a JSON-ready dict
(:func:`ground_truth`); :mod:`.recording` writes them.

The event kinds and scripts (:class:`ScriptedEvent`, :func:`default_events`, ...) are in
:mod:`.events`, re-exported here.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import Pose
from surprise_memory.offline.synthetic.events import (
    EVENT_KINDS,
    RECURRING_KIND,
    ScriptedEvent,
    default_events,
    model_events,
    recurring_events,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "DIMMING_AFTER_S",
    "EVENT_KINDS",
    "GROUND_TRUTH_FORMAT",
    "MODEL_SCENE",
    "QUIET_SWAY_PX",
    "RECURRING_KIND",
    "OdometrySample",
    "ScriptedEvent",
    "SyntheticScene",
    "default_events",
    "frame_signature",
    "ground_truth",
    "model_events",
    "model_scene",
    "recurring_events",
    "render_frame",
    "synthetic_frames",
    "synthetic_odometry",
]

GROUND_TRUTH_FORMAT = "surprise_memory.offline.synthetic.ground_truth/1"
"""Value of the ``format`` key of the ground-truth JSON."""

_FOV_RAD = math.radians(60.0)  # horizontal field of view of the virtual camera
_DIM = 0.55  # light factor after a dimming light change

DIMMING_AFTER_S = 1.5
"""A light is *dimming* from its change's start until this long after its end (the captions'
``dimming`` fact, and the flicker of ``SyntheticScene(flicker=True)``)."""

QUIET_SWAY_PX = 0.5
"""``sway_px`` of the scenes the ``synthetic-trained-tiny`` models are measured on: at the
default 1.5 px the sway alone makes the shipped gate decide about 7 events in 60 s
of a scene without events (issue 28, benchmarks/RESULTS.md)."""

MODEL_SCENE: dict[str, Any] = {
    "sway_px": QUIET_SWAY_PX,
    "flicker": True,
    "abrupt_pan": True,
    "person_from": 0.45,
}
"""The :class:`SyntheticScene` options of the scenes the ``synthetic-trained-tiny`` models
are measured on (``make demo``, their benchmark and tests; :func:`model_scene`): a quiet
camera, and every event visible in single frames from its scripted start (the light's
flicker, the pan's blur, the person stepping out near the middle of V-JEPA-2's centre
crop). Training scenes are the same but for where the person steps out
(:data:`~.training.TRAINING_PERSON_FROM`). The other scenes keep the defaults (issue 28,
benchmarks/RESULTS.md)."""


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
        sway_px: Amplitude, in pixels, of the camera's slow sway (a 7 s period, so nothing
            is frozen). With the scorer's W = 64 frames at 10 fps (6.4 s, shorter than the
            period) a 1.5 px sway is itself surprising: the gate fires about once a period
            on a scene without events. :data:`QUIET_SWAY_PX` is the quieter camera of the
            scenes the ``synthetic-trained-tiny`` models are measured on.
        flicker: While a light dims (from its start to :data:`DIMMING_AFTER_S` after its
            end), the lamps flicker: horizontal bands roll over the image, fading in and
            out. A cue that shows the dimming in single frames, during it only (a fully dim
            frame later looks like any dim frame), for the scenes of the trained models.
        abrupt_pan: A camera pan turns at one speed from its start to its end (not eased
            in and out), and each frame is blurred by the motion over its exposure (one
            frame interval): the pan shows from its first frame, in single frames.
        person_from: Where a crossing person is at the crossing's start, in frame widths
            from the left edge; it walks to 1.2 by the end. -0.2 (default): off-screen,
            entering from the left; V-JEPA-2's centre crop (the shortest edge scaled to
            292/256 of the crop) cuts 17 % of each side of a 4:3 frame, so the encoder sees
            the person about 1 s after the start. 0.25: stepping out inside that crop,
            near its left edge; 0.45: near its middle.
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
    sway_px: float = 1.5
    flicker: bool = False
    abrupt_pan: bool = False
    person_from: float = -0.2
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
            ("sway_px", self.sway_px, 0 <= self.sway_px <= 100, "in [0, 100]"),
            ("person_from", self.person_from, -1 <= self.person_from < 1.2, "in [-1, 1.2)"),
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
    """Heading at ``t`` s: +90 degrees per camera pan, eased (or, abrupt, linear) over it."""
    yaw = 0.0
    for ev in scene.scripted_events:
        if ev.kind == "camera_pan" and t >= ev.start_s:
            span = ev.end_s - ev.start_s
            x = 1.0 if span <= 0 else (t - ev.start_s) / span
            done = min(1.0, x) if scene.abrupt_pan else _smoothstep(x)
            yaw += (math.pi / 2) * done
    return yaw


def _panning(scene: SyntheticScene, t: float) -> bool:
    return any(
        ev.kind == "camera_pan" and ev.start_s < t <= ev.end_s for ev in scene.scripted_events
    )


def _person_x(scene: SyntheticScene, event: ScriptedEvent, t: float) -> float:
    """Image x (pixels) of a crossing person's centre at ``t`` s (during ``event``)."""
    progress = (t - event.start_s) / max(event.end_s - event.start_s, 1e-9)
    return scene.width * (scene.person_from + (1.2 - scene.person_from) * progress)


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
    sway = scene.sway_px * math.sin(2 * math.pi * t / 7.0)  # a little shake: nothing frozen
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


def _panel(img: FloatImage, scene: SyntheticScene, progress: float) -> None:
    """The recurring panel: slides in from the right over the first quarter, out over the last.

    Drawn in image coordinates with fixed colours, so every pass looks the same wherever
    the camera points.
    """
    w, h = scene.width, scene.height
    shown = _smoothstep(min(progress, 1.0 - progress) * 4.0)  # 0 -> 1 -> 0
    width = 0.4 * w * shown
    x0 = w - width
    stripe = max(2.0, 0.05 * w)
    k = 0
    x = x0
    while x < w:
        color = (235.0, 200.0, 30.0) if k % 2 == 0 else (30.0, 30.0, 40.0)
        _rect(img, (x, 0.1 * h, min(x + stripe, w), 0.9 * h), color)
        x += stripe
        k += 1


def frame_signature(frame: Frame, grid: tuple[int, int] = (8, 6)) -> npt.NDArray[np.float64]:
    """A small deterministic embedding of a frame: its colour thumbnail, values in [0, 1].

    The image is area-averaged onto a ``grid`` (columns, rows) of cells, each cell giving
    its mean red, green and blue. It knows nothing of the scripted events, so it is an
    honest, model-free signal for evaluations on synthetic recordings (the tiny random
    V-JEPA-2 preset carries no learned meaning).

    Args:
        frame: Any RGB frame at least ``grid`` pixels in size.
        grid: Cells across and down.

    Returns:
        A vector of ``3 * columns * rows`` values.

    Raises:
        ConfigError: The frame is smaller than the grid.

    """
    cols, rows = grid
    h, w = frame.rgb.shape[:2]
    if h < rows or w < cols or cols < 1 or rows < 1:
        raise ConfigError(f"frame of {w}x{h} pixels cannot be averaged onto a {cols}x{rows} grid")
    img = frame.rgb.astype(np.float64)
    ys = np.linspace(0, h, rows + 1).astype(int)
    xs = np.linspace(0, w, cols + 1).astype(int)
    cells = [
        img[ys[r] : ys[r + 1], xs[c] : xs[c + 1]].mean(axis=(0, 1))
        for r in range(rows)
        for c in range(cols)
    ]
    return np.concatenate(cells) / 255.0


def _flicker(scene: SyntheticScene, t: float) -> npt.NDArray[np.float32] | float:
    """Per-row light factor while a light dims (rolling bands fading in and out), else 1."""
    dim = True
    for ev in scene.scripted_events:
        if ev.kind != "light_change":
            continue
        end = ev.end_s + DIMMING_AFTER_S
        if dim and ev.start_s <= t <= end:
            amplitude = 0.3 * math.sin(math.pi * (t - ev.start_s) / (end - ev.start_s))
            rows = np.arange(scene.height, dtype=np.float32) / scene.height
            bands = 1.0 + amplitude * np.sin(2 * math.pi * (4.0 * rows + 1.5 * t))
            return bands.astype(np.float32)[:, None, None]
        dim = not dim
    return 1.0


def render_frame(scene: SyntheticScene, index: int, *, cues: bool = True) -> Frame:
    """Render frame ``index`` of the recording (any index, in any order).

    ``cues=False`` renders the same frame without the pan's motion blur and the lamps'
    flicker (the same view, light level and sensor noise): the cue-free twin with which the
    embedder's training tells a cue from the view it shows on (:mod:`.training`).

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
    if cues and scene.abrupt_pan and _panning(scene, t):
        # motion blur: the view over the exposure (one frame interval), a sample per pixel
        x_start = _camera_x(scene, t - 1.0 / scene.fps)
        samples = max(2, math.ceil(abs(x0 - x_start)))
        for x in np.linspace(x_start, x0, samples)[:-1]:
            img += world[:, (np.arange(w) + math.floor(x)) % world.shape[1]]
        img /= samples
    for ev in scene.scripted_events:
        if ev.kind == "person_crosses" and ev.start_s <= t <= ev.end_s:
            cx = _person_x(scene, ev, t)
            _person(img, cx, scene, phase=8.0 * (t - ev.start_s), color=(150.0, 40.0, 40.0))
        elif ev.kind == RECURRING_KIND and ev.start_s <= t <= ev.end_s:
            _panel(img, scene, (t - ev.start_s) / max(ev.end_s - ev.start_s, 1e-9))
    img *= light * _flicker(scene, t) if cues and scene.flicker else light
    noise = np.random.default_rng([scene.seed, 2, index]).normal(0.0, scene.noise, img.shape)
    rgb = np.clip(img + noise, 0, 255).astype(np.uint8)
    return Frame(rgb=rgb, stamp_ns=stamp, frame_id=scene.camera_frame)


def model_scene(seed: int, duration_s: float = 60.0) -> SyntheticScene:
    """A scene of the ``synthetic-trained-tiny`` models (:func:`model_events`, :data:`MODEL_SCENE`).

    The demo's, the benchmark's and the tests' held-out scenes.
    """
    return SyntheticScene(
        seed=seed, duration_s=duration_s, events=model_events(duration_s), **MODEL_SCENE
    )


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
