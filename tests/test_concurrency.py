"""Server + watcher + a CLI sync in another process + the git hook, all at once.

No "database is locked", no failed tool call, and no lost update: when the dust settles every
note's indexed hash equals the file on disk.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from fastmcp import Client

from memory_hub.index.store import Store
from memory_hub.server.app import build_server
from memory_hub.server.githook import install_post_commit_hook
from memory_hub.server.run import close_state, open_state
from memory_hub.vault.git import commit_all, init_repo
from memory_hub.vault.walk import content_hash, walk

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")


def _git_env() -> None:
    os.environ.setdefault("GIT_AUTHOR_NAME", "t")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "t@example.com")
    os.environ.setdefault("GIT_COMMITTER_NAME", "t")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "t@example.com")


def test_server_watcher_cli_sync_and_git_hook_together(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    _git_env()
    init_repo(vault)
    install_post_commit_hook(vault)
    state = open_state(vault, rescan_every=None, warm=False)
    stop = threading.Event()
    errors: list[str] = []
    cli_runs: list[subprocess.CompletedProcess] = []

    def writer() -> None:
        """A person editing: new notes, repeated edits of one note, commits that fire the hook."""
        try:
            for i in range(12):
                (vault / "inbox" / f"burst-{i}.md").write_text(
                    f"# Burst {i}\n\nconcurrencyprobe{i} appears here.\n", encoding="utf-8")
                busy = vault / "home.md"
                busy.write_text(busy.read_text(encoding="utf-8") + f"\nrevision-marker-{i}\n", encoding="utf-8")
                if i % 4 == 3:
                    commit_all(vault, f"burst {i}")
                time.sleep(0.05)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"writer: {exc!r}")

    def cli_syncer() -> None:
        """Another process running `memory-hub sync` over and over."""
        while not stop.is_set():
            proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "sync", "--lexical-only"],
                                  capture_output=True, text=True, timeout=60)
            cli_runs.append(proc)

    async def agent() -> list[str]:
        """An agent calling tools the whole time."""
        failures = []
        async with Client(build_server(state)) as client:
            t_end = time.monotonic() + 2.5
            n = 0
            while time.monotonic() < t_end:
                for tool, args in (("search", {"query": "concurrencyprobe3 deploy", "k": 5}),
                                   ("read_note", {"path": "vault-conventions.md", "max_lines": 5}),
                                   ("status", {}),
                                   ("recall", {"prompt": "blue-green deploy rollback"})):
                    result = await client.call_tool(tool, args, raise_on_error=False)
                    if result.is_error:
                        failures.append(f"{tool}: {result.content[0].text}")
                n += 1
                if n == 3:
                    result = await client.call_tool("capture", {"text": "captured mid-storm: stormcapture"},
                                                    raise_on_error=False)
                    if result.is_error:
                        failures.append(f"capture: {result.content[0].text}")
        return failures

    threads = [threading.Thread(target=writer), threading.Thread(target=cli_syncer)]
    try:
        for t in threads:
            t.start()
        failures = asyncio.run(agent())
        threads[0].join(timeout=30)
        stop.set()
        threads[1].join(timeout=60)
        # Settle: the watcher's queue drains, then one more sync must find nothing to do.
        deadline = time.monotonic() + 15
        while state.watcher.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        while state.watcher.pending and time.monotonic() < deadline:
            time.sleep(0.05)
        final = subprocess.run([MEMORY_HUB, "--vault", str(vault), "sync", "--lexical-only", "--json"],
                               capture_output=True, text=True, timeout=60)
    finally:
        stop.set()
        close_state(state)

    assert not errors, errors
    assert not failures, failures[:5]
    assert len(cli_runs) >= 2
    for proc in cli_runs + [final]:
        assert proc.returncode == 0, proc.stderr
        assert "locked" not in proc.stderr.lower(), proc.stderr
    assert state.watcher.last_error is None or "locked" not in state.watcher.last_error
    hook_log = vault / ".memory_hub" / "git-hook.log"
    waited = time.monotonic() + 30  # the hook runs its sync in the background; on a loaded machine, later
    while not hook_log.exists() and time.monotonic() < waited:
        time.sleep(0.1)
    assert hook_log.exists() and "locked" not in hook_log.read_text(encoding="utf-8").lower()

    # No lost update: every file on disk is indexed with exactly its current content.
    store = Store(vault)
    indexed = {r[0]: r[1] for r in store.conn.execute("SELECT path, hash FROM notes WHERE kind != 'attachment'")}
    for st in walk(vault):
        if st.is_note:
            assert indexed.get(st.path) == content_hash((vault / st.path).read_bytes()), st.path
    assert set(indexed) == {st.path for st in walk(vault) if st.is_note}
    for i in range(12):
        assert f"inbox/burst-{i}.md" in indexed
    assert "revision-marker-11" in (vault / "home.md").read_text(encoding="utf-8")
    body = store.conn.execute(
        "SELECT body FROM fts_trigram WHERE rowid = (SELECT id FROM notes WHERE path = 'home.md')").fetchone()[0]
    assert "revision-marker-11" in body
