"""Per-process copies of index data that only a sync changes, for the search path.

A warm search runs many small queries whose answers are the same until the next sync: the link
graph, the path → id map of the ranked notes. Reading them from SQLite on every query cost more
than the ranking itself on obsidian-hub (the notes table's rows are wide, so even an indexed path
lookup reads each row). Each value here is built once per index file and rebuilt when the index
says it changed: every sync write batch stamps ``notes_changed_at`` and link re-resolution stamps
``links_resolved_at`` (``index/sync.py``), each inside the transaction that makes the change, so a
reader never sees new rows with an old stamp. ``last_sync`` is not part of it: every full sync
writes it, and a sync that found nothing to do must not throw the copies away.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

NOTES_CHANGED = "notes_changed_at"  # meta: when any note row last changed (later stages compare it)
LINKS_RESOLVED = "links_resolved_at"  # meta: when links were last re-resolved (per-process caches compare it)
LINKS_CHANGED = "links_changed_at"  # meta: when any note's resolved links last changed (the link graph compares it)
STAMP_KEYS = (LINKS_RESOLVED, NOTES_CHANGED)  # meta keys whose values make the stamp


def _stamp_sql(keys: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{k}'" for k in sorted(keys))
    return ("SELECT (SELECT file FROM pragma_database_list WHERE name = 'main'), "
            "(SELECT group_concat(key || '=' || value, ';') FROM "
            f"(SELECT key, value FROM meta WHERE key IN ({listed}) ORDER BY key))")


_values: dict[tuple[str, str], tuple[str, Any]] = {}
_lock = threading.Lock()
# A fresh server's first search and its start-up catch-up (``warm_caches``) missed together and both
# built the link graph (~1 s of CPU each at 100k notes, under one GIL): builds are single-flight.
_building: dict[tuple[str, str], threading.RLock] = {}


_pin = threading.local()


@contextlib.contextmanager
def one_look(conn: sqlite3.Connection) -> Iterator[None]:
    """Within this block, this thread reads ``conn``'s change stamps (``stamp`` here, the lexical
    counts' ``lexical._generation``) once, not at every cached lookup: one search asked ~20
    times, each a statement or two file stats, and each of those lets the vector channel's thread
    take the GIL. A sync that commits meanwhile is seen by the next block (a search started
    before it finishes on what it began with)."""
    if getattr(_pin, "conn", None) is conn:  # already inside one for this connection: keep its stamps
        yield
        return
    before = (getattr(_pin, "conn", None), getattr(_pin, "seen", None))
    _pin.conn, _pin.seen = conn, {}
    try:
        yield
    finally:
        _pin.conn, _pin.seen = before


def pinned(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """The stamps already read in this thread's ``one_look(conn)`` block (to fill), else None."""
    return _pin.seen if getattr(_pin, "conn", None) is conn else None  # type: ignore[no-any-return]


_SHARED_KEYS = (LINKS_CHANGED, LINKS_RESOLVED, NOTES_CHANGED)  # read together: one statement a search
_SHARED_SQL = ("SELECT (SELECT file FROM pragma_database_list WHERE name = 'main'), "
               "(SELECT json_group_object(key, value) FROM meta WHERE key IN ("
               + ", ".join(f"'{k}'" for k in _SHARED_KEYS) + "))")


def stamp(conn: sqlite3.Connection, keys: tuple[str, ...] = STAMP_KEYS) -> tuple[str, str]:
    """(the index file, what its last change was): equal stamps, equal notes and links.
    ``keys``: the meta keys read (the default: every note and link change). Keys among the usual
    ones (notes, links) are read in one statement, once per ``one_look`` block, whichever asks."""
    seen = pinned(conn)
    slot = "stamp" if keys == STAMP_KEYS else "stamp:" + ",".join(keys)
    if seen is not None and slot in seen:
        return seen[slot]  # type: ignore[no-any-return]
    if set(keys) <= set(_SHARED_KEYS):
        shared = seen.get("shared") if seen is not None else None
        if shared is None:
            db, values = conn.execute(_SHARED_SQL).fetchone()
            shared = (str(db), json.loads(values or "{}"))
            if seen is not None:
                seen["shared"] = shared
        db, values = shared
        found = (db, ";".join(f"{k}={values[k]}" for k in sorted(keys) if k in values))
    else:
        db, changed = conn.execute(_stamp_sql(keys)).fetchone()
        found = (str(db), str(changed))
    if seen is not None:
        seen[slot] = found
    return found


def cached(conn: sqlite3.Connection, name: str, build: Callable[[sqlite3.Connection], T],
           keys: tuple[str, ...] = STAMP_KEYS) -> T:
    """``build(conn)``, kept per process and index file under ``name`` until the stamp moves.
    ``keys``: the meta keys that stamp it (a value that depends on less than every note, such as
    the link resolver on paths and aliases only, names its own). Treat the value as read-only:
    every thread of the process shares it."""
    db, now = stamp(conn, keys)
    with _lock:
        hit = _values.get((db, name))
    if hit is not None and hit[0] == now:
        return hit[1]  # type: ignore[no-any-return]
    with _lock:
        building = _building.setdefault((db, name), threading.RLock())
    with building:  # one build per value: a thread that misses while another builds it waits for that one
        with _lock:
            hit = _values.get((db, name))
        if hit is not None and hit[0] == now:
            return hit[1]  # type: ignore[no-any-return]
        value = build(conn)
        with _lock:
            _values[(db, name)] = (now, value)
    return value


def _ranked_ids(conn: sqlite3.Connection) -> dict[str, int]:
    return {str(r[0]): int(r[1]) for r in conn.execute("SELECT path, id FROM notes WHERE ranked = 1")}


def ranked_ids(conn: sqlite3.Connection) -> dict[str, int]:
    """{path: note id} of every ranked note (read-only)."""
    return cached(conn, "ranked_ids", _ranked_ids)


def ranked_note_ids(conn: sqlite3.Connection) -> frozenset[int]:
    """The ids of every ranked note."""
    return cached(conn, "ranked_note_ids", lambda c: frozenset(ranked_ids(c).values()))
