"""What a running server holds between calls: the vault, its index, the searcher and the watcher.

One ``ServerState`` per process. The MCP tools, the watcher and the local socket for agent hooks
(``server/local_socket.py``) all share it, so the index stays open and models stay warm.

Start-up must be fast (clients such as Codex give a server 10 s) and an idle server small, so
nothing heavy happens until it is needed: the first search calls :meth:`ServerState.ensure_warm`,
which loads the models in a background thread (that search, and any until the models are ready,
runs lexically and says so). ``models_ready`` is a plain ``threading.Event`` that anyone may read
without a lock.

The index is a cache a person may delete at any time (``rm -rf .memory_hub``) or rebuild from the
CLI. SQLite would go on writing to the unlinked file, so :meth:`ServerState.check_index` compares
the index file's device and inode with the one opened (one ``stat``, run before every tool call and
hook request and every few seconds) and, when they differ, opens the new or recreated index and
re-indexes the vault; until that finishes, answers say the index is being rebuilt.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..index.lexical import Filters
from ..index.store import Store

log = logging.getLogger("memory_hub.server")


class SearcherLike(Protocol):
    """What the server needs from the retrieval layer (``retrieval.searcher.Searcher``)."""

    def search(self, query: str, k: int = 10, filters: Filters | None = None, mode: str = ...,
               explain: bool = False) -> Any: ...

    def warm(self, search: bool = False) -> Any: ...


def make_searcher(vault: Path, store: Store) -> SearcherLike:
    """The long-lived retrieval searcher (imported on first use: start-up stays fast)."""
    from ..config import settings
    from ..retrieval.searcher import Searcher

    return Searcher(vault, store=store, mode=settings(vault)["search.mode"])


@dataclass
class ServerState:
    """Everything a serving process keeps open. Safe to share across threads."""

    vault: Path
    store: Store
    _searcher: SearcherLike | None = None
    started_at: float = field(default_factory=time.time)
    started_monotonic: float = field(default_factory=time.monotonic)
    watcher: Any = None  # server.watcher.Watcher, when running
    models_ready: threading.Event = field(default_factory=threading.Event)
    models_error: str | None = None
    ready_seconds: float | None = None  # time from start to warm models
    extras: dict[str, Any] = field(default_factory=dict)  # other stages may park long-lived objects here
    _vector_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _searcher_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _warm_thread: threading.Thread | None = field(default=None, repr=False)
    _warm_search: bool = field(default=False, repr=False)
    index_problem: str | None = None  # the index was deleted and could not be recreated
    index_reopened: int = 0  # times the index was found deleted or replaced and reopened
    _index_id: tuple[int, int] | None = field(default=None, repr=False)
    _index_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _rebuild_vectors: bool = field(default=False, repr=False)
    # the ANN index's upkeep, run apart from the watcher (``sync_vectors``): what it last did
    ann_upkeep: dict[str, Any] = field(default_factory=dict)
    _ann_thread: threading.Thread | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._index_id = _identity(self.store.path)

    @property
    def searcher(self) -> SearcherLike:
        """The retrieval searcher, created on first use (importing it costs start-up time)."""
        if self._searcher is None:
            with self._searcher_lock:
                if self._searcher is None:
                    self._searcher = make_searcher(self.vault, self.store)
        return self._searcher

    @classmethod
    def open(cls, vault: Path) -> ServerState:
        """Open a vault's index without loading any model (the searcher comes on first use)."""
        vault = Path(vault).resolve()
        return cls(vault=vault, store=Store(vault))

    def warm_in_background(self) -> threading.Thread:
        """Load models in a daemon thread; ``models_ready`` is set when done (or when it failed)."""
        thread = threading.Thread(target=self._warm, name="memory-hub-warm", daemon=True)
        thread.start()
        return thread

    def ensure_warm(self, search: bool = False) -> None:
        """Start loading the models in the background on first need (idempotent, never blocks);
        ``search``: the warm-up also runs one whole search (``server.warm_at_start``)."""
        if self.models_ready.is_set() or self._warm_thread is not None:
            return
        with self._searcher_lock:
            if self._warm_thread is None and not self.models_ready.is_set():
                self._warm_search = search
                self._warm_thread = self.warm_in_background()

    def _warm(self) -> None:
        try:
            self.searcher.warm(search=self._warm_search)
        except Exception as exc:  # noqa: BLE001 - a missing model degrades search, it must not kill the server
            self.models_error = f"{type(exc).__name__}: {exc}"
            log.warning("models could not be loaded; search stays lexical: %s", self.models_error)
        finally:
            self.ready_seconds = time.monotonic() - self.started_monotonic
            self.models_ready.set()
        try:
            self.sync_vectors()  # catch up on notes changed while no server was running
        except Exception as exc:  # noqa: BLE001
            log.warning("vector catch-up failed: %s", exc)

    def search(self, query: str, k: int = 10, filters: Filters | None = None, mode: str | None = None,
               explain: bool = False) -> Any:
        """Search through the shared searcher (``retrieval.search.SearchResult``).

        Until the models are warm, a search that names no mode runs lexically instead of waiting
        for the embedder to load in the caller's thread; the result says so."""
        self.ensure_warm()
        kwargs: dict[str, Any] = {"k": k, "filters": filters, "explain": explain}
        fallback = None
        if mode:
            kwargs["mode"] = mode
        elif not self.models_ready.is_set() or self.models_error:
            kwargs["mode"] = "lexical"
            fallback = ("models are still loading" if not self.models_ready.is_set()
                        else f"models unavailable ({self.models_error})")
        result = self.searcher.search(query, **kwargs)
        if fallback and hasattr(result, "warnings"):
            result.warnings.append(f"{fallback}: lexical results only")
        if not hasattr(result, "mode"):
            try:
                result.mode = kwargs.get("mode") or getattr(self.searcher, "mode", None)
            except AttributeError:
                pass
        return result

    def vectors_enabled(self) -> bool:
        """Whether this vault has vectors the searcher can keep up to date (never loads a model)."""
        if not hasattr(self.searcher, "sync_vectors"):
            return False
        if self._rebuild_vectors:
            return True  # they were deleted with the index: the next vector sync embeds them again
        return _has_vectors(self.store)

    def sync_vectors(self, report: Any = None) -> Any:
        """Embed notes whose vectors are missing or stale, once models are warm and vectors exist.

        Called by the watcher after each lexical sync; before the models are ready it does nothing
        (the warm-up's own first search, or the next change, catches up). First, on this same
        thread, it reads what the next search would otherwise read first (the link graph, vault-wide
        counts: ~0.4 s at 30k notes with the vectors' coverage): after a sync that changed notes,
        and after one that changed nothing too, since the start-up catch-up finds the caches of a new
        process empty (a stamp read each when they are warm). Before the vector sync, which may embed
        for minutes: the lexical caches do not wait for it. The coverage is counted after it, outside
        the vector lock, which only keeps two vector syncs from running at once."""
        from ..retrieval.search import warm_caches  # here: importing search costs start-up time

        warm_caches(self.store)
        if report is not None and not getattr(report, "changed", True):
            return None
        out = None
        if self.models_ready.is_set() and not self.models_error and self.vectors_enabled():
            with self._vector_lock:
                out = self.searcher.sync_vectors(progress=False, changes=report, defer_ann=True)
            self._rebuild_vectors = False
            self.searcher.vectors.notes_covered(self.store)  # every search asks: count it now
            if getattr(out, "ann_due", None):
                self.start_ann_upkeep(out.ann_due)
        return out

    def start_ann_upkeep(self, due: dict[str, Any]) -> threading.Thread | None:
        """Train the ANN index again on a thread of its own (``VectorIndex.maintain_ann``): ~15 s at
        100k notes, which the watcher would otherwise spend before its next sync. Meanwhile searches
        use the index as it is plus the new rows scanned flat, and a vector sync waits for the
        upkeep's write lock; lexical syncs do not. One upkeep at a time; what it did, or why it
        failed, is in ``status`` (``vectors.ann_upkeep``) and the log."""
        with self._vector_lock:
            if self._ann_thread is not None and self._ann_thread.is_alive():
                return None
            self.ann_upkeep = {"state": "running", "due": due, "started_at": time.time()}
            self._ann_thread = threading.Thread(target=self._run_ann_upkeep, name="memory-hub-ann-upkeep",
                                                daemon=True)
            self._ann_thread.start()
            return self._ann_thread

    def _run_ann_upkeep(self) -> None:
        from ..index.vectors import ann_summary

        started = time.monotonic()
        try:
            done = self.searcher.vectors.maintain_ann(self.store)
        except Exception as exc:  # noqa: BLE001 - the next sync that finds it due tries again
            self.ann_upkeep = {**self.ann_upkeep, "state": "failed", "error": f"{type(exc).__name__}: {exc}",
                               "seconds": round(time.monotonic() - started, 2)}
            log.warning("ANN index upkeep failed (the next sync tries again): %s", self.ann_upkeep["error"])
            return
        self.ann_upkeep = {**self.ann_upkeep, "state": "done", "seconds": round(time.monotonic() - started, 2),
                           "done": done}
        if done:
            log.info("%s (in the background)", ann_summary(done))

    # -- an index deleted or replaced under the running server ---------------------------------

    def check_index(self) -> bool:
        """True when the index file is still the one the server opened; else reopen it first.

        Cheap enough for every request (one stat). A deleted index is recreated empty and the
        vault re-indexed in the background (the watcher's full rescan, else a sync thread); an
        index replaced by ``memory-hub index --rebuild`` is opened as it is and caught up."""
        if self.index_problem is None and _identity(self.store.path) == self._index_id:
            return True
        with self._index_lock:
            if self.index_problem is None and _identity(self.store.path) == self._index_id:
                return True  # another thread reopened it meanwhile
            return self._reopen_index()

    def _reopen_index(self) -> bool:
        old = self.store
        try:
            had_vectors = _has_vectors(old)  # the old connection still reads the unlinked file
        except Exception:  # noqa: BLE001
            had_vectors = False
        try:
            store = Store(self.vault)
        except Exception as exc:  # noqa: BLE001 - reported on every answer until it can be recreated
            problem = f"the index {old.path} was deleted and cannot be recreated: {type(exc).__name__}: {exc}"
            if problem != self.index_problem:
                log.warning("%s", problem)
            self.index_problem = problem
            return False
        self.store = store
        old.close()  # this thread's connection; the others' go with the old Store (see run.py)
        self._index_id = _identity(store.path)
        self.index_problem = None
        self.index_reopened += 1
        self._rebuild_vectors = self._rebuild_vectors or (had_vectors and not _has_vectors(store))
        if self._searcher is not None and hasattr(self._searcher, "reopen"):
            self._searcher.reopen(store)
        log.warning("the index %s was deleted or replaced under the server; reopened it, re-indexing the vault",
                    store.path)
        watcher = self.watcher
        if watcher is not None:
            watcher.store = store
            watcher.request_full()
        else:
            threading.Thread(target=self._resync, args=(store,), name="memory-hub-reindex", daemon=True).start()
        return True

    def _resync(self, store: Store) -> None:
        from ..index.sync import sync

        try:
            report = sync(self.vault, store=store, progress=False)
            self.sync_vectors(report)
        except Exception as exc:  # noqa: BLE001 - the next check or `memory-hub sync` tries again
            log.warning("re-indexing after the index was deleted failed: %s", exc)

    def index_health(self) -> dict[str, Any]:
        """What ``status`` and every answer say about the index itself (empty when all is well)."""
        if self.index_problem:
            return {"index_problem": self.index_problem}
        if self.index_reopened:
            return {"index_reopened": self.index_reopened}
        return {}

    def pending_changes(self) -> int:
        """Changes on disk the index has not seen yet (a stat walk; cheap on vaults of thousands)."""
        from ..eval.health import pending_changes

        return pending_changes(self.store)

    def uptime(self) -> float:
        return time.monotonic() - self.started_monotonic


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of a file, None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _has_vectors(store: Store) -> bool:
    try:
        from ..retrieval.search import has_vectors
    except ImportError:
        return False
    return bool(has_vectors(store))
