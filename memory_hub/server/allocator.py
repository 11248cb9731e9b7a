"""Give large freed buffers back to the system in the long-lived server (glibc's malloc only).

glibc serves an allocation of 128 KiB or more with its own ``mmap``, returned to the system when
freed, but it raises that threshold to the size of every such block freed (up to 32 MiB): after a
few queries the ANN index's decode buffers and Arrow's result batches (LanceDB allocates them in its
worker threads, each with its own malloc arena) come from the arenas, and what the arenas hold once
is kept. At 100k notes a serving process grew to 706–755 MB over the same 60 queries and 6 edits
where, with the threshold held at 128 KiB, it stayed at 554–570 MB, queries no slower (three
interleaved runs each, ``bench_scale.py --stages server``; README, Scale). So the server holds the
threshold fixed, as ``MALLOC_MMAP_THRESHOLD_=131072`` in its environment would; a value a person
sets there is left alone, and elsewhere (macOS, musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
THRESHOLD = 128 * 1024  # glibc's own starting value, kept instead of raised
VARIABLE = "MALLOC_MMAP_THRESHOLD_"


def hold_mmap_threshold(threshold: int = THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes for the rest of the process; True when set.

    Call it once, early: it affects allocations made afterwards."""
    if os.environ.get(VARIABLE) or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library symbols to find, or no mallopt in it
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1  # musl's stub returns 0
