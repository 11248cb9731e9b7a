"""Keep the index fresh while the server runs: file events → debounced ``sync(only=...)``.

watchdog reports created / modified / deleted / moved files; ``opened`` and ``closed`` events
(watchdog 7 emits them on Linux) and anything under a dot-folder or the index folder are ignored.
Events are collected for a quiet period (300 ms) so an editor's save-rename-chmod burst becomes one
sync, then only the named paths are re-indexed. A periodic full rescan catches anything the
watcher missed (events dropped by the OS, changes made while it was not running).

On Linux every watched folder costs one inotify watch, and watches are a per-user budget shared by
every program (``fs.inotify.max_user_watches``; editors and IDEs take thousands). When the vault
has more folders than the budget has room for, the watcher says so (``status`` → ``watcher.mode``
and ``watcher.reason``, and a log line) and falls back to polling: a full stat walk at an interval
that adapts to how long a walk takes, so freshness degrades to seconds instead of silently ending.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from ..config import SKIP_DIRS, ConfigError
from ..index.store import Store
from ..index.sync import SyncReport, sync
from ..vault.ignore import is_ignored
from ..vault.walk import safe_path, walk

log = logging.getLogger("memory_hub.watcher")

DEBOUNCE_SECONDS = 0.3
MAX_DELAY_SECONDS = 1.0   # a steady stream of events still syncs at least this often
RESCAN_SECONDS = 60.0
POLL_SECONDS = 2.0  # the shortest polling interval when file events are unavailable
POLL_COST_SHARE = 0.1  # ...and polling never spends more than this share of the time walking
_WANTED = {EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED, EVENT_TYPE_DELETED, EVENT_TYPE_MOVED}
# ...asked of the kernel, so opens and reads are never reported at all: without this filter every
# file a query opened (LanceDB's data and index files under .memory_hub/, ~12 per hybrid query at
# 100k notes) woke the watchdog thread to decode an event the handler then dropped. Over MCP at 100k
# the query's p50 was the same either way (24-33 ms in four alternating runs each): less work, no
# measured speed.
_EVENT_FILTER = [FileCreatedEvent, FileModifiedEvent, FileDeletedEvent, FileMovedEvent,
                 DirCreatedEvent, DirModifiedEvent, DirDeletedEvent, DirMovedEvent]


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
        self.mode = "events"  # "polling" when the OS cannot deliver file events (see fallback_reason)
        self.fallback_reason: str | None = None
        self._poll_every = POLL_SECONDS
        self.failed: dict[str, str] = {}  # path -> why it could not be indexed, until the file changes
        self._failed_stat: dict[str, tuple[int, int] | None] = {}

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
        observer.schedule(_Handler(self), str(self.vault), recursive=True, event_filter=_EVENT_FILTER)
        observer.daemon = True
        before = inotify_watch_count()
        try:
            observer.start()
            self._expect_watches(before)
        except OSError as exc:
            self._fall_back(exc)
            try:
                observer.stop()
            except Exception:  # noqa: BLE001 - a half-started observer; its watches die with it
                pass
        else:
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
        if self.mode == "polling":
            return bool(self._thread and self._thread.is_alive())
        return bool(self._thread and self._thread.is_alive() and self._observer and self._observer.is_alive())

    def _fall_back(self, exc: BaseException) -> None:
        """No file events (the inotify budget is spent, or the OS refused): poll, and say why."""
        self.mode = "polling"
        self.fallback_reason = explain_event_failure(self.vault, exc)
        self._observer = None
        log.warning("watcher: %s", self.fallback_reason)

    def _expect_watches(self, before: int | None) -> None:
        """watchdog skips a sub-folder it cannot watch without a word (7.x catches the ENOSPC), so
        count the kernel's watches: fewer than the vault's folders means the budget ran out."""
        after = inotify_watch_count()
        if before is None or after is None:
            return  # not inotify (macOS, Windows) or not Linux's /proc
        needed = count_folders(self.vault)
        if after - before < needed:
            raise OSError(errno.ENOSPC, f"only {after - before} of {needed} folders could be watched")

    def _check_events(self) -> None:
        """A watch added later (a new folder) can hit the limit too: the event thread then dies."""
        if self.mode == "events" and self._observer is not None and not self._observer.is_alive():
            self._fall_back(OSError(errno.ENOSPC, "the file-event thread stopped"))

    # -- the worker -----------------------------------------------------------------------------

    def _due(self, now: float) -> bool:
        if not (self._pending or self._full):
            return False
        return now - self._last_event >= self.debounce or now - self._first_event >= MAX_DELAY_SECONDS

    def _rescan_interval(self) -> float | None:
        return self._poll_every if self.mode == "polling" else self.rescan_every

    def _run(self) -> None:
        every = self._rescan_interval()
        next_rescan = time.monotonic() + every if every else float("inf")
        while not self._stop.is_set():
            self._check_events()
            if self.mode == "polling":
                next_rescan = min(next_rescan, time.monotonic() + self._poll_every)
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
                    if self.mode == "events" and self._observer is not None and not self._observer.is_alive():
                        break  # the event thread died: switch to polling now (outer loop)
                if self._stop.is_set():
                    return
                full = self._full or now >= next_rescan
                paths = sorted(self._pending)
                self._pending.clear()
                self._full = False
                self._busy = True
            try:
                self._sync(None if full else paths)
            except Exception as exc:  # noqa: BLE001 - never let the worker thread die
                log.exception("watcher: unexpected error: %s", exc)
            finally:
                with self._cond:
                    self._busy = False
            if full:
                # polling: a walk of a 100k-note vault takes about a second; keep it a small share
                took = self.last_report.seconds if self.last_report is not None else 0.0
                self._poll_every = min(max(POLL_SECONDS, took / POLL_COST_SHARE), RESCAN_SECONDS)
                every = self._rescan_interval()
                next_rescan = time.monotonic() + every if every else float("inf")

    def _sync(self, paths: list[str] | None) -> None:
        if paths is None and self.failed:
            paths = self._changed_paths()  # a full sync would only trip over the same file again
        if paths is not None:
            paths = [p for p in paths if not self._still_failing(p)]
        try:
            report = sync(self.vault, store=self.store, only=paths, progress=False)
        except Exception as exc:  # noqa: BLE001 - find the file at fault, index the rest
            report = self._isolate(paths, exc)
            if report is None:
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

    # -- one bad file must not stop the others ---------------------------------------------------

    def _isolate(self, paths: list[str] | None, exc: Exception) -> SyncReport | None:
        """After a failed sync: the report of syncing every file but the ones at fault, or None
        (and a retry queued) when the failure is not any one file's."""
        try:
            sync(self.vault, store=self.store, only=[], progress=False)  # can the index be written at all?
        except Exception as probe:  # noqa: BLE001
            self.last_error = f"{type(probe).__name__}: {probe}"
            log.warning("watcher sync failed (will retry): %s", self.last_error)
            if paths:
                self.add(paths)
            else:
                self.request_full()
            time.sleep(1.0)
            return None
        todo = self._changed_paths() if paths is None else paths
        todo = [p for p in todo if not self._still_failing(p)]
        report = SyncReport()
        self._bisect(todo, report, exc if paths is not None and len(todo) == 1 else None)
        return report

    def _bisect(self, paths: list[str], report: SyncReport, known: Exception | None = None) -> None:
        if not paths:
            return
        if known is None:
            try:
                part = sync(self.vault, store=self.store, only=paths, progress=False)
            except Exception as exc:  # noqa: BLE001
                known = exc
            else:
                _merge(report, part)
                return
        if len(paths) == 1:
            self._record_failure(paths[0], known)
            return
        half = len(paths) // 2
        self._bisect(paths[:half], report)
        self._bisect(paths[half:], report)

    def _record_failure(self, path: str, exc: BaseException) -> None:
        reason = f"could not be indexed: {type(exc).__name__}: {exc}"[:500]
        self.failed[path] = reason
        self._failed_stat[path] = self._stat_key(path)
        log.warning("%s %s; skipped until it changes (the watcher carries on)", path, reason)
        try:
            with self.store.transaction() as conn:
                conn.execute("DELETE FROM problems WHERE path = ?", (path,))
                conn.execute("INSERT INTO problems(path, problem, at) VALUES (?, ?, ?)", (path, reason, time.time()))
        except Exception as err:  # noqa: BLE001 - the in-memory record still keeps it out of the way
            log.warning("could not record the problem of %s: %s", path, err)

    def _still_failing(self, path: str) -> bool:
        """Whether ``path`` failed before and has not changed since (a changed file is tried again)."""
        if path not in self.failed:
            return False
        if self._stat_key(path) == self._failed_stat.get(path):
            return True
        self.failed.pop(path, None)
        self._failed_stat.pop(path, None)
        return False

    def _stat_key(self, path: str) -> tuple[int, int] | None:
        try:
            st = os.stat(safe_path(self.vault, path))
        except (OSError, ValueError):
            return None
        return st.st_mtime_ns, st.st_size

    def _changed_paths(self) -> list[str]:
        """What a full sync would look at: files whose stat differs from the index, and vanished ones."""
        known = {r[0]: (int(r[1]), int(r[2])) for r in self.store.conn.execute("SELECT path, mtime_ns, size FROM notes")}
        out, seen = [], set()
        for st in walk(self.vault):
            seen.add(st.path)
            if known.get(st.path) != (st.mtime_ns, st.size):
                out.append(st.path)
        out.extend(p for p in known if p not in seen)
        return out


def _merge(into: SyncReport, part: SyncReport) -> None:
    into.added += part.added
    into.updated += part.updated
    into.deleted += part.deleted
    into.renamed += part.renamed
    into.unchanged += part.unchanged
    into.skipped += part.skipped
    into.problems += part.problems
    into.links_resolved += part.links_resolved
    into.seconds += part.seconds


def inotify_limits() -> dict[str, int]:
    """The inotify budget of this user (Linux; the tighter of the system's and this user
    namespace's); {} elsewhere."""
    out: dict[str, int] = {}
    for key, paths in (("max_user_watches", ("/proc/sys/fs/inotify/max_user_watches",
                                             "/proc/sys/user/max_inotify_watches")),
                       ("max_user_instances", ("/proc/sys/fs/inotify/max_user_instances",
                                               "/proc/sys/user/max_inotify_instances"))):
        for path in paths:
            try:
                value = int(open(path, encoding="ascii").read().strip())
            except (OSError, ValueError):
                continue
            out[key] = min(out.get(key, value), value)
    return out


def count_folders(vault: Path) -> int:
    """Folders a recursive watch of the vault needs, counted as watchdog walks them (dot-folders
    such as .git included, symlinked folders not)."""
    n = 1
    for root, dirs, _files in os.walk(vault):
        n += sum(1 for d in dirs if not os.path.islink(os.path.join(root, d)))
    return n


def inotify_watch_count() -> int | None:
    """Inotify watches this process holds (from /proc/self/fdinfo); None without inotify/procfs."""
    total = None
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
                total = (total or 0) + sum(1 for line in fh if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


def explain_event_failure(vault: Path, exc: BaseException) -> str:
    """Why there are no file events, and what to do about it, in one sentence a person can act on."""
    limits = inotify_limits()
    code = getattr(exc, "errno", None)
    if code == errno.ENOSPC:
        watches = limits.get("max_user_watches")
        detail = f"; {exc.strerror}" if getattr(exc, "strerror", "") not in ("", None, "inotify watch limit reached") \
            else ""
        return (f"file events unavailable: the inotify watch limit was reached (the vault has "
                f"{count_folders(vault):,} folders{detail}; fs.inotify.max_user_watches is "
                f"{watches if watches is not None else 'unknown'}, shared by every program of this user); "
                "changes are found by polling instead (a stat walk every few seconds). To watch live, raise "
                "it: `sudo sysctl fs.inotify.max_user_watches=524288` (and put that line in /etc/sysctl.d/)")
    if code == errno.EMFILE:
        return (f"file events unavailable: the inotify instance limit was reached "
                f"(fs.inotify.max_user_instances is {limits.get('max_user_instances', 'unknown')}); changes are "
                "found by polling instead. To watch live, raise it: `sudo sysctl fs.inotify.max_user_instances=1024`")
    return f"file events unavailable ({type(exc).__name__}: {exc}); changes are found by polling instead"
