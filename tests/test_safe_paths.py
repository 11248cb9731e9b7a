"""Nothing reads or writes outside the vault: every entry point against a symlink out, a loop and ``..``."""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from memory_hub.capture.autocommit import AutocommitError, autocommit
from memory_hub.capture.braindump import CaptureError, braindump
from memory_hub.dream.edits import Edit, StepResult, apply
from memory_hub.hooks import claude_code
from memory_hub.index.sync import sync
from memory_hub.server import tools
from memory_hub.server.state import ServerState
from memory_hub.vault.walk import OutsideVault, walk

SECRET = "OUTSIDE-THE-VAULT do not copy me"
TRICKS = ("symlink-out", "loop", "dotdot")


@pytest.fixture
def place(tmp_path: Path):
    """A git vault with a few notes, and a folder beside it that must never be read or written."""
    vault = tmp_path / "vault"
    outside = tmp_path / "outside"
    (vault / "templates").mkdir(parents=True)
    (vault / "notes").mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text(f"---\ntitle: Secret\n---\n{SECRET}\n", encoding="utf-8")
    (outside / "daily.md").write_text(f"# {{{{date}}}}\n\n{SECRET}\n", encoding="utf-8")
    (outside / "gitignore").write_text("# the outside file\n", encoding="utf-8")
    (vault / "home.md").write_text("# Home\n\nSee [[notes/a]].\n", encoding="utf-8")
    (vault / "notes" / "a.md").write_text("# A\n\nplain note\n", encoding="utf-8")
    (vault / ".gitignore").write_text(".memory_hub/\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=vault, check=True)
    subprocess.run(["git", "add", "-A"], cwd=vault, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "start"], cwd=vault, check=True)
    return vault, outside


def outside_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["daily.md", "gitignore", "secret.md"]
    assert (outside / "gitignore").read_text(encoding="utf-8") == "# the outside file\n"
    assert SECRET in (outside / "secret.md").read_text(encoding="utf-8")


def never_copied(vault: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(vault):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            if p.is_file() and not p.is_symlink():
                assert SECRET.encode() not in p.read_bytes(), f"{p} holds text from outside the vault"


def trick(vault: Path, outside: Path, rel: str, kind: str, target: str = "secret.md") -> str:
    """Make vault/rel a trap of ``kind``; returns the path to hand the entry point."""
    link = vault / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink-out":
        link.symlink_to(outside / target)
    elif kind == "loop":
        link.symlink_to(link.name)  # points at itself
    else:  # a relative symlink climbing out with ..
        depth = len(Path(rel).parts) - 1
        link.symlink_to(Path(*([".."] * (depth + 1)), "outside", target))
    return rel


def trap_folder(vault: Path, outside: Path, rel: str, kind: str) -> None:
    """Make the folder vault/rel a trap of ``kind`` (leading to ``outside`` itself)."""
    link = vault / rel
    if kind == "loop":
        link.symlink_to(link.name)
    else:
        up = Path(*([".."] * len(Path(rel).parts)), "outside")
        link.symlink_to(outside if kind == "symlink-out" else up, target_is_directory=True)


# -- reads ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", TRICKS)
def test_mcp_read_note(place, kind: str) -> None:
    vault, outside = place
    rel = trick(vault, outside, "notes/trap.md", kind)
    sync(vault)
    state = ServerState.open(vault)
    state.models_ready.set()
    for path in (rel, "../outside/secret.md", "notes/../../outside/secret.md", str(outside / "secret.md")):
        with pytest.raises(tools.ToolError):
            tools.read_note(state, path)
    outside_untouched(outside)


@pytest.mark.parametrize("kind", TRICKS)
def test_index_walk_skips_and_records(place, kind: str) -> None:
    vault, outside = place
    rel = trick(vault, outside, "notes/trap.md", kind)
    (vault / "dir-loop").symlink_to(".")  # a folder loop too
    skipped: list = []
    found = {f.path for f in walk(vault, skipped)}
    assert rel not in found and {"home.md", "notes/a.md"} <= found
    assert rel in {s.path for s in skipped}
    report = sync(vault)
    assert rel not in report.added
    never_copied(vault)


@pytest.mark.parametrize("kind", TRICKS)
def test_safe_io_primitives(place, kind: str) -> None:
    from memory_hub.vault import safe_io

    vault, outside = place
    rel = trick(vault, outside, "notes/trap.md", kind)
    with pytest.raises((OutsideVault, OSError)):
        safe_io.read_bytes(vault, rel)
    with pytest.raises((OutsideVault, OSError)):
        safe_io.replace_file(vault, rel, b"x")
    with pytest.raises((OutsideVault, OSError)):
        safe_io.append_bytes(vault, rel, b"x")
    with pytest.raises((OutsideVault, OSError)):
        safe_io.unlink_file(vault, rel)
    for bad in ("../outside/secret.md", "/etc/passwd", "", "a\x00b"):
        with pytest.raises(OutsideVault):
            safe_io.read_bytes(vault, bad)
    # A folder on the way that leads out: refused for a new file as for an existing one.
    (vault / "away").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OutsideVault):
        safe_io.create_file(vault, "away/new.md", b"x")
    outside_untouched(outside)


# -- writes and the files they read -----------------------------------------------------------------

@pytest.mark.parametrize("kind", TRICKS)
def test_daily_note_template(place, kind: str) -> None:
    vault, outside = place
    (vault / "templates").rmdir()
    if kind == "dotdot":  # the whole templates/ folder leads out with ../
        (vault / "templates").symlink_to(Path("..", "outside"), target_is_directory=True)
    else:
        trick(vault, outside, "templates/daily.md", kind, target="daily.md")
    result = braindump(vault, "Call the vendor about the renewal", fetch_urls=False, today=_dt.date(2026, 12, 1))
    assert (vault / result.path).is_file()  # the capture itself is saved
    assert result.daily is None and any("daily note was not updated" in w for w in result.warnings), result
    assert not (vault / "daily" / "2026-12-01.md").exists()
    never_copied(vault)  # before: the outside template's text landed in the daily note
    outside_untouched(outside)


@pytest.mark.parametrize("kind", TRICKS)
def test_capture_targets(place, kind: str) -> None:
    vault, outside = place
    trap_folder(vault, outside, "inbox", kind)
    with pytest.raises(CaptureError):
        braindump(vault, "a capture that must not leave the vault", fetch_urls=False, link_daily=False)
    with pytest.raises(CaptureError):
        braindump(vault, "a capture aimed up", folder="../outside", fetch_urls=False, link_daily=False)
    state = ServerState.open(vault)
    with pytest.raises(tools.ToolError):
        tools.capture(state, "captured over MCP")
    outside_untouched(outside)


@pytest.mark.parametrize("kind", TRICKS)
def test_transcript_save_hook(place, tmp_path: Path, kind: str) -> None:
    vault, outside = place
    trap_folder(vault, outside, "inbox", kind)
    transcript = tmp_path / "t.jsonl"
    with open(transcript, "w", encoding="utf-8") as fh:
        for i in range(4):
            fh.write(json.dumps({"type": "assistant", "message": {"role": "assistant", "content":
                                 f"Answer {i}: the deploy runs apply_secrets before scaling up the idle colour. " * 3}})
                     + "\n")
    from memory_hub.hooks.save import save_tail

    out = save_tail(vault, {"hook_event_name": "Stop", "session_id": "s1", "transcript_path": str(transcript)})
    assert out["path"] is None and "not saved" in out.get("reason", ""), out
    outside_untouched(outside)


@pytest.mark.parametrize("kind", TRICKS)
def test_autocommit_gitignore(place, kind: str) -> None:
    vault, outside = place
    (vault / ".gitignore").unlink()
    subprocess.run(["git", "commit", "-q", "-am", "drop .gitignore"], cwd=vault, check=True)
    trick(vault, outside, ".gitignore", kind, target="gitignore")
    (vault / "notes" / "b.md").write_text("# B\n", encoding="utf-8")
    with pytest.raises(AutocommitError, match="gitignore|symlink|leaves the vault"):
        autocommit(vault)  # before: .memory_hub/ was appended to the outside file
    outside_untouched(outside)


@pytest.mark.parametrize("kind", TRICKS)
def test_dream_edits(place, kind: str) -> None:
    vault, outside = place
    rel = trick(vault, outside, "notes/trap.md", kind)
    before = (vault / "notes" / "a.md").read_bytes()
    st = (vault / "notes" / "a.md").stat()
    legit = Edit("notes/a.md", "# A\n\nfolded\n", expected_mtime_ns=st.st_mtime_ns)
    for bad in (Edit(rel, "rewritten by dream\n"), Edit(rel, None), Edit("../outside/secret.md", "x"),
                Edit("../outside/new.md", "x", create=True)):
        step = StepResult("test", edits=[legit, bad])
        assert apply(vault, step, "dream: test") is None  # a step is all or nothing: this one is refused
        assert step.skipped and "planned again" in step.skipped[0], step.skipped
        assert (vault / "notes" / "a.md").read_bytes() == before
        outside_untouched(outside)
    step = StepResult("test", edits=[legit])
    assert apply(vault, step, "dream: test") is not None  # the legitimate edit alone lands
    assert (vault / "notes" / "a.md").read_text(encoding="utf-8").endswith("folded\n")


def test_read_hook_ignores_paths_leading_out(place) -> None:
    from memory_hub.vault import usage

    vault, outside = place
    for kind, rel in zip(TRICKS, ("notes/t1.md", "notes/t2.md", "notes/t3.md"), strict=True):
        trick(vault, outside, rel, kind)
        claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": str(vault),
                            "tool_input": {"file_path": rel}}, vault)
    claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": str(vault),
                        "tool_input": {"file_path": "../outside/secret.md"}}, vault)
    outside_untouched(outside)
    assert usage.unpublished(vault)[0] == 0  # nothing counted for paths that lead out
    claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": str(vault),
                        "tool_input": {"file_path": "notes/a.md"}}, vault)
    assert usage.unpublished(vault)[0] == 1  # a real note is


@pytest.mark.parametrize("kind", TRICKS)
def test_usage_log_folder_leading_out(place, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_hub.index import usage as folded
    from memory_hub.index.store import Store
    from memory_hub.vault import usage

    vault, outside = place
    shutil.rmtree(vault / ".git")  # no journal: events go to .memory-hub/usage/ directly
    (vault / ".memory-hub").mkdir()
    trap_folder(vault, outside, ".memory-hub/usage", kind)
    (outside / "planted.jsonl").write_text('{"ts": 1, "event": "read", "path": "home.md"}\n', encoding="utf-8")
    with pytest.raises((OutsideVault, OSError)):
        usage.record_read(vault, "home.md")
    store = Store(vault)
    sync(vault, store=store)
    assert folded.for_note(store, "home.md") == folded.NONE  # a log outside the vault is not folded
    (outside / "planted.jsonl").unlink()
    outside_untouched(outside)


def test_stat_map_is_the_walk(tmp_path: Path) -> None:
    """``stat_map`` (what a sync compares) holds exactly what ``walk`` yields, in its order, and
    skips the same things: a symlink out, a loop, a symlinked folder inside seen once, dot-folders."""
    from memory_hub.vault.walk import stat_map, walk

    vault = tmp_path / "vault"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("no", encoding="utf-8")
    for rel in ("a.md", "b/c.md", "b/d/e.md", "b/z.png", "f/g.md", ".git/x.md", "h/.hidden.md"):
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(rel, encoding="utf-8")
    (vault / "out").symlink_to(outside)
    (vault / "b" / "loop").symlink_to(vault / "b")
    (vault / "linked").symlink_to(vault / "f")
    (vault / "note-link.md").symlink_to(vault / "a.md")
    walked, mapped = [], []
    seen = stat_map(vault, mapped)
    listed = list(walk(vault, walked))
    assert list(seen) == [st.path for st in listed]
    assert list(seen.values()) == [(st.mtime_ns, st.size) for st in listed]
    assert walked == mapped and {s.path for s in walked} == {"out"}
    assert "a.md" in seen and "note-link.md" in seen and ".git/x.md" not in seen and "h/.hidden.md" not in seen
    assert ("f/g.md" in seen) != ("linked/g.md" in seen)  # one folder, walked once
