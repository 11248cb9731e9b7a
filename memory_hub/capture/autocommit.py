"""Auto-commit: keep the vault's history without the person thinking about git.

``autocommit`` commits whatever changed, with a message naming the notes added, modified and
deleted. It never commits index caches or the temp files of a write in flight (``.memory_hub/`` and
``.mh-*.tmp`` are git-ignored, checked every run, never staged, and untracked again if they ever
were), commits only on a branch (a commit on a detached HEAD would be left behind by the next
``git switch``), never while a merge, rebase, cherry-pick, revert or bisect is in progress, and never
while a dream pass runs. A dream step a killed pass left half-written is settled first (completed
or rolled back, see ``vault.journal``), so it never rides along in a "vault:" commit. Apart from
that it never touches the working tree, so no change can be lost: what is not committed now is
committed next time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..config import INDEX_DIRNAME, index_dir
from ..locks import file_lock, is_locked
from ..vault import usage
from ..vault.git import (  # noqa: F401 - operation_in_progress re-exported for callers of its old home
    GitError,
    commit_blocker,
    ensure_gitignore,
    git_dir,
    is_repo,
    operation_in_progress,
    run_git,
)
from ..vault.journal import pending, recover
from ..vault.safe_io import OutsideVault

TEMP_GLOB = ".mh-*.tmp"  # vault.writer's temporary files (see vault.git.IGNORED)
_NO_TEMPS = f":(exclude,glob)**/{TEMP_GLOB}"  # even where .gitignore does not (yet) say so


class AutocommitError(RuntimeError):
    """The vault cannot be auto-committed (not a repository, git failing); the message says why."""


@dataclass
class CommitReport:
    committed: bool
    commit: str | None = None
    message: str = ""
    skipped: str | None = None  # why nothing was committed, when something changed
    blocked: str | None = None  # why no commit may be made now (detached HEAD, a rebase …), changes or not
    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".md")


def _list(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(_name(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def commit_message(added: list[str], modified: list[str], deleted: list[str],
                   renamed: list[tuple[str, str]]) -> str:
    """``vault: added a, b; modified c; deleted d`` — plus every path in the body."""
    parts = []
    for label, names in (("added", added), ("modified", modified), ("deleted", deleted)):
        if names:
            parts.append(f"{label} {_list(names)}")
    if renamed:
        parts.append("renamed " + ", ".join(f"{_name(a)} → {_name(b)}" for a, b in renamed[:5]))
    subject = "vault: " + "; ".join(parts)
    body = [f"A {p}" for p in added] + [f"M {p}" for p in modified] + [f"D {p}" for p in deleted]
    body += [f"R {a} -> {b}" for a, b in renamed]
    return subject + "\n\n" + "\n".join(body) + "\n"


def _staged(vault: Path) -> tuple[list[str], list[str], list[str], list[tuple[str, str]]]:
    out = run_git(vault, "diff", "--cached", "--name-status", "-z", "-M").stdout
    fields = out.split("\0")
    added, modified, deleted, renamed = [], [], [], []
    i = 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status.startswith(("R", "C")):
            renamed.append((fields[i + 1], fields[i + 2]))
            i += 3
            continue
        path = fields[i + 1]
        {"A": added, "D": deleted}.get(status[0], modified).append(path)
        i += 2
    return added, modified, deleted, renamed


def ensure_index_ignored(vault: Path) -> list[str]:
    """Make sure ``.memory_hub/`` and temp files are ignored and untracked; returns what had to be fixed."""
    fixed = []
    for probe, line in ((f"{INDEX_DIRNAME}/index.sqlite3", f"{INDEX_DIRNAME}/"), (".mh-probe.tmp", TEMP_GLOB)):
        if run_git(vault, "check-ignore", "-q", "--no-index", probe, check=False).returncode != 0:
            ensure_gitignore(vault)
            fixed.append(f"added {line} to .gitignore")
    tracked = run_git(vault, "ls-files", "--", INDEX_DIRNAME).stdout.split()
    if tracked:
        run_git(vault, "rm", "-r", "-q", "--cached", "--", INDEX_DIRNAME)
        fixed.append(f"stopped tracking {len(tracked)} index file(s) under {INDEX_DIRNAME}/ (kept on disk)")
    temps = run_git(vault, "ls-files", "-z", "--", f":(glob)**/{TEMP_GLOB}").stdout.split("\0")
    temps = [t for t in temps if t]
    if temps:
        run_git(vault, "rm", "-q", "--cached", "--", *temps)
        fixed.append(f"stopped tracking {len(temps)} temporary file(s) ({', '.join(temps[:3])}) left by an "
                     "interrupted write")
    return fixed


USAGE_ALONE_AFTER_S = 86_400


def _publish_usage(vault: Path, other_changes: bool) -> tuple[int, str | None]:
    """Reads recorded since the last commit reach git with the next commit that happens anyway, or
    in a commit of their own once they are a day old: never one commit per read (vault/usage.py).
    Returns (events published, why none could be)."""
    count, oldest = usage.unpublished(vault)
    if not count or (not other_changes and oldest is not None and time.time() - oldest < USAGE_ALONE_AFTER_S):
        return 0, None
    try:
        moved = usage.publish(vault)
    except (OutsideVault, OSError) as exc:  # e.g. .memory-hub/usage/ leads outside: the journal stays
        return 0, f"usage not published: {exc}"
    run_git(vault, "add", "--", usage.log_place(vault).rel)
    return moved, None


def dream_running(vault: Path) -> bool:
    """Whether a dream pass holds its lock: its edits are committed by the pass itself, step by step."""
    return is_locked(index_dir(vault) / "dream.lock")


def autocommit(vault: Path, message: str | None = None, lock_wait_s: float = 5.0) -> CommitReport:
    """Commit every change in the vault (index caches excluded); a no-op when nothing changed."""
    vault = Path(vault)
    if not is_repo(vault):
        raise AutocommitError(f"{vault} is not a git repository (run `git init` there, or `memory-hub init`)")
    blocker = commit_blocker(vault)
    if blocker:
        dirty = bool(run_git(vault, "status", "--porcelain").stdout.strip())
        return CommitReport(False, skipped=blocker if dirty else None, blocked=blocker)
    if dream_running(vault):
        return CommitReport(False, skipped="a dream pass is running; it commits its own changes")
    deadline = time.monotonic() + lock_wait_s
    while (git_dir(vault) / "index.lock").exists():
        if time.monotonic() > deadline:
            return CommitReport(False, skipped="another git process holds index.lock; try again later")
        time.sleep(0.1)
    # Holding the dream lock keeps a pass from starting while this stages files (its half-written
    # step would ride along in this commit); it also makes settling an interrupted step safe.
    with file_lock(index_dir(vault) / "dream.lock", blocking=False) as held:
        if not held:
            return CommitReport(False, skipped="a dream pass is running; it commits its own changes")
        notes = [o.describe() for o in recover(vault)] if pending(vault) else []
        if pending(vault):
            return CommitReport(False, skipped="an interrupted dream step is waiting: " + "; ".join(notes), notes=notes)
        try:
            notes += ensure_index_ignored(vault)
        except (OutsideVault, GitError) as exc:  # e.g. a .gitignore symlinked outside the vault
            raise AutocommitError(f"not committing: {exc}") from None
        try:
            return _commit_all(vault, message, notes)
        except GitError as exc:
            raise AutocommitError(str(exc)) from None


def _commit_all(vault: Path, message: str | None, notes: list[str]) -> CommitReport:
    run_git(vault, "add", "-A", "--", ".", _NO_TEMPS)
    added, modified, deleted, renamed = _staged(vault)
    if any(p.startswith(INDEX_DIRNAME + "/") for p in added + modified):  # belt and braces
        run_git(vault, "rm", "-r", "-q", "--cached", "--", INDEX_DIRNAME)
        added, modified, deleted, renamed = _staged(vault)
    published, problem = _publish_usage(vault, bool(added or modified or deleted or renamed))
    if problem:
        notes.append(problem)
    if published:
        notes.append(f"published {published} usage event(s) to {usage.log_place(vault).rel}")
        added, modified, deleted, renamed = _staged(vault)
    if not (added or modified or deleted or renamed):
        return CommitReport(False, notes=notes)
    text = message or commit_message(added, modified, deleted, renamed)
    run_git(vault, "commit", "-q", "-m", text, identity=True)
    head = run_git(vault, "rev-parse", "HEAD").stdout.strip()
    return CommitReport(True, commit=head, message=text.splitlines()[0], added=added, modified=modified,
                        deleted=deleted, renamed=renamed, notes=notes)
