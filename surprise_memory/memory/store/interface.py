"""What an episode store offers, as :class:`typing.Protocol` classes (no implementation).

* :class:`EpisodeRetriever`: answers a :class:`~surprise_memory.memory.retrieval.RetrievalQuery`;
  all an agent tool needs (the store, or a client of the memory node's service).
* :class:`HasTimeOrigin`: knows its time origin (the first frame seen).
* :class:`RetrievesByText`: a retriever that embeds a text query itself (the memory
  node's service does; a store has no text tower).
* :class:`EpisodeStoreBackend`: the whole store: add, read, delete and query episodes.
  Two backends implement it: :class:`~surprise_memory.memory.store.sqlite.EpisodeStore`
  (the SQLite folder) and
  :class:`~surprise_memory.memory.store.postgres.PostgresEpisodeStore` (PostgreSQL +
  pgvector, shared by a fleet); :func:`~surprise_memory.memory.store.factory.open_store`
  picks one from ``store_path``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from surprise_memory.config import StoreConfig
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.base import EpisodeCopy
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.perception.frames import Frame

__all__ = ["EpisodeRetriever", "EpisodeStoreBackend", "HasTimeOrigin", "RetrievesByText"]


class EpisodeRetriever(Protocol):
    """What the tool needs from a memory: answer a :class:`RetrievalQuery`."""

    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Episodes best first; with ``include_images``, each hit carries its JPEG bytes."""
        ...


@runtime_checkable
class HasTimeOrigin(Protocol):
    """A retriever that knows its store's time origin (int ns, None when it has none yet)."""

    @property
    def origin_ns(self) -> int | None:
        """The store's time origin, int ns: the first frame seen."""
        ...


@runtime_checkable
class RetrievesByText(Protocol):
    """A retriever that can rank by a text it embeds itself, with the store's own model."""

    def retrieve_text(
        self, text: str, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Like ``retrieve``, ranked by ``text`` (``query`` must carry no embedding)."""
        ...


class EpisodeStoreBackend(EpisodeRetriever, HasTimeOrigin, Protocol):
    """An episode store backend: episodes in, episodes and retrievals out.

    :class:`~surprise_memory.memory.store.sqlite.EpisodeStore` (a SQLite database and a
    JPEG folder, embedded in the process) and
    :class:`~surprise_memory.memory.store.postgres.PostgresEpisodeStore` (a PostgreSQL
    database shared by many processes) implement it. The contract a backend keeps,
    beyond the signatures:

    * an episode is stored whole or not at all (its frames before its rows), and a
      committed one survives a crash;
    * every episode of a store comes from the same embedder (model, weights, dimension);
      a mismatch raises :class:`~surprise_memory.memory.retrieval.EmbedderMismatchError`;
    * every episode has a ``robot_id``; a query may filter by it;
    * after each add the adding robot's disk budget holds: its lowest-surprise episode
      goes first, never the one just added, never another robot's; the budget counts
      surprise episodes only;
    * a place keyframe's add (and a budgeted import) keeps the ``place_history`` newest
      views of its place and robot by stamp, deleting the others in the same transaction;
    * calls from several threads are safe;
    * errors are :class:`~surprise_memory.errors.InputError` (the request is wrong) or
      :class:`~surprise_memory.errors.StoreError` (the store cannot do it).

    See :class:`~surprise_memory.memory.store.sqlite.EpisodeStore` for the other methods'
    arguments and errors.
    """

    @property
    def config(self) -> StoreConfig:
        """The store's settings."""
        ...

    def reconfigure(self, config: StoreConfig) -> None:
        """Apply new settings live (budget, JPEG quality, result caps); the dtype is fixed."""
        ...

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only (adds and deletes are refused)."""
        ...

    @property
    def embedder_model(self) -> str | None:
        """Model name of the frame embeddings (None before the first episode)."""
        ...

    @property
    def embedder_pretrained(self) -> bool | None:
        """Whether the frame embedder had trained weights (None before the first episode)."""
        ...

    @property
    def embedding_dim(self) -> int | None:
        """Dimension of the frame embeddings (None before the first episode)."""
        ...

    @property
    def total_bytes(self) -> int:
        """Bytes counted by the disk budget."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, episode_id: object) -> bool: ...

    def add(
        self,
        frames: Sequence[Frame],
        embeddings: npt.ArrayLike,
        *,
        stamp_ns: int,
        surprise: float,
        embedder_model: str,
        embedder_pretrained: bool,
        encoder_model: str = "",
        encoder_pretrained: bool = True,
        threshold: float = math.nan,
        pose: Pose | None = None,
        episode_id: str | None = None,
        robot_id: str | None = None,
        session_id: str | None = None,
        camera: CameraView | None = None,
        kind: str = "episode",
        place_key: str = "",
        pose_trust: PoseTrust | None = None,
    ) -> EpisodeRecord:
        """Store one record durably (an episode or a place keyframe), then apply its bounds.

        Args:
            frames: The episode's frames, in time order (usually 8).
            embeddings: (len(frames), D) array, one embedding per frame, from the image
                tower of ``embedder_model``.
            stamp_ns: Trigger stamp (the peak frame's), int ns.
            surprise: Surprise s(t) at the trigger.
            embedder_model: Model name of the embeddings; every episode of a store must
                come from the same model, weights and dimension.
            embedder_pretrained: Whether the embedder has its trained weights.
            encoder_model: Model that scored surprise.
            encoder_pretrained: Whether that encoder has its trained weights.
            threshold: Gate threshold tau at the trigger (NaN when unknown).
            pose: Robot pose at ``stamp_ns``; None = unknown (``pose_valid`` false).
            episode_id: Unique id made of letters, digits, ``_ . -`` (at most 128); None =
                generated from the stamp.
            robot_id: The robot that recorded it; None = ``config.robot_id``, or the host
                name when that is empty.
            session_id: The session that recorded it (its poses in ``odom`` belong to it);
                None = this machine's boot (``records.host_session_id()``), "" = unknown
                (a recording from elsewhere).
            camera: The camera that saw it: its name, optical frame and pose at the
                trigger; None = the one unnamed camera, pose unknown.
            kind: ``"episode"`` (a surprise episode: then the robot's disk budget is
                applied) or ``"place"`` (a place keyframe, usually one frame, with its
                pose: then its place's views beyond the ``place_history`` newest are
                deleted in the same transaction; the budget is left alone).
            place_key: A place keyframe's place
                (a :class:`~surprise_memory.memory.places.PlaceKeyframeDecision`'s);
                "" for an episode.
            pose_trust: The pose's horizontal uncertainty and map
                (:mod:`~surprise_memory.memory.pose_trust`); None = unknown.

        Returns:
            The stored record.

        Raises:
            InputError: A frame, the embeddings, a stamp, the pose, the kind or the id is
                invalid (nothing was written).
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: The store is read-only or closed, the id exists, or the disk
                write or the transaction failed (nothing was committed).

        """
        ...

    def import_episode(
        self,
        record: EpisodeRecord,
        jpegs: Sequence[bytes],
        embeddings: npt.ArrayLike,
        *,
        origin_ns: int | None = None,
        budget: bool = False,
    ) -> EpisodeRecord:
        """Store an episode copied from another store (``migrate``, a fleet's sender).

        Its fields (id, robot, stamps, pose, camera, models, creation time), JPEG bytes and stored
        embeddings are kept as given.

        Args:
            record: The episode as the source store returned it.
            jpegs: Its frames' JPEG bytes, stored unchanged.
            embeddings: Its stored unit-norm embeddings (frames, D), not normalised again.
            origin_ns: The source's recording start, kept when earlier than this store's.
            budget: Apply this store's disk budget to the episode's robot afterwards, and
                ``place_history`` to a place keyframe, as :meth:`add` does (a robot's
                records delivered to a fleet store); False = none (a copy keeps every
                record).

        Returns:
            The stored episode (reading its frames from this store).

        Raises:
            InputError: Counts differ, or an id is invalid.
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: Read-only, the id exists, or the write failed (nothing committed).

        """
        ...

    def import_episodes(
        self,
        copies: Sequence[EpisodeCopy],
        *,
        origin_ns: int | None = None,
        defer_index: bool = False,
    ) -> None:
        """Store episodes copied from another store, no budget applied (``migrate``'s batches).

        Args:
            copies: The episodes, each as :meth:`import_episode` takes it.
            origin_ns: The source's recording start, kept when earlier than this store's.
            defer_index: Do not create a missing approximate index (PostgreSQL's HNSW):
                :meth:`build_deferred_index` does, once, after the last batch.

        Raises:
            InputError: Counts differ, or an id is invalid.
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: Read-only, an id exists, or a write failed (PostgreSQL stores
                none of them then; a folder those before it).

        """
        ...

    def build_deferred_index(self) -> None:
        """Create the approximate index that imports with ``defer_index`` left missing."""
        ...

    def get(self, episode_id: str) -> EpisodeRecord:
        """The episode with this id."""
        ...

    def latest_places(
        self, place_keys: Sequence[str], robot_id: str | None = None
    ) -> list[EpisodeRecord]:
        """The newest place keyframe of each of these places, by an index on the place.

        Places without a view are left out; ``robot_id`` None = the newest of any robot.
        """
        ...

    def note_origin(self, stamp_ns: int) -> None:
        """Persist a frame stamp as the time origin if it is the earliest seen."""
        ...

    def delete(self, episode_ids: Sequence[str]) -> int:
        """Delete episodes by id; returns how many were found and deleted."""
        ...

    def note_snapshot(self, episode_ids: Sequence[str], note: SnapshotNote) -> int:
        """Record a bag recorder's answer on these episodes; how many are still stored."""
        ...

    def snapshot_notes(self, episode_ids: Sequence[str]) -> dict[str, list[SnapshotNote]]:
        """The snapshot notes of these episodes, by id (episodes without one left out)."""
        ...

    def episode_ids(self) -> list[str]:
        """Ids of all episodes, in the order they were added."""
        ...

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """The stored (unit-norm) frame embeddings of an episode, (frames, D) float32."""
        ...

    def summaries(self, robot_id: str | None = None) -> list[EpisodeSummary]:
        """Every episode (or ``robot_id``'s) in brief, in the order added: a timeline, a map.

        One statement over the episode rows, no frames or embeddings read.
        """
        ...

    def frame_jpeg(self, episode_id: str, index: int) -> bytes:
        """One frame of an episode, its JPEG bytes as stored (never re-encoded).

        Raises:
            InputError: ``index`` is not a frame of the episode.
            StoreError: No such episode, or the frame cannot be read (e.g. evicted).

        """
        ...

    def refresh(self) -> bool:
        """Catch up with what other processes committed; whether the episodes changed.

        A read-only folder store sees the episodes committed when it opened until it is
        refreshed; the PostgreSQL store reads the database live. Either way the answer is
        whether episodes were added or removed since the previous call (or the open), so
        a caller polling it (the memory browser's live feed) knows when to look again.
        """
        ...

    def search(self, *, include_images: bool = False, **query: Any) -> list[RetrievalHit]:
        """Shorthand: ``retrieve(RetrievalQuery(**query), include_images=...)``."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...

    def __enter__(self) -> EpisodeStoreBackend: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
