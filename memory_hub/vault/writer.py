"""Writing notes: names for new ones, and atomic creates and replaces through ``safe_io``.

A write goes to a temporary file in the same folder, is flushed to disk, then renamed into place,
so a crash leaves either the old file or the new one, never half of one. Creating a note uses an
exclusive link so two writers can never pick the same name and overwrite each other. The file
handling itself (confinement to the vault, no symlink races) lives in ``safe_io``.
"""

from __future__ import annotations

import datetime as _dt
import re
import unicodedata
from pathlib import Path

from .safe_io import NoteExists, OutsideVault, create_file, replace_file, safe_path

__all__ = ["NoteExists", "slugify", "create_note", "replace_note", "unique_note_path"]


def slugify(text: str, max_len: int = 60) -> str:
    """Lowercase-hyphenated file-name stem, keeping CJK letters (Obsidian handles them)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s-]", " ", text)
    text = re.sub(r"[\s_-]+", "-", text).strip("-")
    if len(text) > max_len:
        text = text[:max_len].rsplit("-", 1)[0] or text[:max_len]
    return text or "note"


def create_note(vault: Path, rel: str, text: str) -> Path:
    """Create a new note atomically; raise NoteExists instead of overwriting anything."""
    return create_file(vault, rel, text.encode("utf-8"))


def replace_note(vault: Path, rel: str, text: str, expected_mtime_ns: int | None = None) -> Path:
    """Atomically replace an existing note's content (curated edits, captures updated in place).

    With ``expected_mtime_ns``, refuse when the file changed since it was read, so an edit a
    person made in the meantime is never lost.
    """
    return replace_file(vault, rel, text.encode("utf-8"), expected_mtime_ns)


def unique_note_path(vault: Path, folder: str, title: str, date: _dt.date | None = None) -> str:
    """A free vault-relative path ``folder/[date-]slug.md``, suffixed ``-2``, ``-3`` … if taken."""
    stem = slugify(title)
    if date is not None:
        stem = f"{date.isoformat()}-{stem}"
    folder = folder.strip("/")
    for n in range(1, 10_000):
        name = f"{stem}.md" if n == 1 else f"{stem}-{n}.md"
        rel = f"{folder}/{name}" if folder else name
        if not safe_path(vault, rel).exists():
            return rel
    raise OutsideVault("could not find a free file name")
