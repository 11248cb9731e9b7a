"""Recall's own scoring over its index: weighted field matches, scaled by how much of the prompt a
note covers, then boosted by how the note has been used.

Not BM25: a term weighs by the field it is in (``recall_index.py``), and each candidate's score is
multiplied by the square of the idf-weighted share of the prompt's terms it contains, so a note
matching six different terms beats one that repeats a hub word in every field. Notes read
recently or judged useful before get a boost; saved transcript tails are halved (they mention
everything); only the graph-overview mode counts backlinks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from ..vault.notes import UNRANKED_KINDS
from .recall_index import RecallIndex, query_terms
from .recall_modes import _GRAPH_WORDS, GRAPH, ModeDecision

MAX_QUERY_TERMS = 48
COMMON_SHARE = 0.2
RAW_TRANSCRIPT_FACTOR = 0.5  # saved transcript tails mention everything; curated notes should win


@dataclass
class Recalled:
    path: str
    title: str
    description: str
    score: float
    coverage: float = 0.0
    pinned: bool = False


def score(index: RecallIndex, terms: Sequence[str], prefix: str | None = None) -> dict[str, tuple[float, float]]:
    """{path: (score, coverage)} before boosts. Coverage is the idf-weighted share of the
    prompt's terms a note contains; the score is multiplied by its square."""
    postings = index.data.postings
    n_docs = max(1, len(index.data.notes))
    weighted = []
    for t in dict.fromkeys(terms):
        posting = postings.get(t)
        if not posting:
            continue
        df = len(posting)
        weighted.append((math.log(1 + (n_docs - df + 0.5) / (df + 0.5)), t))
    weighted.sort(reverse=True)
    weighted = weighted[:MAX_QUERY_TERMS]
    # Terms in a fifth of the vault or more say little and cost the most; drop them while
    # enough rarer terms remain to rank by.
    rare = [(w, t) for w, t in weighted if len(postings[t]) <= COMMON_SHARE * n_docs]
    if len(rare) >= 3:
        weighted = rare
    total = sum(w for w, _ in weighted) or 1.0
    # a term the vault does not contain still counts against coverage (it is part of the ask)
    missing = sum(1 for t in dict.fromkeys(terms) if t not in postings)
    total += missing * (max((w for w, _ in weighted), default=1.0) * 0.5)
    acc: dict[str, float] = {}
    cov: dict[str, float] = {}
    notes = index.data.notes
    for idf, t in weighted:
        for path, w in postings[t].items():
            if prefix and not path.startswith(prefix):
                continue
            acc[path] = acc.get(path, 0.0) + idf * w
            cov[path] = cov.get(path, 0.0) + idf
    out = {}
    for path, s in acc.items():
        if notes[path].kind in UNRANKED_KINDS:
            continue
        c = cov[path] / total
        out[path] = (s * c * c, c)
    return out


def rank(index: RecallIndex, prompt: str, decision: ModeDecision, recent: dict[str, float],
         prefix: str | None = None, limit: int = 30) -> list[Recalled]:
    """Recall's own ranking with boosts (no fusion); ``recent`` is {path: last read, epoch s}."""
    terms = query_terms(prompt)
    if decision.mode == GRAPH:  # "how do X and Y relate": the ask is X and Y, not "relate"
        terms = [t for t in terms if t not in _GRAPH_WORDS] or terms
    scored = score(index, terms, prefix)
    notes = index.data.notes
    now = time.time()
    backlinks = index.backlinks() if decision.mode == GRAPH else {}
    out = []
    for path, (s, c) in scored.items():
        info = notes[path]
        boost = 1.0 + 0.25 * math.log1p(info.useful) + 0.05 * math.log1p(info.access)
        if info.raw_transcript:
            boost *= RAW_TRANSCRIPT_FACTOR
        read_at = recent.get(path)
        if read_at and now - read_at < 7 * 86400:
            boost *= 1.0 + 0.2 * (1 - (now - read_at) / (7 * 86400))
        if backlinks:
            boost *= 1.0 + 0.3 * math.log1p(backlinks.get(path, 0))
        out.append(Recalled(path, info.title, info.description, s * boost, c))
    out.sort(key=lambda r: (-r.score, r.path))
    return out[:limit]
