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

from memory_hub.retrieval import recall_index
from memory_hub.retrieval.recall_index import INDEX_VERSION, RecallIndex


def note(title: str, body: str) -> str:
    return f"---\ntitle: {title}\ntags: [t]\n---\n\n{body}\n"


def _touch_later(path: Path) -> None:
    now = time.time_ns() + 10_000_000
    os.utime(path, ns=(now, now))


def _contents(index: RecallIndex) -> tuple:
    d = index.data
    return d.files, {p: vars(n) for p, n in d.notes.items()}, dict(d.postings)


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
    assert again.load() and set(again.data.notes) == {"a.md", "b.md"} and "ghost" not in again.data.postings


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
    pending = (index.df(["kafka", "gamma", "text"]), dict(index.data.postings))
    index.save()
    assert not index._pending
    assert (index.df(["kafka", "gamma", "text"]), dict(index.data.postings)) == pending
    assert pending[0] == {"kafka": 2, "gamma": 6, "text": 6}
    assert pending[1]["kafka"] == {"n1.md": 4.0, "k.md": 1.0}


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
