"""`memory-hub sync` (the seeds' sync_vault): brings the index up to date and exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memory_hub.index.store import Store

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")


def test_sync_picks_up_adds_edits_and_deletes(template_vault: tuple[Path, Store]) -> None:
    vault, store = template_vault
    (vault / "inbox" / "synced.md").write_text("# Synced\n\nokapi-shaped content\n", encoding="utf-8")
    (vault / "home.md").write_text((vault / "home.md").read_text(encoding="utf-8") + "\nedited\n", encoding="utf-8")
    (vault / "runbooks" / "blue-green-rollback.md").unlink()
    proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "sync", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["added"] == ["inbox/synced.md"]
    assert report["updated"] == ["home.md"]
    assert report["deleted"] == ["runbooks/blue-green-rollback.md"]
    assert "vectors" in report  # the vector step ran, or said why not
    assert store.note_row("inbox/synced.md") is not None
    again = json.loads(subprocess.run([MEMORY_HUB, "--vault", str(vault), "sync", "--json", "--lexical-only"],
                                      capture_output=True, text=True, check=True).stdout)
    assert not (again["added"] or again["updated"] or again["deleted"])


def test_sync_on_a_missing_vault_is_a_clear_error(tmp_path: Path) -> None:
    proc = subprocess.run([MEMORY_HUB, "--vault", str(tmp_path / "nope"), "sync"], capture_output=True, text=True)
    assert proc.returncode == 1 and "vault not found" in proc.stderr and "Traceback" not in proc.stderr


def test_the_servers_post_sync_step_reads_what_the_next_search_would(template_vault: tuple[Path, Store]) -> None:
    """After a sync that changed notes, the watcher's post-sync step (``ServerState.sync_vectors``)
    rebuilds the link graph and the vault-wide counts on its own thread, so the next agent's search
    finds them made for the new notes (before: the first search after every edit rebuilt them)."""
    from memory_hub.index import cache, graph, lexical
    from memory_hub.index.sync import sync
    from memory_hub.server.state import ServerState

    vault, _ = template_vault
    state = ServerState.open(vault)
    (vault / "inbox" / "warmed.md").write_text("# Warmed\n\nsee [[home]]\n", encoding="utf-8")
    report = sync(vault, store=state.store, only=["inbox/warmed.md"], progress=False)
    assert report.changed
    conn = state.store.conn
    db, now = cache.stamp(conn)
    assert cache._values.get((db, "link_graph"), ("", None))[0] != now  # the sync made it stale
    state.sync_vectors(report)
    assert cache._values[(db, "link_graph")][0] == now
    new_id = state.store.note_row("inbox/warmed.md")["id"]
    assert new_id in graph.cached(conn).near  # the graph it left holds the new note's link
    assert (lexical._generation(conn), "\0ranked") in lexical._df_cache
    graph_made, counts_made = cache._values[(db, "link_graph")], lexical._df_cache[(lexical._generation(conn), "\0ranked")]
    unchanged = sync(vault, store=state.store, only=[], progress=False)
    assert not unchanged.changed
    assert state.sync_vectors(unchanged) is None  # nothing changed: no vector sync, nothing built again
    assert cache._values[(db, "link_graph")] is graph_made and cache.stamp(conn) == (db, now)
    assert lexical._df_cache[(lexical._generation(conn), "\0ranked")] is counts_made

