"""The QA world's second round: things that stand still along the streets, and a second pass.

OC-NaVQA asks mostly about what stands still ("where is the nearest ...", "is there a ...",
"what colour was ..."); the first QA world (:mod:`.qa_world`) has only scripted events,
the surprise gate's own targets. :func:`qa_places_world` keeps that world's route and
events for the first part of the run and adds:

* **landmarks** that never "happen": a *parked ball* (a coloured ball standing by the
  street from before the robot arrives; each in a colour name of its own) or a *striped
  sign* (a yellow-and-black board on the street), one or two on most streets of the first pass,
  coming into view from the right at a drawn time as the view drifts, and leaving at the
  street's end or at a turn. They are the two things the ``synthetic-trained-tiny``
  embedder was taught to name (a ball, the striped panel); doors and shapes it never saw
  would measure the embedder, not the memory. The first pass has no ball events
  (``qa_world(max_balls=0)``), so "a ball" names a parked one;
* **a second pass**: after the first half of the run the robot is back at
  the start of the first street (a pose jump, as after being carried back) and drives the
  streets again in order, along the same path (the same turns), with no other event,
  until the run ends. On the way back a landmark
  *stays*, is *removed*, or is *moved* (it stands in the next street driven again
  instead): the ground truth of "is it still there?".

Landmarks are drawn over each rendered frame where the view shows them (after the light
and the sensor noise: a landmark is not dimmed). Everything is a pure function of
``(seed, duration_s)``. :mod:`surprise_memory.evaluation.qa.place_questions` asks about it.
"""

from __future__ import annotations

import colorsys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from surprise_memory.errors import ConfigError
from surprise_memory.memory.pose import Pose
from surprise_memory.offline.synthetic.captions import _HUES
from surprise_memory.offline.synthetic.qa_world import QaLeg, QaWorld, qa_world
from surprise_memory.offline.synthetic.scene import SyntheticScene, _camera_x, render_frame
from surprise_memory.perception.frames import Frame
from surprise_memory.stamps import NS_PER_SECOND

__all__ = ["LANDMARK_KINDS", "QA_PLACES_FORMAT", "Landmark", "PlacesWorld", "qa_places_world"]

QA_PLACES_FORMAT = "surprise_memory.offline.synthetic.qa_places/1"
"""Value of the ``format`` key of :meth:`PlacesWorld.ground_truth`."""

LANDMARK_KINDS = ("parked ball", "striped sign")
"""What a landmark is (the words the questions name it by)."""

FATES = ("stays", "removed", "moved")
"""What happens to a landmark before the second pass."""

_FIRST_PASS = 0.5  # share of the run driven the first time
_LANDMARK_SHARE = 0.8  # streets of the first pass with a landmark
_FATE_WEIGHTS = (0.5, 0.25, 0.25)
_ENTERS_S = (4.0, 0.45)  # enters the view between 4 s and this share of the street
_WARM_UP_S = 30.0
_SECOND_SHARE = 0.5  # streets with a second landmark, entering this much later:
_SECOND_AFTER_S = 25.0
_SAMPLE_S = 0.5  # visibility is sampled at this step
_PLACE_AFTER_S = 5.0  # a sighting's place: where the robot was this long into it
_MIN_REVISIT_S = 20


@dataclass(frozen=True)
class Landmark:
    """A thing standing by a street of the first pass.

    Attributes:
        id: ``lm<n>``.
        kind: One of :data:`LANDMARK_KINDS`.
        colour: A parked ball's colour name; None for a sign.
        leg: The first-pass street it stands in.
        enters_s: Leg-local time it comes into view from the right.
        fate: One of :data:`FATES`.
        moved_to: The street it stands in on the second pass when moved; else None.

    """

    id: str
    kind: str
    colour: str | None
    leg: int
    enters_s: float
    fate: str
    moved_to: int | None = None


def _rgb(colour: str) -> tuple[float, float, float]:
    hue = next(deg for deg, name in _HUES if name == colour)
    r, g, b = colorsys.hls_to_rgb(hue / 360.0, 0.5, 0.9)
    return (255.0 * r, 255.0 * g, 255.0 * b)


@dataclass(frozen=True)
class PlacesWorld:
    """The second round's world (see the module docstring).

    Attributes:
        world: The route: the first pass's legs, then the second pass's.
        first_pass_legs: How many legs the first pass has.
        revisits: For each second-pass leg, the first-pass leg it drives again.
        landmarks: The landmarks.

    """

    world: QaWorld
    first_pass_legs: int
    revisits: tuple[int, ...]
    landmarks: tuple[Landmark, ...]

    @property
    def seed(self) -> int:
        """The world's seed."""
        return self.world.seed

    @property
    def start_ns(self) -> int:
        """Stamp of the first frame."""
        return self.world.start_ns

    @property
    def frame_count(self) -> int:
        """Frames in the whole stream."""
        return self.world.frame_count

    def odometry(self) -> Iterator[tuple[int, Pose]]:
        """``(stamp_ns, pose)`` along the route (a jump where the second pass starts)."""
        return self.world.odometry()

    def shown(self, leg_index: int) -> list[Landmark]:
        """The landmarks standing in route leg ``leg_index``."""
        if leg_index < self.first_pass_legs:
            return [lm for lm in self.landmarks if lm.leg == leg_index]
        street = self.revisits[leg_index - self.first_pass_legs]
        return [
            lm
            for lm in self.landmarks
            if (lm.leg == street and lm.fate == "stays") or lm.moved_to == street
        ]

    def frames(self) -> Iterator[Frame]:
        """Every frame of the route with the landmarks in view drawn in."""
        for i, leg in enumerate(self.world.legs):
            standing = self.shown(i)
            for k in range(leg.scene.frame_count):
                yield self._render(leg, k, standing)

    def frame(self, index: int) -> Frame:
        """World frame ``index`` alone (as :meth:`frames` yields it).

        Raises:
            ConfigError: ``index`` is outside the stream.

        """
        if not 0 <= index < self.frame_count:
            raise ConfigError(f"frame index {index}: must be in [0, {self.frame_count})")
        i = max(j for j, leg in enumerate(self.world.legs) if leg.first_frame <= index)
        leg = self.world.legs[i]
        return self._render(leg, index - leg.first_frame, self.shown(i))

    def _render(self, leg: QaLeg, k: int, standing: list[Landmark]) -> Frame:
        frame = render_frame(leg.scene, k)
        rgb = frame.rgb
        if standing:
            rgb = rgb.copy()
            t = leg.scene.seconds(leg.scene.frame_stamp(k))
            for lm in standing:
                _draw(rgb, leg.scene, self._anchor(lm), t, lm)
        stamp = self.world.frame_stamp(leg.first_frame + k)
        return Frame(rgb=rgb, stamp_ns=stamp, frame_id=frame.frame_id)

    def _anchor(self, lm: Landmark) -> float:
        """Where ``lm`` stands in its street's panorama, pixels (the same on every pass)."""
        scene = self.world.legs[lm.leg].scene
        return _camera_x(scene, lm.enters_s) + scene.width

    def sightings(self, lm: Landmark) -> list[dict[str, Any]]:
        """Each span in which ``lm`` is in view: route leg, start and end (world seconds)."""
        out = []
        for i in range(len(self.world.legs)):
            if lm in self.shown(i):
                span = self._in_view_span(lm, i)
                if span is not None:
                    out.append(span)
        return out

    def revisit_view(self, lm: Landmark) -> dict[str, Any] | None:
        """When the second pass looks at where ``lm`` stood in its street, had it stayed.

        None when its street is not driven again or the view never reaches the spot.
        """
        if lm.leg not in self.revisits:
            return None
        return self._in_view_span(lm, self.first_pass_legs + self.revisits.index(lm.leg))

    def _in_view_span(self, lm: Landmark, leg_index: int) -> dict[str, Any] | None:
        leg = self.world.legs[leg_index]
        anchor = self._anchor(lm)
        times = np.arange(0.0, leg.scene.duration_s, _SAMPLE_S)
        inside = [_in_view(leg.scene, anchor, float(t)) for t in times]
        if not any(inside):
            return None
        first = inside.index(True)
        last = len(inside) - 1 - inside[::-1].index(True)
        return {
            "leg": leg_index,
            "start_s": leg.start_s + float(times[first]),
            "end_s": leg.start_s + float(times[last]),
        }

    def ground_truth(self) -> dict[str, Any]:
        """The first world's ground truth, with the landmarks and the second pass.

        Added keys: ``first_pass_legs``, ``revisits`` and ``landmarks``. Each landmark:
        ``id``, ``kind``, ``colour``, ``leg``, ``fate``, ``moved_to`` and ``seen``: its
        sightings, each with the robot's ``position`` 5 s into it (its end if shorter);
        ``revisit_view``: when the second pass looks at its spot (:meth:`revisit_view`).
        """
        truth = self.world.ground_truth()
        samples = list(self.world.odometry())
        stamps = np.array([s for s, _ in samples], dtype=np.int64)

        def where(t_s: float) -> list[float]:
            i = int(np.abs(stamps - (self.start_ns + round(t_s * NS_PER_SECOND))).argmin())
            return [round(c, 6) for c in samples[i][1].position]

        landmarks = []
        for lm in self.landmarks:
            seen = [
                {**s, "position": where(min(s["start_s"] + _PLACE_AFTER_S, s["end_s"]))}
                for s in self.sightings(lm)
            ]
            revisit = self.revisit_view(lm)
            landmarks.append(
                {
                    "revisit_view": revisit,
                    "id": lm.id,
                    "kind": lm.kind,
                    "colour": lm.colour,
                    "leg": lm.leg,
                    "fate": lm.fate,
                    "moved_to": lm.moved_to,
                    "seen": seen,
                }
            )
        truth.update(
            format=QA_PLACES_FORMAT,
            first_pass_legs=self.first_pass_legs,
            revisits=list(self.revisits),
            landmarks=landmarks,
        )
        return truth


def _in_view(scene: SyntheticScene, anchor: float, t: float) -> bool:
    """Whether the middle of a landmark anchored at ``anchor`` is in the image at ``t``."""
    x = _image_x(scene, anchor, t) + 0.1 * scene.width
    return 0.0 <= x < scene.width


def _image_x(scene: SyntheticScene, anchor: float, t: float) -> float:
    around = 4.0 * scene.width  # the panorama's width (scene._world)
    x = (anchor - _camera_x(scene, t)) % around
    return x - around if x > around - scene.width else x


def _draw(rgb: np.ndarray, scene: SyntheticScene, anchor: float, t: float, lm: Landmark) -> None:
    w, h = scene.width, scene.height
    x0 = _image_x(scene, anchor, t)
    if lm.kind == "parked ball":
        cx, cy, r = x0 + 0.1 * w, 0.62 * h, 0.16 * h
        yy, xx = np.mgrid[0:h, 0:w]
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
        rgb[mask] = np.array(_rgb(lm.colour or "red"), dtype=np.float32).astype(np.uint8)
        return
    stripe = max(2.0, 0.05 * w)
    k, x = 0, x0
    while x < x0 + 0.2 * w:
        a, b = max(0, round(x)), min(w, round(x + stripe))
        if a < b:
            rgb[round(0.15 * h) : round(0.85 * h), a:b] = (
                (235, 200, 30) if k % 2 == 0 else (30, 30, 40)
            )
        x += stripe
        k += 1


def qa_places_world(seed: int, duration_s: float = 1200.0) -> PlacesWorld:
    """The second round's world of ``seed``, ``duration_s`` long (the module docstring).

    Args:
        seed: The world's seed (>= 0).
        duration_s: Length in seconds; whole seconds, at least 120.

    Raises:
        ConfigError: A bad seed or length.

    """
    if duration_s < 120 or duration_s != int(duration_s):
        raise ConfigError(
            f"qa_places_world(duration_s={duration_s}): need a whole number of seconds >= 120"
        )
    first_s = max(60, round(_FIRST_PASS * duration_s))
    first = qa_world(seed, float(first_s), max_balls=0)
    rng = np.random.default_rng([seed, 47])
    legs = list(first.legs)
    revisits: list[int] = []
    t = first_s
    while duration_s - t >= _MIN_REVISIT_S and len(revisits) < len(first.legs):
        old = first.legs[len(revisits)]
        length = int(min(old.scene.duration_s, duration_s - t))
        if duration_s - t - length < _MIN_REVISIT_S:
            length = int(duration_s - t)  # the rest would be too short for a street
        turns = tuple(  # the same turns, so the same path and views; nothing else
            ev for ev in old.scene.scripted_events if ev.kind == "camera_pan" and ev.end_s <= length
        )
        scene = replace(
            old.scene,
            duration_s=float(length),
            events=turns,
            start_ns=first.start_ns + t * NS_PER_SECOND,
        )
        legs.append(QaLeg(scene, float(t), round(t * first.fps), old.x, old.y, old.yaw))
        revisits.append(len(revisits))
        t += length
    world = QaWorld(seed, float(t), tuple(legs), first.start_ns, first.fps)
    return PlacesWorld(world, len(first.legs), tuple(revisits), _landmarks(rng, first, revisits))


def _landmarks(
    rng: np.random.Generator, first: QaWorld, revisits: list[int]
) -> tuple[Landmark, ...]:
    colours = [name for _, name in _HUES[:-1]]
    rng.shuffle(colours)
    out: list[Landmark] = []
    for j, leg in enumerate(first.legs):
        if rng.random() >= _LANDMARK_SHARE:
            continue
        low = _WARM_UP_S if j == 0 else _ENTERS_S[0]  # after the models' warm-up
        high = _ENTERS_S[1] * leg.scene.duration_s
        if high <= low:
            continue  # a street too short to come by a landmark after the warm-up
        enters = round(float(rng.uniform(low, high)), 1)
        count = 2 if rng.random() < _SECOND_SHARE else 1
        for k in range(count):
            kind = LANDMARK_KINDS[int(rng.integers(len(LANDMARK_KINDS)))]
            colour = None
            if kind == "parked ball":
                if colours:
                    colour = colours.pop()
                else:
                    kind = "striped sign"
            fate, moved_to = "stays", None
            if j in revisits:
                fate = str(rng.choice(FATES, p=np.array(_FATE_WEIGHTS)))
                later = [r for r in revisits if r > j]
                if fate == "moved" and later:
                    moved_to = later[0]
                elif fate == "moved":
                    fate = "removed"
            at = round(enters + k * _SECOND_AFTER_S, 1)
            out.append(Landmark(f"lm{len(out)}", kind, colour, j, at, fate, moved_to))
    return tuple(out)
