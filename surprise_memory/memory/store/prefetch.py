"""Reading the episode index's files into the page cache after a boot (the cold start).

The sealed segments are memory-mapped, so after a boot every graph node and vector a query
touches is a page fault that waits for the disk: on a robot-year (``bench_lifetime.py``,
page cache dropped) the first queries took up to 0.8 s and text p99 332 ms, of which the
frames read from SQLite were 46 ms. Reading the index files once, sequentially, takes
about 4 s for a robot-year's 3.3 GiB here and brings text p99 to 37 ms (RESULTS.md,
"cold start").

``posix_fadvise(WILLNEED)`` is not enough: Linux reads 8 MiB of each file for it and
stops. :class:`IndexPrefetch` reads the files in a thread of its own at nice
:data:`~.segment_merge.NICE`, the graphs first (every query walks them), then the keys and
the vectors (read for the candidates), and stops when the store closes. Queries do not
wait for it: until it is done they fault in what they need, as without it. What it reads
is page cache, which the kernel gives back to programs that need the memory.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from surprise_memory.memory.store.segment_merge import NICE

__all__ = ["CHUNK", "IndexPrefetch", "page_cache_room", "plan_prefetch"]

_LOG = logging.getLogger(__name__)

CHUNK = 1 << 20
"""Bytes per read: large enough for the disk to stream, small enough to stop quickly."""


_UNLIMITED = 1 << 60
"""A cgroup limit at or above this is no limit (cgroup v1 writes 2**63 rounded to a page)."""


def _meminfo_available(meminfo: Path) -> int | None:
    """``MemAvailable`` in bytes: free memory plus what the kernel can reclaim."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _stat_bytes(stat_file: Path, keys: Sequence[str]) -> int:
    """The sum of ``keys`` in a cgroup's ``memory.stat`` (0 for a key it lacks)."""
    values = dict(line.split()[:2] for line in stat_file.read_text().splitlines() if " " in line)
    return sum(int(values.get(k, 0)) for k in keys)


def _cgroup_room(proc_cgroup: Path, cgroup_root: Path) -> int | None:
    """The memory cgroups' room for the page cache: the least of limit less anonymous memory.

    cgroup v2: every level from this process's group up to the root (``memory.max``,
    ``anon`` + ``shmem`` of ``memory.stat``). cgroup v1: the leaf's hierarchical limit and
    ``total_rss`` + ``total_shmem``, which count its ancestors' limits and its children.
    Shared memory counts as used: without swap the kernel cannot reclaim it.
    """
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    rooms: list[int] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:  # not "id:controllers:path"
            continue
        _, controllers, path = parts
        if controllers == "" and (cgroup_root / "cgroup.controllers").is_file():  # v2
            group = cgroup_root / path.lstrip("/")
            while True:
                with contextlib.suppress(OSError, ValueError):
                    limit = (group / "memory.max").read_text().strip()
                    if limit != "max":
                        used = _stat_bytes(group / "memory.stat", ("anon", "shmem"))
                        rooms.append(int(limit) - used)
                if group == cgroup_root or cgroup_root not in group.parents:
                    break
                group = group.parent
        elif "memory" in controllers.split(","):  # v1
            group = cgroup_root / "memory" / path.lstrip("/")
            if not group.is_dir():  # a cgroup namespace: its root is the mount
                group = cgroup_root / "memory"
            with contextlib.suppress(OSError, ValueError):
                stat = group / "memory.stat"
                hierarchical = _stat_bytes(stat, ("hierarchical_memory_limit",))
                if 0 < hierarchical < _UNLIMITED:
                    rooms.append(hierarchical - _stat_bytes(stat, ("total_rss", "total_shmem")))
    return max(0, min(rooms)) if rooms else None


def page_cache_room(
    meminfo: Path = Path("/proc/meminfo"),
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    cgroup_root: Path = Path("/sys/fs/cgroup"),
) -> int | None:
    """Bytes of memory this process can fill with page cache without pushing out its own.

    The system's ``MemAvailable`` and, where this process runs in a memory cgroup (a
    container, a systemd unit with ``MemoryMax``, a robot's resource limits), the cgroup's
    limit less its anonymous and shared memory; the smaller. None where neither can be
    read (not Linux): no bound is known.
    """
    rooms = (_meminfo_available(meminfo), _cgroup_room(proc_cgroup, cgroup_root))
    known = [r for r in rooms if r is not None]
    return min(known) if known else None


def plan_prefetch(paths: Sequence[Path], budget: int | None) -> tuple[list[Path], list[Path]]:
    """The files to read, in order, while their total fits ``budget`` bytes; and those left.

    A file that would not fit is passed over and the next tried (a small keys file may fit
    after a large vectors file did not). ``budget`` None reads every file.
    """
    read: list[Path] = []
    left: list[Path] = []
    total = 0
    for path in paths:
        try:
            size = path.stat().st_size
        except OSError:  # removed by a merge meanwhile
            continue
        if budget is None or total + size <= budget:
            read.append(path)
            total += size
        else:
            left.append(path)
    return read, left


class IndexPrefetch:
    """Reads files into the page cache in a background thread, once.

    Args:
        paths: The files, in the order to read them; a file gone meanwhile (a merge
            removed it) is passed over.
        budget: Bytes it may read (:func:`plan_prefetch`); None reads every file.

    """

    def __init__(self, paths: Sequence[Path], budget: int | None = None) -> None:
        self._paths, left = plan_prefetch(paths, budget)
        self.left = left
        """The files passed over for the budget: queries fault their pages in."""
        if self.left:
            _LOG.info(
                "index prefetch: reading %d of %d files, the rest would not fit in %.2f GiB "
                "of the memory free for the page cache (index_prefetch_memory_share)",
                len(self._paths),
                len(self._paths) + len(self.left),
                (budget or 0) / 2**30,
            )
        self._stop = threading.Event()
        self._done = threading.Event()
        self.bytes_read = 0
        """Bytes read so far."""
        self._thread = threading.Thread(target=self._run, name="index-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not Linux: the default nice
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        buf = bytearray(CHUNK)
        try:
            for path in self._paths:
                try:
                    with path.open("rb", buffering=0) as f:
                        while not self._stop.is_set():
                            n = f.readinto(buf)
                            if not n:
                                break
                            self.bytes_read += n
                except OSError as exc:  # removed by a merge, or unreadable: the queries say
                    _LOG.debug("prefetch of %s stopped: %s", path, exc)
                if self._stop.is_set():
                    return
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every file was read (or the prefetch stopped); False on timeout."""
        return self._done.wait(timeout)

    def stop(self) -> None:
        """Stop after the current chunk (the store is closing); does not wait."""
        self._stop.set()
