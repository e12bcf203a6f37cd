"""Fitting the ``retrieval`` answerer's thresholds on held-out binary questions.

Each fit takes what :class:`~surprise_memory.evaluation.qa.answerers.RetrievalAnswerer`
records in an answer's details (the best similarity of each kind of record, the words'
cosine to an empty caption) and the true answers, and returns the threshold that answers
the most of them right: the middle of the best interval between two seen values, the
middle one among equally good intervals.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "best_by_kind",
    "fit_generic_threshold",
    "fit_still_drop",
    "fit_yes_threshold",
    "fit_yes_thresholds",
    "reaches_yes",
]


def _cuts(values: Iterable[float]) -> list[float]:
    """Candidate thresholds: below, between and above the distinct ``values``."""
    seen = sorted(set(values))
    if not seen:
        return [0.0]
    middles = [(a + b) / 2.0 for a, b in itertools.pairwise(seen)]
    return [seen[0] - 0.01, *middles, seen[-1] + 0.01]


def _best_cut(pairs: Sequence[tuple[float, bool]]) -> tuple[int, float]:
    """The most right answers of ``(similarity, yes)`` pairs at one cut, and that cut.

    A pair is answered yes at or above the cut; among equally good cuts, the middle one.
    """
    at = np.asarray(_cuts(s for s, _ in pairs if s != float("-inf")))
    yes_sims = np.sort([s for s, y in pairs if y])
    no_sims = np.sort([s for s, y in pairs if not y])
    # right answers at each cut: the yes at or above it and the no below it
    right = yes_sims.size - np.searchsorted(yes_sims, at) + np.searchsorted(no_sims, at)
    best = int(right.max())
    tied = at[right == best]
    return best, float(tied[tied.size // 2])


def _pairs(pairs: Iterable[tuple[float | None, bool]]) -> list[tuple[float, bool]]:
    return [(float("-inf") if s is None else float(s), bool(y)) for s, y in pairs]


def fit_yes_threshold(pairs: Iterable[tuple[float | None, bool]]) -> dict[str, Any]:
    """The threshold that answers the most binary questions right, from held-out ones.

    Args:
        pairs: ``(best similarity or None for an empty memory, true answer is yes)``.

    Returns:
        ``threshold`` (the middle of the best interval between two seen similarities;
        among equally good intervals, the middle one), its ``accuracy`` on ``pairs`` and
        ``n``; ``threshold`` None when there is no pair.

    """
    data = _pairs(pairs)
    if not data:
        return {"threshold": None, "accuracy": None, "n": 0}
    right, cut = _best_cut(data)
    return {"threshold": max(-1.0, min(1.0, cut)), "accuracy": right / len(data), "n": len(data)}


def fit_yes_thresholds(
    answers: Iterable[tuple[float | None, float | None, bool]],
) -> dict[str, Any]:
    """The yes-threshold and the place margin that answer the most binary questions right.

    A question is answered yes when its best episode reaches the threshold or its best
    place keyframe the threshold plus the margin (the ``retrieval`` answerer's rule). For
    each candidate threshold the place keyframes' own threshold is fitted on the questions
    the episodes leave at no; among equally good thresholds, the middle one.

    Args:
        answers: ``(best episode similarity, best place keyframe similarity, true answer
            is yes)`` of held-out binary questions; None where the memory returned no
            record of that kind (the answers' details).

    Returns:
        :func:`fit_yes_threshold`'s ``threshold``, ``accuracy`` and ``n``, and
        ``place_margin`` (0.0 when the questions met records of one kind only: that kind's
        fit).

    """
    data = [(e, p, bool(y)) for e, p, y in answers]
    if not any(p is not None for _, p, _ in data):
        return {**fit_yes_threshold((e, y) for e, _, y in data), "place_margin": 0.0}
    if not any(e is not None for e, _, _ in data):  # place keyframes only: theirs is the fit
        return {**fit_yes_threshold((p, y) for _, p, y in data), "place_margin": 0.0}
    fits = []
    for cut in _cuts(float(e) for e, _, _ in data if e is not None):
        answered = sum(y for e, _, y in data if e is not None and e >= cut)
        rest = _pairs((p, y) for e, p, y in data if e is None or e < cut)
        right, place = _best_cut(rest) if rest else (0, cut)
        fits.append((answered + right, cut, place))
    best = max(right for right, _, _ in fits)
    tied = [(cut, place) for right, cut, place in fits if right == best]
    cut, place = tied[len(tied) // 2]
    threshold = max(-1.0, min(1.0, cut))
    return {
        "threshold": threshold,
        "place_margin": place - threshold,
        "accuracy": best / len(data),
        "n": len(data),
    }


def best_by_kind(details: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """A binary answer's best episode and best place keyframe similarity (its ``details``).

    Details written before the kinds were told apart have only ``best_similarity``: the
    episodes'.
    """
    episode = details.get("best_episode_similarity", details.get("best_similarity"))
    return episode, details.get("best_place_similarity")


def reaches_yes(details: Mapping[str, Any], threshold: float, place_margin: float = 0.0) -> bool:
    """Whether a binary answer's best records (its ``details``) reach the thresholds."""
    episode, place = best_by_kind(details)
    return (episode is not None and episode >= threshold) or (
        place is not None and place >= threshold + place_margin
    )


def fit_generic_threshold(answers: Iterable[tuple[bool, float | None, bool]]) -> dict[str, Any]:
    """The ``generic_threshold`` that answers the most binary questions right.

    Args:
        answers: ``(reaches the yes-threshold, generic_cos, true answer is yes)`` of
            held-out binary questions (:func:`reaches_yes` of their details with the
            thresholds they are answered with; ``generic_cos`` from the details): a
            question that does not reach them is a no whatever its words, so only those
            that do are fitted on.

    Returns:
        :func:`fit_yes_threshold`'s result, its ``threshold`` a cosine from which the
        answer is no (1.0 when no question reached the yes-threshold).

    """
    reached = [
        (-cos, yes)  # yes below the cosine: the yes-threshold's fit on its negative
        for reaches, cos, yes in answers
        if cos is not None and reaches
    ]
    fit = fit_yes_threshold(reached)
    fit["threshold"] = 1.0 if fit["threshold"] is None else -fit["threshold"]
    return fit


def fit_still_drop(
    answers: Iterable[tuple[float | None, float | None, bool]], still_threshold: float
) -> dict[str, Any]:
    """The ``still_drop`` that answers the most "still there?" questions right.

    Args:
        answers: ``(latest pass's best similarity, best earlier view's similarity, true
            answer is yes)`` of held-out questions (the answers' ``last_pass_similarity``
            and ``earlier_similarity``; None where the memory has no such view).
        still_threshold: The threshold they are answered with: a question whose latest
            pass reaches it is a yes whatever came before, and one without an earlier view
            is decided by it alone, so only the others are fitted on.

    Returns:
        :func:`fit_yes_threshold`'s result, its ``threshold`` the drop (how much less the
        latest pass may match than the earlier views); None when no question is left.

    """
    left = [
        (now - before, yes)  # yes when the difference reaches minus the drop
        for now, before, yes in answers
        if now is not None and before is not None and now < still_threshold
    ]
    fit = fit_yes_threshold(left)
    fit["threshold"] = None if fit["threshold"] is None else -fit["threshold"]
    return fit
