"""The ANN path of the vector channel: a real LanceDB table forced onto its IVF index.

The rows are written straight into the table (seeded unit vectors, one note-level row per note and
chunk rows for some) so the test is about how candidates are fetched, not about the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from conftest import write_files

from memory_hub.index import vectors as vectors_mod
from memory_hub.index.embed import EmbedderIdentity
from memory_hub.index.lexical import Filters
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.index.vectors import VectorIndex, VectorReport

DIM = 384
NOTES = 480


@dataclass
class Identity:
    """Only the identity and dimension of an embedder: queries are passed as vectors."""

    identity: EmbedderIdentity = EmbedderIdentity("ann-test", "1", "seeded")
    dim: int = DIM
    max_tokens: int = 512


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, ):  # noqa: ANN201
    return _make_table(tmp_path_factory.mktemp("ann") / "vault")


def _make_table(root):  # noqa: ANN001, ANN202
    import pyarrow as pa

    files = {}
    for n in range(NOTES):
        folder = "a" if n % 2 else "b"
        tag = "tags: [rare]\n" if n in (3, 5, 7, 9, 11) else ""
        files[f"{folder}/n{n:03}.md"] = f"---\ntitle: Note {n}\n{tag}---\nbody {n}\n"
    write_files(root, files)
    store = Store(root)
    sync(root, store=store, progress=False)
    rng = np.random.default_rng(7)
    centres = _unit(rng.normal(size=(12, DIM)) + 3.0)  # clustered and off-centre, as e5 vectors are
    paths = sorted(files)
    vecs, rows = [], []
    for i, path in enumerate(paths):
        base = centres[i % 12]
        pieces = [("note", 0)] + ([("chunk", 1), ("chunk", 2)] if i % 5 == 0 else [])
        for level, ordinal in pieces:
            vecs.append(_unit(base + 0.35 * rng.normal(size=DIM)))
            rows.append({"id": f"{path}#{ordinal}", "path": path, "note_hash": "h", "ordinal": ordinal,
                         "start": ordinal * 10, "end": ordinal * 10 + 9, "heading": f"h{ordinal}", "text": "",
                         "embedder": Identity().identity.key, "level": level})
    vi = VectorIndex(root, Identity())  # type: ignore[arg-type]
    data = pa.Table.from_pylist(rows).append_column(
        "vector", pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(vecs)), DIM))
    vi._table(create=True).add(data.select(vi._schema().names).cast(vi._schema()))
    vi._bump(store)
    return root, store, vi, np.stack(vecs), rng


def _both(vi: VectorIndex, store: Store, q: np.ndarray, filters: Filters | None = None, limit: int = 20,  # noqa: ANN202
          chunk_offset: float | None = None):
    vi.ann_from = 10**9
    vi._shape = None
    exact = vi.search_notes(store, q, filters, limit, chunk_offset)
    vi.ann_from = 0
    vi._shape = None
    assert vi.uses_ann(store)
    return exact, vi.search_notes(store, q, filters, limit, chunk_offset)


def _one_partition_rows(vi: VectorIndex, q: np.ndarray) -> int:
    """How many rows a query probing one IVF partition reads (no limit: all it can see)."""
    table = vi._table()
    query = table.search(q, vector_column_name="vector").distance_type("cosine").nprobes(1)
    return query.select(["id"]).limit(10**6).to_arrow().num_rows


def test_a_sync_builds_the_index_at_the_threshold_then_trains_it_again_over_new_rows(table, monkeypatch) -> None:  # noqa: ANN001
    root, store, vi, _vecs, _rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)  # a real IVF: several partitions
    vi.ann_from = 10**9
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann is None and vi._ann_index(vi._table()) is None  # below the threshold: exact only
    vi.ann_from = 0
    vi._maintain_ann(store, report)
    assert report.ann["built"] is True and vi._ann_index(vi._table()) is not None
    assert vi.uses_ann(store) and vi._matrix is None  # searching needs no matrix in memory
    rows = vi._table().count_rows()
    narrow = _one_partition_rows(vi, _vecs[0])
    assert 0 < narrow < rows / 3  # a trained IVF: one probe reads one partition's rows
    # a later sync's few new rows stay outside the index, searched flat beside it (folding them in
    # rewrote the data file and slowed every later query), and are found by the ANN query
    table = vi._table()
    extra = table.search().where("level = 'chunk'").limit(30).to_arrow()
    extra = extra.set_column(extra.schema.get_field_index("id"), "id",
                             [[f"{i}#extra" for i in extra.column("id").to_pylist()]])
    table.add(extra.select(vi._schema().names))
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann is None and report.ann_flat_rows == 30 and report.as_dict()["ann_flat_rows"] == 30
    assert "30 new rows searched flat beside the ANN index" in report.summary()
    fresh = vi._table()
    assert fresh.index_stats(vi._ann_index(fresh).name).num_unindexed_rows == 30
    probe = extra.column("vector")[0].values.to_numpy()
    top = fresh.search(probe, vector_column_name="vector").distance_type("cosine").nprobes(1).limit(2).to_arrow()
    assert set(top.column("id").to_pylist()) == {extra.column("id")[0].as_py(),
                                                extra.column("id")[0].as_py().removesuffix("#extra")}
    # past ANN_FLAT_ROWS new rows the index is trained again over all rows. Not LanceDB's fold-in
    # (``optimize``): after it a one-partition query returned every row of the table (732 of 732
    # here), so every query scanned them all, whatever its probes
    monkeypatch.setattr(vectors_mod, "ANN_FLAT_ROWS", 20)
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["built"] is True and report.ann["retrained_for"] == 30 and report.ann_flat_rows == 0
    fresh = vi._table()
    assert fresh.index_stats(vi._ann_index(fresh).name).num_unindexed_rows == 0
    assert 0 < _one_partition_rows(vi, _vecs[0]) < (rows + 30) / 3  # still narrowed to its partition
    # an index without this version's mark (perhaps folded by an earlier one) is trained once more
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann is None  # marked, nothing new: left alone
    # the mark lives beside the table, not in the SQLite index: a rebuilt index does not retrain it
    store.conn.execute("DELETE FROM meta WHERE key LIKE 'ann%'")
    store.conn.commit()
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann is None
    vi._ann_mark_file().unlink()
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["built"] is True and report.ann["unmarked"] is True
    assert f"ANN index trained over {report.ann['rows']} rows (not trained by this version)" in report.summary()
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann is None


def test_the_ann_path_returns_what_exact_search_returns(table, monkeypatch) -> None:  # noqa: ANN001
    root, store, vi, vecs, rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    if vi._ann_index(vi._table()) is None:
        vi.build_ann()
    parts = vi._table().count_rows() // 64
    for q in _unit(vecs[rng.choice(len(vecs), 8)] + 0.2 * rng.normal(size=(8, DIM))):
        vi.ann_probes = parts  # every partition: the index may only reorder nothing
        exact, ann = _both(vi, store, q)
        assert [h[0] for h in ann] == [h[0] for h in exact]
        assert np.allclose([h[1] for h in ann], [h[1] for h in exact], atol=1e-4)  # refined: exact scores
        assert [(h[2].start, h[2].heading) for h in ann] == [(h[2].start, h[2].heading) for h in exact]
    # the default share of partitions finds a stored passage's own note first. (The fixture's
    # vectors are mostly noise, so beyond the first their neighbours are arbitrary and a partial
    # probe misses some: this passed only while LanceDB's fold-in left the index probing them all.)
    vi.ann_probes = None
    for i in rng.choice(len(vecs), 8):
        near = _unit(vecs[i] + 0.01 * rng.normal(size=DIM))
        exact, ann = _both(vi, store, near)
        assert ann[0][0] == exact[0][0] and abs(ann[0][1] - exact[0][1]) < 1e-4


def test_a_chunk_offset_scores_the_same_on_both_paths(table, monkeypatch) -> None:  # noqa: ANN001
    """The ANN query reads each row's level only when chunks are offset against note vectors: with
    an offset, a chunk that wins is scored chunk + offset on both paths, and a note row is not."""
    root, store, vi, vecs, rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    if vi._ann_index(vi._table()) is None:
        vi.build_ann()
    vi.ann_probes = 10**6  # every partition
    q = _unit(vecs[rng.choice(len(vecs), 1)][0] + 0.2 * rng.normal(size=DIM))
    plain, _ = _both(vi, store, q)
    for offset in (0.05, -0.05):
        exact, ann = _both(vi, store, q, chunk_offset=offset)
        # the 8-bit codes choose which rows are refined, so the far tail of a 20-note answer may
        # differ; every note both return is scored the same, and the head is the same
        assert [h[0] for h in ann[:10]] == [h[0] for h in exact[:10]]
        by_note = {h[0]: h[1] for h in exact}
        assert np.allclose([h[1] for h in ann if h[0] in by_note], [by_note[h[0]] for h in ann if h[0] in by_note], atol=1e-4)
        assert len(by_note.keys() & {h[0] for h in ann}) >= 18
        assert [h[1] for h in exact] != [h[1] for h in plain]  # the offset did move scores


def test_filters_are_part_of_the_vector_query(table, monkeypatch) -> None:  # noqa: ANN001
    root, store, vi, vecs, rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    if vi._ann_index(vi._table()) is None:
        vi.build_ann()
    vi.ann_probes = 10**6  # every partition
    q = vecs[0]
    exact, ann = _both(vi, store, q, Filters(path_prefix="a/"), limit=30)
    assert len(ann) == 30 and all(h[2].path.startswith("a/") for h in ann)
    assert [h[0] for h in ann] == [h[0] for h in exact]
    # five notes tagged 'rare', none of them near the query: a filter applied after fetching the
    # nearest rows would find none of them; inside the query it finds all five
    exact, ann = _both(vi, store, -q, Filters(tags=["rare"]), limit=10)
    assert sorted(h[2].path for h in ann) == sorted(h[2].path for h in exact)
    assert len(ann) == 5 and all(h[2].path.endswith(("n003.md", "n005.md", "n007.md", "n009.md", "n011.md"))
                                 for h in ann)
    _, none = _both(vi, store, q, Filters(path_prefix="nowhere/"))
    assert none == []
    # a scope too broad to send as a path list: rows are over-fetched and kept when in scope
    monkeypatch.setattr(vectors_mod, "ANN_IN_MAX", 10)
    exact, ann = _both(vi, store, q, Filters(since="1970-01-01"), limit=10)
    assert len(exact) == 10 and [h[0] for h in ann] == [h[0] for h in exact]


def test_a_fragmented_table_is_compacted_and_answers_the_same(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """Every committed group of a sync is a data file of its own; the ANN path's refine reads rows
    by id from each, so the sync merges them (ANN_MAX_FRAGMENTS) when it builds the index, and on a
    later sync of a table already indexed, without changing what a search returns."""
    import pyarrow as pa

    root = tmp_path / "vault"
    files = {f"{'a' if n % 2 else 'b'}/n{n:03}.md": f"# Note {n}\n\nbody {n}\n" for n in range(120)}
    write_files(root, files)
    store = Store(root)
    sync(root, store=store, progress=False)
    rng = np.random.default_rng(11)
    vi = VectorIndex(root, Identity())  # type: ignore[arg-type]
    table = vi._table(create=True)
    vecs = _unit(rng.normal(size=(len(files), DIM)) + 2.0)
    paths = sorted(files)
    for start in range(0, len(paths), 6):  # 20 adds: 20 data files, as 20 sync groups leave them
        rows = [{"id": f"{p}#0", "path": p, "note_hash": "h", "ordinal": 0, "start": 0, "end": 9, "heading": "",
                 "text": "", "embedder": Identity().identity.key, "level": "note"} for p in paths[start:start + 6]]
        data = pa.Table.from_pylist(rows).append_column(
            "vector", pa.FixedSizeListArray.from_arrays(pa.array(vecs[start:start + 6].reshape(-1)), DIM))
        table.add(data.select(vi._schema().names).cast(vi._schema()))
    vi._bump(store)
    assert vectors_mod._fragments(vi._table()) == 20
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 16)
    monkeypatch.setattr(vectors_mod, "ANN_MAX_FRAGMENTS", 4)
    queries = _unit(vecs[rng.choice(len(vecs), 5)] + 0.3 * rng.normal(size=(5, DIM)))
    exact = [vi.search_notes(store, q, None, 10) for q in queries]  # below the threshold: the matrix
    vi.ann_from = 0
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["built"] is True
    assert vectors_mod._fragments(vi._table()) == 1  # merged before the index was trained
    vi.ann_probes = 10**6  # every partition: only how rows are read may differ
    for q, want in zip(queries, exact, strict=True):
        got = vi.search_notes(store, q, None, 10)
        assert [h[0] for h in got] == [h[0] for h in want]
    # an indexed table that was fragmented again (another build's files): compacted by the next sync
    table = vi._table()
    for start in range(0, 10, 2):  # 5 new files of 2 rows (below the retraining share)
        where = f"path IN ({','.join(repr(p) for p in paths[start:start + 2])})"
        extra = table.search().where(where).select(vi._schema().names).to_arrow()
        table.delete(where)
        table.add(extra.select(vi._schema().names).cast(vi._schema()))
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["compacted_fragments"] > 4
    assert vectors_mod._fragments(vi._table()) <= 2  # LanceDB keeps the indexed rows' file apart
    for q, want in zip(queries, exact, strict=True):
        assert [h[0] for h in vi.search_notes(store, q, None, 10)] == [h[0] for h in want]


def test_coverage_is_cached_across_meta_writes_and_follows_note_changes(tmp_path) -> None:  # noqa: ANN001
    """Every search asks how many notes the vectors cover. The answer is kept until the vectors or
    the notes change, not until the next ``last_sync`` (the watcher's rescan writes it every minute,
    and recounting read every path of the vector table)."""
    import pyarrow as pa

    root = tmp_path / "vault"
    files = {f"n{n}.md": f"# Note {n}\n\nbody {n}\n" for n in range(10)}
    write_files(root, files)
    store = Store(root)
    sync(root, store=store, progress=False)
    vi = VectorIndex(root, Identity())  # type: ignore[arg-type]
    rows = [{"id": f"{p}#0", "path": p, "note_hash": "h", "ordinal": 0, "start": 0, "end": 9, "heading": "",
             "text": "", "embedder": Identity().identity.key, "level": "note"} for p in sorted(files)]
    vecs = _unit(np.random.default_rng(3).normal(size=(len(rows), DIM)))
    data = pa.Table.from_pylist(rows).append_column(
        "vector", pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), DIM))
    vi._table(create=True).add(data.select(vi._schema().names).cast(vi._schema()))
    vi._bump(store)
    assert vi.notes_covered(store) == (10, 10)
    counted = vi._covered
    with store.transaction() as c:
        store.set_meta(c, "last_sync", "1")
    assert vi.notes_covered(store) == (10, 10) and vi._covered is counted  # not counted again
    write_files(root, {"n99.md": "# New\n\nnot embedded yet\n"})
    sync(root, store=store, progress=False)
    assert vi.notes_covered(store) == (10, 11)


def test_the_many_chunks_penalty_scores_the_same_on_both_paths(table, monkeypatch) -> None:  # noqa: ANN001
    """``CHUNK_DRAWS_PENALTY`` lowers each chunk by penalty * sqrt(2 ln n), n its note's chunks: the
    ANN path (which must count a note's chunks itself) scores exactly as the matrix does, a note
    winning by its note-level vector keeps its cosine, and a note of one chunk is never lowered."""
    root, store, vi, vecs, rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    if vi._ann_index(vi._table()) is None:
        vi.build_ann()
    vi.ann_probes = 10**6  # every partition
    chunked = [r[0] for r in store.conn.execute("SELECT path FROM notes ORDER BY path")][::5]  # 2 chunks each
    qs = _unit(vecs[rng.choice(len(vecs), 4)] + 0.2 * rng.normal(size=(4, DIM)))
    plain = [_both(vi, store, q)[0] for q in qs]
    monkeypatch.setattr(vectors_mod, "CHUNK_DRAWS_PENALTY", 0.05)
    vi._draws = None
    moved = 0
    for q, before in zip(qs, plain, strict=True):
        exact, ann = _both(vi, store, q)
        assert [h[0] for h in ann] == [h[0] for h in exact]
        assert np.allclose([h[1] for h in ann], [h[1] for h in exact], atol=1e-4)
        was = {h[0]: h for h in before}
        for nid, score, hit in exact:
            old = was.get(nid)
            if old is None:
                continue
            assert score <= old[1] + 1e-6  # a penalty never raises a note
            if hit.path not in chunked:
                assert score == pytest.approx(old[1], abs=1e-6)  # no chunks, nothing to lower
            elif old[2].start != 0:  # it had won by a chunk: now that chunk minus 0.05 * sqrt(2 ln 2), or its note vector
                moved += score < old[1] - 1e-6
    assert moved, "no chunk-scored note moved: the penalty did nothing"
    assert vi._draws is not None and set(vi._draws[1]) == set(chunked)  # counted once, only the chunked notes


def test_the_hubness_correction_scores_the_same_on_both_paths(table, monkeypatch) -> None:  # noqa: ANN001
    """Each note's score is its cosine minus ``hubness.WEIGHT`` times its hubness, on the matrix and
    through the ANN index alike (the ANN path corrects the rows nearest by plain cosine, so its far
    tail may differ: the head is compared); a note the file does not know is not corrected."""
    from memory_hub.index import hubness

    root, store, vi, vecs, rng = table
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    if vi._ann_index(vi._table()) is None:
        vi.build_ann()
    vi.ann_probes = 10**6  # every partition
    paths = [r[0] for r in store.conn.execute("SELECT path FROM notes ORDER BY path")]
    values = {p: float(v) for p, v in zip(paths[1:], rng.normal(scale=0.02, size=len(paths) - 1), strict=True)}
    qs = _unit(vecs[rng.choice(len(vecs), 4)] + 0.2 * rng.normal(size=(4, DIM)))
    monkeypatch.setattr(hubness, "WEIGHT", 0.0)
    plain = [_both(vi, store, q)[0] for q in qs]
    path = hubness.file_for(vi.dir, vi.name)
    hubness.save(path, hubness.Hubness(values, len(vecs), vi.key, 0), [], np.zeros((0, DIM), dtype=np.float32))
    try:
        monkeypatch.setattr(hubness, "WEIGHT", 0.5)
        moved = 0
        for q, before in zip(qs, plain, strict=True):
            exact, ann = _both(vi, store, q, limit=20)
            assert [h[0] for h in ann[:10]] == [h[0] for h in exact[:10]]
            assert np.allclose([h[1] for h in ann[:10]], [h[1] for h in exact[:10]], atol=1e-4)
            was = {h[0]: h[1] for h in before}
            for nid, score, hit in exact:
                if nid in was:
                    assert score == pytest.approx(was[nid] - 0.5 * values.get(hit.path, 0.0), abs=1e-5)
            moved += [h[0] for h in exact[:10]] != [h[0] for h in before[:10]]
        assert moved, "the correction reordered no query's notes"
    finally:
        path.unlink()
        vi._hub = vi._hub_notes = None


def _narrow_share(vi: VectorIndex, vecs: np.ndarray) -> float:
    """The largest share of the table that a one-partition query reads, over a few probes."""
    rows = vi._table().count_rows()
    return max(_one_partition_rows(vi, vecs[i]) for i in (0, 7, 100)) / rows


def _edit_rows(vi: VectorIndex, paths: list[str]) -> None:
    """What a sync does for edited notes: their rows deleted, written again (a new data file)."""
    table = vi._table()
    where = f"path IN ({','.join(repr(p) for p in paths)})"
    again = table.search().where(where).select(vi._schema().names).limit(None).to_arrow()
    table.delete(where)
    table.add(again.select(vi._schema().names).cast(vi._schema()))


def test_the_version_prune_leaves_an_indexed_table_to_the_ann_upkeep(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """LanceDB's ``optimize`` on an indexed table remaps the index over the files it rewrote, and
    the remapped index no longer narrows a query to its partitions (half the table for one probe
    here). The prune ran it every 20 versions: it must not touch an indexed table, the upkeep
    (which trains the index after it) prunes instead."""
    root, store, vi, vecs, _rng = _make_table(tmp_path / "vault")
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    vi.ann_from = 0
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["built"] is True and _narrow_share(vi, vecs) < 1 / 3
    paths = sorted({p for p in vi._table().search().select(["path"]).limit(None).to_arrow().column("path").to_pylist()})
    _edit_rows(vi, paths[:3])
    monkeypatch.setattr(vectors_mod, "PRUNE_EVERY_VERSIONS", 1)
    report = VectorReport(vi.key)
    report.notes_embedded = 3
    vi._prune_versions(store, report)
    assert _narrow_share(vi, vecs) < 1 / 3
    assert report.pruned is None
    # the upkeep clears the deleted rows before training (training over them took 8x as long)
    # and prunes old versions
    assert vectors_mod._table_stats(vi._table())["num_deleted_rows"] > 0
    monkeypatch.setattr(vectors_mod, "ANN_FLAT_ROWS", 1)
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report)
    assert report.ann["retrained_for"] > 1 and report.ann["deleted_rows"] > 0
    assert "deleted rows cleared first" in report.summary()
    assert vectors_mod._table_stats(vi._table())["num_deleted_rows"] == 0
    assert _narrow_share(vi, vecs) < 1 / 3
    assert store.get_meta(f"vectors_pruned_at:{vi.name}") == str(vi._table().version)


def test_a_deferred_ann_upkeep_is_reported_then_run_apart_and_keeps_the_sync_mark(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from memory_hub.index.vector_stamp import META_CURRENT, holding_mark

    root, store, vi, vecs, _rng = _make_table(tmp_path / "vault")
    monkeypatch.setattr(vectors_mod, "ANN_ROWS_PER_PARTITION", 64)
    vi.ann_from = 0
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report, defer=True)
    assert report.ann["built"] is True  # the first build is never deferred: search waits for it
    paths = sorted(set(vi._table().search().select(["path"]).limit(None).to_arrow().column("path").to_pylist()))
    _edit_rows(vi, paths[:40])
    monkeypatch.setattr(vectors_mod, "ANN_FLAT_ROWS", 10)
    report = VectorReport(vi.key)
    vi._maintain_ann(store, report, defer=True)
    assert report.ann is None and report.ann_due["retrained_for"] > 10 and report.ann_flat_rows > 10
    assert "left to a background thread" in report.summary() and report.as_dict()["ann_due"] == report.ann_due
    table = vi._table()
    assert table.index_stats(vi._ann_index(table).name).num_unindexed_rows > 10  # not trained
    stamp = store.get_meta(f"{vectors_mod.META_VERSION}:{vi.name}")
    vi._mark_current(store, "notes-1")
    assert holding_mark(store, vi.fingerprint, "notes-1") is not None
    done = vi.maintain_ann(store)
    assert done is not None and done["built"] is True and done["retrained_for"] > 10
    table = vi._table()
    assert table.index_stats(vi._ann_index(table).name).num_unindexed_rows == 0
    # the upkeep changed the table's files, not its rows: the last sync's mark still holds, so the
    # next sync compares only the notes it is told about; searchers were told to look again
    assert holding_mark(store, vi.fingerprint, "notes-1") is not None
    assert store.get_meta(f"{vectors_mod.META_VERSION}:{vi.name}") != stamp
    assert vi.maintain_ann(store) is None  # nothing due any more
    assert store.get_meta(META_CURRENT)
