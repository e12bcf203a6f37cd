"""What a synthetic frame shows, in words: the captions the small embedder is trained on.

Every caption comes from the scene's ground truth (:mod:`.scene`), never from pixels: for
frame ``index`` of a :class:`~surprise_memory.offline.synthetic.scene.SyntheticScene`,
:func:`frame_facts` lists the facts in view (a coloured ball, a person walking, the light
going down or dim, the striped panel, an empty street), and each fact has several phrasings.

Phrasings are split in two: :data:`TRAIN_PHRASES` are the only sentences training sees;
:data:`HELD_OUT_QUERIES` are paraphrases never used in training, one list per scripted event
kind, for the retrieval tests and the benchmark (a sentence that finds an event's episode
must do so without having been learnt by heart).
"""

from __future__ import annotations

import colorsys
import math

import numpy as np

from surprise_memory.offline.synthetic.scene import (
    DIMMING_AFTER_S,
    RECURRING_KIND,
    SyntheticScene,
    _camera_x,
    _panning,
    _person_x,
)

__all__ = [
    "FACTS",
    "HELD_OUT_QUERIES",
    "TRAIN_PHRASES",
    "ball_colours",
    "colour_name",
    "frame_facts",
]

FACTS = ("ball", "person", "dimming", "pan", "panel", "street")
"""Fact keys of :func:`frame_facts` (``ball`` also comes as ``ball:<colour>``)."""

TRAIN_PHRASES: dict[str, tuple[str, ...]] = {
    "ball": (
        "a {c} ball",
        "a round {c} object in the scene",
        "a {c} sphere on the ground",
        "there is a {c} ball",
        "a coloured object",
        "a bright round thing",
        "a ball appears",
        "a colourful round object",
    ),
    "person": (
        "a person walking",
        "someone walks across the image",
        "a pedestrian in the street",
        "a man in a red shirt walking",
        "a human figure crossing",
        "a person in the picture",
        "somebody crosses the road",
        "people walking by",
    ),
    "dimming": (
        "the light is dimming",
        "the scene gets darker",
        "the lights are going down",
        "lighting fades",
        "it is getting dark",
        "the lights go dim",
        "the room is getting darker",
        "flickering lights",
    ),
    "pan": (
        "the camera pans",
        "a camera pan to the left",
        "the camera is turning",
        "the robot turns to the left",
        "the view sweeps sideways",
        "a quick pan",
        "a blurred panning view",
        "the robot is rotating",
        "motion blur while turning",
    ),
    "panel": (
        "a striped panel",
        "yellow and black stripes",
        "a striped sign slides in",
        "a hazard panel",
    ),
    "street": (
        "an empty street",
        "buildings and sky",
        "nothing special",
        "a quiet road with houses",
        "a daytime street view",
    ),
}
"""Training phrasings per fact; ``{c}`` is the ball's colour name."""

HELD_OUT_QUERIES: dict[str, tuple[str, ...]] = {
    "object_appears": ("a colourful ball", "where a ball showed up", "a coloured sphere"),
    "light_change": ("when the lights went down", "the room became darker", "lights dimmed"),
    "person_crosses": ("a person crossing", "somebody walking past", "a pedestrian crossing"),
    "camera_pan": ("the camera turning", "the robot turned left", "a pan of the view"),
    RECURRING_KIND: ("a panel with stripes", "the striped board", "yellow black stripes"),
}
"""Paraphrases per event kind that no training caption uses (checked by the tests)."""

_HUES = (
    (0.0, "red"),
    (30.0, "orange"),
    (58.0, "yellow"),
    (120.0, "green"),
    (180.0, "cyan"),
    (230.0, "blue"),
    (280.0, "purple"),
    (320.0, "pink"),
    (360.0, "red"),
)


def colour_name(rgb: np.ndarray) -> str:
    """The nearest of a few colour names for an RGB triple in [0, 255] (grey when pale)."""
    r, g, b = (float(v) / 255.0 for v in rgb[:3])
    h, _, s = colorsys.rgb_to_hls(r, g, b)
    if s < 0.15:
        return "grey"
    deg = h * 360.0
    return min(_HUES, key=lambda item: abs(item[0] - deg))[1]


def ball_colours(scene: SyntheticScene) -> list[tuple[float, str]]:
    """(start_s, colour name) of each appearing object, as :func:`render_frame` draws it."""
    colors = np.random.default_rng([scene.seed, 1])
    out = []
    for ev in scene.scripted_events:
        color = colors.uniform(0, 1, 3)
        if ev.kind == "object_appears":
            vivid = (0.25 + 0.75 * (color / max(color.max(), 1e-6))) * 255
            out.append((ev.start_s, colour_name(vivid)))
    return out


def frame_facts(scene: SyntheticScene, index: int) -> list[str]:
    """The facts frame ``index`` shows, from the ground truth (at least one: ``street``).

    ``ball:<colour>`` while an appeared object is in view, ``person`` while the walker is
    in the image, ``dimming`` from a dimming light change's start until 1.5 s after its end,
    ``pan`` while the camera pans in a scene that blurs its pans (``abrupt_pan``: a
    single frame shows the turn), ``panel`` while the
    striped panel shows; ``street`` when none of these (lit or dim:
    the light level alone is no fact, so the embedder learns objects, not brightness).
    """
    t = scene.seconds(scene.frame_stamp(index))
    w = scene.width
    world_w = 4 * w
    facts: list[str] = []
    x_now = math.floor(_camera_x(scene, t))
    for start, colour in ball_colours(scene):
        if t < start:
            continue
        wx = (_camera_x(scene, start) + 0.62 * w) % world_w
        x_img = (wx - x_now) % world_w
        if 0.05 * w < x_img < 0.95 * w:
            facts.append(f"ball:{colour}")
    dim = True
    for ev in scene.scripted_events:
        if ev.kind == "person_crosses" and ev.start_s <= t <= ev.end_s:
            if -0.05 * w < _person_x(scene, ev, t) < 1.05 * w:
                facts.append("person")
        elif ev.kind == RECURRING_KIND and ev.start_s <= t <= ev.end_s:
            progress = (t - ev.start_s) / max(ev.end_s - ev.start_s, 1e-9)
            if 0.05 < progress < 0.95:
                facts.append("panel")
        elif ev.kind == "light_change" and t >= ev.start_s:
            if dim and t <= ev.end_s + DIMMING_AFTER_S:
                facts.append("dimming")
            dim = not dim
    if scene.abrupt_pan and _panning(scene, t):
        facts.append("pan")
    return facts or ["street"]


def fact_key(fact: str) -> str:
    """``ball:red`` -> ``ball``; other facts unchanged."""
    return fact.split(":", 1)[0]


def phrase(fact: str, rng: np.random.Generator) -> str:
    """One training phrasing of ``fact``, drawn with ``rng``."""
    key, _, colour = fact.partition(":")
    text = TRAIN_PHRASES[key][int(rng.integers(len(TRAIN_PHRASES[key])))]
    return text.format(c=colour or "coloured")
