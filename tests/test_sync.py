"""Sync: additions, edits, deletions, renames, link re-resolution, skip rules, interruption, rebuild."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_hub.config import template_dir
from memory_hub.eval.health import status
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.retrieval.search import search

REPO = Path(__file__).resolve().parent.parent


def link_table(store: Store) -> list[tuple]:
    return sorted(store.conn.execute(
        "SELECT s.path, l.target, t.path, l.kind, l.heading, l.block, l.alias, l.line FROM links l "
        "JOIN notes s ON s.id = l.source_id LEFT JOIN notes t ON t.id = l.target_id"
    ).fetchall(), key=lambda r: tuple(str(x) for x in r))


def note_table(store: Store) -> list[tuple]:
    return [tuple(r) for r in store.conn.execute(
        "SELECT path, title, description, kind, scope, tags, aliases, dates, ranked, hash FROM notes ORDER BY path")]


def assert_consistent(store: Store, settled: bool = True) -> None:
    """Every invariant a half-finished sync could break. A stopped bulk sync (``settled=False``) may
    leave ranked notes' lexical rows staged (``fts_pending``) instead of in FTS, never both or neither."""
    conn = store.conn
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    staged = [r[0] for r in conn.execute("SELECT rowid FROM fts_pending")]
    if settled:
        assert staged == [], "lexical rows left staged after a completed sync"
    for table in ("fts_trigram", "fts_words"):
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        ranked = {r[0] for r in conn.execute("SELECT id FROM notes WHERE ranked = 1")}
        rows = [r[0] for r in conn.execute(f"SELECT rowid FROM {table}")]
        assert sorted(rows + staged) == sorted(ranked), f"{table} rows do not match ranked notes"
    orphans = conn.execute("SELECT count(*) FROM links WHERE source_id NOT IN (SELECT id FROM notes)").fetchone()[0]
    assert orphans == 0
    bad = conn.execute("SELECT count(*) FROM links WHERE target_id IS NOT NULL AND target_id NOT IN (SELECT id FROM notes)"
                       ).fetchone()[0]
    assert bad == 0


def target_of(store: Store, source: str, target: str) -> str | None:
    row = store.conn.execute(
        "SELECT t.path FROM links l JOIN notes s ON s.id = l.source_id LEFT JOIN notes t ON t.id = l.target_id "
        "WHERE s.path = ? AND l.target = ?", (source, target)).fetchone()
    assert row is not None, f"no link {source} → {target}"
    return row[0]


def test_add_edit_delete_rename(make_vault) -> None:
    vault, store = make_vault({
        "a.md": "# A\n\nlinks to [[b]] and [[gone]]\n",
        "b.md": "# B\n\nbody of b with zebra\n",
        "c.md": "# C\n\n[[b|see b]]\n",
    })
    assert target_of(store, "a.md", "b") == "b.md" and target_of(store, "a.md", "gone") is None
    b_id = store.note_row("b.md")["id"]

    # no change → nothing re-read
    report = sync(vault, store=store)
    assert not report.changed and report.unchanged == 3

    # edit
    (vault / "b.md").write_text("# B\n\nbody of b with giraffe\n", encoding="utf-8")
    report = sync(vault, store=store)
    assert report.updated == ["b.md"] and store.note_row("b.md")["id"] == b_id
    assert [h.path for h in search(store, "giraffe", mode="lexical").hits] == ["b.md"]
    assert search(store, "zebra", mode="lexical").hits == []

    # touch without a content change: unchanged, and the new mtime is remembered
    os.utime(vault / "c.md", ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    report = sync(vault, store=store)
    assert not report.changed and report.unchanged == 3
    assert sync(vault, store=store).unchanged == 3

    # rename keeps the id; backlinks by basename re-resolve to the new path
    (vault / "sub").mkdir()
    (vault / "b.md").rename(vault / "sub" / "b.md")
    report = sync(vault, store=store)
    assert report.renamed == [("b.md", "sub/b.md")] and not report.added and not report.deleted
    assert store.note_row("sub/b.md")["id"] == b_id and store.note_row("b.md") is None
    assert target_of(store, "a.md", "b") == "sub/b.md" and target_of(store, "c.md", "b") == "sub/b.md"

    # rename to another name: same id, the old name now dangles
    (vault / "sub" / "b.md").rename(vault / "renamed.md")
    sync(vault, store=store)
    assert store.note_row("renamed.md")["id"] == b_id and target_of(store, "a.md", "b") is None

    # a dangling link comes alive when its target is created
    (vault / "gone.md").write_text("# Gone no more\n", encoding="utf-8")
    report = sync(vault, store=store)
    assert report.added == ["gone.md"] and target_of(store, "a.md", "gone") == "gone.md"

    # delete: the note, its lexical rows and its links go; links to it dangle again
    (vault / "gone.md").unlink()
    report = sync(vault, store=store)
    assert report.deleted == ["gone.md"] and target_of(store, "a.md", "gone") is None
    assert_consistent(store)


def test_alias_change_re_resolves_other_notes(make_vault) -> None:
    vault, store = make_vault({"a.md": "see [[Nick]]\n", "b.md": "---\naliases: [Nick]\n---\nb\n"})
    assert target_of(store, "a.md", "Nick") == "b.md"
    (vault / "b.md").write_text("---\naliases: [Other]\n---\nb\n", encoding="utf-8")
    sync(vault, store=store)
    assert target_of(store, "a.md", "Nick") is None


def test_ambiguous_basename_follows_the_shortest_path(make_vault) -> None:
    vault, store = make_vault({"x.md": "[[dup]]\n", "deep/er/dup.md": "deep\n", "mid/dup.md": "mid\n"})
    assert target_of(store, "x.md", "dup") == "mid/dup.md"
    (vault / "dup.md").write_text("top\n", encoding="utf-8")
    sync(vault, store=store)
    assert target_of(store, "x.md", "dup") == "dup.md"


def test_only_paths_fast_path(make_vault) -> None:
    vault, store = make_vault({"a.md": "one\n", "b.md": "two\n"})
    (vault / "a.md").write_text("one changed\n", encoding="utf-8")
    (vault / "b.md").write_text("two changed\n", encoding="utf-8")
    (vault / "c.md").write_text("three\n", encoding="utf-8")
    report = sync(vault, store=store, only=["a.md", "missing.md"])
    assert report.updated == ["a.md"] and not report.added and not report.deleted
    (vault / "a.md").unlink()
    report = sync(vault, store=store, only=["a.md"])
    assert report.deleted == ["a.md"] and store.note_row("b.md") is not None
    report = sync(vault, store=store)
    assert report.updated == ["b.md"] and report.added == ["c.md"]


def test_skip_rules(make_vault, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret outside\n", encoding="utf-8")
    files = {
        "ok.md": "# Fine\n",
        ".git/HEAD.md": "# in git\n",
        ".obsidian/workspace.md": "# obsidian\n",
        ".trash/old.md": "# trashed\n",
        "binary.md": b"# looks like md\x00\x01\x02",
        "latin1.md": "café naïve\n".encode("latin-1"),
        "huge.md": "x" * (2 * 1024 * 1024 + 10),
        "broken.md": "---\ntitle: [oops\n---\n# Broken but indexed\n\nwith body text quokka\n",
        "attachments/pic.png": b"\x89PNG\r\n\x1a\n\x00\x00",
    }
    vault, store = make_vault(files, index=False)
    (vault / ".memory_hub" / "cache-note.md").write_text("# inside the index folder\n", encoding="utf-8")
    os.symlink(outside / "secret.md", vault / "escape.md")
    os.symlink(outside, vault / "escape-dir")
    os.symlink(vault / "ok.md", vault / "inside-link.md")
    report = sync(vault, store=store)
    err = capsys.readouterr().err
    paths = {r[0] for r in store.conn.execute("SELECT path FROM notes")}
    assert paths == {"ok.md", "broken.md", "inside-link.md", "attachments/pic.png"}
    reasons = {s.path: s.reason for s in report.skipped}
    assert "outside the vault" in reasons["escape.md"] and "outside the vault" in reasons["escape-dir"]
    assert "binary" in reasons["binary.md"] and "UTF-8" in reasons["latin1.md"] and "too large" in reasons["huge.md"]
    for path in ("escape.md", "binary.md", "latin1.md", "huge.md", "broken.md"):
        assert f"warning: {path}" in err
    # broken YAML: indexed from its body, the problem reported in the report and in status
    assert [p for p, _ in report.problems] == ["broken.md"]
    assert [h.path for h in search(store, "quokka", mode="lexical").hits] == ["broken.md"]
    problems = status(vault)["problems"]
    assert any(p.startswith("broken.md: broken YAML") for p in problems)
    assert any(p.startswith("binary.md: binary") for p in problems)
    # fixing the file clears its problem
    (vault / "broken.md").write_text("---\ntitle: Fixed\n---\nquokka\n", encoding="utf-8")
    (vault / "binary.md").unlink()
    sync(vault, store=store)
    problems = status(vault)["problems"]
    assert not any(p.startswith("broken.md") for p in problems)
    assert not any(p.startswith("binary.md") for p in problems)
    assert_consistent(store)


def test_note_that_turns_unreadable_leaves_the_index(make_vault) -> None:
    vault, store = make_vault({"a.md": "# A\n\nunique walrus\n"})
    (vault / "a.md").write_bytes(b"\xff\xfe not utf8 walrus")
    report = sync(vault, store=store)
    assert report.deleted == ["a.md"] and report.skipped and search(store, "walrus", mode="lexical").hits == []


def _big_vault(root: Path, n: int) -> Path:
    shutil.copytree(template_dir(), root)
    for i in range(n):
        (root / "bulk").mkdir(exist_ok=True)
        (root / "bulk" / f"note-{i:04d}.md").write_text(
            f"---\ntitle: Bulk note {i}\ntags: [bulk, t{i % 7}]\n---\n# Bulk {i}\n\n"
            f"Links to [[note-{(i + 1) % n:04d}]] and [[tls-certificates]] and [[missing-{i % 5}]].\n"
            f"Word{i % 13} lorem ipsum 認証 手順 {'S3' if i % 9 == 0 else ''}\n",
            encoding="utf-8")
    return root


def _wait_for(db: Path, predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                try:
                    if predicate(conn):
                        return
                finally:
                    conn.close()
            except sqlite3.OperationalError:
                pass
        time.sleep(0.02)
    raise AssertionError("condition not reached")


QUERIES = ["TLS certificate rotation", "S3", "認証", "手順", "Bulk note 17", "apply_secrets", "Go", "word3 lorem"]


def _search_snapshot(store: Store) -> list[list[tuple[str, float]]]:
    return [[(h.path, h.score) for h in search(store, q, k=15, mode="lexical").hits] for q in QUERIES]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_interrupted_sync_is_consistent_and_completes(tmp_path: Path, workers: str) -> None:
    """Ctrl-C (a real SIGINT) in the middle of ``memory-hub index``: what committed stays consistent,
    whether notes are parsed in this process or in worker processes."""
    vault = _big_vault(tmp_path / "vault", 900)
    db = vault / ".memory_hub" / "index.sqlite3"
    env = {**os.environ, "MEMORY_HUB_INDEX_WORKERS": workers, "MEMORY_HUB_PARALLEL_FROM": "100"}
    # A test run started in the background by a non-interactive shell (CI scripts, `make test &`)
    # inherits SIGINT ignored, and so would the child: Python then never raises KeyboardInterrupt.
    # The child gets the default disposition back, as a terminal's Ctrl-C would find it.
    proc = subprocess.Popen([sys.executable, "-m", "memory_hub.cli", "--vault", str(vault), "index", "--no-vectors"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _wait_for(db, lambda c: c.execute("SELECT count(*) FROM notes").fetchone()[0] >= 100)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err

    store = Store(vault)
    indexed = store.conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    total = sum(1 for p in vault.rglob("*") if p.is_file() and not any(x.startswith(".") for x in p.parts[-2:]))
    assert 100 <= indexed < total  # really interrupted part-way
    assert_consistent(store, settled=False)

    report = sync(vault, store=store)
    assert report.added and not report.deleted and not report.interrupted
    assert_consistent(store)
    assert store.conn.execute("SELECT count(*) FROM notes").fetchone()[0] == total
    completed = (note_table(store), link_table(store), _search_snapshot(store))
    store.close()

    # --rebuild from nothing gives identical notes, links and search results
    rebuilt = Store(vault)
    sync(vault, store=rebuilt, rebuild=True)
    rebuilt = Store(vault)
    assert (note_table(rebuilt), link_table(rebuilt), _search_snapshot(rebuilt)) == completed
    assert_consistent(rebuilt)


def test_worker_processes_build_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big sync parses in worker processes; the index it writes is the one a single process writes."""
    import concurrent.futures

    from memory_hub.index import sync as sync_module

    one = _big_vault(tmp_path / "one", 240)
    two = tmp_path / "two"
    shutil.copytree(one, two)
    monkeypatch.setenv("MEMORY_HUB_INDEX_WORKERS", "1")
    sync(one)
    pools = []
    real_pool = concurrent.futures.ProcessPoolExecutor

    def counting_pool(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        pools.append(args)
        return real_pool(*args, **kwargs)

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", counting_pool)
    monkeypatch.setattr(sync_module, "PARALLEL_FROM", 50)
    monkeypatch.setenv("MEMORY_HUB_INDEX_WORKERS", "2")
    report = sync(two)
    assert pools == [(2,)] and len(report.added) > 240  # the workers really parsed
    a, b = Store(one), Store(two)
    assert (note_table(a), link_table(a), _search_snapshot(a)) == (note_table(b), link_table(b), _search_snapshot(b))
    assert_consistent(b)


def test_rebuild_matches_incremental_history(template_vault) -> None:
    vault, store = template_vault
    # a history of edits, renames and deletions applied incrementally…
    (vault / "tls-certificates.md").rename(vault / "tls-certs.md")
    (vault / "runbooks" / "db-failover.md").write_text(
        (vault / "runbooks" / "db-failover.md").read_text(encoding="utf-8") + "\nSee [[tls-certs]].\n", encoding="utf-8")
    (vault / "inbox" / "2026-05-07-cdn-purge-braindump.md").unlink()
    (vault / "postgres-vacuum-tuning.md").write_text("# Postgres vacuum tuning\n\nautovacuum\n", encoding="utf-8")
    sync(vault, store=store)
    incremental = (note_table(store), link_table(store), _search_snapshot(store))
    store.close()
    # …equals an index built from nothing
    fresh = Store(vault)
    sync(vault, store=fresh, rebuild=True)
    fresh = Store(vault)
    assert (note_table(fresh), link_table(fresh), _search_snapshot(fresh)) == incremental
    assert target_of(fresh, "runbooks/db-failover.md", "postgres-vacuum-tuning") == "postgres-vacuum-tuning.md"


def test_sync_report_json_shape(make_vault) -> None:
    vault, store = make_vault({"a.md": "x\n"}, index=False)
    data = sync(vault, store=store).as_dict()
    assert set(data) == {"added", "updated", "deleted", "renamed", "unchanged", "skipped", "problems",
                         "links_resolved", "usage_events", "seconds", "interrupted", "reparsed",
                         "descriptions_changed"}
    assert data["added"] == ["a.md"]
    json.dumps(data)


def test_worker_map_finishes_in_process_when_its_workers_die(tmp_path: Path) -> None:
    """A script without an ``if __name__ == "__main__"`` guard makes every forkserver worker re-run
    it and die; the map must still return every result, in order, and say what happened."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import logging, os\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from memory_hub.index.sync import worker_map\n"
        "print(sum(worker_map(abs, list(range(-50, 50)))))\n", encoding="utf-8")
    env = {**os.environ, "MEMORY_HUB_INDEX_WORKERS": "2", "MEMORY_HUB_PARALLEL_FROM": "10"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == str(sum(abs(i) for i in range(-50, 50)))
    assert "index workers stopped" in proc.stderr


def _sixty_indexed_notes(tmp_path: Path) -> tuple[Path, Store]:
    """A vault of 60 small notes, each with its own marker word, indexed: the bulk-sync tests' start."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for i in range(60):
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nmarker{i}x body text\n", encoding="utf-8")
    store = Store(vault)
    sync(vault, store=store)
    return vault, store


def test_a_bulk_update_stopped_midway_never_hides_indexed_notes_from_search(tmp_path: Path, monkeypatch) -> None:
    """A pull that rewrites many notes is a bulk sync; the notes already indexed must stay
    searchable while it runs and after it is stopped (only new notes' rows may wait, staged)."""
    from memory_hub.index import sync as sync_module

    vault, store = _sixty_indexed_notes(tmp_path)
    for i in range(60):  # every note edited (its marker word kept), plus new notes
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nmarker{i}x body text, edited\n", encoding="utf-8")
    for i in range(60, 70):
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nmarker{i}x new\n", encoding="utf-8")
    monkeypatch.setattr(sync_module, "BATCH_NOTES", 10)  # commits every 10 notes, as a big pull's batches do
    taken = []

    def take(_stat, _derived) -> None:
        taken.append(1)
        if len(taken) == 45:
            raise KeyboardInterrupt

    with pytest.raises(sync_module.SyncInterrupted) as stopped:
        sync(vault, store=store, note_hook=(lambda _path, _note: 1, take))
    assert stopped.value.report.interrupted and len(taken) == 45
    assert_consistent(store, settled=False)
    for i in range(60):
        hits = [h.path for h in search(store, f"marker{i}x", k=3, mode="lexical").hits]
        assert f"n{i:02d}.md" in hits, (i, hits)
    sync(vault, store=store)  # the next sync finishes the job
    assert_consistent(store)
    for i in range(70):
        assert f"n{i:02d}.md" in [h.path for h in search(store, f"marker{i}x", k=3, mode="lexical").hits]


def test_a_no_change_sync_trusts_the_walk_digest_only_while_the_index_is_unchanged(make_vault) -> None:
    """A walk that matches the index row for row leaves its digest with the notes' change stamp;
    the next no-change sync then skips reading every stamp. Every change still shows, and so does
    an index that moved behind the walk (another process's sync) with the walk as it was."""
    from memory_hub.index.sync import WALK_DIGEST

    vault, store = make_vault({"a.md": "# A\n\n[[b]]\n", "b.md": "# B\n\nbody of b with giraffe\n",
                               "c.md": "# C\n"}, index=False)
    past = time.time_ns() - 3_600 * 10**9  # older than the racy window, so stamps are trusted

    def age(path: Path, offset_s: int = 0) -> None:
        os.utime(path, ns=(past + offset_s * 10**9, past + offset_s * 10**9))

    for p in vault.glob("*.md"):
        age(p)
    sync(vault, store=store)
    assert sync(vault, store=store).unchanged == 3
    assert store.get_meta(WALK_DIGEST)
    statements: list[str] = []
    store.conn.set_trace_callback(statements.append)
    report = sync(vault, store=store)
    store.conn.set_trace_callback(None)
    assert not report.changed and report.unchanged == 3
    assert not any("notes_stamp" in s for s in statements)  # the stamps were not read

    b = vault / "b.md"
    kept, kept_ns = b.read_bytes(), b.stat().st_mtime_ns
    b.write_text("# B\n\nbody of b, now with an okapi\n", encoding="utf-8")
    age(b, 5)
    assert sync(vault, store=store, only=["b.md"]).updated == ["b.md"]  # as a watcher would
    b.write_bytes(kept)
    os.utime(b, ns=(kept_ns, kept_ns))  # the walk is exactly the one the digest was made of
    assert sync(vault, store=store).updated == ["b.md"]
    assert [h.path for h in search(store, "giraffe", mode="lexical").hits] == ["b.md"]
    assert sync(vault, store=store).unchanged == 3 and sync(vault, store=store).unchanged == 3

    (vault / "d.md").write_text("# D\n", encoding="utf-8")
    age(vault / "d.md", 7)
    assert sync(vault, store=store).added == ["d.md"]
    sync(vault, store=store)
    (vault / "d.md").rename(vault / "e.md")
    assert sync(vault, store=store).renamed == [("d.md", "e.md")]
    sync(vault, store=store)
    (vault / "e.md").unlink()
    assert sync(vault, store=store).deleted == ["e.md"]
    sync(vault, store=store)
    age(vault / "c.md", 9)  # touched
    report = sync(vault, store=store)
    assert not report.changed and store.note_row("c.md")["mtime_ns"] == past + 9 * 10**9
    assert_consistent(store)


def test_the_walk_skips_every_skip_dir_by_its_leading_dot(tmp_path: Path) -> None:
    """The walk has one rule for folders that are never content: a leading dot. It holds for every
    ``config.SKIP_DIRS`` name (a new one without a dot would need its own check in ``vault/walk``)."""
    from memory_hub.config import SKIP_DIRS
    from memory_hub.vault.walk import stat_map, walk

    assert SKIP_DIRS and all(name.startswith(".") for name in SKIP_DIRS)
    for name in SKIP_DIRS:
        (tmp_path / name / "deep").mkdir(parents=True)
        (tmp_path / name / "deep" / "note.md").write_text("# hidden\n", encoding="utf-8")
    (tmp_path / "kept.md").write_text("# kept\n", encoding="utf-8")
    assert [st.path for st in walk(tmp_path)] == ["kept.md"] == list(stat_map(tmp_path))


_KILLED_AT_NEW_NOTE = '''\
import os, signal, sys
from pathlib import Path
from memory_hub.index import sync as s
s.BATCH_NOTES, s.BATCH_SECONDS = 5, 3600.0  # a commit every 5 notes, whatever the machine's speed


def derive(path, note):
    return 1


def take(stat, derived):
    if stat.path == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)  # a crash: no rollback, no finally, mid-transaction


s.sync(Path(sys.argv[1]), progress=False, note_hook=(derive, take))
'''


def test_a_bulk_sync_killed_while_new_notes_are_staged_loses_nothing_indexed(tmp_path: Path) -> None:
    """A pull of many edits and new notes is a bulk sync: new notes' lexical rows wait, staged, for
    the descriptions. A crash (SIGKILL) after some new notes were committed staged: every note indexed
    before is still found, the index says it is not complete (descriptions pending, rows staged, no
    new last_sync), and the next sync finishes the new notes."""
    from memory_hub.index import lexical
    from memory_hub.index.sync import DESCRIPTIONS_PENDING

    vault, store = _sixty_indexed_notes(tmp_path)
    synced_at = store.get_meta("last_sync")
    store.close()
    for i in range(60):  # every note edited (its marker word kept), then ten new ones (walked after them)
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nmarker{i}x body text, edited\n", encoding="utf-8")
    for i in range(60, 70):
        (vault / f"n{i:02d}.md").write_text(f"# Note {i}\n\nmarker{i}x new\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", _KILLED_AT_NEW_NOTE, str(vault), "n66.md"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]

    store = Store(vault)
    conn = store.conn
    assert_consistent(store, settled=False)
    staged = sorted(r[0] for r in conn.execute(
        "SELECT n.path FROM fts_pending p JOIN notes n ON n.id = p.rowid"))
    assert staged == [f"n{i}.md" for i in range(60, 65)]  # the committed new notes, and only they
    assert store.get_meta(DESCRIPTIONS_PENDING) == "1" and lexical.has_pending(conn)  # not complete
    assert store.get_meta("last_sync") == synced_at
    for i in range(60):  # every note indexed before the crash is still found
        hits = [h.path for h in search(store, f"marker{i}x", k=3, mode="lexical").hits]
        assert f"n{i:02d}.md" in hits, (i, hits)

    report = sync(vault, store=store)  # the next sync finishes the job
    assert sorted(report.added) == [f"n{i}.md" for i in range(65, 70)] and not report.updated
    assert_consistent(store)
    assert store.get_meta(DESCRIPTIONS_PENDING) == "0" and not lexical.has_pending(conn)
    assert store.get_meta("last_sync") != synced_at
    for i in range(70):
        assert f"n{i:02d}.md" in [h.path for h in search(store, f"marker{i}x", k=3, mode="lexical").hits], i
    store.close()
