"""Recall's own index of the vault: cheap to query, persisted, updated by mtime + size per file.

Built by walking the vault directly (or from the notes a sync parsed), saved under
``<vault>/.memory_hub/recall/index.sqlite3``. Per note it keeps what recall needs on the prompt
path: how a prompt or a link may name the note (title, aliases, file stem), its outgoing links
(backlinks for the graph-overview mode) and its terms weighted by field (title > aliases > file
name > tags > description > body, body repetitions capped at 4). Scoring over it is ``recall_score.py``.

A warm restart reads every note's small record (stamp, title, description, kind, names, links) and
none of the postings: those stay in SQLite, one packed array of term ids per note in a table of
their own, so a changed note is one row there and a build writes one row a note,
and a prompt reads only its
terms' document counts (``df``).
Before version 7 the index was one pickle of every posting, read whole at every start (3.7 s of CPU
at 30k notes, 417 MB at 100k). Changes are kept in memory (``_pending``) and written in one
transaction per save, so an interrupted save leaves the last committed index, never half of one.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import sqlite3
import sys
import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import index_dir
from ..index.store import connect
from ..index.terms import HAN, HANGUL, HIRAGANA, KATAKANA, STOPWORDS, is_identifier, normalize
from ..vault.notes import UNRANKED_KINDS, Note, parse_note
from ..vault.walk import FileStat, OutsideVault, UnreadableNote, read_note_text, safe_path, walk

INDEX_VERSION = 10  # 5: usage counters left the notes (and this index); 6: titles and templates as parse_note reads
# them now; 7: SQLite (index.sqlite3) instead of one pickle, postings read per term; 8: a note's postings
# packed (term ids, weights) instead of a row per posting (a cold build wrote ~97 rows a note); 9: those packed
# rows in a table of their own, so a warm open's scan of the notes reads no posting (at 100k the notes table
# holding them was 450 MB to scan); 10: no weights beside the term ids (nothing read them: a prompt reads
# document counts, recall ranks through the search index; they were two thirds of the postings' bytes)
# A version-9 file reads as version 10 does (its weights are never read) and the next save upgrades it
# in place, dropping the column: a read never writes, and no rebuild is needed.
READABLE_VERSIONS = (9, INDEX_VERSION)
FILE_NAME = "index.sqlite3"
OLD_FILES = ("index.pkl",)  # earlier versions' files: removed once this version has saved
FLUSH_NOTES = 5_000  # a long build (a sync handing over every note) writes this many notes at a time
BUSY_MS = 1_000  # a save waits this long for another process's write, then stays pending (retried later)

# Field weights: a term in the title says the note is *about* it; in the body, only that it is mentioned.
W_TITLE, W_ALIAS, W_STEM, W_TAG, W_DESC, W_BODY = 10.0, 8.0, 6.0, 5.0, 3.0, 1.0
BODY_CAP = 4  # body repetitions beyond this add nothing
BODY_CHARS = 60_000
SAVE_EVERY = 60.0  # seconds between saves of recall's index for incremental (watcher) updates

# -- terms ----------------------------------------------------------------------------------------

_CONTENT_RUN = re.compile(f"[{HAN}{KATAKANA}{HANGUL}]+")
_HIRA_RUN = re.compile(f"[{HIRAGANA}]{{2,}}")
_WORD = re.compile(r"[0-9a-z_]+(?:[.\-/:][0-9a-z_]+)*")
_ASCII_WORD = re.compile(r"[0-9a-z_]+")


def _stem(word: str) -> str:
    """A deliberately tiny English stemmer: plurals and -ing/-ed, so 'deploys' meets 'deploy'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 6 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    return word


@lru_cache(maxsize=1 << 17)
def _word_terms(compound: str) -> tuple[str, ...]:
    """The terms one ASCII word or compound gives (a pure function of it, so cached: a vault's words
    repeat, and building recall's index of every note spent most of its time here)."""
    out: list[str] = []
    if any(c in compound for c in ".-/:") and is_identifier(compound):
        out.append(compound)
    for w in _ASCII_WORD.findall(compound):
        if w in STOPWORDS or (len(w) < 2 and not w.isdigit()):
            continue
        out.append(_stem(w) if "_" not in w else w)
    return tuple(out)


def tokens(text: str, *, hiragana: bool = False) -> list[str]:
    """Terms of ``text`` as recall matches them (repeats kept): stemmed words, whole identifiers,
    CJK bigrams (single characters for one-character runs)."""
    text = normalize(text).lower()
    out: list[str] = []
    for compound in _WORD.findall(text):
        out.extend(_word_terms(compound))
    runs = [m.group(0) for m in _CONTENT_RUN.finditer(text)]
    if hiragana:
        runs += [m.group(0) for m in _HIRA_RUN.finditer(text)]
    for run in runs:
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def query_terms(prompt: str) -> list[str]:
    """Distinct terms of a prompt, in order (hiragana only when there is nothing else)."""
    found = list(dict.fromkeys(tokens(prompt)))
    return found or list(dict.fromkeys(tokens(prompt, hiragana=True)))


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", normalize(text).lower().replace("-", " ").replace("_", " ")).strip()


# -- the index ------------------------------------------------------------------------------------

@dataclass
class NoteInfo:
    title: str
    description: str
    kind: str
    names: list[str]  # normalised title, aliases and file stem: how a prompt or a link names it
    links: list[str]  # normalised link targets (file stems)
    raw_transcript: bool = False  # a hook's saved transcript tail: uncurated, echoes past sessions


# A note waiting to be written: its stamp, its record and weighted terms (None, None: an unreadable
# note, remembered so it is not retried each prompt); None instead of the tuple: the note is gone.
_Pending = tuple[int, int, "NoteInfo | None", "dict[str, float] | None"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # info: JSON [kind, names, links, raw_transcript], NULL: an unreadable note; title and
    # description in columns of their own (plain text read as it is, not JSON escapes parsed)
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, "
    "mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, info TEXT, title TEXT, description TEXT)",
    # a note's postings, packed (``_pack``): the ids of its terms; one row a note, apart from the
    # notes, which a warm open scans
    "CREATE TABLE IF NOT EXISTS postings (note INTEGER PRIMARY KEY, terms BLOB NOT NULL)",
    # every term ever seen gets an id (kept, so ids are stable across processes); df: notes with it
    "CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE, df INTEGER NOT NULL)",
)


@dataclass
class _Data:
    version: int = INDEX_VERSION
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: dict[str, NoteInfo] = field(default_factory=dict)


def note_info(path: str, text: str) -> tuple[NoteInfo, dict[str, float]]:
    """Everything recall needs from one note (names, links) and its weighted terms."""
    return info_of_note(path, parse_note(path, text))


def info_of_note(path: str, note: Note) -> tuple[NoteInfo, dict[str, float]]:
    """``note_info`` of a note already parsed (by the sync: ``sync.NoteHook``, so a cold index
    reads and parses each file once for both indexes)."""
    weights: dict[str, float] = {}

    def add(terms: Iterable[str], w: float) -> None:
        for t in set(terms):
            weights[t] = weights.get(t, 0.0) + w

    stem = PurePosixPath(path).stem
    add(tokens(note.title, hiragana=True), W_TITLE)
    add((t for a in note.aliases for t in tokens(a, hiragana=True)), W_ALIAS)
    add(tokens(stem.replace("-", " ").replace("_", " ")), W_STEM)
    add((t for tag in note.tags for t in tokens(tag.replace("/", " "))), W_TAG)
    add(tokens(note.description), W_DESC)
    counts: dict[str, int] = {}
    for t in tokens(note.body[:BODY_CHARS]):
        counts[t] = counts.get(t, 0) + 1
    for t, n in counts.items():
        weights[t] = weights.get(t, 0.0) + W_BODY * min(n, BODY_CAP)
    names = [_key(n) for n in (note.title, *note.aliases, stem) if n and _key(n)]
    links = [_key(PurePosixPath(link.target).stem) for link in note.links if link.target]
    return NoteInfo(
        title=note.title, description=note.description, kind=note.kind,
        names=list(dict.fromkeys(names)), links=list(dict.fromkeys(links)),
        raw_transcript=str(note.frontmatter.get("source", "")).endswith("-hook") and "transcript" in note.tags,
    ), weights


def _info_of(item: tuple[Path, str]) -> tuple[NoteInfo, dict[str, float]] | None:
    """``note_info`` of one file, read here (runs in ``worker_map``'s processes); None: unreadable."""
    vault, path = item
    try:
        return note_info(path, read_note_text(vault, path))
    except (UnreadableNote, OSError):
        return None


def _record(info: NoteInfo) -> tuple[str, str, str]:
    """A note's saved record, title and description. The record is JSON in ASCII (escapes): a warm
    open joins every record into one string to parse them in one call, and one emoji in UTF-8 text
    would make that string 4 bytes a character (measured: +40 MB and slower at 30k notes); title
    and description, most of the text, are plain columns (a lone surrogate from a file name, which
    UTF-8 cannot hold, is replaced there)."""
    def text(value: str) -> str:
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")

    return (json.dumps([info.kind, info.names, info.links, info.raw_transcript]), text(info.title),
            text(info.description))


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """No cyclic garbage collection while tens of thousands of objects are made that hold no cycle
    (the collector ran every few hundred of them and walked them all: a third of a warm open)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _each(values: Iterable[str]) -> str:
    """A JSON array for ``IN (SELECT value FROM json_each(?))``: any number of values, one parameter."""
    return json.dumps(list(values))


def _pack(ids: list[int]) -> bytes:
    """A note's postings as one blob: its terms' ids (uint32)."""
    return array("I", ids).tobytes()


def _unpack_ids(blob: bytes | None) -> array:
    out = array("I")
    if blob:
        out.frombytes(blob)
    return out


class RecallIndex:
    """Recall's own inverted index of the vault, persisted across runs and updated incrementally."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault).resolve()
        self.path = index_dir(self.vault) / "recall" / FILE_NAME
        self.data = _Data()
        self.complete = False  # every file of the last walk is indexed
        self.loaded_from_disk = False
        self.save_error: str | None = None  # why the last save failed (its changes stay pending)
        self.load_error: str | None = None  # why the saved index could not be read (the next save rebuilds it)
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        self._current = False  # the open file holds an index this version reads (READABLE_VERSIONS)
        # the saved term ids of pending notes, as read by ``df`` (what their change replaces); kept
        # until the file changes (``PRAGMA data_version``: another process's save) or this one saves
        self._saved_of: dict[str, frozenset[int]] = {}
        self._saved_seen: int | None = None
        self._pending: dict[str, _Pending | None] = {}
        self._names: dict[str, set[str]] | None = None
        self._heads: dict[str, list[str]] = {}
        self._backlinks: dict[str, int] | None = None
        self.last_refresh = 0.0
        self._unsaved = False
        self._flush_at = FLUSH_NOTES  # pending notes at which a long build saves (``_flush_if_full``)
        self._saved_at = time.monotonic()

    # persistence -------------------------------------------------------------------------------
    def _connection(self, create: bool) -> sqlite3.Connection | None:
        """The index file's connection (one per RecallIndex, used under ``_lock``); None when there
        is no file and ``create`` is false."""
        if self._con is None:
            if not create and not self.path.is_file():
                return None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = connect(self.path, busy_ms=BUSY_MS, named_rows=False)  # WAL, as the search index
        return self._con

    def saved_at(self) -> float:
        """When the last save committed (time.time()); 0.0 when there is no saved index."""
        with self._lock:
            con = self._readable()
            if con is None:
                return 0.0
            row = con.execute("SELECT value FROM meta WHERE key = 'saved_at'").fetchone()
            return float(row[0]) if row else 0.0

    def old_files(self) -> list[Path]:
        """An earlier version's saved index, still on disk (rebuilt and removed by the next save)."""
        return [p for p in (self.path.with_name(n) for n in OLD_FILES) if p.exists()]

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
            self._current = False
            self._saved_of.clear()

    def _version(self, con: sqlite3.Connection) -> int | None:
        try:
            row = con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
        except sqlite3.OperationalError:  # no meta table: an empty or foreign file
            return None
        try:
            return int(row[0]) if row else None
        except ValueError:
            return None

    def load(self) -> bool:
        """Read every note's stamp and record (not its postings). False when there is no saved
        index or it is unusable (another version, damaged): then the next refresh rebuilds it."""
        with self._lock:
            try:
                con = self._connection(create=False)
                if con is None:
                    return False
                version = self._version(con)
                if version not in READABLE_VERSIONS:
                    self.load_error = f"version {version}, not {INDEX_VERSION}: rebuilt by the next save"
                    return False
                self._current = True
                with _no_gc():
                    rows = con.execute("SELECT path, mtime_ns, size, info, title, description FROM notes").fetchall()
                    files = {r[0]: (r[1], r[2]) for r in rows}
                    have = [r for r in rows if r[3] is not None]
                    # one JSON parse for every record: a C loop, not a call per note
                    records = json.loads("[" + ",".join(r[3] for r in have) + "]")
                    notes = {r[0]: NoteInfo(r[4], r[5], *rec) for r, rec in zip(have, records, strict=True)}
            except (sqlite3.Error, ValueError, TypeError) as exc:
                self.load_error = f"unreadable: {type(exc).__name__}: {exc}"[:200]
                return False
            self.data.files, self.data.notes = files, notes
            self.load_error = None
            self._pending.clear()
            self._saved_of.clear()
            self.loaded_from_disk = True
            self._invalidate()
            return True

    def _reset(self, con: sqlite3.Connection) -> None:
        """Inside a write transaction: start the file over (no index yet, or another version's)."""
        for table in ("notes", "postings", "terms", "meta"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
        for statement in _SCHEMA:
            con.execute(statement)
        con.execute("INSERT INTO meta (key, value) VALUES ('version', ?)", (str(INDEX_VERSION),))

    def _open_for_writing(self) -> sqlite3.Connection:
        """The connection with a write transaction begun; a damaged file is replaced first."""
        con = None
        try:
            con = self._connection(create=True)
            assert con is not None
            con.execute("BEGIN IMMEDIATE")
            version = self._version(con)
            if version == 9:  # the same index but for the weights: drop them, keep the rest
                con.execute("ALTER TABLE postings DROP COLUMN weights")
                con.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(INDEX_VERSION),))
            elif version != INDEX_VERSION:
                self._reset(con)
            return con
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):
                raise  # another writer, a full disk, a read-only file: this save stays pending, the file stays
            if con is not None and con.in_transaction:
                con.execute("ROLLBACK")
            self.close()  # not a database (or damaged): it is a cache, start it again
            for suffix in ("", "-wal", "-shm"):
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            con = self._connection(create=True)
            assert con is not None
            con.execute("BEGIN IMMEDIATE")
            self._reset(con)
            return con

    def save(self) -> None:
        """Write what changed since the last save, in one transaction (all of it or none). With
        nothing pending and a readable file there is nothing to write, and the write lock (which may
        wait BUSY_MS for another process's save) is not taken."""
        with self._lock:
            if not self._pending and self._readable() is not None:
                self._drop_old_files()
                return
            con = self._open_for_writing()
            try:
                self._write(con, self._pending)
                con.execute("INSERT INTO meta (key, value) VALUES ('saved_at', ?) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (f"{time.time():.3f}",))
                con.execute("COMMIT")
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            self._pending.clear()
            self._saved_of.clear()
            self._current = True
            self.save_error = None
            self._drop_old_files()

    def _drop_old_files(self) -> None:
        for old in OLD_FILES:  # an earlier version's file is never read again
            self.path.with_name(old).unlink(missing_ok=True)

    def _term_ids(self, con: sqlite3.Connection, terms: set[str]) -> tuple[dict[str, int], list[str]]:
        """Ids of ``terms`` (inside the save's transaction), and the terms not in the file yet, which
        get the next free ids here and are inserted by the caller with their counts."""
        ids: dict[str, int] = dict(con.execute(
            "SELECT term, id FROM terms WHERE term IN (SELECT value FROM json_each(?))", (_each(terms),)))
        missing = sorted(t for t in terms if t not in ids)
        start = (con.execute("SELECT max(id) FROM terms").fetchone()[0] or 0) + 1
        ids.update(zip(missing, range(start, start + len(missing)), strict=True))
        return ids, missing

    def _write(self, con: sqlite3.Connection, pending: dict[str, _Pending | None]) -> None:
        if not pending:
            return
        # one query each, whatever the number: json_each takes any length of array in one parameter
        old: dict[str, int] = dict(con.execute(
            "SELECT path, id FROM notes WHERE path IN (SELECT value FROM json_each(?))", (_each(pending),)))
        gone: Counter[int] = Counter()  # what the saved index had for these notes goes first
        for (blob,) in con.execute("SELECT terms FROM postings WHERE note IN (SELECT value FROM json_each(?))",
                                   (json.dumps(sorted(old.values())),)):
            gone.update(_unpack_ids(blob))
        ids, missing = self._term_ids(con, {t for entry in pending.values() if entry and entry[3] for t in entry[3]})
        came: Counter[int] = Counter()
        for path, entry in pending.items():
            had = old.get(path)
            if entry is None:
                if had is not None:
                    con.execute("DELETE FROM notes WHERE id = ?", (had,))
                    con.execute("DELETE FROM postings WHERE note = ?", (had,))
                continue
            mtime_ns, size, info, weights = entry
            record, title, description = (None, None, None) if info is None else _record(info)
            term_ids = list(map(ids.__getitem__, weights)) if weights else []
            came.update(term_ids)
            row = (mtime_ns, size, record, title, description)
            if had is not None:
                nid = had
                con.execute("UPDATE notes SET mtime_ns = ?, size = ?, info = ?, title = ?, description = ? "
                            "WHERE id = ?", (*row, nid))
            else:
                nid = con.execute("INSERT INTO notes (mtime_ns, size, info, title, description, path) "
                                  "VALUES (?, ?, ?, ?, ?, ?)", (*row, path)).lastrowid
            if weights:
                con.execute("INSERT OR REPLACE INTO postings (note, terms) VALUES (?, ?)", (nid, _pack(term_ids)))
            elif had is not None:
                con.execute("DELETE FROM postings WHERE note = ?", (nid,))
        new_ids = {ids[t] for t in missing}
        con.executemany("INSERT INTO terms (id, term, df) VALUES (?, ?, ?)", ((ids[t], t, came[ids[t]]) for t in missing))
        came.subtract(gone)
        con.executemany("UPDATE terms SET df = df + ? WHERE id = ?",
                        sorted((n, t) for t, n in came.items() if n and t not in new_ids))

    def _flush_if_full(self) -> bool:
        """A long build's bounded memory: save once ``_flush_at`` notes wait. After a failed save the
        next try waits for another FLUSH_NOTES notes, not the next note (each try may wait BUSY_MS)."""
        if len(self._pending) < self._flush_at:
            return False
        if self.try_save():
            self._flush_at = FLUSH_NOTES
            return True
        self._flush_at = len(self._pending) + FLUSH_NOTES
        return False

    def try_save(self) -> bool:
        """``save``, and on failure (another writer, a full disk) keep the changes pending and say why."""
        try:
            self.save()
        except (OSError, sqlite3.Error) as exc:
            self.save_error = f"{type(exc).__name__}: {exc}"[:200]
            return False
        return True

    # reading postings ---------------------------------------------------------------------------
    def _readable(self) -> sqlite3.Connection | None:
        """The connection when the file holds this version's index (checked once), else None."""
        if self._current:
            return self._con
        con = self._connection(create=False)
        if con is None:
            return None
        try:
            self._current = self._version(con) in READABLE_VERSIONS
        except sqlite3.DatabaseError:
            return None
        return con if self._current else None

    def _pending_saved(self, con: sqlite3.Connection) -> dict[str, frozenset[int]]:
        """{pending path: the term ids the saved index holds for it} (what its change replaces), each
        read once, not at every long prompt; dropped when the file changes under this connection
        (another process saved: ``data_version``) and by this process's own save."""
        seen = con.execute("PRAGMA data_version").fetchone()[0]
        if seen != self._saved_seen:
            self._saved_of.clear()
            self._saved_seen = seen
        todo = [path for path in self._pending if path not in self._saved_of]
        if todo:
            found = {path: frozenset(_unpack_ids(blob)) for path, blob in con.execute(
                "SELECT n.path, p.terms FROM notes n JOIN postings p ON p.note = n.id "
                "WHERE n.path IN (SELECT value FROM json_each(?))", (_each(todo),))}
            for path in todo:
                self._saved_of[path] = found.get(path, frozenset())
        return self._saved_of

    def df(self, terms: Iterable[str]) -> dict[str, int]:
        """How many notes have each term (0: none): what a long prompt's rarest terms are chosen by.
        The saved counts, plus what the pending changes (not saved yet) add and take away."""
        wanted = list(dict.fromkeys(terms))
        with self._lock:
            out = dict.fromkeys(wanted, 0)
            ids: dict[str, int] = {}
            con = self._readable()
            if con is not None and wanted:
                for tid, term, count in con.execute(
                        "SELECT id, term, df FROM terms WHERE term IN (SELECT value FROM json_each(?))",
                        (_each(wanted),)):
                    ids[term], out[term] = tid, count
            if self._pending:
                saved = self._pending_saved(con) if con is not None else {}
                known = [(t, ids[t]) for t in wanted if t in ids]  # a term not saved is in no saved note
                for path, entry in self._pending.items():
                    new = entry[3] if entry is not None else None
                    if new:
                        for t in wanted:
                            out[t] += t in new
                    had = saved.get(path)
                    if had:
                        for t, tid in known:
                            out[t] -= tid in had
            return out

    def _invalidate(self) -> None:
        self._names = None
        self._backlinks = None

    # updating ----------------------------------------------------------------------------------
    def _remove(self, path: str) -> None:
        self.data.files.pop(path, None)
        self.data.notes.pop(path, None)
        self._pending[path] = None

    def _add(self, path: str, stat: tuple[int, int], info: NoteInfo, weights: dict[str, float]) -> None:
        self.data.notes[path] = info
        self.data.files[path] = stat
        self._pending[path] = (*stat, info, weights)

    def _unreadable(self, path: str, stat: tuple[int, int]) -> None:
        """Remembered with its stamp, so it is not retried each prompt (until it changes)."""
        self.data.notes.pop(path, None)
        self.data.files[path] = stat
        self._pending[path] = (*stat, None, None)

    def _put(self, path: str, stat: tuple[int, int], found: tuple[NoteInfo, dict[str, float]]) -> None:
        """A note parsed in a worker (``info_of_note``), its terms interned (one object per term
        while a build holds thousands of notes' terms before writing them)."""
        info, weights = found
        self._add(path, stat, info, {sys.intern(t): w for t, w in weights.items()})

    def take(self, stat: FileStat, found: tuple[NoteInfo, dict[str, float]]) -> None:
        """One note the sync parsed (``info_of_note`` in its worker), as ``refresh`` would add it."""
        with self._lock:
            self._put(stat.path, (stat.mtime_ns, stat.size), found)
            self._invalidate()
            self._unsaved = True
            if self._flush_if_full():
                self._unsaved, self._saved_at = False, time.monotonic()

    def note_hook(self) -> tuple[Any, Any]:
        """A ``sync.NoteHook`` that fills this index from the notes a sync parses."""
        return info_of_note, self.take

    def refresh(self, deadline: float | None = None, only: Iterable[str] | None = None,
                walked: Mapping[str, tuple[int, int]] | None = None) -> dict[str, int]:
        """Stat the vault (or just ``only``) and re-parse what changed; save when anything did.

        With ``deadline`` (a ``time.monotonic()`` value) the work stops there and what was done is
        saved, so a large vault's first build spreads over several runs instead of never finishing.
        ``walked``: a whole walk already made (``SyncReport.walked``, {path: (mtime_ns, size)}),
        used instead of walking the vault again.
        """
        # The stat walk runs outside the lock: prompts keep being answered meanwhile.
        if only is not None:
            wanted = set(only)
            stats = []
            for rel in sorted(wanted):
                try:
                    st = safe_path(self.vault, rel).stat()
                except (OSError, OutsideVault):
                    continue
                stats.append(FileStat(rel, st.st_mtime_ns, st.st_size))
        elif walked is not None:
            stats = [FileStat(p, mtime_ns, size) for p, (mtime_ns, size) in walked.items()]
        else:
            stats = list(walk(self.vault))
        with self._lock:
            changed = removed = 0
            known = self.data.files
            seen = {s.path for s in stats}
            if only is not None:
                gone = [p for p in wanted if p in known and p not in seen]
            else:
                gone = [p for p in known if p not in seen]
            for p in gone:
                self._remove(p)
                removed += 1
            complete = True
            due = [st for st in stats if st.is_note and known.get(st.path) != (st.mtime_ns, st.size)]
            if deadline is None and len(due) > 64:  # a first build: in worker processes (sync.PARALLEL_FROM on)
                from ..index.sync import worker_map  # not at the top: a cold hook process never needs it

                for st, found in zip(due, worker_map(_info_of, [(self.vault, st.path) for st in due]), strict=True):
                    if found is not None:
                        self._put(st.path, (st.mtime_ns, st.size), found)
                        changed += 1
                    else:
                        self._unreadable(st.path, (st.mtime_ns, st.size))
                    self._flush_if_full()
                due = []
            for st in due:
                if deadline is not None and time.monotonic() > deadline:
                    complete = False
                    break
                try:
                    text = read_note_text(self.vault, st.path)
                except (UnreadableNote, OSError):
                    self._unreadable(st.path, (st.mtime_ns, st.size))
                    continue
                self._add(st.path, (st.mtime_ns, st.size), *note_info(st.path, text))
                changed += 1
            if only is None:
                self.complete = complete
            if changed or removed:
                self._invalidate()
            if self._pending:
                self._unsaved = True
            # The saved copy only speeds up the next cold start, and it stays consistent however old
            # it is (files and their terms are saved together): a watcher's small updates save at
            # most once a minute, a full refresh saves at once.
            if self._unsaved and (only is None or time.monotonic() - self._saved_at > SAVE_EVERY):
                if self.try_save():
                    self._unsaved, self._saved_at = False, time.monotonic()
            self.last_refresh = time.monotonic()
            out = {"changed": changed, "removed": removed, "notes": len(self.data.notes)}
            if self.save_error:
                out["unsaved"] = len(self._pending)  # said, not hidden: the next save retries them
                out["save_error"] = self.save_error
            return out

    # lookups -----------------------------------------------------------------------------------
    def names(self) -> dict[str, set[str]]:
        """{normalised title/alias/stem: paths}, for spotting a note named in a prompt."""
        if self._names is None:
            with _no_gc():
                self._build_names()
        return self._names  # type: ignore[return-value]

    def _build_names(self) -> None:
        names: dict[str, set[str]] = {}
        for path, info in self.data.notes.items():
            if info.kind in UNRANKED_KINDS:
                continue
            for n in info.names:
                names.setdefault(n, set()).add(path)
        heads: dict[str, list[str]] = {}
        for n in names:
            if _CONTENT_RUN.search(n):
                compact = n.replace(" ", "")
                if len(compact) >= 3:
                    heads.setdefault(compact[:2], []).append(n)
            elif len(n) >= 4 and (len(n) >= 10 or " " in n or is_identifier(n.replace(" ", "_"))):
                heads.setdefault(n.split(" ", 1)[0], []).append(n)
        self._names, self._heads = names, heads

    def name_heads(self) -> dict[str, list[str]]:
        """Names a prompt may mention, keyed by their first word (or first two CJK characters)."""
        self.names()
        return self._heads

    def backlinks(self) -> dict[str, int]:
        """{path: number of notes linking to it}, resolved by file stem, title or alias."""
        if self._backlinks is None:
            by_name: dict[str, int] = {}
            for info in self.data.notes.values():
                for target in info.links:
                    by_name[target] = by_name.get(target, 0) + 1
            self._backlinks = {}
            for path, info in self.data.notes.items():
                stem = _key(PurePosixPath(path).stem)
                count = by_name.get(stem, 0) + sum(by_name.get(n, 0) for n in info.names if n != stem)
                if count:
                    self._backlinks[path] = count
        return self._backlinks
