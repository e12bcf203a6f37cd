"""Answers of several stores as one: :class:`RetrievalHits` and :func:`merge_hits`.

A robot that writes to a fleet store holds its own episodes locally and asks the fleet
for everyone's; its answer is the union, ranked as one store would rank it, or, when the
fleet cannot be reached, its own episodes marked as a partial answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store.records import RetrievalHit

__all__ = ["RetrievalHits", "merge_hits", "partial_of"]


class RetrievalHits(list[RetrievalHit]):
    """A retrieval's hits, best first, saying when they come from part of the memory only.

    A plain list for every caller; :attr:`partial` is the reason when the answer does not
    cover the whole memory ("fleet unreachable: ..."), empty when it does.

    Args:
        hits: The hits, best first.
        partial: Why the answer is partial; empty = complete.

    """

    def __init__(self, hits: Iterable[RetrievalHit] = (), partial: str = "") -> None:
        super().__init__(hits)
        self.partial = partial


def partial_of(hits: Sequence[RetrievalHit]) -> str:
    """Why an answer is partial (empty when complete, or from a store that is always whole)."""
    return hits.partial if isinstance(hits, RetrievalHits) else ""


def _rank(query: RetrievalQuery, hit: RetrievalHit) -> tuple[float, float]:
    """The sort key of :class:`RetrievalQuery`'s order: best first, ties to the newer."""
    newer = -float(hit.episode.stamp_ns)
    if query.embedding is not None:
        return (-(hit.score if hit.score is not None else float("-inf")), newer)
    if query.near is not None:
        dist = hit.distance_m if hit.distance_m is not None else float("inf")
        return (dist, newer)
    return (newer, 0.0)


def merge_hits(query: RetrievalQuery, k: int, *answers: Sequence[RetrievalHit]) -> RetrievalHits:
    """The best ``k`` of several stores' answers to one query, each episode once.

    Each answer holds its store's best ``k``, so their union holds the best ``k`` of the
    stores together. An episode in several answers keeps its first one's hit (the caller
    passes the local answer first: its images are read from the robot's disk).

    Args:
        query: The query all answers are to.
        k: Hits wanted.
        answers: Each store's hits, best first.

    Returns:
        At most ``k`` hits, in the query's order.

    """
    seen: dict[str, RetrievalHit] = {}
    for answer in answers:
        for hit in answer:
            seen.setdefault(hit.episode.id, hit)
    return RetrievalHits(sorted(seen.values(), key=lambda h: _rank(query, h))[:k])
