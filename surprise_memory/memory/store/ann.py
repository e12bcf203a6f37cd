"""The SQLite store's approximate index: pooled episode vectors in usearch files beside it.

A cache, never the truth: the database holds every episode and its frame embeddings; this
index holds one vector per episode (the mean of its unit frame embeddings, normalised),
keyed by the episode's key, and can be rebuilt from the database at any time.

Layout, in ``<store>/index/``:

* ``segment-<first>-<last>.usearch``, ``.keys``, ``.f32``: sealed segments of
  :data:`SEGMENT_SIZE` episodes each (keys ``first..last``): the usearch graph, the keys
  and the vectors (float32, in key order), written once and then *memory-mapped*: the
  history is not read into RAM at open; the OS pages in what queries touch. The raw
  vectors let a filtered query score the episodes it keeps exactly, without the graph.
* ``tail.usearch``, ``tail.keys``, ``tail.f32``: the episodes added since the last sealed
  segment, held in RAM; keys and vectors are appended to their files as they come, and
  every :data:`CHECKPOINT_EVERY` additions the files are synced and the graph saved.
* ``manifest.json``: the files, their sizes and the largest key they hold (``covered``),
  written (temporary file + rename) after the files it names.

Sealed segments are merged in the background, :data:`MERGE_FANOUT` adjacent ones into one
(:mod:`~surprise_memory.memory.store.segment_merge`): a query visits fewer graphs. The
merged files are written whole before the manifest names them, and the parts' files are
removed after it does; files the manifest does not name (a merge or a seal cut short by a
kill) are removed when a writer opens the index.

Crash safety: a file is renamed into place whole, and the manifest only names files that
are in place, so after a kill the index holds every episode up to ``covered``; the
episodes after it (at most :data:`CHECKPOINT_EVERY` + 1) are read again from the
database at open (:meth:`AnnIndex.catch_up`). Episodes the database no longer holds
(evicted, deleted) stay in the files and are filtered out by the caller, which only
keeps keys it holds. A missing, unreadable or inconsistent file makes the whole index
rebuilt from the database with a progress bar and one log line.

Not thread-safe on its own; the store guards it with its lock.

Long module: the segments' files, their mapping and search, and the index that keeps the
manifest's one invariant over them belong together; the merge and the prefetch live apart.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import mmap
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "CHECKPOINT_EVERY",
    "MERGE_FANOUT",
    "SEGMENT_SIZE",
    "AnnIndex",
    "Segment",
    "pooled",
    "search_segments",
]

_LOG = logging.getLogger(__name__)

SEGMENT_SIZE = 65_536
"""Episodes per sealed (memory-mapped) segment; the RAM tail holds fewer."""

CHECKPOINT_EVERY = 1_024
"""The RAM tail is saved after this many additions: the most an open re-reads."""

MERGE_FANOUT = 4
"""Adjacent sealed segments merged into one graph in the background; 1 = never merge.

One level only (a merged segment is not merged again), so a merge's graph, built in RAM,
is bounded by this many segments (4 x 65,536 int8 vectors of 1024-d: about 300 MiB).
Chosen by ``bench_segment_merge.py`` (RESULTS.md).
"""

_DIR = "index"
_MANIFEST = "manifest.json"
_TAIL = "tail"
_USEARCH = ".usearch"
_KEYS = ".keys"
_VECS = ".f32"
_FORMAT = 2  # 2: int8 graphs (1: float16); another format is rebuilt at open
BATCH = 1_024  # rows per batch of a rebuild, a catch-up or a merge
# usearch settings: 16 links per node, wide construction, vectors as int8 (cosine over
# int8 costs a third of float16's per search on x86 at the same recall@10 of the graph,
# 0.988 vs 0.986 on 65,536 pooled vectors of bench_lifetime's year, and halves the RAM
# tail; the exact re-ranking over the frames makes up for the rounding)
_CONNECTIVITY = 16
_EXPANSION_ADD = 128
_EXPANSION_SEARCH = 128
_DTYPE = "i8"


def pooled(unit: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float32]:
    """An episode's vector for the index: the mean of its unit frame rows, normalised."""
    mean = np.asarray(unit, dtype=np.float32).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    out: npt.NDArray[np.float32] = mean / norm if norm > 0 else mean
    return out


@dataclass
class Segment:
    """One usearch index with its keys and vectors (float32, in key order).

    Sealed: the usearch file memory-mapped, keys and vectors memory-mapped raw files. The
    tail: all in RAM (the arrays have room for :data:`SEGMENT_SIZE` rows), the keys and
    vectors also appended to raw files that the checkpoint syncs.
    """

    index: Any
    first: int  # smallest key it may hold
    last: int  # largest key it holds (0 when empty)
    name: str  # file stem
    keys: npt.NDArray[np.int64]
    vecs: npt.NDArray[np.float32]
    size: int = 0
    parts: int = 1  # sealed segments merged into this one

    @property
    def entry(self) -> dict[str, Any]:
        """Its line in the manifest."""
        keys = [self.first, self.last]
        return {"name": self.name, "keys": keys, "size": self.size, "parts": self.parts}

    def __len__(self) -> int:
        return self.size

    @property
    def in_ram(self) -> bool:
        """Whether its vectors are in RAM (the tail), not memory-mapped from a file."""
        return bool(self.vecs.flags.writeable)  # a sealed file is mapped read-only

    def vectors(self, keys: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """The stored vectors of ``keys`` (each held here), float32 rows.

        A run of consecutive rows (a time window, every episode) is a view, not a copy. A
        key a merge left out (removed from the store after a reader loaded its filters) gets
        a neighbour's row: a candidate's rank only, its frames are gone from the database.
        """
        rows = np.minimum(np.searchsorted(self.keys[: self.size], keys), max(self.size - 1, 0))
        if rows.size and rows[-1] - rows[0] + 1 == rows.size:
            return self.vecs[rows[0] : rows[-1] + 1]
        return self.vecs[rows]


@functools.cache
def _usearch() -> Any:
    """The module ``usearch.index``, imported once, after rclpy's native module if any.

    usearch's extension loaded *before* rclpy's (``rclpy._rclpy_pybind11``; both are
    pybind11 modules) makes the later import of rclpy kill the process with SIGSEGV
    (usearch 2.26.6, rclpy 9.1); the other order works. A process that opens a store and
    then starts ROS (``surprise-memory goto``) would die, so rclpy's module is loaded
    first where it is installed (a ROS-free process has none and loses nothing).
    """
    with contextlib.suppress(ImportError, OSError):
        importlib.import_module("rclpy._rclpy_pybind11")
    return importlib.import_module("usearch.index")


def new_index(dim: int) -> Any:
    """An empty graph with the store's settings (int8 cosine, connectivity 16)."""
    Index = _usearch().Index  # noqa: N806  # the class

    return Index(
        ndim=dim,
        metric="cos",
        dtype=_DTYPE,
        connectivity=_CONNECTIVITY,
        expansion_add=_EXPANSION_ADD,
        expansion_search=_EXPANSION_SEARCH,
    )


def _map_for_random_reads(path: Path, dtype: type[np.generic]) -> npt.NDArray[Any]:
    """A read-only array over a raw file, mapped for scattered reads (``MADV_RANDOM``).

    Otherwise each page fault reads the disk's read-ahead window around it (8 MiB here: a
    robot-year in 2 GiB read 556 MiB per query; RESULTS.md, "A store larger than the
    robot's memory"). The prefetch's ``read`` calls are not affected.
    """
    with path.open("rb") as f:  # the mapping outlives the descriptor
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with contextlib.suppress(AttributeError, OSError):  # no madvise here: the default
        mapped.madvise(mmap.MADV_RANDOM)
    return np.frombuffer(mapped, dtype=dtype)


def _restore(path: Path, dim: int, *, view: bool) -> Any:
    """Open a saved index (memory-mapped with ``view``); ValueError when it does not fit."""
    index = _usearch().Index.restore(str(path), view=view)
    if index is None or int(index.ndim) != dim:
        raise ValueError(f"{path.name}: not a usearch index of dimension {dim}")
    index.expansion_search = _EXPANSION_SEARCH  # a view restores 64
    return index


def search_segments(
    segments: Sequence[Segment], q: npt.NDArray[np.float32], count: int
) -> npt.NDArray[np.int64]:
    """The ``count`` nearest keys over ``segments`` (by their int8 vectors).

    Several segments are searched at once, one thread each up to the CPUs (usearch's
    ``Indexes``; a search holds the GIL, so Python threads would not overlap): a
    robot-year's eleven graphs cost about half on two cores (16 -> 9 ms a query).
    """
    if len(segments) == 1:
        matches = segments[0].index.search(q, count)
    else:
        joint = _usearch().Indexes(indexes=[s.index for s in segments])
        matches = joint.search(q, count, threads=min(len(segments), os.cpu_count() or 1))
    return np.asarray(matches.keys, dtype=np.int64)


def _write_text(path: Path, text: str) -> None:
    path.write_text(text)


def segment_files(name: str) -> tuple[str, str, str]:
    """A segment's file names: its graph, its keys, its float32 vectors."""
    return name + _USEARCH, name + _KEYS, name + _VECS


def remove_segment_files(directory: Path, name: str) -> None:
    """Remove a segment's files (those that exist)."""
    for file in segment_files(name):
        with contextlib.suppress(OSError):
            (directory / file).unlink()


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
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

    Long class: every change of its files (load, seal, checkpoint, a merge's swap, rebuild)
    keeps one invariant, that the manifest names only whole files; apart, it would be kept
    in two places.

    Args:
        root: The store folder (the index lives in ``root/index``).
        dim: Embedding dimension.
        read_only: Never write (a read-only store keeps what it catches up in RAM).

    """

    def __init__(self, root: Path, dim: int, *, read_only: bool) -> None:
        self._dir = root / _DIR
        self._dim = dim
        self._read_only = read_only
        self._sealed: list[Segment] = []
        self._tail = self._new_tail(1)
        self._covered = 0  # largest key saved in a file named by the manifest
        self._unsaved = 0  # additions since the last checkpoint
        self._files: tuple[Any, Any] | None = None  # the tail's open raw files
        self._problem = "no index yet"  # why the last load failed

    def _new_tail(self, first: int) -> Segment:
        return Segment(
            new_index(self._dim),
            first,
            0,
            _TAIL,
            np.empty(SEGMENT_SIZE, dtype=np.int64),
            np.empty((SEGMENT_SIZE, self._dim), dtype=np.float32),
        )

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def directory(self) -> Path:
        """The folder of its files."""
        return self._dir

    @property
    def read_only(self) -> bool:
        """Whether it never writes."""
        return self._read_only

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
        """Bytes of the RAM tail in use (the sealed segments are memory-mapped files)."""
        tail = self._tail
        return int(tail.index.memory_usage) + tail.size * (8 + 4 * self._dim)

    def close(self) -> None:
        """Close the tail's raw files (what was not checkpointed is re-read at the next open)."""
        if self._files is not None:
            for f in self._files:
                with contextlib.suppress(OSError):
                    f.close()
            self._files = None

    # ----------------------------------------------------------------- open
    def load(self) -> bool:
        """Open the files the manifest names; False (nothing held) when they are unusable.

        A read-only store reads files that their writer may be replacing (a checkpoint
        or a seal between reading the manifest and the files): it tries three times.
        """
        for _ in range(2 if self._read_only else 0):
            if self._load(quiet=True):
                return True
            time.sleep(0.05)
        return self._load(quiet=False)

    def _load(self, *, quiet: bool) -> bool:
        try:
            manifest = json.loads((self._dir / _MANIFEST).read_text())
            if manifest.get("format") != _FORMAT or int(manifest["dim"]) != self._dim:
                raise ValueError("another format or dimension")
            sealed = [self._open_sealed(e) for e in manifest["segments"]]
            first, last = (int(k) for k in manifest["tail_keys"])
            tail = self._new_tail(first)
            tail.last = last
            size = int(manifest["tail_size"])
            if size:
                tail.index = _restore(self._dir / (_TAIL + _USEARCH), self._dim, view=False)
                keys = np.fromfile(self._dir / (_TAIL + _KEYS), dtype=np.int64, count=size)
                vecs = np.fromfile(
                    self._dir / (_TAIL + _VECS), dtype=np.float32, count=size * self._dim
                )
                if (
                    int(tail.index.size) != size
                    or keys.size != size
                    or vecs.size != size * self._dim
                ):
                    raise ValueError("the tail files hold fewer vectors than the manifest says")
                tail.keys[:size] = keys
                tail.vecs[:size] = vecs.reshape(size, self._dim)
                tail.size = size
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            if not quiet:
                missing = not (self._dir / _MANIFEST).exists()
                self._problem = "no index yet" if missing else f"the index is unusable: {exc}"
            return False
        self._sealed, self._tail = sealed, tail
        self._covered = int(manifest["covered"])
        self._open_tail_files(truncate=True)
        self._remove_unnamed()
        return True

    def _remove_unnamed(self) -> None:
        """Remove the files the manifest does not name: what a kill left of a merge or seal."""
        if self._read_only:
            return
        named = {_MANIFEST, *segment_files(_TAIL)}
        for seg in self._sealed:
            named.update(segment_files(seg.name))
        for path in self._dir.iterdir():
            if path.name not in named:
                _LOG.info("%s: removing %s (not in the manifest)", self._dir, path.name)
                with contextlib.suppress(OSError):
                    path.unlink()

    def _open_sealed(self, entry: dict[str, Any]) -> Segment:
        name, size = str(entry["name"]), int(entry["size"])
        # the graph keeps the kernel's read-around: advised random too, cold queries without
        # the prefetch took p50 133 ms instead of 66, p99 1.2 s instead of 0.17 (in 2 GiB; the
        # graphs, 0.7 GiB of a robot-year, fit, and the read-around's large reads warm them)
        index = _restore(self._dir / (name + _USEARCH), self._dim, view=True)
        keys = _map_for_random_reads(self._dir / (name + _KEYS), np.int64)
        vecs = _map_for_random_reads(self._dir / (name + _VECS), np.float32)
        if int(index.size) != size or keys.size != size or vecs.size != size * self._dim:
            raise ValueError(f"{name} does not hold {size} vectors")
        first, last = (int(k) for k in entry["keys"])
        parts = int(entry.get("parts", 1))
        return Segment(index, first, last, name, keys, vecs.reshape(size, self._dim), size, parts)

    def _open_tail_files(self, *, truncate: bool) -> None:
        if self._read_only:
            return
        self.close()
        self._dir.mkdir(parents=True, exist_ok=True)
        size = self._tail.size
        files = []
        for suffix, width in ((_KEYS, 8), (_VECS, 4 * self._dim)):
            f = open(self._dir / (_TAIL + suffix), "ab")  # noqa: SIM115  # kept open
            if truncate:
                f.truncate(size * width)
            files.append(f)
        self._files = (files[0], files[1])

    def rebuild(self, rows: Iterable[tuple[int, npt.NDArray[np.float32]]], total: int) -> None:
        """Start empty and add every episode of the database, with a progress bar.

        Args:
            rows: (key, unit frame embeddings) of every stored episode, ascending keys.
            total: How many (for the progress bar).

        """
        from tqdm import tqdm  # type: ignore[import-untyped]

        if total:
            _LOG.warning(
                "%s: rebuilding the episode index from the database (%d episodes; %s)",
                self._dir,
                total,
                self._problem,
            )
        self.close()
        self._drop_files()
        self._sealed, self._covered = [], 0
        self._tail = self._new_tail(1)
        self._open_tail_files(truncate=True)
        with tqdm(total=total, desc="episode index", unit="ep", disable=total < 1000) as bar:
            self.add_rows(rows, bar.update)
        self.checkpoint()

    def _drop_files(self) -> None:
        if self._read_only or not self._dir.is_dir():
            return
        for path in self._dir.iterdir():
            with contextlib.suppress(OSError):
                path.unlink()

    # ----------------------------------------------------------------- writing
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
            if len(keys) >= BATCH:
                flush()
        flush()
        return count

    def add(self, key: int, vector: npt.NDArray[np.float32], *, checkpoint: bool = True) -> None:
        """Add one episode's pooled vector (keys ascending); save or seal the tail when due."""
        self.add_many(np.asarray([key], dtype=np.int64), vector[None, :])
        if checkpoint and self._unsaved >= CHECKPOINT_EVERY:
            self.checkpoint()

    def add_many(self, keys: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add pooled vectors of many episodes (keys ascending); seals, never checkpoints."""
        keep = keys > self.last_key  # held already: a catch-up overlapping the files
        keys, vectors = keys[keep], np.ascontiguousarray(vectors[keep], dtype=np.float32)
        while keys.size:
            tail = self._tail
            room = SEGMENT_SIZE - tail.size
            part_keys, part_vecs = keys[:room], vectors[:room]
            if tail.size == 0:
                tail.first = int(part_keys[0])
            if part_keys.size == 1:
                tail.index.add(int(part_keys[0]), part_vecs[0])
            else:
                # one thread: usearch's default (every core) builds another graph from the
                # same rows each time, so answers changed with each rebuild (one build in
                # ten of the index tests' store lost a query's nearest episode that the
                # others found); one thread builds the same graph every time, as live adds
                # do, with the same recall, in 1.5x the time (bench_index_build.py)
                tail.index.add(part_keys, part_vecs, threads=1)
            n = part_keys.size
            tail.keys[tail.size : tail.size + n] = part_keys
            tail.vecs[tail.size : tail.size + n] = part_vecs
            tail.size += n
            tail.last = int(part_keys[-1])
            if self._files is not None:
                self._files[0].write(part_keys.tobytes())
                self._files[1].write(np.ascontiguousarray(part_vecs).tobytes())
            self._unsaved += n
            keys, vectors = keys[room:], vectors[room:]
            if tail.size >= SEGMENT_SIZE:
                self._seal()

    def _sync_tail_files(self) -> None:
        if self._files is not None:
            for f in self._files:
                f.flush()
                os.fsync(f.fileno())

    def _seal(self) -> None:
        """Turn the full tail into a memory-mapped segment; start a new tail."""
        tail = self._tail
        name = f"segment-{tail.first}-{tail.last}"
        if self._read_only:
            self._sealed.append(
                Segment(tail.index, tail.first, tail.last, name, tail.keys, tail.vecs, tail.size)
            )
        else:
            self._sync_tail_files()
            self.close()
            d = self._dir
            atomic_write(d / (name + _USEARCH), lambda p: tail.index.save(str(p)))
            os.replace(d / (_TAIL + _KEYS), d / (name + _KEYS))
            os.replace(d / (_TAIL + _VECS), d / (name + _VECS))
            entry = {"name": name, "keys": [tail.first, tail.last], "size": tail.size}
            self._sealed.append(self._open_sealed(entry))
        self._tail = self._new_tail(tail.last + 1)
        self._open_tail_files(truncate=True)
        self.checkpoint()

    def checkpoint(self) -> None:
        """Save the RAM tail, then the manifest naming every file (no-op when read-only)."""
        self._unsaved = 0
        if self._read_only:
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        tail = self._tail
        self._sync_tail_files()
        if tail.size:
            atomic_write(self._dir / (_TAIL + _USEARCH), lambda p: tail.index.save(str(p)))
        manifest = {
            "format": _FORMAT,
            "dim": self._dim,
            "covered": self.last_key,
            "segments": [s.entry for s in self._sealed],
            "tail_keys": [tail.first, tail.last],
            "tail_size": tail.size,
        }
        atomic_write(self._dir / _MANIFEST, lambda p: _write_text(p, json.dumps(manifest)))
        self._covered = self.last_key

    # ----------------------------------------------------------------- merging
    def merge_plan(self) -> list[Segment]:
        """The first :data:`MERGE_FANOUT` adjacent sealed segments not merged yet, or none."""
        if self._read_only or MERGE_FANOUT < 2:
            return []
        start = 0  # of the current run of unmerged segments
        for i, seg in enumerate(self._sealed):
            if seg.parts != 1:
                start = i + 1
            elif i + 1 - start == MERGE_FANOUT:
                return self._sealed[start : i + 1]
        return []

    def replace(self, plan: Sequence[Segment], merged: dict[str, Any] | None) -> bool:
        """Put a merged segment (its files written; None: nothing kept) in place of ``plan``.

        False (nothing changed) when ``plan``, from :meth:`merge_plan`, is no longer what the
        index holds (a rebuild meanwhile); the caller then removes the merged files.
        """
        at = next((i for i, s in enumerate(self._sealed) if s is plan[0]), -1)
        now = self._sealed[at : at + len(plan)] if at >= 0 else []
        if len(now) != len(plan) or any(a is not b for a, b in zip(now, plan, strict=True)):
            return False
        new = [] if merged is None else [self._open_sealed(merged)]
        self._sealed[at : at + len(plan)] = new
        self.checkpoint()  # the manifest names the merged files, not the parts'
        for seg in plan:
            remove_segment_files(self._dir, seg.name)
        return True

    # ----------------------------------------------------------------- reading
    def parts(self) -> list[Segment]:
        """The segments that hold vectors, the tail last."""
        return [s for s in (*self._sealed, self._tail) if s.size]

    def sealed_files(self) -> list[Path]:
        """The sealed segments' files: every graph, then every segment's keys and vectors."""
        names = [segment_files(s.name) for s in self._sealed]
        graphs = [self._dir / graph for graph, _, _ in names]
        return graphs + [self._dir / f for _, keys, vecs in names for f in (keys, vecs)]
