"""Deleting a note recoverably: into the vault's ``.trash/`` folder (Obsidian's own), committed, and back.

``trash_note`` moves ``folder/x.md`` to ``.trash/folder/x.md`` (``x (2).md`` … when an older copy is
there) and commits both sides in one commit, so git records a rename into the trash; a vault whose
``.gitignore`` keeps ``.trash/`` out commits the deletion and keeps the copy on disk only. The walk
skips dot-folders, so a trashed note leaves every index. ``restore_note`` puts it back (at its old
path, or another), commits, and, when the trash copy is gone (emptied by hand, or a clone that never
had it), restores the bytes from the commit that deleted the note.

Two steps, each atomic and through ``safe_io``: the copy is written to the trash first (a temporary
file linked into place, never over an older copy), then the note is removed if its mtime is still
the one it was read at (else the copy goes and nothing is deleted). A process killed in between
leaves the note *and* a copy, never neither. Every path is checked before anything is read: the
part below ``.trash/`` as an ordinary vault path, and each file opened folder by folder without
following symlinks, so a ``.trash`` (or a copy) that is a symlink leads nowhere; a copy that cannot
be read that way is named in the result's notes and the note comes back from git instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import safe_io
from .editing import (
    WriteRefused,
    check_hash,
    check_new_path,
    note_hash,
    person_editing,
    read_for_change,
    write_turn,
)
from .git import GitError, commit_paths, deleted_in, run_git
from .move import backlinks, new_path_for
from .safe_io import NoteExists, OutsideVault, UnreadableNote, safe_path

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
    moved_from: str | None = None  # the note's old path, when new_path put it elsewhere

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}


def _trash_rel(vault: Path, trash_rel: str) -> str:
    """``trash_rel`` checked: ``.trash/`` and then an ordinary vault path (no ``..``, no dot-folders).

    The files themselves are read and written through ``safe_io`` with ``hidden=True``, which
    opens each folder without following symlinks, so a ``.trash`` made a symlink leads nowhere.
    """
    inner = trash_rel.removeprefix(TRASH + "/")
    if inner == trash_rel:
        raise OutsideVault(f"not a trash path: {trash_rel}")
    safe_path(vault, inner)
    return f"{TRASH}/{inner}"


def _copy_name(rel: str, n: int) -> str:
    stem, dot, ext = rel.rpartition(".")
    return f"{TRASH}/{rel}" if n == 1 else f"{TRASH}/{stem} ({n}){dot}{ext}"


def original_path(trash_rel: str) -> str:
    """Where a trash copy came from: ``.trash/a/x (2).md`` → ``a/x.md``."""
    return _COPY.sub(r"\2", trash_rel.removeprefix(TRASH + "/"))


def copies(vault: Path, rel: str, refused: list[str] | None = None) -> list[str]:
    """The trash copies of ``rel``, newest first; a copy that cannot be read safely (a symlink, a
    ``.trash`` that leads out of the vault) is left out and, with ``refused`` given, named there."""
    found = []
    for n in range(1, 1000):
        trash_rel = _copy_name(rel, n)
        try:
            found.append((safe_io.stat_file(vault, _trash_rel(vault, trash_rel), hidden=True).st_mtime_ns, trash_rel))
        except FileNotFoundError:
            if n > 1:
                break
        except (OSError, OutsideVault, UnreadableNote) as exc:
            if refused is not None:
                refused.append(f"{trash_rel}: {exc}")
            if n > 1 or isinstance(exc, OutsideVault):  # the folder itself leads out: so will every copy
                break
    return [p for _m, p in sorted(found, reverse=True)]


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
        digest = check_hash(rel, data, expected_hash)
        if expected_hash is None:
            busy = person_editing(vault, rel, mtime, now)
            if busy:
                raise WriteRefused(f"{rel} is {busy}; read it with read_note and pass its hash as expected_hash "
                                   "to delete it anyway")
        linked = backlinks(vault, rel)  # while it is still there to resolve to
        for n in range(1, 1000):
            trash_rel = _trash_rel(vault, _copy_name(rel, n))
            try:
                safe_io.create_file(vault, trash_rel, b"", hidden=True)  # the name, reserved
                break
            except NoteExists:
                continue
            except (OSError, OutsideVault) as exc:
                raise WriteRefused(f"cannot write to {TRASH}/: {exc}") from None
        else:
            raise WriteRefused(f"the trash holds too many copies of {rel}; empty {TRASH}/ first")
        # The note itself moves (its inode, never a copy): a save that lands after the check above
        # is inside the trashed file, not lost; one that landed before it is caught just below.
        try:
            safe_io.move_file(vault, rel, trash_rel, replace=True, dst_hidden=True)
        except (OSError, UnreadableNote, OutsideVault) as exc:
            safe_io.unlink_file(vault, trash_rel, hidden=True)
            raise WriteRefused(f"{rel} could not be moved to {TRASH}/ ({exc}); nothing was deleted") from None
        if safe_io.read_bytes(vault, trash_rel, hidden=True) != data:
            raise WriteRefused(_put_back(vault, rel, trash_rel, f"{rel} changed while it was being deleted"))
        try:
            commit = commit_paths(vault, [rel, trash_rel], f"{who} delete_note: {rel} → {trash_rel}\n")
        except GitError as exc:
            _unstage(vault, [rel, trash_rel])
            raise WriteRefused(_put_back(vault, rel, trash_rel, f"not deleted (git refused the commit: {exc})")) from None
    return TrashResult(rel, trash_rel, digest, commit, linked, notes)


def _put_back(vault: Path, rel: str, trash_rel: str, why: str) -> str:
    """Move a note just trashed back to its path; the message says where it is if it cannot go back
    (someone saved a new file there meanwhile: both are kept)."""
    try:
        safe_io.move_file(vault, trash_rel, rel, replace=False, src_hidden=True)
    except NoteExists:
        return f"{why}; a new {rel} was saved meanwhile, so the text that was there is kept at {trash_rel}"
    except (OSError, UnreadableNote, OutsideVault) as exc:
        return f"{why}; it could not be moved back ({exc}) and is kept at {trash_rel}"
    return f"{why}; the note is back, nothing was deleted"


def restore_note(vault: Path, path: str, new_path: str | None = None, *, who: str = "mcp") -> RestoreResult:
    """Bring a deleted note back from ``.trash/`` (or, when no copy is left, from git) and commit.

    ``path`` is the note's old path or a trash path (``.trash/a/x (2).md``); ``new_path`` puts it
    elsewhere. Raises WriteRefused when there is nothing to restore or the target is taken.
    """
    vault = Path(vault)
    path = path.strip().replace("\\", "/")
    original = original_path(path) if path.startswith(TRASH + "/") else path
    target = check_new_path(new_path_for(original, new_path)) if new_path else original
    for what, rel in (("path", original), ("new_path", target)):
        try:
            safe_path(vault, rel)
        except OutsideVault as exc:
            raise WriteRefused(f"refused {what}: {exc}") from None
    if not target.lower().endswith(".md"):
        raise WriteRefused(f"{target} is not a Markdown note path (it must end in .md)")
    with write_turn(vault) as notes:
        if path.startswith(TRASH + "/"):
            trash_rel: str | None = path
        else:
            refused: list[str] = []
            found = copies(vault, path, refused)
            trash_rel = found[0] if found else None
            if len(found) > 1:
                notes.append(f"{len(found)} copies in the trash; restored the newest, {found[0]} "
                             f"(the others: {', '.join(found[1:])})")
            notes += [f"left alone (not a safe file inside the vault): {r}" for r in refused]
        source: str
        if trash_rel is not None:
            try:
                trash_rel = _trash_rel(vault, trash_rel)
                data = safe_io.read_bytes(vault, trash_rel, hidden=True)
            except FileNotFoundError:
                raise WriteRefused(f"nothing at {trash_rel}") from None
            except (OSError, OutsideVault, UnreadableNote) as exc:
                raise WriteRefused(f"cannot restore {trash_rel}: {exc}") from None
            source = trash_rel
        else:
            hit = deleted_in(vault, original)
            if hit is None:
                raise WriteRefused(f"{original} is neither in {TRASH}/ nor deleted in the vault's git history")
            commit_id, data = hit
            source = f"git:{commit_id[:12]}"
        try:
            safe_io.create_file(vault, target, data)
        except NoteExists:
            raise WriteRefused(f"a note already exists at {target}; pass new_path to restore it elsewhere") from None
        except (OSError, OutsideVault) as exc:
            raise WriteRefused(f"cannot restore to {target}: {exc}") from None
        if trash_rel is not None:
            safe_io.unlink_file(vault, trash_rel, hidden=True)
        paths = [target] + ([trash_rel] if trash_rel else [])
        try:
            commit = commit_paths(vault, paths, f"{who} restore_note: {target} ← {source}\n")
        except GitError as exc:
            if trash_rel is not None:
                safe_io.create_file(vault, trash_rel, data, hidden=True)
            safe_io.unlink_file(vault, target)
            _unstage(vault, paths)
            raise WriteRefused(f"not restored (git refused the commit; the trash is as it was): {exc}") from None
    return RestoreResult(target, source, note_hash(data), commit, notes, original if target != original else None)
