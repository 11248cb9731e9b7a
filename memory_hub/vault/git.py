"""The vault is a git repository: create it, commit to it, and install hooks in it."""

from __future__ import annotations

import contextlib
import contextvars
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from . import safe_io

_IDENTITY = ["-c", "user.name=Memory Hub", "-c", "user.email=memory-hub@localhost"]


# The author that commits made in this context name (``author``): a shared server's write tools set it
# to the token that sent the write, so ``git log`` says who wrote what. None: git's own identity.
_AUTHOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("memory_hub_git_author", default=None)


@contextlib.contextmanager
def author(line: str | None) -> Iterator[None]:
    """Commits ``commit_paths`` makes inside this block name ``line`` ("Name <email>") as author."""
    token = _AUTHOR.set(line)
    try:
        yield
    finally:
        _AUTHOR.reset(token)


def current_author() -> str | None:
    """The author ``author`` set for this context ("Name <email>"), or None: git's own identity."""
    return _AUTHOR.get()


class GitError(RuntimeError):
    """A git command failed; the message carries git's own words."""


def run_git(vault: Path, *args: str, check: bool = True, identity: bool = False,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["git"] + (_identity_args(vault) if identity else []) + list(args)
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run(cmd, cwd=vault, capture_output=True, text=True, env=env, input=input)
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _identity_args(vault: Path) -> list[str]:
    """Use the user's git identity when configured; otherwise a neutral one so commits work."""
    name = subprocess.run(["git", "config", "user.name"], cwd=vault, capture_output=True, text=True).stdout.strip()
    email = subprocess.run(["git", "config", "user.email"], cwd=vault, capture_output=True, text=True).stdout.strip()
    return [] if name and email else _IDENTITY


def is_repo(vault: Path) -> bool:
    return (vault / ".git").exists()


def git_dir(vault: Path) -> Path:
    """The repository's git folder (``.git``, or a worktree's folder under the main repository)."""
    out = run_git(vault, "rev-parse", "--git-dir").stdout.strip()
    path = Path(out)
    return path if path.is_absolute() else (vault / path)


# Marker files git leaves in its folder while an operation waits for the person to finish it.
# Not REBASE_HEAD: git 2.39 leaves it behind after a rebase that stopped once and was continued,
# which would block every commit forever; the rebase folders say whether one is really under way.
_IN_PROGRESS = {
    "MERGE_HEAD": "a merge", "rebase-merge": "a rebase", "rebase-apply": "a rebase or am",
    "CHERRY_PICK_HEAD": "a cherry-pick", "REVERT_HEAD": "a revert", "BISECT_LOG": "a bisect",
    "sequencer": "a cherry-pick or revert sequence",
}


def operation_in_progress(vault: Path) -> str | None:
    """The git operation in progress in the vault ("a merge", "a rebase" …), or None."""
    gdir = git_dir(vault)
    for name, what in _IN_PROGRESS.items():
        if (gdir / name).exists():
            return what
    return None


def current_branch(vault: Path) -> str | None:
    """The branch HEAD points at (also before its first commit), or None when HEAD is detached."""
    proc = run_git(vault, "symbolic-ref", "-q", "--short", "HEAD", check=False)
    if proc.returncode != 0:
        return None
    return proc.stdout.strip() or None


def commit_blocker(vault: Path) -> str | None:
    """Why a commit made now could be lost or tangled with a person's git work, or None when it is safe.

    A commit on a detached HEAD belongs to no branch: the next ``git switch`` leaves it behind and
    only the reflog remembers it. A commit in the middle of a merge, rebase, cherry-pick, revert or
    bisect would become part of that operation. In both cases the writer waits: the changes stay in
    the working tree, and are committed by the first run after the person finishes.
    """
    busy = operation_in_progress(vault)
    if busy:
        return f"{busy} is in progress; finish it (or abort it) and the changes are committed next time"
    if current_branch(vault) is None:
        head = run_git(vault, "rev-parse", "--short", "HEAD", check=False).stdout.strip() or "?"
        return (f"HEAD is detached (at {head}): a commit there would belong to no branch; check out a branch "
                "(`git switch <branch>`) and the changes are committed next time")
    return None


def init_repo(vault: Path) -> None:
    if not is_repo(vault):
        run_git(vault, "init", "-q")


def commit_all(vault: Path, message: str) -> str | None:
    """Stage everything (``.gitignore`` keeps caches out) and commit; None when nothing changed."""
    run_git(vault, "add", "-A")
    if run_git(vault, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    run_git(vault, "commit", "-q", "-m", message, identity=True)
    return run_git(vault, "rev-parse", "HEAD").stdout.strip()


def _literal(paths: list[str]) -> list[str]:
    """Pathspecs that match exactly these paths (a note named ``a [draft].md`` is not a glob)."""
    return [f":(literal){p}" for p in paths]


def uncommitted_paths(vault: Path) -> set[str]:
    """Files with uncommitted changes (modified, added, deleted, untracked) in git; empty outside a repository."""
    if not is_repo(vault):
        return set()
    out = run_git(vault, "status", "--porcelain", "-z", "--untracked-files=all", check=False).stdout
    paths = set()
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.add(entry[3:])
            if entry[0] in "RC":
                i += 1
        i += 1
    return paths


def ignored_paths(vault: Path, paths: list[str]) -> set[str]:
    """Which of ``paths`` the vault's ignore rules keep out of git."""
    if not paths:
        return set()
    proc = run_git(vault, "check-ignore", "--no-index", "-z", "--stdin", input="\0".join(paths) + "\0", check=False)
    return {p for p in proc.stdout.split("\0") if p}


def commit_paths(vault: Path, paths: list[str], message: str) -> str | None:
    """Stage and commit exactly ``paths`` (whatever else is staged stays staged); the commit, or None.

    A path that is neither tracked nor on disk (a note created and removed before any commit) and a
    path the ignore rules keep out (a git-ignored ``.trash/``) are left out instead of failing the
    commit. None when nothing of ``paths`` differs from HEAD. The paths go to git on stdin, so a
    move that rewrote links in thousands of notes is one commit too.
    """
    paths = list(dict.fromkeys(paths))
    tracked = set(run_git(vault, "ls-files", "-z").stdout.split("\0")) & set(paths)
    present = [p for p in paths if p not in tracked and os.path.lexists(vault / p)]
    ignored = ignored_paths(vault, present)
    keep = [p for p in paths if p in tracked] + [p for p in present if p not in ignored]
    if not keep:
        return None
    spec = "\0".join(_literal(keep)) + "\0"
    run_git(vault, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", input=spec)
    staged = set(run_git(vault, "diff", "--cached", "--name-only", "--no-renames", "-z").stdout.split("\0"))
    if not staged & set(keep):
        return None  # nothing differs from HEAD (someone committed these bytes already)
    who = _AUTHOR.get()
    run_git(vault, "commit", "-q", "-m", message, *([f"--author={who}"] if who else []),
            "--pathspec-from-file=-", "--pathspec-file-nul", input=spec, identity=True)
    return run_git(vault, "rev-parse", "HEAD").stdout.strip()


def _show(vault: Path, spec: str) -> bytes | None:
    shown = subprocess.run(["git", "show", spec], cwd=vault, capture_output=True,
                           env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))
    return shown.stdout if shown.returncode == 0 else None


def deleted_in(vault: Path, rel: str) -> tuple[str, bytes] | None:
    """The last commit that deleted ``rel`` and the file's bytes just before it, or None.

    A file still in HEAD (removed from the working tree only) comes back as HEAD has it.
    """
    head = run_git(vault, "rev-parse", "-q", "--verify", "HEAD", check=False).stdout.strip()
    data = _show(vault, f"HEAD:{rel}") if head else None
    if data is not None:
        return head, data
    proc = run_git(vault, "log", "-1", "--format=%H", "--diff-filter=D", "--", *_literal([rel]), check=False)
    commit = proc.stdout.strip()
    if proc.returncode != 0 or not commit:
        return None
    data = _show(vault, f"{commit}^:{rel}")
    return (commit, data) if data is not None else None


# What git must never see: the index caches, and the temporary files of an atomic write in flight
# (``vault.safe_io`` writes ``.mh-*.tmp`` beside a note, then renames it; a killed writer leaves one).
IGNORED = (".memory_hub/", ".mh-*.tmp")


def ensure_gitignore(vault: Path, lines: tuple[str, ...] = IGNORED) -> bool:
    """Make sure the vault's .gitignore keeps index caches and temp files out of git. True if changed.

    Read and written through ``safe_io``: a ``.gitignore`` that is a symlink leading outside the
    vault raises OutsideVault instead of being written through.
    """
    try:
        existing = safe_io.read_text(vault, ".gitignore", hidden=True)
    except FileNotFoundError:
        existing = ""
    except safe_io.UnreadableNote as exc:
        raise GitError(f".gitignore cannot be read ({exc}); fix it by hand") from None
    present = {ln.strip() for ln in existing.splitlines()}
    missing = [ln for ln in lines if ln not in present and ln.rstrip("/") not in present]
    if not missing:
        return False
    text = existing + ("" if not existing or existing.endswith("\n") else "\n") + "\n".join(missing) + "\n"
    safe_io.replace_file(vault, ".gitignore", text.encode("utf-8"), hidden=True, create=True)
    return True
