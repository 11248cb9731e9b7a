"""Bring the index up to date with the vault: stat walk → diff → apply.

The same code serves ``memory-hub index``, the watcher, the git post-commit hook and the server.
A file is re-read only when its mtime or size changed, and re-indexed only when its content hash
changed. Each note's update is one transaction, so a crash or Ctrl-C leaves a consistent index that
the next run simply completes. Renames are detected by content hash and keep the note's id.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import os
import sqlite3
import stat as stat_module
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..progress import Progress
from ..vault.notes import ATTACHMENT, PARSE_VERSION, Note, parse_note
from ..vault.walk import (
    FileStat,
    OutsideVault,
    Skipped,
    UnreadableNote,
    content_hash,
    decode_note,
    read_note_bytes,
    safe_path,
    stat_map,
)
from . import describe, graph, lexical, usage
from .cache import LINKS_RESOLVED, NOTES_CHANGED
from .store import Store, reset

log = logging.getLogger(__name__)

# Hooks other index stages (vectors, recall) register to hear about changed notes.
ChangeListener = Callable[[Store, "SyncReport"], None]
# A later stage's work on each note a sync parses, so it need not read and parse the files again
# (recall's own index, ``retrieval/recall_index.py``): ``derive(path, note)`` runs where the note
# was parsed (a module-level function: worker processes get it by name) and ``take(stat, value)``
# in the syncing process, for each note written. The stat is the file's as the walk saw it.
NoteHook = tuple[Callable[[str, Note], Any], Callable[["FileStat", Any], None]]


@dataclass
class SyncReport:
    """What a sync did. Paths are vault-relative."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    # notes re-read although their file did not change, because the note parser did (PARSE_VERSION)
    reparsed: list[str] = field(default_factory=list)
    descriptions_changed: int = 0  # notes whose shown description changed (index/describe.py)
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # indexed, but with a problem
    links_resolved: int = 0
    usage_events: int = 0  # usage events folded from the logs by this sync
    # NOTES_CHANGED before and after this sync, read under the writer lock: the notes at ``notes_after``
    # differ from those at ``notes_before`` only by this report's paths (and, unless
    # ``descriptions_local``, by descriptions chosen again anywhere): what the vectors need to look at
    notes_before: str = ""
    notes_after: str = ""
    descriptions_local: bool = True  # descriptions were chosen again only for this report's notes
    seconds: float = 0.0
    interrupted: bool = False
    # A full sync given a ``note_hook``: the walk its notes were taken from ({path: (mtime_ns, size)}),
    # so the hook's owner (recall's index) finishes from it instead of walking the vault again
    walked: dict[str, tuple[int, int]] | None = field(default=None, repr=False, compare=False)

    def paths(self) -> list[str]:
        """Every path whose note this sync wrote or removed (both sides of a rename)."""
        moved = [p for pair in self.renamed for p in pair]
        return sorted({*self.added, *self.updated, *self.deleted, *self.reparsed, *moved})

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted or self.renamed or self.reparsed
                    or self.descriptions_changed)

    def as_dict(self) -> dict[str, object]:
        return {
            "added": self.added,
            "updated": self.updated,
            "deleted": self.deleted,
            "renamed": [list(r) for r in self.renamed],
            "reparsed": len(self.reparsed),
            "descriptions_changed": self.descriptions_changed,
            "unchanged": self.unchanged,
            "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
            "problems": [{"path": p, "problem": m} for p, m in self.problems],
            "links_resolved": self.links_resolved,
            "usage_events": self.usage_events,
            "seconds": round(self.seconds, 3),
            "interrupted": self.interrupted,
        }

    def summary(self) -> str:
        parts = [f"{len(self.added)} added", f"{len(self.updated)} updated", f"{len(self.deleted)} deleted",
                 f"{len(self.renamed)} renamed", f"{self.unchanged} unchanged"]
        if self.reparsed:
            parts.append(f"{len(self.reparsed)} re-read (the note parser changed)")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.problems:
            parts.append(f"{len(self.problems)} with problems")
        return ", ".join(parts) + f" in {self.seconds:.2f}s" + (" (interrupted)" if self.interrupted else "")


_listeners: list[ChangeListener] = []


def on_change(listener: ChangeListener) -> ChangeListener:
    """Register a callback run after every sync that changed something (used by later stages)."""
    if listener not in _listeners:
        _listeners.append(listener)
    return listener


# A file modified this recently may be modified again within the same mtime tick and size, which
# a stat comparison could not see ("racy" files, as git calls them). Such files are stored with
# mtime 0, so the next sync re-hashes them instead of trusting the stat.
RACY_WINDOW_NS = 2_000_000_000


def _trusted(stat: FileStat) -> FileStat:
    if time.time_ns() - stat.mtime_ns < RACY_WINDOW_NS:
        return FileStat(stat.path, 0, stat.size)
    return stat


def _stat_named(vault: Path, rel: str) -> FileStat | None:
    """One named file as ``walk`` would yield it, or None (gone, not a file, hidden, outside the vault)."""
    try:
        full = safe_path(vault, rel)
        st = os.stat(full)
    except (OutsideVault, OSError):
        return None
    return FileStat(rel, st.st_mtime_ns, st.st_size) if stat_module.S_ISREG(st.st_mode) else None


def _attachment_note(stat: FileStat) -> Note:
    name = stat.path.rsplit("/", 1)[-1]
    return Note(path=stat.path, title=name, description="", kind=ATTACHMENT)


def _paths_changed(store: Store, conn: sqlite3.Connection) -> None:
    """A note's path or aliases changed: every link needs resolving again, and resolvers kept by
    any process (``graph.build_resolver``) are stale."""
    store.set_meta(conn, "links_dirty", "1")
    store.set_meta(conn, graph.PATHS_STAMP, f"{os.getpid()}:{time.time_ns()}")


def _upsert(store: Store, conn: sqlite3.Connection, note: Note, stat: FileStat, digest: str,
            resolver: graph.Resolver | Callable[[], graph.Resolver] | None, old_path: str | None = None,
            rows: lexical.Rows | None = None, reuse_links: bool = False, staged: bool = False) -> int:
    """Write one note (row, lexical rows, links, problems) inside the caller's transaction.
    ``staged``: a new note's lexical rows wait for the descriptions (``lexical.stage_note``); a
    note already indexed is rewritten in place, so it stays searchable while a bulk sync runs."""
    stat = _trusted(stat)
    row = conn.execute("SELECT id, aliases FROM notes WHERE path = ?", (old_path or note.path,)).fetchone()
    aliases = json.dumps(note.aliases, ensure_ascii=False)
    # Other notes' links only need re-resolving when the set of paths or aliases changed.
    dirty = row is None or old_path is not None or row[1] != aliases
    values = (
        note.path, note.title, note.description, note.kind, note.scope,
        json.dumps(note.tags, ensure_ascii=False), aliases,
        json.dumps(note.dates, ensure_ascii=False), json.dumps(note.frontmatter, ensure_ascii=False, default=str),
        int(note.ranked), json.dumps(note.leads, ensure_ascii=False), stat.mtime_ns, stat.size, digest,
        time.time(),
    )
    if row:
        note_id = int(row[0])
        conn.execute(
            "UPDATE notes SET path=?, title=?, description=?, kind=?, scope=?, tags=?, aliases=?, dates=?,"
            " frontmatter=?, ranked=?, leads=?, mtime_ns=?, size=?, hash=?, indexed_at=? WHERE id=?",
            (*values, note_id),
        )
    else:
        cur = conn.execute(
            "INSERT INTO notes(path, title, description, kind, scope, tags, aliases, dates, frontmatter,"
            " ranked, leads, mtime_ns, size, hash, indexed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            values,
        )
        note_id = int(cur.lastrowid)
    (lexical.stage_note if staged and row is None else lexical.write_note)(conn, note_id, note, rows)
    # an edit in place keeps the targets of the links it already had (nothing they point to moved)
    graph.write_links(conn, note_id, note.path, note.links, resolver, reuse=reuse_links and row is not None
                      and old_path is None)
    conn.execute("DELETE FROM problems WHERE path IN (?, ?)", (note.path, old_path or note.path))
    for problem in note.problems:
        conn.execute("INSERT INTO problems(path, problem, at) VALUES (?, ?, ?)", (note.path, problem, time.time()))
    if dirty:
        _paths_changed(store, conn)
    return note_id


def _delete(store: Store, conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
    if row:
        lexical.delete_note(conn, int(row[0]))
        conn.execute("DELETE FROM links WHERE source_id = ?", (int(row[0]),))
        graph.links_changed(conn)  # its links, and the links to it (they dangle until re-resolved)
        conn.execute("DELETE FROM notes WHERE id = ?", (int(row[0]),))
    conn.execute("DELETE FROM problems WHERE path = ?", (path,))
    _paths_changed(store, conn)


def _record_skip(conn: sqlite3.Connection, skip: Skipped, stat: FileStat | None = None) -> None:
    seen = _trusted(stat) if stat is not None else None
    conn.execute("DELETE FROM problems WHERE path = ?", (skip.path,))
    conn.execute("INSERT INTO problems(path, problem, at, mtime_ns, size) VALUES (?, ?, ?, ?, ?)",
                 (skip.path, skip.reason, time.time(), seen.mtime_ns if seen else None, seen.size if seen else None))


def skipped_as_seen(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
    """{path: (mtime_ns, size)} of files skipped unread (binary, too large…) as they were then:
    while they stay so they are neither re-read nor a pending change."""
    rows = conn.execute("SELECT path, mtime_ns, size FROM problems WHERE mtime_ns IS NOT NULL AND mtime_ns != 0"
                        " AND path NOT IN (SELECT path FROM notes)")
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


def _skip(store: Store, conn: sqlite3.Connection, report: SyncReport, known: dict, skip: Skipped,
          stat: FileStat | None = None) -> None:
    """A file that cannot be indexed: reported, recorded as a problem (with the stat it was seen
    at, so ``status`` does not count it as a pending change until it changes), dropped if indexed."""
    report.skipped.append(skip)
    print(f"warning: {skip.path}: {skip.reason}", file=sys.stderr)
    _record_skip(conn, skip, stat)
    if skip.path in known:
        _delete(store, conn, skip.path)
        report.deleted.append(skip.path)


# A bulk sync commits notes in groups: one transaction per note made FTS5 write (and later merge)
# a segment per note, and cost a cold index of obsidian-hub ~4x its CPU time in commits alone.
# A crash or Ctrl-C still leaves a consistent index: a group lands whole or not at all.
BATCH_NOTES = 250
BATCH_SECONDS = 0.5  # readers (the server) see a long sync's progress at least this often
# meta: "1" from a batch's first write until descriptions are chosen again (a sync stopped between
# them leaves it, and the next one chooses every note's description, not only its own notes')
DESCRIPTIONS_PENDING = "descriptions_pending"


FLUSH_ROWS = 5000  # staged lexical rows moved into FTS per transaction (bounds the WAL's growth)


@contextlib.contextmanager
def _bulk_pragmas(conn: sqlite3.Connection, on: bool) -> Iterator[None]:
    """synchronous=OFF and a 256 MB page cache while a bulk sync writes, then back as they were."""
    if not on:
        yield
        return
    sync_mode = conn.execute("PRAGMA synchronous").fetchone()[0]
    pages = conn.execute("PRAGMA cache_size").fetchone()[0]
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -262144")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA synchronous = {int(sync_mode)}")
        conn.execute(f"PRAGMA cache_size = {int(pages)}")


class _Batch:
    """Write transactions of up to BATCH_NOTES notes (or BATCH_SECONDS) each."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._open: object = None
        self._conn: sqlite3.Connection | None = None
        self._count = 0
        self._since = 0.0

    def conn(self) -> sqlite3.Connection:
        """The open transaction's connection (one is begun on first use)."""
        if self._conn is None:
            self._open = self.store.transaction()
            self._conn = self._open.__enter__()  # type: ignore[attr-defined]
            self._since = time.monotonic()
            self.store.set_meta(self._conn, NOTES_CHANGED, f"{time.time():.6f}")
            self.store.set_meta(self._conn, DESCRIPTIONS_PENDING, "1")
        return self._conn

    def wrote(self) -> None:
        """One note written: commit when the group is full."""
        self._count += 1
        if self._count >= BATCH_NOTES or time.monotonic() - self._since >= BATCH_SECONDS:
            self.commit()

    def commit(self) -> None:
        self._close(None, None, None)

    def _close(self, *exc: object) -> None:
        if self._conn is not None:
            cm, self._open, self._conn, self._count = self._open, None, None, 0
            cm.__exit__(*exc)  # type: ignore[attr-defined]  # COMMIT, or ROLLBACK on an exception

    def __enter__(self) -> _Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close(*exc)


@dataclass
class _Read:
    """One file read by ``_read``: its hash and parsed note, or why it could not be read."""

    stat: FileStat
    digest: str = ""
    note: Note | None = None
    rows: lexical.Rows | None = None  # the note's lexical rows, made where it was parsed
    derived: Any = None  # a NoteHook's ``derive`` of the note, made where it was parsed
    error: str | None = None
    error_in_content: bool = False  # the file itself is the problem (binary, unparseable…), not its access


def _read(vault: Path, stat: FileStat, old_hash: str | None,
          derive: Callable[[str, Note], Any] | None = None) -> _Read:
    """Read and hash one note; parse it only when its content changed. Runs in worker processes
    during big syncs, so it touches no index state."""
    try:
        data = read_note_bytes(vault, stat.path)
        text = decode_note(data)
    except (UnreadableNote, OSError) as exc:
        content = isinstance(exc, UnreadableNote)  # a permission error may be fixed without a new mtime
        return _Read(stat, error=str(exc) if content else f"cannot read: {exc}", error_in_content=content)
    digest = content_hash(data)
    if old_hash == digest:
        return _Read(stat, digest)
    try:
        note = parse_note(stat.path, text)
        done = _Read(stat, digest, note, lexical.note_rows(note) if note.ranked else None)
    except Exception as exc:  # noqa: BLE001 - one hostile note never stops the sync of the others
        return _Read(stat, digest, error=f"could not be parsed ({type(exc).__name__}: {str(exc)[:200]}); skipped",
                     error_in_content=True)
    if derive is not None:
        try:
            done.derived = derive(stat.path, note)
        except Exception:  # noqa: BLE001 - the later stage reads the file itself instead
            log.debug("%s: derive failed", stat.path, exc_info=True)
    return done


# Parsing is pure Python (about a millisecond a note); above this many files to read, worker
# processes parse while this one writes the index. ``$MEMORY_HUB_PARALLEL_FROM`` overrides it.
PARALLEL_FROM = 1500
_WINDOW = 2048  # files handed to the workers at a time: bounds the parsed notes waiting in memory


def index_workers() -> int:
    """Worker processes a big sync parses with: ``$MEMORY_HUB_INDEX_WORKERS``, else one per core
    (0 or 1 parses in this process)."""
    env = os.environ.get("MEMORY_HUB_INDEX_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _read_star(args: tuple[Path, FileStat, str | None, Callable[[str, Note], Any] | None]) -> _Read:
    return _read(*args)


def _reads(vault: Path, items: list[tuple[FileStat, str | None]],
           derive: Callable[[str, Note], Any] | None = None) -> Iterator[_Read]:
    """``_read`` for every item, in order; in worker processes when there are many."""
    if not items:
        return
    yield from worker_map(_read_star, [(vault, st, old, derive) for st, old in items])


def worker_map(fn: Callable[[Any], Any], items: list[Any]) -> Iterator[Any]:
    """``fn(item)`` for every item, in order: in this process for a few, in ``index_workers()``
    worker processes from ``PARALLEL_FROM`` items on (``fn`` must be a module-level function).
    Items go to the workers a window at a time, so results waiting in memory stay bounded."""
    workers = index_workers()
    threshold = os.environ.get("MEMORY_HUB_PARALLEL_FROM", "").strip()
    if workers <= 1 or len(items) < (int(threshold) if threshold.isdigit() else PARALLEL_FROM):
        for item in items:
            yield fn(item)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # forkserver: never fork a process that runs threads (the server's watcher calls this)
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    from concurrent.futures.process import BrokenProcessPool

    done = 0
    pool = ProcessPoolExecutor(min(workers, 8), mp_context=multiprocessing.get_context(method))
    try:
        windows = [items[i:i + _WINDOW] for i in range(0, len(items), _WINDOW)]
        ahead: deque[Iterator[Any]] = deque()
        for window in windows[:2]:
            ahead.append(pool.map(fn, window, chunksize=32))
        queued = len(ahead)
        while ahead:
            for result in ahead.popleft():
                yield result
                done += 1
            if queued < len(windows):
                ahead.append(pool.map(fn, windows[queued], chunksize=32))
                queued += 1
    except BrokenProcessPool as exc:
        # A worker died (killed, out of memory, or a script without an ``if __name__ ==
        # "__main__"`` guard that the workers re-run): the rest is done here, slower but complete.
        log.warning("index workers stopped (%s); reading the remaining %d files in this process",
                    exc, len(items) - done)
        for item in items[done:]:
            yield fn(item)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def sync(vault: Path, *, rebuild: bool = False, store: Store | None = None, progress: bool | None = None,
         only: Iterable[str] | None = None, renamed: dict[str, str] | None = None,
         note_hook: NoteHook | None = None) -> SyncReport:
    """Bring the index of ``vault`` up to date and return what changed.

    ``only`` limits the work to the given vault-relative paths (the watcher's fast path); files
    not named are left alone, and named files that no longer exist are deleted from the index.
    ``renamed`` ({old: new}) names renames the caller made, so a note whose text changed as it moved
    (its relative links rewritten) keeps its id too, like a rename found by content hash.
    ``note_hook`` hands each parsed note to a later stage (``NoteHook``).
    """
    started = time.monotonic()
    vault = Path(vault).resolve()
    if rebuild:
        if store is not None:
            store.close()
        reset(vault)
        store = Store(vault)
    store = store or Store(vault)
    report = SyncReport()
    with store.writer():
        try:
            _sync_locked(vault, store, report, progress, only, renamed or {}, note_hook)
            _fold_usage(store, vault, report)
        except KeyboardInterrupt:
            report.interrupted = True
        report.seconds = time.monotonic() - started
    if report.changed and not report.interrupted:
        for listener in list(_listeners):
            listener(store, report)
    if report.interrupted:
        raise SyncInterrupted(report)
    return report


def _fold_usage(store: Store, vault: Path, report: SyncReport) -> None:
    """Usage logs (``.memory-hub/usage/``) into the index; a log that cannot be read is reported."""
    folded = usage.fold(store, vault)
    report.usage_events = folded.events
    for where, reason in folded.problems:
        report.skipped.append(Skipped(where, reason))
        print(f"warning: {where}: {reason}", file=sys.stderr)


class SyncInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sync. Everything committed so far stays; the next sync completes the rest."""

    def __init__(self, report: SyncReport) -> None:
        super().__init__("sync interrupted")
        self.report = report


WALK_DIGEST = "walk_digest"  # meta: "<notes_changed_at> <walk_digest>" of the last walk that matched the index


def walk_digest(seen: dict[str, tuple[int, int]]) -> str:
    """A digest of a walk's ``{path: (mtime_ns, size)}`` in walk order: ``marshal`` makes its bytes
    in one C pass (~0.4 µs a file; ``repr`` was 1.5 µs, as much as reading the stamps from SQLite).
    Equal bytes mean equal walks; bytes that differ for equal walks (another Python's marshal
    format) only cost one read of the stamps."""
    return hashlib.blake2b(marshal.dumps(seen), digest_size=16).hexdigest()


def _known_stamps(conn: sqlite3.Connection, paths: list[str] | None = None) -> dict[str, tuple[int, int]]:
    """{path: (mtime_ns, size)} of every indexed file (or of ``paths``), in one read of the covering
    index ``notes_stamp``: plain tuples, since a no-change sync of a big vault is mostly this and
    the walk, and its answer is a comparison of two such dicts."""
    cur = conn.cursor()
    cur.row_factory = None
    sql = "SELECT path, mtime_ns, size FROM notes INDEXED BY notes_stamp"
    if paths is None:
        return {p: (m, s) for p, m, s in cur.execute(sql)}
    return {p: (m, s) for p, m, s in cur.execute(sql + " WHERE path IN (SELECT value FROM json_each(?))",
                                                   (json.dumps(paths),))}


_HASHES_BY_NAME = 5000  # up to this many paths their hashes are looked up by name; beyond, all are read


def _known_hashes(conn: sqlite3.Connection, paths: list[str]) -> dict[str, str]:
    """{path: content hash} of the indexed files among ``paths`` (what a sync re-reads or lost)."""
    if not paths:
        return {}
    cur = conn.cursor()
    cur.row_factory = None
    sql = "SELECT path, hash FROM notes INDEXED BY notes_stamp"
    if len(paths) > _HASHES_BY_NAME:
        return dict(cur.execute(sql))
    return dict(cur.execute(sql + " WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(paths),)))


def reparse_pending(store: Store, only: Iterable[str] | None = None) -> bool:
    """Whether a full sync must re-read every note: the note parser changed since the last one."""
    return only is None and store.get_meta("parse_version") != PARSE_VERSION


def _sync_locked(vault: Path, store: Store, report: SyncReport, progress: bool | None,
                 only: Iterable[str] | None, renamed: dict[str, str], note_hook: NoteHook | None = None) -> None:
    report.notes_before = store.get_meta(NOTES_CHANGED, "") or ""
    try:
        _sync_files(vault, store, report, progress, only, renamed, note_hook)
    finally:
        report.notes_after = store.get_meta(NOTES_CHANGED, "") or ""


def _sync_files(vault: Path, store: Store, report: SyncReport, progress: bool | None,
                only: Iterable[str] | None, renamed: dict[str, str], note_hook: NoteHook | None) -> None:
    conn = store.conn
    if only is not None:
        wanted = sorted({p.replace("\\", "/") for p in only})
        # Stat just the named files (a walk of a 6,000-note vault costs ~1 s of CPU per watcher
        # event), and read just their rows.
        named = (_stat_named(vault, p) for p in wanted)
        seen = {st.path: (st.mtime_ns, st.size) for st in named if st is not None}
        known = _known_stamps(conn, wanted)
        mark, digest_holds = "", False
    else:
        seen = stat_map(vault, report.skipped)
        if note_hook is not None:
            report.walked = seen
        # The walk's digest, recorded when a walk last matched the index row for row, with the
        # notes' change stamp of then: while neither moved, the index's stamps are this walk's and
        # need not be read (100k rows out of SQLite: ~0.25 s of CPU).
        mark = f"{report.notes_before} {walk_digest(seen)}" if report.notes_before else ""
        digest_holds = bool(mark) and store.get_meta(WALK_DIGEST) == mark
        known = seen if digest_holds else _known_stamps(conn)
    # the usual case, nothing changed, in one C comparison (no set of 100k paths made)
    reparse = reparse_pending(store, only)
    same = seen == known and not reparse
    gone = set() if same else known.keys() - seen.keys()
    missing = [p for p in known if p in gone] if gone else []

    # Problems of files that are gone (or that the walk now refuses) are stale.
    stale = "DELETE FROM problems WHERE path NOT IN (SELECT value FROM json_each(?))"
    with store.transaction() as c:
        if only is None and same and not digest_holds and mark:
            store.set_meta(c, WALK_DIGEST, mark)  # not a note row: the change stamp stays
        if only is None:
            # the few recorded problems are checked against the walk here, not every path in SQL
            lost = sorted({r[0] for r in c.execute("SELECT path FROM problems") if r[0] not in seen})
            if lost:
                c.execute("DELETE FROM problems WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(lost),))
        else:
            c.execute(stale + " AND path IN (SELECT value FROM json_each(?))",
                      (json.dumps(sorted(seen)), json.dumps(wanted)))
        for skip in report.skipped:
            print(f"warning: {skip.path}: {skip.reason}", file=sys.stderr)
            _record_skip(c, skip)

    # Decide what to (re)read: the files whose (mtime, size) differs from the index's (or from the
    # stat a skipped file was seen at), found by comparing the two dicts' items in C. A new note
    # parser re-reads every note once (a full sync only).
    skipped_before = {} if same else skipped_as_seen(conn)
    stamps = {**known, **skipped_before} if skipped_before else known
    if same or (seen == stamps and not reparse):
        todo: list[FileStat] = []
    else:
        differ = seen.items() - stamps.items()
        todo = [FileStat(p, *st) for p, st in seen.items()
                if (reparse and p.lower().endswith(".md")) or (p, st) in differ]
    report.unchanged += len(seen) - len(todo)
    hashes = _known_hashes(conn, [st.path for st in todo if st.path in known] + missing)

    # Read and hash the candidates; detect renames among missing paths by content hash.
    missing_by_hash: dict[str, list[str]] = {}
    for p in missing:
        missing_by_hash.setdefault(hashes[p], []).append(p)

    # Built on first need: a link the note did not have, or a pending re-resolution of every link.
    made: list[graph.Resolver] = []

    def resolver() -> graph.Resolver:
        if not made:
            made.append(graph.build_resolver(conn))
        return made[0]

    reuse_links = store.get_meta("links_dirty") != "1" and not reparse
    # A few notes to write: their leads' counts now, so only their descriptions need choosing again
    # afterwards (unless an earlier sync stopped before choosing: DESCRIPTIONS_PENDING).
    few = [st.path for st in todo if st.is_note] + missing
    chosen_before = store.get_meta(DESCRIPTIONS_PENDING) == "0"
    leads_before = (describe.lead_counts(conn, few) if len(few) <= describe.FEW_NOTES and not reparse
                    and chosen_before else None)
    # the known hash lets a worker skip parsing a touched file; a new parser re-reads them all
    notes = [(st, hashes.get(st.path) if not reparse else None) for st in todo if st.is_note]
    # Many notes to write (a cold index, a big pull): the new ones' lexical rows wait for the
    # descriptions, so each FTS row is written once (a note already indexed keeps its rows, so a
    # pull never hides it from search while the sync runs). A cold build also skips the fsyncs and
    # uses a bigger page cache: a power cut there means `memory-hub index --rebuild`; a warm index
    # keeps SQLite's durability, since a half-written page after a crash would go unnoticed.
    bulk = len(notes) > describe.FEW_NOTES
    cold = bulk and not known and only is None  # ``known`` is every indexed note's stamp here
    with _bulk_pragmas(conn, cold), Progress(len(todo), "indexing", enabled=progress if progress is not None else None) as bar, \
            _Batch(store) as batch:
        for st in todo:
            if st.is_note:
                continue
            bar.advance()
            digest = f"stat:{st.mtime_ns}:{st.size}"
            if st.path not in known:
                _upsert(store, batch.conn(), _attachment_note(st), st, digest, None)
                report.added.append(st.path)
            else:
                batch.conn().execute("UPDATE notes SET mtime_ns=?, size=?, hash=? WHERE path=?",
                                     (_trusted(st).mtime_ns, st.size, digest, st.path))
            batch.wrote()
        for done in _reads(vault, notes, note_hook[0] if note_hook else None):
            bar.advance()
            st = done.stat
            if done.error is not None:
                _skip(store, batch.conn(), report, known, Skipped(st.path, done.error),
                      st if done.error_in_content else None)
                batch.wrote()
                continue
            old = hashes.get(st.path)  # the indexed file's hash (None: a new file)
            if done.note is None:  # touched, same content
                batch.conn().execute("UPDATE notes SET mtime_ns=?, size=? WHERE path=?",
                                     (_trusted(st).mtime_ns, st.size, st.path))
                report.unchanged += 1
                batch.wrote()
                continue
            note = done.note
            if note_hook is not None and done.derived is not None:
                note_hook[1](st, done.derived)
            for problem in note.problems:
                report.problems.append((st.path, problem))
                print(f"warning: {st.path}: {problem}", file=sys.stderr)
            renamed_from = None
            if not old:
                told = next((a for a, b in renamed.items() if b == st.path and a in missing), None)
                if told is not None:
                    renamed_from = told
                    missing_by_hash[hashes[told]].remove(told)
                elif missing_by_hash.get(done.digest):
                    renamed_from = missing_by_hash[done.digest].pop(0)
                if renamed_from is not None:
                    missing.remove(renamed_from)
            _upsert(store, batch.conn(), note, st, done.digest, resolver, old_path=renamed_from, rows=done.rows,
                    reuse_links=reuse_links, staged=bulk)
            if renamed_from:
                report.renamed.append((renamed_from, st.path))
            elif old and old == done.digest:
                report.reparsed.append(st.path)
            elif old:
                report.updated.append(st.path)
            else:
                report.added.append(st.path)
            batch.wrote()
        for path in missing:
            _delete(store, batch.conn(), path)
            report.deleted.append(path)
            batch.wrote()

    if report.changed or reparse or not chosen_before:
        with store.transaction() as c:
            some = describe.refresh_some(c, few, leads_before) if leads_before is not None else None
            report.descriptions_changed = describe.refresh(c) if some is None else some
            report.descriptions_local = some is not None or report.descriptions_changed == 0
            if report.descriptions_changed:  # note rows and their FTS rows changed: move the stamp
                store.set_meta(c, NOTES_CHANGED, f"{time.time():.6f}")
            store.set_meta(c, DESCRIPTIONS_PENDING, "0")
            if reparse:
                store.set_meta(c, "parse_version", PARSE_VERSION)
    elif store.get_meta(DESCRIPTIONS_PENDING) != "0":
        with store.transaction() as c:  # only touched files were written: no lead changed
            store.set_meta(c, DESCRIPTIONS_PENDING, "0")
    # staged lexical rows (this sync's, or a stopped one's) into FTS, a group per transaction
    if lexical.has_pending(conn):
        with _bulk_pragmas(conn, cold):
            while True:
                with store.transaction() as c:
                    moved = lexical.flush_pending(c, FLUSH_ROWS)
                    if moved:  # rows became searchable: what readers counted in FTS is stale
                        store.set_meta(c, NOTES_CHANGED, f"{time.time():.6f}")
                if moved < FLUSH_ROWS:
                    break

    if store.get_meta("links_dirty") == "1":
        with store.transaction() as c:
            report.links_resolved = graph.resolve_all(c)
            store.set_meta(c, "links_dirty", "0")
            store.set_meta(c, LINKS_RESOLVED, f"{time.time():.6f}")
            store.set_meta(c, "last_sync", str(time.time()))
    elif only is None:
        with store.transaction() as c:
            store.set_meta(c, "last_sync", str(time.time()))
    if cold:
        _compact(conn)


def _compact(conn: sqlite3.Connection) -> None:
    """VACUUM after a cold index: the staged rows' pages (``fts_pending``, a sixth of the file at
    10k notes) are free once moved, and the FTS tables are written in one pass each, so the file
    shrinks to what the answers need. A reader holding the file open only makes it wait, then skip."""
    try:
        conn.execute("VACUUM")
        # in WAL mode VACUUM writes the whole new file into the log: give that space back now
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:  # busy: the index is right as it is, only larger
        log.warning("index left uncompacted after a cold build: %s", exc)
