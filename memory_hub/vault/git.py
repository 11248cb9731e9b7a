"""The vault is a git repository: create it, commit to it, and install hooks in it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from . import safe_io

_IDENTITY = ["-c", "user.name=Memory Hub", "-c", "user.email=memory-hub@localhost"]


class GitError(RuntimeError):
    """A git command failed; the message carries git's own words."""


def run_git(vault: Path, *args: str, check: bool = True, identity: bool = False) -> subprocess.CompletedProcess[str]:
    cmd = ["git"] + (_identity_args(vault) if identity else []) + list(args)
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run(cmd, cwd=vault, capture_output=True, text=True, env=env)
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


def ensure_gitignore(vault: Path, lines: tuple[str, ...] = (".memory_hub/",)) -> bool:
    """Make sure the vault's .gitignore keeps index caches out of git. Returns True if changed.

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
