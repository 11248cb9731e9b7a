"""The look-ahead: what is due or overdue, read from the deadline fields across the vault.

Two fields hold deadlines: ``due`` (action items) and ``deadline`` (trackers). ``lint`` finds the
seed's silent miss — a note whose prose states a deadline ("by 6/15", 「6月1日まで」) that neither
field holds — so a date sitting only in prose is reported instead of passing every check.

Files are parsed directly rather than read from the index, so the answer is right even when the
index is stale; a vault of a few thousand notes parses in well under a second.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from pathlib import Path

from ..vault.frontmatter import split
from ..vault.markdown import mask_code
from ..vault.notes import DAILY, TEMPLATE, Note, parse_note
from ..vault.walk import UnreadableNote, read_note_text, walk
from .dates import find_dates, parse_field_date

DEADLINE_FIELDS = ("due", "deadline")
DONE_STATUSES = frozenset({"done", "closed", "complete", "completed", "cancelled", "canceled", "archived",
                           "resolved", "processed", "完了", "済"})
_DONE_LINE = re.compile(r"^\s*[-*+]\s+\[[xX]\]")


@dataclass(frozen=True)
class DueItem:
    path: str
    title: str
    field: str
    date: str
    days_left: int
    state: str  # overdue | today | upcoming

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LintItem:
    path: str
    title: str
    date: str
    text: str
    line: int
    fields: dict[str, str]

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def iter_notes(vault: Path) -> list[Note]:
    """Every readable Markdown note in the vault, parsed."""
    notes = []
    for stat in walk(vault):
        if not stat.is_note:
            continue
        try:
            text = read_note_text(vault, stat.path)
        except (UnreadableNote, OSError):
            continue
        notes.append(parse_note(stat.path, text))
    return notes


def _is_done(note: Note) -> bool:
    status = note.frontmatter.get("status")
    return isinstance(status, str) and status.strip().lower() in DONE_STATUSES


def lookahead(vault: Path, days: int = 7, today: _dt.date | None = None,
              notes: list[Note] | None = None) -> list[DueItem]:
    """Deadlines from ``due``/``deadline`` fields that are overdue or fall within ``days``, soonest first."""
    today = today or _dt.date.today()
    items: list[DueItem] = []
    for note in notes if notes is not None else iter_notes(vault):
        if note.kind == TEMPLATE or _is_done(note):
            continue
        for name in DEADLINE_FIELDS:
            date = parse_field_date(note.frontmatter.get(name))
            if date is None:
                continue
            left = (date - today).days
            if left > days:
                continue
            state = "overdue" if left < 0 else "today" if left == 0 else "upcoming"
            items.append(DueItem(note.path, note.title, name, date.isoformat(), left, state))
    items.sort(key=lambda i: (i.days_left, i.path))
    return items


PAST_GRACE_DAYS = 30  # a prose deadline further in the past than this is history, not a missed warning


def lint(vault: Path, notes: list[Note] | None = None, include_past: bool = False,
         today: _dt.date | None = None) -> list[LintItem]:
    """Notes whose prose states a deadline that no ``due``/``deadline`` field holds.

    Years left out of the prose ("6/15") and relative words ("by Friday") are anchored on the note's
    ``created``/``date`` field, else a date in its file name, else today. Done notes,
    templates, daily notes' logs and ticked checkboxes are not reported, nor (unless
    ``include_past``) deadlines more than ``PAST_GRACE_DAYS`` in the past.
    """
    found: list[LintItem] = []
    oldest = (today or _dt.date.today()) - _dt.timedelta(days=PAST_GRACE_DAYS)
    for note in notes if notes is not None else iter_notes(vault):
        if note.kind in (TEMPLATE, DAILY) or _is_done(note):
            continue
        held = {name: d.isoformat() for name in DEADLINE_FIELDS
                if (d := parse_field_date(note.frontmatter.get(name))) is not None}
        anchor = (parse_field_date(note.frontmatter.get("created")) or parse_field_date(note.frontmatter.get("date"))
                  or _date_in_name(note.path) or _dt.date.today())
        masked = mask_code(note.body)
        offset = None
        for lineno, line in enumerate(masked.splitlines()):
            if _DONE_LINE.match(line):
                continue
            for mention in find_dates(line, anchor):
                if not mention.deadline or mention.date.isoformat() in held.values():
                    continue
                if mention.date < oldest and not include_past:
                    continue
                if offset is None:
                    offset = _body_line(vault, note.path)
                found.append(LintItem(note.path, note.title, mention.date.isoformat(), mention.text,
                                      offset + lineno, held))
    return found


def _date_in_name(path: str) -> _dt.date | None:
    """A ``YYYY-MM-DD`` in the file name (dated captures, daily notes, roundups)."""
    m = re.search(r"(\d{4}-\d{2}-\d{2})", path.rsplit("/", 1)[-1])
    return parse_field_date(m.group(1)) if m else None


def _body_line(vault: Path, rel: str) -> int:
    """1-based line where a note's body starts, so a lint finding points at the right line."""
    try:
        return split(read_note_text(vault, rel))[2]
    except (UnreadableNote, OSError):
        return 1
