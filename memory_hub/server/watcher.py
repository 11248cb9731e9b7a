"""Keep the index fresh while the server runs: file events → debounced ``sync(only=...)``.

watchdog reports created / modified / deleted / moved files; ``opened`` and ``closed`` events
(watchdog 7 emits them on Linux) and anything under a dot-folder or the index folder are ignored.
Events are collected for a quiet period (300 ms) so an editor's save-rename-chmod burst becomes one
sync, then only the named paths are re-indexed. A periodic full rescan catches anything the
watcher missed (events dropped by the OS, changes made while it was not running).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from ..config import SKIP_DIRS, ConfigError
from ..index.store import Store
from ..index.sync import SyncReport, sync
from ..vault.ignore import is_ignored

log = logging.getLogger("memory_hub.watcher")

DEBOUNCE_SECONDS = 0.3
MAX_DELAY_SECONDS = 1.0   # a steady stream of events still syncs at least this often
RESCAN_SECONDS = 60.0
_WANTED = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED}


def relevant_path(vault: Path, raw: str | bytes) -> str | None:
    """The vault-relative path of an event, or None when it is outside the vault's content."""
    path = raw.decode() if isinstance(raw, bytes) else raw
    try:
        rel = Path(path).relative_to(vault)  # watchdog reports paths under the folder it watches
    except ValueError:
        return None
    parts = rel.parts
    if not parts or any(p.startswith(".") or p in SKIP_DIRS for p in parts):
        return None
    try:
        if is_ignored(vault, rel.as_posix()):
            return None
    except ConfigError as exc:  # a settings file mid-edit: index the path, say why once per event
        log.warning("ignore rules not applied: %s", exc)
    return rel.as_posix()


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _WANTED:
            return  # opened, closed, closed_no_write
        vault = self.watcher.vault
        paths = [event.src_path] + ([event.dest_path] if getattr(event, "dest_path", "") else [])
        rels = [r for r in (relevant_path(vault, p) for p in paths) if r is not None]
        if not rels:
            return
        if event.is_directory:
            if event.event_type in (EVENT_TYPE_MOVED, EVENT_TYPE_DELETED):
                self.watcher.request_full()  # every note below moved or vanished
            return
        self.watcher.add(rels)


class Watcher:
    """Watches one vault and re-indexes what changed. ``start()`` / ``stop()``; thread-safe."""

    def __init__(self, vault: Path, store: Store, *, debounce: float = DEBOUNCE_SECONDS,
                 rescan_every: float | None = RESCAN_SECONDS,
                 on_synced: Callable[[SyncReport], None] | None = None) -> None:
        self.vault = Path(vault).resolve()
        self.store = store
        self.debounce = debounce
        self.rescan_every = rescan_every
        self.on_synced = on_synced  # e.g. the server's vector update, run after each lexical sync
        self._pending: set[str] = set()
        self._full = False
        self._first_event = 0.0
        self._last_event = 0.0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._observer = None
        self._thread: threading.Thread | None = None
        self._busy = False
        self.last_report: SyncReport | None = None
        self.last_sync_at: float | None = None
        self.last_error: str | None = None
        self.syncs = 0

    # -- events in ------------------------------------------------------------------------------

    def add(self, rels: list[str]) -> None:
        now = time.monotonic()
        with self._cond:
            if not self._pending and not self._full:
                self._first_event = now
            self._pending.update(rels)
            self._last_event = now
            self._cond.notify()

    def request_full(self) -> None:
        now = time.monotonic()
        with self._cond:
            if not self._pending and not self._full:
                self._first_event = now
            self._full = True
            self._last_event = now
            self._cond.notify()

    @property
    def pending(self) -> int:
        """Changed paths seen but not yet indexed (a full rescan request counts as one)."""
        with self._cond:
            return len(self._pending) + int(self._full) + int(self._busy)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Watcher:
        observer = Observer()
        observer.schedule(_Handler(self), str(self.vault), recursive=True)
        observer.daemon = True
        observer.start()
        self._observer = observer
        self._thread = threading.Thread(target=self._run, name="memory-hub-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return bool(self._thread and self._thread.is_alive() and self._observer and self._observer.is_alive())

    # -- the worker -----------------------------------------------------------------------------

    def _due(self, now: float) -> bool:
        if not (self._pending or self._full):
            return False
        return now - self._last_event >= self.debounce or now - self._first_event >= MAX_DELAY_SECONDS

    def _run(self) -> None:
        next_rescan = time.monotonic() + self.rescan_every if self.rescan_every else float("inf")
        while not self._stop.is_set():
            with self._cond:
                now = time.monotonic()
                while not self._stop.is_set() and not self._due(now) and now < next_rescan:
                    if self._pending or self._full:
                        wait = min(self.debounce - (now - self._last_event),
                                   MAX_DELAY_SECONDS - (now - self._first_event))
                    else:
                        wait = next_rescan - now
                    self._cond.wait(timeout=max(0.01, min(wait, 5.0)))
                    now = time.monotonic()
                if self._stop.is_set():
                    return
                full = self._full or now >= next_rescan
                paths = sorted(self._pending)
                self._pending.clear()
                self._full = False
                self._busy = True
            if full:
                next_rescan = time.monotonic() + self.rescan_every if self.rescan_every else float("inf")
            try:
                self._sync(None if full else paths)
            finally:
                with self._cond:
                    self._busy = False

    def _sync(self, paths: list[str] | None) -> None:
        try:
            report = sync(self.vault, store=self.store, only=paths, progress=False)
        except Exception as exc:  # noqa: BLE001 - the watcher must survive one bad sync and retry
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("watcher sync failed (will retry): %s", self.last_error)
            if paths:
                self.add(paths)
            else:
                self.request_full()
            time.sleep(1.0)
            return
        self.last_report = report
        self.last_sync_at = time.time()
        self.last_error = None
        self.syncs += 1
        if report.changed:
            log.info("reindexed: %s", report.summary())
        if self.on_synced is not None:
            try:
                self.on_synced(report)
            except Exception as exc:  # noqa: BLE001 - vectors lag behind; lexical search stays fresh
                self.last_error = f"after sync: {type(exc).__name__}: {exc}"
                log.warning("post-sync step failed: %s", self.last_error)
