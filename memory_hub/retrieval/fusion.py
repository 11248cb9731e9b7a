"""Fusion: combine the channels' ranked lists into one order, in proportion to their evidence.

Reciprocal Rank Fusion combines ranked lists without comparing their incomparable scores; the
head of its order is then re-sorted by the raw scores (``calibrate.py``). Both trust every
channel equally on every query, and a channel with no real evidence for *this* query still fills
its list: BM25 ranks the notes that share one loan word with an English question over Japanese
notes; e5 ranks some notes first for ``zyxquorble``. Fused with equal trust, such a list drags a
strong channel's hits down (measured on the natural questions: English→Japanese hit@5 0.375
fused, 0.50 from the vectors alone).

So each channel's weight is scaled, per query, by how much evidence it has (``Evidence``):

* lexical — ``coverage``: the IDF-weighted share of the query's terms that its best matching note
  holds (``lexical.coverage``): 1.0 when one note holds every term; near 0 when the notes match
  only the commonest words or a stray loan word;
* vectors — ``separation``: how far the best note's cosine stands above the other candidates', in
  standard deviations of their scores. e5's cosines sit in a narrow band (0.75–0.90) whatever the
  query, so the level says little; a best note that does not stand out is noise.

Below a channel's ``low`` its weight is 0 (it is left out), above ``high`` it is full, linear in
between (``ramp``). Two shapes of query say which channel cannot judge them, whatever its scores:

* a prose question with no CJK over a vault written mostly in CJK (``Evidence.cross_script``):
  the words it shares with the notes are loan words ("Sync", "CLI", "file"), found in the notes
  that quote English, not in the one that answers; coverage cannot tell, so the lexical weight can be
  scaled by ``cross_script_lexical`` (natural questions en→ja: MRR 0.52 fused, 0.56 vectors alone);
* a one-term query (``Evidence.terms``: ``Vim``, ``FSRS``, ``外観``): e5 has nearly nothing to embed
  and ranks notes about something like it above the notes that say it, so the vector weight can be
  scaled by ``short_vector_factor`` (identifier and short-term hit@1 0.90 / 0.89 fused, lexical
  alone 0.94 / 0.96).

Both are off by default: cross-validation did not choose them (``FusionParams``). Neither did it
choose two more (kept as settings): reading the lexical evidence from informative terms only
(``Evidence.informative``) and letting each channel's best notes into the calibrated head
(``admit_channel_heads``); both help the natural questions in sample and cost LoCoMo a little.

The feedback channel (``search.feedback_channel``) is grouped with the vectors: its words come
from the vector channel's best notes, so it is as trustworthy as they are.

When most of the query (IDF-weighted) is words the vault has never seen, in a script the vault
writes in (``Evidence.unknown``, ``lexical.unknown_share``), and nothing is pinned, the result is
flagged ``low_confidence``: callers say so instead of presenting three random notes. (e5's
cosines cannot tell: on obsidian-help-en, ``zyxquorble``'s best note scores 0.844, amid the
answerable questions' 0.82–0.87.)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .calibrate import CALIBRATION_WEIGHTS, HEAD, calibrate, permute_scores

RRF_K = 60

# RRF weight per channel, from sweeps on the dev sets (README, "Benchmarks").
# * words 1.0: the word channel (stemmed words, CJK bigrams) is the best single ranker.
# * trigram 0.2: a low-weight recall channel for substrings the word channel cannot match
#   (``auth`` in ``authentication``, partial identifiers); at equal weight it costs SciFact and
#   JSQuAD (trigram sees only the 3+ character parts of a Japanese query). It votes only for notes the
#   word channel did not rank (``FusionParams.trigram_recall_only``, ``recall_only``).
# * vectors 0.5: multilingual-e5-small alone is below BM25 on the dev sets; at half weight it adds
#   what lexical misses without outvoting it.
# * feedback 0.5: pseudo-relevance feedback (``search.feedback_channel``: the query's words plus the
#   distinctive words of the vector channel's best 3 notes, BM25). Chosen by 5-fold
#   cross-validation over SciFact, JSQuAD, LoCoMo and the natural questions in 4 folds of 5
#   (the fifth: off); in sample NQ 0.7772 → 0.7886, SciFact 0.7255 → 0.7286, JSQuAD and LoCoMo
#   unchanged (``cross_validate.py --grid recall``; results/cv.json).
#   Shipped at 0.0 (off) all the same: on the final main it costs ~10 ms p50 inside search on
#   obsidian-hub (hybrid+graph 25.9 -> 31.3 ms quiet; MCP stdio against qmd 0.83 -> 1.03) for +0.01
#   hit@5 on the natural questions, and issue 15 asks for latency unchanged. 0.5 turns it on.
CHANNEL_WEIGHTS: dict[str, float] = {"words": 1.0, "trigram": 0.2, "vectors": 0.5, "feedback": 0.0}


def rrf(rankings: Mapping[str, Sequence[int]], k: int = RRF_K,
        weights: Mapping[str, float] | None = None) -> dict[int, float]:
    """``{channel: [id, …best first]}`` → ``{id: Σ weight / (k + rank)}`` with ranks from 1."""
    scores: dict[int, float] = {}
    for channel, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(channel, 1.0)
        if w <= 0:
            continue
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


def order(scores: Mapping[int, float]) -> list[int]:
    """Ids by descending score, ties broken by id for determinism."""
    return sorted(scores, key=lambda i: (-scores[i], i))


def ramp(value: float | None, low: float, high: float) -> float:
    """0 below ``low``, 1 above ``high``, linear between; a channel that did not run (None) has 0."""
    if value is None:
        return 0.0
    if value >= high:
        return 1.0
    if value <= low or high <= low:
        return 0.0
    return (value - low) / (high - low)


def separation(scores: Sequence[float]) -> float | None:
    """How many standard deviations the best score stands above the others' mean (None for < 3)."""
    if len(scores) < 3:
        return None
    rest = list(scores[1:])
    mean = sum(rest) / len(rest)
    std = (sum((s - mean) ** 2 for s in rest) / len(rest)) ** 0.5
    return (scores[0] - mean) / max(std, 1e-6)


@dataclass(frozen=True)
class FusionParams:
    """Every setting of fusion and calibration (chosen by cross-validation, ``benchmarks/cross_validate.py``)."""

    weights: Mapping[str, float] = field(default_factory=lambda: dict(CHANNEL_WEIGHTS))
    calibration: Mapping[str, float] = field(default_factory=lambda: dict(CALIBRATION_WEIGHTS))
    head: int = HEAD
    # The lexical channel's weight ramps from 0 at term coverage 0.2 to full at 0.6: chosen by 5-fold
    # cross-validation over JSQuAD, LoCoMo and the natural questions (4 of 5 folds; results/cv.json).
    lexical_low: float = 0.2
    lexical_high: float = 0.6
    vector_low: float = 0.0
    vector_high: float = 0.0
    # A query this much made of words the vault has never seen (and with nothing pinned) is
    # low-confidence. 0.45 (was 0.5): every fold of a 5-fold cross-validation over all four sets
    # lowered it, three to 0.4 and two to 0.45 (results/cv.json); 0.45 is the change all five
    # support. 0.4 would also flag "mesh routing setup" in a seven-note vault (one unseen word of
    # three), and recall would stay silent. Only flags change, never an order.
    unknown_low_confidence: float = 0.45
    # The lexical weight is multiplied by this for a cross-script query (``Evidence.cross_script``),
    # and the vector weight by ``short_vector_factor`` for a query of at most ``short_query_terms``
    # terms (``Evidence.terms``). Off (1.0 / 0 / 1.0): 5-fold cross-validation over SciFact,
    # JSQuAD, LoCoMo and the natural questions chose off in 4 of 5 folds (the gain, all on the
    # natural questions, is within the 0.002 tolerance of the pooled objective; held out it won
    # 3 folds, tied 1, lost 1). Kept as settings so a larger question set can choose them
    # (``cross_validate.py --grid evidence``; results/cv.json, README).
    cross_script_lexical: float = 1.0
    short_query_terms: int = 0
    short_vector_factor: float = 1.0
    # Each calibrated channel's best ``channel_head`` notes (by raw score) are let into the head
    # that calibration re-orders, even when RRF left them below it (``admit_channel_heads``).
    channel_head: int = 0
    # Read the lexical evidence from ``Evidence.informative`` (coverage counting only terms in
    # fewer than half the notes, the terms BM25 gives any weight) instead of ``coverage``.
    informative_coverage: bool = False
    # The feedback channel votes only when the lexical evidence is below this (None: always):
    # a query whose words one note holds needs no words borrowed from the vector channel's notes.
    feedback_below: float | None = None
    # The trigram channel votes only for notes the word channel did not rank (``recall_only``).
    # 5-fold CV over SciFact, JSQuAD, LoCoMo and the natural questions (results/cv-sets4*.json):
    # scored on the lexical mode every fold chose it (SciFact 0.698 → 0.701, JSQuAD 0.939 → 0.948,
    # LoCoMo sessions 0.891 → 0.890); on hybrid+graph it is equal or better on every set but within
    # the CV's tolerance, so there the folds kept the earlier setting. On: the lexical channel
    # must beat its plain baseline, and the hybrid loses nothing.
    trigram_recall_only: bool = True
    # The vector channel's best note takes at least place ``vector_slot`` of the fused order
    # (1-based; 0: off), when its separation is at least ``vector_slot_separation``
    # (``promote_best``). RRF and calibration reward a note for being in both channels' lists, so
    # the vector channel's clear winner that no lexical channel found ends below notes with a few
    # common words and a middling cosine (natural questions: "jump to a file quickly by typing
    # part of its name" — Quick switcher, vector 1st, fused 11th). Chosen by 5-fold CV over all
    # four sets (results/cv-slot.json): every fold chose a slot, three of them 2, two 3; no fold
    # chose the separation condition (within the tolerance of no condition).
    vector_slot: int = 2
    vector_slot_separation: float = 0.0
    # The vector channel's second note takes at least this place (0: off), on the same condition.
    vector_second_slot: int = 0

    def reads_informative(self) -> bool:
        """Whether fusion with these params reads ``Evidence.informative`` (search measures it only then)."""
        return self.informative_coverage  # feedback_below reads it only through lexical_cover, i.e. only then


DEFAULT_PARAMS = FusionParams()


@dataclass
class Evidence:
    """What each channel found for this query, before any weighting (None: the channel did not run)."""

    coverage: float | None = None
    separation: float | None = None
    unknown: float | None = None  # share of the query the vault has never seen (lexical.unknown_share)
    terms: int | None = None  # distinct word-table terms of the query (``search.query_length``)
    # A prose query with no CJK over a vault written mostly in CJK: the words it shares with the
    # notes are loan words (``lexical.cjk_share``), weaker evidence than coverage says.
    cross_script: bool = False
    # ``coverage`` counting only the terms in fewer than half the notes (``lexical.coverages``):
    # FTS5's BM25 gives a term in half the notes or more an IDF of 1e-6, so a note holding
    # "add", "note" and "hub" (every obsidian-hub note's footer says all three) is no evidence,
    # however completely it covers the query.
    informative: float | None = None

    def confident(self, params: FusionParams) -> bool:
        """Whether the channels can have found anything real: not when the vault has never seen
        most of what the query says (``FusionParams.unknown_low_confidence``)."""
        return self.unknown is None or self.unknown < params.unknown_low_confidence

    def lexical_cover(self, params: FusionParams) -> float | None:
        """The coverage the lexical ramp reads: the informative one when ``params`` ask for it."""
        return self.informative if params.informative_coverage and self.informative is not None else self.coverage

    def factors(self, params: FusionParams) -> dict[str, float]:
        cover = self.lexical_cover(params)
        lexical = ramp(cover, params.lexical_low, params.lexical_high) if cover is not None else 0.0
        if cover is not None and params.lexical_high <= 0:
            lexical = 1.0
        vectors = ramp(self.separation, params.vector_low, params.vector_high) if self.separation is not None else 0.0
        if self.separation is not None and params.vector_high <= 0:
            vectors = 1.0
        if self.cross_script:
            lexical *= params.cross_script_lexical
        if self.terms is not None and self.terms <= params.short_query_terms:
            vectors *= params.short_vector_factor
        return {"lexical": lexical, "vectors": vectors, "feedback": vectors if self.wants_feedback(params) else 0.0}

    def wants_feedback(self, params: FusionParams) -> bool:
        """Whether the feedback channel may vote: only while the lexical evidence is below
        ``params.feedback_below``, and only when it has a weight at all."""
        if params.weights.get("feedback", 0.0) <= 0:
            return False
        cover = self.lexical_cover(params)
        return params.feedback_below is None or cover is None or cover < params.feedback_below

    def as_dict(self, params: FusionParams) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.coverage is not None:
            out["coverage"] = round(self.coverage, 3)
        if self.informative is not None:
            out["informative"] = round(self.informative, 3)
        if self.separation is not None:
            out["separation"] = round(self.separation, 3)
        if self.unknown is not None:
            out["unknown"] = round(self.unknown, 3)
        if self.cross_script:
            out["cross_script"] = True
        wants = self.wants_feedback(params)
        out["weight"] = {k: round(v, 3) for k, v in self.factors(params).items() if k != "feedback" or wants}
        return out


def recall_only(channels: Mapping[str, Sequence[tuple[int, float]]], channel: str = "trigram",
                over: str = "words") -> Mapping[str, Sequence[tuple[int, float]]]:
    """``channels`` with ``channel`` keeping only the notes ``over`` did not rank.

    The trigram channel matches the query's rarer terms as substrings; a note the word channel
    ranked already holds those terms as words, so a second vote for it counts the same evidence
    twice and reorders the word channel's head by trigram BM25 (SciFact lexical: 0.698 fused,
    0.700 for the word channel alone). Its own job is the notes the word channel cannot find
    (``auth`` in ``authentication``, part of an identifier): those keep their vote."""
    if not channels.get(channel) or not channels.get(over):
        return channels
    seen = {i for i, _ in channels[over]}
    return {**channels, channel: [(i, s) for i, s in channels[channel] if i not in seen]}


# The feedback channel's terms come from the vector channel's best notes: it is as trustworthy as
# they are (``Evidence.factors``), and votes only while the lexical evidence is weak.
CHANNEL_GROUP = {"words": "lexical", "trigram": "lexical", "bm25": "lexical", "vectors": "vectors",
                 "feedback": "feedback"}


@dataclass
class Fused:
    """Fusion's answer: the order, each note's score, what calibration did, the weights used."""

    order: list[int]
    scores: dict[int, float]
    calibration: dict[int, dict[str, Any]]
    weights: dict[str, float]
    low_confidence: bool
    calibrate_ms: float | None = None  # None when calibration did not run


def admit_channel_heads(ordered: list[int], raw: Mapping[str, Sequence[tuple[int, float]]],
                        weights: Mapping[str, float], head: int, per_channel: int,
                        scores: dict[int, float]) -> list[int]:
    """``ordered`` with each weighted channel's best ``per_channel`` notes (by raw score) moved up
    to the last places of the first ``head``, where calibration judges them by their raw scores.

    RRF rewards a note for being in *both* lists: in a small vault the vector channel's 100
    candidates are half the notes, so nearly every word match also collects a vector vote, and the
    word channel's clear winner (BM25 15.3 against 8.0 for the next) found by no vector ends below
    RRF's top 30, where calibration never sees it (natural questions: 自分のノートに影響を与えずに
    機能を試してみたい). Admitted notes take the head's lowest score values (the notes they
    displace move down), and scores are permuted to follow the new order, so nothing downstream
    sees a new scale."""
    if head <= 0:
        return ordered
    top = set(ordered[:head])
    wanted: list[int] = []
    for name in weights:
        for i, _ in list(raw.get(name) or ())[:per_channel]:
            if i not in top and i in scores and i not in wanted:
                wanted.append(i)
    if not wanted:
        return ordered
    keep = ordered[: max(0, head - len(wanted))]
    admitted = keep + wanted[: head - len(keep)]
    chosen = set(admitted)
    new_order = admitted + [i for i in ordered if i not in chosen]
    permute_scores(ordered, new_order, scores)
    return new_order


def promote_best(ordered: list[int], best: int | None, slot: int, scores: dict[int, float]) -> list[int]:
    """``ordered`` with note ``best`` moved up to place ``slot`` (1-based) when it sits below it;
    the notes it passes move down one. Scores follow the order (``permute_scores``), so graph
    expansion and the rerank floor see the same scale as before."""
    if slot <= 0 or best is None or best not in scores:
        return ordered
    at = ordered.index(best)
    if at < slot:
        return ordered
    new_order = ordered[: slot - 1] + [best] + [i for i in ordered[slot - 1:] if i != best]
    permute_scores(ordered[: at + 1], new_order[: at + 1], scores)
    return new_order


def fuse(channels: Mapping[str, Sequence[tuple[int, float]]], raw: Mapping[str, Sequence[tuple[int, float]]],
         evidence: Evidence, params: FusionParams = DEFAULT_PARAMS, calibrated: bool = True,
         extra: Sequence[int] = ()) -> Fused:
    """RRF over ``channels`` with evidence-scaled weights, then calibration of the head by ``raw``,
    then the vector channel's best note kept at place ``params.vector_slot`` (``promote_best``).

    ``extra``: ids that must be candidates even if no channel has them (exact-identifier pins; they
    also make a result confident). When every channel is below its evidence floor the channels are
    fused at their plain weights, so something is still returned.
    """
    factors = evidence.factors(params)
    if params.trigram_recall_only:
        channels = recall_only(channels)
    present = [name for name in channels if channels[name]]
    scaled = {name: params.weights.get(name, 1.0) * factors[CHANNEL_GROUP.get(name, "lexical")] for name in present}
    plain = all(w <= 0 for w in scaled.values())
    low = not extra and not evidence.confident(params)
    weights = {name: params.weights.get(name, 1.0) for name in present} if plain else scaled
    scores = rrf({name: [i for i, _ in channels[name]] for name in present}, weights=weights)
    for i in extra:
        scores.setdefault(i, 0.0)
    ordered = order(scores)
    calibration: dict[int, dict[str, Any]] = {}
    calibrate_ms = None
    if calibrated:
        t0 = time.perf_counter()
        cal_weights = {name: w * (1.0 if plain else factors[CHANNEL_GROUP.get(name, "lexical")])
                       for name, w in params.calibration.items()}
        cal_weights = {name: w for name, w in cal_weights.items() if w > 0}
        if params.channel_head > 0:
            ordered = admit_channel_heads(ordered, raw, cal_weights, params.head, params.channel_head, scores)
        result = calibrate(ordered, raw, cal_weights, params.head)
        if result.evidence:
            permute_scores(ordered[:params.head], result.order[:params.head], scores)
            calibration = result.evidence
            ordered = result.order
        calibrate_ms = (time.perf_counter() - t0) * 1000
        vectors = raw.get("vectors")
        if (params.vector_slot > 0 and vectors and weights.get("vectors", 0.0) > 0
                and (evidence.separation or 0.0) >= params.vector_slot_separation):
            ordered = promote_best(ordered, vectors[0][0], params.vector_slot, scores)
            if params.vector_second_slot > 0 and len(vectors) > 1:
                ordered = promote_best(ordered, vectors[1][0], params.vector_second_slot, scores)
    return Fused(ordered, scores, calibration, weights, low, calibrate_ms)
