"""The search pipeline: a query in, the best few notes out, with a record of how each got there.

Stages: analyse the query → channels (trigram BM25, word/bigram BM25, chunk vectors scored per note
by its best chunks; the embedder is asked the query without the words a filtered scope has in
nearly every note, ``lexical.ubiquitous_terms``; pseudo-relevance feedback: the query's words plus
the distinctive words of the vector channel's best notes, BM25, ``feedback_channel``) → fuse with RRF (k=60) → calibrate the head of
that order by the channels' raw scores (``calibrate.py``) → graph expansion (1–2 hop wikilink
neighbours of the top hits join with a decayed score) → rerank (blended by position) → top k. Notes that contain every
exact identifier of the query (``ERR_042``, ``partner-api``) are pinned on top after every stage, and
so are the notes the query names: its title or an alias is the whole query (``外観``, ``SEO``).

Modes pick the stages: ``lexical``, ``vector``, ``hybrid``, ``hybrid+graph``, ``hybrid+rerank``,
``hybrid+graph+rerank``. When a vault has no vectors yet, vector channels are skipped with a
warning rather than failing: search must answer even before the first embedding run.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..index import cache, graph, lexical
from ..index.lexical import Filters
from ..index.store import Store
from ..index.terms import (
    QueryTerms,
    analyze_query,
    bare_terms,
    has_cjk,
    is_strong_identifier,
    normalize,
    without_terms,
)
from ..vault.markdown import HEADING_MARK, field_block, plain_text, reader_text, url_end_at
from . import fusion
from .fusion import DEFAULT_PARAMS, Evidence, FusionParams
from .rerank import DOC_CHARS, RERANK_DEPTH, Reranker, RerankUnavailable, blend

if TYPE_CHECKING:
    from ..index.vectors import VectorIndex

CANDIDATES = 100  # per channel


class QueryError(ValueError):
    """A query that cannot be run (empty, or too long); the message says why."""


MAX_QUERY_CHARS = 2000


@dataclass
class Hit:
    """One ranked note. ``channels`` maps a channel name to its rank and score for this note."""

    path: str
    title: str
    description: str
    kind: str
    date: str | None
    score: float
    snippet: str = ""
    tags: list[str] = field(default_factory=list)
    exact: bool = False  # pinned: named by the query (title or alias) or contains its every exact identifier
    channels: dict[str, dict[str, float]] = field(default_factory=dict)
    graph: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    note_id: int = 0

    def as_dict(self, explain: bool = False) -> dict[str, Any]:
        data = asdict(self)
        data.pop("note_id")
        if not explain:
            for key in ("channels", "calibration", "graph", "rerank"):
                data.pop(key)
        return data


@dataclass
class SearchResult:
    query: str
    hits: list[Hit]
    terms: QueryTerms
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    vector_query: str | None = None  # what the embedder was asked, when the vector channel ran
    # No channel found real evidence for this query (fusion.Evidence.confident) and nothing was
    # pinned: the hits are only the nearest notes, and every caller says so.
    low_confidence: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)  # per-channel evidence and weights (--explain)


LOW_CONFIDENCE_HINT = ("low confidence: the vault has no note with most of this query's words, so no channel "
                       "has real evidence; these are only the nearest notes — try other words, or the "
                       "other language (日本語/English)")


def check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query.strip()


def lexical_rankings(store: Store, terms: QueryTerms, filters: Filters, limit: int = CANDIDATES,
                     want_raw: bool = True) -> tuple[dict[str, list[tuple[int, float]]], list[tuple[int, float]]]:
    """Both lexical channels, each as [(note id, score)] best first, and the raw BM25 ranking
    (plain OR over the word table) that score calibration reads — fetched only when ``want_raw``
    (a lexical-only search has nothing to calibrate against)."""
    conn = store.conn
    words, bm25 = lexical.word_rankings(conn, terms, filters, limit, want_raw)
    return {"trigram": lexical.search_trigram(conn, terms, filters, limit), "words": words}, bm25


# Above this many distinct terms a query is prose, and only identifiers that cannot be ordinary
# words (snake_case, versions, camelCase, long digit runs) are pinned: in a sentence such as
# "IL-6 levels rise after exercise" the ranking, not the pin, should decide. Pinning every
# letter+digit token in SciFact's claims cost 0.012 nDCG@10.
PIN_ANY_IDENTIFIER_UP_TO = 4


def pinned_identifiers(terms: QueryTerms) -> list[str]:
    """The query's identifiers whose containing notes are pinned first: what it quotes, always;
    identifier-shaped tokens (``terms.is_identifier``) in a short query; in prose only the strong ones."""
    if len(terms.all_terms) <= PIN_ANY_IDENTIFIER_UP_TO:
        found = list(terms.identifiers)
    else:
        found = [t for t in terms.identifiers if is_strong_identifier(t)]
    quoted = {q.lower() for q in terms.quoted}
    return list(terms.quoted) + [t for t in found if t.lower() not in quoted]


COVERAGE_NOTES = 3  # the lexical channel's best few notes whose term coverage is its evidence


def lexical_evidence(store: Store, terms: QueryTerms, ranked: dict[str, list[tuple[int, float]]],
                     informative: bool = True) -> tuple[float, float | None]:
    """The lexical channels' evidence for this query (``fusion.Evidence.coverage`` and, when
    ``informative``, ``.informative``): the share of the query's terms, IDF-weighted, that one of
    the word channel's best notes holds (all terms; only those in fewer than half the notes).
    Notes matched only by the trigram channel matched every one of its (rare) terms: full evidence."""
    words = ranked.get("words") or []
    if words:
        return lexical.coverages(store.conn, terms, [i for i, _ in words[:COVERAGE_NOTES]], informative)
    full = 1.0 if ranked.get("trigram") else 0.0
    return full, (full if informative else None)


def query_length(terms: QueryTerms) -> int:
    """How many distinct word-table terms the query has (words, CJK bigrams, single CJK
    characters): ``外観`` and ``FSRS`` are 1, a Japanese question is a dozen bigrams."""
    return len(dict.fromkeys(terms.words + terms.prefixes))


CROSS_SCRIPT_WORDS = 3  # a query of at least this many space-separated words is prose, not a name or a code


def cross_script(store: Store, query: str, terms: QueryTerms) -> bool:
    """Whether ``query`` is prose without CJK asked of a vault written mostly in CJK
    (``lexical.cjk_share``): the words it shares with the notes are loan words there. Shorter
    queries (``x-obsidian-custom-domain``, ``ob sync-setup``, ``2FA``) and quoted ones mean
    what they say, whatever the script."""
    if has_cjk(query) or terms.quoted or len(query.split()) < CROSS_SCRIPT_WORDS:
        return False
    return lexical.cjk_share(store.conn, lexical.CJK_DOMINANT_SHARE)


def pin_exact(order: list[int], exact: list[int]) -> list[int]:
    """Move notes containing every exact identifier to the front, keeping their relative order."""
    if not exact:
        return order
    exact_set = set(exact)
    front = [i for i in order if i in exact_set] + [i for i in exact if i not in set(order)]
    return front + [i for i in order if i not in exact_set]


def load_hits(store: Store, ids: list[int], scores: dict[int, float]) -> list[Hit]:
    """Note rows for ``ids``, in that order."""
    if not ids:
        return []
    rows = store.conn.execute(
        "SELECT id, path, title, description, kind, tags, dates FROM notes WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(ids),),
    ).fetchall()
    by_id = {int(r["id"]): r for r in rows}
    hits = []
    for i in ids:
        r = by_id.get(i)
        if r is None:
            continue
        dates = json.loads(r["dates"])
        hits.append(Hit(
            path=r["path"], title=r["title"], description=r["description"], kind=r["kind"],
            date=dates.get("updated") or dates.get("created") or dates.get("date"),
            score=round(scores.get(i, 0.0), 6), tags=json.loads(r["tags"]), note_id=i,
        ))
    return hits


def _first_hit(text: str, terms: list[str]) -> int:
    lower = text.lower()
    hits = [pos for pos in (lower.find(t.lower()) for t in terms if t) if pos >= 0]
    return min(hits) if hits else -1


SCAN_BLOCK = 4096  # characters of a note lower-cased at a time when looking for the first query term


def first_term_at(text: str, terms: list[str]) -> int:
    """``_first_hit(text, terms)``: where the first of ``terms`` occurs in ``text`` (ignoring case),
    or -1, without lower-casing all of a long note when a term occurs early in it.

    CPython lower-cases one character at a time into one character, with two exceptions: ``İ``
    (U+0130) becomes two, and ``Σ`` (U+03A3) becomes ``σ`` or ``ς`` depending on its neighbours.
    A text without either keeps every position when lower-cased, and a block of it lower-cases as
    it does inside the whole; so it is lower-cased a block at a time (blocks overlap by the longest
    term) and the first block with a hit answers. (Most notes qualify: an English note is rarely
    ASCII, one curly quote or emoji is enough.) ASCII text needs no check (``isascii`` is a flag
    CPython keeps), and a term that is not ASCII once lower-cased cannot occur in it. Text with
    either character takes the plain way."""
    if len(text) <= SCAN_BLOCK:
        return _first_hit(text, terms)
    ascii_text = text.isascii()
    if not ascii_text and ("\u0130" in text or "\u03a3" in text):
        return _first_hit(text, terms)
    wanted = [w for w in (t.lower() for t in terms if t) if not ascii_text or w.isascii()]
    if not wanted:
        return -1
    reach = SCAN_BLOCK + max(len(w) for w in wanted) - 1
    for pos in range(0, len(text), SCAN_BLOCK):
        window = text[pos : pos + reach].lower()
        found = [i for i in (window.find(w) for w in wanted) if 0 <= i < SCAN_BLOCK]
        if found:
            return pos + min(found)
    return -1


URL_REACH = 2048  # characters either side of a term's place searched for the URL it may lie in


LINE_SKIPS = 8  # heading or field lines passed over before a snippet settles for the first place


def _title_or_field(text: str, line: int, pos: int) -> bool:
    """Whether the line from ``line`` holding ``pos`` is a heading or a ``Label: value`` field
    (``Plugin ID: granola-sync``): the title and the description say those already."""
    if HEADING_MARK.match(text, line):
        return True
    end = text.find("\n", pos)
    return field_block([text[line: end if end >= 0 else len(text)]])


def readable_term_at(text: str, terms: list[str], at: int) -> int:
    """``at`` (a term's first place in ``text``), or the first later place of a term that is not
    inside a URL nor on a heading or field line, so a snippet shows words a reader sees and the
    title does not already say (a badge's address names the plugin's repository, and ``# Granola
    Sync`` repeats the title, so a query term is often found there first); ``at`` when there is none.
    Only the text around each place is searched for URLs: this runs for every hit."""
    pos, skipped = at, 0
    while pos >= 0:
        url_end = url_end_at(text, pos, URL_REACH)
        line = text.rfind("\n", 0, pos) + 1
        if url_end is not None:
            skip_to = url_end  # look past the URL
        elif skipped < LINE_SKIPS and _title_or_field(text, line, pos):
            skipped += 1
            end = text.find("\n", pos)
            skip_to = end if end >= 0 else len(text)  # look past the line
        else:
            return pos
        nxt = first_term_at(text[skip_to:], terms)
        pos = skip_to + nxt if nxt >= 0 else -1
    return at


_CUT_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*$")  # a link the window's end cut in two: its text


def _past_open_comment(text: str, start: int, best: int) -> int:
    """``start``, moved past the end of a comment it falls inside (a window opened mid-comment would
    show its tail, which ``reader_text`` cannot recognise as a comment)."""
    pre = text[start:best]
    if pre.count("%%") % 2 == 1:
        start += pre.rfind("%%") + 2
        pre = text[start:best]
    close = pre.find("-->")
    if close >= 0 and "<!--" not in pre[:close]:
        start += close + 3
    return start


def _before_open_comment(window: str) -> str:
    """``window`` cut where a comment opens that the window's end leaves open (its text is hidden
    from a reader, and ``reader_text`` removes only whole comments)."""
    if window.count("%%") % 2 == 1:
        window = window[: window.rfind("%%")]
    if window.rfind("<!--") > window.rfind("-->"):
        window = window[: window.rfind("<!--")]
    return window


def snippet(body: str, terms: list[str], width: int = 160, at: int | None = None) -> str:
    """A short window of the body around the first query term found, as plain text.

    Only the window is cleaned up, never the whole body: notes can be long, and this runs for
    every hit of every query. The body is NFKC-normalised (as the index is) only when the raw text
    has no match, e.g. full-width letters in the note. ``at``: ``first_term_at(body, terms)``, when
    the caller has it already (finding the first term in a long note is most of the cost).
    """
    text = body
    best = at if at is not None else _first_hit(text, terms)
    if best < 0 and terms:
        text = normalize(body)
        best = _first_hit(text, terms)
    if best < 0:
        head = re.sub(r"^#.*$", "", text[: width * 4], flags=re.MULTILINE)
        plain = reader_text(plain_text(head))
        return plain[:width] + ("…" if len(plain) > width or len(text) > width * 4 else "")
    block = text.rfind("\n\n", 0, best)
    start = max(0, best - width // 3, block + 2 if block >= 0 else 0)  # not back into the block before
    start = _past_open_comment(text, start, best)
    raw = text[start : start + width * 2]
    window = _before_open_comment(HEADING_MARK.sub("", raw))
    plain = _CUT_LINK.sub(r"\1", reader_text(plain_text(window)))[:width]
    return ("…" if start > 0 else "") + plain + ("…" if start + len(raw) < len(text) else "")


MODES = ("lexical", "vector", "hybrid", "hybrid+graph", "hybrid+rerank", "hybrid+graph+rerank")
DEFAULT_MODE = "hybrid+graph"

CHANNEL_WEIGHTS = fusion.CHANNEL_WEIGHTS  # kept importable from here
GRAPH_SEEDS = 5  # top fused hits whose neighbours may join
GRAPH_HOPS = 2
GRAPH_DECAY = {1: 0.35, 2: 0.15}  # share of the seed's score a neighbour joins with, by hop distance
# Notes with more neighbours than this are hubs (MOCs, index pages). Walking through one reaches
# most of the vault: on obsidian-hub an unrestricted 2-hop walk averaged ~2,500 notes per seed.
GRAPH_FANOUT = 30


@dataclass
class Stages:
    """Which stages a mode runs."""

    lexical: bool
    vectors: bool
    graph: bool
    rerank: bool


def stages(mode: str) -> Stages:
    if mode not in MODES:
        raise QueryError(f"unknown search mode {mode!r}; choose one of {', '.join(MODES)}")
    return Stages(lexical=mode != "vector", vectors=mode != "lexical", graph="graph" in mode, rerank="rerank" in mode)


_default_vectors: dict[str, VectorIndex] = {}


def has_vectors(store: Store) -> bool:
    """Whether any vector sync ever ran for this vault (a cheap look at the meta table)."""
    row = store.conn.execute("SELECT 1 FROM meta WHERE key LIKE 'vectors_version:%' LIMIT 1").fetchone()
    return row is not None


def default_vectors(store: Store) -> VectorIndex | None:
    """The vault's vector index with the default embedder, loaded once per process; None if never built."""
    key = str(store.vault)
    if key not in _default_vectors:
        if not has_vectors(store):
            return None
        from ..index.embed import load_embedder
        from ..index.vectors import VectorIndex

        _default_vectors[key] = VectorIndex(store.vault, load_embedder("auto"))
    return _default_vectors[key]


def graph_expand(store: Store, order: list[int], scores: dict[int, float], filters: Filters,
                 seeds: int = GRAPH_SEEDS, hops: int = GRAPH_HOPS) -> dict[int, dict[str, Any]]:
    """Let wikilink neighbours of the top hits join the candidates. Returns what it did per note.

    A neighbour's score is the best of (its own score, seed score × decay for its hop distance), so
    a note linked from the best hit rises, and one reached only through the graph joins below its
    seed. Neighbours must pass the same filters and be ranked kinds. Walks never pass through hubs
    (more than ``GRAPH_FANOUT`` neighbours).
    """
    conn = store.conn
    effects: dict[int, dict[str, Any]] = {}
    offers: dict[int, tuple[float, int, int]] = {}  # id → (score, hops, seed)
    top = order[:seeds]
    links = graph.cached(conn)  # the whole link graph, in memory until the index changes
    first = links.adjacency(top)
    mids = {m for s in top if len(first[s]) <= GRAPH_FANOUT for m in first[s]}
    through = mids - links.hubs(mids, GRAPH_FANOUT) if hops >= 2 else set()
    second = links.adjacency(through)
    for seed in top:
        near = first[seed]
        if len(near) > GRAPH_FANOUT:  # an index page: everything is its neighbour, so nothing is
            continue
        reach = {nid: 1 for nid in sorted(near)}
        for mid in sorted(near & through):  # second hop, never through a hub
            for nid in second[mid]:
                reach.setdefault(nid, 2)
        reach.pop(seed, None)
        for nid, h in reach.items():
            offer = scores[seed] * GRAPH_DECAY.get(h, 0.0)
            if offer > offers.get(nid, (0.0, 0, 0))[0]:
                offers[nid] = (offer, h, seed)
    if not offers:
        return effects
    if filters == Filters():  # ranked is all that is asked: known to the process until the index changes
        ranked = cache.ranked_note_ids(conn)
        allowed = {i for i in offers if i in ranked}
    else:
        where, params = Filters(kinds=filters.kinds, tags=filters.tags, path_prefix=filters.path_prefix,
                                since=filters.since, note_ids=list(offers) if filters.note_ids is None
                                else [i for i in offers if i in set(filters.note_ids)]).sql("n")
        allowed = {int(r[0]) for r in conn.execute(f"SELECT n.id FROM notes n WHERE n.ranked = 1 AND {where}",
                                                   params)}
    paths = dict(conn.execute("SELECT id, path FROM notes WHERE id IN (SELECT value FROM json_each(?))",
                              (json.dumps(sorted({s for _, _, s in offers.values()})),)).fetchall())
    for nid, (offer, h, seed) in offers.items():
        if nid not in allowed or offer <= scores.get(nid, 0.0):
            continue
        effects[nid] = {"joined": nid not in scores, "hops": h, "from": paths.get(seed, ""),
                        "before": round(scores.get(nid, 0.0), 6), "score": round(offer, 6)}
        scores[nid] = offer
    return effects


def rerank_text(title: str, description: str, body: str, chunk: tuple[int, int] | None) -> str:
    """What a reranker reads for one note: title, description, and its best chunk (else the start)."""
    part = body[chunk[0]:chunk[1]] if chunk else body
    return "\n".join(x for x in (title, description, plain_text(part)[:DOC_CHARS]) if x)


@dataclass
class Gathered:
    """Everything the channels found for one query, before fusion: what ``rank`` needs, and
    what ``benchmarks/cross_validate.py`` keeps per query to try fusion settings without
    searching again."""

    query: str
    terms: QueryTerms
    filters: Filters
    channels: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    raw: dict[str, list[tuple[int, float]]] = field(default_factory=dict)  # raw scores for calibration
    exact: list[int] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)
    best_chunk: dict[int, tuple[int, int, str]] = field(default_factory=dict)
    vector_query: str | None = None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def gather(store: Store, query: str, filters: Filters, plan: Stages, vectors: VectorIndex | None,
           calibrated: bool = True, feedback: bool | None = None,
           params: FusionParams = DEFAULT_PARAMS, informative: bool | None = None) -> Gathered:
    """Run the channels ``plan`` asks for: lexical (with its evidence), exact-identifier matches,
    vectors (asked without the scope's ubiquitous terms, with their evidence).

    When both kinds run, the vector channel (query embedding, then the vector search) runs in a
    worker thread while this one runs the lexical SQL: ONNX Runtime, LanceDB and SQLite all release
    the GIL, so on two cores the two overlap. Its results are merged afterwards in the order the
    serial code used, so the answer is the same.

    ``feedback``: run the pseudo-relevance feedback channel (``feedback_channel``); by default
    only when fusion, with ``params``, gives it a vote (``Evidence.wants_feedback``).
    ``informative``: measure ``Evidence.informative`` too; by default only when ``params`` read it
    (``FusionParams.reads_informative``), since it asks of every query word whether it is in half
    the vault."""
    t0 = time.perf_counter()
    terms = analyze_query(query)
    g = Gathered(query=query, terms=terms, filters=filters)
    beside = plan.vectors and plan.lexical and not terms.empty
    pending = _workers().submit(vector_channel, store, query, terms, filters, vectors) if beside else None
    # a query of stop-words alone says nothing any channel could have evidence for
    g.evidence.unknown = 1.0 if terms.empty else lexical.unknown_share(store.conn, terms)
    g.evidence.terms = query_length(terms)
    g.evidence.cross_script = cross_script(store, query, terms)
    if plan.lexical and not terms.empty:
        lexical_channels, g.raw["bm25"] = lexical_rankings(store, terms, filters, want_raw=plan.vectors and calibrated)
        g.channels.update(lexical_channels)
        wanted = params.reads_informative() if informative is None else informative
        g.evidence.coverage, g.evidence.informative = lexical_evidence(store, terms, lexical_channels, wanted)
    pinned = pinned_identifiers(terms)
    g.exact = lexical.exact_matches(store.conn, pinned, filters) if pinned else []
    if plan.lexical and not terms.empty:  # a note the query names (its title or an alias) is pinned too
        candidates = list(dict.fromkeys(i for name in ("words", "trigram") for i, _ in g.channels.get(name) or ()))
        named = lexical.named_by_title(store.conn, query, candidates)
        g.exact = named + [i for i in g.exact if i not in set(named)]
    g.timings["lexical"] = (time.perf_counter() - t0) * 1000
    if plan.vectors:
        found = pending.result() if pending is not None else vector_channel(store, query, terms, filters, vectors)
        g.warnings += found.warnings
        g.timings.update(found.timings)
        if found.ranked is not None:
            ranked = found.ranked
            g.vector_query = found.vector_query
            g.channels["vectors"] = g.raw["vectors"] = [(nid, score) for nid, score, _ in ranked]
            g.best_chunk = {nid: (c.start, c.end, c.heading) for nid, _, c in ranked}
            g.evidence.separation = fusion.separation([score for _, score, _ in ranked])
            run_feedback = g.evidence.wants_feedback(params) if feedback is None else feedback
            if run_feedback and plan.lexical and not terms.empty:
                t3 = time.perf_counter()
                g.channels["feedback"] = feedback_channel(store, terms, g.channels["vectors"], g.best_chunk, filters)
                g.timings["feedback"] = (time.perf_counter() - t3) * 1000
    return g


FEEDBACK_NOTES = 3  # the vector channel's best notes whose words are fed back
FEEDBACK_TERMS = 10  # words fed back, the most distinctive first
FEEDBACK_TEXT = 400  # characters of the best passage read per note (its title and heading always)


def feedback_terms(store: Store, terms: QueryTerms, ranked: list[tuple[int, float]],
                   best_chunk: dict[int, tuple[int, int, str]]) -> list[str]:
    """Pseudo-relevance feedback (RM3's idea, unweighted): the word-table terms of the vector
    channel's best notes — title, the heading and start of the passage that matched — that are
    not in the query, scored by how many of those notes hold them (the best counting most) times
    their IDF; terms in half the vault or more (``lexical.uninformative``) are dropped.

    A paraphrase ("see which other notes point to the one I'm reading") or a question in the other
    language shares no word with the answer, but the notes the embedder finds nearest usually do
    ("backlinks"), and they bring the lexical channel words it can match."""
    ids = [nid for nid, _ in ranked[:FEEDBACK_NOTES]]
    if not ids:
        return []
    texts = _texts(store, ids)
    asked = set(terms.words) | set(terms.prefixes)
    weight: dict[str, float] = {}
    for pos, nid in enumerate(ids, start=1):
        title, _desc, body = texts.get(nid, ("", "", ""))
        start, end, heading = best_chunk.get(nid, (0, 0, ""))
        # what a reader sees of it, as the embedder does, but no link target is borrowed, so no URL's
        # host either (``20Showcases`` from a URL's ``%20Showcases`` is no word of the note)
        passage = plain_text(reader_text(body[start:min(end, start + FEEDBACK_TEXT)], hosts=False)) if end > start else ""
        for term in set(analyze_query(" ".join((title, heading, passage))).words):
            if term not in asked:
                weight[term] = weight.get(term, 0.0) + 1.0 / pos
    conn = store.conn
    total = max(1, lexical.ranked_notes(conn))
    dfs = lexical.document_frequencies(conn, list(weight))
    scored = sorted(((w * lexical.idf(dfs[t], total), t)
                     for t, w in weight.items() if dfs[t] > 0), key=lambda x: (-x[0], x[1]))
    chosen: list[str] = []
    for _, term in scored:  # the exact count behind "half the vault" only for the few it may drop
        if not lexical.is_uninformative(conn, term, dfs[term], total):
            chosen.append(term)
            if len(chosen) == FEEDBACK_TERMS:
                break
    return chosen


def feedback_channel(store: Store, terms: QueryTerms, ranked: list[tuple[int, float]],
                     best_chunk: dict[int, tuple[int, int, str]], filters: Filters) -> list[tuple[int, float]]:
    """The word table's BM25 for the OR of the query's words and ``feedback_terms``."""
    extra = feedback_terms(store, terms, ranked, best_chunk)
    if not extra:
        return []
    return lexical.search_words_any(store.conn, [*terms.words, *extra], filters, CANDIDATES)


@dataclass
class VectorChannel:
    """What the vector channel found for one query (``ranked`` is None when it could not run)."""

    ranked: list[tuple[int, float, Any]] | None = None
    vector_query: str | None = None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)


def vector_channel(store: Store, query: str, terms: QueryTerms, filters: Filters,
                   vectors: VectorIndex | None) -> VectorChannel:
    """Embed the query (without the scope's ubiquitous terms) and rank notes by their vectors."""
    with cache.one_look(store.conn):  # this thread's connection, when run beside the lexical SQL
        return _vector_channel(store, query, terms, filters, vectors)


def _vector_channel(store: Store, query: str, terms: QueryTerms, filters: Filters,
                    vectors: VectorIndex | None) -> VectorChannel:
    out = VectorChannel()
    t1 = time.perf_counter()
    index = vectors if vectors is not None else default_vectors(store)
    if index is None or index.size(store) == 0:
        out.warnings.append("no vectors for this vault yet (run `memory-hub index`); vector channel skipped")
        return out
    # terms in nearly every note in scope only blur the query's vector (lexical.ubiquitous_terms)
    common = lexical.ubiquitous_terms(store.conn, bare_terms(terms.all_terms), filters)
    out.vector_query = without_terms(query, common) if common else query
    out.timings["common_terms"] = (time.perf_counter() - t1) * 1000
    t1 = time.perf_counter()
    qvec = index.embedder.embed_queries([out.vector_query])[0]
    out.timings["embed_query"] = (time.perf_counter() - t1) * 1000
    t2 = time.perf_counter()
    out.ranked = index.search_notes(store, qvec, filters, CANDIDATES)
    out.timings["vectors"] = (time.perf_counter() - t2) * 1000
    return out


_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()
VECTOR_WORKERS = 4  # searches of one process whose vector channels can run at the same time


def _workers() -> ThreadPoolExecutor:
    """The process's vector-channel threads (made again in a forked child, which has none)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(VECTOR_WORKERS, thread_name_prefix="memory-hub-vectors"))
        return _pool[1]


@dataclass
class Ranked:
    """Fusion, pins and graph expansion applied: the order and what each stage did."""

    order: list[int]
    scores: dict[int, float]
    fused: fusion.Fused
    graph: dict[int, dict[str, Any]]
    timings: dict[str, float]


def rank(store: Store, g: Gathered, plan: Stages, params: FusionParams = DEFAULT_PARAMS,
         calibrated: bool = True) -> Ranked:
    """Fuse the channels by their evidence, pin exact identifiers, let graph neighbours join."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fused = fusion.fuse(g.channels, g.raw, g.evidence, params, calibrated=calibrated, extra=g.exact)
    scores = fused.scores
    ordered = pin_exact(fused.order, g.exact)
    timings["fuse"] = (time.perf_counter() - t0) * 1000
    if fused.calibrate_ms is not None:
        timings["calibrate"] = fused.calibrate_ms
    graph_effects: dict[int, dict[str, Any]] = {}
    if plan.graph:
        t1 = time.perf_counter()
        graph_effects = graph_expand(store, ordered, scores, g.filters)
        if graph_effects:
            ordered = pin_exact(fusion.order(scores), g.exact)
        timings["graph"] = (time.perf_counter() - t1) * 1000
    return Ranked(ordered, scores, fused, graph_effects, timings)


def search(store: Store, query: str, k: int = 10, filters: Filters | None = None,
           explain: bool = False, mode: str = DEFAULT_MODE, *, vectors: VectorIndex | None = None,
           reranker: Reranker | None = None, calibrated: bool = True,
           params: FusionParams = DEFAULT_PARAMS) -> SearchResult:
    """Run the pipeline for ``mode``. ``vectors``/``reranker`` default to the vault's own (loaded once).

    ``calibrated=False`` leaves the RRF order as it is (``calibrate.py``); benchmarks use it to
    show what calibration adds. ``params``: fusion's settings (``fusion.FusionParams``).
    The index's change stamps are read once for the whole search (``cache.one_look``).
    """
    with cache.one_look(store.conn):
        return _search(store, query, k, filters, explain, mode, vectors, reranker, calibrated, params)


def _search(store: Store, query: str, k: int, filters: Filters | None, explain: bool, mode: str,
            vectors: VectorIndex | None, reranker: Reranker | None, calibrated: bool,
            params: FusionParams) -> SearchResult:
    plan = stages(mode)
    query = check_query(query)
    filters = filters or Filters()
    t0 = time.perf_counter()
    g = gather(store, query, filters, plan, vectors, calibrated, params=params)
    terms, channels, exact, best_chunk = g.terms, g.channels, g.exact, g.best_chunk
    timings = dict(g.timings)
    result = SearchResult(query=query, hits=[], terms=terms, warnings=list(g.warnings), vector_query=g.vector_query)
    if not channels and not exact:
        if terms.empty:
            result.warnings.append("the query has no searchable terms")
        timings["total"] = (time.perf_counter() - t0) * 1000
        result.timings_ms = {k2: round(v, 2) for k2, v in timings.items()}
        result.low_confidence = True
        return result
    ranked = rank(store, g, plan, params, calibrated)
    timings.update(ranked.timings)
    ordered, scores, calibration, graph_effects = ranked.order, ranked.scores, ranked.fused.calibration, ranked.graph
    result.low_confidence = ranked.fused.low_confidence
    result.evidence = g.evidence.as_dict(params) | {
        "channel_weights": {k2: round(v, 3) for k2, v in ranked.fused.weights.items()}}
    if result.low_confidence:
        result.warnings.append(LOW_CONFIDENCE_HINT)
    rerank_effects: dict[int, dict[str, Any]] = {}
    if plan.rerank:
        t4 = time.perf_counter()
        if reranker is None:
            from .rerank import load_reranker

            reranker = load_reranker("auto", vectors.embedder if vectors is not None else None)
        if reranker is None:
            result.warnings.append("no reranker configured (set MEMORY_HUB_RERANKER); rerank stage skipped")
        else:
            depth = int(getattr(reranker, "depth", RERANK_DEPTH))
            head = ordered[:depth]
            texts = _texts(store, head)
            docs = [rerank_text(*texts.get(i, ("", "", "")), best_chunk[i][:2] if i in best_chunk else None)
                    for i in head]
            try:
                rr = reranker.rerank(query, docs)
            except RerankUnavailable as exc:  # a rerank server timed out or failed: keep the fused order
                rr = None
                result.warnings.append(f"reranker unavailable, fused order kept: {exc}")
            if rr is not None:
                blended = blend(head, rr, exact)
                for pos, (i, _) in enumerate(blended, start=1):
                    rerank_effects[i] = {"model": reranker.name, "score": round(float(rr[head.index(i)]), 4),
                                         "before": head.index(i) + 1, "after": pos}
                ordered = [i for i, _ in blended] + ordered[depth:]
                # Scores follow the new order: the reranked head keeps its blended score lifted above the tail.
                floor = max((scores[i] for i in ordered[depth:]), default=0.0)
                for i, score in blended:
                    scores[i] = floor + score
        timings["rerank"] = (time.perf_counter() - t4) * 1000
    t5 = time.perf_counter()
    hits = load_hits(store, ordered[:k], scores)
    exact_set = set(exact)
    bodies = lexical.bodies_of(store.conn, [hit.note_id for hit in hits])
    empty_term = any(not t for t in terms.all_terms)  # "" is in every body
    for hit in hits:
        hit.exact = hit.note_id in exact_set
        body = bodies.get(hit.note_id, "")
        at = first_term_at(body, terms.all_terms)
        if at >= 0 and not empty_term:
            at = readable_term_at(body, terms.all_terms, at)
        if at < 0 and not empty_term and hit.note_id in best_chunk:
            s0, e0, _ = best_chunk[hit.note_id]  # no query word in the note: show the passage that matched
            hit.snippet = snippet(body[s0:e0], [])
        else:
            hit.snippet = snippet(body, terms.all_terms, at=at)
        if explain:
            for name, ranked_list in channels.items():
                for pos, (nid, score) in enumerate(ranked_list, start=1):
                    if nid == hit.note_id:
                        entry: dict[str, Any] = {"rank": pos, "score": round(score, 4)}
                        if name == "vectors" and nid in best_chunk:
                            entry["chunk"] = best_chunk[nid][2]
                        hit.channels[name] = entry
                        break
            hit.calibration = calibration.get(hit.note_id)
            hit.graph = graph_effects.get(hit.note_id)
            hit.rerank = rerank_effects.get(hit.note_id)
    timings["load"] = (time.perf_counter() - t5) * 1000
    timings["total"] = (time.perf_counter() - t0) * 1000
    result.hits = hits
    result.timings_ms = {k2: round(v, 2) for k2, v in timings.items()}
    return result


def warm_caches(store: Store) -> None:
    """Read now what the first search after a change of notes would otherwise read itself: the
    link graph, the ranked notes' ids and the vault-wide counts (ranked notes, the CJK shares).
    The server calls it after each sync that changed notes, on the watcher's thread, so the next
    agent's query does not pay them (~0.2 s at 30k notes, growing with the vault)."""
    conn = store.conn
    with cache.one_look(conn):
        graph.cached(conn)
        cache.ranked_note_ids(conn)
        lexical.ranked_notes(conn)
        lexical.cjk_share(conn, lexical.CJK_VAULT_SHARE)
        lexical.cjk_share(conn, lexical.CJK_DOMINANT_SHARE)


def _texts(store: Store, ids: list[int]) -> dict[int, tuple[str, str, str]]:
    from ..index.vectors import note_texts

    return note_texts(store, ids)
