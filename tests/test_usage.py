"""Reading never writes: usage lives in per-machine logs, folded by the index; notes stay as written."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from memory_hub.capture.autocommit import autocommit
from memory_hub.capture.usage_mirror import MirrorError, mirror, publish_and_commit
from memory_hub.config import template_dir
from memory_hub.index import usage
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.vault import frontmatter
from memory_hub.vault import usage as log
from memory_hub.vault.git import IGNORED

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
REPO = Path(__file__).resolve().parent.parent


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=vault, capture_output=True, text=True, check=True).stdout


def git_vault(root: Path) -> Path:
    """A copy of the starter vault as a committed git repository, indexed."""
    vault = root / "vault"
    shutil.copytree(template_dir(), vault)
    (vault / ".gitignore").write_text("".join(f"{line}\n" for line in IGNORED), encoding="utf-8")
    git(vault, "init", "-q", "-b", "main")
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", "start")
    sync(vault)
    return vault


def notes_bytes(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*.md") if ".git" not in p.parts}


def used(vault: Path, path: str) -> usage.Usage:
    store = Store(vault)
    usage.fold(store, vault)
    return usage.for_note(store, path)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    return git_vault(tmp_path)


def test_read_note_over_a_real_mcp_client_leaves_git_clean(vault: Path) -> None:
    before = notes_bytes(vault)

    async def scenario() -> list:
        transport = StdioTransport(command=MEMORY_HUB, args=["--vault", str(vault), "serve", "--no-warm"],
                                   env={**os.environ, "MEMORY_HUB_VAULT": ""})
        out = []
        async with Client(transport) as client:
            for _ in range(3):
                result = await client.call_tool("read_note", {"path": "runbooks/db-failover.md", "max_lines": 3})
                out.append(result.structured_content)
            out.append((await client.call_tool("status", {})).structured_content)
        return out

    *reads, status = asyncio.run(scenario())
    assert [r["usage"]["reads"] for r in reads] == [1, 2, 3]  # before: the count went into the note
    assert git(vault, "status", "--porcelain") == ""  # before: " M runbooks/db-failover.md"
    assert notes_bytes(vault) == before
    assert status["usage"]["unpublished"] == 3 and status["usage"]["notes_read"] >= 1


def test_read_hook_and_usefulness_judge_leave_git_clean(vault: Path, tmp_path: Path) -> None:
    before = notes_bytes(vault)
    note = vault / "notes-without-frontmatter.md"
    note.write_text("A note with no frontmatter at all.\n", encoding="utf-8")
    git(vault, "add", "-A")
    git(vault, "commit", "-q", "-m", "plain note")
    for path in ("runbooks/db-failover.md", str(note)):
        event = {"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": str(vault), "tool_input": {"file_path": path}}
        proc = subprocess.run([sys.executable, "-m", "memory_hub.cli", "--vault", str(vault), "hook", "claude-code"],
                              input=json.dumps(event), capture_output=True, text=True, timeout=30, cwd=REPO)
        assert proc.returncode == 0 and proc.stdout == ""
    # before: the Read hook prepended a frontmatter block to the note that had none
    assert note.read_text(encoding="utf-8") == "A note with no frontmatter at all.\n"
    from memory_hub.eval.usefulness import judge_session
    from memory_hub.retrieval import session

    session.update(vault, "s1", injected=[{"path": "runbooks/db-failover.md", "title": "DB failover",
                                           "description": "How to fail over"}])
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "1", "name": "Read", "input": {"file_path": "runbooks/db-failover.md"}}]}}) + "\n")
    assert judge_session(vault, "s1", str(transcript), str(vault))["written"] == ["runbooks/db-failover.md"]
    assert git(vault, "status", "--porcelain") == ""
    assert {k: v for k, v in notes_bytes(vault).items() if k in before} == before
    got = used(vault, "runbooks/db-failover.md")
    assert (got.reads, got.useful) == (1, 1) and used(vault, "notes-without-frontmatter.md").reads == 1


def test_counts_come_back_after_the_cache_is_deleted(vault: Path) -> None:
    for _ in range(2):
        log.record_read(vault, "auth-flow.md")
    log.record_useful(vault, ["auth-flow.md"])
    publish_and_commit(vault)  # two reads and the useful go to the tracked log…
    log.record_read(vault, "auth-flow.md")  # …one read stays in the journal
    first = used(vault, "auth-flow.md")
    assert (first.reads, first.useful) == (3, 1) and first.last_read
    shutil.rmtree(vault / ".memory_hub")
    sync(vault)
    assert used(vault, "auth-flow.md") == first
    sync(vault, rebuild=True)
    assert used(vault, "auth-flow.md") == first


def test_frontmatter_counters_are_a_baseline_and_never_rewritten(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "old.md").write_text("---\ntitle: Old\naccess_count: 7\nuseful_count: 2\n---\nbody\n", encoding="utf-8")
    (vault / "none.md").write_text("no frontmatter\n", encoding="utf-8")
    (vault / "odd.md").write_text("---\naccess_count: lots\nuseful_count: -3\n---\nbody\n", encoding="utf-8")
    before = notes_bytes(vault)
    sync(vault)
    log.record_read(vault, "old.md")
    log.record_read(vault, "none.md")
    assert (used(vault, "old.md").reads, used(vault, "old.md").useful) == (8, 2)
    assert used(vault, "none.md").reads == 1 and used(vault, "odd.md") == usage.NONE
    assert notes_bytes(vault) == before
    # Not a git vault: the events went straight to the log, where a clone would find them.
    assert len((vault / ".memory-hub" / "usage" / f"{log.machine_id()}.jsonl").read_text().splitlines()) == 2


def test_refuses_what_is_not_a_note_of_this_vault(vault: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere.md").write_text("x\n", encoding="utf-8")
    for bad in ("../elsewhere.md", "/etc/passwd", "missing.md", "attachments/x.png", ".memory_hub/x.md", ".git/HEAD"):
        with pytest.raises(log.UsageError):
            log.record_read(vault, bad)
    assert log.record_useful(vault, ["missing.md", "../elsewhere.md", "home.md"]) == ["home.md"]
    assert not (vault / "missing.md").exists()


def test_machine_id_is_stable_and_overridable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    first = log.machine_id()
    assert first == log.machine_id() and first.startswith("m-")
    monkeypatch.setenv(log.MACHINE_ENV, "laptop-7")
    assert log.machine_id() == "laptop-7"
    monkeypatch.setenv(log.MACHINE_ENV, "../evil")
    with pytest.raises(log.UsageError):
        log.machine_id()


def test_two_machines_never_conflict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = git_vault(tmp_path / "a")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(a), str(b))
    sync(b)
    monkeypatch.setenv(log.MACHINE_ENV, "machine-a")
    for _ in range(3):
        log.record_read(a, "tls-certificates.md")
    publish_and_commit(a)
    monkeypatch.setenv(log.MACHINE_ENV, "machine-b")
    for _ in range(2):
        log.record_read(b, "tls-certificates.md")
    log.record_useful(b, ["tls-certificates.md"])
    publish_and_commit(b)
    git(b, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")  # a merge: different files, no conflict
    got = used(b, "tls-certificates.md")
    assert (got.reads, got.useful) == (5, 1)
    assert usage.summary(Store(b))["machines"] == ["machine-a", "machine-b"]


def _reader(vault: str, n: int) -> None:
    for _ in range(n):
        log.record_read(Path(vault), "home.md")


def test_concurrent_readers_and_publishes_lose_and_double_nothing(vault: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_reader, args=(str(vault), 40)) for _ in range(2)]
    for p in procs:
        p.start()
    published = 0
    while any(p.is_alive() for p in procs):
        published += log.publish(vault)
        usage.fold(Store(vault), vault, wait=False)  # a reader folding mid-storm
        time.sleep(0.005)
    for p in procs:
        p.join(30)
    published += log.publish(vault)
    assert published == 80
    assert used(vault, "home.md").reads == 80


def test_a_publish_cut_short_is_finished_not_doubled(vault: Path) -> None:
    for _ in range(3):
        log.record_read(vault, "home.md")
    live, taken, target = log.journal_place(vault), log.journal_place(vault, suffix=".publishing"), log.log_place(vault)
    data = (live.root / live.rel).read_bytes()
    os.rename(live.root / live.rel, taken.root / taken.rel)
    (vault / target.rel).parent.mkdir(parents=True, exist_ok=True)
    (vault / target.rel).write_bytes(data)  # crashed after the append, before the delete
    assert used(vault, "home.md").reads == 6  # (momentarily in both places)
    assert log.publish(vault) == 3
    assert (vault / target.rel).read_bytes() == data and not (taken.root / taken.rel).exists()
    assert used(vault, "home.md").reads == 3


def test_fold_is_incremental_and_survives_hostile_lines(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n", encoding="utf-8")
    store = Store(vault)
    sync(vault, store=store)
    logs = vault / ".memory-hub" / "usage"
    logs.mkdir(parents=True)
    good = json.dumps({"ts": 1.0, "event": "read", "path": "a.md"}) + "\n"
    hostile = ["{not json\n", json.dumps({"ts": 1, "event": "read", "path": "../x.md"}) + "\n",
               json.dumps({"ts": 1, "event": "read", "path": "a.md", "pad": "x" * 5000}) + "\n",
               json.dumps({"ts": 1, "event": "baseline", "path": "a.md", "reads": 10**12}) + "\n",
               "[" * 100_000 + "\n", json.dumps([1, 2]) + "\n"]
    other = logs / "other.jsonl"
    other.write_text(good + "".join(hostile) + good[:10], encoding="utf-8")  # ends mid-line
    report = usage.fold(store, vault)
    assert report.events == 1 and usage.for_note(store, "a.md").reads == 1
    assert usage.summary(store)["bad_lines"] == len(hostile)
    with open(other, "a", encoding="utf-8") as fh:
        fh.write(good[10:])  # the line is finished
    assert usage.fold(store, vault).events == 1 and usage.for_note(store, "a.md").reads == 2
    other.write_text(good, encoding="utf-8")  # rewritten shorter (a new version from git)
    assert usage.fold(store, vault).refolded and usage.for_note(store, "a.md").reads == 1
    other.unlink()
    usage.fold(store, vault)
    assert usage.for_note(store, "a.md") == usage.NONE


def test_autocommit_carries_reads_but_never_commits_for_reads_alone(vault: Path) -> None:
    head = git(vault, "rev-parse", "HEAD")
    log.record_read(vault, "home.md")
    report = autocommit(vault)
    assert not report.committed and git(vault, "rev-parse", "HEAD") == head  # a read is no reason to commit
    (vault / "inbox" / "new.md").write_text("# New\n", encoding="utf-8")
    report = autocommit(vault)
    assert report.committed and log.log_place(vault).rel in report.modified + report.added
    assert log.unpublished(vault)[0] == 0 and git(vault, "status", "--porcelain") == ""
    log.record_read(vault, "home.md", when=time.time() - 2 * 86400)  # a day old: published alone
    assert autocommit(vault).committed and git(vault, "status", "--porcelain") == ""
    assert used(vault, "home.md").reads == 2


def test_mirror_is_opt_in_batched_and_commit_safe(vault: Path) -> None:
    old = time.time() - 3600
    for p in vault.rglob("*.md"):
        os.utime(p, (old, old))
    for _ in range(2):
        log.record_read(vault, "auth-flow.md")
    log.record_useful(vault, ["auth-flow.md", "tls-certificates.md"])
    log.record_read(vault, "home.md")
    body_before = frontmatter.split((vault / "auth-flow.md").read_text(encoding="utf-8"))[1]
    (vault / "home.md").write_text((vault / "home.md").read_text(encoding="utf-8") + "\nmy edit\n", encoding="utf-8")
    head = git(vault, "rev-parse", "HEAD").strip()
    report = mirror(vault)
    assert sorted(report.written) == ["auth-flow.md", "tls-certificates.md"]
    assert dict(report.skipped)["home.md"] == "has uncommitted changes"
    assert git(vault, "rev-list", "--count", f"{head}..HEAD").strip() == "1"  # one commit
    changed = set(git(vault, "show", "--name-only", "--format=", "HEAD").split())
    assert changed == {"auth-flow.md", "tls-certificates.md", log.log_place(vault).rel}
    data = frontmatter.parse((vault / "auth-flow.md").read_text(encoding="utf-8")).data
    assert (data["access_count"], data["useful_count"]) == (2, 1)
    assert frontmatter.split((vault / "auth-flow.md").read_text(encoding="utf-8"))[1] == body_before
    assert (used(vault, "auth-flow.md").reads, used(vault, "auth-flow.md").useful) == (2, 1)  # not doubled
    assert git(vault, "status", "--porcelain") == " M home.md\n"
    again = mirror(vault)
    assert not again.written and again.commit is None
    git(vault, "checkout", "-q", "--detach")
    with pytest.raises(MirrorError, match="detached"):
        mirror(vault)


def test_status_and_stats_report_usage(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memory_hub.cli import main

    log.record_read(vault, "home.md")

    def run(*args: str) -> dict:
        capsys.readouterr()
        assert main(["--vault", str(vault), *args, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    assert run("status")["usage"]["unpublished"] == 1
    assert run("stats")["usage"]["top"][0]["path"] == "home.md"
    assert run("usage")["notes"][0] == {"path": "home.md", "reads": 1, "useful": 0,
                                        "last_read": pytest.approx(time.time(), abs=120)}
    assert run("usage", "publish")["published"] == 1 and git(vault, "status", "--porcelain") == ""


def test_snapshot_is_reused_only_while_nothing_changed(vault: Path) -> None:
    store = Store(vault)
    first = usage.snapshot(vault, store)
    assert usage.snapshot(vault, store) is first  # nothing new: the same counts, not computed again
    log.record_read(vault, "home.md")
    second = usage.snapshot(vault, store)
    assert second is not first and second["home.md"].reads == 1
    other = Store(vault)  # another connection (the watcher, a CLI) folds a read: data_version moves
    log.record_read(vault, "home.md")
    usage.fold(other, vault)
    assert usage.snapshot(vault, store)["home.md"].reads == 2
