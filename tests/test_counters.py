"""Access and useful counts live in the note's frontmatter: body and key order untouched."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import time
from pathlib import Path

import pytest

from memory_hub.config import index_dir
from memory_hub.vault import frontmatter
from memory_hub.vault.counters import CounterError, recent_reads, record_access, record_useful

NOTE = """---
title: Cache invalidation
# a person's comment stays
tags: [deploy, cdn]
description: Purge after the switch.
zeta: last
---

# Cache invalidation

Body with trailing spaces\x20\x20
and a --- line
---
"""


def _age(*paths: Path, seconds: float = 60.0) -> None:
    """Make notes look written a while ago: a note modified in the last seconds may be mid-save."""
    past = time.time() - seconds
    for p in paths:
        os.utime(p, (past, past))


def _keys(text: str) -> list[str]:
    raw, _, _ = frontmatter.split(text)
    return [line.split(":")[0] for line in raw.splitlines() if line and not line.startswith(("#", " "))]


def test_access_count_changes_only_its_line(tmp_path: Path) -> None:
    (tmp_path / "cache.md").write_text(NOTE, encoding="utf-8")
    _age(tmp_path / "cache.md")
    assert record_access(tmp_path, "cache.md") == 1
    assert record_access(tmp_path, "cache.md") == 2
    text = (tmp_path / "cache.md").read_text(encoding="utf-8")
    assert frontmatter.parse(text).data["access_count"] == 2
    assert frontmatter.split(text)[1] == frontmatter.split(NOTE)[1]  # body byte for byte
    assert _keys(text) == ["title", "tags", "description", "zeta", "access_count"]
    assert "# a person's comment stays" in text
    assert "cache.md" in recent_reads(tmp_path)


def test_useful_count_and_survival_of_index_deletion(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(NOTE, encoding="utf-8")
    (tmp_path / "b.md").write_text("no frontmatter here\n", encoding="utf-8")
    _age(tmp_path / "a.md", tmp_path / "b.md")
    assert record_useful(tmp_path, ["a.md", "b.md", "a.md"]) == {"a.md": 1, "b.md": 1}
    shutil.rmtree(index_dir(tmp_path), ignore_errors=True)
    assert record_useful(tmp_path, ["a.md"]) == {"a.md": 2}
    b = (tmp_path / "b.md").read_text(encoding="utf-8")
    assert b.endswith("no frontmatter here\n") and frontmatter.parse(b).data == {"useful_count": 1}


def test_bad_targets_are_refused_and_never_created(tmp_path: Path) -> None:
    (tmp_path / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    for bad in ("../outside.md", "/etc/passwd", "missing.md", "image.png", ".memory_hub/x.md", "broken.md"):
        with pytest.raises(CounterError):
            record_access(tmp_path, bad)
    assert not (tmp_path / "missing.md").exists()
    assert record_useful(tmp_path, ["missing.md", "../x.md"]) == {}
    assert (tmp_path / "broken.md").read_text(encoding="utf-8").startswith("---\ntitle: [unclosed")


def _bump_many(vault: str, n: int) -> None:
    for _ in range(n):
        record_access(Path(vault), "cache.md")


def test_concurrent_writers_lose_no_count(tmp_path: Path) -> None:
    (tmp_path / "cache.md").write_text(NOTE, encoding="utf-8")
    _age(tmp_path / "cache.md")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_bump_many, args=(str(tmp_path), 15)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    text = (tmp_path / "cache.md").read_text(encoding="utf-8")
    assert frontmatter.parse(text).data["access_count"] == 30


def test_a_note_being_edited_is_not_rewritten_and_its_count_waits(tmp_path: Path) -> None:
    note = tmp_path / "cache.md"
    note.write_text(NOTE, encoding="utf-8")  # just saved by a person: maybe still mid-save
    assert record_access(tmp_path, "cache.md") == 1
    assert note.read_text(encoding="utf-8") == NOTE  # untouched
    _age(note)  # the editor is done
    assert record_access(tmp_path, "cache.md") == 2  # the parked increment lands with this one
    assert frontmatter.parse(note.read_text(encoding="utf-8")).data["access_count"] == 2


def test_pending_increments_are_flushed_when_quiet(tmp_path: Path) -> None:
    from memory_hub.vault.counters import flush_pending

    note = tmp_path / "cache.md"
    note.write_text(NOTE, encoding="utf-8")
    record_access(tmp_path, "cache.md")
    record_useful(tmp_path, ["cache.md"])
    assert flush_pending(tmp_path) == {}  # still too fresh: stays parked
    _age(note)
    assert flush_pending(tmp_path) == {"cache.md": 2}
    data = frontmatter.parse(note.read_text(encoding="utf-8")).data
    assert (data["access_count"], data["useful_count"]) == (1, 1)


def _append_in_place(path: str, n: int) -> None:
    for i in range(n):
        with open(path, "a", encoding="utf-8") as fh:  # how many editors save: in place
            fh.write(f"person line {i}\n")
        time.sleep(0.002)


def test_counting_never_loses_a_persons_in_place_edits(tmp_path: Path) -> None:
    note = tmp_path / "cache.md"
    note.write_text(NOTE, encoding="utf-8")
    _age(note)
    ctx = multiprocessing.get_context("fork")
    writer = ctx.Process(target=_append_in_place, args=(str(note), 200))
    writer.start()
    while "person line 0" not in note.read_text(encoding="utf-8"):  # the person is now typing
        time.sleep(0.001)
    while writer.is_alive():
        try:
            record_access(tmp_path, "cache.md")
        except CounterError:
            pass
    writer.join(30)
    text = note.read_text(encoding="utf-8")
    assert all(f"person line {i}\n" in text for i in range(200))
