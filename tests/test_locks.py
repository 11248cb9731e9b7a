"""The one cross-process lock primitive every writer uses."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from memory_hub.locks import file_lock, is_locked


def _hold(path: str, seconds: float, ready) -> None:  # noqa: ANN001 - a multiprocessing Event
    with file_lock(Path(path)):
        ready.set()
        time.sleep(seconds)


def test_lock_excludes_other_processes_and_is_released(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / "w.lock"
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(str(lock), 1.0, ready))
    holder.start()
    assert ready.wait(10)
    assert is_locked(lock)
    with file_lock(lock, blocking=False) as held:
        assert held is False
    with pytest.raises(TimeoutError), file_lock(lock, timeout=0.1):
        pass
    started = time.monotonic()
    with file_lock(lock, timeout=10) as held:  # waits for the holder to let go
        assert held is True
        assert time.monotonic() - started > 0.3
    holder.join(5)
    assert not is_locked(lock)
    assert lock.exists()  # never unlinked: two holders must always lock the same inode
