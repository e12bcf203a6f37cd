"""The SQLite store's search at a robot's lifetime: filters in RAM, vectors on disk.

:class:`EpisodeIndex` keeps what :class:`~surprise_memory.memory.store.search.EmbeddingIndex`
keeps per episode (key, stamp, position, robot, ...: a few dozen bytes each, so a
robot-year's filters fit in well under a GiB) but no frame matrix. A query with an embedding is
answered in two steps:

1. **Candidates** by the pooled episode vector (:func:`.ann.pooled`) of each episode
   the filters leave, per segment of the :class:`~surprise_memory.memory.store.ann.AnnIndex`:
   *exactly* (the segment's vectors of those episodes, read from the memory-mapped file)
   when the filters leave at most :data:`EXACT_PER_SEGMENT` of its episodes, or more
   than a quarter of its size would have to be visited, or the whole store is at most
   :data:`EXACT_IN_RAM` episodes; otherwise by the approximate search of every such
   segment at once, each asked for its share of :data:`RERANK` at the filters'
   selectivity, widened (doubled) until enough pass, the candidates then scored from
   their float32 vectors.
2. **Exact re-ranking**: the :data:`RERANK` best candidates (at least ``k``) are scored
   by the max cosine over their frames, read from the database (the truth), and the
   best ``k`` of those are returned.

An episode the database does not hold is never returned: only keys of this index's
live episodes (loaded from the database) pass the filters, and the scores come from
the database's rows.

**Place keyframes stay out of the graph segments.** A place's view is replaced on every
revisit (``place_history``), so a robot patrolling one building writes thousands a day
(7,529 at the defaults, ``bench_place_keyframes.py``) while holding a few hundred: in the
append-only segments each replaced view stayed as a dead entry (5.2 KiB at 1024-d) until a
merge of four full segments left it out, so the index grew with time, not with the area
(RESULTS.md, "Place keyframes in a real store"). Instead a live place keyframe's frame
rows are held in RAM, in the :class:`EmbeddingIndex` matrix (4 KiB a record at 1024-d),
and removed with it; a query takes the best :data:`RERANK` places by those rows as
candidates beside the episodes' and re-ranks both from the database. An index written
before this holds place keys in its segments: queries skip them (the graphs answer for
episodes only) and a merge leaves them out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.store.ann import AnnIndex, Segment, pooled, search_segments
from surprise_memory.memory.store.column_file import EpisodeColumns
from surprise_memory.memory.store.search import EmbeddingIndex, max_over_rows

__all__ = ["EXACT_IN_RAM", "EXACT_PER_SEGMENT", "RERANK", "EpisodeIndex", "FrameReader"]

RERANK = 100
"""Candidates re-ranked by their frames per query (``k`` when larger).

On bench_lifetime's year the exact top-10 (max over frames) lay within the 27 best pooled
vectors of 61,440 episodes, but in test_store_index_consumers' store (the trained tiny
embedder's space) 50 gave a recall@10 of 0.989 and 100 0.998: episodes whose frames differ
more need more room. Each one costs a read of its frames from SQLite (~3 ms per 50).
"""

EXACT_PER_SEGMENT = 4_096
"""Filtered episodes of a segment scored exactly (no approximate search) up to this many."""

EXACT_IN_RAM = 16_384
"""A store of at most this many episodes (all in the RAM tail, whose vectors cost no reads)
is scored exactly: a matrix-vector product, about 3 ms for 16,384 x 1024. A small store's
top candidates are near-ties that the graph misses: at 10,000 episodes of bench_lifetime's
year it returned a recall@10 of 0.93. (In a larger store the tail takes the graph: scoring
a robot-year's 15,000-episode tail exactly cost 3-4 ms a query, the graph about 1.)"""

# neighbours asked of the graph per candidate wanted: the graph's own recall of the nearest
# hundred is 0.69 when asked for 100 and 0.93 for 400 (16,384 pooled vectors of
# bench_lifetime's year, connectivity 16)
_OVERSAMPLE = 4.0
# at least this many neighbours are asked of each segment: a search visits expansion_search
# (128) candidates whatever it returns, so fewer would cost the same and find less
_MIN_COUNT = 128
_WIDEN_LIMIT = 4  # doublings of an approximate search before scoring the segment exactly
_COMPACT_FRACTION = 0.125

FrameReader = Callable[[Sequence[int]], tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
"""Reads the unit frame embeddings of episodes: each row's key (ascending) and the rows."""


class EpisodeIndex(EmbeddingIndex):
    """Per-episode filters in RAM; episode vectors in an :class:`AnnIndex`; frames read back.

    Args:
        dim: Embedding dimension; None = set by the first :meth:`add`.

    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__(dim)
        self._ann: AnnIndex | None = None
        self._frames: FrameReader | None = None
        self._dead = 0

    def attach(self, ann: AnnIndex, frames: FrameReader) -> None:
        """Use ``ann`` for the episodes' vectors and ``frames`` to read frame embeddings back.

        The place keyframes loaded without their rows (:meth:`load`) get them here, read
        with ``frames``: a few hundred to a few tens of thousands, bounded by the area.
        """
        self._ann = ann
        self._frames = frames
        waiting = self._alive.view() & self._places.view() & (self._row_count.view() == 0)
        if not waiting.any():
            return
        row_keys, rows = frames(self._keys.view()[waiting].tolist())
        if row_keys.size == 0:
            return
        starts = np.flatnonzero(np.concatenate(([True], row_keys[1:] != row_keys[:-1])))
        counts = np.diff(np.append(starts, row_keys.size))
        positions = np.searchsorted(self._keys.view(), row_keys[starts])
        self._first_row.view()[positions] = len(self._matrix) + starts
        self._row_count.view()[positions] = counts
        self._matrix.append(rows)

    @property
    def ann(self) -> AnnIndex | None:
        """The approximate index (None before the first episode)."""
        return self._ann

    def add(
        self,
        key: int,
        *,
        stamp_ns: int,
        position: Sequence[float],
        pose_valid: bool,
        surprise: float,
        unit_embeddings: npt.NDArray[np.float32],
        robot_id: str = "",
        pose_frame: str = "",
        camera: str = "",
        kind: str = EPISODE,
    ) -> None:
        """Add one record: its filter fields here, and its vectors where its kind goes.

        An episode's pooled vector goes to the graph segments, a place keyframe's frame
        rows to RAM (see the module's docstring).
        """
        place = kind == PLACE
        super().add(
            key,
            stamp_ns=stamp_ns,
            position=position,
            pose_valid=pose_valid,
            surprise=surprise,
            unit_embeddings=unit_embeddings if place else unit_embeddings[:0],
            robot_id=robot_id,
            pose_frame=pose_frame,
            camera=camera,
            kind=kind,
        )
        if self._ann is not None and not place:
            self._ann.add(key, pooled(unit_embeddings))

    def held(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which of ``keys`` are stored episodes: what a segment merge keeps.

        A place keyframe that an older index holds in its segments is left out.
        """
        episodes = self._alive.view() & ~self._places.view()
        return np.isin(keys, self._keys.view()[episodes])

    def remove(self, keys: Sequence[int]) -> None:
        """Mark episodes removed; compact the filter arrays once an eighth are removed."""
        before = len(self)
        super().remove(keys)
        self._dead += before - len(self)
        if self._dead > _COMPACT_FRACTION * len(self._keys):
            self.compact()
            self._dead = 0

    def _drop_dead_rows(self) -> None:
        """Move the live place keyframes' rows down over the removed ones' (nothing else).

        The matrix holds place keyframes only, and its removed rows pass their bound every
        few dozen replaced views; compacting every record's filter arrays then (a
        robot-year's 670,000, under the store's lock) is left to :meth:`remove`'s own bound
        on removed records.
        """
        self._compact_rows()

    def _scored(
        self, q: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """Exact max-over-frames scores of the best candidates the mask keeps.

        At most :data:`RERANK` (or ``k``) are scored, so the ranking after it sorts a hundred
        episodes, not the store; and the mask is read per segment, never turned into a list
        of every episode it keeps (a robot-year's 670,000 positions cost about 3 ms a query).
        """
        all_keys = self._keys.view()
        q = (q / np.linalg.norm(q)).astype(np.float32)
        k_rerank = max(RERANK, k)
        kept = int(np.count_nonzero(mask))
        ann = self._ann
        if kept <= k_rerank or ann is None:
            chosen = all_keys[np.flatnonzero(mask)]
        else:
            places = self._places.view()
            episodes = mask & ~places
            kept_episodes = int(np.count_nonzero(episodes))
            if kept_episodes <= k_rerank:
                chosen = all_keys[np.flatnonzero(episodes)]
            else:
                chosen = self._candidates(ann, q, episodes, kept_episodes, k_rerank)
            if kept_episodes < kept:
                chosen = np.union1d(chosen, self._place_candidates(q, mask & places, k_rerank))
        if self._frames is None or chosen.size == 0:
            return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64)
        row_keys, rows = self._frames(chosen.tolist())
        if row_keys.size == 0:
            return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.float64)
        starts = np.flatnonzero(np.concatenate(([True], row_keys[1:] != row_keys[:-1])))
        best = np.maximum.reduceat(rows @ q, starts)
        # the keys ascend with the position (added in key order), and the frames' keys too
        return np.searchsorted(all_keys, row_keys[starts]), best.astype(np.float64)

    def _place_candidates(
        self, q: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], want: int
    ) -> npt.NDArray[np.int64]:
        """The ``want`` place keyframes of ``mask`` best by their frame rows in RAM."""
        positions = np.flatnonzero(mask)
        positions = positions[self._row_count.view()[positions] > 0]
        keys = self._keys.view()[positions]
        if positions.size <= want:
            return keys
        first, counts = self._first_row.view()[positions], self._row_count.view()[positions]
        best = max_over_rows(self._matrix.view(), first, counts, q)
        return np.sort(keys[np.argpartition(-best, want - 1)[:want]])

    def _candidates(
        self,
        ann: AnnIndex,
        q: npt.NDArray[np.float32],
        mask: npt.NDArray[np.bool_],
        kept: int,
        want: int,
    ) -> npt.NDArray[np.int64]:
        """The ``want`` keys with the best pooled similarity among the ``kept`` of ``mask``."""
        all_keys = self._keys.view()
        found_keys: list[npt.NDArray[np.int64]] = []
        found_sims: list[npt.NDArray[np.float64]] = []

        def score(seg: Segment, mine: npt.NDArray[np.int64]) -> None:
            found_keys.append(mine)
            found_sims.append((seg.vectors(mine) @ q).astype(np.float64))

        graph: list[tuple[Segment, slice]] = []
        graph_want = graph_kept = count = 0
        for seg in ann.parts():
            lo, hi = np.searchsorted(all_keys, [seg.first, seg.last + 1])
            rows = slice(int(lo), int(hi))
            mine_kept = int(np.count_nonzero(mask[rows]))
            if mine_kept == 0:
                continue
            size = len(seg)
            # a segment is asked for its share of the candidates (its share of the filtered
            # episodes), widened by its selectivity, and never fewer than _MIN_COUNT (above
            # RERANK: an unfiltered query whose best episodes all lie in one segment still
            # gets them): a year's eleven segments are not each asked for all the
            # candidates, and a search's cost grows with what it returns
            mine_want = max(int(np.ceil(want * mine_kept / kept)), 1)
            seg_count = max(_MIN_COUNT, int(np.ceil(mine_want * size / mine_kept * _OVERSAMPLE)))
            small = len(ann) <= EXACT_IN_RAM and seg.in_ram
            if not small and mine_kept > EXACT_PER_SEGMENT and seg_count <= size // 4:
                graph.append((seg, rows))
                graph_want += mine_want
                graph_kept += mine_kept
                count = max(count, seg_count)
            else:
                score(seg, all_keys[rows][mask[rows]])
        if graph:
            got = self._approximate(
                [seg for seg, _ in graph],
                q=q,
                want=min(graph_want, graph_kept),
                count=count,
                keys=all_keys,
                mask=mask,
            )
            for seg, rows in graph:
                # the graphs' candidates re-scored from the float32 vectors (near-ties
                # ordered exactly, not by the int8 rounding); None: too selective for the
                # graphs, every filtered episode scored
                if got is None:
                    found = all_keys[rows][mask[rows]]
                else:
                    found = np.sort(got[(got >= seg.first) & (got <= seg.last)])
                score(seg, found)
        if not found_keys:
            return np.empty(0, dtype=np.int64)
        cand_keys = np.concatenate(found_keys)
        sims = np.concatenate(found_sims)
        if cand_keys.size > want:
            top = np.argpartition(-sims, want - 1)[:want]
            cand_keys = cand_keys[top]
        return np.sort(cand_keys)

    @staticmethod
    def _approximate(
        segments: Sequence[Segment],
        *,
        q: npt.NDArray[np.float32],
        want: int,
        count: int,
        keys: npt.NDArray[np.int64],
        mask: npt.NDArray[np.bool_],
    ) -> npt.NDArray[np.int64] | None:
        """The graphs' nearest keys that ``mask`` keeps, widened until ``want`` pass.

        ``keys`` are the index's keys (ascending) and ``mask`` the filters' verdict at each
        position; all segments are searched at once. None = too few pass (too selective).
        """
        largest = max(len(seg) for seg in segments)
        for _ in range(_WIDEN_LIMIT):
            got = search_segments(segments, q, count)
            pos = np.minimum(np.searchsorted(keys, got), keys.size - 1)
            ok = (keys[pos] == got) & mask[pos]
            if np.count_nonzero(ok) >= want or count >= largest:
                passed: npt.NDArray[np.int64] = got[ok]
                return passed
            count = min(largest, 2 * count)
            if count > largest // 4:
                return None
        return None

    def load(self, columns: EpisodeColumns) -> None:
        """Add many episodes' filter fields at once (an open), in ascending key order."""
        n = len(columns.seq)
        if self._dim is None:
            raise ValueError("load needs the embedding dimension")
        self._first_row.append(np.full(n, len(self._matrix), dtype=np.int64))
        self._row_count.append(np.zeros(n, dtype=np.int64))
        self._keys.append(np.fromiter(columns.seq, dtype=np.int64, count=n))
        self._stamps.append(np.fromiter(columns.stamp_ns, dtype=np.int64, count=n))
        xyz = (columns.pos_x, columns.pos_y, columns.pos_z)
        self._positions.append(np.array(xyz, dtype=np.float64).T)
        self._pose_valid.append(np.fromiter(columns.pose_valid, dtype=np.bool_, count=n))
        self._surprise.append(np.fromiter(columns.surprise, dtype=np.float64, count=n))
        self._alive.append(np.ones(n, dtype=np.bool_))
        self._robots.append(_codes(self._robot_codes, columns.robot_id))
        self._pose_frames.append(_codes(self._frame_codes, columns.pose_frame))
        self._cameras.append(_codes(self._camera_codes, columns.camera))
        is_place = map(PLACE.__eq__, columns.kind)
        self._places.append(np.fromiter(is_place, dtype=np.bool_, count=n))


def _codes(codes: dict[str, int], values: Sequence[str]) -> npt.NDArray[np.int32]:
    """The code of each value, new values given the next codes (a few distinct, many rows)."""
    for value in dict.fromkeys(values):
        codes.setdefault(value, len(codes))
    return np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=len(values))
