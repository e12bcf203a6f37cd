"""What a store holds, in memory: its embedder and origin, its episodes, the disk budget.

* :class:`StoreMeta`: the store's ``meta`` entries (the embedder of its embeddings, the
  start of its recording), and the checks of an add or a query against them.
* :class:`Catalog`: the live episodes, kept in step: the
  :class:`~surprise_memory.memory.store.search.EmbeddingIndex` the queries run on, the key
  of each episode id (the database row id) and the bytes each episode counts against the
  disk budget.
* :func:`eviction_victims`: the budget rule, which episodes to evict: lowest surprise
  first, ties to the oldest trigger stamp, then to the earliest added. Both backends
  apply it per robot (the SQLite one through :class:`Catalog`, PostgreSQL over the rows
  of the adding robot), to the surprise episodes only: place keyframes neither count
  against the budget nor are evicted by it (their number is bounded by ``place_history``
  per place, so by the area covered).

Not thread-safe on its own; the store guards it with its lock.
"""

from __future__ import annotations

import heapq
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import compress

import numpy as np
import numpy.typing as npt

from surprise_memory.memory.places import EPISODE, PLACE
from surprise_memory.memory.retrieval import EmbedderMismatchError, RetrievalQuery
from surprise_memory.memory.store.column_file import EpisodeColumns
from surprise_memory.memory.store.records import EpisodeRecord
from surprise_memory.memory.store.search import EmbeddingIndex

__all__ = ["Catalog", "StoreMeta", "eviction_victims", "over_budget"]


def over_budget(count: int, total_bytes: int, *, max_episodes: int, max_store_bytes: int) -> bool:
    """Whether ``count`` episodes of ``total_bytes`` in all break the budget (0 = no limit)."""
    return (max_episodes > 0 and count > max_episodes) or (
        max_store_bytes > 0 and total_bytes > max_store_bytes
    )


def eviction_victims(
    order: Iterable[int],
    sizes: Mapping[int, int],
    *,
    count: int,
    total_bytes: int,
    max_episodes: int,
    max_store_bytes: int,
) -> list[int]:
    """The episodes to evict: the first of ``order`` until the rest fits the budget.

    Args:
        order: Keys of the episodes that may go, in eviction order (see
            :meth:`EmbeddingIndex.eviction_order`).
        sizes: Bytes of each episode by key.
        count: Episodes held now.
        total_bytes: Bytes held now.
        max_episodes: Most episodes kept (0 = no limit).
        max_store_bytes: Most bytes kept (0 = no limit).

    Returns:
        Keys to evict, in order; fewer than needed when ``order`` runs out.

    """
    victims: list[int] = []
    for key in order:
        if not over_budget(
            count, total_bytes, max_episodes=max_episodes, max_store_bytes=max_store_bytes
        ):
            break
        victims.append(key)
        count -= 1
        total_bytes -= sizes[key]
    return victims


class Catalog:
    """The live episodes: search index, id -> key, bytes per episode, kept in step.

    Args:
        dim: Embedding dimension; None = set by the first :meth:`add`.
        index: The search index to keep in step (the SQLite store gives an
            :class:`~surprise_memory.memory.store.episode_index.EpisodeIndex`); None = a
            new in-memory :class:`EmbeddingIndex`.

    """

    def __init__(self, dim: int | None = None, index: EmbeddingIndex | None = None) -> None:
        self._index = index if index is not None else EmbeddingIndex(dim)
        self._key_of: dict[str, int] = {}
        self._bytes_of: dict[int, int] = {}
        self._total_bytes = 0
        self._robot_of: dict[int, str] = {}
        self._robot_count: dict[str, int] = {}
        self._robot_bytes: dict[str, int] = {}
        self._last_key = 0
        self._id_of: dict[int, str] = {}
        # per robot, built at its first eviction: (surprise, stamp, key) of its episodes,
        # removed ones skipped when they come up (see :meth:`victims`)
        self._heaps: dict[str, list[tuple[float, int, int]]] = {}
        self._sort_fields: dict[int, tuple[float, int]] = {}
        self._places: set[int] = set()  # keys of the place keyframes (outside the budget)

    @property
    def index(self) -> EmbeddingIndex:
        """The in-memory search over the live episodes."""
        return self._index

    @property
    def total_bytes(self) -> int:
        """Bytes of every live record (the budget counts its robot's episodes' only)."""
        return self._total_bytes

    def __len__(self) -> int:
        return len(self._key_of)

    @property
    def place_count(self) -> int:
        """How many of the live records are place keyframes."""
        return len(self._places)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._key_of

    def key(self, episode_id: str) -> int | None:
        """The key of an episode, or None when it is not held."""
        return self._key_of.get(episode_id)

    def ids(self) -> list[str]:
        """Ids of the live episodes, in the order they were added (ascending key)."""
        return sorted(self._key_of, key=self._key_of.__getitem__)

    def keys(self) -> set[int]:
        """Keys of the live episodes."""
        return set(self._key_of.values())

    def holds(self, key: int) -> bool:
        """Whether the episode of this key is live."""
        return key in self._id_of

    @property
    def last_key(self) -> int:
        """The largest key ever added (0: none); keys only grow."""
        return self._last_key

    @property
    def revision(self) -> tuple[int, int]:
        """(episodes held, largest key ever added): changes with every add and removal."""
        return len(self._key_of), self._last_key

    def add(
        self,
        key: int,
        episode_id: str,
        nbytes: int,
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
        """Add one record (see :meth:`EmbeddingIndex.add` for the index fields).

        Raises:
            EmbedderMismatchError: The embedding dimension differs from the index's.

        """
        self._index.add(
            key,
            stamp_ns=stamp_ns,
            position=position,
            pose_valid=pose_valid,
            surprise=surprise,
            unit_embeddings=unit_embeddings,
            robot_id=robot_id,
            pose_frame=pose_frame,
            camera=camera,
            kind=kind,
        )
        self._key_of[episode_id] = key
        self._id_of[key] = episode_id
        self._last_key = max(self._last_key, key)
        self._bytes_of[key] = nbytes
        self._total_bytes += nbytes
        self._count(key, robot_id, nbytes, (surprise, stamp_ns), kind)

    def _count(
        self, key: int, robot_id: str, nbytes: int, order: tuple[float, int], kind: str
    ) -> None:
        """Count a new record against its robot's budget (a surprise episode) or not (a place).

        ``order``: its surprise and stamp, the eviction order's fields.
        """
        if kind == PLACE:
            self._places.add(key)
            return
        surprise, stamp_ns = order
        self._sort_fields[key] = order
        heap = self._heaps.get(robot_id)
        if heap is not None:
            heapq.heappush(heap, (surprise, stamp_ns, key))
        self._robot_of[key] = robot_id
        self._robot_count[robot_id] = self._robot_count.get(robot_id, 0) + 1
        self._robot_bytes[robot_id] = self._robot_bytes.get(robot_id, 0) + nbytes

    def load(self, columns: EpisodeColumns) -> None:
        """Take many episodes read from the database at once (an open): ids, sizes, filters.

        Whole columns at once (a robot-year is 671,000 rows): the index's ``load`` takes the
        filter fields; its vectors are the caller's.
        """
        load = getattr(self._index, "load", None)
        if load is None:
            raise TypeError("this catalog's index cannot load rows without embeddings")
        load(columns)
        keys = columns.seq
        self._key_of.update(zip(columns.episode_id, keys, strict=True))
        self._id_of.update(zip(keys, columns.episode_id, strict=True))
        self._bytes_of.update(zip(keys, columns.nbytes, strict=True))
        self._total_bytes += sum(columns.nbytes)
        is_place = list(map(PLACE.__eq__, columns.kind))
        self._places.update(compress(keys, is_place))
        # the surprise episodes: counted against their robot's budget
        episode = list(map(operator.not_, is_place))
        ep_keys = list(compress(keys, episode))
        robots = list(compress(columns.robot_id, episode))
        order = zip(
            compress(columns.surprise, episode), compress(columns.stamp_ns, episode), strict=True
        )
        self._sort_fields.update(zip(ep_keys, order, strict=True))
        self._robot_of.update(zip(ep_keys, robots, strict=True))
        ep_bytes = list(compress(columns.nbytes, episode))
        added: Counter[str] = Counter()
        if len(set(robots)) == 1:  # a robot's own store: one sum
            added[robots[0]] = sum(ep_bytes)
        else:
            for robot, nbytes in zip(robots, ep_bytes, strict=True):
                added[robot] += nbytes
        for robot, count in Counter(robots).items():
            self._robot_count[robot] = self._robot_count.get(robot, 0) + count
            self._robot_bytes[robot] = self._robot_bytes.get(robot, 0) + added[robot]
            self._heaps.pop(robot, None)  # built again, with these, at its next eviction
        self._last_key = max(self._last_key, keys[-1])

    def remove(self, keys: Sequence[int]) -> list[str]:
        """Drop episodes by key (each must be held).

        Returns:
            Their ids, in the order of ``keys``.

        """
        self._index.remove(keys)
        ids = []
        for key in keys:
            ep_id = self._id_of.pop(key)
            del self._key_of[ep_id]
            nbytes = self._bytes_of.pop(key)
            self._total_bytes -= nbytes
            ids.append(ep_id)
            if key in self._places:
                self._places.discard(key)
                continue
            del self._sort_fields[key]
            robot = self._robot_of.pop(key)
            self._robot_count[robot] -= 1
            self._robot_bytes[robot] -= nbytes
        return ids

    def victims(self, *, keep: int, max_episodes: int, max_store_bytes: int) -> list[int]:
        """Keys to evict so that ``keep``'s robot is within budget (see :func:`eviction_victims`).

        The budget is per robot: only the episodes of the robot that added ``keep`` count,
        and only they are evicted (a fleet's robots never evict each other's episodes).

        Args:
            keep: Key never to evict (the episode just added; a place keyframe: none).
            max_episodes: Most episodes kept per robot (0 = no limit).
            max_store_bytes: Most bytes kept per robot (0 = no limit).

        Returns:
            Keys in eviction order; empty when the budget holds already.

        """
        if keep in self._places:
            return []  # a place keyframe is outside the budget: it takes no episode's room
        limits = {"max_episodes": max_episodes, "max_store_bytes": max_store_bytes}
        robot = self._robot_of[keep]
        count, nbytes = self._robot_count[robot], self._robot_bytes[robot]
        if not over_budget(count, nbytes, **limits):
            return []
        heap = self._heaps.get(robot)
        if heap is None:  # the robot's first eviction: its episodes in eviction order, once
            heap = [(*self._sort_fields[k], k) for k, r in self._robot_of.items() if r == robot]
            heapq.heapify(heap)
            self._heaps[robot] = heap
        victims: list[int] = []
        kept: list[tuple[float, int, int]] = []
        while heap and over_budget(count, nbytes, **limits):
            entry = heapq.heappop(heap)
            key = entry[2]
            if key not in self._id_of or key in victims:
                continue  # removed meanwhile
            if key == keep:
                kept.append(entry)
                continue
            victims.append(key)
            count -= 1
            nbytes -= self._bytes_of[key]
        for entry in kept:
            heapq.heappush(heap, entry)
        return victims


class StoreMeta:
    """The store's ``meta`` entries: which embedder its embeddings come from, since when.

    Args:
        entries: The ``meta`` table as read (empty for a store without episodes).

    """

    def __init__(self, entries: Mapping[str, str] | None = None) -> None:
        self._entries = dict(entries or {})

    @property
    def embedder_model(self) -> str | None:
        """Model name of the frame embeddings (None before the first episode)."""
        return self._entries.get("embedder_model")

    @property
    def embedder_pretrained(self) -> bool | None:
        """Whether the frame embedder had trained weights (None before the first episode)."""
        v = self._entries.get("embedder_pretrained")
        return None if v is None else v == "1"

    @property
    def embedding_dim(self) -> int | None:
        """Dimension of the frame embeddings (None before the first episode)."""
        v = self._entries.get("embedding_dim")
        return None if v is None else int(v)

    @property
    def origin_ns(self) -> int | None:
        """The store's time origin: the earliest frame stamp it was told of, int ns.

        One origin per store, persisted, never moved by eviction: the first camera frame a
        writer saw (:meth:`EpisodeStore.note_origin`), or else the first frame of the
        earliest episode added. Every relative time (CLI, report, agent tool) counts from it.
        """
        v = self._entries.get("origin_ns")
        return None if v is None else int(v)

    def origin_update(self, stamp_ns: int) -> dict[str, str]:
        """The entry that learning of a frame at ``stamp_ns`` changes (empty when none).

        The origin only moves earlier: the first frame seen is the earliest stamp seen, and
        a writer that reopens the store later (a restarted node) keeps the first origin.
        """
        origin = self.origin_ns
        if origin is None or stamp_ns < origin:
            return {"origin_ns": str(int(stamp_ns))}
        return {}

    def check_embedder(self, model: str, pretrained: bool, dim: int) -> None:
        """Refuse embeddings of a new episode from another embedder than the store's.

        Raises:
            EmbedderMismatchError: Model, weights or dimension differ from the store's.

        """
        have = (self.embedder_model, self.embedder_pretrained, self.embedding_dim)
        if have[0] is not None and have != (model, bool(pretrained), dim):
            raise EmbedderMismatchError(
                f"embeddings from {model!r} (pretrained={bool(pretrained)}, dim={dim}) cannot "
                f"join a store of {have[0]!r} (pretrained={have[1]}, dim={have[2]}); use "
                "another store folder for another embedder"
            )

    def check_query(self, query: RetrievalQuery) -> None:
        """Refuse a query embedding from another embedder than the store's.

        Raises:
            EmbedderMismatchError: Model, dimension or (when the query says) weights differ.

        """
        if query.embedding is None or self.embedder_model is None:
            return
        want = (self.embedder_model, self.embedding_dim)
        got = (query.embedder_model, query.embedding.shape[0])
        pre = query.embedder_pretrained
        if got != want or (pre is not None and pre != self.embedder_pretrained):
            raise EmbedderMismatchError(
                f"query embedding from {got[0]!r} (dim {got[1]}, pretrained={pre}) but "
                f"this store holds {want[0]!r} (dim {want[1]}, pretrained="
                f"{self.embedder_pretrained}); embed the query with the store's model"
            )

    def updates_for(
        self, record: EpisodeRecord, dim: int, origin_ns: int | None = None
    ) -> dict[str, str]:
        """The entries that adding ``record`` (embeddings of dimension ``dim``) changes.

        Args:
            record: The episode added.
            dim: Its embedding dimension.
            origin_ns: An earlier start of the recording to keep (a migrated store's
                origin, which may predate its oldest live episode); None = the stamp only.

        """
        meta = {}
        if self.embedder_model is None:
            meta["embedder_model"] = record.embedder_model
            meta["embedder_pretrained"] = "1" if record.embedder_pretrained else "0"
            meta["embedding_dim"] = str(dim)
        first = min(record.frame_stamps_ns, default=record.stamp_ns)
        start = min(first, record.stamp_ns)
        if origin_ns is not None:
            start = min(start, origin_ns)
        meta.update(self.origin_update(start))
        return meta

    def update(self, entries: Mapping[str, str]) -> None:
        """Take committed entries."""
        self._entries.update(entries)
