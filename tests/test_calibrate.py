"""Score calibration: the head of the RRF order re-sorted by standardised raw channel scores."""

from __future__ import annotations

from test_hybrid import embedded, searcher  # noqa: F401  (fixtures: a real embedded vault)

from memory_hub.retrieval import fusion
from memory_hub.retrieval.calibrate import calibrate, permute_scores, standardise
from memory_hub.retrieval.search import search


def test_standardise() -> None:
    z = standardise([(1, 10.0), (2, 4.0), (3, 1.0)])
    assert abs(sum(z.values())) < 1e-9
    assert z[1] > z[2] > z[3]
    assert standardise([(1, 0.8), (2, 0.8)]) == {1: 0.0, 2: 0.0}
    assert standardise([]) == {}


def test_a_clear_winner_beats_a_photo_finish() -> None:
    # RRF sees note 2 first in both channels by a hair; note 1 wins BM25 by a mile and is close on vectors.
    bm25 = [(2, 10.2), (1, 30.0), (3, 10.0), (4, 9.9)]
    bm25.sort(key=lambda t: -t[1])
    vectors = [(2, 0.86), (1, 0.859), (3, 0.80), (4, 0.79)]
    rrf_order = [2, 1, 3, 4]
    out = calibrate(rrf_order, {"bm25": bm25, "vectors": vectors})
    assert out.order[0] == 1
    assert set(out.order) == {1, 2, 3, 4}
    assert out.evidence[1]["z"]["bm25"] > out.evidence[2]["z"]["bm25"]
    assert (out.evidence[1]["before"], out.evidence[1]["after"]) == (2, 1)


def test_only_the_head_moves_and_notes_without_evidence_keep_their_slot() -> None:
    order = [10, 11, 12, 13, 14, 15]
    raw = {"bm25": [(12, 9.0), (11, 2.0), (10, 1.0), (15, 50.0)], "vectors": [(12, 0.9), (11, 0.8), (10, 0.7)]}
    out = calibrate(order, raw, head=4)
    assert out.order[3] == 13  # no raw score anywhere (e.g. a graph join): stays at position 4
    assert out.order[0] == 12
    assert out.order[4:] == [14, 15]  # the tail is RRF's, even though 15 has the best BM25
    assert 13 not in out.evidence


def test_one_channel_is_nothing_to_calibrate_against() -> None:
    order = [3, 2, 1]
    out = calibrate(order, {"bm25": [(1, 9.0), (2, 5.0), (3, 1.0)]})
    assert out.order == order and out.evidence == {}
    assert calibrate(order, {"bm25": [(1, 9.0)], "vectors": []}).order == order


def test_permute_scores_keeps_the_scale_and_the_new_order() -> None:
    scores = {1: 0.03, 2: 0.03, 3: 0.02, 4: 0.01}
    before = [1, 2, 3]
    after = [3, 1, 2]
    permute_scores(before, after, scores)
    assert fusion.order(scores)[:3] == after
    assert scores[3] == 0.03 and scores[4] == 0.01
    assert scores[1] < scores[3] and scores[2] < scores[1]


def test_search_explains_calibration_and_can_turn_it_off(searcher) -> None:  # noqa: F811
    store, vi = searcher.store, searcher.vectors
    query = "promote the standby replica when the primary database dies"
    on = search(store, query, k=6, mode="hybrid", vectors=vi, explain=True)
    off = search(store, query, k=6, mode="hybrid", vectors=vi, explain=True, calibrated=False)
    assert on.hits[0].path == "db-failover.md"
    assert "calibrate" in on.timings_ms and "calibrate" not in off.timings_ms
    explained = [h for h in on.hits if h.calibration]
    assert explained and all({"before", "after", "z"} <= set(h.calibration) for h in explained)
    assert {"bm25", "vectors", "combined"} <= set(explained[0].calibration["z"])
    assert all(h.calibration is None for h in off.hits)
    # lexical mode has one channel: nothing to calibrate, nothing reported
    lex = search(store, query, k=6, mode="lexical", explain=True)
    assert all(h.calibration is None for h in lex.hits)


def test_calibration_never_unpins_an_exact_identifier(searcher) -> None:  # noqa: F811
    result = search(searcher.store, "ERR_042 database failover primary standby replica", k=6, mode="hybrid",
                    vectors=searcher.vectors)
    assert result.hits[0].path == "deploy-log.md" and result.hits[0].exact


def test_same_candidates_either_way(searcher) -> None:  # noqa: F811
    """Calibration re-orders; it never adds or drops candidates."""
    query = "database failover"
    a = {h.path for h in search(searcher.store, query, k=50, mode="hybrid", vectors=searcher.vectors).hits}
    b = {h.path for h in search(searcher.store, query, k=50, mode="hybrid", vectors=searcher.vectors,
                                calibrated=False).hits}
    assert a == b


def test_trigram_votes_only_for_notes_the_word_channel_lacks() -> None:
    channels = {"words": [(1, 9.0), (2, 8.0), (3, 7.0)], "trigram": [(3, 5.0), (9, 4.0)]}
    kept = fusion.recall_only(channels)
    assert kept["trigram"] == [(9, 4.0)] and kept["words"] == channels["words"]
    evidence = fusion.Evidence(coverage=1.0)
    recall = fusion.fuse(channels, {}, evidence, fusion.DEFAULT_PARAMS, calibrated=False)
    assert recall.order == [1, 2, 3, 9]  # the word channel's order, the trigram-only note after it
    from dataclasses import replace

    both = fusion.fuse(channels, {}, evidence, replace(fusion.DEFAULT_PARAMS, trigram_recall_only=False),
                       calibrated=False)
    assert both.order[0] == 3  # a second vote for note 3 lifted it over the word channel's first


def _paraphrase_channels() -> tuple[dict, dict]:
    """A paraphrased question: the word channel ranks 40 notes that share its common words, the
    vector channel's clear winner (note 100) holds none of them; notes 1-10 are in both lists."""
    words = [(i, 20.0 - 0.4 * i) for i in range(1, 41)]
    vectors = [(100, 0.90)] + [(i, 0.85 - 0.002 * i) for i in range(1, 41)]
    return {"words": words, "vectors": vectors}, {"bm25": words, "vectors": vectors}


def test_the_vector_channels_clear_winner_keeps_a_place_in_the_head() -> None:
    from dataclasses import replace

    channels, raw = _paraphrase_channels()
    evidence = fusion.Evidence(coverage=1.0, separation=fusion.separation([s for _, s in raw["vectors"]]))
    off = fusion.fuse(channels, raw, evidence, replace(fusion.DEFAULT_PARAMS, vector_slot=0))
    assert off.order.index(100) >= 5  # in both lists beats first in one: RRF and calibration sink it
    on = fusion.fuse(channels, raw, evidence, fusion.DEFAULT_PARAMS)
    assert fusion.DEFAULT_PARAMS.vector_slot == 2 and on.order.index(100) == 1
    assert on.order[0] == off.order[0]  # the fused first stays first
    assert [i for i in on.order if i != 100] == [i for i in off.order if i != 100]  # nothing else moves but down one
    assert sorted(on.scores.values(), reverse=True) == [on.scores[i] for i in on.order]  # scores follow the order
    assert sorted(on.scores.values()) == sorted(off.scores.values())  # the same scale
    # a query whose vectors do not stand out (separation below the setting) is left as fused
    strict = fusion.fuse(channels, raw, evidence, replace(fusion.DEFAULT_PARAMS, vector_slot_separation=99.0))
    assert strict.order == off.order
    # with the vector channel weighed out (lexical-only evidence) nothing is promoted
    no_vectors = fusion.fuse({"words": channels["words"]}, {"bm25": raw["bm25"]}, fusion.Evidence(coverage=1.0))
    assert 100 not in no_vectors.order


def test_the_vector_channels_second_note_can_be_given_a_place_too() -> None:
    """``vector_second_slot`` (tried by cross-validation, off by default): the vector channel's
    second note is lifted the same way, after the first, and only when it sits below its place."""
    from dataclasses import replace

    channels, raw = _paraphrase_channels()
    channels["vectors"] = raw["vectors"] = [(100, 0.90), (101, 0.89)] + [(i, 0.85 - 0.002 * i) for i in range(1, 41)]
    evidence = fusion.Evidence(coverage=1.0, separation=fusion.separation([s for _, s in raw["vectors"]]))
    assert fusion.DEFAULT_PARAMS.vector_second_slot == 0
    first_only = fusion.fuse(channels, raw, evidence)
    assert first_only.order.index(100) == 1 and first_only.order.index(101) >= 5
    both = fusion.fuse(channels, raw, evidence, replace(fusion.DEFAULT_PARAMS, vector_second_slot=4))
    assert both.order.index(100) == 1 and both.order.index(101) == 3
    assert [i for i in both.order if i != 101] == [i for i in first_only.order if i != 101]
    assert sorted(both.scores.values(), reverse=True) == [both.scores[i] for i in both.order]


def test_promote_best_moves_only_a_note_below_its_slot() -> None:
    scores = {1: 0.5, 2: 0.4, 3: 0.3, 4: 0.2}
    assert fusion.promote_best([1, 2, 3, 4], 2, 2, dict(scores)) == [1, 2, 3, 4]  # already there
    assert fusion.promote_best([1, 2, 3, 4], 1, 2, dict(scores)) == [1, 2, 3, 4]  # above it stays
    moved = dict(scores)
    assert fusion.promote_best([1, 2, 3, 4], 4, 2, moved) == [1, 4, 2, 3]
    assert moved[1] == 0.5 and moved[4] == 0.4 and moved[2] == 0.3 and moved[3] == 0.2
    assert fusion.promote_best([1, 2, 3], 9, 2, dict(scores)) == [1, 2, 3]  # not a candidate
    assert fusion.promote_best([1, 2, 3], 3, 0, dict(scores)) == [1, 2, 3]  # off
