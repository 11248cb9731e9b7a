"""Creating a vault: from the starter template, or adopting an existing folder of notes."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..config import index_dir, template_dir
from . import git


class NotAFolder(ValueError):
    """The path names a file (or something else) where a vault folder should be."""


@dataclass
class InitResult:
    """What ``init_vault`` did. ``outcome``: created | adopted | existing (already a Memory Hub vault)."""

    path: Path
    outcome: str
    git_created: bool = False
    commit: str | None = None
    uncommitted: list[str] = field(default_factory=list)  # files git does not have yet (after any commit)


def uncommitted_files(path: Path) -> list[str]:
    """Paths git reports as untracked or changed (``.gitignore`` respected), e.g. a folder's notes never committed."""
    proc = git.run_git(path, "status", "--porcelain", "--untracked-files=all", "-z", check=False)
    if proc.returncode != 0:
        return []
    out = []
    for entry in proc.stdout.split("\0"):
        if len(entry) > 3:
            out.append(entry[3:])
    return out


def init_vault(path: Path, *, template: Path | None = None, commit: bool = False) -> InitResult:
    """Make ``path`` a Memory Hub vault.

    An empty or missing folder gets the starter vault and a git repository with a first commit.
    An existing folder of notes is adopted as it is: nothing in it changes except that
    ``.memory_hub/`` is added to its ``.gitignore``; it becomes a git repository if it is not one,
    and with ``commit`` its files get a first commit (dream and autocommit leave uncommitted notes
    alone, so an adopted folder without one would be only half managed).
    """
    path = Path(path).expanduser().resolve()
    if path.exists() and not path.is_dir():
        raise NotAFolder(f"{path} is a file, not a folder: name a folder for the vault (it is created if missing)")
    fresh = not path.exists() or not any(path.iterdir())
    known = index_dir(path).is_dir()
    if fresh:
        src = template or template_dir()
        shutil.copytree(src, path, dirs_exist_ok=True)
    git_created = not git.is_repo(path)
    git.init_repo(path)
    git.ensure_gitignore(path)
    sha = None
    if fresh:
        sha = git.commit_all(path, "Start a Memory Hub vault from the starter template")
    elif commit:
        sha = git.commit_all(path, "Memory Hub: first commit of the existing notes")
    outcome = "created" if fresh else ("existing" if known else "adopted")
    return InitResult(path, outcome, git_created, sha, uncommitted_files(path))
