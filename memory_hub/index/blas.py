"""numpy's BLAS on one thread: the vector search's product is memory-bound and no faster on two.

OpenBLAS hands a matrix-vector product to a thread per core, and those threads busy-wait after
every call: on obsidian-hub's 14k rows a query's product cost 8.5-9.5 ms of CPU where one thread
takes 2.7-3.5 ms, and a warm hybrid query ~54 ms of CPU instead of ~34 (measured through MCP: a
serving process 46-56 -> 27 ms per query), the spinning thread taking the core from the query
embedding and the lexical SQL beside it. Two ways to ask, because OpenBLAS reads its variable
only when it loads: :func:`limit_before_numpy` (a server, before anything imports numpy) and
:func:`limit_loaded` (every other process that searches: the CLI in process, a cold hook, the
benchmarks). A person's own thread count is always left alone. This module imports no numpy.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")  # a person's own count

_limited = False


def limit_before_numpy(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set ``OPENBLAS_NUM_THREADS=1`` unless a thread count is set; returns the variables it set.
    Works only before numpy is imported (the variable is read once, when the library loads)."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in THREAD_VARIABLES):
        return []
    environ["OPENBLAS_NUM_THREADS"] = "1"
    return ["OPENBLAS_NUM_THREADS"]


def limit_loaded() -> None:
    """Set an already loaded OpenBLAS to one thread, once per process, through its own
    ``*_set_num_threads`` (found in ``/proc/self/maps``: Linux only). The split changes the last bit
    of a few cosines (199 of 5.5M products in a random test), never a ranking measured."""
    global _limited
    if _limited:
        return
    _limited = True
    if any(os.environ.get(v) for v in THREAD_VARIABLES) or not os.path.exists("/proc/self/maps"):
        return
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            libs = dict.fromkeys(line.split()[-1] for line in maps
                                 if "/" in line and "openblas" in line.rsplit("/", 1)[-1].lower())
        for path in libs:
            lib = ctypes.CDLL(path)
            for name in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                         "openblas_set_num_threads64_", "openblas_set_num_threads"):
                if hasattr(lib, name):
                    getattr(lib, name)(1)
                    break
    except (OSError, ValueError):  # no such library, or one that does not say: keep its default
        return
