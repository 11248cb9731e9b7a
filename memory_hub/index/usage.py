"""Usage counts for every reader: the logs of ``vault/usage.py`` folded into SQLite, and one query.

Recall's boosts, ``memory-hub usage``, ``stats``, MCP ``status`` and ``read_note`` all ask
:func:`counts` / :func:`for_note`; none reads a log or a note's frontmatter for counts itself.

Folding is incremental: each source file's folded byte offset is kept (always at a line end, so a
line being appended right now waits for the next fold), and a file whose identity changed (a new
inode after ``git pull`` or a publish, a shorter file, different first bytes) is folded again from
its start. Delete ``.memory_hub/`` and the next fold rebuilds the same counts from the logs.

A note's count is its **baseline** plus its events. The baseline is the largest ``baseline`` event
any machine recorded for it; without one, the ``access_count`` / ``useful_count`` its frontmatter
holds (counters written by versions before the logs), read from the index and never by rewriting
a note.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..vault import safe_io
from ..vault import usage as log
from .store import Store

FOLD_CHUNK = 8 * 1024 * 1024  # bytes read per source per step
MAX_SOURCE_BYTES = 256 * 1024 * 1024  # a log bigger than this is not ours: reported, not folded
_HEAD = 256


class Usage(NamedTuple):
    """How a note has been used: reads of its body, times judged useful, the last read (unix time)."""

    reads: int = 0
    useful: int = 0
    last_read: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"reads": self.reads, "useful": self.useful, "last_read": self.last_read}


NONE = Usage()


@dataclass
class FoldReport:
    events: int = 0
    changed: bool = False  # the usage tables were written (events, a re-read or a vanished log)
    refolded: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, reason)
    skipped: str | None = None  # why no fold happened (another process is folding)


def _identity(place: log.Place, st: Any, head: bytes) -> str:
    digest = hashlib.blake2b(head, digest_size=8).hexdigest()
    return f"{st.st_dev}:{st.st_ino}:{place.generation}:{digest}"


def fold(store: Store, vault: Path | None = None, *, wait: bool = True) -> FoldReport:
    """Fold new usage events into the index. ``wait=False`` (readers on a hot path) gives up at once
    when another process holds the index's writer lock or is publishing, and says so.

    Locks are always taken in the same order (the index's writer lock, then the journal's), so a
    sync that folds while it holds the writer lock can never deadlock with a publish or a reader.
    """
    vault = Path(vault or store.vault)
    report = FoldReport()
    try:
        with store.writer(timeout=None if wait else 0.0), log.journal_lock(vault, blocking=wait) as held:
            if not held:
                report.skipped = "usage is being published"
                return report
            _fold_locked(store, vault, report)
    except TimeoutError:
        report.skipped = "the index is being written by another process"
    except OSError as exc:
        report.problems.append(("usage", f"could not fold usage logs: {exc}"))
    return report


def _fold_locked(store: Store, vault: Path, report: FoldReport) -> None:
    known = {r[0]: (r[1], int(r[2])) for r in store.conn.execute("SELECT source, identity, offset FROM usage_sources")}
    present = set()
    try:
        safe_io.safe_path(vault, log.USAGE_DIR, hidden=True)
    except safe_io.OutsideVault as exc:
        report.problems.append((log.USAGE_DIR, f"usage logs not folded: {exc}"))
    for place in log.places(vault):
        present.add(place.key)
        try:
            _fold_source(store, place, known.get(place.key), report)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote) as exc:
            report.problems.append((place.rel, f"usage log not folded: {exc}"))
    gone = [k for k in known if k not in present]
    if gone:
        report.changed = True
        with store.transaction() as conn:
            for key in gone:
                conn.execute("DELETE FROM usage WHERE source = ?", (key,))
                conn.execute("DELETE FROM usage_sources WHERE source = ?", (key,))


def _fold_source(store: Store, place: log.Place, known: tuple[str, int] | None,
                 report: FoldReport) -> None:
    head, st = safe_io.read_range(place.root, place.rel, 0, _HEAD, hidden=place.hidden)
    if st.st_size > MAX_SOURCE_BYTES:
        report.problems.append((place.rel, f"usage log is {st.st_size:,} bytes (> {MAX_SOURCE_BYTES:,}); not folded"))
        return
    offset = known[1] if known else 0
    if known is None or st.st_size < offset or _identity(place, st, head[: min(_HEAD, offset)]) != known[0]:
        if known is not None:
            report.refolded.append(place.rel)  # replaced, truncated or rewritten: read it again
        offset = 0
        report.changed = True
        with store.transaction() as conn:
            conn.execute("DELETE FROM usage WHERE source = ?", (place.key,))
            conn.execute("DELETE FROM usage_sources WHERE source = ?", (place.key,))
    while offset < st.st_size:
        data, st = safe_io.read_range(place.root, place.rel, offset, FOLD_CHUNK, hidden=place.hidden)
        end = data.rfind(b"\n") + 1
        if end == 0:
            if len(data) < FOLD_CHUNK:
                break  # a line still being written: next time
            end = len(data)  # one absurd line: skip it
        _apply(store, place, data[:end], offset + end, head[: min(_HEAD, offset + end)], st, report)
        offset += end


def _larger(column: str) -> str:
    """SQL for the larger of the stored and the new value, NULL (no baseline) only when both are."""
    return (f"CASE WHEN excluded.{column} IS NULL THEN {column} WHEN {column} IS NULL THEN excluded.{column}"
            f" ELSE max({column}, excluded.{column}) END")


def _apply(store: Store, place: log.Place, data: bytes, new_offset: int, head: bytes,
           st: Any, report: FoldReport) -> None:
    agg: dict[str, list[Any]] = {}
    events = bad = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        event = log.parse_line(raw)
        if event is None:
            bad += 1
            continue
        events += 1
        row = agg.setdefault(event["path"], [0, 0, None, None, None])
        kind = event["event"]
        if kind == log.READ:
            row[0] += 1
            row[2] = max(row[2] or 0.0, float(event["ts"]))
        elif kind == log.USEFUL:
            row[1] += 1
        else:
            row[3] = max(row[3] or 0, int(event.get("reads", 0)))
            row[4] = max(row[4] or 0, int(event.get("useful", 0)))
    with store.transaction() as conn:
        for path, (reads, useful, last, b_reads, b_useful) in agg.items():
            conn.execute(
                "INSERT INTO usage(source, path, reads, useful, last_read, baseline_reads, baseline_useful)"
                " VALUES (?,?,?,?,?,?,?) ON CONFLICT(source, path) DO UPDATE SET"
                " reads = reads + excluded.reads, useful = useful + excluded.useful,"
                " last_read = max(coalesce(last_read, 0), coalesce(excluded.last_read, 0)),"
                f" baseline_reads = {_larger('baseline_reads')}, baseline_useful = {_larger('baseline_useful')}",
                (place.key, path, reads, useful, last, b_reads, b_useful))
        conn.execute(
            "INSERT INTO usage_sources(source, identity, offset, events, bad_lines) VALUES (?,?,?,?,?)"
            " ON CONFLICT(source) DO UPDATE SET identity = excluded.identity, offset = excluded.offset,"
            " events = events + excluded.events, bad_lines = bad_lines + excluded.bad_lines",
            (place.key, _identity(place, st, head), new_offset, events, bad))
    report.events += events
    report.changed = True


# -- reading ---------------------------------------------------------------------------------------

def _count_sql(column: str) -> str:
    """A frontmatter counter as a count: a non-negative integer (or digits), anything else 0."""
    return (f"CASE WHEN typeof({column}) IN ('integer', 'real') THEN max(CAST({column} AS INTEGER), 0)"
            f" WHEN typeof({column}) = 'text' AND {column} GLOB '[0-9]*' AND {column} NOT GLOB '*[^0-9]*'"
            f" THEN CAST({column} AS INTEGER) ELSE 0 END")


# Events summed per note, plus its baseline: the largest baseline event, else the counters its
# frontmatter holds (only notes whose frontmatter mentions a *_count key are looked into).
_COUNTS = f"""
WITH ev AS (
    SELECT path, sum(reads) AS r, sum(useful) AS u, max(last_read) AS lr,
           max(baseline_reads) AS br, max(baseline_useful) AS bu
    FROM usage WHERE {{only}} GROUP BY path),
fm AS (
    SELECT path, {_count_sql("json_extract(frontmatter, '$.access_count')")} AS fr,
           {_count_sql("json_extract(frontmatter, '$.useful_count')")} AS fu
    FROM notes WHERE kind != 'attachment' AND instr(frontmatter, '_count"') AND {{only}})
SELECT ev.path, r + CASE WHEN br IS NULL AND bu IS NULL THEN coalesce(fr, 0) ELSE coalesce(br, 0) END,
       u + CASE WHEN br IS NULL AND bu IS NULL THEN coalesce(fu, 0) ELSE coalesce(bu, 0) END, lr
FROM ev LEFT JOIN fm ON fm.path = ev.path
UNION ALL
SELECT path, fr, fu, NULL FROM fm WHERE path NOT IN (SELECT path FROM ev) AND (fr > 0 OR fu > 0)
"""


def counts(store: Store, paths: list[str] | None = None) -> dict[str, Usage]:
    """{note path: Usage} for every note with any usage (or just ``paths``), baselines included."""
    only, args = "1", ()
    if paths is not None:
        only, args = "path IN (SELECT value FROM json_each(?))", (json.dumps(list(paths)),) * 2
    cur = store.conn.cursor()
    cur.row_factory = None  # plain tuples: a vault's worth of rows, on recall's path
    rows = cur.execute(_COUNTS.format(only=only), args).fetchall()
    return {r[0]: Usage(r[1], r[2], r[3]) for r in rows if r[1] or r[2] or r[3]}


def top(store: Store, n: int = 10) -> list[tuple[str, Usage]]:
    """The ``n`` most used notes: judged useful most, then read most."""
    return sorted(counts(store).items(), key=lambda kv: (-kv[1].useful, -kv[1].reads, kv[0]))[:n]


def baselined(store: Store) -> set[str]:
    """Notes that have a ``baseline`` event: their frontmatter counters are a mirror, not a count."""
    return {r[0] for r in store.conn.execute(
        "SELECT DISTINCT path FROM usage WHERE baseline_reads IS NOT NULL OR baseline_useful IS NOT NULL")}


def for_note(store: Store, path: str) -> Usage:
    return counts(store, [path]).get(path, NONE)


def carry(store: Store, vault: Path, old: str, new: str) -> Usage:
    """A note moved from ``old`` to ``new`` keeps its counts; returns what it carried.

    Events are logged by path, so a rename alone would start the note from zero. A ``baseline``
    event at ``new`` makes up the difference: ``old``'s total less the events already logged at
    ``new`` (a note deleted from there, or this one before an earlier move away, so a move back
    counts nothing twice). It goes to this clone's journal like a read (``git status`` stays
    clean) and reaches the log with the next publish. Called after the move, before ``old`` leaves
    the index, so ``old``'s frontmatter counters are still known; a note restored from the trash
    to another path (``old`` no longer indexed) brings its counters in its own frontmatter, which
    counts at ``new`` once indexed there.
    """
    vault = Path(vault)
    fold(store, vault)
    moved = for_note(store, old)
    if store.note_row(old) is None and old not in baselined(store):
        at_new, ev_new = for_note(store, new), _events(store, new)
        moved = Usage(moved.reads + at_new.reads - ev_new[0], moved.useful + at_new.useful - ev_new[1],
                      moved.last_read)
    if moved.reads or moved.useful:
        ev_new = _events(store, new)
        log.record(vault, log.BASELINE, new, reads=max(moved.reads - ev_new[0], 0),
                   useful=max(moved.useful - ev_new[1], 0))
        fold(store, vault)
    return moved


def _events(store: Store, path: str) -> tuple[int, int]:
    """Reads and useful events logged at ``path`` (every source), without its baseline."""
    row = store.conn.execute("SELECT coalesce(sum(reads), 0), coalesce(sum(useful), 0) FROM usage WHERE path = ?",
                             (path,)).fetchone()
    return int(row[0]), int(row[1])


def summary(store: Store, vault: Path | None = None) -> dict[str, Any]:
    """What the index knows about usage, for ``status``: events folded, notes used, sources."""
    conn = store.conn
    rows = conn.execute("SELECT source, events, bad_lines FROM usage_sources ORDER BY source").fetchall()
    used = counts(store)
    pending, oldest = log.unpublished(Path(vault or store.vault))
    return {
        "events": sum(int(r[1]) for r in rows),
        "notes_read": sum(1 for u in used.values() if u.reads),
        "notes_useful": sum(1 for u in used.values() if u.useful),
        "machines": sorted({r[0].split("/", 1)[1].rsplit(".", 1)[0] for r in rows if r[0].startswith("log/")}),
        "unpublished": pending,
        "unpublished_since": oldest,
        "bad_lines": sum(int(r[2]) for r in rows),
    }


_stores: dict[Path, Store] = {}
_snapshots: dict[tuple[Path, int, int], tuple[int, dict[str, Usage]]] = {}


def snapshot(vault: Path, store: Store | None = None) -> dict[str, Usage]:
    """Fold what is new (without waiting for another writer) and return every note's counts.

    Without ``store``, one per vault is kept for the process (recall asks every few seconds). The
    counts are computed again only when something changed: this fold wrote, or another connection
    committed to the index (SQLite's ``data_version``). Treat the returned dict as read-only.
    """
    vault = Path(vault)
    if store is None:
        store = _stores.get(vault)
        if store is None or not store.path.exists():
            store = _stores[vault] = Store(vault)
    report = fold(store, vault, wait=False)
    version = int(store.conn.execute("PRAGMA data_version").fetchone()[0])
    key = (vault, threading.get_ident(), id(store))
    cached = _snapshots.get(key)
    if cached is not None and cached[0] == version and not report.changed:
        return cached[1]
    result = counts(store)
    _snapshots[key] = (version, result)
    return result


# -- single events, for timelines ----------------------------------------------------------------

_EVENTS_CACHE: dict[Path, tuple[tuple[Any, ...], list[tuple[float, str, str]]]] = {}
_EVENTS_LOCK = threading.Lock()


def events(vault: Path) -> list[tuple[float, str, str]]:
    """Every ``read`` and ``useful`` event of every log and journal, as (ts, event, path), oldest first.

    The counts above are what most readers want; a timeline ("was this note read after it was
    shown?") needs the single events, so they are read from the logs themselves, and kept per
    process until a log changes (its size or inode), which costs a stat per file.
    """
    vault = Path(vault)
    found = []
    for place in log.places(vault):
        try:
            _, st = safe_io.read_range(place.root, place.rel, 0, 0, hidden=place.hidden)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote):
            continue
        if st.st_size <= MAX_SOURCE_BYTES:
            found.append((place, (place.key, st.st_ino, st.st_size, st.st_mtime_ns)))
    key = tuple(k for _, k in found)
    with _EVENTS_LOCK:
        cached = _EVENTS_CACHE.get(vault)
        if cached is not None and cached[0] == key:
            return cached[1]
    out: list[tuple[float, str, str]] = []
    for place, _ in found:
        try:
            data, _st = safe_io.read_range(place.root, place.rel, 0, MAX_SOURCE_BYTES, hidden=place.hidden)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote):
            continue
        out.extend((float(e["ts"]), e["event"], e["path"]) for e in log.parse_lines(data)
                   if e["event"] in (log.READ, log.USEFUL))
    out.sort()
    with _EVENTS_LOCK:
        _EVENTS_CACHE[vault] = (key, out)
    return out
