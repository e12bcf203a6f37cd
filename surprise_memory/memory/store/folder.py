"""An open store folder of the SQLite backend: what :class:`EpisodeStore` holds under its lock.

:class:`StoreFolder` owns the writer lock (``LOCK``), the database connection, the frame
files and what is loaded from the database at open (the ``meta`` entries and the
:class:`~surprise_memory.memory.store.catalog.Catalog` of live episodes), and keeps them
in step: an episode is committed to the database, then to the catalog; a deletion goes
rows first, then catalog, then files. The database errors of opening, committing and
deleting come out as :class:`~surprise_memory.errors.StoreError`; those of reading rows
are left to the caller, which says what it was reading.

Not thread-safe on its own; :class:`~surprise_memory.memory.store.sqlite.EpisodeStore`
guards it with its lock and validates what comes in.

Long module: the class (see its note) and the three functions beside it that read and
write in the same order (:func:`search_hits`, :func:`catch_up`, :func:`import_episode`):
they left the class to keep it small, not the module, so that the order is read in one
file.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import numpy.typing as npt

from surprise_memory.config import StoreConfig
from surprise_memory.errors import StoreError
from surprise_memory.memory.places import PLACE
from surprise_memory.memory.store.ann import AnnIndex
from surprise_memory.memory.store.bulk_load import collector_paused, return_free_heap
from surprise_memory.memory.store.catalog import Catalog, StoreMeta
from surprise_memory.memory.store.column_file import (
    ChangeMark,
    change_mark,
    ensure_change_log,
    gone_since,
    load_columns,
    name_column_file,
    needs_rewrite,
    write_column_file,
)
from surprise_memory.memory.store.embedding_codec import BLOB_DTYPES, encode_blobs
from surprise_memory.memory.store.episode_index import EpisodeIndex
from surprise_memory.memory.store.frame_files import FrameFiles
from surprise_memory.memory.store.place_rows import surplus_views
from surprise_memory.memory.store.prefetch import IndexPrefetch, page_cache_room
from surprise_memory.memory.store.records import EpisodeRecord, RetrievalHit, checked_origin
from surprise_memory.memory.store.schema import (
    DB_NAME,
    IndexRow,
    connect,
    delete_episodes,
    ensure_schema,
    index_rows,
    insert_episode,
    read_meta,
    select_embeddings,
    select_embeddings_of,
    select_records,
    transaction,
    upsert_meta,
)
from surprise_memory.memory.store.search import EmbeddingIndex, SearchResult

__all__ = ["StoreFolder", "catch_up", "import_episode", "search_hits"]

_LOCK_NAME = "LOCK"


def _lock_for_writing(root: Path, frames_dir: Path) -> int:
    """Create the store folder and take the writer lock; returns the fd holding the flock.

    Raises:
        StoreError: The folder cannot be created, or another process holds the lock.

    """
    try:
        frames_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"{root}: cannot create the store folder: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise StoreError(
            f"{root}: the store is open for writing in another process; open it "
            "with read_only=True to query it, or stop that process"
        ) from None
    return fd


def _unit(row: IndexRow, root: Path) -> npt.NDArray[np.float32]:
    """An episode's unit frame embeddings as read.

    Raises:
        StoreError: It has no embeddings (a damaged store).

    """
    if not row.embeddings:
        raise StoreError(f"{root}: episode {row.episode_id} has no embeddings")
    return EmbeddingIndex.normalise(np.stack(row.embeddings))


def _take(catalog: Catalog, rows: Iterable[IndexRow], root: Path) -> None:
    """Add episodes read from the database to the catalog.

    Raises:
        StoreError: An episode has no embeddings (a damaged store).

    """
    for row in rows:
        if not row.embeddings:
            raise StoreError(f"{root}: episode {row.episode_id} has no embeddings")
        catalog.add(
            row.seq,
            row.episode_id,
            row.nbytes,
            stamp_ns=row.stamp_ns,
            position=row.position,
            pose_valid=row.pose_valid,
            surprise=row.surprise,
            unit_embeddings=EmbeddingIndex.normalise(np.stack(row.embeddings)),
            robot_id=row.robot_id,
            pose_frame=row.pose_frame,
            camera=row.camera,
            kind=row.kind,
        )


def _data_version(conn: sqlite3.Connection) -> int:
    """SQLite's count of commits by other connections to this database, as this one saw it."""
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


class StoreFolder:
    """The open folder: writer lock, database, frame files, meta and catalog.

    Long class: every add, eviction and reopen keeps the database, the frame files, the
    catalog and the episode index (episode_index.py) in step, in one place where the
    order of those writes can be read.

    Args:
        root: The store folder (absolute).
        config: JPEG quality and disk budget.
        read_only: Open without the writer lock and without cleaning orphans.

    Attributes:
        files: The ``frames/`` folder.
        meta: The ``meta`` entries (embedder, origin) as committed.
        catalog: The live episodes and their search index, as committed.
        data_version: SQLite's ``data_version`` when the catalog was last read (see
            :func:`catch_up`).

    Raises:
        StoreError: The folder cannot be created or read, another process holds it open
            for writing, or its schema is newer than this code (nothing is left open).

    """

    def __init__(self, root: Path, config: StoreConfig, *, read_only: bool) -> None:
        self._root = root
        self._config = config
        self._read_only = read_only
        self.files = FrameFiles(root, config.jpeg_quality)
        self._lock_fd: int | None = None
        self._conn: sqlite3.Connection | None = None
        self.meta = StoreMeta()
        self.catalog = Catalog()
        self.data_version = 0
        self.change_mark: ChangeMark | None = None
        """The change log's mark as the catalog last read it (see :func:`catch_up`)."""
        self.prefetch: IndexPrefetch | None = None
        """The index files' read into the page cache, when ``index_prefetch`` started one."""
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    @property
    def root(self) -> Path:
        """The store folder."""
        return self._root

    def reconfigure(self, config: StoreConfig) -> None:
        """Use new limits and JPEG quality from now on (the caller checked the dtype)."""
        self._config = config
        self.files.quality = config.jpeg_quality

    def _open(self) -> None:
        db = self._root / DB_NAME
        if self._read_only:
            if not db.is_file():
                raise StoreError(f"{self._root}: no episode store here (missing {DB_NAME})")
        else:
            self._lock_fd = _lock_for_writing(self._root, self.files.dir)
        try:
            self._conn = conn = connect(db, read_only=self._read_only)
            ensure_schema(conn, self._root, read_only=self._read_only)
            if not self._read_only:
                ensure_change_log(conn)
            self._load(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"{db}: cannot open the episode database: {exc}") from exc
        if not self._read_only:
            self.files.clean_orphans(keep=self.catalog)

    def _load(self, conn: sqlite3.Connection) -> None:
        self.data_version = _data_version(conn)
        self.meta = StoreMeta(read_meta(conn))
        dim = self.meta.embedding_dim
        self.catalog = Catalog(dim, EpisodeIndex(dim))
        if dim is None:
            return  # no episode yet: the index starts with the first
        # the index's files (0.4 s of a robot-year's open, mostly I/O and C) read beside the rows
        ann = AnnIndex(self._root, dim, read_only=self._read_only)
        with ThreadPoolExecutor(1, thread_name_prefix="index-open") as pool:
            loaded = pool.submit(ann.load)
            conn.execute("BEGIN")  # one snapshot for the rows and the index's catch-up
            token = None
            try:
                with collector_paused():
                    rows = load_columns(conn, self._root)
                    if rows.columns is not None:
                        self.catalog.load(rows.columns)
                    if not self._read_only and needs_rewrite(rows):
                        token = write_column_file(self._root, rows)
                    self.change_mark = rows.mark
                    del rows  # freed while the collector still rests
                self._open_index(conn, ann, loaded.result())
            finally:
                conn.execute("COMMIT")
        if token is not None and self.change_mark is not None:  # named once the read ended
            name_column_file(conn, token, self.change_mark.upto)
        return_free_heap()

    def ensure_index(self) -> None:
        """Open the episode index once the store has its first episode (and so a dimension).

        Raises:
            StoreError: The store is closed.
            sqlite3.Error: Reading failed.

        """
        index = self.catalog.index
        dim = self.meta.embedding_dim
        if not isinstance(index, EpisodeIndex) or index.ann is not None or dim is None:
            return
        conn = self.db()
        conn.execute("BEGIN")
        try:
            ann = AnnIndex(self._root, dim, read_only=self._read_only)
            self._open_index(conn, ann, ann.load())
        finally:
            conn.execute("COMMIT")

    def _open_index(self, conn: sqlite3.Connection, ann: AnnIndex, loaded: bool) -> None:
        """Catch the episode index up with the database, or rebuild it; attach it.

        ``ann`` has read its files (``loaded``: they were usable). The files hold every
        episode up to their ``covered`` key; the episodes added after it (at most
        :data:`~.ann.CHECKPOINT_EVERY` + 1 after a kill) are read from the database.
        Unusable files, or files that hold keys the database never gave (another
        database put in this folder), mean a rebuild from the database.
        """
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'episodes'").fetchone()
        issued = int(row[0]) if row else 0
        # the graph segments hold episodes only: place keyframes are scored from RAM
        if loaded and ann.last_key <= issued:
            rows = index_rows(conn, after_seq=ann.last_key)
            if ann.add_rows((r.seq, _unit(r, self._root)) for r in rows if r.kind != PLACE):
                ann.checkpoint()
        else:
            total = len(self.catalog) - self.catalog.place_count
            rows = (r for r in index_rows(conn) if r.kind != PLACE)
            ann.rebuild(((r.seq, _unit(r, self._root)) for r in rows), total)
        index = self.catalog.index
        if isinstance(index, EpisodeIndex):
            index.attach(ann, self._frames_of)
        files = ann.sealed_files()
        if self._config.index_prefetch and files:
            room = page_cache_room()
            share = self._config.index_prefetch_memory_share
            self.prefetch = IndexPrefetch(files, None if room is None else int(room * share))

    def _frames_of(
        self, seqs: Sequence[int]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Unit frame embeddings of episodes, a row per frame with its key (the re-ranking)."""
        keys, rows = select_embeddings_of(self.db(), seqs)
        return keys, rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def close(self) -> None:
        """Close the database and release the writer lock (idempotent)."""
        if self.prefetch is not None:
            self.prefetch.stop()
        index = self.catalog.index
        if isinstance(index, EpisodeIndex) and index.ann is not None:
            index.ann.close()
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def db(self) -> sqlite3.Connection:
        """The open connection.

        Raises:
            StoreError: The store is closed.

        """
        if self._conn is None:
            raise StoreError(f"{self._root}: the store is closed")
        return self._conn

    def check_new(self, episode_id: str, model: str, pretrained: bool, dim: int) -> None:
        """Refuse an episode from another embedder than the store's, or with a stored id.

        Raises:
            EmbedderMismatchError: Model, weights or dimension differ from the store's.
            StoreError: The id is already in the store.

        """
        self.meta.check_embedder(model, pretrained, dim)
        if episode_id in self.catalog:
            raise StoreError(f"episode {episode_id} is already in the store")

    # ----------------------------------------------------------------- rows
    def embedding_blobs(self, unit: npt.NDArray[np.float32]) -> list[bytes]:
        """Unit-norm embeddings as stored: one blob per row, in ``config.embedding_dtype``."""
        return encode_blobs(unit, BLOB_DTYPES[self._config.embedding_dtype])

    def commit(
        self,
        record: EpisodeRecord,
        unit: npt.NDArray[np.float32],
        *,
        blobs: Sequence[bytes],
        jpeg_sizes: Sequence[int],
        origin_ns: int | None = None,
        bound_places: bool = True,
    ) -> int:
        """Commit an episode whose frames are written: rows and meta, then the catalog.

        With ``bound_places``, a place keyframe's commit deletes its place's views beyond
        the ``place_history`` newest in the same transaction, then their files.

        Args:
            record: The episode.
            unit: Its unit-norm frame embeddings, (frames, D) float32.
            blobs: The same as stored (:meth:`embedding_blobs`).
            jpeg_sizes: Size of each frame's JPEG; with the blobs, the episode's size for
                the disk budget.
            origin_ns: An earlier recording start to keep (see :meth:`StoreMeta.updates_for`).
            bound_places: Apply ``place_history`` (False: a copy keeps every view).

        Returns:
            The episode's key (no longer stored when it was its place's oldest view).

        Raises:
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: The store is closed, the id exists, or the transaction failed. In
                every failure the episode's frame folder is removed.

        """
        dtype = BLOB_DTYPES[self._config.embedding_dtype]
        nbytes = sum(jpeg_sizes) + sum(len(b) for b in blobs)
        try:
            conn = self.db()
            # checked again: another thread may have added the first episode meanwhile
            self.check_new(
                record.id, record.embedder_model, record.embedder_pretrained, unit.shape[1]
            )
            with transaction(conn):
                seq = insert_episode(
                    conn, record, nbytes=nbytes, blobs=blobs, dtype=dtype, jpeg_sizes=jpeg_sizes
                )
                surplus = []
                if record.kind == PLACE and bound_places:
                    surplus = surplus_views(conn, record, self._config.place_history)
                    delete_episodes(conn, surplus)
                meta = self.meta.updates_for(record, unit.shape[1], origin_ns)
                upsert_meta(conn, meta)
        except BaseException as exc:
            self.files.remove(record.id)
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"episode {record.id}: cannot commit: {exc}") from exc
            raise
        self.meta.update(meta)
        self.ensure_index()
        self.catalog.add(
            seq,
            record.id,
            nbytes,
            stamp_ns=record.stamp_ns,
            position=record.pose.position,
            pose_valid=record.pose_valid,
            surprise=record.surprise,
            unit_embeddings=unit,
            robot_id=record.robot_id,
            pose_frame=record.pose.frame_id,
            camera=record.camera.name,
            kind=record.kind,
        )
        for episode_id in self.catalog.remove(surplus):  # rows first, then files
            self.files.remove(episode_id)
        return seq

    def note_origin(self, stamp_ns: int) -> None:
        """Persist ``stamp_ns`` as the store's origin if it is earlier than the current one.

        Raises:
            InputError: ``stamp_ns`` is not an int >= 0.
            StoreError: The store is closed, or the transaction failed.

        """
        stamp_ns = checked_origin(stamp_ns)
        if self._read_only:
            raise StoreError(f"{self._root}: the store was opened read-only")
        meta = self.meta.origin_update(stamp_ns)
        if not meta:
            return
        conn = self.db()
        try:
            with transaction(conn):
                upsert_meta(conn, meta)
        except sqlite3.Error as exc:
            raise StoreError(f"{self._root}: cannot record the time origin: {exc}") from exc
        self.meta.update(meta)

    def delete(self, seqs: Sequence[int]) -> None:
        """Delete episodes by key: rows first (one transaction), then catalog, then files.

        Raises:
            StoreError: The store is closed, or the transaction failed (nothing deleted).

        """
        if not seqs:
            return
        conn = self.db()
        try:
            with transaction(conn):
                delete_episodes(conn, seqs)
        except sqlite3.Error as exc:
            raise StoreError(f"{self._root}: cannot evict episodes: {exc}") from exc
        for episode_id in self.catalog.remove(seqs):
            self.files.remove(episode_id)

    def evict(self, keep: int) -> None:
        """Apply the disk budget: delete the episodes :meth:`Catalog.victims` names.

        Args:
            keep: Key never to evict (the episode just added).

        Raises:
            StoreError: The store is closed, or the transaction failed.

        """
        cfg = self._config
        victims = self.catalog.victims(
            keep=keep, max_episodes=cfg.max_episodes, max_store_bytes=cfg.max_store_bytes
        )
        self.delete(victims)

    def key(self, episode_id: str) -> int:
        """The key of a stored episode.

        Raises:
            StoreError: No such episode.

        """
        seq = self.catalog.key(episode_id)
        if seq is None:
            raise StoreError(f"no episode {episode_id!r} in {self._root}")
        return seq

    def records(self, seqs: Sequence[int]) -> dict[int, EpisodeRecord]:
        """The episodes with these keys, by key (see :func:`.schema.select_records`).

        Raises:
            StoreError: The store is closed.
            sqlite3.Error: Reading failed (the caller says what it was reading).

        """
        return select_records(self.db(), seqs, self._root)

    def embeddings(self, seq: int) -> npt.NDArray[np.float32]:
        """The stored frame embeddings of an episode, (frames, D) float32.

        Raises:
            StoreError: The store is closed.

        """
        return select_embeddings(self.db(), seq)


def search_hits(
    folder: StoreFolder, found: SearchResult, *, include_images: bool
) -> list[RetrievalHit]:
    """The episodes of a search result as hits, in its order (those still stored).

    A function beside :class:`StoreFolder` rather than a method, to keep the class small.

    Args:
        folder: The open store folder.
        found: The index's answer.
        include_images: Also read each episode's JPEG bytes.

    Raises:
        StoreError: The store is closed, or a JPEG cannot be read.
        sqlite3.Error: Reading the rows failed (the caller says what it was reading).

    """
    records = folder.records(found.keys.tolist())
    hits = []
    for seq, score, dist in zip(
        found.keys.tolist(), found.scores.tolist(), found.distances.tolist(), strict=True
    ):
        rec = records.get(seq)
        if rec is None:  # a read-only store: evicted by the writer since the last refresh
            continue
        hits.append(
            RetrievalHit(
                episode=rec,
                score=None if math.isnan(score) else score,
                distance_m=None if math.isnan(dist) else dist,
                jpegs=tuple(rec.load_jpegs()) if include_images else (),
            )
        )
    return hits


def catch_up(folder: StoreFolder) -> None:
    """Take in what other connections committed to a folder since its open or last catch-up.

    Cheap when nothing was committed (one ``PRAGMA data_version``, which changes only
    with another connection's commits). Otherwise, in one read transaction: the episodes
    removed (the database's change log after the last look, so a robot-year's follower
    reads a few rows, not 670,000 keys; every key when there is no log or a new column
    file took its entries: column_file.py), the episodes added after the newest key held
    (keys only grow), and the ``meta`` entries (the first episode fixes
    the embedder; the origin may move earlier). A function beside :class:`StoreFolder`,
    like :func:`import_episode`, to keep the class small.

    Raises:
        StoreError: The store is closed, or reading failed.

    """
    conn = folder.db()
    try:
        version = _data_version(conn)
        if version == folder.data_version:
            return
        conn.execute("BEGIN")
        try:
            catalog = folder.catalog
            mark, seen = change_mark(conn), folder.change_mark
            if mark is not None and seen is not None and mark.token == seen.token:
                gone = [k for k in gone_since(conn, seen.upto) if catalog.holds(k)]
            else:  # no log, or a new column file took its entries: every key is looked up
                stored = {int(r[0]) for r in conn.execute("SELECT seq FROM episodes")}
                gone = list(catalog.keys() - stored)
            added = list(index_rows(conn, after_seq=catalog.last_key))
            meta = read_meta(conn)
        finally:
            conn.execute("COMMIT")
    except sqlite3.Error as exc:
        raise StoreError(f"{folder.root}: cannot read new episodes: {exc}") from exc
    folder.data_version = version
    folder.change_mark = mark
    folder.meta = StoreMeta(meta)
    folder.catalog.remove(sorted(gone))
    _take(folder.catalog, added, folder.root)
    try:
        folder.ensure_index()  # the first episodes a read-only store sees
    except sqlite3.Error as exc:
        raise StoreError(f"{folder.root}: cannot read new episodes: {exc}") from exc


def import_episode(
    folder: StoreFolder,
    record: EpisodeRecord,
    jpegs: Sequence[bytes],
    embeddings: npt.NDArray[np.float32],
    origin_ns: int | None,
    *,
    bound_places: bool = False,
) -> int:
    """Store an episode as another store holds it: the JPEG bytes and embeddings as given.

    A function beside :class:`StoreFolder` rather than a method, to keep the class small.

    Args:
        folder: The store folder, open for writing.
        record: The episode (its ``root`` set to this folder).
        jpegs: Its frames' JPEG bytes, written unchanged.
        embeddings: Its stored (unit-norm) embeddings, (frames, D); written in this
            store's dtype without normalising again, so float16 values copy exactly.
        origin_ns: The source store's recording start.
        bound_places: Apply ``place_history`` to a place keyframe (a fleet's delivery);
            False = keep every view (a copy).

    Returns:
        The episode's key.

    Raises:
        EmbedderMismatchError: The embedder differs from the store's.
        StoreError: The id exists, or writing or committing failed (nothing committed).

    """
    folder.check_new(
        record.id, record.embedder_model, record.embedder_pretrained, embeddings.shape[1]
    )
    folder.files.write(record.id, jpegs)
    return folder.commit(
        record,
        EmbeddingIndex.normalise(embeddings),
        blobs=folder.embedding_blobs(embeddings),
        jpeg_sizes=[len(j) for j in jpegs],
        origin_ns=origin_ns,
        bound_places=bound_places,
    )
