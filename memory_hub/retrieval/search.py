"""The search pipeline: a query in, the best few notes out, with a record of how each got there.

Stages: analyse the query → lexical channels (trigram BM25, word/bigram BM25) → exact-identifier
pinning → fuse with RRF (k=60) → results. Later stages (vectors, graph expansion, rerank) plug into
the same pipeline and add their own entries to each hit's ``channels`` for ``--explain``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..index import lexical
from ..index.lexical import Filters
from ..index.store import Store
from ..index.terms import QueryTerms, analyze_query, normalize
from ..vault.markdown import plain_text
from . import fusion

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
    exact: bool = False  # contains every exact identifier in the query
    channels: dict[str, dict[str, float]] = field(default_factory=dict)
    graph: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = None
    note_id: int = 0

    def as_dict(self, explain: bool = False) -> dict[str, Any]:
        data = asdict(self)
        data.pop("note_id")
        if not explain:
            for key in ("channels", "graph", "rerank"):
                data.pop(key)
        return data


@dataclass
class SearchResult:
    query: str
    hits: list[Hit]
    terms: QueryTerms
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def check_query(query: str) -> str:
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    return query.strip()


def lexical_rankings(store: Store, terms: QueryTerms, filters: Filters, limit: int = CANDIDATES
                     ) -> dict[str, list[tuple[int, float]]]:
    """Both lexical channels, each as [(note id, score)] best first."""
    conn = store.conn
    return {
        "trigram": lexical.search_trigram(conn, terms, filters, limit),
        "words": lexical.search_words(conn, terms, filters, limit),
    }


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


def snippet(body: str, terms: list[str], width: int = 160) -> str:
    """A short window of the body around the first query term found, as plain text."""
    text = normalize(body)
    lower = text.lower()
    best = -1
    for term in sorted(terms, key=len, reverse=True):
        pos = lower.find(term.lower())
        if pos >= 0 and (best < 0 or pos < best):
            best = pos
    if best < 0:
        plain = plain_text(re.sub(r"^#.*$", "", text, flags=re.MULTILINE))
        return plain[:width] + ("…" if len(plain) > width else "")
    start = max(0, best - width // 3)
    window = text[start : start + width * 2]
    plain = plain_text(window)[:width]
    return ("…" if start > 0 else "") + plain + ("…" if start + len(window) < len(text) else "")


MODES = ("lexical",)


def search(store: Store, query: str, k: int = 10, filters: Filters | None = None,
           explain: bool = False, mode: str = "lexical") -> SearchResult:
    """Lexical search: the ranking every later stage builds on."""
    if mode not in MODES:
        raise QueryError(f"unknown search mode {mode!r}; choose one of {', '.join(MODES)}")
    query = check_query(query)
    filters = filters or Filters()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    terms = analyze_query(query)
    result = SearchResult(query=query, hits=[], terms=terms)
    if terms.empty:
        result.warnings.append("the query has no searchable terms")
        return result
    channels = lexical_rankings(store, terms, filters)
    exact = lexical.exact_matches(store.conn, terms.identifiers, filters) if terms.identifiers else []
    timings["lexical"] = (time.perf_counter() - t0) * 1000
    scores = fusion.rrf({name: [i for i, _ in hits] for name, hits in channels.items()})
    ordered = pin_exact(fusion.order(scores), exact)[:k]
    hits = load_hits(store, ordered, scores)
    exact_set = set(exact)
    for hit in hits:
        hit.exact = hit.note_id in exact_set
        hit.snippet = snippet(lexical.body_of(store.conn, hit.note_id), terms.all_terms)
        if explain:
            for name, ranked in channels.items():
                for rank, (nid, score) in enumerate(ranked, start=1):
                    if nid == hit.note_id:
                        hit.channels[name] = {"rank": rank, "score": round(score, 4)}
                        break
    timings["total"] = (time.perf_counter() - t0) * 1000
    result.hits = hits
    result.timings_ms = {k2: round(v, 2) for k2, v in timings.items()}
    return result
