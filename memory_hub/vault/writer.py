"""Writing to the vault safely: atomic, inside the vault only, never over a person's note.

A write goes to a temporary file in the same folder, is flushed to disk, then renamed into place,
so a crash leaves either the old file or the new one, never half of one. Creating a note uses an
exclusive link so two writers can never pick the same name and overwrite each other.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
import unicodedata
from pathlib import Path

from .walk import OutsideVault, safe_path


class NoteExists(FileExistsError):
    """The target already exists; Memory Hub never overwrites a note it did not mean to."""


def slugify(text: str, max_len: int = 60) -> str:
    """Lowercase-hyphenated file-name stem, keeping CJK letters (Obsidian handles them)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[^\w\s-]", " ", text)
    text = re.sub(r"[\s_-]+", "-", text).strip("-")
    if len(text) > max_len:
        text = text[:max_len].rsplit("-", 1)[0] or text[:max_len]
    return text or "note"


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(folder: Path, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(prefix=".mh-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def create_note(vault: Path, rel: str, text: str) -> Path:
    """Create a new note atomically; raise NoteExists instead of overwriting anything."""
    full = safe_path(vault, rel)
    full.parent.mkdir(parents=True, exist_ok=True)
    tmp = _write_temp(full.parent, text.encode("utf-8"))
    try:
        os.link(tmp, full)  # fails if the name exists: no overwrite, even under a race
    except FileExistsError:
        raise NoteExists(f"a note already exists at {rel}") from None
    finally:
        os.unlink(tmp)
    _fsync_dir(full.parent)
    return full


def replace_note(vault: Path, rel: str, text: str, expected_mtime_ns: int | None = None) -> Path:
    """Atomically replace an existing note's content (used for counters and curated edits).

    With ``expected_mtime_ns``, refuse when the file changed since it was read, so an edit a
    person made in the meantime is never lost.
    """
    full = safe_path(vault, rel)
    if expected_mtime_ns is not None and full.stat().st_mtime_ns != expected_mtime_ns:
        raise NoteExists(f"{rel} changed on disk since it was read; not overwritten")
    tmp = _write_temp(full.parent, text.encode("utf-8"))
    try:
        os.replace(tmp, full)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(full.parent)
    return full


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
