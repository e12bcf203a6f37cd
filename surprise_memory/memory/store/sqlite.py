"""The SQLite-folder backend: :class:`EpisodeStore`, episodes on disk and retrieval over them.

Layout of a store folder::

    STORE/
      episodes.sqlite3        (+ -wal, -shm)  episodes, frames, embeddings, meta
      frames/<episode id>/00.jpg ... 07.jpg   one JPEG per frame
      LOCK                                    flock of the one writing process

Durability (what a ``kill -9`` or a power cut leaves):

* **Images before rows.** The JPEGs of an episode are written durably first
  (:mod:`.frame_files`: temp folder, fsyncs, rename); only then does one SQLite
  transaction insert the episode, its frames and its embeddings. A committed episode
  therefore always has its images; an episode whose transaction did not commit is
  invisible, and its folder is an orphan that the next writable open deletes.
* **WAL with ``synchronous=FULL``.** In WAL mode ``NORMAL`` is already safe against a
  killed process, but after a power cut (or an OS crash) it may roll back the most recent
  commits. DESIGN.md asks that a committed episode survive a power cut, so the WAL is
  fsynced at every commit (``FULL``). At 1-2 episodes a minute that one fsync is nothing
  next to the eight JPEG fsyncs.
* **Eviction deletes rows first, then files**; a crash in between leaves orphan folders,
  cleaned on the next open.
* **One writer process.** A writable open takes an exclusive ``flock`` on ``LOCK`` (released
  by the kernel when the process dies, so no stale lock after ``kill -9``). Orphan cleaning
  is only safe under that lock. ``read_only=True`` opens without it (for an offline query
  next to a running node); such a store sees the episodes committed when it opened.

Schema and migrations: :mod:`~surprise_memory.memory.store.schema` (an older store is
migrated on open, a newer one refused with a :class:`StoreError`).

Embeddings are stored unit-normalised (only their direction matters to a cosine), as
``float16`` by default (``embedding_dtype``: 2 KiB instead of 4 KiB per 1024-d frame; the
cosine error, about 1e-3, does not change a ranking that matters), with their dimension.
They are not loaded at open: the search
(:class:`~surprise_memory.memory.store.episode_index.EpisodeIndex`, kept by
:mod:`~surprise_memory.memory.store.catalog`) holds each episode's filter fields in RAM
and one pooled vector per episode in an on-disk, memory-mapped index beside the database
(:mod:`~surprise_memory.memory.store.ann`, a cache rebuilt from the database when missing
or damaged); a query reads from the database the frame embeddings of its hundred best
candidates, to score them exactly, and the k episodes it returns (each one statement with
a bound JSON list, no SQL built from strings).

Disk budget (``max_episodes``, ``max_store_bytes``; 0 = no limit), per robot, checked
after each add over the adding robot's episodes: while over budget, evict that robot's live
episode with the **lowest surprise**, ties to the **oldest trigger stamp**, then to the
earliest added; the episode just added is never evicted (if it alone is over
``max_store_bytes`` it is kept, and its robot holds only it). The bytes counted are the
JPEG files plus the embedding blobs of each episode; SQLite page overhead and the WAL are
not counted.

Threads: one :class:`threading.RLock` guards the database connection and the in-memory
index (both held by :class:`~.folder.StoreFolder`). :meth:`EpisodeStore.add` encodes and
writes the JPEGs *outside* the lock (the slow part), then commits, appends to the index
and evicts inside it; :meth:`EpisodeStore.retrieve` holds it for the search, the fetch of
the k rows and, when asked, the reading of the JPEG bytes (so an eviction cannot delete
files being read). A node may therefore add from one thread and query from another (or
several); calls are serialised, a query waits at most one commit, an add at most one query.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from surprise_memory.config import StoreConfig
from surprise_memory.errors import ConfigError, StoreError
from surprise_memory.memory.camera_view import CameraView
from surprise_memory.memory.places import EPISODE
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.pose_trust import PoseTrust
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.snapshot import SnapshotNote
from surprise_memory.memory.store.base import StoreFront
from surprise_memory.memory.store.catalog import StoreMeta
from surprise_memory.memory.store.episode_index import EpisodeIndex
from surprise_memory.memory.store.folder import StoreFolder, catch_up, import_episode, search_hits
from surprise_memory.memory.store.place_rows import latest_views, view_ids
from surprise_memory.memory.store.records import (
    EpisodeRecord,
    RetrievalHit,
    check_frame_index,
    checked_import,
    new_episode,
    with_source,
)
from surprise_memory.memory.store.schema import select_summaries, transaction
from surprise_memory.memory.store.segment_merge import SegmentMerger
from surprise_memory.memory.store.snapshots import select_snapshots, upsert_snapshots
from surprise_memory.memory.store.summary import EpisodeSummary
from surprise_memory.perception.frames import Frame

__all__ = ["EpisodeStore"]


class EpisodeStore(StoreFront):
    """Episodes on disk with fast retrieval (see the module docstring for the guarantees).

    Implements :class:`~surprise_memory.memory.store.interface.EpisodeStoreBackend`.

    Long class: it is the store's public face only (the work is in :mod:`.folder`,
    :mod:`~surprise_memory.memory.store.catalog`, :mod:`~surprise_memory.memory.store.schema`,
    :mod:`~surprise_memory.memory.store.search`); its length is the documented API.

    Args:
        path: The store folder (created with its parents if missing, unless read-only).
        config: Budget, JPEG quality, embedding dtype and result limits; None = defaults
            (``config.store_path`` is not used: ``path`` is).
        read_only: Open without the writer lock, without cleaning and without adding; sees
            the episodes committed at open time.

    Raises:
        StoreError: The folder cannot be created or read, another process holds it open
            for writing, or its schema is newer than this code.

    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        config: StoreConfig | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self._config = config or StoreConfig()
        self._root = Path(path).expanduser().resolve()
        self._read_only = read_only
        self._lock = threading.RLock()
        self._folder = StoreFolder(self._root, self._config, read_only=read_only)
        self._revision = self._folder.catalog.revision
        self._merger = SegmentMerger(self._lock)
        with self._lock:
            self._merge_if_due()  # a merge a kill cut short starts again

    # ----------------------------------------------------------------- properties
    @property
    def path(self) -> Path:
        """The store folder."""
        return self._root

    def reconfigure(self, config: StoreConfig) -> None:
        """Apply new settings live: limits (at the next eviction), JPEG quality, result caps.

        Raises:
            ConfigError: ``embedding_dtype`` differs (the stored vectors keep theirs).

        """
        if config.embedding_dtype != self._config.embedding_dtype:
            raise ConfigError("embedding_dtype is fixed while the store is open")
        with self._lock:
            self._config = config
            self._folder.reconfigure(config)

    def _current_meta(self) -> StoreMeta:
        return self._folder.meta

    def note_origin(self, stamp_ns: int) -> None:
        """Tell the store of a frame seen; the earliest is its time origin (persisted).

        Raises:
            InputError: ``stamp_ns`` is not an int >= 0.
            StoreError: Read-only or closed, or the write failed.

        """
        with self._lock:
            self._folder.note_origin(stamp_ns)

    @property
    def total_bytes(self) -> int:
        """Bytes of the JPEGs + embedding blobs of every record (episodes and places).

        The disk budget counts the surprise episodes' only.
        """
        return self._folder.catalog.total_bytes

    @property
    def index_nbytes(self) -> int:
        """RAM of the search: the per-episode filter arrays and the episode index's RAM tail.

        The sealed segments of the episode index are memory-mapped files, not counted.
        """
        index = self._folder.catalog.index
        ann = index.ann if isinstance(index, EpisodeIndex) else None
        return index.nbytes + (ann.ram_bytes if ann is not None else 0)

    def __len__(self) -> int:
        return len(self._folder.catalog)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._folder.catalog

    def close(self) -> None:
        """Stop a segment merge, close the database, release the writer lock (idempotent)."""
        self._merger.close()  # without the lock: the merge takes it to finish a batch
        with self._lock:
            self._folder.close()

    def wait_for_merges(self, timeout: float | None = None) -> bool:
        """Wait for the index's background segment merges; whether they ended in ``timeout``.

        Merges start by themselves when enough segments are sealed; nothing needs this but
        a measurement that wants the merged index (a benchmark).
        """
        return self._merger.wait(timeout)

    def wait_for_prefetch(self, timeout: float | None = None) -> bool:
        """Wait until the index files are in the page cache; False on timeout.

        ``index_prefetch`` reads them after the open, in the background. Queries never need
        this; a measurement of the cold start does.
        """
        prefetch = self._folder.prefetch
        return prefetch is None or prefetch.wait(timeout)

    def _merge_if_due(self) -> None:
        """Start merging the index's sealed segments when enough are sealed (under the lock)."""
        index = self._folder.catalog.index
        if isinstance(index, EpisodeIndex) and not self._read_only:
            self._merger.start(index.ann, index.held)

    # ----------------------------------------------------------------- adding
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
        """Store one episode durably, then apply its robot's disk budget.

        Arguments, return value and errors: see
        :meth:`~surprise_memory.memory.store.interface.EpisodeStoreBackend.add`.
        """
        if self._read_only:
            raise StoreError(f"{self._root}: the store was opened read-only")
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
        record = with_source(record, root=self._root)
        folder = self._folder
        with self._lock:
            folder.db()
            folder.check_new(record.id, embedder_model, embedder_pretrained, unit.shape[1])

        jpegs = [folder.files.encode(fr.rgb) for fr in frames]
        folder.files.write(record.id, jpegs)
        blobs = folder.embedding_blobs(unit)
        with self._lock:
            seq = folder.commit(record, unit, blobs=blobs, jpeg_sizes=[len(j) for j in jpegs])
            if record.kind == EPISODE:
                folder.evict(keep=seq)
            self._merge_if_due()
        return record

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
            raise StoreError(f"{self._root}: the store was opened read-only")
        emb = checked_import(record, jpegs, embeddings)
        record = with_source(record, root=self._root)
        with self._lock:
            self._folder.db()
            seq = import_episode(self._folder, record, jpegs, emb, origin_ns, bound_places=budget)
            if budget and record.kind == EPISODE:
                self._folder.evict(keep=seq)
            self._merge_if_due()
        return record

    # ----------------------------------------------------------------- deleting
    def delete(self, episode_ids: Sequence[str]) -> int:
        """Delete episodes by id (rows first, then files).

        Returns:
            How many were found and deleted.

        Raises:
            StoreError: Read-only, closed, or the transaction failed.

        """
        if self._read_only:
            raise StoreError(f"{self._root}: the store was opened read-only")
        with self._lock:
            seqs = [s for s in map(self._folder.catalog.key, episode_ids) if s is not None]
            self._folder.delete(seqs)
            return len(seqs)

    def note_snapshot(self, episode_ids: Sequence[str], note: SnapshotNote) -> int:
        """Record a bag recorder's answer on these episodes (one note per kind and episode).

        Returns:
            How many of them are still stored and got the note.

        Raises:
            StoreError: Read-only, closed, or the write failed.

        """
        if self._read_only:
            raise StoreError(f"{self._root}: the store was opened read-only")
        with self._lock:
            conn = self._folder.db()
            try:
                with transaction(conn):
                    return upsert_snapshots(conn, episode_ids, note)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot record a snapshot: {exc}") from exc

    def snapshot_notes(self, episode_ids: Sequence[str]) -> dict[str, list[SnapshotNote]]:
        """The snapshot notes of these episodes, by id (episodes without one left out).

        Raises:
            StoreError: Closed, or the read failed.

        """
        with self._lock:
            try:
                return select_snapshots(self._folder.db(), episode_ids)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read snapshot notes: {exc}") from exc

    # ----------------------------------------------------------------- reading
    def get(self, episode_id: str) -> EpisodeRecord:
        """The episode with this id.

        Raises:
            StoreError: No such episode, or the store is closed.

        """
        with self._lock:
            seq = self._folder.key(episode_id)
            try:
                found = self._folder.records([seq])
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read episode {episode_id}: {exc}") from exc
        if seq not in found:  # a read-only store: the writer evicted it since the last refresh
            raise StoreError(f"no episode {episode_id!r} in {self._root} (evicted)")
        return found[seq]

    def episode_ids(self) -> list[str]:
        """Ids of all episodes, in the order they were added."""
        with self._lock:
            return self._folder.catalog.ids()

    def latest_places(
        self, place_keys: Sequence[str], robot_id: str | None = None
    ) -> list[EpisodeRecord]:
        """The newest place keyframe of each of these places (places never seen left out).

        Indexed by place: the cost is that of the places' few views, not of the store.

        Args:
            place_keys: Place keys (:func:`~surprise_memory.memory.places.place_key`).
            robot_id: Only this robot's views; None = the newest of any robot's.

        Returns:
            One record per place that has a view, in the order of ``place_keys``.

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._lock:
            catalog = self._folder.catalog
            try:
                seqs = latest_views(self._folder.db(), place_keys, robot_id)
                found = self._folder.records(seqs)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read place keyframes: {exc}") from exc
            # a read-only store answers with what it holds (as of its open or refresh)
            return [found[s] for s in seqs if s in found and catalog.key(found[s].id) == s]

    def place_views(self, place_key: str, robot_id: str) -> list[str]:
        """Ids of every view of a place by a robot, newest first (by the place's index).

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._lock:
            try:
                return view_ids(self._folder.db(), place_key, robot_id)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read place keyframes: {exc}") from exc

    def summaries(self, robot_id: str | None = None) -> list[EpisodeSummary]:
        """Every episode (or ``robot_id``'s) in brief, in the order added.

        The episodes this store holds (a read-only store: as of its open or last
        :meth:`refresh`), read from the database in one statement.

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._lock:
            catalog = self._folder.catalog
            try:
                rows = list(select_summaries(self._folder.db(), robot_id))
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot list episodes: {exc}") from exc
            return [summary for seq, summary in rows if catalog.key(summary.id) == seq]

    def frame_jpeg(self, episode_id: str, index: int) -> bytes:
        """One frame's JPEG bytes as stored: its file, read once (never re-encoded).

        Raises:
            InputError: ``index`` is not a frame of the episode.
            StoreError: No such episode, a frame path outside the store, or the file is
                gone (evicted meanwhile).

        """
        files = self.get(episode_id).frame_files()
        path = files[check_frame_index(index, len(files), episode_id)]
        try:
            return path.read_bytes()
        except OSError as exc:
            raise StoreError(f"episode {episode_id}: cannot read frame {index}: {exc}") from exc

    def refresh(self) -> bool:
        """Take in the episodes other processes committed or removed; whether they changed.

        A read-only store otherwise sees only what was committed when it opened (a
        writable store is the only writer of its folder, so it has nothing to take in).
        The check costs one pragma when nothing was committed.

        Returns:
            Whether episodes were added or removed since the previous call (or the open).

        Raises:
            StoreError: The store is closed, or reading failed.

        """
        with self._lock:
            catch_up(self._folder)
            revision = self._folder.catalog.revision
            changed = revision != self._revision
            self._revision = revision
            return changed

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """The stored (unit-norm) frame embeddings of an episode, (frames, D) float32.

        Raises:
            StoreError: No such episode, or the store is closed.

        """
        with self._lock:
            seq = self._folder.key(episode_id)
            return self._folder.embeddings(seq)

    def retrieve(
        self, query: RetrievalQuery, *, include_images: bool = False
    ) -> list[RetrievalHit]:
        """Answer a query: filters, then ranking, best first (see :class:`RetrievalQuery`).

        Args:
            query: The validated request.
            include_images: Also return each episode's JPEG bytes (``RetrievalHit.jpegs``).

        Returns:
            At most ``query.max_results`` (default ``default_max_results``) hits.

        Raises:
            InputError: ``max_results`` is above ``max_results_cap``.
            EmbedderMismatchError: The query embedding comes from another model, weights or
                dimension than the store's embeddings.
            StoreError: The store is closed, or reading failed.

        """
        k = self.result_count(query)
        with self._lock:
            self._folder.db()
            self._folder.meta.check_query(query)
            found = self._folder.catalog.index.search(query, k)
            try:
                return search_hits(self._folder, found, include_images=include_images)
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read episodes: {exc}") from exc
