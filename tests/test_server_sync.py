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
    db, now = cache.stamp(conn, graph.GRAPH_KEYS)  # the graph follows link changes (the new note has one)
    assert cache._values.get((db, "link_graph"), ("", None))[0] != now  # the sync made it stale
    state.sync_vectors(report)
    assert cache._values[(db, "link_graph")][0] == now
    new_id = state.store.note_row("inbox/warmed.md")["id"]
    assert new_id in graph.cached(conn)  # the graph it left holds the new note's link
    assert (lexical._generation(conn), "\0ranked") in lexical._df_cache
    graph_made, counts_made = cache._values[(db, "link_graph")], lexical._df_cache[(lexical._generation(conn), "\0ranked")]
    unchanged = sync(vault, store=state.store, only=[], progress=False)
    assert not unchanged.changed
    assert state.sync_vectors(unchanged) is None  # nothing changed: no vector sync, nothing built again
    assert cache._values[(db, "link_graph")] is graph_made and cache.stamp(conn, graph.GRAPH_KEYS) == (db, now)
    assert lexical._df_cache[(lexical._generation(conn), "\0ranked")] is counts_made


def test_the_start_up_catch_up_warms_a_new_process_and_counts_coverage_outside_the_vector_lock(
        template_vault: tuple[Path, Store], monkeypatch) -> None:  # noqa: ANN001
    """A server's start-up catch-up sync usually finds nothing changed, and a new process has no
    caches: the post-sync step reads them anyway (it skipped them, so the first search paid). After a
    sync that changed notes the lexical caches are read before the vector sync (which can embed for
    minutes), and the coverage is counted after it with the vector lock already released."""
    from memory_hub.index import cache, graph
    from memory_hub.index.sync import sync
    from memory_hub.retrieval.searcher import Searcher
    from memory_hub.server.state import ServerState

    vault, store = template_vault
    Searcher(vault, store=store).sync_vectors(progress=False)  # as `memory-hub index` leaves it
    monkeypatch.setattr(cache, "_values", {})  # a new process: nothing cached yet
    state = ServerState.open(vault)
    state.models_ready.set()
    conn = state.store.conn
    unchanged = sync(vault, store=state.store, progress=False)  # the catch-up: nothing changed meanwhile
    assert not unchanged.changed
    assert state.sync_vectors(unchanged) is None
    db, now = cache.stamp(conn)
    assert cache._values[(db, "link_graph")][0] == cache.stamp(conn, graph.GRAPH_KEYS)[1]
    assert cache._values[(db, "ranked_note_ids")][0] == now

    seen: dict[str, object] = {}
    searcher = state.searcher
    real_sync, vectors = searcher.sync_vectors, searcher.vectors
    real_covered = vectors.notes_covered

    def vector_sync(**kwargs):  # noqa: ANN003, ANN202
        stamp = cache.stamp(conn, graph.GRAPH_KEYS)
        seen["graph_ready"] = cache._values.get((stamp[0], "link_graph"), ("", None))[0] == stamp[1]
        return real_sync(**kwargs)

    def covered(s: Store) -> tuple[int, int]:
        seen["lock_held"] = state._vector_lock.locked()
        return real_covered(s)

    monkeypatch.setattr(searcher, "sync_vectors", vector_sync)
    monkeypatch.setattr(vectors, "notes_covered", covered)
    (vault / "inbox" / "catch-up.md").write_text("# Caught up\n\nsee [[home]]\n", encoding="utf-8")
    report = sync(vault, store=state.store, progress=False)
    assert report.changed
    out = state.sync_vectors(report)
    assert out is not None and out.notes_embedded == 1  # the new note, and only it
    assert seen == {"graph_ready": True, "lock_held": False}
    assert state.store.note_row("inbox/catch-up.md")["id"] in graph.cached(conn)
    have, ranked = real_covered(state.store)
    assert have == ranked and vectors._covered is not None


def test_a_warm_searchers_catch_up_does_not_read_the_table_when_the_vectors_are_current(
        template_vault: tuple[Path, Store], monkeypatch) -> None:  # noqa: ANN001
    """The server warms its searcher (embedder and vector index loaded) before the start-up catch-up;
    with the last complete vector sync's mark still holding, that catch-up must not compare every
    note with the table (at 100k notes: ~1.4 s of CPU and ~250 MB of RSS for nothing). Once a note
    changes, the mark no longer holds and the real sync embeds it."""
    from memory_hub.index.sync import sync
    from memory_hub.index.vectors import VectorIndex
    from memory_hub.server.state import ServerState

    vault, store = template_vault
    state = ServerState.open(vault)
    state.searcher.sync_vectors(progress=False)  # as `memory-hub index` leaves it
    state.searcher.warm()  # what the server's warm-up thread does first: the vector index is loaded
    assert state.searcher._vectors is not None
    calls: list[object] = []
    real = VectorIndex.sync

    def counting(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls.append(kwargs.get("changes"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(VectorIndex, "sync", counting)
    state.models_ready.set()
    out = state.sync_vectors()  # the warm-up's catch-up: no report, nothing changed since the index
    assert out is not None and out.notes_due == 0 and calls == []
    (vault / "inbox" / "after-warm.md").write_text("# After warm\n\nokapi-shaped words\n", encoding="utf-8")
    report = sync(vault, store=state.store, progress=False)
    out = state.sync_vectors(report)
    assert len(calls) == 1 and out.notes_embedded == 1  # a change: the table is compared and the note embedded


def test_the_servers_ann_upkeep_runs_on_its_own_thread_and_says_what_it_did(
        template_vault: tuple[Path, Store], monkeypatch) -> None:  # noqa: ANN001
    """Past ``ANN_FLAT_ROWS`` new rows the index is trained again: ~15 s at 100k notes. The watcher's
    post-sync step must not spend that: it hands the upkeep to a thread of its own and returns, the
    next lexical sync goes ahead while the upkeep runs, and ``status`` says what the upkeep did."""
    import threading

    from memory_hub.index import vectors as vectors_mod
    from memory_hub.index.sync import sync
    from memory_hub.server.state import ServerState
    from memory_hub.server.tools import _vector_status

    vault, store = template_vault
    monkeypatch.setenv("MEMORY_HUB_ANN_FROM", "0")  # the template's ~100 rows go through the ANN path
    state = ServerState.open(vault)
    first = state.searcher.sync_vectors(progress=False)  # as `memory-hub index` leaves it: index built
    assert first.ann is not None and first.ann["built"] is True and state.searcher.vectors.uses_ann(state.store)
    state.models_ready.set()
    monkeypatch.setattr(vectors_mod, "ANN_FLAT_ROWS", 0)  # any new row makes the upkeep due
    vectors = state.searcher.vectors
    real, entered, release = vectors.maintain_ann, threading.Event(), threading.Event()

    def held(s: Store):  # noqa: ANN202 - the real upkeep, held until the test lets it go
        entered.set()
        assert release.wait(60)
        return real(s)

    monkeypatch.setattr(vectors, "maintain_ann", held)
    (vault / "inbox" / "upkeep.md").write_text("# Upkeep\n\nwombat migration notes\n", encoding="utf-8")
    out = state.sync_vectors(sync(vault, store=state.store, progress=False))
    assert out.notes_embedded == 1 and out.ann is None and out.ann_due["retrained_for"] >= 1
    assert entered.wait(30) and state.ann_upkeep["state"] == "running"
    # while the upkeep runs, the watcher goes on: the next edit is indexed and found
    (vault / "inbox" / "meanwhile.md").write_text("# Meanwhile\n\nquokka census\n", encoding="utf-8")
    sync(vault, store=state.store, only=["inbox/meanwhile.md"], progress=False)
    assert state.search("quokka census", k=3, mode="lexical").hits[0].path == "inbox/meanwhile.md"
    assert state.start_ann_upkeep({"rows": 1}) is None  # one upkeep at a time
    release.set()
    state._ann_thread.join(60)
    assert state.ann_upkeep["state"] == "done" and state.ann_upkeep["done"]["built"] is True
    table = vectors._table()
    assert table.index_stats(vectors._ann_index(table).name).num_unindexed_rows == 0
    assert _vector_status(state)["ann_upkeep"]["state"] == "done"
    assert state.search("wombat migration", k=3, mode="vector").hits[0].path == "inbox/upkeep.md"
