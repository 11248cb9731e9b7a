"""Auto-commit: says what changed, never commits index files, never commits mid-merge; schedule."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from memory_hub.capture.autocommit import AutocommitError, autocommit
from memory_hub.capture.schedule import entries, install
from memory_hub.cli import main


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=vault,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(make_vault):
    vault, store = make_vault({"a.md": "# A\n", "b.md": "# B\n", ".gitignore": ".memory_hub/\n.mh-*.tmp\n"})
    git(vault, "init", "-q")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "init")
    return vault


def test_commits_changes_with_a_message_naming_them(repo):
    (repo / "c.md").write_text("# C\n")
    (repo / "a.md").write_text("# A changed\n")
    (repo / "b.md").unlink()
    r = autocommit(repo)
    assert r.committed and r.added == ["c.md"] and r.modified == ["a.md"] and r.deleted == ["b.md"]
    subject = git(repo, "log", "-1", "--format=%s").strip()
    assert subject == "vault: added c; modified a; deleted b"
    assert git(repo, "status", "--porcelain") == ""
    assert autocommit(repo).committed is False  # nothing changed → no empty commit


def test_index_files_are_never_committed(repo):
    (repo / ".gitignore").write_text("")  # someone removed the ignore line
    git(repo, "commit", "-qam", "drop ignore")
    (repo / "d.md").write_text("# D\n")
    r = autocommit(repo)
    assert r.committed
    tracked = git(repo, "ls-files").split()
    assert not any(p.startswith(".memory_hub") for p in tracked)
    assert ".memory_hub/" in (repo / ".gitignore").read_text()
    assert any(".gitignore" in n for n in r.notes)


def test_no_commit_during_a_merge_and_nothing_lost(repo):
    git(repo, "checkout", "-qb", "side")
    (repo / "a.md").write_text("# A side\n")
    git(repo, "commit", "-qam", "side")
    git(repo, "checkout", "-q", "-")
    (repo / "a.md").write_text("# A main\n")
    git(repo, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "side"], cwd=repo, capture_output=True)  # conflicts
    assert (repo / ".git" / "MERGE_HEAD").exists()
    head = git(repo, "rev-parse", "HEAD")
    (repo / "new.md").write_text("# new while merging\n")
    r = autocommit(repo)
    assert not r.committed and "merge" in (r.skipped or "")
    assert git(repo, "rev-parse", "HEAD") == head
    assert (repo / "new.md").read_text() == "# new while merging\n"
    assert "<<<<<<<" in (repo / "a.md").read_text()  # the working tree is untouched


def test_not_a_repository(make_vault):
    vault, _ = make_vault({"a.md": "# A\n"}, index=False)
    with pytest.raises(AutocommitError, match="not a git repository"):
        autocommit(vault)
    assert main(["--vault", str(vault), "autocommit"]) == 1


def test_schedule_prints_every_form_and_installs_idempotently(repo, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    kinds = {e.kind for e in entries(repo)}
    assert kinds == {"cron", "systemd", "launchd"}
    cron = next(e for e in entries(repo) if e.kind == "cron").text
    assert "*/10 * * * *" in cron and "autocommit" in cron and "dream" in cron and str(repo) in cron
    done = install(repo, kind="systemd", activate=False)
    from memory_hub.capture.schedule import vault_id

    timer = tmp_path / f"cfg/systemd/user/memory-hub-autocommit-{vault_id(repo)}.timer"
    assert timer.exists() and "OnCalendar=*:0/10" in timer.read_text()
    assert len(done) == 4
    assert install(repo, kind="systemd", activate=False) == ["systemd entries already up to date"]
    assert main(["--vault", str(repo), "schedule"]) == 0
    assert "launchd" in capsys.readouterr().out


def test_waits_for_a_running_dream_pass(repo):
    import fcntl
    import os

    from memory_hub.config import index_dir

    index_dir(repo).mkdir(exist_ok=True)
    fd = os.open(index_dir(repo) / "dream.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        (repo / "e.md").write_text("# E\n")
        r = autocommit(repo)
        assert not r.committed and "dream" in (r.skipped or "")
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    assert autocommit(repo).committed
