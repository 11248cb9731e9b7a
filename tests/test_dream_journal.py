"""A dream step is one unit: a real dream process killed (SIGKILL) mid-step is completed or rolled back
by the next pass or autocommit, never left half-applied, and a writer's temp file never reaches git."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_dream_fixtures import FILES, build, git, snapshot

from memory_hub.capture.autocommit import autocommit
from memory_hub.dream import run_dream
from memory_hub.vault.frontmatter import parse

TODAY = dt.date(2026, 5, 20)
FOLD = ("postgres-failover.md", "inbox/pool-1.md", "inbox/pool-2.md")  # the promote step's three files

# Runs one promote step in a real process and stops it for good at ``point``: the test SIGKILLs it
# there. Only a pause is inserted (on the real os.replace / git commit); every write is the real one.
KILLED_PASS = r"""
import datetime as dt, os, subprocess, sys, time
from pathlib import Path
vault, point, marker = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def pause():
    marker.write_text(str(os.getpid()))
    time.sleep(300)

real_replace, notes = os.replace, []
def replace(src, dst, *a, **k):
    is_note = str(dst).endswith(".md") and "/.memory_hub/" not in str(dst)
    if is_note and point == "before-first-rename":
        pause()
    real_replace(src, dst, *a, **k)
    if is_note:
        notes.append(dst)
        if point == "after-first-note":
            pause()
os.replace = replace

real_run = subprocess.run
def run(cmd, *a, **k):
    committing = isinstance(cmd, list) and "commit" in cmd and "-m" in cmd
    if committing and point == "before-commit":
        pause()
    out = real_run(cmd, *a, **k)
    if committing and point == "after-commit":
        pause()
    return out
subprocess.run = run

from memory_hub.dream import run_dream
run_dream(vault, backend="lexical", use_llm=False, today=dt.date(2026, 5, 20), steps=("promote",))
marker.write_text("finished")
"""


def fold_vault(tmp_path: Path) -> Path:
    """Two ready captures that link to a knowledge note: the promote step folds them into it."""
    files = {k: v for k, v in FILES.items() if k in {".gitignore", "home.md", *FOLD}}
    for rel in FOLD[1:]:
        files[rel] = files[rel].rstrip("\n") + " See [[postgres-failover]].\n"
    return build(tmp_path, files)


def kill_mid_step(vault: Path, point: str, tmp_path: Path) -> None:
    """Start a real dream pass, wait until it reaches ``point``, SIGKILL it."""
    marker = tmp_path / f"reached-{point}"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_PASS, str(vault), point, str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the dream process never reached {point}: rc={proc.returncode} {err.decode()[-2000:]}")
        time.sleep(0.05)
    assert marker.read_text() != "finished"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def pending(vault: Path) -> list[Path]:
    """Journals left behind (imported late, so the rest of each test also runs against older code)."""
    from memory_hub.vault import journal

    return journal.pending(vault)


def changed(vault: Path) -> set[str]:
    return {line[3:] for line in git(vault, "status", "--porcelain", "--untracked-files=all").splitlines()}


def last_commit_files(vault: Path) -> set[str]:
    return set(git(vault, "show", "--name-only", "--format=", "HEAD").split())


def assert_fold_committed_whole(vault: Path) -> None:
    assert changed(vault) == set(), "the tree must be clean: nothing half-applied is left over"
    assert git(vault, "log", "-1", "--format=%s").startswith("dream: promote")
    assert last_commit_files(vault) == set(FOLD)  # one commit holds the whole step
    assert "## From captures" in (vault / "postgres-failover.md").read_text(encoding="utf-8")
    for rel in FOLD[1:]:
        assert parse((vault / rel).read_text(encoding="utf-8")).data["status"] == "processed"
    assert pending(vault) == []
    assert not [p for p in git(vault, "ls-files").split() if ".mh-" in p]


def test_killed_after_one_of_three_writes_the_next_pass_completes_the_step(tmp_path):
    vault = fold_vault(tmp_path)
    head = git(vault, "rev-parse", "HEAD")
    kill_mid_step(vault, "after-first-note", tmp_path)
    assert len(changed(vault) & set(FOLD)) == 1  # really half-applied: one file of three written
    assert git(vault, "rev-parse", "HEAD") == head
    report = run_dream(vault, backend="lexical", use_llm=False, today=TODAY, steps=("promote",))
    assert_fold_committed_whole(vault)
    assert [r["action"] for r in report.recovered] == ["completed"]
    # the completed step is not planned a second time
    assert git(vault, "log", "--format=%s").count("dream: promote") == 1


def test_killed_before_the_commit_autocommit_completes_it_as_the_dream_commit(tmp_path):
    vault = fold_vault(tmp_path)
    kill_mid_step(vault, "before-commit", tmp_path)
    assert changed(vault) >= set(FOLD)
    (vault / "person.md").write_text("# A person's new note\n", encoding="utf-8")
    report = autocommit(vault)
    assert report.committed and report.added == ["person.md"]
    assert any("completed" in n for n in report.notes)
    # the dream step got its own commit (not a "vault: modified …" one), then the person's note its own
    subjects = git(vault, "log", "-2", "--format=%s").splitlines()
    assert subjects[0].startswith("vault: added person") and subjects[1].startswith("dream: promote")
    assert set(git(vault, "show", "--name-only", "--format=", "HEAD~1").split()) == set(FOLD)
    assert changed(vault) == set() and pending(vault) == []


def test_killed_after_the_commit_the_journal_is_just_cleared(tmp_path):
    vault = fold_vault(tmp_path)
    kill_mid_step(vault, "after-commit", tmp_path)
    from memory_hub.vault.journal import recover

    assert len(pending(vault)) == 1
    outcomes = recover(vault)
    assert [o.action for o in outcomes] == ["committed"]
    assert_fold_committed_whole(vault)


def test_a_person_edit_after_the_crash_rolls_the_step_back_and_keeps_the_edit(tmp_path):
    vault = fold_vault(tmp_path)
    before = snapshot(vault)
    kill_mid_step(vault, "after-first-note", tmp_path)
    written = (changed(vault) & set(FOLD)).pop()
    untouched = next(p for p in FOLD if p != written)
    (vault / untouched).write_text(before[untouched] + "\nA line the person added.\n", encoding="utf-8")
    report = run_dream(vault, backend="lexical", use_llm=False, today=TODAY, steps=("promote",))
    assert (vault / written).read_text(encoding="utf-8") == before[written]  # our half write undone
    assert (vault / untouched).read_text(encoding="utf-8").endswith("A line the person added.\n")  # theirs kept
    assert changed(vault) == {untouched} and pending(vault) == []
    assert report.recovered[0]["action"] == "rolled back"


def test_a_killed_writers_temp_file_never_reaches_git(tmp_path):
    vault = fold_vault(tmp_path)
    assert (vault / ".gitignore").read_text() == ".memory_hub/\n"  # a vault made before temp files were ignored
    kill_mid_step(vault, "before-first-rename", tmp_path)
    temps = [p for p in vault.rglob(".mh-*.tmp")]
    assert temps, "the killed writer left its temp file"
    report = autocommit(vault)
    tracked = git(vault, "ls-files").split()
    assert not [p for p in tracked if ".mh-" in p]
    assert ".mh-*.tmp" in (vault / ".gitignore").read_text(encoding="utf-8")
    assert report.committed or changed(vault) <= {str(t.relative_to(vault)) for t in temps}
    assert not [line for line in git(vault, "status", "--porcelain").splitlines() if ".mh-" in line]


def test_a_temp_file_committed_earlier_is_untracked_again(tmp_path):
    vault = fold_vault(tmp_path)
    (vault / "inbox" / ".mh-stray.tmp").write_text("half a note", encoding="utf-8")
    git(vault, "add", "-f", "inbox/.mh-stray.tmp")
    git(vault, "commit", "-qm", "an old autocommit took it")
    report = autocommit(vault)
    assert report.committed and any("temporary" in n for n in report.notes)
    assert "inbox/.mh-stray.tmp" not in git(vault, "ls-files").split()
    assert (vault / "inbox" / ".mh-stray.tmp").exists()  # kept on disk, only untracked


def test_commit_atomically_refuses_on_a_detached_head_and_writes_nothing(tmp_path):
    from memory_hub.vault.journal import Change, CommitBlocked, commit_atomically

    vault = fold_vault(tmp_path)
    git(vault, "checkout", "-q", "--detach")
    before = snapshot(vault)
    change = Change("postgres-failover.md", (vault / "postgres-failover.md").read_bytes(), b"# replaced\n")
    with pytest.raises(CommitBlocked, match="detached"):
        commit_atomically(vault, [change], "dream: test")
    assert snapshot(vault) == before and pending(vault) == []


def test_a_step_whose_file_a_person_saved_meanwhile_is_dropped_whole(tmp_path):
    from memory_hub.dream.edits import Edit, StepResult, apply

    vault = fold_vault(tmp_path)
    before, head = snapshot(vault), git(vault, "rev-parse", "HEAD")
    step = StepResult("promote")
    for rel in FOLD:  # planned against the files as they are now
        step.edits.append(Edit(rel, before[rel] + "\nplanned line\n", expected_mtime_ns=(vault / rel).stat().st_mtime_ns))
    saved = vault / FOLD[2]
    saved.write_text(before[FOLD[2]] + "\nthe person's line\n", encoding="utf-8")  # saved while the pass planned
    assert apply(vault, step, "dream: promote captures") is None
    assert git(vault, "rev-parse", "HEAD") == head
    assert {rel: (vault / rel).read_text(encoding="utf-8") for rel in FOLD[:2]} == {rel: before[rel] for rel in FOLD[:2]}
    assert saved.read_text(encoding="utf-8").endswith("the person's line\n")
    assert any("whole step" in s and FOLD[2] in s for s in step.skipped)


def test_files_the_recovery_wrote_do_not_count_as_a_person_editing_them(tmp_path):
    vault = fold_vault(tmp_path)
    kill_mid_step(vault, "after-first-note", tmp_path)
    report = run_dream(vault, backend="lexical", use_llm=False, today=TODAY, steps=("promote", "provenance"))
    assert [r["action"] for r in report.recovered] == ["completed"]
    assert not set(report.skipped_notes.get("edited_recently", [])) & set(FOLD)
