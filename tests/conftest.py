"""Shared fixtures: throwaway vaults built from real files, and the ../shared test material."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memory_hub.config import template_dir
from memory_hub.index.store import Store
from memory_hub.index.sync import sync

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("MEMORY_HUB_SHARED_DATA", REPO.parent / "shared" / "data"))


GIT_IDENTITY = (("GIT_AUTHOR_NAME", "Memory Hub Tests"), ("GIT_AUTHOR_EMAIL", "tests@localhost"),
                ("GIT_COMMITTER_NAME", "Memory Hub Tests"), ("GIT_COMMITTER_EMAIL", "tests@localhost"))


def pytest_configure(config: pytest.Config) -> None:
    # Module- and session-scoped fixtures commit before any function fixture runs: a fresh CI box has
    # no global git identity, so the whole test process gets one.
    os.environ.update(dict(GIT_IDENTITY))


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never touch the user's default vault or environment."""
    monkeypatch.delenv("MEMORY_HUB_VAULT", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.getbasetemp() / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "xdg-config"))  # the machine id
    monkeypatch.delenv("MEMORY_HUB_MACHINE_ID", raising=False)
    # Git commits in tests must work on a machine with no global git identity (fresh CI boxes).
    for var, value in GIT_IDENTITY:
        monkeypatch.setenv(var, value)


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (vault-relative path → text or bytes) under ``root``."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def make_vault(tmp_path: Path):
    """``make_vault({"a.md": "..."})`` → an indexed vault folder and its Store."""

    def _make(files: dict[str, str | bytes], index: bool = True) -> tuple[Path, Store]:
        vault = write_files(tmp_path / "vault", files)
        store = Store(vault)
        if index:
            sync(vault, store=store)
        return vault, store

    return _make


@pytest.fixture
def template_vault(tmp_path: Path) -> tuple[Path, Store]:
    """A fresh copy of the starter vault, indexed."""
    vault = tmp_path / "template-vault"
    shutil.copytree(template_dir(), vault)
    store = Store(vault)
    sync(vault, store=store)
    return vault, store


def shared_path(*parts: str) -> Path:
    """A path in ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"test material not available: {path} (../shared is absent)")
    return path


@pytest.fixture(scope="session")
def shared_vault_copy(tmp_path_factory: pytest.TempPathFactory):
    """Copy a shared vault to a writable temp folder once per session (../shared is read-only)."""
    cache: dict[str, Path] = {}

    def _copy(name: str) -> Path:
        if name not in cache:
            src = shared_path("vaults", name)
            dst = tmp_path_factory.mktemp("shared-vault") / name
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".memory_hub"))
            for dirpath, _dirnames, filenames in os.walk(dst):
                os.chmod(dirpath, 0o755)
                for f in filenames:
                    os.chmod(os.path.join(dirpath, f), 0o644)
            cache[name] = dst
        return cache[name]

    return _copy
