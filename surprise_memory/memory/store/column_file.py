"""The episodes' filter columns in one file beside the database, read by an open in one pass.

A robot-year's ``episodes`` table is about 6,000 pages spread over a 6 GiB database (written
between the frame vectors as the year went in): with the page cache dropped, SQLite's scan
reads them one at a time, half of a 3 s open (benchmarks/RESULTS.md, "The open"). This file
(``episode_columns.bin``, 53 MiB a robot-year) holds the same columns contiguously.

It is trusted only as far as the database vouches for it:

* A writable open writes it from the rows it read (through a temporary file, fsync, rename),
  then commits the file's token to ``meta`` with the position of the change log it accounts
  for. A crash between the two leaves a file the database does not name: unused.
* The database's triggers log the key of every episode row deleted or updated
  (``episode_changes``), whatever code runs the statement. An open takes the file's rows less
  those logged after its position, and reads from the database only the logged rows still
  there and the rows added after the file's last key.
* A file that is missing, damaged (its CRC-32), of another schema version, or not the one
  ``meta`` names is not used: the open reads every row from the database, as without it.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from surprise_memory.memory.store.ann import atomic_write
from surprise_memory.memory.store.schema import (
    FILTER_COLUMNS,
    SCHEMA_VERSION,
    transaction,
    upsert_meta,
)

__all__ = [
    "CHANGE_LOG",
    "COLUMN_FILE",
    "COLUMN_FILE_TOKEN",
    "EPISODE_COLUMN_NAMES",
    "ChangeMark",
    "EpisodeColumns",
    "LoadedColumns",
    "change_mark",
    "ensure_change_log",
    "episode_columns",
    "gone_since",
    "load_columns",
    "name_column_file",
    "needs_rewrite",
    "write_column_file",
]

_log = logging.getLogger(__name__)

COLUMN_FILE = "episode_columns.bin"
"""The file's name in the store folder."""
COLUMN_FILE_TOKEN = "episode_columns_token"
"""The ``meta`` key naming the file the database vouches for."""
_MAGIC = b"SMEPCOL1"
_FORMAT = 1
# numeric columns and their dtypes in the file; the string columns are stored apart
_NUMBERS = {
    "seq": np.int64,
    "stamp_ns": np.int64,
    "pos_x": np.float64,
    "pos_y": np.float64,
    "pos_z": np.float64,
    "pose_valid": np.uint8,
    "surprise": np.float64,
    "nbytes": np.int64,
}
# few distinct values, many rows: stored as codes into a vocabulary
_CODED = ("robot_id", "pose_frame", "camera", "kind")
_REWRITE_FRACTION = 0.02  # of the rows, added or changed since the file, before a new one
_REWRITE_MIN_ROWS = 4096


class EpisodeColumns(NamedTuple):
    """Every episode's key, id and filter fields (no embeddings), one sequence per field.

    The rows of ``episodes`` transposed, in the order added (ascending ``seq``): an open
    builds its arrays and maps from whole columns at once rather than row by row.
    """

    seq: Sequence[int]
    episode_id: Sequence[str]
    stamp_ns: Sequence[int]
    pos_x: Sequence[float]
    pos_y: Sequence[float]
    pos_z: Sequence[float]
    pose_valid: Sequence[int]
    surprise: Sequence[float]
    nbytes: Sequence[int]
    robot_id: Sequence[str]
    pose_frame: Sequence[str]
    camera: Sequence[str]
    kind: Sequence[str]


EPISODE_COLUMN_NAMES = EpisodeColumns._fields
"""The fields of :class:`EpisodeColumns`, in order."""


def episode_columns(
    conn: sqlite3.Connection, where: str = "1", params: Sequence[Any] = ()
) -> EpisodeColumns | None:
    """The key, id and filter fields of every episode, by column; None when there is none.

    ``where`` (a constant SQL condition, ``params`` bound to it) keeps some of them.
    """
    rows = conn.execute(
        f"SELECT {FILTER_COLUMNS} FROM episodes WHERE {where} ORDER BY seq", params
    ).fetchall()
    return EpisodeColumns(*zip(*rows, strict=True)) if rows else None


CHANGE_LOG = (
    "CREATE TABLE IF NOT EXISTS episode_changes ("
    "id INTEGER PRIMARY KEY AUTOINCREMENT, seq INTEGER NOT NULL)",
    "CREATE TRIGGER IF NOT EXISTS episodes_deleted AFTER DELETE ON episodes "
    "BEGIN INSERT INTO episode_changes (seq) VALUES (OLD.seq); END",
    "CREATE TRIGGER IF NOT EXISTS episodes_updated AFTER UPDATE ON episodes "
    "BEGIN INSERT INTO episode_changes (seq) VALUES (OLD.seq); END",
)
"""The log of episode rows deleted or updated, kept by the database itself (so by any code
that writes it): what an open corrects the column file by. Not a schema
version: an older reader ignores it, and its writes are logged all the same."""


def ensure_change_log(conn: sqlite3.Connection) -> None:
    """Create :data:`CHANGE_LOG` where it is missing (a writable open)."""
    with transaction(conn):
        for statement in CHANGE_LOG:
            conn.execute(statement)


class ChangeMark(NamedTuple):
    """Where the database's change log stood, and which column file ``meta`` named then.

    A follower of a live store (:func:`~surprise_memory.memory.store.folder.catch_up`)
    reads only the log's entries after its mark, as long as the token is the same: a new
    file's naming removes the entries it accounts for.
    """

    token: str | None
    upto: int


def change_mark(conn: sqlite3.Connection) -> ChangeMark | None:
    """The log's last entry and the named file's token.

    None when the database has no log: no writable open of this code has seen it.
    """
    has_log = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'episode_changes'"
    ).fetchone()
    if has_log is None:
        return None
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'episode_changes'").fetchone()
    token = conn.execute("SELECT value FROM meta WHERE key = ?", (COLUMN_FILE_TOKEN,)).fetchone()
    return ChangeMark(token[0] if token else None, int(row[0]) if row else 0)


def gone_since(conn: sqlite3.Connection, upto: int) -> list[int]:
    """The keys of the rows deleted after the log's entry ``upto`` (those not back: never)."""
    rows = conn.execute(
        "SELECT DISTINCT seq FROM episode_changes AS c WHERE c.id > ? "
        "AND NOT EXISTS (SELECT 1 FROM episodes AS e WHERE e.seq = c.seq)",
        (upto,),
    )
    return [int(row[0]) for row in rows]


@dataclass(frozen=True)
class LoadedColumns:
    """What an open read: every episode's columns, and how far the file served it.

    Attributes:
        columns: Every stored episode's key, id and filter fields (ascending key), or None
            when there is none.
        mark: The change log's mark when the rows were read (None: no log).
        from_file: Rows taken from the file (0: it was missing or not usable).
        from_db: Rows read from the database.
        logged: Rows of the change log's entries since the file that the open read (the
            keys deleted or updated since, each once).

    """

    columns: EpisodeColumns | None
    mark: ChangeMark | None
    from_file: int
    from_db: int
    logged: int = 0


def needs_rewrite(loaded: LoadedColumns) -> bool:
    """Whether a writable open should write the file again (and so empty the change log).

    It served none of the rows, or too few: more than 2 % of them (and 4,096) came from the
    database; or the change log since it holds more keys than that. Place keyframes replaced
    on every revisit delete thousands of rows a day that leave no row behind (a patrolled
    building: 7,529 a day at the defaults, 11.7 bytes of log each), so without this the log,
    and each open's read of it, grew with the robot's time.
    """
    if loaded.columns is None:
        return False
    if loaded.from_file == 0:
        return True
    bound = max(_REWRITE_MIN_ROWS, _REWRITE_FRACTION * (loaded.from_file + loaded.from_db))
    return loaded.from_db > bound or loaded.logged > bound


def load_columns(conn: sqlite3.Connection, root: Path) -> LoadedColumns:
    """Every episode's filter columns: the file's, corrected by the database, or the database's.

    Call inside the caller's read transaction, so that the rows, the change log and ``meta``
    are one snapshot.

    Raises:
        sqlite3.Error: Reading the database failed.

    """
    mark = change_mark(conn)
    file_rows = _read_trusted(root / COLUMN_FILE, mark)
    if file_rows is None:
        columns = episode_columns(conn)
        return LoadedColumns(columns, mark, 0, len(columns.seq) if columns else 0)
    header, arrays = file_rows
    since = conn.execute(
        "SELECT DISTINCT seq FROM episode_changes WHERE id > ?", (header["changes_upto"],)
    )
    changed = np.array([row[0] for row in since], dtype=np.int64)
    covered = int(header["covered"])
    if changed.size:  # the file's rows of them are out of date, or gone
        keep = ~np.isin(arrays["seq"], changed)
        arrays = {name: values[keep] for name, values in arrays.items()}
    again = changed[changed <= covered].tolist()
    reread = _rows(conn, "seq IN (SELECT value FROM json_each(?))", json.dumps(again))
    if reread:  # back in key order among the file's
        arrays = {n: np.concatenate([arrays[n], reread[n]]) for n in EPISODE_COLUMN_NAMES}
        order = np.argsort(arrays["seq"], kind="stable")
        arrays = {name: values[order] for name, values in arrays.items()}
    added = _rows(conn, "seq > ?", covered)
    if added:
        arrays = {n: np.concatenate([arrays[n], added[n]]) for n in EPISODE_COLUMN_NAMES}
    from_db = _count(reread) + _count(added)
    n = len(arrays["seq"])
    if n == 0:
        return LoadedColumns(None, mark, 0, 0)
    columns = EpisodeColumns(*(arrays[name].tolist() for name in EPISODE_COLUMN_NAMES))
    return LoadedColumns(columns, mark, n - from_db, from_db, int(changed.size))


def write_column_file(root: Path, loaded: LoadedColumns) -> str | None:
    """Write the file from an open's rows; its token, for :func:`name_column_file`.

    Returns:
        The file's token; None, with a warning logged, when it could not be written (a full
        disk, an id with a line break): the opens read the database as before.

    """
    columns = loaded.columns
    if columns is None or loaded.mark is None:
        return None
    root_file = root / COLUMN_FILE
    if any("\n" in episode_id for episode_id in columns.episode_id):
        _log.warning("%s: an episode id holds a line break; not written", root_file)
        return None
    parts: list[tuple[str, npt.NDArray[Any]]] = [
        (name, np.asarray(getattr(columns, name), dtype=dtype)) for name, dtype in _NUMBERS.items()
    ]
    vocab: dict[str, list[str]] = {}
    for name in _CODED:
        values = getattr(columns, name)
        vocab[name] = words = list(dict.fromkeys(values))
        code = {word: i for i, word in enumerate(words)}
        parts.append((name, np.fromiter(map(code.__getitem__, values), np.int32, len(values))))
    parts.append(("episode_id", np.frombuffer("\n".join(columns.episode_id).encode(), np.uint8)))
    layout, offset = {}, 0
    for name, values in parts:
        layout[name] = [values.dtype.str, offset, values.nbytes]
        offset += values.nbytes
    payload = b"".join(values.tobytes() for _, values in parts)
    token = uuid.uuid4().hex
    header = {
        "format": _FORMAT,
        "schema": SCHEMA_VERSION,
        "token": token,
        "rows": len(columns.seq),
        "covered": int(columns.seq[-1]),
        "changes_upto": loaded.mark.upto,
        "crc32": zlib.crc32(payload),
        "layout": layout,
        "vocab": vocab,
    }
    head = json.dumps(header).encode()

    def write(path: Path) -> None:
        with path.open("wb") as f:
            f.write(_MAGIC + struct.pack("<Q", len(head)) + head + payload)

    try:
        atomic_write(root_file, write)
    except OSError as exc:
        _log.warning("%s: not written (%s); the opens read the database", root_file, exc)
        return None
    return token


def name_column_file(conn: sqlite3.Connection, token: str, changes_upto: int) -> None:
    """Name the file the database vouches for (after :func:`write_column_file`).

    Called by a writable open, its read transaction ended; it holds the writer lock, so
    nothing was written since the rows were read. The change log's entries up to
    ``changes_upto`` are the file's already: they go. A failed write is logged: the file
    stays unnamed, so unused, and the open goes on.
    """
    try:
        with transaction(conn):
            upsert_meta(conn, {COLUMN_FILE_TOKEN: token})
            conn.execute("DELETE FROM episode_changes WHERE id <= ?", (changes_upto,))
    except sqlite3.Error as exc:
        _log.warning("%s not named in the database (%s); the opens read the rows", COLUMN_FILE, exc)


def _read_trusted(
    path: Path, mark: ChangeMark | None
) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]] | None:
    """The file's header and columns, if it is whole and the one ``meta`` names; else None."""
    if mark is None or mark.token is None:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return _parse(data, mark.token)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        _log.warning("%s: not used (%s); the rows are read from the database", path, exc)
        return None


def _parse(data: bytes, token: str) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]] | None:
    if data[: len(_MAGIC)] != _MAGIC:
        raise ValueError("not an episode column file")
    (size,) = struct.unpack_from("<Q", data, len(_MAGIC))
    start = len(_MAGIC) + 8
    header = json.loads(data[start : start + size])
    if header["token"] != token:
        return None  # an older file, or one written but never named: not this database's
    if header["format"] != _FORMAT or header["schema"] != SCHEMA_VERSION:
        raise ValueError(f"format {header['format']}, schema {header['schema']}")
    payload = memoryview(data)[start + size :]
    if zlib.crc32(payload) != header["crc32"]:
        raise ValueError("its checksum does not match")
    rows = int(header["rows"])
    raw = {
        name: np.frombuffer(
            payload, dtype=np.dtype(kind), count=nbytes // np.dtype(kind).itemsize, offset=offset
        )
        for name, (kind, offset, nbytes) in header["layout"].items()
    }
    arrays: dict[str, npt.NDArray[Any]] = {name: raw[name] for name in _NUMBERS}
    for name in _CODED:
        arrays[name] = np.array(header["vocab"][name], dtype=object)[raw[name]]
    ids = bytes(raw["episode_id"]).decode().split("\n")
    arrays["episode_id"] = np.array(ids, dtype=object)
    if any(len(values) != rows for values in arrays.values()):
        raise ValueError("its columns differ in length")
    return header, arrays


def _rows(conn: sqlite3.Connection, where: str, arg: Any) -> dict[str, npt.NDArray[Any]]:
    """The columns of the rows ``where`` holds, ascending key; {} when there is none."""
    columns = episode_columns(conn, where, (arg,))
    if columns is None:
        return {}
    return {
        name: np.array(getattr(columns, name), dtype=_NUMBERS.get(name, object))
        for name in EPISODE_COLUMN_NAMES
    }


def _count(arrays: dict[str, npt.NDArray[Any]]) -> int:
    return len(arrays["seq"]) if arrays else 0
