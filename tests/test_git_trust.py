"""Commits only on a branch, never inside a person's git operation; dream says which notes it left alone.

Real repositories in real states: a detached HEAD, a conflicted merge, rebase, cherry-pick (also
half-way through a sequence), revert and a bisect. In each, autocommit and dream write nothing,
say why in text and ``--json``, and the captures are committed once the person is back on a branch.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from test_dream_fixtures import build, git, snapshot

from memory_hub.capture.autocommit import autocommit
from memory_hub.cli import main
from memory_hub.dream import run_dream


def dream(vault: Path, **kw):
    import datetime as dt

    return run_dream(vault, backend="lexical", use_llm=False, today=dt.date(2026, 5, 20), **kw)


def branch(vault: Path) -> str:
    return git(vault, "symbolic-ref", "--short", "HEAD").strip()


def cli_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_autocommit_waits_on_a_detached_head_then_commits_on_the_branch(tmp_path, capsys):
    vault = build(tmp_path)
    home = branch(vault)
    git(vault, "checkout", "-q", "--detach")
    head = git(vault, "rev-parse", "HEAD")
    (vault / "inbox" / "while-detached.md").write_text("# Captured on a detached HEAD\n", encoding="utf-8")
    report = autocommit(vault)
    assert not report.committed and "detached" in (report.skipped or "")
    assert git(vault, "rev-parse", "HEAD") == head  # no commit that the next checkout would leave behind
    out = cli_json(capsys, "--vault", str(vault), "autocommit")
    assert out["committed"] is False and "detached" in out["skipped"] and "detached" in out["blocked"]
    assert main(["--vault", str(vault), "autocommit"]) == 0
    assert "not committed: HEAD is detached" in capsys.readouterr().out
    git(vault, "checkout", "-q", home)  # the person goes back to the branch: the capture is still there
    report = autocommit(vault)
    assert report.committed and report.added == ["inbox/while-detached.md"]
    assert "inbox/while-detached.md" in git(vault, "ls-tree", "-r", "--name-only", home)


def test_dream_writes_nothing_on_a_detached_head(tmp_path, capsys):
    vault = build(tmp_path)
    git(vault, "checkout", "-q", "--detach")
    before, head = snapshot(vault), git(vault, "rev-parse", "HEAD")
    report = dream(vault)
    assert report.commits == [] and "detached" in (report.skipped or "")
    assert snapshot(vault) == before and git(vault, "rev-parse", "HEAD") == head
    out = cli_json(capsys, "--vault", str(vault), "dream", "--vectors", "lexical", "--no-llm")
    assert out["commits"] == [] and "detached" in out["skipped"]
    assert snapshot(vault) == before
    # a dry run still plans, and says a real pass would wait
    dry = dream(vault, dry_run=True)
    assert not dry.nothing and any("would wait" in w and "detached" in w for w in dry.warnings)


def _conflict(vault: Path, note: str = "certs-overview.md") -> str:
    """A side branch and the current branch change the same line of ``note``; returns the side commit."""
    home = branch(vault)
    original = (vault / note).read_text(encoding="utf-8")
    git(vault, "checkout", "-q", "-b", "side")
    (vault / note).write_text(original + "side line\n", encoding="utf-8")
    git(vault, "commit", "-qam", "side change")
    (vault / "side-only.md").write_text("# Side only\n", encoding="utf-8")
    git(vault, "add", "side-only.md")
    git(vault, "commit", "-qm", "side second")
    git(vault, "checkout", "-q", home)
    (vault / note).write_text(original + "home line\n", encoding="utf-8")
    git(vault, "commit", "-qam", "home change")
    return git(vault, "rev-parse", "side~1").strip()


def _start(vault: Path, operation: str) -> None:
    """Leave the repository in the middle of ``operation``, as a person would."""
    def quiet(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=vault, capture_output=True,
                       env=dict(os.environ, GIT_EDITOR="true"))

    if operation == "bisect":
        quiet("bisect", "start", "HEAD", "HEAD~1")
        return
    side = _conflict(vault)
    if operation == "merge":
        quiet("merge", "side")
    elif operation == "rebase":
        quiet("rebase", "side")
    elif operation == "cherry-pick":
        quiet("cherry-pick", side)
    elif operation == "cherry-pick sequence":  # first pick conflicted, resolved and committed, second pending
        quiet("cherry-pick", side, "side")
        quiet("checkout", "--theirs", "certs-overview.md")
        quiet("add", "certs-overview.md")
        quiet("commit", "--no-edit")
    elif operation == "revert":  # revert the home change after the same line changed again: a conflict
        note = vault / "certs-overview.md"
        note.write_text(note.read_text(encoding="utf-8").replace("home line", "home line, again"), encoding="utf-8")
        quiet("commit", "-qam", "again")
        quiet("revert", "--no-edit", "HEAD~1")


# what git itself leaves in .git while each operation waits for the person
OPERATIONS = {"merge": "MERGE_HEAD", "rebase": "rebase-merge", "cherry-pick": "CHERRY_PICK_HEAD",
              "cherry-pick sequence": "sequencer", "revert": "REVERT_HEAD", "bisect": "BISECT_LOG"}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_nothing_is_committed_during_an_operation_in_progress(tmp_path, operation):
    vault = build(tmp_path)
    _start(vault, operation)
    assert (vault / ".git" / OPERATIONS[operation]).exists()
    if operation == "cherry-pick sequence":
        assert not (vault / ".git" / "CHERRY_PICK_HEAD").exists()  # only the sequencer says a pick is pending
    head = git(vault, "rev-parse", "HEAD")
    (vault / "inbox" / "during.md").write_text(f"# Captured during a {operation}\n", encoding="utf-8")
    before = snapshot(vault)
    report = autocommit(vault)
    assert not report.committed and report.skipped, report
    d = dream(vault)
    assert d.commits == [] and d.skipped, d.summary()
    assert git(vault, "rev-parse", "HEAD") == head and snapshot(vault) == before
    assert (vault / "inbox" / "during.md").exists()


def test_dream_counts_the_notes_it_left_alone_and_says_why(tmp_path, capsys):
    vault = build(tmp_path)
    with open(vault / "go-style.md", "a", encoding="utf-8") as fh:  # a person's uncommitted change
        fh.write("\nA thought not yet committed.\n")
    old = 1_700_000_000
    os.utime(vault / "go-style.md", (old, old))
    now = time.time()
    os.utime(vault / "go-testing.md", (now, now))  # open in an editor right now
    out = cli_json(capsys, "--vault", str(vault), "dream", "--dry-run", "--vectors", "lexical", "--no-llm")
    assert out["skipped_notes"]["uncommitted"] == {"count": 1, "paths": ["go-style.md"]}
    assert out["skipped_notes"]["edited_recently"] == {"count": 1, "paths": ["go-testing.md"]}
    assert out["skipped_notes"]["template"]["count"] == 1 and out["skipped_notes"]["daily"]["count"] == 1
    assert main(["--vault", str(vault), "dream", "--dry-run", "--vectors", "lexical", "--no-llm"]) == 0
    text = capsys.readouterr().out
    assert "skipped 2 note(s) it may not write: 1 with uncommitted changes, 1 edited in the last 15 minutes" in text
    assert "not touched (uncommitted): go-style.md" in text
    assert "not touched (edited recently): go-testing.md" in text


def test_a_head_detached_during_the_pass_stops_it_before_the_next_commit(tmp_path, monkeypatch):
    import memory_hub.dream.run as run_mod

    vault = build(tmp_path)
    git(vault, "checkout", "-q", "--detach")  # as if the person ran `git checkout <sha>` after the pass began
    monkeypatch.setattr(run_mod, "commit_blocker", lambda _vault: None)  # the start-of-pass check saw a branch
    before, head = snapshot(vault), git(vault, "rev-parse", "HEAD")
    report = dream(vault)
    assert report.commits == [] and "detached" in (report.skipped or "")
    assert snapshot(vault) == before and git(vault, "rev-parse", "HEAD") == head
    assert "stopped: HEAD is detached" in report.summary()
