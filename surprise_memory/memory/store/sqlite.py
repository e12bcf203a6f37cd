"""The episode store: episodes on disk (SQLite + JPEG frames) and retrieval over them.

Layout of a store folder::

    STORE/
      episodes.sqlite3        (+ -wal, -shm)  episodes, frames, embeddings, meta
      frames/<episode id>/00.jpg ... 07.jpg   one JPEG per frame
      LOCK                                    flock of the one writing process

Durability (what a ``kill -9`` or a power cut leaves):

* **Images before rows.** The JPEGs of an episode are written to ``frames/.tmp-*``, each
  fsynced, the folder fsynced, renamed to ``frames/<id>`` and ``frames/`` fsynced; only
  then does one SQLite transaction insert the episode, its frames and its embeddings. A
  committed episode therefore always has its images; an episode whose transaction did not
  commit is invisible, and its folder is an orphan that the next writable open deletes.
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

Schema: ``PRAGMA user_version`` holds :data:`SCHEMA_VERSION`. An older store is migrated
on open by the steps in ``_MIGRATIONS`` (one function per version step, each in its own
transaction); a newer one is refused with a :class:`StoreError`.

Embeddings are stored unit-normalised (only their direction matters to a cosine), as
``float16`` by default (``embedding_dtype``: 2 KiB instead of 4 KiB per 1024-d frame; the
cosine error, about 1e-3, does not change a ranking that matters), with their dimension.
In memory they are one float32 matrix (see :mod:`surprise_memory.memory.retrieval`), loaded once
at open and appended at each add; a query does not read the database except to fetch the
k episodes it returns (one statement with a bound JSON list, no SQL built from strings).

Disk budget (``max_episodes``, ``max_store_bytes``; 0 = no limit), checked after each add:
while over budget, evict the live episode with the **lowest surprise**, ties to the
**oldest trigger stamp**, then to the earliest added; the episode just added is never
evicted (if it alone is over ``max_store_bytes`` it is kept, and the store holds only it).
The bytes counted are the JPEG files plus the embedding blobs of each episode; SQLite
page overhead and the WAL are not counted.

Threads: one :class:`threading.RLock` guards the database connection and the in-memory
index. :meth:`EpisodeStore.add` encodes and writes the JPEGs *outside* the lock (the slow
part), then commits, appends to the index and evicts inside it; :meth:`EpisodeStore.retrieve`
holds it for the search, the fetch of the k rows and, when asked, the reading of the JPEG
bytes (so an eviction cannot delete files being read). A node may therefore add from one
thread and query from another (or several); calls are serialised, a query waits at most
one commit, an add at most one query.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import math
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from surprise_memory.config import StoreConfig
from surprise_memory.errors import InputError, StoreError
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import EmbedderMismatchError, EmbeddingIndex, RetrievalQuery
from surprise_memory.perception.frames import Frame

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "EmbedderMismatchError",
    "EpisodeRecord",
    "EpisodeStore",
    "Pose",
    "RetrievalHit",
]

SCHEMA_VERSION = 1
"""Version of the database schema written by this code (``PRAGMA user_version``)."""

DB_NAME = "episodes.sqlite3"
FRAMES_DIR = "frames"
_LOCK_NAME = "LOCK"
_TMP_PREFIX = ".tmp-"
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_DTYPES = {"float16": "<f2", "float32": "<f4"}

_SCHEMA_V1 = (
    """CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE episodes (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        stamp_ns INTEGER NOT NULL,
        start_ns INTEGER NOT NULL,
        end_ns INTEGER NOT NULL,
        pos_x REAL NOT NULL, pos_y REAL NOT NULL, pos_z REAL NOT NULL,
        ori_x REAL NOT NULL, ori_y REAL NOT NULL, ori_z REAL NOT NULL, ori_w REAL NOT NULL,
        pose_frame_id TEXT NOT NULL,
        pose_valid INTEGER NOT NULL,
        surprise REAL NOT NULL,
        threshold REAL,
        encoder_model TEXT NOT NULL,
        encoder_pretrained INTEGER NOT NULL,
        embedder_model TEXT NOT NULL,
        embedder_pretrained INTEGER NOT NULL,
        created_wall_ns INTEGER NOT NULL,
        nbytes INTEGER NOT NULL
    )""",
    """CREATE TABLE frames (
        episode_seq INTEGER NOT NULL REFERENCES episodes(seq) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        stamp_ns INTEGER NOT NULL,
        path TEXT NOT NULL UNIQUE,
        nbytes INTEGER NOT NULL,
        PRIMARY KEY (episode_seq, idx)
    ) WITHOUT ROWID""",
    """CREATE TABLE embeddings (
        episode_seq INTEGER NOT NULL,
        idx INTEGER NOT NULL,
        dim INTEGER NOT NULL,
        dtype TEXT NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (episode_seq, idx),
        FOREIGN KEY (episode_seq, idx) REFERENCES frames(episode_seq, idx) ON DELETE CASCADE
    )""",
    "CREATE INDEX episodes_stamp ON episodes(stamp_ns)",
)

Migration = Callable[[sqlite3.Connection], None]
_MIGRATIONS: dict[int, Migration] = {}
"""Schema steps: ``_MIGRATIONS[v]`` turns a version-v database into version v+1.

Add one entry per schema change (and bump :data:`SCHEMA_VERSION`); each runs in its own
transaction together with the ``user_version`` update, so a crash mid-migration leaves
the previous version intact.
"""

_EPISODE_COLUMNS = (
    "seq, id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, ori_x, ori_y, ori_z, ori_w, "
    "pose_frame_id, pose_valid, surprise, threshold, encoder_model, encoder_pretrained, "
    "embedder_model, embedder_pretrained, created_wall_ns, nbytes"
)
_SELECT_EPISODES_BY_SEQ = (
    "SELECT " + _EPISODE_COLUMNS + " FROM episodes WHERE seq IN (SELECT value FROM json_each(?))"
)
_SELECT_FRAMES_BY_SEQ = (
    "SELECT episode_seq, idx, stamp_ns, path FROM frames "
    "WHERE episode_seq IN (SELECT value FROM json_each(?)) ORDER BY episode_seq, idx"
)


@dataclass(frozen=True)
class EpisodeRecord:
    """One stored episode, as added and as returned by a query.

    Attributes:
        id: Episode id (unique in the store; also its folder name under ``frames/``).
        stamp_ns: Trigger stamp (the peak frame's), int ns.
        start_ns: Stamp of the first frame, int ns.
        end_ns: Stamp of the last frame, int ns.
        pose: Robot pose at the trigger stamp and its frame (identity when not valid).
        pose_valid: Whether ``pose`` was known; place queries skip episodes without it.
        surprise: Surprise s(t) of the trigger frame.
        threshold: Gate threshold tau at the trigger (NaN when unknown).
        frame_stamps_ns: Stamp of each frame, int ns, in order.
        frame_paths: Each frame's JPEG, relative to the store folder.
        encoder_model: Model that scored surprise (e.g. the V-JEPA-2 hub id).
        encoder_pretrained: Whether that encoder had its trained weights.
        embedder_model: Model of the frame embeddings (e.g. ``PE-Core-L-14-336``).
        embedder_pretrained: Whether that embedder had its trained weights.
        created_wall_ns: Wall-clock time of the add, int ns since the epoch.
        root: The store folder, to load the frames (not part of equality).

    """

    id: str
    stamp_ns: int
    start_ns: int
    end_ns: int
    pose: Pose
    pose_valid: bool
    surprise: float
    threshold: float
    frame_stamps_ns: tuple[int, ...]
    frame_paths: tuple[str, ...]
    encoder_model: str
    encoder_pretrained: bool
    embedder_model: str
    embedder_pretrained: bool
    created_wall_ns: int
    root: Path | None = field(default=None, repr=False, compare=False)

    def frame_files(self) -> list[Path]:
        """Absolute paths of the frame JPEGs.

        Raises:
            StoreError: The record does not know its store folder.

        """
        if self.root is None:
            raise StoreError(f"episode {self.id}: no store folder known, cannot locate frames")
        return [self.root / p for p in self.frame_paths]

    def load_jpegs(self) -> list[bytes]:
        """The stored JPEG bytes of each frame, in order.

        Raises:
            StoreError: A file is missing or unreadable (e.g. the episode was evicted).

        """
        out = []
        for path in self.frame_files():
            try:
                out.append(path.read_bytes())
            except OSError as exc:
                raise StoreError(f"episode {self.id}: cannot read frame {path}: {exc}") from exc
        return out

    def load_images(self) -> list[npt.NDArray[np.uint8]]:
        """The frames decoded as (H, W, 3) uint8 RGB arrays, in order.

        Raises:
            StoreError: A file is missing, unreadable or not a valid JPEG.

        """
        return [decode_jpeg(data, self.id) for data in self.load_jpegs()]


@dataclass(frozen=True)
class RetrievalHit:
    """One episode answering a query.

    Attributes:
        episode: The episode.
        score: Max cosine over its frames with the query embedding; None without one.
        distance_m: Distance of its pose to the query location in metres; None without one.
        jpegs: The frames' JPEG bytes when the query asked for images, else empty.

    """

    episode: EpisodeRecord
    score: float | None
    distance_m: float | None
    jpegs: tuple[bytes, ...] = ()


def decode_jpeg(data: bytes, label: str = "") -> npt.NDArray[np.uint8]:
    """Decode JPEG bytes to an (H, W, 3) uint8 RGB array.

    Raises:
        StoreError: The bytes are not a decodable image.

    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("RGB"), dtype=np.uint8)
    except (OSError, ValueError) as exc:
        raise StoreError(f"{label or 'frame'}: stored JPEG cannot be decoded: {exc}") from exc


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_frames(frames: Sequence[Frame]) -> None:
    if len(frames) == 0:
        raise InputError("an episode needs at least one frame, got none")
    prev: int | None = None
    for i, fr in enumerate(frames):
        if not isinstance(fr, Frame):
            raise InputError(f"frame {i} is a {type(fr).__name__}: expected surprise_memory.Frame")
        rgb = fr.rgb
        if not isinstance(rgb, np.ndarray) or rgb.dtype != np.uint8:
            raise InputError(
                f"frame {i}: rgb must be a uint8 array, got {getattr(rgb, 'dtype', type(rgb))}"
            )
        if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
            raise InputError(f"frame {i}: rgb has shape {rgb.shape}: expected (H, W, 3)")
        if isinstance(fr.stamp_ns, bool) or not isinstance(fr.stamp_ns, int | np.integer):
            raise InputError(f"frame {i}: stamp_ns={fr.stamp_ns!r} must be int nanoseconds")
        if fr.stamp_ns < 0:
            raise InputError(f"frame {i}: stamp_ns={fr.stamp_ns} must be >= 0")
        if prev is not None and fr.stamp_ns < prev:
            raise InputError(
                f"frame {i}: stamp_ns={fr.stamp_ns} is before frame {i - 1}'s {prev}: "
                "frames must be in time order"
            )
        prev = int(fr.stamp_ns)


class EpisodeStore:
    """Episodes on disk with fast retrieval (see the module docstring for the guarantees).

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
        self._frames_dir = self._root / FRAMES_DIR
        self._read_only = read_only
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._conn: sqlite3.Connection | None = None
        self._meta: dict[str, str] = {}
        self._index = EmbeddingIndex()
        self._seq_of: dict[str, int] = {}
        self._bytes_of: dict[int, int] = {}
        self._total_bytes = 0
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # ----------------------------------------------------------------- opening
    def _open(self) -> None:
        db = self._root / DB_NAME
        if self._read_only:
            if not db.is_file():
                raise StoreError(f"{self._root}: no episode store here (missing {DB_NAME})")
        else:
            try:
                self._frames_dir.mkdir(parents=True, exist_ok=True)
                self._lock_fd = os.open(self._root / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise StoreError(f"{self._root}: cannot create the store folder: {exc}") from exc
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise StoreError(
                    f"{self._root}: the store is open for writing in another process; open it "
                    "with read_only=True to query it, or stop that process"
                ) from None
        try:
            if self._read_only:
                conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, check_same_thread=False)
            else:
                conn = sqlite3.connect(db, check_same_thread=False)
            conn.isolation_level = None  # explicit BEGIN/COMMIT only
            self._conn = conn
            conn.execute("PRAGMA busy_timeout = 5000")
            if not self._read_only:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{db}: cannot switch SQLite to WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._ensure_schema(conn)
            self._load(conn)
        except sqlite3.Error as exc:
            raise StoreError(f"{db}: cannot open the episode database: {exc}") from exc
        if not self._read_only:
            self._clean_orphans()

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self._root}: store schema version {version} is newer than this code's "
                f"{SCHEMA_VERSION}; update surprise_memory to read it"
            )
        if version == SCHEMA_VERSION:
            return
        if self._read_only:
            raise StoreError(
                f"{self._root}: store schema version {version} needs migrating to "
                f"{SCHEMA_VERSION}; open it once without read_only"
            )
        if version == 0:
            tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            if tables:
                raise StoreError(
                    f"{self._root / DB_NAME}: not an episode store (tables "
                    f"{sorted(t[0] for t in tables)} but no schema version)"
                )
            with self._transaction(conn):
                for stmt in _SCHEMA_V1:
                    conn.execute(stmt)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
            return
        for v in range(version, SCHEMA_VERSION):
            step = _MIGRATIONS.get(v)
            if step is None:
                raise StoreError(f"{self._root}: no migration from schema version {v} to {v + 1}")
            with self._transaction(conn):
                step(conn)
                conn.execute(f"PRAGMA user_version = {v + 1:d}")

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _load(self, conn: sqlite3.Connection) -> None:
        self._meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        n_ep, n_fr = conn.execute(
            "SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM embeddings)"
        ).fetchone()
        dim = self.embedding_dim
        self._index = EmbeddingIndex(dim)
        self._index.reserve(int(n_ep), int(n_fr))
        rows = conn.execute(
            "SELECT seq, id, stamp_ns, pos_x, pos_y, pos_z, pose_valid, surprise, nbytes "
            "FROM episodes ORDER BY seq"
        )
        emb_rows = conn.execute(
            "SELECT episode_seq, dim, dtype, data FROM embeddings ORDER BY episode_seq, idx"
        )
        pending = next(emb_rows, None)
        for seq, ep_id, stamp, x, y, z, valid, surprise, nbytes in rows:
            vecs = []
            while pending is not None and pending[0] == seq:
                _, d, dtype, blob = pending
                vecs.append(np.frombuffer(blob, dtype=dtype, count=d))
                pending = next(emb_rows, None)
            if not vecs:
                raise StoreError(f"{self._root}: episode {ep_id} has no embeddings")
            self._index.add(
                seq,
                stamp_ns=stamp,
                position=(x, y, z),
                pose_valid=bool(valid),
                surprise=surprise,
                unit_embeddings=EmbeddingIndex.normalise(np.stack(vecs)),
            )
            self._seq_of[ep_id] = seq
            self._bytes_of[seq] = nbytes
            self._total_bytes += nbytes

    def _clean_orphans(self) -> None:
        """Delete frame folders that no committed episode references (interrupted adds)."""
        try:
            entries = list(os.scandir(self._frames_dir))
        except OSError as exc:
            raise StoreError(f"{self._frames_dir}: cannot list frames: {exc}") from exc
        removed = False
        for entry in entries:
            if entry.name in self._seq_of and not entry.name.startswith(_TMP_PREFIX):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            removed = True
        if removed:
            _fsync_dir(self._frames_dir)

    # ----------------------------------------------------------------- properties
    @property
    def path(self) -> Path:
        """The store folder."""
        return self._root

    @property
    def config(self) -> StoreConfig:
        """The store's settings."""
        return self._config

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return self._read_only

    @property
    def embedder_model(self) -> str | None:
        """Model name of the frame embeddings (None before the first episode)."""
        return self._meta.get("embedder_model")

    @property
    def embedder_pretrained(self) -> bool | None:
        """Whether the frame embedder had trained weights (None before the first episode)."""
        v = self._meta.get("embedder_pretrained")
        return None if v is None else v == "1"

    @property
    def embedding_dim(self) -> int | None:
        """Dimension of the frame embeddings (None before the first episode)."""
        v = self._meta.get("embedding_dim")
        return None if v is None else int(v)

    @property
    def origin_ns(self) -> int | None:
        """Start of the recording: the earliest trigger stamp ever added (kept on eviction)."""
        v = self._meta.get("origin_ns")
        return None if v is None else int(v)

    @property
    def total_bytes(self) -> int:
        """Bytes counted by the disk budget (JPEGs + embedding blobs of live episodes)."""
        return self._total_bytes

    @property
    def index_nbytes(self) -> int:
        """Memory allocated by the in-memory embedding matrix and filter arrays."""
        return self._index.nbytes

    def __len__(self) -> int:
        return len(self._seq_of)

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self._seq_of

    def close(self) -> None:
        """Close the database and release the writer lock (idempotent)."""
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None
            if self._lock_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._lock_fd)  # releases the flock
                self._lock_fd = None

    def __enter__(self) -> EpisodeStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self._root}: the store is closed")
        return self._conn

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
    ) -> EpisodeRecord:
        """Store one episode durably, then apply the disk budget.

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

        Returns:
            The stored episode.

        Raises:
            InputError: A frame, the embeddings, a stamp, the pose or the id is invalid
                (nothing was written).
            EmbedderMismatchError: The embedder differs from the store's.
            StoreError: The store is read-only or closed, the id exists, or the disk
                write or the transaction failed (nothing was committed).

        """
        if self._read_only:
            raise StoreError(f"{self._root}: the store was opened read-only")
        _check_frames(frames)
        unit = EmbeddingIndex.normalise(embeddings)
        if unit.shape[0] != len(frames):
            raise InputError(
                f"{unit.shape[0]} embeddings for {len(frames)} frames: expected one per frame"
            )
        if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, int | np.integer):
            raise InputError(f"stamp_ns={stamp_ns!r}: must be int nanoseconds")
        if stamp_ns < 0:
            raise InputError(f"stamp_ns={stamp_ns}: must be >= 0")
        if not isinstance(surprise, int | float | np.number) or not math.isfinite(surprise):
            raise InputError(f"surprise={surprise!r}: must be a finite number")
        if not isinstance(threshold, int | float | np.number):
            raise InputError(f"threshold={threshold!r}: must be a number (NaN = unknown)")
        if not isinstance(embedder_model, str) or not embedder_model:
            raise InputError(f"embedder_model={embedder_model!r}: must be a non-empty string")
        if not isinstance(encoder_model, str):
            raise InputError(f"encoder_model={encoder_model!r}: must be a string")
        if pose is not None:
            if not isinstance(pose, Pose):
                raise InputError(
                    f"pose is a {type(pose).__name__}: expected a surprise_memory Pose or None"
                )
            if not pose.is_finite():
                raise InputError(f"pose {pose}: values must be finite")
            if pose.qx**2 + pose.qy**2 + pose.qz**2 + pose.qw**2 == 0.0:
                raise InputError("pose orientation is the zero quaternion")
            if not isinstance(pose.frame_id, str):
                raise InputError(f"pose frame_id={pose.frame_id!r}: must be a string")
        if episode_id is None:
            episode_id = f"ep-{int(stamp_ns):019d}-{secrets.token_hex(3)}"
        if not isinstance(episode_id, str) or not _ID_RE.fullmatch(episode_id):
            raise InputError(
                f"episode_id={episode_id!r}: use 1-128 letters, digits, '_', '.', '-' "
                "starting with a letter or digit"
            )
        with self._lock:
            self._db()
            self._check_embedder(embedder_model, embedder_pretrained, unit.shape[1])
            if episode_id in self._seq_of:
                raise StoreError(f"episode {episode_id} is already in the store")

        jpegs = [self._encode_jpeg(fr.rgb) for fr in frames]
        rel_paths = [f"{FRAMES_DIR}/{episode_id}/{i:02d}.jpg" for i in range(len(frames))]
        self._write_frames(episode_id, jpegs)

        dtype = _DTYPES[self._config.embedding_dtype]
        blobs = [row.astype(dtype).tobytes() for row in unit]
        nbytes = sum(len(j) for j in jpegs) + sum(len(b) for b in blobs)
        pose_valid = pose is not None
        p = pose if pose is not None else Pose()
        stamps = tuple(int(fr.stamp_ns) for fr in frames)
        record = EpisodeRecord(
            id=episode_id,
            stamp_ns=int(stamp_ns),
            start_ns=stamps[0],
            end_ns=stamps[-1],
            pose=p,
            pose_valid=pose_valid,
            surprise=float(surprise),
            threshold=float(threshold),
            frame_stamps_ns=stamps,
            frame_paths=tuple(rel_paths),
            encoder_model=encoder_model,
            encoder_pretrained=bool(encoder_pretrained),
            embedder_model=embedder_model,
            embedder_pretrained=bool(embedder_pretrained),
            created_wall_ns=time.time_ns(),
            root=self._root,
        )
        with self._lock:
            try:
                conn = self._db()
                # checked again: another thread may have added the first episode meanwhile
                self._check_embedder(embedder_model, embedder_pretrained, unit.shape[1])
                if episode_id in self._seq_of:
                    raise StoreError(f"episode {episode_id} is already in the store")
                with self._transaction(conn):
                    seq = self._insert(
                        conn,
                        record,
                        nbytes=nbytes,
                        blobs=blobs,
                        dtype=dtype,
                        jpeg_sizes=[len(j) for j in jpegs],
                    )
                    meta = self._meta_updates(record, unit.shape[1])
                    conn.executemany(
                        "INSERT INTO meta (key, value) VALUES (?, ?) "
                        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                        list(meta.items()),
                    )
            except BaseException as exc:
                shutil.rmtree(self._frames_dir / episode_id, ignore_errors=True)
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(f"episode {episode_id}: cannot commit: {exc}") from exc
                raise
            self._meta.update(meta)
            self._index.add(
                seq,
                stamp_ns=record.stamp_ns,
                position=p.position,
                pose_valid=pose_valid,
                surprise=record.surprise,
                unit_embeddings=unit,
            )
            self._seq_of[episode_id] = seq
            self._bytes_of[seq] = nbytes
            self._total_bytes += nbytes
            self._enforce_budget(keep=seq)
        return record

    def _check_embedder(self, model: str, pretrained: bool, dim: int) -> None:
        have = (self.embedder_model, self.embedder_pretrained, self.embedding_dim)
        if have[0] is None:
            return
        if have != (model, bool(pretrained), dim):
            raise EmbedderMismatchError(
                f"embeddings from {model!r} (pretrained={bool(pretrained)}, dim={dim}) cannot "
                f"join a store of {have[0]!r} (pretrained={have[1]}, dim={have[2]}); use "
                "another store folder for another embedder"
            )

    def _meta_updates(self, record: EpisodeRecord, dim: int) -> dict[str, str]:
        meta = {}
        if self.embedder_model is None:
            meta["embedder_model"] = record.embedder_model
            meta["embedder_pretrained"] = "1" if record.embedder_pretrained else "0"
            meta["embedding_dim"] = str(dim)
        origin = self.origin_ns
        if origin is None or record.stamp_ns < origin:
            meta["origin_ns"] = str(record.stamp_ns)
        return meta

    def _encode_jpeg(self, rgb: npt.NDArray[np.uint8]) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(rgb), "RGB").save(
            buf, format="JPEG", quality=self._config.jpeg_quality
        )
        return buf.getvalue()

    def _write_frames(self, episode_id: str, jpegs: Sequence[bytes]) -> None:
        """Write the JPEGs durably into ``frames/<id>`` (temp folder, fsync, rename, fsync)."""
        final = self._frames_dir / episode_id
        tmp = self._frames_dir / f"{_TMP_PREFIX}{episode_id}-{secrets.token_hex(4)}"
        try:
            if final.exists():
                raise StoreError(f"{final} exists although no episode {episode_id} is stored")
            tmp.mkdir()
            for i, data in enumerate(jpegs):
                fd = os.open(tmp / f"{i:02d}.jpg", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fsync(fd)
                finally:
                    os.close(fd)
            _fsync_dir(tmp)
            os.rename(tmp, final)
            _fsync_dir(self._frames_dir)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"episode {episode_id}: cannot write its frames: {exc}") from exc

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        rec: EpisodeRecord,
        *,
        nbytes: int,
        blobs: Sequence[bytes],
        dtype: str,
        jpeg_sizes: Sequence[int],
    ) -> int:
        p = rec.pose
        cur = conn.execute(
            "INSERT INTO episodes (id, stamp_ns, start_ns, end_ns, pos_x, pos_y, pos_z, "
            "ori_x, ori_y, ori_z, ori_w, pose_frame_id, pose_valid, surprise, threshold, "
            "encoder_model, encoder_pretrained, embedder_model, embedder_pretrained, "
            "created_wall_ns, nbytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?, ?, ?, ?)",
            (
                rec.id,
                rec.stamp_ns,
                rec.start_ns,
                rec.end_ns,
                float(p.x),
                float(p.y),
                float(p.z),
                float(p.qx),
                float(p.qy),
                float(p.qz),
                float(p.qw),
                p.frame_id,
                int(rec.pose_valid),
                rec.surprise,
                None if math.isnan(rec.threshold) else rec.threshold,
                rec.encoder_model,
                int(rec.encoder_pretrained),
                rec.embedder_model,
                int(rec.embedder_pretrained),
                rec.created_wall_ns,
                nbytes,
            ),
        )
        seq = cur.lastrowid
        assert seq is not None
        conn.executemany(
            "INSERT INTO frames (episode_seq, idx, stamp_ns, path, nbytes) VALUES (?, ?, ?, ?, ?)",
            [
                (seq, i, s, path, size)
                for i, (s, path, size) in enumerate(
                    zip(rec.frame_stamps_ns, rec.frame_paths, jpeg_sizes, strict=True)
                )
            ],
        )
        dim = len(blobs[0]) // np.dtype(dtype).itemsize
        conn.executemany(
            "INSERT INTO embeddings (episode_seq, idx, dim, dtype, data) VALUES (?, ?, ?, ?, ?)",
            [(seq, i, dim, dtype, blob) for i, blob in enumerate(blobs)],
        )
        return seq

    # ----------------------------------------------------------------- eviction
    def _over_budget(self) -> bool:
        cfg = self._config
        return (cfg.max_episodes > 0 and len(self._seq_of) > cfg.max_episodes) or (
            cfg.max_store_bytes > 0 and self._total_bytes > cfg.max_store_bytes
        )

    def _enforce_budget(self, keep: int) -> None:
        if not self._over_budget():
            return
        victims: list[int] = []
        count, total = len(self._seq_of), self._total_bytes
        cfg = self._config
        for seq in self._index.eviction_order(exclude=keep).tolist():
            if not (
                (cfg.max_episodes > 0 and count > cfg.max_episodes)
                or (cfg.max_store_bytes > 0 and total > cfg.max_store_bytes)
            ):
                break
            victims.append(seq)
            count -= 1
            total -= self._bytes_of[seq]
        self._delete(victims)

    def _delete(self, seqs: Sequence[int]) -> None:
        if not seqs:
            return
        conn = self._db()
        id_of = {seq: ep_id for ep_id, seq in self._seq_of.items()}
        try:
            with self._transaction(conn):
                conn.execute(
                    "DELETE FROM episodes WHERE seq IN (SELECT value FROM json_each(?))",
                    (json.dumps(list(seqs)),),
                )
        except sqlite3.Error as exc:
            raise StoreError(f"{self._root}: cannot evict episodes: {exc}") from exc
        self._index.remove(seqs)
        for seq in seqs:
            ep_id = id_of[seq]
            del self._seq_of[ep_id]
            self._total_bytes -= self._bytes_of.pop(seq)
            shutil.rmtree(self._frames_dir / ep_id, ignore_errors=True)

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
            seqs = [self._seq_of[i] for i in episode_ids if i in self._seq_of]
            self._delete(seqs)
            return len(seqs)

    # ----------------------------------------------------------------- reading
    def _records(self, conn: sqlite3.Connection, seqs: Sequence[int]) -> dict[int, EpisodeRecord]:
        arg = (json.dumps([int(s) for s in seqs]),)
        frames: dict[int, list[tuple[int, str]]] = {}
        for seq, _idx, stamp, path in conn.execute(_SELECT_FRAMES_BY_SEQ, arg):
            frames.setdefault(seq, []).append((stamp, path))
        out = {}
        for row in conn.execute(_SELECT_EPISODES_BY_SEQ, arg):
            (seq, ep_id, stamp, start, end, px, py, pz, ox, oy, oz, ow, frame_id, valid) = row[:14]
            fr = frames.get(seq, [])
            out[seq] = EpisodeRecord(
                id=ep_id,
                stamp_ns=stamp,
                start_ns=start,
                end_ns=end,
                pose=Pose(px, py, pz, ox, oy, oz, ow, frame_id),
                pose_valid=bool(valid),
                surprise=row[14],
                threshold=math.nan if row[15] is None else row[15],
                frame_stamps_ns=tuple(s for s, _ in fr),
                frame_paths=tuple(p for _, p in fr),
                encoder_model=row[16],
                encoder_pretrained=bool(row[17]),
                embedder_model=row[18],
                embedder_pretrained=bool(row[19]),
                created_wall_ns=row[20],
                root=self._root,
            )
        return out

    def _seq(self, episode_id: str) -> int:
        seq = self._seq_of.get(episode_id)
        if seq is None:
            raise StoreError(f"no episode {episode_id!r} in {self._root}")
        return seq

    def get(self, episode_id: str) -> EpisodeRecord:
        """The episode with this id.

        Raises:
            StoreError: No such episode, or the store is closed.

        """
        with self._lock:
            seq = self._seq(episode_id)
            try:
                return self._records(self._db(), [seq])[seq]
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read episode {episode_id}: {exc}") from exc

    def episode_ids(self) -> list[str]:
        """Ids of all episodes, in the order they were added."""
        with self._lock:
            return sorted(self._seq_of, key=self._seq_of.__getitem__)

    def embeddings(self, episode_id: str) -> npt.NDArray[np.float32]:
        """The stored (unit-norm) frame embeddings of an episode, (frames, D) float32.

        Raises:
            StoreError: No such episode, or the store is closed.

        """
        with self._lock:
            seq = self._seq(episode_id)
            rows = self._db().execute(
                "SELECT dim, dtype, data FROM embeddings WHERE episode_seq = ? ORDER BY idx",
                (seq,),
            )
            return np.stack(
                [np.frombuffer(b, dtype=t, count=d).astype(np.float32) for d, t, b in rows]
            )

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
        if not isinstance(query, RetrievalQuery):
            raise InputError(f"query is a {type(query).__name__}: expected RetrievalQuery")
        k = query.max_results or self._config.default_max_results
        if k > self._config.max_results_cap:
            raise InputError(
                f"max_results={k}: at most max_results_cap={self._config.max_results_cap}"
            )
        with self._lock:
            conn = self._db()
            if query.embedding is not None and self.embedder_model is not None:
                want = (self.embedder_model, self.embedding_dim)
                got = (query.embedder_model, query.embedding.shape[0])
                pre = query.embedder_pretrained
                if got != want or (pre is not None and pre != self.embedder_pretrained):
                    raise EmbedderMismatchError(
                        f"query embedding from {got[0]!r} (dim {got[1]}, pretrained={pre}) but "
                        f"this store holds {want[0]!r} (dim {want[1]}, pretrained="
                        f"{self.embedder_pretrained}); embed the query with the store's model"
                    )
            found = self._index.search(query, k)
            try:
                records = self._records(conn, found.keys.tolist())
                hits = []
                for seq, score, dist in zip(
                    found.keys.tolist(),
                    found.scores.tolist(),
                    found.distances.tolist(),
                    strict=True,
                ):
                    rec = records[seq]
                    hits.append(
                        RetrievalHit(
                            episode=rec,
                            score=None if math.isnan(score) else score,
                            distance_m=None if math.isnan(dist) else dist,
                            jpegs=tuple(rec.load_jpegs()) if include_images else (),
                        )
                    )
            except sqlite3.Error as exc:
                raise StoreError(f"{self._root}: cannot read episodes: {exc}") from exc
            return hits

    def search(self, *, include_images: bool = False, **query: Any) -> list[RetrievalHit]:
        """Shorthand: ``retrieve(RetrievalQuery(**query), include_images=...)``.

        Raises:
            InputError: Invalid or unknown query fields.
            EmbedderMismatchError: See :meth:`retrieve`.
            StoreError: See :meth:`retrieve`.

        """
        try:
            q = RetrievalQuery(**query)
        except TypeError as exc:
            raise InputError(f"invalid query fields: {exc}") from exc
        return self.retrieve(q, include_images=include_images)
