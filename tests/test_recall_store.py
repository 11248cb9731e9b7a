"""Recall's saved index (SQLite, version 7): a warm open reads no posting, a save is all or nothing,
an old pickle or a damaged file is rebuilt, unsaved changes are counted the same as saved ones."""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from recall_contents import contents as _contents
from recall_contents import postings

from memory_hub.retrieval import recall_index
from memory_hub.retrieval.recall_index import INDEX_VERSION, RecallIndex


def note(title: str, body: str) -> str:
    return f"---\ntitle: {title}\ntags: [t]\n---\n\n{body}\n"


def _touch_later(path: Path) -> None:
    now = time.time_ns() + 10_000_000
    os.utime(path, ns=(now, now))


def test_a_warm_open_reads_no_posting(make_vault) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"zebra crossing {i} alpha") for i in range(20)})
    built = RecallIndex(vault)
    built.refresh()
    warm = RecallIndex(vault)
    statements: list[str] = []
    con = warm._connection(create=False)
    assert con is not None
    con.set_trace_callback(statements.append)
    assert warm.load() and len(warm.data.notes) == 20
    assert statements and not any("postings" in s or "FROM terms" in s for s in statements)
    assert warm.df(["zebra", "nothing-like-it"]) == {"zebra": 20, "nothing-like-it": 0}
    assert any("FROM terms" in s for s in statements)  # read per term, when asked
    assert _contents(warm) == _contents(built)


def test_an_old_pickle_is_rebuilt_not_read(make_vault) -> None:
    vault, _ = make_vault({"a.md": note("Alpha", "kafka queues"), "b.md": note("Beta", "zebra")})
    folder = vault / ".memory_hub" / "recall"
    folder.mkdir(parents=True, exist_ok=True)
    old = folder / "index.pkl"
    with open(old, "wb") as fh:  # what version 6 saved, claiming a note that does not exist
        pickle.dump({"version": 6, "files": {"ghost.md": (1, 1)}, "postings": {"ghost": {"ghost.md": 1.0}},
                     "notes": {"ghost.md": ("Ghost", "", "note", ("ghost",), ["ghost"], [], False)}}, fh)
    index = RecallIndex(vault)
    assert not index.load()
    assert index.refresh()["changed"] == 2
    assert not old.exists()  # never read again, so not left behind (417 MB at 100k)
    again = RecallIndex(vault)
    assert again.load() and set(again.data.notes) == {"a.md", "b.md"} and "ghost" not in postings(again)


@pytest.mark.parametrize("damage", ["garbage", "other-version"])
def test_a_damaged_or_foreign_file_is_rebuilt(make_vault, damage: str) -> None:
    vault, _ = make_vault({"a.md": note("Alpha", "kafka"), "b.md": note("Beta", "zebra")})
    first = RecallIndex(vault)
    first.refresh()
    first.close()
    if damage == "garbage":
        for suffix in ("-wal", "-shm"):
            first.path.with_name(first.path.name + suffix).unlink(missing_ok=True)
        first.path.write_bytes(b"not a database at all" * 100)
    else:
        con = sqlite3.connect(first.path)
        con.execute("UPDATE meta SET value = ? WHERE key = 'version'", (str(INDEX_VERSION + 1),))
        con.commit()
        con.close()
    index = RecallIndex(vault)
    assert not index.load()
    assert index.refresh() == {"changed": 2, "removed": 0, "notes": 2}
    again = RecallIndex(vault)
    assert again.load() and set(again.data.notes) == {"a.md", "b.md"}
    assert again.df(["kafka"]) == {"kafka": 1}


def test_an_interrupted_save_leaves_the_last_committed_index(make_vault, monkeypatch) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"common word{i}") for i in range(10)})
    first = RecallIndex(vault)
    first.refresh()
    before = _contents(first)
    (vault / "n3.md").write_text(note("Note 3", "zebra crossing"), encoding="utf-8")
    _touch_later(vault / "n3.md")
    (vault / "n4.md").unlink()
    (vault / "new.md").write_text(note("New", "zebra"), encoding="utf-8")

    real_write = recall_index.RecallIndex._write

    def dies_half_way(self, con, pending) -> None:  # noqa: ANN001
        con.execute("DELETE FROM postings")  # some of the work done...
        raise OSError("disk full")  # ...then the save stops

    monkeypatch.setattr(recall_index.RecallIndex, "_write", dies_half_way)
    index = RecallIndex(vault)
    index.load()
    stats = index.refresh()
    assert stats["changed"] == 2 and stats["removed"] == 1 and stats["unsaved"] == 3  # said, not hidden
    assert "disk full" in (index.save_error or "")
    # the answers in this process already see the changes...
    assert index.df(["zebra", "common"]) == {"zebra": 2, "common": 8}
    # ...and the file still holds the whole last committed index, not half of a new one
    reader = RecallIndex(vault)
    assert reader.load() and _contents(reader) == before
    monkeypatch.setattr(recall_index.RecallIndex, "_write", real_write)
    assert "unsaved" not in index.refresh()  # the next save writes what was pending
    after = RecallIndex(vault)
    assert after.load() and _contents(after) == _contents(index)
    assert after.df(["zebra", "common"]) == {"zebra": 2, "common": 8}


def test_unsaved_watcher_changes_are_counted_like_saved_ones(make_vault) -> None:
    """A watcher's updates are saved at most once a minute: meanwhile ``df`` and ``postings``
    answer from the file plus what is pending, exactly as after the save."""
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"gamma text {i}") for i in range(8)})
    index = RecallIndex(vault)
    index.refresh()
    (vault / "n1.md").write_text(note("Note 1", "kafka kafka kafka kafka kafka"), encoding="utf-8")
    _touch_later(vault / "n1.md")
    (vault / "n2.md").unlink()
    (vault / "k.md").write_text(note("K", "kafka"), encoding="utf-8")
    index.refresh(only=["n1.md", "n2.md", "k.md"])
    assert index._pending  # not saved yet (SAVE_EVERY)
    pending = (index.df(["kafka", "gamma", "text"]), postings(index))
    index.save()
    assert not index._pending
    assert (index.df(["kafka", "gamma", "text"]), postings(index)) == pending
    assert pending[0] == {"kafka": 2, "gamma": 6, "text": 6}
    assert pending[1]["kafka"] == {"n1.md", "k.md"}


@pytest.mark.parametrize("workers", ["in-process", "workers"])
def test_a_long_build_writes_in_groups(make_vault, monkeypatch, tmp_path: Path, workers: str) -> None:
    """A build bigger than FLUSH_NOTES commits in groups: the same index as one written at once."""
    monkeypatch.setenv("MEMORY_HUB_PARALLEL_FROM", "1000000" if workers == "in-process" else "10")
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"word{i % 4} body") for i in range(100)}, index=False)
    other = tmp_path / "other"
    shutil.copytree(vault, other)
    monkeypatch.setattr(recall_index, "FLUSH_NOTES", 7)
    grouped = RecallIndex(vault)
    grouped.refresh()
    monkeypatch.setattr(recall_index, "FLUSH_NOTES", 10**9)
    whole = RecallIndex(other)
    whole.refresh()
    assert _contents(grouped) == _contents(whole) and len(grouped.data.notes) == 100
    reread = RecallIndex(vault)
    assert reread.load() and _contents(reread) == _contents(whole)


def test_a_save_blocked_by_another_writer_stays_pending_and_is_said(make_vault) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"gamma {i}") for i in range(5)})
    first = RecallIndex(vault)
    first.refresh()
    (vault / "n9.md").write_text(note("Nine", "okapi"), encoding="utf-8")
    other = sqlite3.connect(first.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of its own save
    try:
        index = RecallIndex(vault)
        assert index.load()
        stats = index.refresh()
        assert stats["changed"] == 1 and stats["unsaved"] == 1 and "locked" in (index.save_error or "")
        assert index.df(["okapi"]) == {"okapi": 1}  # this process answers with the change all the same
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "unsaved" not in index.refresh()  # nothing new, but what was pending is written now
    again = RecallIndex(vault)
    assert again.load() and again.df(["okapi"]) == {"okapi": 1} and "n9.md" in again.data.notes


def test_df_reads_a_pending_notes_saved_terms_once_until_the_file_changes(make_vault) -> None:
    """Each long prompt asks ``df``; the saved terms of the notes waiting to be saved are read the
    first time, not at every prompt, and read again once another process's save changed the file."""
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"gamma text {i}") for i in range(8)})
    index = RecallIndex(vault)
    index.refresh()
    (vault / "n1.md").write_text(note("Note 1", "kafka only"), encoding="utf-8")
    _touch_later(vault / "n1.md")
    index.refresh(only=["n1.md"])
    assert index._pending
    statements: list[str] = []
    con = index._connection(create=False)
    assert con is not None
    con.set_trace_callback(statements.append)
    first = index.df(["kafka", "gamma", "text"])
    assert first == {"kafka": 1, "gamma": 7, "text": 7} and any("postings" in s for s in statements)
    statements.clear()
    assert index.df(["gamma", "kafka", "text"]) == first
    assert statements and not any("postings" in s for s in statements)  # the terms' counts only

    other = RecallIndex(vault)  # another process saves n1 as it is now, and n2 gone
    (vault / "n2.md").unlink()
    other.load()
    other.refresh()
    statements.clear()
    assert index.df(["kafka", "gamma", "text"]) == {"kafka": 1, "gamma": 6, "text": 6}  # n2 is gone for it
    assert any("postings" in s for s in statements)  # the file changed: read again
    index.save()
    assert index.df(["kafka", "gamma", "text"]) == other.df(["kafka", "gamma", "text"]) == {
        "kafka": 1, "gamma": 6, "text": 6}


def test_a_save_with_nothing_pending_writes_nothing_and_waits_for_no_lock(make_vault) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"gamma {i}") for i in range(3)})
    index = RecallIndex(vault)
    index.refresh()
    before = (index.path.stat().st_mtime_ns, index.saved_at())
    other = sqlite3.connect(index.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of its own save
    try:
        assert index.try_save() and index.save_error is None  # before: "database is locked" after 1 s
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert (index.path.stat().st_mtime_ns, index.saved_at()) == before


def test_a_load_error_is_not_reported_as_a_save_error(make_vault) -> None:
    vault, _ = make_vault({"a.md": note("Alpha", "kafka")})
    first = RecallIndex(vault)
    first.refresh()
    first.close()
    for suffix in ("-wal", "-shm"):
        first.path.with_name(first.path.name + suffix).unlink(missing_ok=True)
    first.path.write_bytes(b"not a database at all" * 100)
    index = RecallIndex(vault)
    assert not index.load()
    assert "unreadable" in (index.load_error or "") and index.save_error is None
    stats = index.refresh()
    assert "save_error" not in stats and stats["changed"] == 1  # the save that rebuilt it went well
    again = RecallIndex(vault)
    assert again.load() and again.load_error is None


def test_a_version_9_file_is_read_as_it_is_and_upgraded_in_place_by_the_next_save(make_vault, tmp_path) -> None:
    """Version 9 kept each note's weights beside its term ids; nothing read them. Version 10 reads
    such a file without writing to it (a read never writes) and the next save drops the column, so
    an upgrade is no rebuild; the counts and postings are those of a fresh build."""
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"kafka{i % 3} gamma {i}") for i in range(12)})
    built = RecallIndex(vault)
    built.refresh()
    built.close()
    con = sqlite3.connect(built.path, isolation_level=None)
    con.execute("ALTER TABLE postings ADD COLUMN weights BLOB NOT NULL DEFAULT x''")  # as version 9 made it
    con.execute("UPDATE meta SET value = '9' WHERE key = 'version'")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    raw = built.path.read_bytes()
    terms = ["kafka0", "kafka1", "gamma", "nothing"]

    old = RecallIndex(vault)
    assert old.load() and old.df(terms) == {"kafka0": 4, "kafka1": 4, "gamma": 12, "nothing": 0}
    saved = postings(old)
    old.close()
    assert built.path.read_bytes() == raw  # read, not written

    (vault / "n0.md").write_text(note("Note 0", "kafka1 only"), encoding="utf-8")
    _touch_later(vault / "n0.md")
    index = RecallIndex(vault)
    assert index.load() and index.refresh()["changed"] == 1 and not index._pending
    con = sqlite3.connect(index.path)
    assert [r[1] for r in con.execute("PRAGMA table_info(postings)")] == ["note", "terms"]
    assert con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0] == str(INDEX_VERSION)
    con.close()
    assert saved["kafka0"] - postings(index)["kafka0"] == {"n0.md"}
    fresh_vault = tmp_path / "fresh"
    shutil.copytree(vault, fresh_vault, ignore=shutil.ignore_patterns(".memory_hub"))
    fresh = RecallIndex(fresh_vault)
    fresh.refresh()
    assert postings(index) == postings(fresh) and index.df(terms) == fresh.df(terms)
