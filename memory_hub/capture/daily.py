"""Linking a capture from the day's daily note, without rewriting a person's text.

The daily note ``daily/YYYY-MM-DD.md`` is created from ``templates/daily.md`` when missing (folder,
file-name format and template follow ``folders.daily``, ``daily.format`` and ``daily.template``,
which default to Obsidian's own daily-notes settings). A link is
only ever *inserted*: as a new line at the end of the "Captured today" / 「今日のキャプチャ」 section
when there is one (an empty ``- `` placeholder line is filled rather than left dangling), else
appended at the end of the note. Nothing else in the note changes.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

from ..config import moment_to_strftime, settings
from ..vault.markdown import mask_code, named_section
from ..vault.safe_io import (
    OutsideVault,
    UnreadableNote,
    decode_note,
    read_bytes_and_stat,
    read_text,
    safe_path,
)
from ..vault.writer import NoteExists, create_note, replace_note

# The section a capture's link goes under: an H2 or H3 with one of these names.
SECTION_NAMES = ("Captured today", "Captures", "Today's captures", "今日のキャプチャ", "キャプチャ")

_FALLBACK_TEMPLATE = """---
title: "{{date}}"
description: "Daily note for {{date}}."
kind: daily
tags: [daily]
created: "{{date}}"
updated: "{{date}}"
---
# {{date}}

## Captured today

"""


def daily_path(day: _dt.date, vault: Path | None = None) -> str:
    """The day's note, as the vault's settings name it (``daily/YYYY-MM-DD.md`` by default)."""
    if vault is None:
        return f"daily/{day.isoformat()}.md"
    s = settings(vault)
    return f"{s['folders.daily']}/{moment_to_strftime(s['daily.format'])(day)}.md"


def _from_template(vault: Path, day: _dt.date) -> str:
    """The new daily note's text from the vault's template (read through ``safe_io``: a template
    that is a symlink leading outside, a FIFO or binary raises), else the built-in one."""
    template = settings(vault)["daily.template"]
    try:
        text = read_text(vault, template)
    except FileNotFoundError:
        text = _FALLBACK_TEMPLATE
    except (OutsideVault, UnreadableNote) as exc:
        raise OutsideVault(f"{template} refused ({exc}); the daily note was not created") from None
    name = daily_path(day, vault).rsplit("/", 1)[-1].removesuffix(".md")
    text = text.replace("{{date}}", day.isoformat()).replace("{{title}}", name)
    # The template declares itself a template; the note made from it is a daily note.
    return re.sub(r"^kind:\s*template\b[^\n]*", "kind: daily", text, count=1, flags=re.M)


def insert_link(text: str, line: str) -> str:
    """``text`` with ``line`` added under the captures section (or at the end); nothing else changes."""
    if line in text:
        return text
    bounds = named_section(text, SECTION_NAMES, levels=(2, 3))
    if bounds is None:
        sep = "" if text.endswith("\n") else "\n"
        return f"{text}{sep}\n{line}\n" if text.strip() else f"{line}\n"
    start, end = bounds
    heading_follows = end < len(text)
    section = text[start:end]
    # an empty list item is the template's placeholder; one inside a code block is code
    placeholder = re.search(r"^[-*][ \t]*$", mask_code(text)[start:end], re.M)
    if placeholder:
        return text[: start + placeholder.start()] + line + text[start + placeholder.end():]
    body = section.rstrip("\n")
    if body.strip():
        new_section = body + "\n" + line + (section[len(body):] or "\n")
    else:
        new_section = "\n" + line + ("\n\n" if heading_follows else "\n")
    return text[:start] + new_section + text[end:]


def link_from_daily(vault: Path, capture_rel: str, summary: str, day: _dt.date | None = None) -> str:
    """Add ``- [[capture]]: summary`` to the day's daily note (creating it); returns its path.

    Raises NoteExists when it kept changing, OutsideVault / UnreadableNote when the daily note or
    its template is refused by ``safe_io`` (a symlink leading out, a FIFO, binary content).
    """
    day = day or _dt.date.today()
    rel = daily_path(day, vault)
    stem = capture_rel.rsplit("/", 1)[-1].removesuffix(".md")
    line = f"- [[{stem}]]" + (f": {summary}" if summary else "")
    for _attempt in range(3):
        if not safe_path(vault, rel).exists():
            try:
                create_note(vault, rel, insert_link(_from_template(vault, day), line))
                return rel
            except NoteExists:
                continue  # someone created it a moment ago: fall through and append
        data, st = read_bytes_and_stat(vault, rel)
        before, text = st.st_mtime_ns, decode_note(data)
        new = insert_link(text, line)
        if new == text:
            return rel
        try:
            replace_note(vault, rel, new, expected_mtime_ns=before)
            return rel
        except NoteExists:
            continue  # changed while we read it: read again
    raise NoteExists(f"{rel} kept changing; capture link not added")
