"""The scripted events of a synthetic scene: their kinds and the scripts of the scenes.

:class:`ScriptedEvent` is one event in seconds from the start of a recording;
:func:`default_events` (one of each kind), :func:`model_events` (the same, the object last:
the scenes of the ``synthetic-trained-tiny`` models) and :func:`recurring_events` (a panel
passing N times among M novel events) are the scripts :class:`~.scene.SyntheticScene`
plays. Pure data: the rendering is in :mod:`.scene`.
"""

from __future__ import annotations

from dataclasses import dataclass

from surprise_memory.errors import ConfigError

__all__ = [
    "EVENT_KINDS",
    "RECURRING_KIND",
    "ScriptedEvent",
    "default_events",
    "model_events",
    "recurring_events",
]

EVENT_KINDS: dict[str, str] = {
    "object_appears": "a coloured object appears in the scene and stays",
    "light_change": "the light dims (or comes back) over a short ramp",
    "camera_pan": "the robot turns 90 degrees to the left; the camera pans with it",
    "person_crosses": "a person-like shape walks across the image from left to right",
    "panel_passes": "the same striped panel slides into view, stays, and slides out again",
}
"""The scripted event kinds and what each does."""

RECURRING_KIND = "panel_passes"
"""The event kind that looks the same every time it happens (the repeats of a scene)."""
_NOVEL_CYCLE = ("object_appears", "person_crosses", "camera_pan", "light_change")


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


def model_events(duration_s: float) -> tuple[ScriptedEvent, ...]:
    """The events of :func:`model_scene`: one of each kind, the object last.

    At 60 s: pan 15 s, light 27 s, person 36 s, object 48 s. An object *stays*: appearing
    first (as in :func:`default_events`) it is in view in the light's and the pan's
    episodes too, and a sentence about the object cannot tell its episode from theirs by
    any frame. So each event's sight is in its own episode (8 frames within 2 s of the
    trigger) only.
    """
    d = float(duration_s)
    return (
        ScriptedEvent("camera_pan", 0.25 * d, 0.25 * d + min(3.0, 0.08 * d)),
        ScriptedEvent("light_change", 0.45 * d, 0.45 * d + min(0.5, 0.02 * d)),
        ScriptedEvent("person_crosses", 0.60 * d, 0.60 * d + min(4.0, 0.10 * d)),
        ScriptedEvent("object_appears", 0.80 * d, 0.80 * d),
    )


def recurring_events(
    repeats: int, novel: int, *, first_s: float = 10.0, spacing_s: float = 8.0
) -> tuple[ScriptedEvent, ...]:
    """The same panel passing ``repeats`` times among ``novel`` other events.

    Novel events cycle through an object appearing (a new colour and place each time), a
    person crossing, a camera pan and a light change, so up to M = 4 no two novel events
    are of one kind (beyond, the kinds come round again, objects in new colours); the
    repeats are spread evenly among them (repeat first: the first occurrence is new content
    too). Events start every ``spacing_s`` seconds from ``first_s``; a panel stays 2 s, a
    crossing takes 3 s, a pan 2 s, a light change 0.5 s.

    Args:
        repeats: N, passes of the identical panel (>= 1).
        novel: M, other events (>= 0).
        first_s: Start of the first event (leave room for the encoder and gate warm-up).
        spacing_s: Seconds between event starts (longer than an event and the gate's
            suppression radius, so events do not merge).

    Returns:
        The events by start time; a scene for them needs ``duration_s >= first_s +
        (repeats + novel) * spacing_s``.

    Raises:
        ConfigError: ``repeats < 1``, ``novel < 0`` or ``spacing_s < 4``.

    """
    if repeats < 1 or novel < 0:
        raise ConfigError(f"repeats={repeats}, novel={novel}: need repeats >= 1 and novel >= 0")
    if spacing_s < 4.0:
        raise ConfigError(f"spacing_s={spacing_s}: must be >= 4 s (the longest event is 3 s)")
    total = repeats + novel
    # repeat k goes to slot round(k * total / repeats): spread evenly, the first at slot 0
    repeat_slots = {round(k * total / repeats) for k in range(repeats)}
    spans = {
        "panel_passes": 2.0,
        "person_crosses": 3.0,
        "camera_pan": 2.0,
        "object_appears": 0.0,
        "light_change": 0.5,
    }
    events = []
    n_novel = 0
    for slot in range(total):
        start = first_s + slot * spacing_s
        if slot in repeat_slots:
            kind = RECURRING_KIND
        else:
            kind = _NOVEL_CYCLE[n_novel % len(_NOVEL_CYCLE)]
            n_novel += 1
        events.append(ScriptedEvent(kind, start, start + spans[kind]))
    return tuple(events)
