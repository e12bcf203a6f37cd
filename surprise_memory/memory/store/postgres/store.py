"""The PostgreSQL + pgvector backend: :class:`PostgresEpisodeStore`, one memory for a fleet.

Where the SQLite folder is one robot's embedded store, this backend is one database that
several memory nodes (robots) write to at once and any client queries, across the fleet or
for one robot (``RetrievalQuery.robot_id``). The semantics are the SQLite store's (the same
test suite runs on both):

* **Whole or nothing.** An episode (its row, its frames' JPEG bytes, its ``halfvec``
  embeddings, the ``meta`` and per-robot counters) and the evictions its add causes are one
  transaction; PostgreSQL commits it durably (``fsync`` and ``synchronous_commit`` on, as
  a server ships) and rolls back what a killed client left uncommitted. No files exist
  outside the database, so nothing is ever orphaned.
* **Embedder.** The first committed episode fixes the store's embedder (model, weights,
  dimension) for every robot; another one is refused with
  :class:`~surprise_memory.memory.retrieval.EmbedderMismatchError`, also when two writers
  race to add the first episode.
* **Budget per robot.** ``max_episodes`` and ``max_store_bytes`` apply to the adding
  robot's episodes with the rule of
  :func:`~surprise_memory.memory.store.catalog.eviction_victims` (lowest surprise, then
  oldest stamp, then first added; never the episode just added, never another robot's).
  The adds of one robot serialise on its ``robots`` row; robots write in parallel.
* **Many writers, many readers.** Each store object holds one connection
  (:class:`~.session.Session`, guarded by a lock: a node may add from one thread and
  query from others); each process has its own. ``read_only=True`` makes every
  transaction read-only. A query and the reading of its episodes (and their JPEGs) run in
  one repeatable-read transaction, so an eviction in between cannot take the images of a
  returned episode. A dropped connection (a server restart) is opened again on the next
  call.

Where things are: :mod:`~surprise_memory.memory.store.postgres.schema` (tables, versions,
migrations, the HNSW index), :mod:`~surprise_memory.memory.store.postgres.rows` (the row
statements), :mod:`~surprise_memory.memory.store.postgres.search` (queries, exact and
approximate), :mod:`.session` (the connection), :mod:`.writes` (the add's transaction).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg

from surprise_memory.config import StoreConfig
from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.base import EpisodeCopy, StoreFront
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.frame_files import encode_jpeg
from surprise_memory.memory.store.postgres import rows
from surprise_memory.memory.store.postgres.schema import ensure_ann_index
from surprise_memory.memory.store.postgres.search import find
from surprise_memory.memory.store.postgres.session import Session
from surprise_memory.memory.store.postgres.snapshots import select_snapshots, upsert_snapshots
from surprise_memory.memory.store.postgres.writes import commit_copies, commit_episode
from surprise_memory.memory.store.records import (
    EpisodeRecord,
    RetrievalHit,
    check_frame_index,
    checked_import,
    checked_origin,
    new_episode,
    with_source,
)
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.perception.frames import Frame

__all__ = ["PostgresEpisodeStore"]


class PostgresEpisodeStore(StoreFront):
    """Episodes in PostgreSQL + pgvector (see the module docstring for the guarantees).

    Long class: its public surface is the store interface, one short method each.

    Implements :class:`~surprise_memory.memory.store.interface.EpisodeStoreBackend`.
    Embeddings are stored as ``halfvec`` whatever ``config.embedding_dtype`` says (that
    setting is the SQLite store's): pgvector's HNSW index over 1024-d ``vector`` would take
    twice the memory, and the cosine error of float16, about 1e-3, changes no ranking that
    matters.

    Args:
        url: A libpq connection string, ``postgresql://user@host:port/db?sslmode=...``;
            the password comes from ``PGPASSWORD`` / ``PGPASSFILE``, not from the string.
        config: Budget, JPEG quality, robot id, approximate-search settings; None = defaults.
        read_only: Only read (no schema creation or migration, no adds or deletes).

    Raises:
        StoreError: The server cannot be reached, the login fails, there is no store and
            ``read_only`` is set, the schema is newer than this code, or pgvector is missing.

    """

    def __init__(
        self, url: str, config: StoreConfig | None = None, *, read_only: bool = False
    ) -> None:
        self._config = config or StoreConfig()
        self._read_only = read_only
        self._session = Session(
            url, read_only=read_only, timeout_s=self._config.store_timeout_seconds
        )
        try:
            with self._session.reading("count episodes") as conn:
                self._revision = rows.revision(conn)  # what refresh() compares with
        except BaseException:
            self._session.close()
            raise

    # ----------------------------------------------------------------- properties
    @property
    def location(self) -> str:
        """The connection string without its password."""
        return self._session.where

    def reconfigure(self, config: StoreConfig) -> None:
        """Apply new settings live: each add and query reads them (robot id: fixed)."""
        if config.robot_id != self._config.robot_id:
            raise ConfigError("robot_id is fixed while the store is open")
        self._config = config
        self._session.timeout_s = config.store_timeout_seconds

    def _current_meta(self) -> StoreMeta:
        """The ``meta`` entries as committed now (another writer may have changed them)."""
        with self._session.reading("read meta") as conn:
            self._session.meta = StoreMeta(rows.read_meta(conn))
        return self._session.meta

    def note_origin(self, stamp_ns: int) -> None:
        """Tell the store of a frame seen; the earliest is its time origin (persisted).

        Raises:
            InputError: ``stamp_ns`` is not an int >= 0.
            StoreError: Read-only or closed, or the write failed.

        """
        with self._session.writing("record the time origin") as conn:  # origin_ns re-reads
            rows.lower_origin(conn, checked_origin(stamp_ns))

    @property
    def total_bytes(self) -> int:
        """Bytes of every record's JPEGs + embeddings, all robots (the budget: episodes')."""
        with self._session.reading("count episodes") as conn:
            return rows.store_counts(conn)[2]

    def ping(self) -> None:
        """One round trip to the server (``SELECT 1``): is it there, how far away.

        Raises:
            StoreUnreachableError: No answer (refused, cut, or silent past the timeout).

        """
        with self._session.autocommit("reach the server") as conn:
            conn.execute("SELECT 1")

    def waiting_seconds(self) -> float:
        """How long the exchange in progress has waited for the server (0 when none)."""
        return self._session.waiting_s()

    def slowest_exchange_seconds(self) -> float:
        """The longest round trip to the server of the call in progress, or of the last."""
        return self._session.slowest_s()

    def robot_counts(self) -> dict[str, tuple[int, int, int]]:
        """Episodes, frames and bytes of each robot that ever added one."""
        with self._session.reading("count episodes") as conn:
            return rows.robot_counts(conn)

    def __len__(self) -> int:
        with self._session.reading("count episodes") as conn:
            return rows.store_counts(conn)[0]

    def __contains__(self, episode_id: object) -> bool:
        if not isinstance(episode_id, str):
            return False
        with self._session.reading("look up an episode") as conn:
            return rows.key_of(conn, episode_id) is not None

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._session.close()

    # ----------------------------------------------------------------- writing
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
        kind: str = EPISODE,
        place_key: str = "",
        pose_trust: PoseTrust | None = None,
    ) -> EpisodeRecord:
        """Store one record in one transaction with its robot's evictions (or its place's).

        Arguments, return value and errors as
        :meth:`surprise_memory.memory.store.interface.EpisodeStoreBackend.add`.
        """
        if self._read_only:
            raise StoreError(f"{self.location}: the store was opened read-only")
        record, unit = new_episode(
            frames,
            embeddings,
            stamp_ns=stamp_ns,
            surprise=surprise,
            embedder_model=embedder_model,
            embedder_pretrained=embedder_pretrained,
            encoder_model=encoder_model,
            encoder_pretrained=encoder_pretrained,
            threshold=threshold,
            pose=pose,
            episode_id=episode_id,
            robot_id=robot_id,
            configured_robot_id=self._config.robot_id,
            session_id=session_id,
            camera=camera,
            kind=kind,
            place_key=place_key,
            pose_trust=pose_trust,
        )
        self._session.meta.check_embedder(embedder_model, embedder_pretrained, unit.shape[1])
        jpegs = [encode_jpeg(fr.rgb, self._config.jpeg_quality) for fr in frames]
        return self._write(record, jpegs, unit, budget=self._config, origin_ns=None)

    def import_episode(
        self,
        record: EpisodeRecord,
        jpegs: Sequence[bytes],
        embeddings: npt.ArrayLike,
        *,
        origin_ns: int | None = None,
        budget: bool = False,
    ) -> EpisodeRecord:
        """Store an episode copied from another store, as it was stored there.

        See :meth:`~surprise_memory.memory.store.interface.EpisodeStoreBackend.import_episode`.
        """
        if self._read_only:
            raise StoreError(f"{self.location}: the store was opened read-only")
        emb = checked_import(record, jpegs, embeddings)
        limits = self._config if budget else None
        return self._write(record, jpegs, emb, budget=limits, origin_ns=origin_ns)

    def import_episodes(
        self,
        copies: Sequence[EpisodeCopy],
        *,
        origin_ns: int | None = None,
        defer_index: bool = False,
    ) -> None:
        """Store episodes copied from another store in one transaction (``migrate``).

        One commit and four ``COPY`` statements for many (:func:`.writes.commit_copies`):
        copied one by one, episodes went in at about 90 a second here, a round trip per
        statement (``bench_migrate.py``). All or none of them are stored; see
        :meth:`StoreFront.import_episodes`. With ``defer_index``, a missing HNSW index is
        left to :meth:`build_deferred_index`: once it exists every pooled vector goes into
        it as it is copied, 7 ms an episode here, several times the rest of the copy.
        """
        if self._read_only:
            raise StoreError(f"{self.location}: the store was opened read-only")
        if not copies:
            return
        units = [checked_import(c.record, c.jpegs, c.embeddings) for c in copies]
        records = [with_source(c.record, jpeg_source=self) for c in copies]
        first = f"{records[0].id} and {len(records) - 1} more"
        with self._session.writing(f"add episodes {first}") as conn:
            meta = commit_copies(
                conn, records, units, [c.jpegs for c in copies], origin_ns=origin_ns
            )
        self._session.meta = meta
        if not defer_index:
            self._ensure_ann_index(first, {r.robot_id for r in records})

    def build_deferred_index(self) -> None:
        """Create the HNSW index if imports deferred it (one build over every vector)."""
        self._ensure_ann_index("every copied episode", None)

    def _write(
        self,
        record: EpisodeRecord,
        jpegs: Sequence[bytes],
        embeddings: npt.NDArray[np.float32],
        *,
        budget: StoreConfig | None,
        origin_ns: int | None,
    ) -> EpisodeRecord:
        """One transaction (:func:`.writes.commit_episode`), then the HNSW index if missing."""
        record = with_source(record, jpeg_source=self)
        with self._session.writing(f"add episode {record.id}") as conn:
            meta = commit_episode(
                conn, record, embeddings, jpegs, budget=budget, origin_ns=origin_ns
            )
        self._session.meta = meta
        self._ensure_ann_index(record.id, (record.robot_id,))
        return record

    def _ensure_ann_index(self, stored: str, robots: Collection[str] | None) -> None:
        """Create the HNSW indexes (after a committed write): every episode's, ``robots``' own.

        ``robots`` None: every robot's (:func:`.schema.ensure_ann_index`).

        A failure here leaves the index waiting; ``stored`` names what is stored meanwhile.
        """
        dim = self._session.meta.embedding_dim
        if dim is not None:
            what = f"create the HNSW index (episode {stored} is stored)"
            with self._session.autocommit(what) as conn:
                ensure_ann_index(conn, dim, self._session.long_work, robots)

    def delete(self, episode_ids: Sequence[str]) -> int:
        """Delete episodes by id (one transaction).

        Returns:
            How many were found and deleted.

        Raises:
            StoreError: Read-only, closed, or the transaction failed.

        """
        with self._session.writing("delete episodes") as conn:
            return len(rows.delete_episodes(conn, rows.keys_of(conn, list(episode_ids))))

    def note_snapshot(self, episode_ids: Sequence[str], note: SnapshotNote) -> int:
        """Record a bag recorder's answer on these episodes; how many are still stored.

        Raises:
            StoreError: Read-only, closed, or the write failed.

        """
        with self._session.writing("record a snapshot") as conn:
            return upsert_snapshots(conn, episode_ids, note)

    def snapshot_notes(self, episode_ids: Sequence[str]) -> dict[str, list[SnapshotNote]]:
        """The snapshot notes of these episodes, by id (episodes without one left out)."""
        with self._session.reading("read snapshot notes") as conn:
            return select_snapshots(conn, episode_ids)

    # ----------------------------------------------------------------- reading
    def _key(self, conn: psycopg.Connection[Any], episode_id: str) -> int:
        seq = rows.key_of(conn, episode_id)
        if seq is None:
            raise StoreError(f"no episode {episode_id!r} in {self.location}")
        return seq

    def get(self, episode_id: str) -> EpisodeRecord:
        """The episode with this id.

        Raises:
            StoreError: No such episode, the store is closed, or reading failed.

        """
        with self._session.reading(f"read episode {episode_id}") as conn:
            seq = self._key(conn, episode_id)
            return rows.select_records(conn, [seq], self)[seq]

    def latest_places(
        self, place_keys: Sequence[str], robot_id: str | None = None
    ) -> list[EpisodeRecord]:
        """The newest place keyframe of each of these places (places never seen left out).

        See :meth:`surprise_memory.memory.store.sqlite.EpisodeStore.latest_places`.
        """
        with self._session.reading("read place keyframes") as conn:
            seqs = rows.latest_views(conn, place_keys, robot_id)
            found = rows.select_records(conn, seqs, self)
        return [found[s] for s in seqs if s in found]

    def read_jpegs(self, episode_id: str) -> list[bytes]:
        """The JPEG bytes of each frame of an episode, in order (``EpisodeRecord.load_jpegs``).

        Raises:
            StoreError: No such episode (e.g. evicted), or reading failed.

        """
        with self._session.reading(f"read the frames of {episode_id}") as conn:
            seq = self._key(conn, episode_id)
            return rows.select_jpegs(conn, [seq])[seq]

    def episode_ids(self) -> list[str]:
        """Ids of all episodes (every robot's), in the order they were added."""
        with self._session.reading("list episodes") as conn:
            return rows.all_ids(conn)

    def summaries(self, robot_id: str | None = None) -> list[EpisodeSummary]:
        """Every episode (or ``robot_id``'s) in brief, in the order added (one statement).

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._session.reading("list episodes") as conn:
            return rows.select_summaries(conn, robot_id)

    def frame_jpeg(self, episode_id: str, index: int) -> bytes:
        """One frame's JPEG bytes as stored (one row read; never re-encoded).

        Raises:
            InputError: ``index`` is not a frame of the episode.
            StoreError: No such episode, or reading failed.

        """
        with self._session.reading(f"read frame {index} of {episode_id}") as conn:
            seq = self._key(conn, episode_id)
            index = check_frame_index(index, rows.frame_count(conn, seq), episode_id)
            return rows.select_frame(conn, seq, index)

    def refresh(self) -> bool:
        """Whether episodes were added or removed since the previous call (or the open).

        Every read goes to the database, so there is nothing to take in; this compares
        the store's revision (episodes held, newest key), two index lookups.

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._session.reading("check for new episodes") as conn:
            revision = rows.revision(conn)
        changed = revision != self._revision
        self._revision = revision
        return changed

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """The stored (unit-norm, float16-rounded) frame embeddings, (frames, D) float32.

        Raises:
            StoreError: No such episode, the store is closed, or reading failed.

        """
        with self._session.reading(f"read the embeddings of {episode_id}") as conn:
            return rows.select_embeddings(conn, self._key(conn, episode_id))

    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Answer a query: filters, then ranking, best first.

        The statements are built in :mod:`~surprise_memory.memory.store.postgres.search`.
        Arguments, return value and errors as
        :meth:`surprise_memory.memory.store.sqlite.EpisodeStore.retrieve`.
        """
        k = self.result_count(query)
        with self._session.reading("query episodes") as conn:
            meta = StoreMeta(rows.read_meta(conn))
            meta.check_query(query)
            found = find(conn, query, k, dim=meta.embedding_dim, config=self._config)
            seqs = [s for s, _, _ in found]
            records = rows.select_records(conn, seqs, self)
            jpegs = rows.select_jpegs(conn, seqs) if include_images else {}
        return [
            RetrievalHit(records[s], score, dist, tuple(jpegs.get(s, ())))
            for s, score, dist in found
        ]
