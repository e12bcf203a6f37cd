"""Large image buffers go back to the system when freed: glibc's mmap threshold, fixed.

glibc serves an allocation above ``M_MMAP_THRESHOLD`` with its own ``mmap`` and unmaps it
on free; below, it comes from a heap arena, which returns memory to the system only from
its top. By default the threshold *adapts*: after the first free of an mmapped block it
rises to that block's size (up to 32 MiB), so from then on every camera frame (0.9 MB at
640x480, 6 MB at 1080p) comes from the arenas of the callback and worker threads, and the
resident memory of a node that holds frames for seconds creeps up over hours as the arenas
fragment. Setting the threshold explicitly turns the adaptation off (``mallopt(3)``). The
soak benchmark (``benchmarks/soak_nodes.py``) measured the memory node at +42 MB/min with
the default and flat with the threshold fixed at 128 KiB.
"""

from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["fix_mmap_threshold"]

_M_MMAP_THRESHOLD = -3  # from glibc's malloc.h


def fix_mmap_threshold(nbytes: int = 128 * 1024) -> bool:
    """Serve allocations above ``nbytes`` by mmap, always; False where libc has no mallopt."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to tune
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, nbytes))
