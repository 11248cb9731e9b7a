"""Changing a note's text on request: replace one section (found by its heading), append to it, or
append to (or replace) the whole body — only against the hash of the bytes the change was made on.

The frontmatter is kept as it is, except ``updated:``, which moves to today when the note keeps
one. Headings inside code blocks are not headings. The text comes from outside (an agent), so its
secrets are redacted before anything is written. The write is atomic and committed on its own
(``journal.commit_atomically`` with one file), after the guards of ``editing``.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..config import max_note_bytes
from . import frontmatter as fm
from .editing import (
    WriteRefused,
    check_hash,
    editing_window,
    note_hash,
    person_editing,
    read_for_change,
    write_turn,
)
from .git import GitError
from .journal import Change, CommitBlocked, JournalConflict, commit_atomically
from .markdown import HEADING, mask_code
from .redact import Redaction
from .walk import decode_note

APPEND = "append"
REPLACE = "replace"
MODES = (APPEND, REPLACE)

_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]")


@dataclass
class UpdateResult:
    path: str
    hash: str  # of the note as written: the expected_hash of the next change
    previous_hash: str
    mode: str
    heading: str | None = None
    created_section: bool = False
    changed: bool = True
    commit: str | None = None
    redacted: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [], {})}


@dataclass(frozen=True)
class Section:
    level: int
    title: str
    line: int  # 1-based, in the body
    start: int  # offset of the heading line in the body
    content: int  # offset where the section's content starts (after the heading line)
    end: int  # offset where the next heading of the same or a higher level starts (or the end)


def sections(body: str) -> list[Section]:
    """Every heading of ``body`` outside code, with the span of its section."""
    masked = mask_code(body)
    found = [(len(m.group(1)), m.group(2).strip(), m.start(), m.end()) for m in HEADING.finditer(masked)]
    out = []
    for i, (level, title, start, stop) in enumerate(found):
        end = next((s for lv, _t, s, _e in found[i + 1:] if lv <= level), len(body))
        content = stop + 1 if stop < len(body) else stop
        written = HEADING.match(body[start:stop])  # the heading as written (``masked`` blanks its code)
        out.append(Section(level, written.group(2).strip() if written else title, body.count("\n", 0, start) + 1,
                           start, content, end))
    return out


def _wanted(heading: str) -> tuple[int | None, str]:
    m = HEADING.fullmatch(heading.strip())
    return (len(m.group(1)), m.group(2).strip()) if m else (None, heading.strip())


def find_section(body: str, heading: str) -> Section | None:
    """The section titled ``heading`` (case-insensitive; ``## Title`` also pins the level).

    Raises WriteRefused when the title is ambiguous: the agent must not guess which one to change.
    """
    level, title = _wanted(heading)
    hits = [s for s in sections(body) if s.title.casefold() == title.casefold() and level in (None, s.level)]
    if len(hits) > 1:
        where = ", ".join(f"line {s.line} ({'#' * s.level})" for s in hits)
        raise WriteRefused(f"heading {title!r} appears {len(hits)} times ({where}); pass it with its level "
                           "(e.g. '## Notes') or change the note in one piece (mode 'replace' without a heading)")
    return hits[0] if hits else None


def _join(before: str, addition: str) -> str:
    """``before`` then ``addition``: a list continues a list, anything else starts a new paragraph."""
    before = before.rstrip("\n")
    if not before.strip():
        return addition
    last = before.rsplit("\n", 1)[-1]
    first = addition.split("\n", 1)[0]
    glue = "\n" if _LIST_ITEM.match(last) and _LIST_ITEM.match(first) else "\n\n"
    return before + glue + addition


def edit_body(body: str, text: str, mode: str, heading: str | None) -> tuple[str, bool]:
    """The new body and whether a section was created (append to a heading the note lacks)."""
    text = text.replace("\r\n", "\n").strip("\n")
    if heading is None:
        if mode == REPLACE:
            return (text + "\n" if text else ""), False
        return _join(body, text) + "\n", False
    section = find_section(body, heading)
    if section is None:
        if mode == REPLACE:
            titles = [f"{'#' * s.level} {s.title}" for s in sections(body)]
            listed = "; ".join(titles[:20]) if titles else "none"
            raise WriteRefused(f"no heading {heading!r} in the note (its headings: {listed}); use mode 'append' "
                               "to add the section")
        level, title = _wanted(heading)
        block = f"{'#' * (level or 2)} {title}\n\n{text}" if text else f"{'#' * (level or 2)} {title}"
        return _join(body, block) + "\n", True
    head, content, rest = body[:section.content], body[section.content:section.end], body[section.end:]
    if not head.endswith("\n"):
        head += "\n"
    if mode == REPLACE:
        new = ("\n" + text + "\n") if text else ""
    else:
        new = _join(content, text) + "\n"
        if not content.strip():
            new = "\n" + new
    if rest:  # a blank line before the next heading
        new = new.rstrip("\n") + "\n\n" if new.strip() else "\n"
    return head + new + rest, False


def _bump_updated(text: str, today: _dt.date) -> str:
    """``updated:`` set to today when the note keeps that field (no field is added)."""
    block = fm.parse(text)
    if block.problem or "updated" not in block.data:
        return text
    try:
        return fm.set_fields(text, {"updated": today})
    except ValueError:
        return text


def update_note(vault: Path, rel: str, text: str, expected_hash: str, *, mode: str = APPEND,
                heading: str | None = None, who: str = "mcp", today: _dt.date | None = None,
                own_hash: str | None = None, now: float | None = None) -> UpdateResult:
    """Apply one change to the note at ``rel`` made against ``expected_hash``; commit it.

    Raises WriteRefused (nothing written) for a stale hash (``HashMismatch``), a note a person is
    editing (saved in the editing window, not committed: a right hash only says what they saved so
    far), an unknown or ambiguous heading, a note that is not a readable Markdown file, or a vault
    that cannot commit. ``own_hash`` is the hash of what this writer itself last wrote there (a
    capture, not committed yet): that recent save is not a person's.
    """
    vault = Path(vault)
    if mode not in MODES:
        raise WriteRefused(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if not rel.lower().endswith(".md"):
        raise WriteRefused(f"{rel} is not a Markdown note")
    if "\x00" in text:
        raise WriteRefused("text contains NUL bytes; binary content is not a note")
    if mode == APPEND and not text.strip():
        raise WriteRefused("text is empty: pass what to append")
    if mode == REPLACE and not (heading and heading.strip()) and not text.strip():
        raise WriteRefused("text is empty: replacing the whole body with nothing would empty the note; "
                           "retire it with delete_note instead (recoverable)")
    removed = Redaction("")
    text = removed.add(text)
    heading = removed.add(heading.strip()).replace("\n", " ") if heading and heading.strip() else None
    with write_turn(vault) as notes:
        data, mtime_ns = read_for_change(vault, rel)
        previous = check_hash(rel, data, expected_hash)
        busy = None if previous == own_hash else person_editing(vault, rel, mtime_ns, now)
        if busy:  # the hash is right, but the person may still be typing: their edit comes first
            raise WriteRefused(f"{rel} is {busy}; nothing was written: try again once it is committed or has not "
                               f"been saved for {editing_window(vault) / 60:g} minutes")
        old = decode_note(data)
        crlf = "\r\n" in old  # the note's own line endings and BOM are kept
        bom = "\ufeff" if data.startswith(b"\xef\xbb\xbf") else ""
        unix = old.replace("\r\n", "\n")
        block = fm.parse(unix)
        body, created = edit_body(block.body, text, mode, heading)
        new = unix[:len(unix) - len(block.body)] + body
        new = bom + (new.replace("\n", "\r\n") if crlf else new)
        if new.encode("utf-8") == data:
            return UpdateResult(rel, previous, previous, mode, heading, changed=False,
                                redacted=dict(removed.counts), notes=notes)
        new = _bump_updated(new, today or _dt.date.today())
        encoded = new.encode("utf-8")
        if len(encoded) > max_note_bytes():
            raise WriteRefused(f"the note would be {len(encoded):,} bytes, over the {max_note_bytes():,}-byte limit "
                               "for a note; split it")
        what = (f"{'replaced' if mode == REPLACE else 'appended to'} "
                + (f"section {heading!r}" if heading else "the body" if mode == REPLACE else "the end"))
        message = f"{who} update_note: {rel} ({what})\n"
        try:
            commit = commit_atomically(vault, [Change(rel, data, encoded, expected_mtime_ns=mtime_ns)], message,
                                       name="update_note")
        except (CommitBlocked, JournalConflict) as exc:
            raise WriteRefused(f"not written: {exc}") from None
        except GitError as exc:
            raise WriteRefused(f"not written (git refused the commit, nothing was left changed): {exc}") from None
    if removed.counts:
        notes.append(f"{removed.summary()} before writing")
    return UpdateResult(rel, note_hash(encoded), previous, mode, heading, created, True, commit,
                        dict(removed.counts), notes)
