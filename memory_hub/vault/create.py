"""Creating a vault: from the starter template, or adopting an existing folder of notes."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..config import template_dir
from . import git


def init_vault(path: Path, *, template: Path | None = None) -> str:
    """Make ``path`` a Memory Hub vault. Returns 'created' or 'adopted'.

    An empty or missing folder gets the starter vault and a git repository with a first commit.
    An existing folder of notes is adopted as it is: nothing in it is changed except that
    ``.memory_hub/`` is added to its ``.gitignore``; it becomes a git repository if it is not one.
    """
    path = Path(path).expanduser().resolve()
    fresh = not path.exists() or not any(path.iterdir())
    if fresh:
        src = template or template_dir()
        shutil.copytree(src, path, dirs_exist_ok=True)
    git.init_repo(path)
    git.ensure_gitignore(path)
    if fresh:
        git.commit_all(path, "Start a Memory Hub vault from the starter template")
    return "created" if fresh else "adopted"
