"""Recall's index filled from the notes a sync parsed (``sync.NoteHook``) equals the one it builds
by reading every file itself; the hook never changes the SQLite index."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from recall_contents import contents

from memory_hub.config import template_dir
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.retrieval.recall_index import RecallIndex
from memory_hub.vault.walk import stat_map


def _vault(root: Path, n: int) -> Path:
    shutil.copytree(template_dir(), root)
    (root / "bulk").mkdir()
    for i in range(n):
        (root / "bulk" / f"note-{i:03d}.md").write_text(
            f"---\ntitle: Bulk note {i}\naliases: [b{i}]\ntags: [bulk, t{i % 3}]\n---\n"
            f"Shared opening line.\n\nLinks to [[note-{(i + 1) % n:03d}]]; word{i % 5} 認証 手順 deploys.\n",
            encoding="utf-8")
    (root / "bulk" / "broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    return root


def _contents(index: RecallIndex) -> tuple:
    return contents(index)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_recall_index_from_the_sync_equals_its_own_build(tmp_path: Path, workers: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_HUB_INDEX_WORKERS", workers)
    monkeypatch.setenv("MEMORY_HUB_PARALLEL_FROM", "10")
    own_vault = _vault(tmp_path / "own", 40)
    hooked_vault = tmp_path / "hooked"
    shutil.copytree(own_vault, hooked_vault)

    sync(own_vault, progress=False)
    own = RecallIndex(own_vault)
    own.refresh()

    hooked = RecallIndex(hooked_vault)
    parsed: list[str] = []

    def take(stat, found) -> None:  # noqa: ANN001 - as the hook is called
        parsed.append(stat.path)
        hooked.take(stat, found)

    derive = hooked.note_hook()[0]
    sync(hooked_vault, progress=False, note_hook=(derive, take))
    walked = {p: st for p, st in stat_map(hooked_vault).items() if p.lower().endswith(".md")}
    assert len(walked) > 40 and sorted(parsed) == sorted(walked)  # every note handed over, once
    # recall's index holds exactly those notes, at the stamps the walk saw: nothing is left to read
    assert hooked.data.files == walked and set(hooked.data.notes) == set(walked)
    stats = hooked.refresh()
    assert stats == {"changed": 0, "removed": 0, "notes": len(walked)}  # and nothing was re-read
    assert _contents(hooked) == _contents(own)

    # the SQLite index is the one a sync without the hook builds
    def notes(v: Path) -> list[tuple]:
        return [tuple(r) for r in Store(v).conn.execute(
            "SELECT path, title, description, kind, tags, hash FROM notes ORDER BY path")]
    assert notes(hooked_vault) == notes(own_vault)

    # saved and loaded back whole
    again = RecallIndex(hooked_vault)
    assert again.load() and _contents(again) == _contents(own)


def test_memory_hub_index_walks_the_vault_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``memory-hub index`` hands recall's index the sync's walk (``SyncReport.walked``): the vault's
    folders are listed once per run, cold and warm, and recall's index still ends up with every
    note (as its own walk would have found)."""
    import json

    from memory_hub import cli
    from memory_hub.vault import walk as walk_module

    vault = _vault(tmp_path / "v", 12)
    walks: list[str] = []
    folders = walk_module._folders

    def counted(root, skipped):  # noqa: ANN001, ANN202 - the real walk, counted
        walks.append(str(root))
        return folders(root, skipped)

    monkeypatch.setattr(walk_module, "_folders", counted)
    for run in ("cold", "warm"):
        walks.clear()
        assert cli.main(["--vault", str(vault), "index", "--no-vectors", "--json"]) == 0, run
        out = json.loads(capsys.readouterr().out)
        assert len(walks) == 1, (run, walks)
    monkeypatch.setattr(walk_module, "_folders", folders)
    notes = {p for p in walk_module.stat_map(vault) if p.endswith(".md")}
    index = RecallIndex(vault)
    assert index.load() and set(index.data.files) == notes and set(index.data.notes) <= notes
    assert len(index.data.notes) >= len(notes) - 1 and out["recall"]["changed"] == 0  # (broken.md may not parse)
