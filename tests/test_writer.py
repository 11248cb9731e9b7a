"""Writing notes: atomic, inside the vault only, never over an existing note."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

import pytest

from memory_hub.vault.walk import OutsideVault, safe_path
from memory_hub.vault.writer import NoteExists, create_note, replace_note, slugify, unique_note_path


def test_create_never_overwrites(tmp_path: Path) -> None:
    create_note(tmp_path, "inbox/a.md", "first\n")
    with pytest.raises(NoteExists):
        create_note(tmp_path, "inbox/a.md", "second\n")
    assert (tmp_path / "inbox" / "a.md").read_text(encoding="utf-8") == "first\n"
    assert [p.name for p in (tmp_path / "inbox").iterdir()] == ["a.md"]  # no temp files left


def test_concurrent_creates_one_wins(tmp_path: Path) -> None:
    results: list[str] = []

    def attempt(n: int) -> None:
        try:
            create_note(tmp_path, "race.md", f"writer {n}\n")
            results.append(f"ok {n}")
        except NoteExists:
            results.append("exists")

    threads = [threading.Thread(target=attempt, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.startswith("ok") for r in results) == 1
    winner = next(r for r in results if r.startswith("ok")).split()[1]
    assert (tmp_path / "race.md").read_text(encoding="utf-8") == f"writer {winner}\n"


@pytest.mark.parametrize("rel", ["../escape.md", "/etc/passwd", "a/../../x.md", ".git/config", ".memory_hub/x.md",
                                 "", "a\x00b.md"])
def test_paths_outside_the_vault_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(OutsideVault):
        create_note(tmp_path, rel, "x")
    with pytest.raises(OutsideVault):
        safe_path(tmp_path, rel)


def test_symlink_out_is_refused(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    outside = tmp_path / "outside"
    vault.mkdir()
    outside.mkdir()
    os.symlink(outside, vault / "link")
    with pytest.raises(OutsideVault):
        create_note(vault, "link/x.md", "x")
    assert not (outside / "x.md").exists()


def test_replace_checks_mtime(tmp_path: Path) -> None:
    path = create_note(tmp_path, "n.md", "v1\n")
    seen = path.stat().st_mtime_ns
    replace_note(tmp_path, "n.md", "v2\n", expected_mtime_ns=seen)
    assert path.read_text(encoding="utf-8") == "v2\n"
    os.utime(path, ns=(seen + 10_000_000_000, seen + 10_000_000_000))  # a person edited it meanwhile
    with pytest.raises(NoteExists):
        replace_note(tmp_path, "n.md", "v3\n", expected_mtime_ns=seen)
    assert path.read_text(encoding="utf-8") == "v2\n"


def test_slug_and_unique_path(tmp_path: Path) -> None:
    assert slugify("Hello, World: TLS!") == "hello-world-tls"
    assert slugify("認証エラー の 切り分け") == "認証エラー-の-切り分け"
    assert slugify("???") == "note"
    assert len(slugify("word " * 50)) <= 60
    day = dt.date(2026, 5, 8)
    first = unique_note_path(tmp_path, "inbox", "Cert chain", day)
    assert first == "inbox/2026-05-08-cert-chain.md"
    create_note(tmp_path, first, "x")
    assert unique_note_path(tmp_path, "inbox/", "Cert chain", day) == "inbox/2026-05-08-cert-chain-2.md"
    assert unique_note_path(tmp_path, "", "Top") == "top.md"
