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

__all__ = ["CHUNK", "IndexPrefetch"]

_LOG = logging.getLogger(__name__)

CHUNK = 1 << 20
"""Bytes per read: large enough for the disk to stream, small enough to stop quickly."""


class IndexPrefetch:
    """Reads files into the page cache in a background thread, once.

    Args:
        paths: The files, in the order to read them; a file gone meanwhile (a merge
            removed it) is passed over.

    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self._paths = list(paths)
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
