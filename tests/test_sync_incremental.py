"""A sync of a few notes does only their work: descriptions chosen again for them alone, link targets
kept for links a note already had, the resolver kept while no path changes. Each shortcut must leave
the index exactly as the full passes would: after every step, the full passes find nothing to change."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memory_hub.index import describe, graph
from memory_hub.index.store import Store
from memory_hub.index.sync import DESCRIPTIONS_PENDING, sync

SHARED = "Note: a bunch of great things happen in Discord every week, but the links need a login."


def _roundup(n: int, lead: str = SHARED) -> str:
    return f"# Roundup {n}\n\n{lead}\n\nThis week: plugin {n} adds [[board {n % 3}]] and [[Ünïcode Note]].\n"


def _full_passes_change_nothing(store: Store) -> None:
    """The full description and link passes, in a transaction rolled back: nothing to change."""
    conn = store.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        assert describe.refresh(conn) == 0
        assert graph.resolve_all(conn) == 0
    finally:
        conn.execute("ROLLBACK")


_clock = [time.time_ns() - 1000 * 10**9]


def _settle(path: Path) -> None:
    """An mtime in the past, a new one each time: never "racy" (re-read by every sync)."""
    _clock[0] += 10**9
    os.utime(path, ns=(_clock[0], _clock[0]))


def _edit(vault: Path, rel: str, text: str) -> None:
    path = vault / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    _settle(path)


def _settled(make_vault, files: dict[str, str]) -> tuple[Path, Store]:
    vault, store = make_vault(files)
    for rel in files:
        _settle(vault / rel)
    sync(vault, store=store)
    return vault, store


def test_few_note_syncs_match_the_full_passes(make_vault, monkeypatch) -> None:
    files = {f"r/{n}.md": _roundup(n) for n in range(describe.BOILERPLATE_NOTES - 1)}
    files.update({"board 0.md": "# Board 0\n\nKanban.\n", "b/board 1.md": "# Board 1\n\nMore.\n",
                  "ünïcode note.md": "# U\n\nA note with a non-ASCII name.\n"})
    vault, store = _settled(make_vault, files)
    assert store.get_meta(DESCRIPTIONS_PENDING) == "0"
    _full_passes_change_nothing(store)
    assert store.note_row("r/0.md")["description"] == SHARED  # 3 copies: not boilerplate yet

    steps = [
        ("r/3.md", _roundup(3)),  # the 4th copy: the lead becomes boilerplate for every roundup
        ("r/0.md", _roundup(0, "A lead of its own, with 100% of the _words_ and \"quotes\".")),  # back to 3
        ("r/1.md", _roundup(1) + "\nAn edit below the leads.\n"),  # no lead changes
        ("r/2.md", _roundup(2) + "\nA new link: [[board 1]] and [[missing note]].\n"),
        ("board 2.md", "# Board 2\n\nA new target for [[board 2]] links.\n"),  # a new path
    ]
    full = describe.refresh
    fulls: list[int] = []
    monkeypatch.setattr(describe, "refresh", lambda conn: fulls.append(1) or full(conn))
    for rel, text in steps:
        before = len(fulls)
        _edit(vault, rel, text)
        sync(vault, store=store)
        # the full pass only where a lead crossed the threshold or has characters JSON escapes
        assert len(fulls) - before == (1 if rel in ("r/3.md", "r/0.md") else 0), rel
        _full_passes_change_nothing(store)
        sync(vault, store=store, only=[rel])  # the watcher's path, nothing left to do
        _full_passes_change_nothing(store)
    assert store.note_row("r/1.md")["description"] == SHARED
    assert store.note_row("r/0.md")["description"].startswith("A lead of its own")

    (vault / "r/3.md").unlink()  # a deletion through the watcher's path
    sync(vault, store=store, only=["r/3.md"])
    _full_passes_change_nothing(store)


def test_a_stopped_sync_makes_the_next_choose_every_description(make_vault) -> None:
    files = {f"r/{n}.md": _roundup(n) for n in range(describe.BOILERPLATE_NOTES)}
    vault, store = _settled(make_vault, files)
    assert store.note_row("r/0.md")["description"].startswith("This week")
    # as a sync stopped between writing a note and choosing descriptions would leave it
    with store.transaction() as conn:
        conn.execute("UPDATE notes SET description = 'stale' WHERE path = 'r/0.md'")
        store.set_meta(conn, DESCRIPTIONS_PENDING, "1")
    _edit(vault, "r/1.md", _roundup(1) + "\nMore.\n")
    sync(vault, store=store)
    assert store.note_row("r/0.md")["description"].startswith("This week")
    _full_passes_change_nothing(store)


def test_the_resolver_is_kept_until_a_path_changes(make_vault) -> None:
    vault, store = _settled(make_vault, {"a.md": "# A\n\n[[b]]\n", "b.md": "# B\n"})
    first = graph.build_resolver(store.conn)
    assert graph.build_resolver(store.conn) is first
    _edit(vault, "a.md", "# A\n\n[[b]] [[c]]\n")
    sync(vault, store=store)
    assert graph.build_resolver(store.conn) is first  # an edit: same paths, same resolver
    _edit(vault, "c.md", "# C\n")
    sync(vault, store=store)
    again = graph.build_resolver(store.conn)
    assert again is not first and again.resolve("c") == "c.md"
    ids = dict(store.conn.execute("SELECT path, id FROM notes").fetchall())
    targets = {r[0] for r in store.conn.execute("SELECT target_id FROM links WHERE source_id = ?", (ids["a.md"],))}
    assert targets == {ids["b.md"], ids["c.md"]}  # the dangling link came alive
    _full_passes_change_nothing(store)
