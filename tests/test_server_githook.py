"""`memory-hub install-git-hook`: idempotent, keeps a person's hook, and really syncs after a commit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_hub.index.store import Store
from memory_hub.server.githook import BEGIN, END, install_post_commit_hook
from memory_hub.vault.git import commit_all, init_repo

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("GIT_AUTHOR", "GIT_COMMITTER"):
        monkeypatch.setenv(f"{key}_NAME", "t")
        monkeypatch.setenv(f"{key}_EMAIL", "t@example.com")


def test_install_is_idempotent_and_keeps_existing_hook(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    init_repo(vault)
    hook = vault / ".git" / "hooks" / "post-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\necho my own hook > /dev/null\nexit 0\n", encoding="utf-8")
    hook.chmod(0o755)

    first = subprocess.run([MEMORY_HUB, "--vault", str(vault), "install-git-hook", "--json"],
                           capture_output=True, text=True, check=True)
    assert '"updated"' in first.stdout
    text = hook.read_text(encoding="utf-8")
    assert "echo my own hook" in text and "exit 0" in text
    # Our block runs before the person's `exit 0`.
    assert text.index(BEGIN) < text.index("exit 0") and text.count(BEGIN) == 1 and END in text
    assert os.access(hook, os.X_OK)

    outcome, _ = install_post_commit_hook(vault)
    assert outcome == "unchanged" and hook.read_text(encoding="utf-8") == text
    # An upgrade (different command) replaces only our block.
    outcome, _ = install_post_commit_hook(vault, command=["/opt/other/memory-hub"])
    new = hook.read_text(encoding="utf-8")
    assert outcome == "updated" and "/opt/other/memory-hub" in new and new.count(BEGIN) == 1
    assert "echo my own hook" in new


def test_commit_triggers_a_background_sync(template_vault: tuple[Path, Store]) -> None:
    vault, store = template_vault
    init_repo(vault)
    outcome, hook = install_post_commit_hook(vault)
    assert outcome == "installed" and hook.read_text(encoding="utf-8").startswith("#!/bin/sh\n")
    (vault / "hooked.md").write_text("# Hooked\n\nnarwhalesque content from a commit.\n", encoding="utf-8")
    commit_all(vault, "add hooked note")
    deadline = time.monotonic() + 20
    while store.note_row("hooked.md") is None:
        assert time.monotonic() < deadline, (vault / ".memory_hub" / "git-hook.log").read_text()
        time.sleep(0.1)


def test_not_a_repository_is_a_clear_error(tmp_path: Path) -> None:
    vault = tmp_path / "plain"
    vault.mkdir()
    proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "install-git-hook"], capture_output=True, text=True)
    assert proc.returncode == 1 and "not a git repository" in proc.stderr and "Traceback" not in proc.stderr
