"""Hostile files cannot crash or stall indexing: YAML bombs, FIFOs, late NULs, skipped files in status."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from memory_hub.eval.health import pending_changes, status
from memory_hub.hooks import claude_code
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.retrieval.search import search
from memory_hub.server.state import ServerState
from memory_hub.server.watcher import Watcher
from memory_hub.vault import frontmatter
from memory_hub.vault.walk import UnreadableNote, read_note_text

# Nine references per level, nine levels: 9**9 (387 million) strings once every alias is followed.
ALIAS_BOMB = "---\n" + "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)) + "title: Bomb\n---\n\nbomb body\n"
SELF_REFERENCE = "---\ntitle: Loop\nx: &x [*x]\n---\n\nloop body quokkaloop\n"
SELF_MAPPING = "---\ny: &y {inner: *y}\n---\n\nmapping loop body\n"
MERGE_LOOP = "---\nbase: &b {k: 1}\nz: &z {<<: [*b], again: *z}\n---\n\nmerge body\n"


@pytest.mark.parametrize("text", [ALIAS_BOMB, SELF_REFERENCE, SELF_MAPPING, MERGE_LOOP])
def test_alias_tricks_are_a_reported_problem_not_a_crash(text: str) -> None:
    t0 = time.process_time()
    block = frontmatter.parse(text)  # before: MemoryError (bomb) or RecursionError (self reference)
    assert time.process_time() - t0 < 5  # generous: the bomb took minutes and gigabytes before
    assert block.body.strip().endswith("body") or "body" in block.body
    if block.problem is None:  # a merge that PyYAML resolves finitely is fine too, as long as it is plain data
        assert isinstance(block.data, dict)
    else:
        assert block.data == {}


def test_legitimate_aliases_still_work() -> None:
    text = "---\ndefaults: &d {owner: ops, tier: 2}\nservice: {<<: *d, name: api}\ntags: &t [a, b]\nalso: *t\n---\n"
    block = frontmatter.parse(text)
    assert block.problem is None
    assert block.data["service"] == {"owner": "ops", "tier": 2, "name": "api"} and block.data["also"] == ["a", "b"]


def test_index_survives_hostile_frontmatter_and_indexes_the_rest(make_vault) -> None:
    vault, store = make_vault({
        "bomb.md": ALIAS_BOMB, "loop.md": SELF_REFERENCE, "mapping.md": SELF_MAPPING,
        "fine.md": "---\ntitle: Fine\n---\n\nwombatfine text\n",
    })
    report = sync(vault, store=store)  # make_vault indexed once already; a second pass must be quiet
    assert not report.changed
    paths = {r[0] for r in store.conn.execute("SELECT path FROM notes")}
    assert paths == {"bomb.md", "loop.md", "mapping.md", "fine.md"}  # indexed from their bodies
    problems = dict(store.conn.execute("SELECT path, problem FROM problems").fetchall())
    assert "alias" in problems["bomb.md"] and "itself" in problems["loop.md"]
    assert [h.path for h in search(store, "quokkaloop", mode="lexical").hits] == ["loop.md"]
    assert [h.path for h in search(store, "wombatfine", mode="lexical").hits] == ["fine.md"]


def test_watcher_keeps_indexing_after_a_self_referencing_note(template_vault) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    state.models_ready.set()
    state.watcher = Watcher(state.vault, state.store, rescan_every=None).start()
    try:
        time.sleep(0.2)
        (vault / "loop.md").write_text(SELF_REFERENCE, encoding="utf-8")
        time.sleep(0.5)
        (vault / "later.md").write_text("# Later\n\nnumbatlater arrives after the loop\n", encoding="utf-8")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if [h.path for h in state.search("numbatlater", k=3, mode="lexical").hits] == ["later.md"]:
                break
            time.sleep(0.1)
        assert [h.path for h in state.search("numbatlater", k=3, mode="lexical").hits] == ["later.md"]
        assert state.store.note_row("loop.md") is not None
    finally:
        state.watcher.stop()


def test_a_nul_after_the_first_8_kib_is_binary(make_vault) -> None:
    late = b"# Looks like text\n\n" + b"prose line\n" * 1000 + b"\x00binary tail"
    assert len(late) > 8192 and late.index(b"\x00") > 8192
    vault, store = make_vault({"late.md": late, "ok.md": "# ok\n"})
    with pytest.raises(UnreadableNote, match="NUL"):
        read_note_text(vault, "late.md")
    assert store.note_row("late.md") is None
    assert "late.md: binary content" in " ".join(status(vault)["problems"])


def test_files_skipped_with_a_problem_are_not_pending_forever(make_vault) -> None:
    vault, store = make_vault({"ok.md": "# ok\n", "bin.md": b"\x00\x01\x02", "latin1.md": "caf\xe9".encode("latin-1")})
    old = time.time() - 60
    for name in ("ok.md", "bin.md", "latin1.md"):
        os.utime(vault / name, (old, old))
    sync(vault, store=store)
    data = status(vault)
    assert data["pending_changes"] == 0, data  # before: 2, forever
    assert len(data["problems"]) == 2
    again = sync(vault, store=store)
    assert not again.skipped and again.unchanged == 3  # not re-read while unchanged
    (vault / "bin.md").write_text("# now text\n", encoding="utf-8")
    assert pending_changes(store) == 1  # a change to a skipped file is pending again
    sync(vault, store=store)
    assert store.note_row("bin.md") is not None and pending_changes(store) == 0


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def test_a_fifo_named_like_a_note_never_blocks(template_vault, tmp_path: Path) -> None:
    vault, store = template_vault
    fifo = _fifo(vault / "pipe.md")
    done = threading.Event()

    def reads() -> None:
        with pytest.raises(UnreadableNote, match="regular file"):
            read_note_text(vault, "pipe.md")  # before: open() blocked until a writer came
        sync(vault, store=store, only=["pipe.md"])
        sync(vault, store=store)
        claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": str(vault),
                            "tool_input": {"file_path": str(fifo)}}, vault)
        # A transcript path that is a FIFO (a hook event can name anything): read as empty, at once.
        transcript = _fifo(tmp_path / "t.jsonl")
        from memory_hub.hooks.transcript import read_tail

        assert read_tail(transcript) == []
        done.set()

    worker = threading.Thread(target=reads, daemon=True)
    worker.start()
    worker.join(20)
    if not done.is_set():
        for path in (fifo, tmp_path / "t.jsonl"):  # unblock the stuck open() so the thread can end
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass
    assert done.is_set(), "a FIFO blocked a read"
    assert store.note_row("pipe.md") is None


def test_hook_run_with_a_fifo_read_exits_promptly(template_vault) -> None:
    vault, _ = template_vault
    fifo = _fifo(vault / "other-pipe.md")
    event = json.dumps({"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {"file_path": str(fifo)}})
    t0 = time.monotonic()
    out = io.StringIO()
    assert claude_code.run("claude-code", str(vault), io.StringIO(event), out) == 0
    assert time.monotonic() - t0 < 2.5  # before: the deadline (3 s + 2 s) ran out, the thread stuck in open()
    assert out.getvalue() == ""


def test_store_upgrades_an_old_problems_table(tmp_path: Path) -> None:
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "bin.md").write_bytes(b"\x00")
    store = Store(vault)
    with store.writer() as conn:  # the table as older versions made it
        conn.executescript("DROP TABLE problems; CREATE TABLE problems (path TEXT NOT NULL, problem TEXT NOT NULL,"
                           " at REAL NOT NULL);")
    store.close()
    store = Store(vault)
    sync(vault, store=store)
    assert store.conn.execute("SELECT count(*) FROM problems WHERE path = 'bin.md'").fetchone()[0] == 1
