"""Commit what one writer of a shared server wrote, with that writer as the commit's author.

A server shared through named tokens (``server/tokens.py``) knows who sent each write. The files a
write touched are committed at once, alone (``git.commit_paths``, a pathspec commit: another
writer's files in flight are not swept in), inside ``git.author`` as the write tools commit, with
``Author: <token name> <<name>@memory-hub>``; the committer stays the server's own git identity. ``git log --format='%an %s'`` then says who wrote what, and ``sync --remote``
carries the authorship to every clone.

Same rules as ``autocommit``: only on a branch, never during a merge/rebase or a dream pass (the
dream lock is held while staging, which also serialises concurrent writers of one server). When a
commit cannot be made now the files stay in the working tree for the next autocommit or sync, and
the reply says why.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ..config import index_dir
from ..locks import file_lock
from ..vault.git import GitError, author, commit_blocker, commit_paths, git_dir, is_repo

LOCK_WAIT_S = 10.0


def author_line(name: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-") or "token"
    return f"{name} <{slug}@memory-hub>"


def commit_as(vault: Path, paths: list[str], name: str, message: str) -> dict[str, Any]:
    """Commit ``paths`` (vault-relative) with ``name`` as the author: ``commit_paths`` inside
    ``git.author``, the one way every write names its author. Returns {committed, commit?, why?}."""
    vault = Path(vault)
    if not is_repo(vault):
        return {"committed": False, "why": "the vault is not a git repository"}
    blocker = commit_blocker(vault)
    if blocker:
        return {"committed": False, "why": blocker}
    try:
        with file_lock(index_dir(vault) / "dream.lock", timeout=LOCK_WAIT_S):
            deadline = time.monotonic() + LOCK_WAIT_S
            while (git_dir(vault) / "index.lock").exists():
                if time.monotonic() > deadline:
                    return {"committed": False, "why": "another git process holds index.lock; autocommit or "
                                                       "sync commits the files later"}
                time.sleep(0.05)
            try:
                with author(author_line(name)):
                    commit = commit_paths(vault, paths, message)
            except GitError as exc:
                return {"committed": False, "why": str(exc)[:300]}
            if commit is None:
                return {"committed": False, "why": "nothing to commit: these files already match HEAD"}
            return {"committed": True, "commit": commit, "author": name}
    except TimeoutError:
        return {"committed": False, "why": "a dream pass or another commit held the vault; autocommit or sync "
                                           "commits the files later"}
