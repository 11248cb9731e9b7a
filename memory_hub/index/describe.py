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


def _count_leads(conn: sqlite3.Connection, where: str = "1", params: tuple[object, ...] = (),
                 having: str = "1") -> dict[str, int]:
    """{lower(lead): how many notes (``n``) have it}, over the notes ``where`` selects: the one
    grouped query over the leads' JSON that every count here is."""
    rows = conn.execute(
        f"SELECT lower(j.value), count(DISTINCT n.id) FROM notes n, json_each(n.leads) j WHERE {where} "
        f"GROUP BY 1 HAVING {having}", params)
    return {r[0]: int(r[1]) for r in rows}


def boilerplate(conn: sqlite3.Connection, threshold: int = BOILERPLATE_NOTES) -> set[str]:
    """Leads (lower-cased) that open ``threshold`` or more notes."""
    return set(_count_leads(conn, params=(threshold,), having="count(DISTINCT n.id) >= ?"))


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
        _set_description(conn, note_id, chosen)
        changed += 1
    return changed


# A sync that changed at most this many notes re-chooses only theirs (``refresh_some``); the full
# ``refresh`` reads every note's leads, ~1.5 s of CPU at 100k notes, which each watcher event paid.
FEW_NOTES = 32
_ESCAPED = frozenset('"\\') | frozenset(chr(i) for i in range(32))  # what JSON writes escaped


def lead_counts(conn: sqlite3.Connection, paths: list[str]) -> dict[str, int]:
    """{lower(lead): notes among ``paths`` that have it}: taken before and after a sync writes them."""
    return _count_leads(conn, "n.path IN (SELECT value FROM json_each(?))", (json.dumps(paths),))


def _notes_with(conn: sqlite3.Connection, leads: set[str]) -> dict[str, int] | None:
    """{lead: how many notes have a lead whose lower() is it} (the count ``boilerplate`` groups by),
    in one pass; None when a lead has characters JSON escapes (the pre-filter would miss them)."""
    if not leads:
        return {}
    if any(_ESCAPED.intersection(lead) or len(lead) > 10_000 for lead in leads):  # LIKE patterns stop at 50 KB
        return None
    # LIKE on the leads' JSON text (ASCII case-insensitive, as lower() is) skips most notes before
    # json_each unpacks any
    likes = " OR ".join(["n.leads LIKE ? ESCAPE '\\'"] * len(leads))
    ordered = sorted(leads)
    patterns = ["%" + lead.replace("%", "\\%").replace("_", "\\_") + "%" for lead in ordered]
    counts = dict.fromkeys(leads, 0)
    counts.update(_count_leads(conn, f"({likes}) AND lower(j.value) IN (SELECT value FROM json_each(?))",
                               (*patterns, json.dumps(ordered))))
    return counts


def refresh_some(conn: sqlite3.Connection, paths: list[str], before: dict[str, int],
                 threshold: int = BOILERPLATE_NOTES) -> int | None:
    """``refresh`` for a sync that rewrote only the notes at ``paths`` (``before``: their
    ``lead_counts`` before the writes). Returns how many descriptions changed, the same as
    ``refresh`` would, or None when it cannot tell without ``refresh``: a lead crossed the
    boilerplate threshold (other notes' descriptions may change) or cannot be looked up exactly.

    Only the leads of these notes changed their counts, so when none crossed the threshold every
    other note keeps its description and just these notes are chosen again."""
    after = lead_counts(conn, paths)
    rows = [(int(r[0]), json.loads(r[1]), r[2]) for r in conn.execute(
        "SELECT id, leads, description FROM notes WHERE path IN (SELECT value FROM json_each(?))",
        (json.dumps(paths),))]
    counts = _notes_with(conn, set(before) | set(after) | {lead.lower() for _, leads, _ in rows for lead in leads})
    if counts is None:
        return None
    for lead in set(before) | set(after):
        was = counts[lead] - after.get(lead, 0) + before.get(lead, 0)
        if (was >= threshold) != (counts[lead] >= threshold):
            return None
    updates = [(note_id, chosen) for note_id, leads, current in rows
               if (chosen := choose(leads, {lead.lower() for lead in leads if counts[lead.lower()] >= threshold}))
               != current]
    for note_id, chosen in updates:
        _set_description(conn, note_id, chosen)
    return len(updates)


def _set_description(conn: sqlite3.Connection, note_id: int, chosen: str) -> None:
    conn.execute("UPDATE notes SET description = ? WHERE id = ?", (chosen, note_id))
    conn.execute("UPDATE fts_trigram SET description = ? WHERE rowid = ?", (chosen, note_id))
    conn.execute("UPDATE fts_words SET description = ? WHERE rowid = ?", (words_text(chosen), note_id))
