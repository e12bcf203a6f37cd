"""A long-horizon synthetic world for the QA experiment: a route through many places.

The robot drives a route of 20 to 60 minutes through a site of many places: a *leg* is a
street (a place: a panorama of its own, drawn from the leg's seed), driven straight at
0.5 m/s for one to two and a half minutes; at the end of a leg the robot is in the next
street. On the way, dozens of scripted events happen at known places and times:

* a person crosses (4 s), several times;
* a ball appears and stays (at most six a world, each in a colour name of its own, never
  grey, so "the blue ball" names one object and two of the eight names are never seen);
* the lights go down (a dimming with its flicker, at most one per leg: the street stays
  dim until the next);
* the robot turns 90 degrees left (a camera pan, 3 s), which changes its heading for the
  rest of the route;

and long quiet stretches: a quarter of the legs have no event at all; on the others, two to
five events take one 15-second slot each (drawn among the leg's slots) and start in its
first 10 s, so two events start at least 5 s apart.

Each leg is a :class:`~.scene.SyntheticScene` with the ``synthetic-trained-tiny`` models'
options (:data:`~.scene.MODEL_SCENE`: a quiet camera, events visible in single frames)
and leg-local event times, rendered by :func:`~.scene.render_frame` unchanged: nothing
here changes what the models were trained on. :class:`QaWorld` puts the legs end to end:
one stream of frames at 10 fps with world stamps (:meth:`QaWorld.frames`), the robot's
odometry in one odom frame (each leg's motion rotated and moved to where the last one
ended, :meth:`QaWorld.odometry`), and the ground truth (:meth:`QaWorld.ground_truth`):
every event's kind, colour, start, end and the robot's position at its start, and every
leg's start (a new place: the first frame of a new street differs from the last of the
old one, as when a robot turns a corner).

Everything is a pure function of ``(seed, duration_s)`` (:func:`qa_world`). Leg seeds are
``100000 + 10000 * seed + 100 * leg + k``, far from the models' training seeds (100 on);
``k`` is the first draw whose ball has a colour not yet used in the world.
:mod:`surprise_memory.evaluation.qa.world_questions` asks its questions.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import Pose
from surprise_memory.offline.synthetic.captions import ball_colours
from surprise_memory.offline.synthetic.scene import (
    MODEL_SCENE,
    ScriptedEvent,
    SyntheticScene,
    render_frame,
    synthetic_odometry,
)
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "QA_EVENT_SPANS",
    "QA_WORLD_FORMAT",
    "QaLeg",
    "QaWorld",
    "qa_world",
]

QA_WORLD_FORMAT = "surprise_memory.offline.synthetic.qa_world/1"
"""Value of the ``format`` key of :meth:`QaWorld.ground_truth`."""

QA_EVENT_SPANS = {
    "person_crosses": 4.0,
    "object_appears": 0.0,
    "light_change": 0.5,
    "camera_pan": 3.0,
}
"""Seconds each event kind of the world lasts."""

_KIND_WEIGHTS = (
    ("person_crosses", 0.35),
    ("object_appears", 0.25),
    ("light_change", 0.2),
    ("camera_pan", 0.2),
)
_FPS = 10.0
_LEG_S = (60, 150)  # whole seconds, so legs start on frame boundaries
_QUIET_LEGS = 0.25  # share of legs without any event
_EVENTS_PER_LEG = (2, 5)  # on the other legs, as many as fit
_MAX_BALLS = 6  # of the 8 colour names: at least two are never seen (true negatives)
_GAP_S = 15.0  # one event per slot of this length; it starts in the slot's first 10 s
_EDGE_S = (12.0, 8.0)  # no event this close to a leg's start / end
_FIRST_S = 25.0  # the first leg's events wait for the encoder's and the gate's warm-up
_SEED_BASE = 100_000
_TRIES = 100
_START_NS = 1_700_000_000 * NS_PER_SECOND


@dataclass(frozen=True)
class QaLeg:
    """One leg of the route: a place driven straight through, with its events.

    Attributes:
        scene: The leg as a scene: its seed, its length, its events in leg-local seconds.
        start_s: When the leg starts, seconds from the world's start.
        first_frame: Index of its first frame in the world's stream.
        x: Where the leg starts, metres (odom frame).
        y: Where the leg starts, metres.
        yaw: The robot's heading at the start, radians.

    """

    scene: SyntheticScene
    start_s: float
    first_frame: int
    x: float
    y: float
    yaw: float

    def to_world(self, pose: Pose, frame_id: str) -> Pose:
        """A leg-local odometry pose in the world's odom frame."""
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        yaw = self.yaw + 2.0 * math.atan2(pose.qz, pose.qw)
        return Pose(
            self.x + c * pose.x - s * pose.y,
            self.y + s * pose.x + c * pose.y,
            0.0,
            0.0,
            0.0,
            math.sin(yaw / 2),
            math.cos(yaw / 2),
            frame_id,
        )


@dataclass(frozen=True)
class QaWorld:
    """The world's route: legs end to end (see the module docstring).

    Attributes:
        seed: The world's seed.
        duration_s: Its length, seconds.
        legs: The legs, in order.
        start_ns: Stamp of the first frame.
        fps: Frame rate.

    """

    seed: int
    duration_s: float
    legs: tuple[QaLeg, ...]
    start_ns: int = _START_NS
    fps: float = _FPS

    @property
    def frame_count(self) -> int:
        """Frames in the whole stream."""
        last = self.legs[-1]
        return last.first_frame + last.scene.frame_count

    def frame_stamp(self, index: int) -> int:
        """Stamp of world frame ``index``, int ns."""
        return self.start_ns + round(index * NS_PER_SECOND / self.fps)

    def frames(self) -> Iterator[Frame]:
        """Every frame of the route, in order, with world stamps."""
        for leg in self.legs:
            for k in range(leg.scene.frame_count):
                frame = render_frame(leg.scene, k)
                stamp = self.frame_stamp(leg.first_frame + k)
                yield Frame(rgb=frame.rgb, stamp_ns=stamp, frame_id=frame.frame_id)

    def odometry(self) -> Iterator[tuple[int, Pose]]:
        """``(stamp_ns, pose of base_link in odom)`` along the route, stamps increasing."""
        for i, leg in enumerate(self.legs):
            last_leg = i == len(self.legs) - 1
            offset = self.start_ns + round(leg.start_s * NS_PER_SECOND) - leg.scene.start_ns
            for sample in synthetic_odometry(leg.scene):
                local_s = leg.scene.seconds(sample.stamp_ns)
                if local_s >= leg.scene.duration_s and not last_leg:
                    continue  # the next leg's first sample is this place and time
                yield sample.stamp_ns + offset, leg.to_world(sample.pose, "odom")

    def ground_truth(self) -> dict[str, Any]:
        """The world's ground truth as a JSON-ready dict.

        Keys: ``format``, ``seed``, ``duration_s``, ``start_ns``, ``fps``, ``frame_count``,
        ``legs`` (``start_s``, ``seed``, ``position``) and ``events``: each with ``kind``,
        ``colour`` (balls; else None), ``start_s``/``end_s`` (world seconds), ``leg`` and
        ``position`` (the robot's [x, y, z] in odom at the start, metres).
        """
        samples = list(self.odometry())
        stamps = np.array([s for s, _ in samples], dtype=np.int64)

        def where(t_s: float) -> list[float]:
            i = int(np.abs(stamps - (self.start_ns + round(t_s * NS_PER_SECOND))).argmin())
            return [round(c, 6) for c in samples[i][1].position]

        events = []
        for j, leg in enumerate(self.legs):
            colours = dict(ball_colours(leg.scene))
            for ev in leg.scene.scripted_events:
                start = leg.start_s + ev.start_s
                events.append(
                    {
                        "kind": ev.kind,
                        "colour": colours.get(ev.start_s) if ev.kind == "object_appears" else None,
                        "start_s": round(start, 6),
                        "end_s": round(leg.start_s + ev.end_s, 6),
                        "leg": j,
                        "position": where(start),
                    }
                )
        return {
            "format": QA_WORLD_FORMAT,
            "seed": self.seed,
            "duration_s": self.duration_s,
            "start_ns": self.start_ns,
            "fps": self.fps,
            "frame_count": self.frame_count,
            "legs": [
                {"start_s": leg.start_s, "seed": leg.scene.seed, "position": where(leg.start_s)}
                for leg in self.legs
            ],
            "events": events,
        }


def qa_world(seed: int, duration_s: float = 1200.0, *, max_balls: int = _MAX_BALLS) -> QaWorld:
    """The QA world of ``seed``, ``duration_s`` long (see the module docstring).

    Args:
        seed: The world's seed (>= 0).
        duration_s: Length in seconds; whole seconds, at least 60 (tests use a few
            minutes; the benchmark 20).
        max_balls: Most balls that show up (0: none; their slots turn the robot, as
            when a world has its balls). The second round's world
            (:mod:`.qa_places`) parks its balls along the streets instead.

    Raises:
        ConfigError: A bad seed or length.

    """
    if (
        seed < 0
        or duration_s < 60
        or duration_s != int(duration_s)
        or duration_s > 86_400
        or not 0 <= max_balls <= _MAX_BALLS
    ):
        raise ConfigError(
            f"qa_world(seed={seed}, duration_s={duration_s}, max_balls={max_balls}): need "
            f"seed >= 0, a whole number of seconds in [60, 86400] and max_balls in "
            f"[0, {_MAX_BALLS}]"
        )
    rng = np.random.default_rng([seed, 40])
    lengths = _leg_lengths(rng, int(duration_s))
    used: set[str] = set()
    legs: list[QaLeg] = []
    x = y = yaw = 0.0
    t = 0
    for j, length in enumerate(lengths):
        events = _leg_events(rng, length, first=j == 0, balls_left=max_balls - len(used))
        scene = _leg_scene(seed, j, length=length, t=t, events=events, used=used)
        leg = QaLeg(scene, float(t), round(t * _FPS), x, y, yaw)
        legs.append(leg)
        last = list(synthetic_odometry(scene))[-1].pose
        end = leg.to_world(last, "odom")
        x, y, yaw = end.x, end.y, 2.0 * math.atan2(end.qz, end.qw)
        t += length
    return QaWorld(seed, float(duration_s), tuple(legs))


def _leg_lengths(rng: np.random.Generator, total: int) -> list[int]:
    lengths: list[int] = []
    left = total
    while left > 0:
        length = int(rng.integers(_LEG_S[0], _LEG_S[1] + 1))
        if left - length < _LEG_S[0]:  # the rest would be too short for a leg: take it all
            length = left
        lengths.append(length)
        left -= length
    return lengths


def _leg_events(
    rng: np.random.Generator, length: int, *, first: bool, balls_left: int
) -> list[ScriptedEvent]:
    if rng.random() < _QUIET_LEGS:
        return []
    lo = _FIRST_S if first else _EDGE_S[0]
    hi = length - _EDGE_S[1] - max(QA_EVENT_SPANS.values())
    slots = int((hi - lo) // _GAP_S) + 1
    if slots < 1:
        return []
    count = int(rng.integers(min(_EVENTS_PER_LEG[0], slots), min(_EVENTS_PER_LEG[1], slots) + 1))
    picks = sorted(rng.choice(slots, size=count, replace=False))
    kinds = [kind for kind, _ in _KIND_WEIGHTS]
    weights = np.array([weight for _, weight in _KIND_WEIGHTS])
    events: list[ScriptedEvent] = []
    lights = 0
    for slot in picks:
        start = lo + slot * _GAP_S + float(rng.uniform(0.0, _GAP_S - 5.0))
        start = round(min(start, hi), 1)
        kind = str(rng.choice(kinds, p=weights / weights.sum()))
        if kind == "light_change":
            lights += 1
            if lights > 1:  # one dimming per street: a second would bring the light back
                kind = "person_crosses"
        elif kind == "object_appears":
            balls_left -= 1
            if balls_left < 0:  # the world has its balls: the rest turn the robot
                kind = "camera_pan"
        events.append(ScriptedEvent(kind, start, start + QA_EVENT_SPANS[kind]))
    return events


def _leg_scene(
    seed: int, leg: int, *, length: int, t: int, events: list[ScriptedEvent], used: set[str]
) -> SyntheticScene:
    """The leg's scene: the first seed whose ball (if any) has a colour of its own."""
    start_ns = _START_NS + t * NS_PER_SECOND
    balls = sum(ev.kind == "object_appears" for ev in events)
    for k in range(_TRIES):
        scene = SyntheticScene(
            seed=_SEED_BASE + 10_000 * seed + 100 * leg + k,
            duration_s=float(length),
            events=tuple(events),
            start_ns=start_ns,
            **MODEL_SCENE,
        )
        colours = [c for _, c in ball_colours(scene)]
        if not balls or (
            len(set(colours)) == len(colours) and "grey" not in colours and not used & set(colours)
        ):
            used.update(colours)
            return scene
    # every colour name taken (a very long world): this leg's balls become crossings
    others = tuple(
        ScriptedEvent("person_crosses", ev.start_s, ev.start_s + QA_EVENT_SPANS["person_crosses"])
        if ev.kind == "object_appears"
        else ev
        for ev in events
    )
    return _leg_scene(seed, leg, length=length, t=t, events=list(others), used=used)
