"""The SQLite index file: schema, connections (WAL, busy timeout) and the single-writer lock.

One file, ``<vault>/.memory_hub/index.sqlite3``. Readers never wait for writers (WAL). Writers take
an exclusive file lock first, so the server, the watcher, a CLI sync and a git hook can all run at
once without "database is locked" errors or lost updates.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from ..config import db_path, index_dir
from ..locks import file_lock

SCHEMA_VERSION = 2
# Schema changes an existing index takes in place on open (version → statements). Each one leaves
# a note that makes the next sync re-read every note, so new columns are filled from the files.
MIGRATIONS: dict[int, str] = {
    2: "ALTER TABLE notes ADD COLUMN leads TEXT NOT NULL DEFAULT '[]';",  # description candidates
}

# Column order of both lexical tables; the bm25() weights in lexical.py follow it.
FTS_COLUMNS = ("title", "aliases", "tags", "description", "body")

# Covering indexes in both directions: graph walks read (source, target) pairs from the index alone.
LINK_INDEXES = """
CREATE INDEX IF NOT EXISTS links_out ON links(source_id, target_id);
CREATE INDEX IF NOT EXISTS links_in ON links(target_id, source_id);
DROP INDEX IF EXISTS links_source;
DROP INDEX IF EXISTS links_target;
"""

# What a sync compares with the files, as a covering index: a no-change sync reads every note's
# stamp, and the notes rows are wide (frontmatter, leads), so a table scan read ~0.3 KB of pages a
# note (1.1 s of a 100k-note no-change sync), this index ~60 bytes.
STAMP_INDEX = "CREATE INDEX IF NOT EXISTS notes_stamp ON notes(path, mtime_ns, size, hash);"

# A folder filter is ``path LIKE 'prefix%'``, which is case-insensitive (ASCII), so SQLite can
# narrow it with an index only when that index folds case the same way (NOCASE). Without it every
# filtered search scanned every note's path (9 ms at 30k notes) before or while matching.
PATH_INDEX = "CREATE INDEX IF NOT EXISTS notes_path_nocase ON notes(path COLLATE NOCASE);"

PENDING_SCHEMA = ("CREATE TABLE IF NOT EXISTS fts_pending (rowid INTEGER PRIMARY KEY, "
                  + ", ".join(f"{side}_{c} TEXT NOT NULL" for side in "tw" for c in FTS_COLUMNS) + ");")

# Usage logs folded (index/usage.py): per source file, how far it was read; per source and note,
# what it said. Rebuilt from the logs like everything else here.
USAGE_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage_sources (
    source    TEXT PRIMARY KEY,     -- "log/<machine>.jsonl" | "journal/<machine>.jsonl"
    identity  TEXT NOT NULL,        -- device:inode:hash of the first bytes; a change means re-read
    offset    INTEGER NOT NULL,     -- bytes folded (always at a line end)
    events    INTEGER NOT NULL DEFAULT 0,
    bad_lines INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS usage (
    source          TEXT NOT NULL,
    path            TEXT NOT NULL,
    reads           INTEGER NOT NULL DEFAULT 0,
    useful          INTEGER NOT NULL DEFAULT 0,
    last_read       REAL,
    baseline_reads  INTEGER,        -- from a baseline event: frontmatter counts that predate the logs
    baseline_useful INTEGER,
    PRIMARY KEY (source, path)
);
CREATE INDEX IF NOT EXISTS usage_path ON usage(path);
"""

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

CREATE TABLE IF NOT EXISTS notes (
    id          INTEGER PRIMARY KEY,
    path        TEXT NOT NULL UNIQUE,
    title       TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL,
    scope       TEXT,
    tags        TEXT NOT NULL DEFAULT '[]',   -- JSON list
    aliases     TEXT NOT NULL DEFAULT '[]',   -- JSON list
    dates       TEXT NOT NULL DEFAULT '{{}}',   -- JSON object: created, updated, due, deadline…
    frontmatter TEXT NOT NULL DEFAULT '{{}}',   -- JSON object, the whole block
    ranked      INTEGER NOT NULL,              -- 1 when the note takes part in lexical ranking
    leads       TEXT NOT NULL DEFAULT '[]',    -- JSON list: description candidates (index/describe.py)
    mtime_ns    INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    hash        TEXT NOT NULL,
    indexed_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS notes_kind ON notes(kind);
{STAMP_INDEX}
{PATH_INDEX}

-- Trigram BM25: substring matching for terms of 3+ characters in any script.
CREATE VIRTUAL TABLE IF NOT EXISTS fts_trigram USING fts5(
    {", ".join(FTS_COLUMNS)}, tokenize = 'trigram'
);
-- Word BM25 over text whose CJK runs were split into bigrams: catches what trigram cannot on
-- SQLite 3.40 (terms of one or two characters such as S3, Go, 認証) and stems English words.
CREATE VIRTUAL TABLE IF NOT EXISTS fts_words USING fts5(
    {", ".join(FTS_COLUMNS)}, tokenize = "porter unicode61 remove_diacritics 2 tokenchars '_'"
);

-- A bulk sync's lexical rows, waiting for their notes' descriptions (lexical.stage_note): each
-- moves into both FTS tables once, with the chosen description. Empty between syncs.
{PENDING_SCHEMA}
CREATE TABLE IF NOT EXISTS links (
    source_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
    target    TEXT NOT NULL,          -- as written, without heading/alias
    target_id INTEGER REFERENCES notes(id) ON DELETE SET NULL,  -- NULL: dangling
    kind      TEXT NOT NULL,          -- wikilink | embed | markdown | frontmatter
    heading   TEXT,
    block     TEXT,
    alias     TEXT,
    line      INTEGER NOT NULL DEFAULT 0
);
{LINK_INDEXES}
-- Files the last sync could not index, with the reason (broken YAML is a problem on an indexed note).
CREATE TABLE IF NOT EXISTS problems (
    path     TEXT NOT NULL,
    problem  TEXT NOT NULL,
    at       REAL NOT NULL,
    mtime_ns INTEGER,  -- a file skipped unread: its stat then (unchanged → not a pending change)
    size     INTEGER
);
CREATE INDEX IF NOT EXISTS problems_path ON problems(path);
{USAGE_SCHEMA}"""


def set_meta(conn: sqlite3.Connection, key: str, value: object) -> None:
    """Write one meta value inside the caller's transaction (for code that holds a connection, not a ``Store``)."""
    conn.execute(
        "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        (key, value if isinstance(value, str) else json.dumps(value)),
    )


def connect(path: Path, busy_ms: int = 30_000, named_rows: bool = True,
            factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    """Open a connection with the settings every user of the index relies on (recall's own index
    too, which waits ``busy_ms`` less and reads plain tuples: a warm open makes one a note).
    ``factory``: a ``sqlite3.Connection`` subclass (``benchmarks/query_profile.py`` times statements)."""
    conn = sqlite3.connect(path, timeout=busy_ms / 1000, isolation_level=None, check_same_thread=False,
                           factory=factory)
    if named_rows:
        conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Store:
    """The index of one vault. Connections are per thread; use ``conn`` freely from any thread."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault)
        self.dir = index_dir(self.vault)
        self.path = db_path(self.vault)
        self._local = threading.local()
        self.migrated_from: int | None = None  # the schema version this open upgraded, if any
        self._indexes_checked = False  # whether a writer of this Store has added missing indexes
        self._ensure()

    def _ensure(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        conn = self.conn
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION or (version and version + 1 not in MIGRATIONS and version != SCHEMA_VERSION):
            raise RuntimeError(
                f"index schema {version} is not {SCHEMA_VERSION}; run `memory-hub index --rebuild`"
            )
        if version == 0:
            self._indexes_checked = True  # SCHEMA makes every index
            with self.writer():
                conn.executescript(SCHEMA)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        elif version < SCHEMA_VERSION:
            with self.writer():
                version = conn.execute("PRAGMA user_version").fetchone()[0]  # another process may have done it
                if version < SCHEMA_VERSION:  # one transaction: all steps land, or none
                    steps = "".join(MIGRATIONS[v] for v in range(version + 1, SCHEMA_VERSION + 1))
                    conn.executescript(f"BEGIN; {steps} DELETE FROM meta WHERE key = 'parse_version';"
                                       f" PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
                    self.migrated_from = version
        if version:
            self._upgrade_tables(conn)

    def _upgrade_tables(self, conn: sqlite3.Connection) -> None:
        """Add the tables and columns an older index lacks, in place, on open: readers query them, so
        without them a search could not run at all. Indexes that only make reads faster wait for the
        first writer (``_upgrade_indexes``): an open that only reads writes nothing for those."""
        names = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE name IN ('usage', 'fts_pending')")}
        if "usage" not in names:
            with self.writer():  # an index made before usage moved out of the notes
                conn.executescript(USAGE_SCHEMA)
        if "fts_pending" not in names:
            with self.writer():  # an index made before bulk syncs staged their rows
                conn.execute(PENDING_SCHEMA)
        columns = {r[1] for r in conn.execute("PRAGMA table_info(problems)")}
        if "mtime_ns" not in columns:
            with self.writer():  # an index made before skipped files kept their stat
                conn.execute("ALTER TABLE problems ADD COLUMN mtime_ns INTEGER")
                conn.execute("ALTER TABLE problems ADD COLUMN size INTEGER")

    def _upgrade_indexes(self, conn: sqlite3.Connection) -> None:
        """Create the indexes an older index file lacks; run by the first ``writer()`` of this Store
        (under its lock), never by an open that only reads: a search works without them, slower."""
        names = {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE name IN ('links_in', 'notes_stamp', 'notes_path_nocase')")}
        if "links_in" not in names:  # an index made before the covering link indexes existed
            conn.executescript(LINK_INDEXES)
        if "notes_stamp" not in names:  # an index made before the stamp index existed
            conn.execute(STAMP_INDEX)
        if "notes_path_nocase" not in names:  # an index made before folder filters had an index of their own
            conn.execute(PATH_INDEX)

    @property
    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    @contextlib.contextmanager
    def writer(self, timeout: float = 60.0) -> Iterator[sqlite3.Connection]:
        """Hold the vault's single-writer lock (re-entrant within a thread)."""
        depth = getattr(self._local, "lock_depth", 0)
        if depth:
            self._local.lock_depth = depth + 1
            try:
                yield self.conn
            finally:
                self._local.lock_depth -= 1
            return
        with file_lock(self.dir / "write.lock", timeout=timeout):
            self._local.lock_depth = 1
            try:
                if not self._indexes_checked:
                    self._upgrade_indexes(self.conn)
                    self._indexes_checked = True
                yield self.conn
            finally:
                self._local.lock_depth = 0

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction under the writer lock: all of it lands, or none."""
        with self.writer() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- small helpers used across the index layer ---------------------------------------------

    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, conn: sqlite3.Connection, key: str, value: object) -> None:
        set_meta(conn, key, value)

    def note_row(self, path: str) -> sqlite3.Row | None:
        return self.conn.execute("SELECT * FROM notes WHERE path = ?", (path,)).fetchone()

    def note_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM notes WHERE kind != 'attachment'").fetchone()[0]


def reset(vault: Path) -> None:
    """Delete the SQLite index files (for ``--rebuild``); other caches are left alone."""
    base = db_path(vault)
    for suffix in ("", "-wal", "-shm"):
        p = Path(str(base) + suffix)
        if p.exists():
            p.unlink()
