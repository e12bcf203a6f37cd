"""Memory care around a bulk load (a store's open): Python's collector, the C heap.

An open of a robot-year reads 671,000 rows into maps and arrays at once; these keep the
cost of that in step with the work (measured in benchmarks/RESULTS.md, "The open").
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Iterator

__all__ = ["collector_paused", "return_free_heap"]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (an open's load).

    The load makes a few million small objects that hold no cycles (rows, tuples, map
    entries); their allocation keeps starting collections that walk them again and again:
    0.5 s of a robot-year's 3.1 s open, measured. Nothing of the load is cyclic garbage.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def return_free_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; 8 ms).

    An open's transient rows leave about 100 MiB of freed heap resident (RssAnon 812 MiB
    after a robot-year's open, 706 after the trim, measured); the allocator would keep it
    for the node's lifetime. Other C libraries (musl) have no such call: nothing is done.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: libc's
    except (OSError, AttributeError):
        return
    trim(0)
