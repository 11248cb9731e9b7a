"""Descriptions that say what a note is (boilerplate shared by many notes is skipped), and the
automatic upgrade of an index made by an older note parser / schema."""

from __future__ import annotations

import json
import sqlite3

from memory_hub.index.describe import BOILERPLATE_NOTES
from memory_hub.index.lexical import search_words
from memory_hub.index.store import SCHEMA_VERSION, Store
from memory_hub.index.sync import sync
from memory_hub.index.terms import analyze_query

DISCLAIMER = "Note: a bunch of great things happen in Discord every week, but the links need a login."


def _roundup(n: int) -> str:
    return f"# Roundup {n}\n\n_{DISCLAIMER}_\n\nThis week: plugin number {n} adds kanban boards for topic {n}.\n"


def _descriptions(store: Store) -> dict[str, str]:
    return dict(store.conn.execute("SELECT path, description FROM notes").fetchall())


def test_a_lead_shared_by_many_notes_gives_way_to_the_next(make_vault) -> None:
    files = {f"roundup/{n}.md": _roundup(n) for n in range(BOILERPLATE_NOTES)}
    files["other.md"] = f"# Other\n\n{DISCLAIMER}\n"  # only its boilerplate: described by nothing
    files["fm.md"] = "---\ndescription: Written by hand.\n---\n# FM\n\nBody.\n"
    vault, store = make_vault(files)
    desc = _descriptions(store)
    assert desc["roundup/0.md"] == "This week: plugin number 0 adds kanban boards for topic 0."
    assert desc["other.md"] == "" and desc["fm.md"] == "Written by hand."
    # the lexical tables follow: the disclaimer's words no longer score any roundup's description
    hits = {i for i, _ in search_words(store.conn, analyze_query("discord login"))}
    ids = dict(store.conn.execute("SELECT path, id FROM notes").fetchall())
    assert hits == {ids[p] for p in files if p != "fm.md"}  # still found by body text, not boosted
    row = store.conn.execute("SELECT description FROM fts_words WHERE rowid = ?", (ids["roundup/0.md"],)).fetchone()
    assert "discord" not in row[0].lower()

    # one fewer copy and the lead is a description again — the change is picked up on the next sync
    (vault / "roundup/0.md").unlink()
    (vault / "other.md").unlink()
    report = sync(vault, store=store)
    assert report.descriptions_changed == BOILERPLATE_NOTES - 1
    assert _descriptions(store)["roundup/1.md"] == DISCLAIMER


def test_an_old_index_is_upgraded_and_reread_on_the_next_sync(make_vault) -> None:
    files = {"05 - Concepts/PARA.md": "---\ntags: [x]\n---\nSome text about PARA.\n\n# This note in GitHub\n",
             "T - MOCs.md": "# {{title}}\n\n#placeholder/description\n",
             "plain.md": "# Plain\n\nNothing changes here.\n"}
    vault, store = make_vault(files)
    assert store.note_row("05 - Concepts/PARA.md")["title"] == "PARA"
    # make it look like an index from the previous release: schema 1, no leads, old parser, old titles
    store.close()
    conn = sqlite3.connect(store.path)
    conn.executescript("ALTER TABLE notes DROP COLUMN leads; PRAGMA user_version = 1;"
                       "DELETE FROM meta WHERE key = 'parse_version';"
                       "UPDATE notes SET title = 'This note in GitHub' WHERE path LIKE '05%';"
                       "UPDATE notes SET title = '{{title}}', kind = 'knowledge', ranked = 1 WHERE path LIKE 'T -%';")
    conn.close()

    upgraded = Store(vault)
    assert upgraded.migrated_from == 1
    assert upgraded.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    report = sync(vault, store=upgraded)
    assert sorted(report.reparsed) == sorted(files) and not report.updated and not report.added
    assert "re-read (the note parser changed)" in report.summary()
    assert upgraded.note_row("05 - Concepts/PARA.md")["title"] == "PARA"
    tpl = upgraded.note_row("T - MOCs.md")
    assert (tpl["kind"], tpl["ranked"], tpl["title"]) == ("template", 0, "T - MOCs")
    assert json.loads(upgraded.note_row("plain.md")["leads"]) == ["Nothing changes here."]
    # once re-read, a sync is a no-op again
    again = sync(vault, store=upgraded)
    assert not again.reparsed and not again.changed
