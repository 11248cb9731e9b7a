"""Deleting a note recoverably: into the vault's ``.trash/`` folder (Obsidian's own), committed, and back.

``trash_note`` moves ``folder/x.md`` to ``.trash/folder/x.md`` (``x (2).md`` … when an older copy is
there) and commits both sides in one commit, so git records a rename into the trash; a vault whose
``.gitignore`` keeps ``.trash/`` out commits the deletion and keeps the copy on disk only. The walk
skips dot-folders, so a trashed note leaves every index. ``restore_note`` puts it back (at its old
path, or another), commits, and, when the trash copy is gone (emptied by hand, or a clone that never
had it), restores the bytes from the commit that deleted the note.

Two steps, each atomic: the copy is written to the trash first (a temporary file linked into place),
then the note is removed. A process killed in between leaves the note *and* a copy, never neither.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .editing import WriteRefused, being_edited, check_hash, note_hash, read_for_change, write_turn
from .git import GitError, commit_paths, deleted_in, run_git, uncommitted_paths
from .move import backlinks, new_path_for
from .walk import OutsideVault, safe_path
from .writer import NoteExists, create_note

TRASH = ".trash"
_COPY = re.compile(r" \((\d+)\)(\.md)$", re.I)


@dataclass
class TrashResult:
    path: str
    trash_path: str
    hash: str
    commit: str | None = None
    backlinks: list[str] = field(default_factory=list)  # notes whose links to it now dangle
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


@dataclass
class RestoreResult:
    path: str
    source: str  # the trash copy, or "git:<commit>" when restored from history
    hash: str
    commit: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


def _trash_dir(vault: Path) -> Path:
    root = Path(os.path.realpath(vault))
    trash = root / TRASH
    if os.path.islink(trash) or (os.path.lexists(trash) and not trash.is_dir()):
        raise WriteRefused(f"{TRASH} in the vault is a symlink or a file, not a folder; fix it by hand first")
    return trash


def _trash_full(vault: Path, trash_rel: str) -> Path:
    """The file a ``.trash/…`` path names, confined to the vault's own trash folder."""
    inner = trash_rel.removeprefix(TRASH + "/")
    safe_path(vault, inner)  # the rest is an ordinary vault path: no ``..``, no dot-folders
    trash = _trash_dir(vault)
    full = trash / inner
    folder = full.parent
    while folder != trash:  # no folder inside the trash may be a symlink (to leave it)
        if os.path.islink(folder):
            raise OutsideVault(f"{trash_rel}: {folder.name}/ is a symlink")
        folder = folder.parent
    return full


def _copy_name(rel: str, n: int) -> str:
    stem, dot, ext = rel.rpartition(".")
    return f"{TRASH}/{rel}" if n == 1 else f"{TRASH}/{stem} ({n}){dot}{ext}"


def original_path(trash_rel: str) -> str:
    """Where a trash copy came from: ``.trash/a/x (2).md`` → ``a/x.md``."""
    return _COPY.sub(r"\2", trash_rel.removeprefix(TRASH + "/"))


def copies(vault: Path, rel: str) -> list[str]:
    """The trash copies of ``rel``, newest first."""
    found = []
    for n in range(1, 1000):
        trash_rel = _copy_name(rel, n)
        try:
            full = _trash_full(vault, trash_rel)
        except (OutsideVault, WriteRefused):
            return []
        if full.is_file():
            found.append((full.stat().st_mtime_ns, trash_rel))
        elif n > 1:
            break
    return [p for _m, p in sorted(found, reverse=True)]


def _write_new(full: Path, data: bytes) -> None:
    """Create ``full`` with ``data`` atomically, never over an existing file (FileExistsError)."""
    full.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mh-", suffix=".tmp", dir=full.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(tmp, full)
    finally:
        os.unlink(tmp)
    _fsync_dir(full.parent)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _unstage(vault: Path, paths: list[str]) -> None:
    run_git(vault, "reset", "-q", "--", *paths, check=False)


def trash_note(vault: Path, rel: str, expected_hash: str | None = None, *, who: str = "mcp",
               now: float | None = None) -> TrashResult:
    """Move the note ``rel`` into ``.trash/`` and commit; raises WriteRefused (nothing changed) when it may not."""
    vault = Path(vault)
    if not rel.lower().endswith(".md"):
        raise WriteRefused(f"{rel} is not a Markdown note; delete attachments in Obsidian or with `git rm`")
    with write_turn(vault) as notes:
        data, mtime = read_for_change(vault, rel)
        full = safe_path(vault, rel)
        digest = check_hash(rel, data, expected_hash)
        if expected_hash is None:
            busy = being_edited(rel, mtime, uncommitted_paths(vault), now if now is not None else time.time())
            if busy:
                raise WriteRefused(f"{rel} is {busy}; read it with read_note and pass its hash as expected_hash "
                                   "to delete it anyway")
        linked = backlinks(vault, rel)  # while it is still there to resolve to
        for n in range(1, 1000):
            trash_rel = _copy_name(rel, n)
            try:
                _write_new(_trash_full(vault, trash_rel), data)
                break
            except FileExistsError:
                continue
        else:
            raise WriteRefused(f"the trash holds too many copies of {rel}; empty {TRASH}/ first")
        if full.stat().st_mtime_ns != mtime:
            _trash_full(vault, trash_rel).unlink()
            raise WriteRefused(f"{rel} changed while it was being deleted; nothing was deleted")
        os.unlink(full)
        _fsync_dir(full.parent)
        try:
            commit = commit_paths(vault, [rel, trash_rel], f"{who} delete_note: {rel} → {trash_rel}\n")
        except GitError as exc:
            _write_new(full, data)
            _trash_full(vault, trash_rel).unlink()
            _unstage(vault, [rel, trash_rel])
            raise WriteRefused(f"not deleted (git refused the commit; the note is back): {exc}") from None
    return TrashResult(rel, trash_rel, digest, commit, linked, notes)


def restore_note(vault: Path, path: str, new_path: str | None = None, *, who: str = "mcp") -> RestoreResult:
    """Bring a deleted note back from ``.trash/`` (or, when no copy is left, from git) and commit.

    ``path`` is the note's old path or a trash path (``.trash/a/x (2).md``); ``new_path`` puts it
    elsewhere. Raises WriteRefused when there is nothing to restore or the target is taken.
    """
    vault = Path(vault)
    path = path.strip().replace("\\", "/")
    with write_turn(vault) as notes:
        if path.startswith(TRASH + "/"):
            trash_rel: str | None = path
            original = original_path(path)
        else:
            original = path
            found = copies(vault, path)
            trash_rel = found[0] if found else None
            if len(found) > 1:
                notes.append(f"{len(found)} copies in the trash; restored the newest, {found[0]} "
                             f"(the others: {', '.join(found[1:])})")
        target = new_path_for(original, new_path) if new_path else original
        if not target.lower().endswith(".md"):
            raise WriteRefused(f"{target} is not a Markdown note path (it must end in .md)")
        source: str
        if trash_rel is not None:
            try:
                full = _trash_full(vault, trash_rel)
                data = full.read_bytes()
            except FileNotFoundError:
                raise WriteRefused(f"nothing at {trash_rel}") from None
            except (OSError, OutsideVault) as exc:
                raise WriteRefused(f"cannot restore {trash_rel}: {exc}") from None
            source = trash_rel
        else:
            hit = deleted_in(vault, original)
            if hit is None:
                raise WriteRefused(f"{original} is neither in {TRASH}/ nor deleted in the vault's git history")
            commit_id, data = hit
            source = f"git:{commit_id[:12]}"
        try:
            create_note(vault, target, data.decode("utf-8"))
        except NoteExists:
            raise WriteRefused(f"a note already exists at {target}; pass new_path to restore it elsewhere") from None
        except (OutsideVault, UnicodeDecodeError) as exc:
            raise WriteRefused(f"cannot restore to {target}: {exc}") from None
        if trash_rel is not None:
            full.unlink()
        paths = [target] + ([trash_rel] if trash_rel else [])
        try:
            commit = commit_paths(vault, paths, f"{who} restore_note: {target} ← {source}\n")
        except GitError as exc:
            if trash_rel is not None:
                _write_new(full, data)
            safe_path(vault, target).unlink()
            _unstage(vault, paths)
            raise WriteRefused(f"not restored (git refused the commit; the trash is as it was): {exc}") from None
    return RestoreResult(target, source, note_hash(data), commit, notes)
