"""Walk a vault: which files belong to it, and reading one safely.

Only what is inside the vault counts: dot-folders (``.git``, ``.obsidian``, ``.trash``,
``.memory_hub``) are skipped, so are the files the owner ignores (``vault/ignore.py``), and a
symlink whose target leaves the vault is refused. Reading a note
refuses binary, non-UTF-8 and huge files with a reason instead of raising.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import MAX_NOTE_BYTES, SKIP_DIRS
from .ignore import ignore_rules


@dataclass(frozen=True)
class FileStat:
    """A vault file found by the walk. ``path`` is vault-relative, POSIX style."""

    path: str
    mtime_ns: int
    size: int

    @property
    def is_note(self) -> bool:
        return self.path.lower().endswith(".md")


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


class UnreadableNote(Exception):
    """A file that is not a readable Markdown note; the message says why."""


def _inside(root_real: str, candidate: str) -> bool:
    real = os.path.realpath(candidate)
    return real == root_real or real.startswith(root_real + os.sep)


def walk(vault: Path, skipped: list[Skipped] | None = None) -> Iterator[FileStat]:
    """Yield every note and attachment in the vault, refusing links that lead outside it."""
    root = str(vault)
    root_real = os.path.realpath(root)
    stack = [root]
    seen_dirs = {os.path.realpath(root)}
    ignored = ignore_rules(vault)
    while stack:
        current = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda e: e.name)
        except OSError as exc:
            if skipped is not None:
                skipped.append(Skipped(os.path.relpath(current, root).replace(os.sep, "/"), f"unreadable folder: {exc.strerror}"))
            continue
        for entry in entries:
            name = entry.name
            rel = os.path.relpath(entry.path, root).replace(os.sep, "/")
            if name.startswith(".") or name in SKIP_DIRS:
                continue
            try:
                if ignored and ignored.entry_matches(rel, entry.is_dir()):
                    continue
                if entry.is_symlink() and not _inside(root_real, entry.path):
                    if skipped is not None:
                        skipped.append(Skipped(rel, "symlink leads outside the vault"))
                    continue
                if entry.is_dir():
                    real = os.path.realpath(entry.path)
                    if real in seen_dirs:
                        continue  # a symlink loop
                    seen_dirs.add(real)
                    stack.append(entry.path)
                    continue
                if not entry.is_file():
                    continue
                st = entry.stat()
            except OSError as exc:
                if skipped is not None:
                    skipped.append(Skipped(rel, f"cannot stat: {exc.strerror}"))
                continue
            yield FileStat(rel, st.st_mtime_ns, st.st_size)


def read_note_bytes(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES) -> bytes:
    """Read a note's bytes, refusing paths outside the vault and files over ``max_bytes``."""
    full = safe_path(vault, rel)
    size = full.stat().st_size
    if size > max_bytes:
        raise UnreadableNote(f"too large ({size:,} bytes > {max_bytes:,}); skipped")
    return full.read_bytes()


def decode_note(data: bytes) -> str:
    """Decode a note's bytes as UTF-8, refusing binary content with a clear reason."""
    if b"\x00" in data[:8192]:
        raise UnreadableNote("binary content (NUL bytes); skipped")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableNote(f"not valid UTF-8 at byte {exc.start}; skipped") from None
    return text.lstrip("\ufeff")


def read_note_text(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES) -> str:
    """A note's text: inside the vault, not huge, not binary, valid UTF-8 — else UnreadableNote/OSError."""
    return decode_note(read_note_bytes(vault, rel, max_bytes))


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class OutsideVault(ValueError):
    """A path that would leave the vault (``../``, absolute paths, symlinks out)."""


def safe_path(vault: Path, rel: str) -> Path:
    """Resolve ``rel`` inside the vault or raise OutsideVault. Index folders count as outside."""
    if not isinstance(rel, str) or not rel.strip() or "\x00" in rel:
        raise OutsideVault("empty or invalid path")
    candidate = Path(rel)
    if candidate.is_absolute():
        raise OutsideVault(f"absolute paths are not allowed: {rel}")
    root = Path(os.path.realpath(vault))
    full = Path(os.path.realpath(root / candidate))
    if full != root and root not in full.parents:
        raise OutsideVault(f"path leaves the vault: {rel}")
    parts = full.relative_to(root).parts
    if any(p in SKIP_DIRS or p.startswith(".") for p in parts):
        raise OutsideVault(f"path is inside a hidden or index folder: {rel}")
    return full
