"""The link graph: the links table, resolution of targets, and neighbourhoods by breadth-first level CTEs."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..vault.links import Link, Resolver
from . import cache
from .store import set_meta


def write_links(conn: sqlite3.Connection, note_id: int, source_path: str, links: Sequence[Link],
                resolver: Resolver | Callable[[], Resolver] | None, reuse: bool = False) -> None:
    """Replace a note's outgoing links; resolve them now when a resolver is at hand.

    ``resolver`` may be a function that builds one: it is called only for a link the note did not
    have before. ``reuse`` (the stored links are resolved against the current notes: no path or
    alias changed since the last ``resolve_all``) keeps the target of a link the note already had,
    so an edit that adds no link needs no resolver, which is a pass over every note.

    When the note's resolved targets change, ``cache.LINKS_CHANGED`` is stamped in the caller's
    transaction: the in-memory graph (``cached``) is rebuilt only then, not after every edit of a
    note's text (0.7 s of CPU at 100k notes on each watcher sync, before that note's vectors)."""
    before: dict[tuple[str, str], int | None] = {}
    stored = conn.execute("SELECT target, kind, target_id FROM links WHERE source_id = ?", (note_id,)).fetchall()
    if reuse:
        before = {(r[0], r[1]): r[2] for r in stored}
    conn.execute("DELETE FROM links WHERE source_id = ?", (note_id,))
    rows = []
    for link in links:
        target_id = None
        if (link.target, link.kind) in before:
            target_id = before[(link.target, link.kind)]
        elif resolver is not None:
            if not isinstance(resolver, Resolver):
                resolver = resolver()
            path = resolver.resolve(link.target, source_path, link.kind)
            if path is not None:
                row = conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchone()
                target_id = row[0] if row else None
        rows.append((note_id, link.target, target_id, link.kind, link.heading, link.block, link.alias, link.line))
    conn.executemany(
        "INSERT INTO links(source_id, target, target_id, kind, heading, block, alias, line) VALUES (?,?,?,?,?,?,?,?)",
        rows,
    )
    if _edges(note_id, (r[2] for r in stored)) != _edges(note_id, (r[2] for r in rows)):
        links_changed(conn)


def _edges(note_id: int, targets: Iterable[int | None]) -> set[int]:
    """What the link graph keeps of a note's links: its distinct resolved targets, itself left out."""
    return {int(t) for t in targets if t is not None and int(t) != note_id}


def links_changed(conn: sqlite3.Connection) -> None:
    """Stamp, inside the caller's transaction, that some note's resolved links changed (the graph
    follows it). Any writer of the links table other than ``write_links`` and ``resolve_all``
    must call it."""
    set_meta(conn, cache.LINKS_CHANGED, f"{os.getpid()}:{time.time_ns()}")


PATHS_STAMP = "paths_stamp"  # meta: changes in the transaction that changes any note's path or aliases


def _resolver(conn: sqlite3.Connection) -> Resolver:
    rows = conn.execute("SELECT path, aliases FROM notes").fetchall()
    return Resolver((r[0] for r in rows), {r[0]: json.loads(r[1]) for r in rows if r[1] != "[]"})


def build_resolver(conn: sqlite3.Connection) -> Resolver:
    """A resolver over the index's notes. Kept per process while no path or alias changes (the
    ``PATHS_STAMP`` meta, through ``cache.cached``): building one reads every note, ~1 s of CPU at
    100k notes, which a server's watcher paid on every edit."""
    own = not conn.in_transaction  # the stamp and the notes from one snapshot
    if own:
        conn.execute("BEGIN")
    try:
        return cache.cached(conn, "link_resolver", _resolver, keys=(PATHS_STAMP,))
    finally:
        if own:
            conn.execute("COMMIT")


def resolve_all(conn: sqlite3.Connection) -> int:
    """Re-resolve every link against the current set of notes. Returns how many changed.

    Adding, deleting or renaming a note can change what *other* notes' links point to (a dangling
    link comes alive, an ambiguous basename gets a new shortest path), so this runs after any sync
    that changed the set of paths or aliases. Call it inside a transaction.
    """
    resolver = build_resolver(conn)
    ids = {r[0]: r[1] for r in conn.execute("SELECT path, id FROM notes")}
    updates = []
    cur = conn.execute(
        "SELECT l.rowid, l.target, l.kind, l.target_id, n.path FROM links l JOIN notes n ON n.id = l.source_id"
    )
    for rowid, target, kind, old, source in cur.fetchall():
        path = resolver.resolve(target, source, kind)
        new = ids.get(path) if path else None
        if new != old:
            updates.append((new, rowid))
    conn.executemany("UPDATE links SET target_id = ? WHERE rowid = ?", updates)
    if updates:
        links_changed(conn)
    return len(updates)


@dataclass(frozen=True)
class Neighbour:
    """A note within N hops. ``direction`` is 'out' (reached by following links), 'in' (by
    following backlinks), 'both', or a two-step path such as 'out>in'; ``via`` is the hop-1 note
    a two-hop neighbour is reached through."""

    note_id: int
    path: str
    title: str
    hops: int
    direction: str
    via: str | None = None


def _dir(out: bool, inn: bool) -> str:
    return "both" if out and inn else ("out" if out else "in")


def neighbours(conn: sqlite3.Connection, note_id: int, hops: int = 1) -> list[Neighbour]:
    """Notes within ``hops`` links of ``note_id`` in either direction, nearest first."""
    hops = max(1, min(int(hops), 3))
    distance = neighbourhood(conn, [note_id], hops)
    if not distance:
        return []
    info = {
        int(r[0]): (r[1], r[2])
        for r in conn.execute(
            "SELECT id, path, title FROM notes WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(distance)),),
        )
    }
    # Directions of every edge touching the start node or a hop-1 node.
    near = [note_id] + [i for i, h in distance.items() if h == 1]
    edges: dict[tuple[int, int], set[str]] = {}
    for src, dst in conn.execute(
        "SELECT source_id, target_id FROM links WHERE target_id IS NOT NULL AND "
        "(source_id IN (SELECT value FROM json_each(:ids)) OR target_id IN (SELECT value FROM json_each(:ids)))",
        {"ids": json.dumps(near)},
    ):
        edges.setdefault((src, dst), set()).add("out")
        edges.setdefault((dst, src), set()).add("in")

    def step(a: int, b: int) -> str:
        d = edges.get((a, b), set())
        return _dir("out" in d, "in" in d)

    # The hop-1 note each hop-2 note hangs off: the first in ``near`` order that links to it (one
    # pass over the edges; a per-note scan of ``near`` took ~0.6 s around a 2,000-link hub).
    adjacent: dict[int, list[int]] = {}
    for a, b in edges:
        adjacent.setdefault(a, []).append(b)
    via_of: dict[int, int] = {}
    for m in near[1:]:
        for b in adjacent.get(m, ()):
            via_of.setdefault(b, m)

    out: list[Neighbour] = []
    for nid, h in distance.items():
        if nid not in info:
            continue
        path, title = info[nid]
        if h == 1:
            out.append(Neighbour(nid, path, title, 1, step(note_id, nid)))
            continue
        via = via_of.get(nid)
        if via is not None:
            out.append(Neighbour(nid, path, title, h, f"{step(note_id, via)}>{step(via, nid)}", info[via][0]))
        else:
            out.append(Neighbour(nid, path, title, h, "indirect"))
    out.sort(key=lambda n: (n.hops, n.path))
    return out


# Neighbourhoods by recursive CTE, following links both ways. UNION (not UNION ALL) makes SQLite
# drop repeated (id, hops) rows, which keeps the walk finite on cyclic graphs; the outer GROUP BY
# keeps each note's nearest distance. The covering indexes links_source / links_target make each
# step an index range scan. On obsidian-hub (6.6k notes, ~2,700 notes within two hops of a median
# note) a 2-hop walk measured ~8 ms CPU p95; chained per-level CTEs were ~4 ms, but the recursive
# form is the one that generalises to any N and reads as what it is.
_NEIGHBOURHOOD_SQL = """
WITH RECURSIVE walk(id, hops) AS (
    SELECT value, 0 FROM json_each(:seeds)
    UNION
    SELECT l.target_id, w.hops + 1
      FROM walk w JOIN links l ON l.source_id = w.id
     WHERE w.hops < :max_hops AND l.target_id IS NOT NULL
    UNION
    SELECT l.source_id, w.hops + 1
      FROM walk w JOIN links l ON l.target_id = w.id
     WHERE w.hops < :max_hops
)
SELECT id, min(hops) FROM walk GROUP BY id HAVING min(hops) > 0
"""


def neighbourhood(conn: sqlite3.Connection, note_ids: Sequence[int], hops: int = 1) -> dict[int, int]:
    """Notes within ``hops`` (1–3) links of any seed, following links both ways: {note id: hop
    distance to the nearest seed}, seeds excluded."""
    if not note_ids:
        return {}
    seeds = sorted({int(i) for i in note_ids})
    rows = conn.execute(_NEIGHBOURHOOD_SQL, {"seeds": json.dumps(seeds), "max_hops": max(1, min(int(hops), 3))})
    return {int(i): int(h) for i, h in rows}


def adjacency(conn: sqlite3.Connection, note_ids: Iterable[int]) -> dict[int, set[int]]:
    """Each note's direct neighbours (links either way), for many notes in one query."""
    ids = sorted({int(i) for i in note_ids})
    out: dict[int, set[int]] = {i: set() for i in ids}
    if not ids:
        return out
    rows = conn.execute(
        "SELECT source_id, target_id FROM links WHERE target_id IS NOT NULL AND "
        "(source_id IN (SELECT value FROM json_each(:ids)) OR target_id IN (SELECT value FROM json_each(:ids)))",
        {"ids": json.dumps(ids)},
    )
    for src, dst in rows:
        if src in out and dst != src:
            out[src].add(dst)
        if dst in out and dst != src:
            out[dst].add(src)
    return out


class LinkGraph:
    """Every note's direct neighbours (resolved links either way, self-links left out), in memory.

    Search expands the graph on every query; asking SQLite for the seeds' links and then for their
    neighbours' counts cost ~8 ms a query on obsidian-hub (22k links), while the whole graph loads in
    one scan. It is held as two numpy arrays (compressed rows: each note's sorted, distinct
    neighbours side by side), not a set per note: at 100k notes and 650k links a dict of frozensets
    held ~150 MB of the serving process, these arrays ~6 MB; a query asks for a few dozen notes'
    neighbours and builds only those sets. ``adjacency`` answers exactly as the SQL function of
    that name does. Load it through ``cached`` so it follows the index."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        pairs = np.fromiter(
            (v for row in conn.execute("SELECT source_id, target_id FROM links "
                                       "WHERE target_id IS NOT NULL AND target_id != source_id") for v in row),
            dtype=np.int64)
        pairs = pairs.reshape(-1, 2)
        both = np.unique(np.concatenate([pairs, pairs[:, ::-1]]), axis=0)  # (note, neighbour), sorted, distinct
        self.ids, starts = np.unique(both[:, 0], return_index=True)  # notes with a neighbour, ascending
        self.bounds = np.append(starts, len(both))  # note i's neighbours: near[bounds[i]:bounds[i + 1]]
        self.near = both[:, 1].copy()

    def _slots(self, ids: list[int]) -> np.ndarray:
        """Each id's row (-1 for a note with no neighbour), found in one vectorised search."""
        if not ids or not len(self.ids):
            return np.full(len(ids), -1, dtype=np.int64)
        wanted = np.asarray(ids, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.ids, wanted), len(self.ids) - 1)
        return np.where(self.ids[at] == wanted, at, -1)

    def __contains__(self, note_id: object) -> bool:
        """Whether the note has at least one neighbour."""
        return isinstance(note_id, int) and int(self._slots([note_id])[0]) >= 0

    def neighbours(self, note_id: int) -> frozenset[int]:
        """The note's neighbours (empty for a note with none, or unknown)."""
        return self.adjacency([note_id])[int(note_id)]

    def _degrees(self, ids: list[int]) -> np.ndarray:
        """How many distinct neighbours each id has (0 for a note with none), from the row bounds."""
        slots = self._slots(ids)
        found = slots >= 0
        degree = np.zeros(len(ids), dtype=np.int64)
        degree[found] = self.bounds[slots[found] + 1] - self.bounds[slots[found]]
        return degree

    def degree(self, note_id: int) -> int:
        """How many distinct neighbours the note has."""
        return int(self._degrees([int(note_id)])[0])

    def adjacency(self, note_ids: Iterable[int]) -> dict[int, frozenset[int]]:
        """As ``adjacency``: {note id: its neighbours} for each of ``note_ids`` (read-only sets)."""
        ids = sorted({int(i) for i in note_ids})
        empty: frozenset[int] = frozenset()
        bounds, near = self.bounds, self.near
        return {i: (frozenset(near[bounds[r]:bounds[r + 1]].tolist()) if r >= 0 else empty)
                for i, r in zip(ids, self._slots(ids).tolist(), strict=True)}

    def hubs(self, note_ids: Iterable[int], limit: int) -> set[int]:
        """The notes among ``note_ids`` with more than ``limit`` distinct neighbours (links either
        way, duplicates and self-links not counted)."""
        ids = list({int(i) for i in note_ids})
        return {i for i, d in zip(ids, self._degrees(ids).tolist(), strict=True) if d > limit}


GRAPH_KEYS = (cache.LINKS_CHANGED, cache.LINKS_RESOLVED)  # the meta stamps the in-memory graph follows


def cached(conn: sqlite3.Connection) -> LinkGraph:
    """The link graph of ``conn``'s index, kept per process until a sync changes some note's
    resolved links (``index/cache.py``; an edit of a note's text keeps it)."""
    return cache.cached(conn, "link_graph", LinkGraph, keys=GRAPH_KEYS)


def backlink_counts(conn: sqlite3.Connection, note_ids: Sequence[int] | None = None) -> dict[int, int]:
    """How many distinct notes link to each note."""
    if note_ids is None:
        rows = conn.execute(
            "SELECT target_id, count(DISTINCT source_id) FROM links WHERE target_id IS NOT NULL GROUP BY target_id"
        )
    else:
        rows = conn.execute(
            "SELECT target_id, count(DISTINCT source_id) FROM links WHERE target_id IN "
            "(SELECT value FROM json_each(?)) GROUP BY target_id",
            (json.dumps(list(note_ids)),),
        )
    return {int(t): int(c) for t, c in rows}


def outgoing(conn: sqlite3.Connection, note_id: int) -> list[sqlite3.Row]:
    """A note's links as written, with where each resolved (path NULL when dangling)."""
    return conn.execute(
        "SELECT l.target, l.kind, l.heading, l.block, l.alias, l.line, n.path AS target_path "
        "FROM links l LEFT JOIN notes n ON n.id = l.target_id WHERE l.source_id = ? ORDER BY l.line, l.rowid",
        (note_id,),
    ).fetchall()
