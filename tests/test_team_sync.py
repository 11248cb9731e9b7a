"""``sync --remote`` with real git: a bare remote and clones in a temp folder, nothing mocked.

Every note written anywhere ends up exactly once, with its exact text, in every clone and the
remote, and is searchable in each; a conflicting edit keeps both texts; usage logs never conflict;
nothing runs mid-rebase or mid-dream; caches, secrets and personal vaults never leave.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from memory_hub.cli import main
from memory_hub.config import index_dir
from memory_hub.index.lexical import Filters
from memory_hub.index.store import Store
from memory_hub.locks import file_lock
from memory_hub.retrieval.search import search
from memory_hub.team.sync import SyncError, sync_remote
from memory_hub.vault.remote import CALLOUT_MARK, merge_insertions, unresolved


def git(repo: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=check).stdout


@pytest.fixture
def team(tmp_path: Path):
    """``team(n)`` → (bare remote, [clone paths]); the first clone made the first commit."""

    def make(n: int = 2) -> tuple[Path, list[Path]]:
        remote = tmp_path / "remote.git"
        git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
        first = tmp_path / "clone-0"
        git(tmp_path, "clone", "-q", str(remote), str(first))
        (first / "home.md").write_text("---\ntitle: Home\n---\n# Home\n\nThe team's notes.\n", encoding="utf-8")
        assert sync_remote(first).exchange.pushed == 1
        clones = [first]
        for i in range(1, n):
            clone = tmp_path / f"clone-{i}"
            git(tmp_path, "clone", "-q", str(remote), str(clone))
            clones.append(clone)
        return remote, clones

    return make


def found(vault: Path, query: str) -> list[str]:
    store = Store(vault)
    try:
        return [h.path for h in search(store, query, k=20, mode="lexical").hits]
    finally:
        store.close()


def tree_text(repo: Path, ref: str = "HEAD") -> dict[str, str]:
    """{path: text} of every Markdown note a commit holds."""
    names = [p for p in git(repo, "ls-tree", "-r", "--name-only", ref).splitlines() if p.endswith(".md")]
    return {p: git(repo, "show", f"{ref}:{p}") for p in names}


def test_a_note_travels_through_the_remote_and_is_searchable(team):
    remote, (a, b) = team(2)
    text = "---\ntitle: Kafka consumer lag runbook\n---\n# Kafka consumer lag\n\nRestart the zeppelinfoo consumer.\n"
    (a / "kafka-lag.md").write_text(text, encoding="utf-8")
    ra = sync_remote(a)
    assert ra.committed and ra.exchange.pushed == 1 and not ra.exchange.conflicts
    rb = sync_remote(b)
    assert rb.exchange.fetched >= 1 and "kafka-lag.md" in rb.exchange.changed
    assert (b / "kafka-lag.md").read_text(encoding="utf-8") == text
    assert found(b, "zeppelinfoo") == ["kafka-lag.md"]  # re-indexed, no full `index` needed
    assert rb.indexed["by"] == "this process"
    assert git(remote, "show", "main:kafka-lag.md") == text
    # never the caches
    assert not [p for p in git(remote, "ls-tree", "-r", "--name-only", "main").split() if p.startswith(".memory_hub")]
    # nothing to do: nothing pulled, nothing pushed, nothing indexed
    again = sync_remote(b)
    assert again.exchange.fetched == 0 and again.exchange.pushed == 0 and again.indexed["paths"] == 0


def test_a_conflicting_edit_keeps_both_texts(team):
    _remote, (a, b) = team(2)
    sync_remote(b)
    base = (a / "home.md").read_text(encoding="utf-8")
    mine_a = base.replace("The team's notes.", "The platform team's notes, says A.")
    mine_b = base.replace("The team's notes.", "Notes of the whole qzorgwide org, says B.")
    (a / "home.md").write_text(mine_a, encoding="utf-8")
    (b / "home.md").write_text(mine_b, encoding="utf-8")
    sync_remote(a)
    report = sync_remote(b)
    [conflict] = report.exchange.conflicts
    assert conflict.path == "home.md" and conflict.resolution == "both-kept"
    at_path = (b / "home.md").read_text(encoding="utf-8")
    assert at_path.startswith(mine_a.rstrip("\n"))  # the remote text stays at the path …
    assert CALLOUT_MARK in at_path and f"[[{conflict.copy[:-3]}]]" in at_path  # … linking to the copy
    assert (b / conflict.copy).read_text(encoding="utf-8") == mine_b  # B's text, byte for byte
    assert ".conflict-" in conflict.copy and conflict.copy.endswith(".md")
    # the link resolves in the index, and both texts are searchable
    store = Store(b)
    row = store.conn.execute("SELECT t.path FROM links l JOIN notes t ON t.id = l.target_id WHERE l.source_id = "
                             "(SELECT id FROM notes WHERE path = 'home.md')").fetchall()
    store.close()
    assert conflict.copy in [r[0] for r in row]
    assert found(b, "qzorgwide") == [conflict.copy]
    # A gets both as well; status and doctor list the copy until a person deletes it
    sync_remote(a)
    assert (a / conflict.copy).read_text(encoding="utf-8") == mine_b
    assert [c["copy"] for c in unresolved(a)] == [conflict.copy]
    assert unresolved(a)[0]["note"] == "home.md"
    from memory_hub.eval.doctor import check_team
    from memory_hub.eval.health import status

    assert status(a)["conflicts"][0]["copy"] == conflict.copy
    assert any(c.name == "sync conflicts" and c.status == "warn" for c in check_team(a))
    (a / conflict.copy).unlink()
    assert unresolved(a) == []


def test_appends_on_both_sides_merge_in_place_and_deletes_keep_the_edit(team):
    _remote, (a, b) = team(2)
    (a / "log.md").write_text("# Log\n\n- first\n", encoding="utf-8")
    (a / "gone.md").write_text("# Gone\n\nold text\n", encoding="utf-8")
    sync_remote(a)
    sync_remote(b)
    (a / "log.md").write_text("# Log\n\n- first\n- from A\n", encoding="utf-8")
    (b / "log.md").write_text("# Log\n\n- first\n- from B\n", encoding="utf-8")
    (a / "gone.md").unlink()
    (b / "gone.md").write_text("# Gone\n\nold text, and B's new line\n", encoding="utf-8")
    sync_remote(a)
    report = sync_remote(b)
    kinds = {c.path: c.resolution for c in report.exchange.conflicts}
    assert kinds == {"log.md": "both-inserted", "gone.md": "kept-local"}
    assert (b / "log.md").read_text(encoding="utf-8") == "# Log\n\n- first\n- from A\n- from B\n"
    assert (b / "gone.md").read_text(encoding="utf-8") == "# Gone\n\nold text, and B's new line\n"
    assert unresolved(b) == []  # nothing for a person to merge


def test_merge_insertions_refuses_real_edits():
    base = b"a\nb\nc\n"
    assert merge_insertions(base, b"a\nb\nx\nc\n", b"a\nb\nc\ny\n") == b"a\nb\nx\nc\ny\n"
    assert merge_insertions(base, b"a\nB\nc\n", b"a\nb\nc\ny\n") is None  # a line changed
    assert merge_insertions(b"", b"x\n", b"y\n") is None  # both added the file: a real conflict
    # both created today's daily note from one template, each with its own link: both links kept
    daily = b"---\ntitle: d\n---\n# d\n\n## Captured today\n"
    merged = merge_insertions(b"", daily + b"- [[a]]\n", daily + b"- [[b]]\n")
    assert merged == daily + b"- [[a]]\n- [[b]]\n"
    assert merge_insertions(b"", b"# T\nsame\n", b"# T\nother\n") is None  # too little in common


def test_usage_logs_never_conflict_even_from_one_machine_id(team, monkeypatch):
    """Two clones on one machine share the machine id, so they append to the same log file; reads
    in the same millisecond on both (the same timestamps here) are still two events each, not one
    line that git's union merge keeps once."""
    from memory_hub.index import usage as usage_index
    from memory_hub.vault.usage import record_read

    monkeypatch.setenv("MEMORY_HUB_MACHINE_ID", "same-box")
    _remote, (a, b) = team(2)
    sync_remote(b)
    assert git(a, "check-attr", "merge", "--", ".memory-hub/usage/same-box.jsonl").strip().endswith("union")
    for vault, n in ((a, 3), (b, 4)):
        for i in range(n):
            record_read(vault, "home.md", when=1764583200.0 + i)
        (vault / f"{vault.name}.md").write_text(f"# {vault.name}\n", encoding="utf-8")  # a commit that carries them
    sync_remote(a)
    report = sync_remote(b)
    assert not [c for c in report.exchange.conflicts if c.resolution == "both-kept"]
    sync_remote(a)
    for vault in (a, b):
        lines = (vault / ".memory-hub/usage/same-box.jsonl").read_text(encoding="utf-8").splitlines()
        assert sum(json.loads(x)["event"] == "read" for x in lines) == 7
        store = Store(vault)
        usage_index.fold(store, vault)
        assert usage_index.for_note(store, "home.md").reads == 7
        store.close()


def test_a_clone_without_the_attribute_still_unions_the_log(team):
    """Clones that predate the attribute (plain git, no .gitattributes): the resolver unions the log."""
    from memory_hub.vault.remote import exchange

    _remote, (a, b) = team(2)
    git(a, "rm", "-q", ".gitattributes")
    log = ".memory-hub/usage/old-box.jsonl"
    (a / log).parent.mkdir(parents=True, exist_ok=True)
    (a / log).write_text('{"ts": 1.0, "event": "read", "path": "home.md"}\n', encoding="utf-8")
    git(a, "add", "-A")
    git(a, "commit", "-qm", "no attributes, one read")
    exchange(a)
    exchange(b)
    assert not (b / ".gitattributes").exists()
    for vault, ts in ((a, 2.0), (b, 3.0)):
        with (vault / log).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"ts": ts, "event": "read", "path": "home.md"}) + "\n")
        git(vault, "commit", "-qam", f"read at {ts}")
    exchange(a)
    report = exchange(b)
    assert [(c.path, c.resolution) for c in report.conflicts] == [(log, "union")]
    stamps = [json.loads(x)["ts"] for x in (b / log).read_text(encoding="utf-8").splitlines()]
    assert stamps == [1.0, 2.0, 3.0]


def test_never_during_a_rebase_or_a_dream_pass_and_nothing_lost(team):
    _remote, (a, b) = team(2)
    (a / "home.md").write_text("# Home\n\nA\n", encoding="utf-8")
    sync_remote(a)
    (b / "home.md").write_text("# Home\n\nB\n", encoding="utf-8")
    git(b, "commit", "-qam", "b")
    git(b, "fetch", "-q")
    subprocess.run(["git", "rebase", "origin/main"], cwd=b, capture_output=True)  # stops on the conflict
    before = git(b, "rev-parse", "HEAD")
    report = sync_remote(b)
    assert report.skipped and "rebase" in report.skipped
    assert git(b, "rev-parse", "HEAD") == before
    git(b, "rebase", "--abort")
    with file_lock(index_dir(b) / "dream.lock"):
        (b / "new.md").write_text("# New\n", encoding="utf-8")
        report = sync_remote(b)
        assert report.skipped and "dream" in report.skipped
    assert (b / "new.md").exists()
    assert sync_remote(b).exchange.pushed >= 1  # afterwards it goes through


def test_cache_files_in_outgoing_commits_are_never_pushed(team):
    remote, (a, _b) = team(2)
    (a / ".gitignore").write_text("", encoding="utf-8")
    git(a, "add", "-f", ".memory_hub/index.sqlite3", ".gitignore")
    git(a, "commit", "-qm", "oops, the index")
    report = sync_remote(a)
    assert report.exchange.blocked and ".memory_hub" in report.exchange.blocked
    assert ".memory_hub/index.sqlite3" not in git(remote, "ls-tree", "-r", "--name-only", "main")


def test_secrets_in_outgoing_lines_block_the_push(team):
    remote, (a, _b) = team(2)
    (a / "creds.md").write_text("# Deploy\n\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY9\n",
                                encoding="utf-8")
    report = sync_remote(a)
    assert report.exchange.blocked and "creds.md" in report.exchange.blocked
    assert "creds.md" not in git(remote, "ls-tree", "-r", "--name-only", "main")
    assert git(a, "log", "-1", "--format=%s").startswith("vault: added creds")  # committed, kept local
    assert main(["--vault", str(a), "sync", "--remote", "--allow-secrets"]) == 0
    assert "creds.md" in git(remote, "ls-tree", "-r", "--name-only", "main")


def test_a_personal_vault_is_never_pushed_to_a_team_remote(team, tmp_path, monkeypatch):
    remote, (a, _b) = team(2)
    personal = tmp_path / "personal"
    personal.mkdir()
    git(personal, "init", "-q", "-b", "main")
    (personal / "diary.md").write_text("# Private\n", encoding="utf-8")
    git(personal, "remote", "add", "origin", str(remote))
    config = Path(monkeypatch_env(monkeypatch, tmp_path)) / "memory-hub" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f'vault = "{personal}"\n\n[vaults.platform]\npath = "{a}"\n', encoding="utf-8")
    with pytest.raises(SyncError, match="personal vault is never pushed"):
        sync_remote(personal)
    # a remote that is not configured, but whose own settings say it is a team vault
    (a / ".memory-hub").mkdir(exist_ok=True)
    (a / ".memory-hub/config.toml").write_text('[team]\nname = "platform"\n', encoding="utf-8")
    sync_remote(a)
    config.write_text(f'vault = "{personal}"\n', encoding="utf-8")
    report = sync_remote(personal)
    assert report.exchange.blocked and "team vault 'platform'" in report.exchange.blocked
    assert "diary.md" not in git(remote, "ls-tree", "-r", "--name-only", "main")


def monkeypatch_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    home = tmp_path / "config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return str(home)


def test_cli_json_shape_and_a_missing_remote(team, capsys):
    _remote, (a, _b) = team(2)
    (a / "n.md").write_text("# N\n", encoding="utf-8")
    assert main(["--vault", str(a), "sync", "--remote", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["exchange"]["pushed"] == 1 and data["committed"] and data["unresolved_conflicts"] == []
    assert set(data) >= {"vault", "remote", "exchange", "indexed", "skipped", "notes", "seconds"}
    assert main(["--vault", str(a), "sync", "--remote", "upstream"]) == 1
    assert "no git remote named 'upstream'" in capsys.readouterr().err


ROUNDS = 3


def test_every_clone_at_once_loses_nothing(team):
    """Three clones capture, edit and sync at the same time; then every note written exists exactly
    once, with its exact text, in every clone and the remote, and is searchable in each."""
    from memory_hub.capture import braindump

    remote, clones = team(3)
    written: dict[str, str] = {}  # unique word → the clone-relative path and text, filled after the run
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(i: int, vault: Path) -> None:
        try:
            own = vault / f"own-{i}.md"
            for r in range(ROUNDS):
                word = f"zq{i}x{r}capture"
                result = braindump(vault, f"Round {r} on clone {i}: remember {word} for the incident review.",
                                   title=f"clone {i} round {r} {word}")
                rel = Path(result.path).as_posix()  # vault-relative
                with lock:
                    written[word] = rel
                own.write_text(f"# Own {i}\n\nedited in round {r} zq{i}own{r}\n", encoding="utf-8")
                sync_remote(vault)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, v)) for i, v in enumerate(clones)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    for _ in range(3):  # settle: every clone pulls what the others pushed last
        for vault in clones:
            sync_remote(vault)
    heads = {git(v, "rev-parse", "HEAD").strip() for v in clones} | {git(remote, "rev-parse", "main").strip()}
    assert len(heads) == 1
    texts = tree_text(remote, "main")
    for vault in clones:
        assert git(vault, "status", "--porcelain") == ""
        on_disk = {p: (vault / p).read_text(encoding="utf-8") for p in texts}
        assert on_disk == texts
        assert unresolved(vault) == []  # captures and own edits never collide
        for i in range(len(clones)):
            assert texts[f"own-{i}.md"] == f"# Own {i}\n\nedited in round {ROUNDS - 1} zq{i}own{ROUNDS - 1}\n"
    assert len(written) == len(clones) * ROUNDS
    for word, rel in written.items():
        holders = [p for p, t in texts.items() if word in t and not p.startswith("daily/")]
        assert holders == [rel], (word, holders)  # exactly once
        for vault in clones:
            assert found(vault, word) == [rel]


def test_the_servers_watcher_picks_up_pulled_files(team):
    """With a server on clone B, `sync --remote` leaves indexing to its watcher, which sees the pull."""
    import time

    from memory_hub.server.watcher import Watcher

    _remote, (a, b) = team(2)
    store = Store(b)
    watcher = Watcher(b, store, rescan_every=None).start()
    try:
        (a / "pulled.md").write_text("# Pulled\n\nqwxpulledword\n", encoding="utf-8")
        sync_remote(a)
        report = sync_remote(b, index="server")
        assert report.indexed["by"] == "the running server's watcher"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not found(b, "qwxpulledword"):
            time.sleep(0.1)
        assert found(b, "qwxpulledword") == ["pulled.md"]
    finally:
        watcher.stop()
        store.close()


def test_filters_unaffected_by_conflict_copies(team):
    """A conflict copy is an ordinary note: a path filter finds it beside the note it belongs to."""
    _remote, (a, b) = team(2)
    (a / "runbooks").mkdir()
    (a / "runbooks/deploy.md").write_text("# Deploy\n\nstep one\n", encoding="utf-8")
    sync_remote(a)
    sync_remote(b)
    (a / "runbooks/deploy.md").write_text("# Deploy\n\nstep one, by A\n", encoding="utf-8")
    (b / "runbooks/deploy.md").write_text("# Deploy\n\nstep one, by B\n", encoding="utf-8")
    sync_remote(a)
    [c] = sync_remote(b).exchange.conflicts
    assert c.copy.startswith("runbooks/deploy.conflict-")
    store = Store(b)
    hits = [h.path for h in search(store, "deploy step", k=10, mode="lexical",
                                   filters=Filters(path_prefix="runbooks/")).hits]
    store.close()
    assert set(hits) == {"runbooks/deploy.md", c.copy}


def test_schedule_runs_sync_remote_when_team_sync_minutes_is_set(tmp_path, capsys):
    from memory_hub.capture.schedule import command, entries, jobs

    vault = tmp_path / "v"
    (vault / ".memory-hub").mkdir(parents=True)
    assert "sync-remote" not in jobs(vault)
    (vault / ".memory-hub/config.toml").write_text("[team]\nsync_minutes = 5\n", encoding="utf-8")
    assert jobs(vault)["sync-remote"][2] == "*/5 * * * *"
    assert command(vault, "sync-remote")[-2:] == ["sync", "--remote"]
    cron = next(e.text for e in entries(vault) if e.kind == "cron")
    assert "*/5 * * * *" in cron and "sync --remote" in cron
    timers = [e for e in entries(vault) if e.kind == "systemd" and "sync-remote" in (e.path or "")]
    assert any("OnCalendar=*:0/5" in e.text for e in timers)


def test_a_first_commit_of_thousands_of_notes_fits_one_git_argument():
    """A real vault's first autocommit (obsidian-hub: 6,571 notes) listed every path in `-m`: E2BIG."""
    from memory_hub.capture.autocommit import MAX_BODY_PATHS, commit_message

    added = [f"some/deeply/nested/folder/with/a/long/name/note-{i:05d}.md" for i in range(7000)]
    message = commit_message(added, [], [], [])
    assert len(message.encode()) < 128 * 1024
    assert message.count("\nA ") == MAX_BODY_PATHS and "6500 more" in message
