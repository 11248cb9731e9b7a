"""The watcher: an edit, a new file, a delete and a rename become visible through search."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_hub.index.store import Store
from memory_hub.server.state import ServerState
from memory_hub.server.watcher import Watcher, relevant_path

WAIT = 10.0  # generous: a functional deadline, not a timing assertion


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not visible after {WAIT}s: {what}")
        time.sleep(0.05)


def paths(state: ServerState, query: str) -> list[str]:
    return [h.path for h in state.search(query, k=10, mode="lexical").hits]


@pytest.fixture
def watched(template_vault: tuple[Path, Store]):
    vault, _ = template_vault
    state = ServerState.open(vault)
    state.models_ready.set()
    state.watcher = Watcher(state.vault, state.store, rescan_every=None).start()
    time.sleep(0.2)  # inotify watches are in place
    yield state
    state.watcher.stop()


def test_edit_new_delete_rename_are_searchable(watched: ServerState) -> None:
    vault = watched.vault
    assert not paths(watched, "quokkafication")

    (vault / "runbooks" / "quokka.md").write_text("# Quokka runbook\n\nThe quokkafication procedure.\n", encoding="utf-8")
    wait_for(lambda: paths(watched, "quokkafication") == ["runbooks/quokka.md"], "new file")

    home = vault / "home.md"
    home.write_text(home.read_text(encoding="utf-8") + "\nWombatization lives here.\n", encoding="utf-8")
    wait_for(lambda: "home.md" in paths(watched, "wombatization"), "edit")

    (vault / "runbooks" / "quokka.md").rename(vault / "decisions" / "quokka-decision.md")
    wait_for(lambda: paths(watched, "quokkafication") == ["decisions/quokka-decision.md"], "rename")
    row = watched.store.note_row("decisions/quokka-decision.md")
    assert row["kind"] == "decision"  # re-parsed at the new place
    assert watched.store.note_row("runbooks/quokka.md") is None

    (vault / "decisions" / "quokka-decision.md").unlink()
    wait_for(lambda: paths(watched, "quokkafication") == [], "delete")
    wait_for(lambda: watched.watcher.pending == 0, "queue drained")
    assert watched.pending_changes() == 0


def test_folder_rename_and_ignored_paths(watched: ServerState) -> None:
    vault = watched.vault
    (vault / "runbooks").rename(vault / "playbooks")
    wait_for(lambda: watched.store.note_row("runbooks/blue-green-rollback.md") is None
             and watched.store.note_row("playbooks/blue-green-rollback.md") is not None, "folder rename")
    # The index folder, dot-folders and editor temp files never trigger work.
    assert relevant_path(vault, str(vault / ".memory_hub" / "index.sqlite3")) is None
    assert relevant_path(vault, str(vault / ".obsidian" / "workspace.json")) is None
    assert relevant_path(vault, str(vault / "inbox" / ".mh-abc.tmp")) is None
    assert relevant_path(vault, "/elsewhere/x.md") is None
    assert relevant_path(vault, str(vault / "inbox" / "a.md")) == "inbox/a.md"
    wait_for(lambda: watched.watcher.pending == 0, "rename settled")
    time.sleep(0.5)
    wait_for(lambda: watched.watcher.pending == 0, "rename settled")
    syncs = watched.watcher.syncs
    (vault / ".obsidian").mkdir(exist_ok=True)
    (vault / ".obsidian" / "workspace.json").write_text("{}", encoding="utf-8")
    time.sleep(0.8)
    assert watched.watcher.syncs == syncs and watched.watcher.pending == 0


def test_reading_files_does_not_trigger_syncs(watched: ServerState) -> None:
    """watchdog 7 reports opened/closed events; reads must not cause re-indexing."""
    wait_for(lambda: watched.watcher.pending == 0, "start-up settled")
    syncs = watched.watcher.syncs
    for p in sorted(watched.vault.rglob("*.md"))[:20]:
        p.read_bytes()
    time.sleep(0.8)
    assert watched.watcher.syncs == syncs


def test_periodic_rescan_catches_missed_changes(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    watcher = Watcher(state.vault, state.store, rescan_every=0.5)  # no observer: only the rescan
    watcher._observer = None
    import threading

    watcher._thread = threading.Thread(target=watcher._run, daemon=True)
    watcher._thread.start()
    try:
        (vault / "missed.md").write_text("# Missed\n\nA change no event reported: platypodean.\n", encoding="utf-8")
        wait_for(lambda: paths(state, "platypodean") == ["missed.md"], "rescan")
    finally:
        watcher.stop()


_LIMITED = r"""
import json, sys, time
from pathlib import Path
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.server.watcher import Watcher
vault = Path(sys.argv[1])
open("/proc/sys/user/max_inotify_watches", "w").write("4")  # this user namespace only
store = Store(vault)
sync(vault, store=store)
watcher = Watcher(vault, store, rescan_every=60.0).start()
(vault / "deep" / "f7" / "new-note.md").write_text("# Zebra crossing\n\nquokka migration notes\n", encoding="utf-8")
deadline = time.monotonic() + 30
found = False
while time.monotonic() < deadline and not found:
    time.sleep(0.2)
    found = store.conn.execute("SELECT 1 FROM notes WHERE path = 'deep/f7/new-note.md'").fetchone() is not None
watcher.stop()
print(json.dumps({"mode": watcher.mode, "reason": watcher.fallback_reason, "alive_before_stop": found,
                  "found": found}))
"""


def test_inotify_limit_falls_back_to_polling_and_says_why(tmp_path: Path) -> None:
    """A real kernel limit: in a private user namespace the inotify watch budget is set to 4, far
    below the vault's folders. The watcher must say why it has no events and still index a new
    note by polling."""
    import json
    import shutil
    import subprocess
    import sys

    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-Ur", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unprivileged user namespaces (unshare -Ur) to set a private inotify limit")
    vault = tmp_path / "vault"
    for i in range(12):
        (vault / "deep" / f"f{i}").mkdir(parents=True)
        (vault / "deep" / f"f{i}" / "a.md").write_text(f"# Note {i}\n", encoding="utf-8")
    out = subprocess.run([unshare, "-Ur", sys.executable, "-c", _LIMITED, str(vault)], capture_output=True,
                         text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["mode"] == "polling"
    assert "inotify watch limit" in result["reason"] and "max_user_watches" in result["reason"]
    assert "folders" in result["reason"] and "sysctl" in result["reason"]
    assert result["found"], "the new note was not indexed by polling"
