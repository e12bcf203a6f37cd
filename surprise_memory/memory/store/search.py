"""The in-memory search: one embedding matrix plus per-episode arrays, no database.

:class:`EmbeddingIndex` holds what a :class:`~surprise_memory.memory.retrieval.RetrievalQuery`
needs:

* every frame embedding of every episode as one contiguous, row-normalised float32 matrix,
  the frames of an episode in consecutive rows (grown by doubling, so an append is
  amortised O(1));
* per episode: its key (the store's row id), trigger stamp, position, pose validity,
  surprise, robot and camera (a small integer code per ``robot_id``, per camera name),
  its kind (a place keyframe or a surprise episode), and the first matrix row and
  number of rows of its frames.

A query is one matrix-vector product over the frame rows (or over the frame rows of the
episodes left by the filters, when these leave few), a ``maximum.reduceat`` to take each
episode's best frame, vectorised filters and a partial sort. Removal marks episodes dead
and compacts the arrays once dead rows pass a fraction of all rows, so evicting one
episode does not move the whole matrix.

The index is not thread-safe on its own; :class:`surprise_memory.memory.store.EpisodeStore`
guards it with its lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import InputError
from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.retrieval import EmbedderMismatchError, RetrievalQuery, one_pose_frame

__all__ = ["EmbeddingIndex", "SearchResult", "max_over_rows"]

# compact the arrays once this fraction of the matrix rows belongs to removed episodes
_COMPACT_FRACTION = 0.125
# gather the rows of the filtered episodes (instead of scoring every row) below this share
_GATHER_FRACTION = 0.25


@dataclass(frozen=True)
class SearchResult:
    """Index-level answer: episode keys best first, with their score and distance.

    Attributes:
        keys: Episode keys (the store's row ids), best first.
        scores: Max cosine over each episode's frames (NaN without a query embedding).
        distances: Distance in metres to the query location (NaN without one).

    """

    keys: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    distances: npt.NDArray[np.float64]


class _Rows:
    """A growable array: the first axis has spare capacity, so appends are amortised O(1)."""

    def __init__(self, tail: tuple[int, ...], dtype: npt.DTypeLike) -> None:
        self._buf: npt.NDArray[Any] = np.empty((0, *tail), dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def nbytes(self) -> int:
        """Bytes allocated (capacity, not only the rows in use)."""
        return int(self._buf.nbytes)

    def view(self) -> npt.NDArray[Any]:
        """The rows in use (a view, no copy)."""
        return self._buf[: self._n]

    def reserve(self, rows: int) -> None:
        """Make room for ``rows`` rows in all, without changing the contents."""
        if rows > self._buf.shape[0]:
            new = np.empty((rows, *self._buf.shape[1:]), dtype=self._buf.dtype)
            new[: self._n] = self._buf[: self._n]
            self._buf = new

    def append(self, rows: npt.ArrayLike) -> None:
        """Append rows (shape (n, *tail))."""
        arr = np.asarray(rows, dtype=self._buf.dtype)
        need = self._n + arr.shape[0]
        if need > self._buf.shape[0]:
            self.reserve(max(need, 2 * self._buf.shape[0], 16))
        self._buf[self._n : need] = arr
        self._n = need

    def keep_runs(self, starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> None:
        """Keep only the given runs of rows (ascending, disjoint), moving them down in place."""
        if starts.size:
            # merge runs that touch, so a few evictions mean a few block moves
            ends = starts + lengths
            new_run = np.concatenate(([True], starts[1:] != ends[:-1]))
            run_id = np.cumsum(new_run) - 1
            starts = starts[new_run]
            lengths = np.bincount(run_id, weights=lengths).astype(np.int64)
        dst = 0
        for s, n in zip(starts.tolist(), lengths.tolist(), strict=True):
            if s != dst:
                self._buf[dst : dst + n] = self._buf[s : s + n]
            dst += n
        self._n = dst

    def keep(self, index: npt.NDArray[np.intp]) -> None:
        """Keep only the rows at ``index`` (ascending), in order."""
        k = index.size
        self._buf[:k] = self._buf[index]
        self._n = k


def max_over_rows(
    matrix: npt.NDArray[np.float32],
    first: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
    q: npt.NDArray[np.float32],
) -> npt.NDArray[np.float32]:
    """The max of ``matrix @ q`` over each run of rows: ``counts[i]`` (> 0) from ``first[i]``."""
    offsets = np.cumsum(counts) - counts
    rows = np.repeat(first - offsets, counts) + np.arange(int(counts.sum()))
    best: npt.NDArray[np.float32] = np.maximum.reduceat(matrix[rows] @ q, offsets)
    return best


class EmbeddingIndex:
    """Frame embeddings of all episodes in one matrix, with the per-episode filter arrays.

    Args:
        dim: Embedding dimension; None = set by the first :meth:`add`.

    """

    def __init__(self, dim: int | None = None) -> None:
        self._dim = dim
        self._matrix = _Rows((dim or 0,), np.float32)
        self._keys = _Rows((), np.int64)
        self._stamps = _Rows((), np.int64)
        self._positions = _Rows((3,), np.float64)
        self._pose_valid = _Rows((), np.bool_)
        self._surprise = _Rows((), np.float64)
        self._first_row = _Rows((), np.int64)
        self._row_count = _Rows((), np.int64)
        self._alive = _Rows((), np.bool_)
        self._robots = _Rows((), np.int32)
        self._robot_codes: dict[str, int] = {}
        self._pose_frames = _Rows((), np.int32)  # code of each episode's pose frame
        self._frame_codes: dict[str, int] = {}
        self._cameras = _Rows((), np.int32)  # code of each episode's camera
        self._camera_codes: dict[str, int] = {}
        self._places = _Rows((), np.bool_)  # a place keyframe (else a surprise episode)
        self._dead_rows = 0

    @property
    def dim(self) -> int | None:
        """Embedding dimension (None before the first episode)."""
        return self._dim

    def __len__(self) -> int:
        """Number of live episodes."""
        return int(np.count_nonzero(self._alive.view()))

    @property
    def frame_rows(self) -> int:
        """Matrix rows in use, including rows of removed episodes not yet compacted."""
        return len(self._matrix)

    @property
    def nbytes(self) -> int:
        """Bytes allocated by the matrix and the per-episode arrays (with spare capacity)."""
        return self._matrix.nbytes + sum(a.nbytes for a in self._episode_arrays())

    def _episode_arrays(self) -> tuple[_Rows, ...]:
        """The per-episode columns, kept row for row in step."""
        return (
            self._keys,
            self._stamps,
            self._positions,
            self._pose_valid,
            self._surprise,
            self._first_row,
            self._row_count,
            self._alive,
            self._robots,
            self._pose_frames,
            self._cameras,
            self._places,
        )

    def reserve(self, episodes: int, frames: int) -> None:
        """Pre-allocate room (e.g. when loading a store whose size is known)."""
        if self._dim is None:
            return
        self._matrix.reserve(frames)
        for arr in self._episode_arrays():
            arr.reserve(episodes)

    @staticmethod
    def normalise(embeddings: npt.ArrayLike) -> npt.NDArray[np.float32]:
        """Rows scaled to unit norm, as float32.

        Raises:
            InputError: Not a non-empty 2-D array of finite reals, or a row is all zeros.

        """
        emb = np.asarray(embeddings)
        if emb.ndim != 2 or emb.shape[0] == 0 or emb.shape[1] == 0:
            raise InputError(f"embeddings have shape {emb.shape}: expected (frames, D)")
        if not np.issubdtype(emb.dtype, np.floating) and not np.issubdtype(emb.dtype, np.integer):
            raise InputError(f"embeddings have dtype {emb.dtype}: expected real numbers")
        emb = emb.astype(np.float32)
        if not np.all(np.isfinite(emb)):
            raise InputError("embeddings have NaN or infinite values")
        norms = np.linalg.norm(emb, axis=1)
        if np.any(norms == 0.0):
            raise InputError(
                f"embedding rows {np.flatnonzero(norms == 0.0).tolist()} are all zeros"
            )
        unit: npt.NDArray[np.float32] = emb / norms[:, None]
        return unit

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
        """Append one record; its embeddings must already be unit rows (see :meth:`normalise`).

        Raises:
            EmbedderMismatchError: The embedding dimension differs from the index's.

        """
        d = unit_embeddings.shape[1]
        if self._dim is None:
            self._dim = d
            self._matrix = _Rows((d,), np.float32)
        elif d != self._dim:
            raise EmbedderMismatchError(
                f"embeddings have dimension {d}, the store holds dimension {self._dim}"
            )
        self._first_row.append([len(self._matrix)])
        self._row_count.append([unit_embeddings.shape[0]])
        self._matrix.append(unit_embeddings)
        self._keys.append([key])
        self._stamps.append([stamp_ns])
        self._positions.append([position])
        self._pose_valid.append([pose_valid])
        self._surprise.append([surprise])
        self._alive.append([True])
        self._robots.append([self._robot_codes.setdefault(robot_id, len(self._robot_codes))])
        self._pose_frames.append([self._frame_codes.setdefault(pose_frame, len(self._frame_codes))])
        self._cameras.append([self._camera_codes.setdefault(camera, len(self._camera_codes))])
        self._places.append([kind == PLACE])

    def remove(self, keys: Sequence[int]) -> None:
        """Mark episodes removed; compact once removed rows pass an eighth of all rows."""
        if not keys:
            return
        hit = np.isin(self._keys.view(), np.asarray(keys, dtype=np.int64)) & self._alive.view()
        self._alive.view()[hit] = False
        self._dead_rows += int(self._row_count.view()[hit].sum())
        if self._dead_rows > _COMPACT_FRACTION * len(self._matrix):
            self._drop_dead_rows()

    def _drop_dead_rows(self) -> None:
        """Reclaim the removed episodes' matrix rows: here by compacting every array."""
        self.compact()

    def compact(self) -> None:
        """Drop removed episodes from every array, moving the live rows down in place."""
        self._compact_rows()
        idx = np.flatnonzero(self._alive.view())
        for arr in self._episode_arrays():
            arr.keep(idx)

    def _compact_rows(self) -> None:
        """Move the live episodes' matrix rows down over the removed ones' (rows only)."""
        counts = self._row_count.view()
        counts[~self._alive.view()] = 0
        owners = np.flatnonzero(counts)
        self._matrix.keep_runs(self._first_row.view()[owners], counts[owners])
        self._first_row.view()[owners] = np.cumsum(counts[owners]) - counts[owners]
        self._dead_rows = 0

    def _robot_mask(self, robot_id: str) -> npt.NDArray[np.bool_]:
        """Which episodes belong to ``robot_id`` (all false for a robot never seen)."""
        return self._code_mask(self._robots, self._robot_codes, robot_id)

    def _code_mask(self, column: _Rows, codes: dict[str, int], value: str) -> npt.NDArray[np.bool_]:
        """Which episodes have ``value`` in a coded column (all false for one never seen)."""
        code = codes.get(value)
        if code is None:
            return np.zeros(len(self._keys), dtype=np.bool_)
        mask: npt.NDArray[np.bool_] = column.view() == code
        return mask

    def eviction_order(
        self, exclude: int | None = None, robot_id: str | None = None
    ) -> npt.NDArray[np.int64]:
        """Keys of live episodes in eviction order: lowest surprise first, then oldest stamp.

        Args:
            exclude: A key never to list (the episode just added).
            robot_id: List only this robot's episodes; None = every robot's.

        """
        alive = self._alive.view().copy()
        if exclude is not None:
            alive &= self._keys.view() != exclude
        if robot_id is not None:
            alive &= self._robot_mask(robot_id)
        idx = np.flatnonzero(alive)
        order = np.lexsort(
            (self._keys.view()[idx], self._stamps.view()[idx], self._surprise.view()[idx])
        )
        return self._keys.view()[idx[order]].astype(np.int64)

    def search(self, query: RetrievalQuery, k: int) -> SearchResult:
        """Run the filters and the ranking of ``query``; return at most ``k`` episodes.

        Raises:
            EmbedderMismatchError: The query vector's dimension differs from the index's.

        """
        n = len(self._keys)
        mask = self._alive.view().copy()
        if query.robot_id is not None:
            mask &= self._robot_mask(query.robot_id)
        if query.camera is not None:
            mask &= self._code_mask(self._cameras, self._camera_codes, query.camera)
        if query.kinds is not None and len(query.kinds) == 1:
            mask &= self._places.view() if PLACE in query.kinds else ~self._places.view()
        stamps = self._stamps.view()
        if query.start_ns is not None:
            mask &= stamps >= query.start_ns
        if query.end_ns is not None:
            mask &= stamps <= query.end_ns
        dist: npt.NDArray[np.float64] | None = None
        if query.near is not None:
            mask &= self._pose_valid.view()
            codes = self._pose_frames.view()
            names = {c: f for f, c in self._frame_codes.items()}
            present = np.flatnonzero(np.bincount(codes[mask], minlength=len(names)))
            frame = one_pose_frame(query, {names[int(c)] for c in present})
            mask &= codes == self._frame_codes.get(frame if frame is not None else "", -1)
            positions = self._positions.view()
            near = np.asarray(query.near, dtype=np.float64)
            if query.radius_m is not None:  # a box first: the distance only inside it
                mask &= np.abs(positions[:, 0] - near[0]) <= query.radius_m
                mask &= np.abs(positions[:, 1] - near[1]) <= query.radius_m
            # distances of the episodes the filters keep only: a year's 670,000 cost 18 ms
            inside = np.flatnonzero(mask)
            offset = positions[inside] - near
            dist = np.full(n, np.inf)
            dist[inside] = np.sqrt(np.einsum("ij,ij->i", offset, offset))
            if query.radius_m is not None:
                mask &= dist <= query.radius_m
        scores: npt.NDArray[np.float64] | None = None
        q = query.query_vector
        if q is not None and self._dim is not None and q.shape[0] != self._dim:
            raise EmbedderMismatchError(
                f"query embedding has dimension {q.shape[0]}, the store holds dimension {self._dim}"
            )
        if q is not None:
            cand, scores = self._scored(q, mask, k)
        else:
            cand = np.flatnonzero(mask)
        if cand.size == 0:
            empty = np.empty(0, dtype=np.float64)
            return SearchResult(np.empty(0, dtype=np.int64), empty, empty)
        newer = stamps[cand].astype(np.float64)
        if scores is not None:
            primary = -scores
        elif dist is not None:
            primary = dist[cand]
        else:
            primary = -newer
        # ties: newer stamp first, then later insertion (larger key)
        key_tie = -self._keys.view()[cand].astype(np.float64)
        if cand.size > 4 * k:
            part = np.argpartition(primary, k - 1)[:k]
            order = part[np.lexsort((key_tie[part], -newer[part], primary[part]))]
        else:
            order = np.lexsort((key_tie, -newer, primary))[:k]
        chosen = cand[order]
        nan = np.full(chosen.size, np.nan)
        return SearchResult(
            keys=self._keys.view()[chosen].astype(np.int64),
            scores=nan if scores is None else scores[order].astype(np.float64),
            distances=nan if dist is None else dist[chosen].astype(np.float64),
        )

    def _scored(
        self, q: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_], k: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
        """The episodes ``mask`` keeps that are scored, and their max cosine over frames.

        Returns the positions (ascending) and their scores. Here every episode the mask
        keeps is scored; a subclass may score only the best for ``k`` results, and so need
        not visit every position of a large store.
        """
        del k
        cand = np.flatnonzero(mask)
        if cand.size == 0:
            return cand, np.empty(0, dtype=np.float64)
        first = self._first_row.view()
        if cand.size >= _GATHER_FRACTION * mask.size:
            # one product over every row; dead rows are simply not read out
            best = np.maximum.reduceat(self._matrix.view() @ q, first)
            return cand, best[cand].astype(np.float64)
        best = max_over_rows(self._matrix.view(), first[cand], self._row_count.view()[cand], q)
        return cand, best.astype(np.float64)
