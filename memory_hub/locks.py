"""Cross-process file locks: one small primitive for every writer that must take turns.

Advisory ``flock`` on a lock file next to what it protects. The lock file is never deleted:
unlinking it would let two processes lock two different inodes and both believe they hold it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def file_lock(path: Path, *, blocking: bool = True, timeout: float | None = None) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (created if missing) for the ``with`` block.

    Yields True when the lock is held. With ``blocking=False`` it yields False at once if another
    process holds it; with ``timeout`` it waits at most that long, then raises TimeoutError.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        held = _acquire(fd, blocking, timeout, path)
        try:
            yield held
        finally:
            if held:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, blocking: bool, timeout: float | None, path: Path) -> bool:
    if blocking and timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + (timeout or 0.0)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if not blocking:
                return False
            if time.monotonic() > deadline:
                raise TimeoutError(f"another process has held {path.name} for more than {timeout:.0f}s") from None
            time.sleep(0.02)


def is_locked(path: Path) -> bool:
    """Whether another process holds the lock on ``path`` right now."""
    if not Path(path).exists():
        return False
    with file_lock(path, blocking=False) as held:
        return not held
