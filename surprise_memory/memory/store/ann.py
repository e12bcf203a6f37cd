"""The SQLite store's approximate index: pooled episode vectors in usearch files beside it.

A cache, never the truth: the database holds every episode and its frame embeddings; this
index holds one vector per episode (the mean of its unit frame embeddings, normalised),
keyed by the episode's key, and can be rebuilt from the database at any time.

Layout, in ``<store>/index/``:

* ``segment-<first>-<last>.usearch``: sealed segments of :data:`SEGMENT_SIZE` episodes
  each (keys ``first..last``), written once and then *memory-mapped* (usearch's view):
  the history is not read into RAM at open; the OS pages in what queries touch.
* ``tail.usearch``: the episodes added since the last sealed segment, held in RAM and
  saved every :data:`CHECKPOINT_EVERY` additions.
* ``manifest.json``: the files and the largest key they hold (``covered``), written
  (temporary file + rename) after the files it names.

Crash safety: a file is renamed into place whole, and the manifest only names files that
are in place, so after a kill the index holds every episode up to ``covered``; the
episodes after it (at most :data:`CHECKPOINT_EVERY` + 1) are read again from the
database at open (:meth:`AnnIndex.catch_up`). Episodes the database no longer holds
(evicted, deleted) stay in the files and are filtered out by the caller, which only
keeps keys it holds. A missing, unreadable or inconsistent file makes the whole index
rebuilt from the database with a progress bar and one log line.

Not thread-safe on its own; the store guards it with its lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CHECKPOINT_EVERY", "SEGMENT_SIZE", "AnnIndex", "pooled"]

_LOG = logging.getLogger(__name__)

SEGMENT_SIZE = 65_536
"""Episodes per sealed (memory-mapped) segment; the RAM tail holds fewer."""

CHECKPOINT_EVERY = 1_024
"""The RAM tail is saved after this many additions: the most an open re-reads."""

_DIR = "index"
_MANIFEST = "manifest.json"
_TAIL = "tail.usearch"
_FORMAT = 1
_BATCH = 1_024  # rows per batch of a rebuild or catch-up
# usearch settings: 16 links per node, wide construction, vectors as float16
_CONNECTIVITY = 16
_EXPANSION_ADD = 128
_EXPANSION_SEARCH = 128
_DTYPE = "f16"


def pooled(unit: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """An episode's vector for the index: the mean of its unit frame rows, normalised."""
    mean = np.asarray(unit, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    out: npt.NDArray[np.float32] = mean / norm if norm > 0 else mean
    return out


@dataclass
class _Segment:
    """One usearch index: sealed (memory-mapped file) or the RAM tail."""

    index: Any
    first: int  # smallest key it may hold
    last: int  # largest key it holds (0 when empty)
    file: str

    def __len__(self) -> int:
        return int(self.index.size)


def _new_index(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="cos",
        dtype=_DTYPE,
        connectivity=_CONNECTIVITY,
        expansion_add=_EXPANSION_ADD,
        expansion_search=_EXPANSION_SEARCH,
    )


def _restore(path: Path, dim: int, *, view: bool) -> Any:
    """Open a saved index (memory-mapped with ``view``); ValueError when it does not fit."""
    from usearch.index import Index

    index = Index.restore(str(path), view=view)
    if index is None or int(index.ndim) != dim:
        raise ValueError(f"{path.name}: not a usearch index of dimension {dim}")
    index.expansion_search = _EXPANSION_SEARCH  # type: ignore[misc]  # a view restores 64
    return index


def _write_text(path: Path, text: str) -> None:
    path.write_text(text)


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file, fsync, rename into place."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class AnnIndex:
    """The on-disk approximate index of a store folder (see the module docstring).

    Args:
        root: The store folder (the index lives in ``root/index``).
        dim: Embedding dimension.
        read_only: Never write (a read-only store keeps what it catches up in RAM).

    """

    def __init__(self, root: Path, dim: int, *, read_only: bool) -> None:
        self._dir = root / _DIR
        self._dim = dim
        self._read_only = read_only
        self._sealed: list[_Segment] = []
        self._tail = _Segment(_new_index(dim), 1, 0, _TAIL)
        self._covered = 0  # largest key saved in a file named by the manifest
        self._unsaved = 0  # additions since the last checkpoint

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def last_key(self) -> int:
        """Largest key the index holds (0 when empty)."""
        return max([self._tail.last, *(s.last for s in self._sealed)], default=0)

    @property
    def covered(self) -> int:
        """Largest key saved in the files (what a crash keeps)."""
        return self._covered

    @property
    def segments(self) -> int:
        """Number of usearch indexes a query visits (sealed segments + tail)."""
        return len(self._sealed) + 1

    def __len__(self) -> int:
        return sum(len(s) for s in self._sealed) + len(self._tail)

    @property
    def ram_bytes(self) -> int:
        """Bytes of the RAM tail (the sealed segments are memory-mapped files)."""
        return int(self._tail.index.memory_usage)

    # ----------------------------------------------------------------- open
    def load(self) -> bool:
        """Open the files the manifest names; False (nothing held) when they are unusable."""
        try:
            manifest = json.loads((self._dir / _MANIFEST).read_text())
            if manifest.get("format") != _FORMAT or int(manifest["dim"]) != self._dim:
                raise ValueError("another format or dimension")
            sealed = [
                _Segment(
                    _restore(self._dir / s["file"], self._dim, view=True),
                    int(s["keys"][0]),
                    int(s["keys"][1]),
                    str(s["file"]),
                )
                for s in manifest["segments"]
            ]
            for seg, entry in zip(sealed, manifest["segments"], strict=True):
                if len(seg) != int(entry["size"]):
                    raise ValueError(f"{seg.file} holds {len(seg)} vectors, not {entry['size']}")
            first, last = (int(k) for k in manifest["tail_keys"])
            tail = _Segment(_new_index(self._dim), first, last, _TAIL)
            if int(manifest["tail_size"]):
                tail.index = _restore(self._dir / _TAIL, self._dim, view=False)
                if len(tail) != int(manifest["tail_size"]):
                    raise ValueError(f"{_TAIL} holds {len(tail)} vectors")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            if (self._dir / _MANIFEST).exists():
                _LOG.warning("%s: the episode index is unusable (%s)", self._dir, exc)
            return False
        self._sealed, self._tail = sealed, tail
        self._covered = int(manifest["covered"])
        return True

    def rebuild(self, rows: Iterable[tuple[int, npt.NDArray[np.float32]]], total: int) -> None:
        """Start empty and add every episode of the database, with a progress bar.

        Args:
            rows: (key, unit frame embeddings) of every stored episode, ascending keys.
            total: How many (for the progress bar).

        """
        from tqdm import tqdm  # type: ignore[import-untyped]

        if total:
            _LOG.warning(
                "%s: rebuilding the episode index from the database (%d episodes)",
                self._dir,
                total,
            )
        self._drop_files()
        self._sealed, self._covered = [], 0
        self._tail = _Segment(_new_index(self._dim), 1, 0, _TAIL)
        with tqdm(total=total, desc="episode index", unit="ep", disable=total < 1000) as bar:
            self.add_rows(rows, bar.update)
        self.checkpoint()

    def add_rows(
        self,
        rows: Iterable[tuple[int, npt.NDArray[np.float32]]],
        done: Callable[[int], object] | None = None,
    ) -> int:
        """Add (key, unit frame embeddings) rows in batches; returns how many were read."""
        keys: list[int] = []
        vecs: list[npt.NDArray[np.float32]] = []
        count = 0

        def flush() -> None:
            if keys:
                self.add_many(np.asarray(keys, dtype=np.int64), np.stack(vecs))
                if done is not None:
                    done(len(keys))
                keys.clear()
                vecs.clear()

        for key, unit in rows:
            keys.append(key)
            vecs.append(pooled(unit))
            count += 1
            if len(keys) >= _BATCH:
                flush()
        flush()
        return count

    def _drop_files(self) -> None:
        if self._read_only or not self._dir.is_dir():
            return
        for path in self._dir.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()

    # ----------------------------------------------------------------- writing
    def add(self, key: int, vector: npt.NDArray[np.float32], *, checkpoint: bool = True) -> None:
        """Add one episode's pooled vector (keys ascending); save or seal the tail when due."""
        if key <= self.last_key:
            return  # held already (a catch-up that overlaps what the files kept)
        tail = self._tail
        if len(tail) == 0:
            tail.first = key
        tail.index.add(key, vector)
        tail.last = key
        self._unsaved += 1
        if len(tail) >= SEGMENT_SIZE:
            self._seal()
        elif checkpoint and self._unsaved >= CHECKPOINT_EVERY:
            self.checkpoint()

    def add_many(self, keys: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add pooled vectors of many episodes (keys ascending) on every core; no checkpoint."""
        keep = keys > self.last_key
        keys, vectors = keys[keep], vectors[keep]
        while keys.size:
            tail = self._tail
            room = SEGMENT_SIZE - len(tail)
            part_keys, part_vecs = keys[:room], vectors[:room]
            if len(tail) == 0:
                tail.first = int(part_keys[0])
            tail.index.add(part_keys, part_vecs)
            tail.last = int(part_keys[-1])
            self._unsaved += part_keys.size
            keys, vectors = keys[room:], vectors[room:]
            if len(tail) >= SEGMENT_SIZE:
                self._seal()

    def _seal(self) -> None:
        """Turn the full tail into a memory-mapped segment; start a new tail."""
        tail = self._tail
        name = f"segment-{tail.first}-{tail.last}.usearch"
        if self._read_only:
            self._sealed.append(_Segment(tail.index, tail.first, tail.last, name))
        else:
            self._dir.mkdir(parents=True, exist_ok=True)
            _atomic_write(self._dir / name, lambda p: tail.index.save(str(p)))
            self._sealed.append(
                _Segment(
                    _restore(self._dir / name, self._dim, view=True), tail.first, tail.last, name
                )
            )
        self._tail = _Segment(_new_index(self._dim), tail.last + 1, 0, _TAIL)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Save the RAM tail, then the manifest naming every file (no-op when read-only)."""
        self._unsaved = 0
        if self._read_only:
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        tail = self._tail
        if len(tail):
            _atomic_write(self._dir / _TAIL, lambda p: tail.index.save(str(p)))
        manifest = {
            "format": _FORMAT,
            "dim": self._dim,
            "covered": self.last_key,
            "segments": [
                {"file": s.file, "keys": [s.first, s.last], "size": len(s)} for s in self._sealed
            ],
            "tail_keys": [tail.first, tail.last],
            "tail_size": len(tail),
        }
        _atomic_write(self._dir / _MANIFEST, lambda p: _write_text(p, json.dumps(manifest)))
        self._covered = self.last_key

    # ----------------------------------------------------------------- reading
    def parts(self) -> list[tuple[Any, int, int]]:
        """(usearch index, first key, last key) of each segment, the tail last."""
        return [(s.index, s.first, s.last) for s in (*self._sealed, self._tail) if len(s)]

    @staticmethod
    def vectors(index: Any, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The stored vectors of ``keys`` (each held by ``index``), (len(keys), D) float32."""
        got = index.get(keys, dtype=np.float32)
        return np.asarray(got, dtype=np.float32).reshape(len(keys), -1)
