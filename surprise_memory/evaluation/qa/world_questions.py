"""Questions about our long-horizon synthetic world, generated from its ground truth.

:func:`world_questions` reads the ground truth of a
:class:`~surprise_memory.offline.synthetic.qa_world.QaWorld` (its ``ground_truth()``
dict) and asks, in the four types of the paper's benchmark, about the four kinds of
event (a ball showing up, somebody walking past, the lights going down, the camera
turning):

* **when** (time): when the *first* of a kind happened (asked any time after it), and
  when the *last* one did (one question per event of the kind, time or position, asked
  while it is the latest of its kind, at most five minutes after it; not for balls: a
  ball stays in view, so "the last ball seen" is not the moment it showed up);
* **where** (position): the robot's position at the same events;
* **did you see** (binary), with true negatives: yes when asked after the first event of
  the kind, *no* when asked before it, twice each at different times (the memory is cut
  at the asking, as DAAAM and ReMEmbR cut theirs); a ball is named by the colour of one
  seen before the asking;
* **how long between** (duration): minutes between the first events of two kinds, or
  between the latest events of two kinds.

Every answer is unique at its asking time without telling balls apart by colour: the
``synthetic-trained-tiny`` embedder ranks "a red ball" and "a blue ball" alike
(benchmarks/RESULTS.md), so a question that needed the colour to pick one ball of several
would measure that embedder, not the memory; colours that were never seen are not asked
after a ball was (they would be, with an embedder that tells colours).

Each question's ``asked_at_s`` is drawn where its answer holds; ``origin_ns`` is the
world's first frame. The phrasings (:data:`PHRASINGS`) are none of the models' training
captions (:data:`~surprise_memory.offline.synthetic.captions.TRAIN_PHRASES`), which a test
checks; they were chosen on the validation worlds (seeds 900-902), never on the worlds
the benchmark reports. Everything is a pure function of the ground truth and ``seed``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from surprise_memory.evaluation.qa.questions import Answer, Question

__all__ = ["CATEGORIES", "COLOUR_NAMES", "PHRASINGS", "world_questions"]

CATEGORIES = {
    "object_appears": "object",
    "person_crosses": "person",
    "light_change": "light",
    "camera_pan": "turn",
}
"""The question category of each event kind."""

COLOUR_NAMES = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
"""The colour names a ball may have
(:func:`surprise_memory.offline.synthetic.captions.colour_name`)."""

PHRASINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "time": {
        "object:first": ("When did you first see a ball?", "When did a ball first show up?"),
        "person:first": ("When did somebody first walk past?",),
        "person:last": (
            "When did somebody last walk past?",
            "When did you last see someone walking by?",
        ),
        "light:first": ("When did the lights first go down?",),
        "light:last": ("When did the lights last go down?", "When did it last get darker?"),
        "turn:first": ("When was the camera first turning?",),
        "turn:last": (
            "When was the camera last turning?",
            "When did the view last sweep sideways?",
        ),
    },
    "position": {
        "object:first": (
            "Where were you when you first saw a ball?",
            "Where did a ball first show up?",
        ),
        "person:first": ("Where did somebody first walk past?",),
        "person:last": (
            "Where did somebody last walk past?",
            "Where were you when someone last walked by?",
        ),
        "light:first": ("Where did the lights first go down?",),
        "light:last": ("Where did the lights last go down?", "Where did it last get darker?"),
        "turn:first": ("Where was the camera first turning?",),
        "turn:last": (
            "Where was the camera last turning?",
            "Where did the view last sweep sideways?",
        ),
    },
    "binary": {
        "object": ("Did {a_c} ball show up?", "Have you come across {a_c} ball?"),
        "person": ("Did somebody walk past?", "Have you seen someone walking by?"),
        "light": ("Did the lights go down?", "Did it get darker at any point?"),
        "turn": ("Was the camera turning at any point?", "Did the view sweep sideways?"),
    },
    "duration": {
        "object:first": ("the first ball showing up",),
        "person:first": ("somebody first walking past",),
        "person:last": ("somebody last walking past",),
        "light:first": ("the lights first going down",),
        "light:last": ("the lights last going down",),
        "turn:first": ("the camera first turning",),
        "turn:last": ("the camera last turning",),
    },
}
"""The phrasings per question type and category (``:first`` / ``:last``: which of the kind
is meant); ``{a_c}`` is a colour name with its article ("a red", "an orange")."""

_DURATION = ("How many minutes passed between {a} and {b}?", "How long was it between {a} and {b}?")
_AFTER_S = 20.0  # an event's episode is in the memory this long after its end
_LATEST_FOR_S = 300.0  # a "last ..." question is asked within five minutes of its event
_BEFORE_S = 5.0  # a "not yet" question is asked at least this long before its event


class _Asker:
    def __init__(self, truth: Mapping[str, Any], seed: int) -> None:
        self.rng = np.random.default_rng([seed, 41])
        self.world = int(truth["seed"])
        self.sequence = f"world-{self.world}"
        self.origin = int(truth["start_ns"])
        self.duration = float(truth["duration_s"])
        self.questions: list[Question] = []

    def phrase(self, kind: str, category: str, colour: str | None = None) -> str:
        options = PHRASINGS[kind][category]
        article = "an" if colour and colour[0] in "aeiou" else "a"
        return options[int(self.rng.integers(len(options)))].format(a_c=f"{article} {colour}")

    def when(self, low: float, high: float) -> float | None:
        """A time in [low, high] within the recording, or None when there is none."""
        low, high = max(low, 0.0), min(high, self.duration)
        if high < low:
            return None
        return round(float(self.rng.uniform(low, high)), 1)

    def ask(self, kind: str, category: str, text: str, truth: Answer, asked: float) -> None:
        self.questions.append(
            Question(
                id=f"w{self.world}-q{len(self.questions):03d}",
                sequence=self.sequence,
                text=text,
                type=kind,
                truth=truth,
                category=category,
                asked_at_s=asked,
                origin_ns=self.origin,
            )
        )


def _event_answer(kind: str, event: Mapping[str, Any]) -> Answer:
    if kind == "time":
        return Answer(time_s=float(event["start_s"]))
    x, y, z = (float(v) for v in event["position"])
    return Answer(position=(x, y, z))


def _latest_windows(events: Sequence[Mapping[str, Any]], duration: float) -> list[tuple[Any, ...]]:
    """(event, low, high): when each event is the latest of its kind, within 5 minutes."""
    out = []
    for i, ev in enumerate(events):
        nxt = events[i + 1]["start_s"] - 2.0 if i + 1 < len(events) else duration
        low = ev["end_s"] + _AFTER_S
        high = min(nxt, ev["end_s"] + _LATEST_FOR_S, duration)
        if high >= low:
            out.append((ev, low, high))
    return out


def world_questions(truth: Mapping[str, Any], seed: int = 0) -> list[Question]:
    """Questions about a QA world from its ground truth (see the module docstring).

    Args:
        truth: ``QaWorld.ground_truth()``.
        seed: Seed of the draws (phrasings, asking times, which questions).

    Returns:
        The questions, ids ``w<world seed>-q<n>``.

    """
    a = _Asker(truth, seed)
    events = sorted(truth["events"], key=lambda e: e["start_s"])
    firsts: list[tuple[str, Mapping[str, Any], float, float]] = []
    latest: list[tuple[str, Mapping[str, Any], float, float]] = []
    for kind_name, category in CATEGORIES.items():
        of_kind = [e for e in events if e["kind"] == kind_name]
        if not of_kind:
            continue
        first = of_kind[0]
        after = (first["end_s"] + _AFTER_S, a.duration)
        firsts.append((f"{category}:first", first, *after))
        for kind in ("time", "position"):
            asked = a.when(*after)
            if asked is not None:
                text = a.phrase(kind, f"{category}:first")
                a.ask(kind, category, text, _event_answer(kind, first), asked)
        _binaries(a, category, first, of_kind)
        if category == "object":
            continue
        for ev, low, high in _latest_windows(of_kind, a.duration):
            latest.append((f"{category}:last", ev, low, high))
            kind = "time" if a.rng.random() < 0.5 else "position"
            asked = a.when(low, high)
            assert asked is not None
            text = a.phrase(kind, f"{category}:last")
            a.ask(kind, category, text, _event_answer(kind, ev), asked)
    _durations(a, firsts, 3)
    _durations(a, latest, 2)
    return a.questions


def _binaries(
    a: _Asker, category: str, first: Mapping[str, Any], of_kind: Sequence[Mapping[str, Any]]
) -> None:
    """Twice yes after the kind's first event, twice no before it (where there is time)."""
    for _ in range(2):
        yes = a.when(first["end_s"] + _AFTER_S, a.duration)
        if yes is not None:
            seen = [e for e in of_kind if e["end_s"] + _AFTER_S <= yes]
            colour = seen[int(a.rng.integers(len(seen)))].get("colour")
            text = a.phrase("binary", category, colour)
            a.ask("binary", category, text, Answer(yes=True), yes)
        no = a.when(10.0, first["start_s"] - _BEFORE_S)
        if no is not None:
            colour = COLOUR_NAMES[int(a.rng.integers(len(COLOUR_NAMES)))]
            text = a.phrase("binary", category, colour)
            a.ask("binary", category, text, Answer(yes=False), no)


def _durations(
    a: _Asker, items: Sequence[tuple[str, Mapping[str, Any], float, float]], most: int
) -> None:
    """Up to ``most`` durations between two of ``items`` of different kinds.

    Each is asked where both answers hold.
    """
    pairs = [
        (x, y)
        for i, x in enumerate(items)
        for y in items[i + 1 :]
        if x[0].split(":")[0] != y[0].split(":")[0] and max(x[2], y[2]) <= min(x[3], y[3])
    ]
    for k in a.rng.permutation(len(pairs))[:most]:
        (key_a, ev_a, low_a, high_a), (key_b, ev_b, low_b, high_b) = pairs[int(k)]
        asked = a.when(max(low_a, low_b), min(high_a, high_b))
        if asked is None:
            continue
        template = _DURATION[int(a.rng.integers(len(_DURATION)))]
        text = template.format(a=a.phrase("duration", key_a), b=a.phrase("duration", key_b))
        minutes = abs(float(ev_b["start_s"]) - float(ev_a["start_s"])) / 60.0
        category = key_a.split(":")[0]
        a.ask("duration", category, text, Answer(minutes=round(minutes, 4)), asked)
