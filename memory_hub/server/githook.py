"""The vault's git post-commit hook: run ``memory-hub sync`` in the background after every commit.

Commits made outside any editor (``git pull``, a script, another machine's notes merged in) then
reach the index without a running server. The hook's own lines sit between two marker comments, so
installing again is a no-op, an upgrade replaces only those lines, a hook a person already had
keeps every line of its own, and ``uninstall_post_commit_hook`` takes out exactly those lines (and
the file, when it was ours alone). The sync runs detached, so a commit never waits for indexing.
The command is the ``memory-hub`` on PATH (``launcher.py``), so moving a clone does not break it.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path

from ..config import index_dir
from ..launcher import launcher
from ..vault.git import GitError, run_git

BEGIN = "# >>> memory-hub sync (installed by `memory-hub install-git-hook`) >>>"
END = "# <<< memory-hub sync <<<"


def default_command() -> list[str]:
    """How the hook calls memory-hub: the ``memory-hub`` on PATH, else this installation's."""
    return list(launcher().argv)


def hook_path(vault: Path) -> Path:
    """Where git looks for the post-commit hook (honours ``core.hooksPath``)."""
    try:
        rel = run_git(vault, "rev-parse", "--git-path", "hooks/post-commit").stdout.strip()
    except GitError as exc:
        raise GitError(f"{vault} is not a git repository ({exc}); run `git init` there first") from None
    path = Path(rel)
    return path if path.is_absolute() else (vault / path)


def hook_block(vault: Path, command: list[str] | None = None) -> str:
    cmd = " ".join(shlex.quote(c) for c in (command or default_command()))
    log = shlex.quote(str(index_dir(vault) / "git-hook.log"))
    return (
        f"{BEGIN}\n"
        f"( {cmd} --vault {shlex.quote(str(vault))} sync >{log} 2>&1 & ) >/dev/null 2>&1 || true\n"
        f"{END}\n"
    )


def install_post_commit_hook(vault: Path, command: list[str] | None = None) -> tuple[str, Path]:
    """Install or refresh the hook. Returns (``installed`` | ``updated`` | ``unchanged``, hook path)."""
    vault = Path(vault).resolve()
    path = hook_path(vault)
    block = hook_block(vault, command)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, "#!/bin/sh\n" + block)
        return "installed", path
    text = path.read_text(encoding="utf-8")
    if BEGIN in text and END in text:
        start = text.index(BEGIN)
        stop = text.index(END, start) + len(END)
        if stop < len(text) and text[stop] == "\n":
            stop += 1
        new = text[:start] + block + text[stop:]
        outcome = "unchanged" if new == text else "updated"
    else:
        # Right after the shebang: an existing hook may end with `exit`, which would skip anything appended.
        lines = text.splitlines(keepends=True)
        if lines and lines[0].startswith("#!"):
            head = lines[0] if lines[0].endswith("\n") else lines[0] + "\n"
            new = head + block + "".join(lines[1:])
        else:
            new = "#!/bin/sh\n" + block + text
        outcome = "updated"
    if new != text:
        _write(path, new)
    elif not os.access(path, os.X_OK):
        _write(path, text)
        outcome = "updated"
    return outcome, path


def installed_command(vault: Path) -> str | None:
    """The command line our block runs, when the vault has our hook (for ``doctor``)."""
    try:
        path = hook_path(Path(vault).resolve())
        text = path.read_text(encoding="utf-8")
    except (GitError, OSError, UnicodeDecodeError):
        return None
    if BEGIN not in text:
        return None
    line = text[text.index(BEGIN):].splitlines()[1:2]
    return line[0].removeprefix("( ").split(" --vault ", 1)[0] if line else None


def uninstall_post_commit_hook(vault: Path) -> tuple[str, Path]:
    """Remove our block. Returns (``removed`` | ``deleted`` (the hook held nothing else) | ``absent``, path)."""
    vault = Path(vault).resolve()
    path = hook_path(vault)
    if not path.exists():
        return "absent", path
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return "absent", path
    start = text.index(BEGIN)
    stop = text.index(END, start) + len(END)
    if stop < len(text) and text[stop] == "\n":
        stop += 1
    rest = text[:start] + text[stop:]
    if rest.strip() in ("", "#!/bin/sh"):
        path.unlink()
        return "deleted", path
    tmp = path.with_name(path.name + ".mh-tmp")
    tmp.write_text(rest, encoding="utf-8")
    os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
    os.replace(tmp, path)
    return "removed", path


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".mh-tmp")
    tmp.write_text(text, encoding="utf-8")
    mode = path.stat().st_mode if path.exists() else 0o644
    os.chmod(tmp, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, path)
