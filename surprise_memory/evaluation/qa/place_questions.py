"""Questions about the QA world's second round, in OC-NaVQA's mix of types.

:func:`place_questions` reads the ground truth of a
:class:`~surprise_memory.offline.synthetic.qa_places.PlacesWorld` and asks, besides the
first world's event questions (:func:`~.world_questions.world_questions`), about what
stands still:

* **static** (category ``landmark``): where and when you first / last passed a parked
  ball or a striped sign (position, time); did you pass one (binary: yes after the first,
  no before it); what stood by the street at a place, "a parked ball or a striped sign?"
  (text: a closed choice between the two things the small embedder can tell apart);
* **still there** (category ``still_there``): "is the striped sign you passed at x=.., y=..
  still there?", asked once the second pass has looked at its spot (20 s after the spot
  came into view again; the place is where the robot was 5 s into its first sighting):
  yes when it stayed, no when it was removed or moved;
* **lures** (category ``lure``): "did you pass a fire hydrant?", things never in the
  world: always no (their false-yes rate is reported apart).

The questions are then drawn in OC-NaVQA's mix by type (:data:`MIX`: position 34 %,
binary 32 %, text 16 %, time 14 %, duration 4 %; DAAAM's file has 71, 67, 33, 30 and 9
of 210; the position and binary questions set the size, a rarer type may fall short of
its share in a short world), round robin over the categories within a type so that no
kind of question is crowded out (still-there and lure questions first, up to half of the
binary ones). :func:`split_of` names each question's split: ``static``, ``event``,
``still_there`` or ``lure``. The phrasings (:data:`PLACE_PHRASINGS`) are none of the
models' training captions (a test checks it) and were chosen on the validation worlds
(900-902) only. Everything is a pure function of the ground truth and ``seed``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from surprise_memory.evaluation.qa.questions import Answer, Question
from surprise_memory.evaluation.qa.world_questions import CATEGORIES, world_questions

__all__ = ["LURES", "MIX", "PLACE_PHRASINGS", "SPLITS", "place_questions", "split_of"]

MIX = {"position": 0.34, "binary": 0.32, "text": 0.16, "time": 0.14, "duration": 0.04}
"""OC-NaVQA's share of each question type (DAAAM's file: 71, 67, 33, 30, 9 of 210)."""

SPLITS = ("static", "event", "still_there", "lure")
"""The splits the ablation reports."""

LURES = (
    "a fire hydrant",
    "a bicycle",
    "a dog",
    "a park bench",
    "a traffic cone",
    "a mailbox",
    "a green door",
    "a parked truck",
)
"""Things never in the world (lure questions)."""

PLACE_PHRASINGS: dict[str, tuple[str, ...]] = {
    "where:first": ("Where did you first pass {a}?", "Where was the first {k} you passed?"),
    "where:last": ("Where did you last pass {a}?", "Where was the last {k} you passed?"),
    "when:first": ("When did you first pass {a}?",),
    "when:last": ("When did you last pass {a}?", "When did you most recently pass {a}?"),
    "did": ("Did you pass {a}?", "Have you come by {a}?"),
    "still": (
        "Is the {k} you passed at x={x:.0f} m, y={y:.0f} m still there?",
        "Is the {k} at x={x:.0f} m, y={y:.0f} m still standing there?",
    ),
    "what": ("What stood by the street at x={x:.0f} m, y={y:.0f} m: {c0} or {c1}?",),
}
"""The phrasings; ``{a}`` is the thing with its article, ``{k}`` without, ``{x}``/``{y}``
where it was seen, ``{c0}``/``{c1}`` the two choices."""

_AFTER_S = 20.0  # a sighting is in the memory this long after it ends
_LATEST_FOR_S = 300.0
_BEFORE_S = 5.0
_KINDS = ("parked ball", "striped sign")
_PRIORITY = ("still_there", "lure")


def split_of(question: Question) -> str:
    """The split of a question of :func:`place_questions` (:data:`SPLITS`)."""
    if question.category in CATEGORIES.values():
        return "event"
    return "static" if question.category == "landmark" else question.category


class _Places:
    def __init__(self, truth: Mapping[str, Any], seed: int) -> None:
        self.rng = np.random.default_rng([seed, 47])
        self.world = int(truth["seed"])
        self.origin = int(truth["start_ns"])
        self.duration = float(truth["duration_s"])
        self.questions: list[Question] = []

    def when(self, low: float, high: float) -> float | None:
        low, high = max(low, 10.0), min(high, self.duration)
        return None if high < low else round(float(self.rng.uniform(low, high)), 1)

    def phrase(self, key: str, **values: Any) -> str:
        options = PLACE_PHRASINGS[key]
        return options[int(self.rng.integers(len(options)))].format(**values)

    def ask(self, kind: str, category: str, text: str, truth: Answer, asked: float | None) -> None:
        if asked is None:
            return
        self.questions.append(
            Question(
                id=f"w{self.world}-p{len(self.questions):03d}",
                sequence=f"world-{self.world}",
                text=text,
                type=kind,
                truth=truth,
                category=category,
                asked_at_s=asked,
                origin_ns=self.origin,
            )
        )


def _article(kind: str) -> str:
    return f"a {kind}"


def _static(p: _Places, landmarks: Sequence[Mapping[str, Any]]) -> None:
    for kind in _KINDS:
        seen = sorted(
            (s for lm in landmarks if lm["kind"] == kind for s in lm["seen"]),
            key=lambda s: s["start_s"],
        )
        a = _article(kind)
        if not seen:
            p.ask("binary", "landmark", p.phrase("did", a=a), Answer(yes=False), p.when(0, 1e9))
            continue
        first = seen[0]
        x, y, z = (float(v) for v in first["position"])
        after = first["end_s"] + _AFTER_S
        p.ask(
            "position",
            "landmark",
            p.phrase("where:first", a=a, k=kind),
            Answer(position=(x, y, z)),
            p.when(after, p.duration),
        )
        p.ask(
            "time",
            "landmark",
            p.phrase("when:first", a=a),
            Answer(time_s=float(first["start_s"])),
            p.when(after, p.duration),
        )
        for _ in range(2):
            p.ask(
                "binary",
                "landmark",
                p.phrase("did", a=a),
                Answer(yes=True),
                p.when(after, p.duration),
            )
        p.ask(
            "binary",
            "landmark",
            p.phrase("did", a=a),
            Answer(yes=False),
            p.when(0, first["start_s"] - _BEFORE_S),
        )
        for i, s in enumerate(seen):
            nxt = seen[i + 1]["start_s"] - 2.0 if i + 1 < len(seen) else p.duration
            asked = p.when(s["end_s"] + _AFTER_S, min(nxt, s["end_s"] + _LATEST_FOR_S))
            x, y, z = (float(v) for v in s["position"])
            if p.rng.random() < 0.7:
                text = p.phrase("where:last", a=a, k=kind)
                p.ask("position", "landmark", text, Answer(position=(x, y, z)), asked)
            else:
                text = p.phrase("when:last", a=a)
                p.ask("time", "landmark", text, Answer(time_s=float(s["start_s"])), asked)


def _places(p: _Places, landmarks: Sequence[Mapping[str, Any]]) -> None:
    for lm in landmarks:
        if not lm["seen"]:
            continue
        first = lm["seen"][0]
        x, y = (float(v) for v in first["position"][:2])
        choices = list(_KINDS) if p.rng.random() < 0.5 else list(reversed(_KINDS))
        text = p.phrase("what", x=x, y=y, c0=_article(choices[0]), c1=_article(choices[1]))
        for _ in range(2):  # at two times: the answer is what stood there when first seen
            asked = p.when(first["end_s"] + _AFTER_S, p.duration)
            p.ask("text", "landmark", text, Answer(text=_article(lm["kind"])), asked)
        view = lm.get("revisit_view")
        if view is None:
            continue
        text = p.phrase("still", k=lm["kind"], x=x, y=y)
        asked = p.when(view["start_s"] + _AFTER_S, p.duration)
        p.ask("binary", "still_there", text, Answer(yes=lm["fate"] == "stays"), asked)


def _lures(p: _Places, count: int) -> None:
    for k in p.rng.permutation(len(LURES))[:count]:
        text = p.phrase("did", a=LURES[int(k)])
        p.ask("binary", "lure", text, Answer(yes=False), p.when(0, p.duration))


def _mix(questions: Sequence[Question], rng: np.random.Generator) -> list[Question]:
    """A subset in :data:`MIX`'s shares.

    Within a type, still-there and lure questions come first (up to half of the type's
    share, alternately), then the categories round robin, so that none is crowded out.
    """
    by_type: dict[str, dict[str, list[Question]]] = {t: defaultdict(list) for t in MIX}
    for q in questions:
        by_type[q.type][q.category].append(q)
    for cats in by_type.values():
        for items in cats.values():
            shuffled = rng.permutation(len(items))
            items[:] = [items[int(i)] for i in shuffled]
    available = {t: sum(len(v) for v in cats.values()) for t, cats in by_type.items()}
    # the two largest shares set the size; a rarer type may fall short of its share
    total = min(available[t] / MIX[t] for t in ("position", "binary"))
    chosen: list[Question] = []
    for kind, share in MIX.items():
        want = min(available[kind], max(1, round(share * total)))
        cats = by_type[kind]
        first = [cats.pop(c) for c in _PRIORITY if c in cats]
        cap = want // 2
        while cap > 0 and any(first):
            for queue in first:
                if queue and cap > 0:
                    chosen.append(queue.pop())
                    cap -= 1
                    want -= 1
        queues = [items for _, items in sorted(cats.items())] + first
        while want > 0 and any(queues):
            for queue in queues:
                if queue and want > 0:
                    chosen.append(queue.pop())
                    want -= 1
    order = {q.id: i for i, q in enumerate(questions)}
    return sorted(chosen, key=lambda q: order[q.id])


def place_questions(truth: Mapping[str, Any], seed: int = 0, *, mix: bool = True) -> list[Question]:
    """Questions about a second-round world in OC-NaVQA's mix (the module docstring).

    Args:
        truth: ``PlacesWorld.ground_truth()``.
        seed: Seed of the draws.
        mix: Draw them in :data:`MIX`'s shares; False = every question asked (the same
            draws: the mixed ones are a subset), for figures per split with more of them.

    Returns:
        The questions (event ids ``w<seed>-q<n>``, the others ``w<seed>-p<n>``).

    """
    p = _Places(truth, seed)
    landmarks = truth["landmarks"]
    _static(p, landmarks)
    _places(p, landmarks)
    _lures(p, 4)
    pool = [*world_questions(truth, seed), *p.questions]
    return _mix(pool, np.random.default_rng([seed, 48])) if mix else pool
