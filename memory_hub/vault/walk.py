"""Walk a vault: which files belong to it, and reading one safely.

Only what is inside the vault counts: dot-folders (``.git``, ``.obsidian``, ``.trash``,
``.memory_hub``) are skipped, so are the files the owner ignores (``vault/ignore.py``), a symlink
whose target leaves the vault is refused, and only regular files are yielded (no FIFOs, sockets or
devices). Reading goes through ``safe_io``, which refuses binary, non-UTF-8, non-regular and huge
files with a reason.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from ..config import MAX_NOTE_BYTES
from .ignore import ignore_rules
from .safe_io import OutsideVault, UnreadableNote, decode_note, read_bytes, safe_path

__all__ = ["FileStat", "Skipped", "walk", "stat_map", "read_note_bytes", "read_note_text", "content_hash",
           # the safe-path layer's names, for the modules that have always imported them from here
           "OutsideVault", "UnreadableNote", "decode_note", "safe_path"]


class FileStat(NamedTuple):
    """A vault file found by the walk. ``path`` is vault-relative, POSIX style.

    A named tuple, not a dataclass: a walk makes one per file, and a frozen dataclass's
    ``__init__`` cost a fifth of a no-change sync's walk."""

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


def _inside(root_real: str, candidate: str) -> bool:
    real = os.path.realpath(candidate)
    return real == root_real or real.startswith(root_real + os.sep)


def walk(vault: Path, skipped: list[Skipped] | None = None) -> Iterator[FileStat]:
    """Yield every note and attachment in the vault, refusing links that lead outside it."""
    for rels, stamps in _folders(vault, skipped):
        for rel, (mtime_ns, size) in zip(rels, stamps, strict=True):
            yield FileStat(rel, mtime_ns, size)


def stat_map(vault: Path, skipped: list[Skipped] | None = None) -> dict[str, tuple[int, int]]:
    """``{path: (mtime_ns, size)}`` of every file ``walk`` yields, in its order.

    What a sync compares with the index: plain tuples, no object per file, so a no-change sync of
    100k files compares two dicts in C instead of looping over FileStats in Python."""
    out: dict[str, tuple[int, int]] = {}
    for rels, stamps in _folders(vault, skipped):
        out.update(zip(rels, stamps, strict=True))
    return out


def _folders(vault: Path, skipped: list[Skipped] | None) -> Iterator[tuple[list[str], list[tuple[int, int]]]]:
    """The walk, a folder at a time: its files' paths and their ``(mtime_ns, size)``, sorted by
    name (a folder's sub-folders come after it, depth first)."""
    root = str(vault)
    root_real = os.path.realpath(root)
    # (folder, its vault-relative prefix, its real path): paths are built by joining names, not
    # os.path.relpath per file (a quarter of a no-change sync's walk on a 6.5k-note vault)
    stack = [(root, "", root_real)]
    seen_dirs = {root_real}
    ignored = ignore_rules(vault) or None
    by_name = attrgetter("name")
    while stack:
        current, prefix, current_real = stack.pop()
        try:
            entries = sorted(os.scandir(current), key=by_name)
        except OSError as exc:
            if skipped is not None:
                skipped.append(Skipped(prefix[:-1] or ".", f"unreadable folder: {exc.strerror}"))
            continue
        rels: list[str] = []
        stamps: list[tuple[int, int]] = []
        for entry in entries:
            name = entry.name
            if name[0] == ".":  # dot-files and dot-folders: every SKIP_DIRS name too (a test checks)
                continue
            rel = prefix + name
            try:
                # the common case first: a regular file, not a symlink (its type comes with the
                # folder listing; only its stat is a system call)
                if entry.is_file(follow_symlinks=False):
                    if ignored is not None and ignored.entry_matches(rel, False):
                        continue
                    st = entry.stat()
                    rels.append(rel)
                    stamps.append((st.st_mtime_ns, st.st_size))
                    continue
                if ignored is not None and ignored.entry_matches(rel, entry.is_dir()):
                    continue
                link = entry.is_symlink()
                if link and not _inside(root_real, entry.path):
                    if skipped is not None:
                        skipped.append(Skipped(rel, "symlink leads outside the vault"))
                    continue
                if entry.is_dir():
                    # a plain folder's real path is its (resolved) parent's plus its name: only a
                    # symlink needs os.path.realpath (an lstat per path component, per folder)
                    real = os.path.realpath(entry.path) if link else current_real + os.sep + name
                    if real in seen_dirs:
                        continue  # a symlink loop
                    seen_dirs.add(real)
                    stack.append((entry.path, rel + "/", real))
                    continue
                if not entry.is_file():
                    if link and skipped is not None and not os.path.exists(entry.path):
                        skipped.append(Skipped(rel, "broken symlink or symlink loop"))
                    continue  # FIFOs, sockets and devices are never part of a vault
                st = entry.stat()  # a symlink to a file inside the vault
            except OSError as exc:
                if skipped is not None:
                    skipped.append(Skipped(rel, f"cannot stat: {exc.strerror}"))
                continue
            rels.append(rel)
            stamps.append((st.st_mtime_ns, st.st_size))
        yield rels, stamps


def read_note_bytes(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES) -> bytes:
    """A note's bytes (through ``safe_io``: inside the vault, a regular file, not over ``max_bytes``)."""
    return read_bytes(vault, rel, max_bytes)


def read_note_text(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES) -> str:
    """A note's text: inside the vault, not huge, not binary, valid UTF-8 — else UnreadableNote/OSError."""
    return decode_note(read_note_bytes(vault, rel, max_bytes))


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()
