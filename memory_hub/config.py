"""One place for paths and settings.

The vault is chosen by ``--vault PATH``, else ``$MEMORY_HUB_VAULT``, else the default vault that
``make run`` / ``memory-hub init`` creates. Every index lives under ``<vault>/.memory_hub/`` and is a
cache: deleting that folder loses nothing that ``memory-hub index`` cannot rebuild.
"""

from __future__ import annotations

import os
from pathlib import Path

INDEX_DIRNAME = ".memory_hub"
DB_FILENAME = "index.sqlite3"
# The vault's own state, tracked by git (unlike the disposable ``.memory_hub/`` cache): usage logs,
# settings, dream's memory of rejected proposals.
STATE_DIRNAME = ".memory-hub"

# Folders that are never part of the vault's content. Obsidian itself ignores dot-folders too.
SKIP_DIRS = frozenset({".git", ".obsidian", ".trash", INDEX_DIRNAME})

# Files larger than this are skipped with a warning: a note is prose, not a data dump.
MAX_NOTE_BYTES = int(os.environ.get("MEMORY_HUB_MAX_NOTE_BYTES", 2 * 1024 * 1024))


class ConfigError(Exception):
    """A setting or path that cannot be used; the message says what to do."""


def data_home() -> Path:
    """Where per-user data lives (the default vault)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "memory-hub"


def config_home() -> Path:
    """Where per-user settings live (the machine id that names this machine's usage log)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "memory-hub"


def default_vault_path() -> Path:
    """The vault ``make run`` creates when none is named."""
    return data_home() / "vault"


def resolve_vault(cli_value: str | os.PathLike[str] | None = None, *, must_exist: bool = True) -> Path:
    """Pick the vault: ``--vault``, then ``$MEMORY_HUB_VAULT``, then the default vault."""
    raw = cli_value or os.environ.get("MEMORY_HUB_VAULT") or default_vault_path()
    path = Path(raw).expanduser().resolve()
    if must_exist and not path.is_dir():
        raise ConfigError(
            f"vault not found: {path} (create one with `memory-hub init {path}`, "
            "or pass --vault / set MEMORY_HUB_VAULT)"
        )
    return path


def index_dir(vault: Path) -> Path:
    """The cache folder inside a vault."""
    return vault / INDEX_DIRNAME


def db_path(vault: Path) -> Path:
    return index_dir(vault) / DB_FILENAME


def template_dir() -> Path:
    """The starter vault shipped with the source tree."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "vault_template", here.parent / "vault_template"):
        if candidate.is_dir():
            return candidate
    raise ConfigError("vault_template/ not found next to the memory_hub package")
