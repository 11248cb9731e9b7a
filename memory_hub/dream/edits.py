"""How dream changes files: planned edits, applied atomically, one git commit per step.

A step plans ``Edit``s against the text it read; applying refuses any file whose mtime moved since
(a person saved it meanwhile), writes through ``vault.writer``, and commits exactly those paths, so
``git revert`` of that commit undoes that step and nothing else. Text helpers here only ever add
lines or rewrite link targets; a person's prose is otherwise left as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..vault.git import run_git
from ..vault.markdown import mask_code
from ..vault.safe_io import OutsideVault, UnreadableNote, stat_file, unlink_file
from ..vault.writer import NoteExists, create_note, replace_note


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
    commit: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "actions": self.actions, "proposals": self.proposals,
                "skipped": self.skipped, "commit": self.commit,
                "files": sorted({e.path for e in self.edits})}


def apply(vault: Path, step: StepResult, message: str) -> str | None:
    """Write the step's edits and commit them as one commit; returns the commit id (None: no change)."""
    touched: list[str] = []
    for edit in step.edits:
        if edit.text is None:
            try:
                if edit.expected_mtime_ns is not None and stat_file(vault, edit.path).st_mtime_ns != edit.expected_mtime_ns:
                    step.skipped.append(f"{edit.path}: changed on disk meanwhile; not deleted")
                    continue
                unlink_file(vault, edit.path)
                touched.append(edit.path)
            except FileNotFoundError:
                pass
            except (OutsideVault, UnreadableNote) as exc:
                step.skipped.append(f"{edit.path}: {exc}")
            continue
        try:
            if edit.create:
                create_note(vault, edit.path, edit.text)
            else:
                replace_note(vault, edit.path, edit.text, expected_mtime_ns=edit.expected_mtime_ns)
        except (NoteExists, FileNotFoundError, OutsideVault, UnreadableNote) as exc:
            step.skipped.append(f"{edit.path}: {exc}")
            continue
        touched.append(edit.path)
    if not touched:
        return None
    run_git(vault, "add", "-A", "--", *touched)
    if run_git(vault, "diff", "--cached", "--quiet", "--", *touched, check=False).returncode == 0:
        return None  # someone else committed these files already
    run_git(vault, "commit", "-q", "-m", message, "--", *touched, identity=True)
    return run_git(vault, "rev-parse", "HEAD").stdout.strip()


# -- text helpers ----------------------------------------------------------------------------------

def _section_bounds(text: str, heading: str) -> tuple[int, int] | None:
    """(start of the section's content, end of the section) for ``## heading``, or None."""
    m = re.search(rf"^##[ \t]+{re.escape(heading)}[ \t]*$", text, re.M)
    if m is None:
        return None
    start = m.end() + 1 if m.end() < len(text) else m.end()
    nxt = re.search(r"^#{1,2}[ \t]", text[start:], re.M)
    return start, (start + nxt.start() if nxt else len(text))


def append_to_section(text: str, heading: str, lines: list[str]) -> str:
    """Add ``lines`` at the end of section ``## heading``, creating it at the end of the note."""
    lines = [ln for ln in lines if ln not in text]
    if not lines:
        return text
    block = "\n".join(lines)
    bounds = _section_bounds(text, heading)
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
