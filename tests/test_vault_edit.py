"""The library under the write tools: section edits, link rewriting, and the guards (real git repos)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from memory_hub.config import index_dir
from memory_hub.locks import file_lock
from memory_hub.vault import editing
from memory_hub.vault.edit import edit_body, update_note
from memory_hub.vault.editing import HashMismatch, WriteRefused, note_hash
from memory_hub.vault.journal import pending
from memory_hub.vault.links import Resolver
from memory_hub.vault.move import move_note, relink
from memory_hub.vault.trash import restore_note, trash_note


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=vault, capture_output=True, text=True, check=True).stdout


def make_repo(root: Path, files: dict[str, str | bytes], commit: bool = True) -> Path:
    files = {".gitignore": ".memory_hub/\n", **files}
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    git(root, "init", "-q", "-b", "main")
    if commit:
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "init")
    return root


def snapshot(vault: Path) -> dict[str, bytes]:
    return {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*")
            if p.is_file() and ".git" not in p.parts and ".memory_hub" not in p.parts}


def h(vault: Path, rel: str) -> str:
    return note_hash((vault / rel).read_bytes())


# -- section edits ----------------------------------------------------------------------------------

BODY = "# T\n\nIntro.\n\n## Steps\n\n- one\n\n### Detail\n\ndeep\n\n## Notes\n\ntext\n\n```\n## Not a heading\n```\n"


def test_section_edits() -> None:
    assert edit_body(BODY, "- two", "append", "Steps")[0] == BODY.replace("deep\n\n## Notes", "deep\n\n- two\n\n## Notes")
    # Replacing a section replaces its subsections too; the heading and what follows stay.
    replaced, _ = edit_body(BODY, "- only", "replace", "## steps")
    assert replaced == "# T\n\nIntro.\n\n## Steps\n\n- only\n\n## Notes\n\ntext\n\n```\n## Not a heading\n```\n"
    appended, _ = edit_body(BODY, "- three", "append", "Detail")
    assert "deep\n\n- three\n\n## Notes" in appended  # a paragraph then a list: a blank line between
    created, made = edit_body(BODY, "new text", "append", "Consequences")
    assert made and created.endswith("```\n\n## Consequences\n\nnew text\n")
    whole, _ = edit_body(BODY, "all new", "replace", None)
    assert whole == "all new\n"
    with pytest.raises(WriteRefused, match="no heading 'Not a heading'"):
        edit_body(BODY, "x", "replace", "Not a heading")  # inside a code block: not a heading
    with pytest.raises(WriteRefused, match="appears 2 times"):
        edit_body("## A\n\nx\n\n## A\n\ny\n", "z", "replace", "A")


def test_update_keeps_crlf_bom_and_frontmatter(tmp_path: Path) -> None:
    text = "\ufeff---\r\ntitle: N\r\nupdated: 2020-01-01\r\n---\r\n# N\r\n\r\nbody\r\n"
    vault = make_repo(tmp_path, {"n.md": text})
    result = update_note(vault, "n.md", "more", h(vault, "n.md"))
    data = (vault / "n.md").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf---\r\ntitle: N\r\nupdated: 20") and b"2020-01-01" not in data
    assert data.endswith(b"body\r\n\r\nmore\r\n") and b"\n" not in data.replace(b"\r\n", b"")
    assert result.hash == note_hash(data) and git(vault, "status", "--porcelain") == ""
    with pytest.raises(HashMismatch) as info:
        update_note(vault, "n.md", "again", result.previous_hash)
    assert info.value.current == result.hash


# -- link rewriting ---------------------------------------------------------------------------------

def test_relink_keeps_forms_and_never_steals() -> None:
    paths = ["a/x.md", "other/y.md", "notes/src.md", "My Note.md"]
    before = Resolver(paths)
    after = Resolver(["y.md", "other/y.md", "notes/src.md", "My Note.md"])
    text = ("[[x]] [[a/x|A]] [[y]] [m](../a/x.md) [e](../a/x%20.md) [r](/a/x.md) `[[x]]` [s](../My%20Note.md)\n")
    out, n = relink(text, "notes/src.md", "notes/src.md", before, after, "a/x.md", "y.md")
    # [[x]] and [[a/x]] follow the note to y.md; [[y]] must keep reaching other/y.md, not the newcomer.
    assert out == "[[y]] [[y|A]] [[other/y]] [m](../y.md) [e](../a/x%20.md) [r](/y.md) `[[x]]` [s](../My%20Note.md)\n"
    assert n == 5


def test_relink_encodes_like_the_original() -> None:
    before = Resolver(["a/x.md", "src.md"])
    after = Resolver(["new folder/x y.md", "src.md"])
    text = "[p](a/x.md) [q](<a/x.md>) [[a/x]]\n"
    out, _ = relink(text, "src.md", "src.md", before, after, "a/x.md", "new folder/x y.md")
    assert out == "[p](new%20folder/x%20y.md) [q](<new folder/x y.md>) [[new folder/x y]]\n"


# -- move, trash, restore ---------------------------------------------------------------------------

def test_move_of_an_uncommitted_note_with_glob_characters(tmp_path: Path) -> None:
    vault = make_repo(tmp_path, {"home.md": "# Home\n\n[[draft [v2]]]\n"})
    # Captured a moment ago and never committed; its name is a pathspec glob if not taken literally.
    (vault / "inbox").mkdir()
    (vault / "inbox/draft [v2].md").write_text("# Draft\n", encoding="utf-8")
    result = move_note(vault, "inbox/draft [v2].md", "drafts/", expected_hash=h(vault, "inbox/draft [v2].md"))
    assert result.new == "drafts/draft [v2].md" and (vault / result.new).is_file()
    assert git(vault, "status", "--porcelain") == ""
    assert "drafts/draft [v2].md" in git(vault, "show", "--name-only", "--format=", "HEAD")


def test_a_refused_commit_leaves_nothing_changed(tmp_path: Path) -> None:
    vault = make_repo(tmp_path, {"a.md": "# A\n", "b.md": "# B\n\n[[a]]\n"})
    old = time.time() - 3600
    for p in vault.glob("*.md"):
        os.utime(p, (old, old))
    hook = vault / ".git/hooks/pre-commit"
    hook.write_text("#!/bin/sh\necho 'policy says no' >&2\nexit 1\n")
    hook.chmod(0o755)
    before, head = snapshot(vault), git(vault, "rev-parse", "HEAD")
    with pytest.raises(WriteRefused, match="policy says no"):
        move_note(vault, "a.md", "c.md")
    with pytest.raises(WriteRefused, match="policy says no"):
        trash_note(vault, "a.md")
    with pytest.raises(WriteRefused, match="policy says no"):
        update_note(vault, "b.md", "x", h(vault, "b.md"))
    assert snapshot(vault) == before and git(vault, "rev-parse", "HEAD") == head
    assert git(vault, "status", "--porcelain") == "" and not pending(vault)


def test_trash_moves_the_note_itself_so_no_save_is_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_hub.vault import safe_io

    vault = make_repo(tmp_path, {"a.md": "# A\n\nfirst\n", "b.md": "# B\n"})
    old = time.time() - 3600
    for p in vault.glob("*.md"):
        os.utime(p, (old, old))
    real_move = safe_io.move_file

    def save_just_before(vault_: Path, src: str, dst: str, **kw: object) -> None:
        if src == "a.md":  # a person's save lands after the check, before the move
            (vault / "a.md").write_text("# A\n\nfirst\nsecond, typed meanwhile\n", encoding="utf-8")
        real_move(vault_, src, dst, **kw)

    monkeypatch.setattr(safe_io, "move_file", save_just_before)
    with pytest.raises(WriteRefused, match="changed while it was being deleted; the note is back"):
        trash_note(vault, "a.md")
    assert (vault / "a.md").read_text() == "# A\n\nfirst\nsecond, typed meanwhile\n"
    assert not list(vault.glob(".trash/**/*.md"))  # the reserved trash name went back with it
    monkeypatch.setattr(safe_io, "move_file", real_move)
    # A writer that still holds the file open writes into the trashed note, which restore brings back.
    with open(vault / "b.md", "a", encoding="utf-8") as held:
        result = trash_note(vault, "b.md")
        held.write("written after the delete\n")
    assert not (vault / "b.md").exists() and "written after" in (vault / result.trash_path).read_text()
    restore_note(vault, "b.md")
    assert (vault / "b.md").read_text() == "# B\nwritten after the delete\n"


def test_no_write_without_a_branch_a_repository_or_the_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vault = make_repo(tmp_path / "v", {"a.md": "# A\n"})
    before = snapshot(vault)
    git(vault, "checkout", "-q", "--detach")
    with pytest.raises(WriteRefused, match="detached.*check out a branch"):
        update_note(vault, "a.md", "x", h(vault, "a.md"))
    git(vault, "checkout", "-q", "main")
    (vault / ".git/MERGE_HEAD").write_text(git(vault, "rev-parse", "HEAD"))
    with pytest.raises(WriteRefused, match="a merge is in progress"):
        trash_note(vault, "a.md")
    (vault / ".git/MERGE_HEAD").unlink()
    monkeypatch.setattr(editing, "LOCK_WAIT_S", 0.2)
    with file_lock(index_dir(vault) / "dream.lock"), pytest.raises(WriteRefused, match="dream pass"):
        move_note(vault, "a.md", "b.md")
    assert snapshot(vault) == before
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.md").write_text("# A\n")
    with pytest.raises(WriteRefused, match="not a git repository"):
        update_note(plain, "a.md", "x", h(plain, "a.md"))


def test_ignored_trash_and_a_taken_path(tmp_path: Path) -> None:
    vault = make_repo(tmp_path, {".gitignore": ".memory_hub/\n.trash/\n", "a.md": "# A\n"})
    old = time.time() - 3600
    os.utime(vault / "a.md", (old, old))
    first = trash_note(vault, "a.md")
    assert first.commit and (vault / ".trash/a.md").read_text() == "# A\n"
    assert "D\ta.md" in git(vault, "show", "--name-status", "--format=", "HEAD")  # the copy stays local
    (vault / "a.md").write_text("# A again\n")
    git(vault, "add", "a.md")
    git(vault, "commit", "-qm", "a again")
    os.utime(vault / "a.md", (old, old))
    second = trash_note(vault, "a.md")
    assert second.trash_path == ".trash/a (2).md"
    (vault / "a.md").write_text("# someone else\n")
    with pytest.raises(WriteRefused, match="already exists at a.md; pass new_path"):
        restore_note(vault, "a.md")
    restored = restore_note(vault, ".trash/a.md", new_path="old-a.md")
    assert restored.path == "old-a.md" and (vault / "old-a.md").read_text() == "# A\n"
    assert not (vault / ".trash/a.md").exists() and (vault / ".trash/a (2).md").exists()


def test_a_move_killed_half_way_is_completed_by_the_next_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_hub.vault import journal

    vault = make_repo(tmp_path, {"a.md": "# A\n", "b.md": "# B\n\n[[a]]\n", "c.md": "# C\n"})
    old = time.time() - 3600
    for p in vault.glob("*.md"):
        os.utime(p, (old, old))
    real = journal._commit

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # the process dies after writing the files, before the commit

    monkeypatch.setattr(journal, "_commit", killed)
    with pytest.raises(KeyboardInterrupt):
        move_note(vault, "a.md", "z.md")
    assert pending(vault) and (vault / "z.md").exists() and "[[z]]" in (vault / "b.md").read_text()
    monkeypatch.setattr(journal, "_commit", real)
    update_note(vault, "c.md", "more", h(vault, "c.md"))  # the next write settles the move first
    assert not pending(vault)
    subjects = git(vault, "log", "--format=%s", "-2").splitlines()
    assert subjects == ["mcp update_note: c.md (appended to the end)", "mcp move_note: a.md → z.md"]
    assert git(vault, "status", "--porcelain") == ""


def test_cli_note_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from memory_hub.cli import main

    vault = make_repo(tmp_path, {"a.md": "# A\n\n## Log\n\n- one\n", "b.md": "# B\n\nsee [[a#Log]]\n"})
    old = time.time() - 3600
    for p in vault.glob("*.md"):
        os.utime(p, (old, old))

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["--vault", str(vault), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run("note", "hash", "a.md")
    assert code == 0 and out.strip() == h(vault, "a.md")
    code, out, _ = run("note", "update", "a.md", "- two", "--heading", "Log", "--hash", out.strip(), "--json")
    assert code == 0 and json.loads(out)["commit"] and (vault / "a.md").read_text().endswith("- one\n- two\n")
    code, out, err = run("note", "update", "a.md", "x", "--hash", "0" * 32)
    assert code != 0 and "changed since it was read" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run("note", "move", "a.md", "notes/")
    assert code == 0 and "moved a.md → notes/a.md" in out
    assert "see [[a#Log]]" in (vault / "b.md").read_text()  # the bare name still finds it: left as written
    code, out, _ = run("note", "delete", "notes/a.md")
    assert code == 0 and ".trash/notes/a.md" in out and "b.md" in out
    code, out, _ = run("note", "restore", "notes/a.md")
    assert code == 0 and (vault / "notes/a.md").is_file()
    assert git(vault, "log", "--format=%s", "-1").strip() == "memory-hub restore_note: notes/a.md ← .trash/notes/a.md"


def test_usage_follows_a_move_a_move_back_and_a_restore_elsewhere(tmp_path: Path) -> None:
    from memory_hub.index import usage
    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync
    from memory_hub.vault.usage import record_read, record_useful

    vault = make_repo(tmp_path / "v", {"a.md": "---\naccess_count: 5\n---\n# A\n", "other.md": "# O\n"})
    old = time.time() - 3600
    for p in ("a.md", "other.md"):
        os.utime(vault / p, (old, old))
    sync(vault)
    store = Store(vault)

    def count(rel: str) -> tuple[int, int]:
        usage.fold(store, vault)
        got = usage.for_note(store, rel)
        return got.reads, got.useful

    for _ in range(2):
        record_read(vault, "a.md")
    record_useful(vault, ["a.md"])
    assert count("a.md") == (7, 1)  # 5 from its frontmatter, 2 read events
    move_note(vault, "a.md", "b.md")
    usage.carry(store, vault, "a.md", "b.md")
    sync(vault, store=store, only=["a.md", "b.md"], renamed={"a.md": "b.md"})
    assert count("b.md") == (7, 1)
    record_read(vault, "b.md")
    move_note(vault, "b.md", "a.md")
    usage.carry(store, vault, "b.md", "a.md")
    sync(vault, store=store, only=["a.md", "b.md"], renamed={"b.md": "a.md"})
    assert count("a.md") == (8, 1)  # the two reads logged at a.md before are not counted twice
    assert git(vault, "status", "--porcelain") == ""  # the baseline went to the journal, not the tracked log

    record_read(vault, "a.md")
    trash_note(vault, "a.md")
    sync(vault, store=store, only=["a.md"])
    restored = restore_note(vault, "a.md", new_path="kept/a.md")
    assert restored.moved_from == "a.md"
    sync(vault, store=store, only=["kept/a.md"])
    usage.carry(store, vault, "a.md", "kept/a.md")
    assert count("kept/a.md") == (9, 1)
    store.close()


def test_restore_leaves_an_unsafe_trash_copy_alone_and_uses_git(tmp_path: Path) -> None:
    vault = make_repo(tmp_path / "v", {"a.md": "# A\n"})
    old = time.time() - 3600
    os.utime(vault / "a.md", (old, old))
    trash_note(vault, "a.md")
    outside = tmp_path / "outside.md"
    outside.write_text("# not the vault's\n")
    (vault / ".trash/a.md").unlink()
    (vault / ".trash/a.md").symlink_to(outside)  # the trash copy swapped for a link out of the vault
    with pytest.raises(WriteRefused, match="leaves the vault"):
        restore_note(vault, ".trash/a.md")
    restored = restore_note(vault, "a.md")
    assert restored.source.startswith("git:") and (vault / "a.md").read_text() == "# A\n"
    assert any(".trash/a.md" in n and "leaves the vault" in n for n in restored.notes), restored.notes
    assert (vault / ".trash/a.md").is_symlink() and outside.read_text() == "# not the vault's\n"
    (vault / "a.md").unlink()  # removed by hand, not committed: HEAD still has it, and gives it back
    again = restore_note(vault, "a.md")
    assert again.source == f"git:{git(vault, 'rev-parse', 'HEAD').strip()[:12]}" and again.commit is None
