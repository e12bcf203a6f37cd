"""Merging the episode index's sealed segments in the background (fewer graphs per query).

A robot-year fills eleven sealed segments of :data:`~.ann.SEGMENT_SIZE` episodes, and a
query searches every graph. :class:`SegmentMerger` merges :data:`~.ann.MERGE_FANOUT`
adjacent sealed segments into one in a thread of its own:

* **Never blocking.** The parts are immutable memory-mapped files, so the merged graph is
  built (one thread; usearch releases the GIL while it adds) and written without the
  store's lock; the lock is held only to choose the parts and to swap the merged segment
  in, a manifest write. Adds and queries go on meanwhile, on the parts.
* **Crash-safe and resumable.** The merged files are written whole (temporary names,
  fsync, rename) before the manifest names them, and the parts' files are removed after
  it does; a kill at any point leaves a manifest that names a complete index, and the
  files it does not name are removed when the store opens again, which starts the merge
  again from its beginning.
* **In the background.** The merge thread runs at nice :data:`NICE` (Linux sets it per
  thread), so the camera path and the queries come first.
* **Bounded.** One merge at a time, of at most ``MERGE_FANOUT`` segments; the merged
  graph is built in RAM (about 300 MiB for 4 x 65,536 int8 vectors of 1024-d), the
  vectors are streamed from the parts to the new files in batches.
* **Compacting.** Episodes the store no longer holds (evicted, deleted) are left out of
  the merged segment.
* **Stoppable.** Closing the store stops a merge between two batches and removes its
  temporary files; the next open starts it again.

A failed merge (a full disk) is logged once and tried again after
:data:`RETRY_AFTER_S`; the index stays as it was, so nothing is lost.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.memory.store.ann import (
    BATCH,
    AnnIndex,
    Segment,
    atomic_write,
    new_index,
    remove_segment_files,
    segment_files,
)

__all__ = ["NICE", "RETRY_AFTER_S", "HeldKeys", "SegmentMerger", "write_merged"]

_LOG = logging.getLogger(__name__)

RETRY_AFTER_S = 600.0
"""A merge that failed (a full disk, an unreadable part) is not tried again before this."""

NICE = 10
"""The merge thread's nice value (Linux: per thread), below the live path's."""

HeldKeys = Callable[[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]
"""Which of the given keys the store still holds (a mask)."""


def write_merged(
    directory: Path,
    plan: Sequence[Segment],
    dim: int,
    keep: npt.NDArray[np.bool_],
    stop: threading.Event,
) -> dict[str, Any] | None:
    """Build and write the segment that replaces ``plan``'s; None when ``stop`` was set.

    Args:
        directory: The index folder.
        plan: Adjacent sealed segments, in key order.
        dim: Vector dimension.
        keep: Per key of the parts (in order), whether it goes into the merged segment.
        stop: Checked between batches.

    Returns:
        The merged segment's manifest entry (its files in place, not yet named by the
        manifest); ``size`` 0 when nothing was kept (no files written).

    Raises:
        OSError: Writing failed; no file of the merge is left.

    """
    name = f"segment-{plan[0].first}-{plan[-1].last}"
    graph_name, keys_name, vecs_name = segment_files(name)
    tmp_keys, tmp_vecs = directory / (keys_name + ".tmp"), directory / (vecs_name + ".tmp")
    index = new_index(dim)
    size = offset = 0
    done = False
    try:
        with open(tmp_keys, "wb") as keys_file, open(tmp_vecs, "wb") as vecs_file:
            for seg in plan:
                for lo in range(0, seg.size, BATCH):
                    if stop.is_set():
                        return None
                    hi = min(lo + BATCH, seg.size)
                    mask = keep[offset + lo : offset + hi]
                    keys = np.ascontiguousarray(seg.keys[lo:hi][mask])
                    vecs = np.ascontiguousarray(seg.vecs[lo:hi][mask], dtype=np.float32)
                    if keys.size == 1:
                        index.add(int(keys[0]), vecs[0])
                    elif keys.size:
                        index.add(keys, vecs, threads=1)  # one thread: the same graph each time
                    keys_file.write(keys.tobytes())
                    vecs_file.write(vecs.tobytes())
                    size += int(keys.size)
                offset += seg.size
            for f in (keys_file, vecs_file):
                f.flush()
                os.fsync(f.fileno())
        parts = sum(seg.parts for seg in plan)
        entry = {"name": name, "keys": [plan[0].first, plan[-1].last], "size": size, "parts": parts}
        if size:
            atomic_write(directory / graph_name, lambda p: index.save(str(p)))
            os.replace(tmp_keys, directory / keys_name)
            os.replace(tmp_vecs, directory / vecs_name)
        done = True
        return entry
    finally:  # what is left of a stopped, failed or empty merge
        for path in (tmp_keys, tmp_vecs, *(() if done else (directory / (graph_name + ".tmp"),))):
            with contextlib.suppress(OSError):
                path.unlink(missing_ok=True)


class SegmentMerger:
    """Merges an episode index's sealed segments in a background thread, one merge at a time.

    Args:
        lock: The store's lock, which guards the index: held to choose the parts and to
            swap the merged segment in, never while a graph is built.

    """

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._retry_at = 0.0

    @property
    def running(self) -> bool:
        """Whether a merge is in progress."""
        return self._thread is not None and self._thread.is_alive()

    def start(self, ann: AnnIndex | None, held: HeldKeys) -> None:
        """Start merging when a merge is due and none runs (call under the lock; cheap)."""
        if ann is None or self.running or self._stop.is_set():
            return
        if time.monotonic() < self._retry_at or not ann.merge_plan():
            return
        self._thread = threading.Thread(
            target=self._run, args=(ann, held), name="index-segment-merge", daemon=True
        )
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the merges in progress to end; whether they did within ``timeout``."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.running

    def close(self) -> None:
        """Stop a merge in progress (between two batches) and wait for it.

        Called without the lock, which the merge takes to finish.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, ann: AnnIndex, held: HeldKeys) -> None:
        # a background job: on Linux a thread has its own nice value, so the camera path
        # and the queries win the CPU over the merge (a robot's first open after an upgrade
        # may merge for minutes)
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        while not self._stop.is_set():
            with self._lock:
                plan = ann.merge_plan()
                if not plan or self._stop.is_set():
                    return
                keep = held(np.concatenate([seg.keys[: seg.size] for seg in plan]))
            first, last = plan[0].first, plan[-1].last
            t0 = time.monotonic()
            _LOG.info(
                "%s: merging index segments %d-%d (%d episodes, %d kept) in the background",
                ann.directory,
                first,
                last,
                keep.size,
                int(np.count_nonzero(keep)),
            )
            try:
                entry = write_merged(ann.directory, plan, ann.dim, keep, self._stop)
                if entry is None:
                    return  # stopped: the next open starts again
                with self._lock:
                    if not ann.replace(plan, entry if entry["size"] else None):
                        remove_segment_files(ann.directory, str(entry["name"]))
                        return
            except (OSError, ValueError, RuntimeError) as exc:
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                _LOG.warning(
                    "%s: merging index segments %d-%d failed (%s); the index stays as it "
                    "was, tried again in %.0f s",
                    ann.directory,
                    first,
                    last,
                    exc,
                    RETRY_AFTER_S,
                )
                return
            _LOG.info(
                "%s: merged index segments %d-%d in %.1f s",
                ann.directory,
                first,
                last,
                time.monotonic() - t0,
            )
