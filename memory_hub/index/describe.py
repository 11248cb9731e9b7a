"""The description a note is shown with: its first *distinctive* lead, never a vault's boilerplate.

A note's description is what recall and search show an agent in place of the body, so it must say
what this note is. Real vaults repeat text across notes: a template's unfilled field list
("Official website: #placeholder/link …", 33 notes on obsidian-hub), a disclaimer every weekly
roundup opens with ("Note: a bunch of great things happen in Discord…"), a theme designer's credit
line. Which text is boilerplate is a fact about the vault, not the file, so it is decided here,
after a sync: a lead (``Note.leads``: the frontmatter description, then the first prose paragraphs)
found in ``BOILERPLATE_NOTES`` or more notes is boilerplate, and the note is described by its next
lead — or by nothing, when every lead is shared (the title then speaks for the note).

The chosen description is written to the notes table and to both lexical tables' description
column, so ranking does not boost every roundup for "Discord" either. One grouped query over the
leads of every note (≈20 ms on obsidian-hub's 6,571 notes), run after each sync that changed
something.
"""

from __future__ import annotations

import json
import sqlite3

from .terms import words_text

BOILERPLATE_NOTES = 4  # notes a lead may open before it says nothing about any one of them


def boilerplate(conn: sqlite3.Connection, threshold: int = BOILERPLATE_NOTES) -> set[str]:
    """Leads (lower-cased) that open ``threshold`` or more notes."""
    rows = conn.execute(
        "SELECT lower(j.value) AS lead FROM notes n, json_each(n.leads) j GROUP BY lead "
        "HAVING count(DISTINCT n.id) >= ?", (threshold,))
    return {r[0] for r in rows}


def choose(leads: list[str], common: set[str]) -> str:
    """The first lead that is not boilerplate, else ''."""
    return next((lead for lead in leads if lead.lower() not in common), "")


def refresh(conn: sqlite3.Connection, threshold: int = BOILERPLATE_NOTES) -> int:
    """Re-choose every note's description from its leads; returns how many changed.

    Runs inside the caller's write transaction.
    """
    common = boilerplate(conn, threshold)
    changed = 0
    for note_id, leads_json, current in conn.execute("SELECT id, leads, description FROM notes").fetchall():
        chosen = choose(json.loads(leads_json), common)
        if chosen == current:
            continue
        conn.execute("UPDATE notes SET description = ? WHERE id = ?", (chosen, note_id))
        conn.execute("UPDATE fts_trigram SET description = ? WHERE rowid = ?", (chosen, note_id))
        conn.execute("UPDATE fts_words SET description = ? WHERE rowid = ?", (words_text(chosen), note_id))
        changed += 1
    return changed
