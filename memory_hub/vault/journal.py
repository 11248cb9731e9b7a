"""Several files changed and committed as one unit: journaled, written, committed — or rolled back.

A writer that changes several notes in one git commit (each dream step) first records its plan
here: for every file, the bytes it has now (or that it does not exist) and the bytes it will have.
Only then are the files written, one atomic rename each, and committed with a ``Memory-Hub-Journal``
trailer naming the plan; the journal is removed last. A process killed at any point leaves the
journal behind, and the next writer settles it before it does anything else (``recover``):

* the commit landed (its trailer is in the history) → the journal is simply removed;
* every file still holds either its old or its planned bytes, HEAD has not moved and a commit may
  be made (a branch, no merge in progress) → the plan is *completed*: the rest is written and
  committed as the one commit it was meant to be;
* a commit may not be made right now (detached HEAD, a rebase …) → the journal waits;
* otherwise (HEAD moved, or a person changed one of the files since) → the plan is *rolled back*:
  files holding the planned bytes get their old bytes back; a file a person changed is left exactly
  as it is and named in the outcome.

The journal lives in the disposable cache (``<vault>/.memory_hub/journal/``), not in the tracked
state folder: it describes this working tree's files in flight, so it must never ride along in the
commit it describes, nor travel through git or a sync client to a clone whose files it does not
describe. Losing it (deleting the cache mid-crash) loses nothing: every old version is in git.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..config import index_dir
from . import safe_io
from .git import GitError, commit_blocker, commit_paths, run_git
from .safe_io import OutsideVault
from .writer import NoteExists

TRAILER = "Memory-Hub-Journal"


class CommitBlocked(RuntimeError):
    """A commit may not be made now (detached HEAD, a merge or rebase in progress); nothing was written."""


class JournalConflict(RuntimeError):
    """A file of the plan changed on disk before it could be written; nothing of the plan is left applied."""


@dataclass
class Change:
    """One file of a plan. ``before``/``after`` None: the file does not exist (before) / is deleted (after)."""

    path: str
    before: bytes | None
    after: bytes | None
    expected_mtime_ns: int | None = None  # the mtime the plan was made against (None: not checked)


@dataclass
class Outcome:
    """What settling one journal did: committed (already), completed, rolled back, or waiting."""

    journal: str
    name: str
    action: str
    commit: str | None = None
    kept: list[str] = field(default_factory=list)  # files a person changed since: left as they are
    reason: str = ""
    paths: list[str] = field(default_factory=list)  # the files of the plan (recent mtimes here are ours)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)

    def describe(self) -> str:
        text = f"interrupted {self.name} {self.journal[:8]}: {self.action}"
        if self.commit:
            text += f" (commit {self.commit[:10]})"
        if self.reason:
            text += f"; {self.reason}"
        if self.kept:
            text += f"; left as a person changed them: {', '.join(self.kept)}"
        return text


def journal_dir(vault: Path) -> Path:
    return index_dir(vault) / "journal"


def _encode(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "surrogateescape")


def _decode(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8", "surrogateescape")


def _write_durably(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _head(vault: Path) -> str | None:
    proc = run_git(vault, "rev-parse", "-q", "--verify", "HEAD", check=False)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def _current(vault: Path, rel: str) -> bytes | None | bool:
    """The file's bytes now, None when absent, False when it cannot be ours (outside, not a regular file)."""
    try:
        return safe_io.read_bytes(vault, rel)
    except FileNotFoundError:
        return None
    except (OSError, OutsideVault, safe_io.UnreadableNote):
        return False


def _put(vault: Path, rel: str, data: bytes | None, expected_mtime_ns: int | None = None,
         create: bool = False) -> None:
    """Give one file the bytes ``data`` (None: remove it), atomically, inside the vault only."""
    if data is None:  # through safe_io: inside the vault, a regular file, no symlink race
        try:
            if expected_mtime_ns is not None and safe_io.stat_file(vault, rel).st_mtime_ns != expected_mtime_ns:
                raise NoteExists(f"{rel} changed on disk since it was read; not deleted")
            safe_io.unlink_file(vault, rel)
        except FileNotFoundError:
            pass
        except safe_io.UnreadableNote as exc:
            raise NoteExists(f"{rel}: {exc}") from None
        return
    if create:
        safe_io.create_file(vault, rel, data)
    else:
        # Without an expected mtime this is a roll-back or a completion: a file the plan deletes
        # (or that was deleted) gets its bytes back even though it is not there now.
        safe_io.replace_file(vault, rel, data, expected_mtime_ns, create=expected_mtime_ns is None)


def _unstage(vault: Path, paths: list[str]) -> None:
    """Drop staged changes to ``paths`` (after a roll-back the index must match HEAD again)."""
    spec = "".join(f":(literal){p}\0" for p in paths)  # on stdin: a step may name thousands of files
    if _head(vault):
        run_git(vault, "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", input=spec, check=False)
    else:
        run_git(vault, "rm", "-q", "--cached", "--ignore-unmatch", "--pathspec-from-file=-", "--pathspec-file-nul",
                input=spec, check=False)


def _commit(vault: Path, paths: list[str], message: str, journal_id: str) -> str | None:
    text = message.rstrip("\n")
    last = text.rsplit("\n\n", 1)[-1].splitlines()
    joined = "\n" if "\n\n" in text and all(re.match(r"[\w-]+: \S", ln) for ln in last) else "\n\n"
    text += f"{joined}{TRAILER}: {journal_id}\n"  # one trailer block with the writer's own trailers
    return commit_paths(vault, paths, text)


def commit_atomically(vault: Path, changes: list[Change], message: str, name: str = "dream step") -> str | None:
    """Write ``changes`` and commit exactly those files as one commit; the commit id (None: nothing changed).

    Raises CommitBlocked before writing anything when no commit may be made now (see
    ``git.commit_blocker``), JournalConflict when a file changed on disk since it was read (the plan
    is undone, nothing is committed) and GitError when git refuses the commit (likewise undone). A
    crash leaves the journal for ``recover``.
    """
    vault = Path(vault)
    if not changes:
        return None
    blocker = commit_blocker(vault)
    if blocker:
        raise CommitBlocked(blocker)
    journal_id = uuid.uuid4().hex
    record = {"id": journal_id, "name": name, "message": message, "base": _head(vault),
              "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
              "changes": [{"path": c.path, "before": _encode(c.before), "after": _encode(c.after)} for c in changes]}
    path = journal_dir(vault) / f"{journal_id}.json"
    _write_durably(path, json.dumps(record, ensure_ascii=True).encode("ascii"))
    written: list[Change] = []
    try:
        for change in changes:
            _put(vault, change.path, change.after, change.expected_mtime_ns, create=change.before is None)
            written.append(change)
        commit = _commit(vault, [c.path for c in changes], message, journal_id)
    except (NoteExists, OSError, OutsideVault, GitError) as exc:  # a refusal, not a crash: undo it now
        _roll_back(vault, written)
        _unstage(vault, [c.path for c in changes])
        path.unlink(missing_ok=True)
        if isinstance(exc, GitError):
            raise
        raise JournalConflict(str(exc)) from None
    path.unlink(missing_ok=True)
    return commit


def _roll_back(vault: Path, changes: list[Change]) -> list[str]:
    """Give every file that holds its planned bytes its old bytes back; returns the files left alone."""
    kept = []
    for change in changes:
        now = _current(vault, change.path)
        if now is not False and now == change.after:
            _put(vault, change.path, change.before)
        elif now is False or now != change.before:
            kept.append(change.path)
    return kept


def pending(vault: Path) -> list[Path]:
    folder = journal_dir(vault)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def _committed(vault: Path, journal_id: str, base: str | None) -> str | None:
    args = ["log", "--format=%H", "-n", "1", "--fixed-strings", f"--grep={TRAILER}: {journal_id}"]
    if base and run_git(vault, "cat-file", "-e", f"{base}^{{commit}}", check=False).returncode == 0:
        args.append(f"{base}..HEAD")
    proc = run_git(vault, *args, check=False)
    return (proc.stdout.strip() or None) if proc.returncode == 0 else None


def recover(vault: Path) -> list[Outcome]:
    """Settle every journal a killed writer left behind (see the module docstring); what each became."""
    vault = Path(vault)
    out = []
    for path in pending(vault):
        try:
            record = json.loads(path.read_text(encoding="ascii"))
            journal_id, name = str(record["id"]), str(record.get("name") or "change")
            changes = [Change(c["path"], _decode(c["before"]), _decode(c["after"])) for c in record["changes"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            path.rename(path.with_suffix(".unreadable"))
            out.append(Outcome(path.stem, "change", "set aside", reason=f"journal unreadable ({exc}); kept as "
                               f"{path.with_suffix('.unreadable').name}; the files are as the crash left them"))
            continue
        base = record.get("base")
        landed = _committed(vault, journal_id, base)
        if landed:
            path.unlink(missing_ok=True)
            out.append(Outcome(journal_id, name, "committed", commit=landed, reason="the commit had landed",
                               paths=[c.path for c in changes]))
            continue
        blocker = commit_blocker(vault)
        states = [_current(vault, c.path) for c in changes]
        clean = all(now is not False and now in (c.before, c.after) for c, now in zip(changes, states, strict=True))
        if clean and blocker is None and _head(vault) == base:
            try:
                for change, now in zip(changes, states, strict=True):
                    if now != change.after:
                        _put(vault, change.path, change.after)
                commit = _commit(vault, [c.path for c in changes], str(record.get("message") or name), journal_id)
            except (NoteExists, OSError, OutsideVault, GitError) as exc:
                kept = _roll_back(vault, changes)
                _unstage(vault, [c.path for c in changes])
                path.unlink(missing_ok=True)
                out.append(Outcome(journal_id, name, "rolled back", kept=kept, reason=f"could not complete: {exc}",
                                   paths=[c.path for c in changes if c.path not in kept]))
                continue
            path.unlink(missing_ok=True)
            out.append(Outcome(journal_id, name, "completed", commit=commit, paths=[c.path for c in changes]))
            continue
        if clean and blocker is not None:
            out.append(Outcome(journal_id, name, "waiting", reason=blocker))
            continue
        kept = _roll_back(vault, changes)
        _unstage(vault, [c.path for c in changes if c.path not in kept])
        path.unlink(missing_ok=True)
        why = "HEAD moved since it was planned" if _head(vault) != base else "a file of it changed since"
        out.append(Outcome(journal_id, name, "rolled back", kept=kept, reason=why,
                           paths=[c.path for c in changes if c.path not in kept]))
    return out
