"""The server holds glibc's mmap threshold, so large freed buffers go back to the system."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from memory_hub.server import allocator

# In a fresh interpreter: free a 1 MiB block that glibc served by mmap (which raises its threshold
# to 1 MiB unless it is held), then allocate 512 KiB and see whether that one was mmapped too.
PROBE = textwrap.dedent("""
    import ctypes, sys
    from memory_hub.server import allocator
    held = allocator.hold_mmap_threshold() if sys.argv[1] == "hold" else False
    libc = ctypes.CDLL(None)

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]

    libc.mallinfo2.restype = Info
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    big = libc.malloc(1 << 20)
    libc.free(big)
    before = libc.mallinfo2().hblks
    block = libc.malloc(512 << 10)
    print(held, libc.mallinfo2().hblks - before)
    libc.free(block)
""")


def _probe(mode: str, **env: str) -> tuple[str, int]:
    environ = {k: v for k, v in os.environ.items() if k != allocator.VARIABLE}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env={**environ, **env}).stdout.split()
    return out[0], int(out[1])


def _has_mallinfo2() -> bool:
    import ctypes

    return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "mallinfo2")


glibc = pytest.mark.skipif(not _has_mallinfo2(), reason="glibc's mallinfo2 is needed to see where a block came from")


@glibc
def test_a_freed_large_block_no_longer_raises_the_threshold() -> None:
    held, mapped = _probe("plain")
    assert (held, mapped) == ("False", 0)  # glibc raised its threshold: 512 KiB came from an arena
    held, mapped = _probe("hold")
    assert (held, mapped) == ("True", 1)  # held at 128 KiB: its own mmap, returned when freed


@glibc
def test_a_threshold_the_person_set_is_left_alone() -> None:
    held, _ = _probe("hold", MALLOC_MMAP_THRESHOLD_="1048576")
    assert held == "False"
