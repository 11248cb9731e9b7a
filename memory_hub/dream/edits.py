"""How dream changes files: planned edits, applied as one unit, one git commit per step.

A step plans ``Edit``s against the text it read. Applying refuses the whole step when any of its
files changed since (a person saved it meanwhile: the step is planned again next pass), then hands
the plan to ``vault.journal``, which journals it, writes each file atomically and commits exactly
those paths — so ``git revert`` of that commit undoes that step and nothing else, and a pass killed
half-way is completed or rolled back by the next one. Text helpers here only ever add lines or
rewrite link targets; a person's prose is otherwise left as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..vault.git import GitError
from ..vault.journal import Change, JournalConflict, commit_atomically
from ..vault.markdown import mask_code, named_section
from ..vault.safe_io import OutsideVault, UnreadableNote, read_bytes_and_stat, safe_path


@dataclass
class Edit:
    path: str
    text: str | None  # new content; None deletes the file
    create: bool = False
    expected_mtime_ns: int | None = None


@dataclass
class StepResult:
    name: str
    actions: list[str] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    proposals: list[dict[str, object]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # one per planned unit; see ``rejected``
    commit: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "actions": self.actions, "proposals": self.proposals,
                "skipped": self.skipped, "keys": self.keys, "commit": self.commit,
                "files": sorted({e.path for e in self.edits})}


class StepChanged(Exception):
    """A file of the step changed on disk since it was planned."""


def _change(vault: Path, edit: Edit) -> Change | None:
    """The edit as a journal change (old bytes read now), None when it changes nothing."""
    full = safe_path(vault, edit.path)
    if edit.create:
        if os.path.lexists(full):
            raise StepChanged(f"{edit.path}: a file appeared there meanwhile")
        return Change(edit.path, None, (edit.text or "").encode("utf-8"))
    try:
        before, st = read_bytes_and_stat(vault, edit.path)  # safe_io: no FIFO, nothing outside, bytes and stat of one open
    except FileNotFoundError:
        if edit.text is None:
            return None  # already gone
        raise StepChanged(f"{edit.path}: removed meanwhile") from None
    except (OSError, UnreadableNote) as exc:
        raise StepChanged(f"{edit.path}: {exc}") from None
    if edit.expected_mtime_ns is not None and st.st_mtime_ns != edit.expected_mtime_ns:
        raise StepChanged(f"{edit.path}: changed on disk meanwhile")
    after = None if edit.text is None else edit.text.encode("utf-8")
    if after == before:
        return None
    return Change(edit.path, before, after, expected_mtime_ns=st.st_mtime_ns)


def apply(vault: Path, step: StepResult, message: str) -> str | None:
    """Write the step's edits and commit them as one commit; returns the commit id (None: nothing applied).

    All or nothing: when one file cannot be written as planned, none is, and ``step.skipped`` says why.
    The commit message ends with the step's proposal keys, so a revert of it can be recognised.
    Raises ``vault.journal.CommitBlocked`` (nothing written) when no commit may be made right now.
    """
    from .rejected import trailer_lines

    changes: list[Change] = []
    seen: set[str] = set()
    try:
        for edit in step.edits:
            if edit.path in seen:
                raise StepChanged(f"{edit.path}: planned twice in one step")
            seen.add(edit.path)
            change = _change(vault, edit)
            if change is not None:
                changes.append(change)
        if step.keys:
            message = message.rstrip("\n") + "\n\n" + trailer_lines(step.keys)
        return commit_atomically(vault, changes, message, name=f"dream {step.name}")
    except (StepChanged, JournalConflict, OutsideVault) as exc:
        step.skipped.append(f"the whole step, planned again next pass: {exc}")
        return None
    except GitError as exc:
        step.skipped.append(f"the whole step (git refused the commit; nothing was left applied): {exc}")
        return None


# -- text helpers ----------------------------------------------------------------------------------

def append_to_section(text: str, heading: str, lines: list[str]) -> str:
    """Add ``lines`` at the end of section ``## heading``, creating it at the end of the note."""
    lines = [ln for ln in lines if ln not in text]
    if not lines:
        return text
    block = "\n".join(lines)
    bounds = named_section(text, [heading], levels=(2,), ends_at=2)
    if bounds is None:
        base = text.rstrip("\n")
        return f"{base}\n\n## {heading}\n\n{block}\n"
    start, end = bounds
    section = text[start:end].rstrip("\n")
    rest = text[end:]
    joined = (section + "\n" if section.strip() else "\n") + block + "\n"
    return text[:start] + joined + ("\n" + rest if rest else "")


_WIKI = re.compile(r"(!?)\[\[([^\[\]\n|#]+)((?:#[^\[\]\n|]*)?)((?:\\?\|[^\[\]\n]*)?)\]\]")


def rewrite_links(text: str, is_old: Callable[[str], bool], new_target: str) -> tuple[str, int]:
    """Point every wikilink whose target ``is_old(target)`` at ``new_target``; code is left alone.

    Heading, block and alias parts are kept; a bare link gains the old name as its alias so the
    sentence still reads the same.
    """
    masked = mask_code(text)
    out: list[str] = []
    last = 0
    count = 0
    for m in _WIKI.finditer(masked):
        target = m.group(2).strip()
        if not is_old(target):
            continue
        original = text[m.start():m.end()]
        om = _WIKI.fullmatch(original)
        if om is None:
            continue
        alias = om.group(4) or ("|" + om.group(2).strip())
        out.append(text[last:m.start()])
        out.append(f"{om.group(1)}[[{new_target}{om.group(3)}{alias}]]")
        last = m.end()
        count += 1
    out.append(text[last:])
    return "".join(out), count


def body_paragraphs(body: str) -> list[str]:
    """Paragraphs of prose (blank-line separated), headings and code blocks excluded."""
    masked = mask_code(body)
    paras = []
    for chunk_m in re.finditer(r"(?:[^\n]+\n?)+", masked):
        chunk = body[chunk_m.start():chunk_m.end()].strip()
        if not chunk or chunk.startswith("#") and "\n" not in chunk:
            continue
        if not masked[chunk_m.start():chunk_m.end()].strip():
            continue  # all code
        lines = [ln for ln in chunk.splitlines() if not ln.lstrip().startswith("#")]
        text = "\n".join(lines).strip()
        if text:
            paras.append(text)
    return paras
