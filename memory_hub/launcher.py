"""How programs outside this process start memory-hub: agent hooks, schedules, the git hook.

They must keep working after the clone or virtualenv that installed them moves, so they run the
``memory-hub`` found on ``PATH`` (a pipx or uv tool install, or the link ``make install`` puts in
``~/.local/bin``), by that path and not the file it links to. Only when there is none do they run
this installation's own script, and if that sits inside a source checkout the installer says so
loudly: moving or deleting the clone would break it. ``$MEMORY_HUB_COMMAND`` overrides the choice.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

COMMAND_ENV = "MEMORY_HUB_COMMAND"
MAKE_INSTALL_HINT = "run `make install` in the clone (it links memory-hub into ~/.local/bin) and install again"


@dataclass(frozen=True)
class Launcher:
    """The command line that starts memory-hub, and whether it survives a moved clone."""

    argv: tuple[str, ...]
    source: str  # env | path | this-install | python
    warning: str | None = None

    def command(self, *args: str) -> str:
        """A shell command line (for settings files, cron and git hooks)."""
        return " ".join(shlex.quote(a) for a in (*self.argv, *args))


def source_checkout() -> Path | None:
    """The clone this code runs from (an editable install), or None for an installed package."""
    root = Path(__file__).resolve().parent.parent
    return root if (root / "pyproject.toml").is_file() and (root / "memory_hub").is_dir() else None


def _inside(path: str | Path, root: Path | None) -> bool:
    if root is None:
        return False
    try:
        Path(os.path.abspath(path)).relative_to(root)
        return True
    except ValueError:
        return False


def launcher() -> Launcher:
    """Pick the command (see the module docstring)."""
    explicit = os.environ.get(COMMAND_ENV, "").strip()
    if explicit:
        return Launcher(tuple(shlex.split(explicit)), "env")
    checkout = source_checkout()
    on_path = shutil.which("memory-hub")
    if on_path:
        path = os.path.abspath(on_path)
        warning = None
        if _inside(path, checkout):
            warning = (f"memory-hub on PATH is {path}, inside the clone {checkout}: moving or deleting the clone "
                       f"breaks what is installed here; {MAKE_INSTALL_HINT}")
        return Launcher((path,), "path", warning)
    script = Path(sys.executable).parent / "memory-hub"
    argv: tuple[str, ...] = (str(script),) if script.exists() else (sys.executable, "-m", "memory_hub")
    warning = (f"memory-hub is not on PATH, so this runs {argv[0]}"
               + (f", inside the clone {checkout}: moving or deleting the clone breaks it; {MAKE_INSTALL_HINT}"
                  if _inside(argv[0], checkout) else "; put its folder on PATH to keep the command short"))
    return Launcher(argv, "this-install" if script.exists() else "python", warning)


def missing_program(command: str) -> str | None:
    """The program a recorded command line starts, when it no longer exists (else None)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    program = words[0]
    if os.sep in program:
        return None if os.access(program, os.X_OK) else program
    return None if shutil.which(program) else program
