"""Recall's adjustments to the search ranking: evidence for the weak-tail cut, and usage boosts.

Recall ranks with the search pipeline (``search.py``); this module decides only what recall adds
on top of that order, the same in the warm server and a cold hook process:

* **Evidence** of each hit, relative to this query's best: per channel the hit's raw score over the
  best raw score among the hits (BM25 for the lexical channels, cosine for vectors), its strongest
  channel counting. The top ``KEEP_TOP`` hits always show (unless the search reports
  ``low_confidence``); below them, a hit under ``TAIL_SHARE`` of the best evidence is a weak tail
  that the block drops rather than fill its lines. Exact-identifier matches count as full
  evidence; a note that joined only through the graph counts as its hop's decay; a lexical hit
  that matched only some of the query's terms carries no BM25 score (the word channel lists those
  unscored after its AND matches), so it counts as none.
  Why keep the top three: on the natural-question set a pure relative cut took the injected hit
  rate from 0.622 to 0.556 (obsidian-help-en) because a paraphrase's answer often matches only some
  words; keeping three lost 0.011 there and cut lines per prompt from 3.7 to 2.7.
* **Boosts** by usage (judged useful, read, read recently — ``usage``, the one place counters are
  read), halved for saved transcript tails (they mention everything), and by backlinks in the
  graph-overview mode only. A boost works on the search rank (``1 / (RANK_K + rank)``), so it can
  win a close call by a place or two but cannot pull a deep hit over a clear winner.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..index.usage import NONE as NO_USAGE
from ..index.usage import Usage, snapshot
from .recall_index import RecallIndex

TAIL_SHARE = 0.3  # below the top KEEP_TOP, a hit with less than this share of the best hit's evidence is dropped
KEEP_TOP = 3
GRAPH_EVIDENCE = {1: 0.35, 2: 0.15}  # a note reached only through links, by hop distance
RANK_K = 5  # boosts act on 1 / (RANK_K + rank): a 1.2x boost moves a note about one place
RAW_TRANSCRIPT_FACTOR = 0.5  # saved transcript tails mention everything; curated notes should win
RECENT_DAYS = 7


@dataclass
class Recalled:
    path: str
    title: str
    description: str
    score: float
    evidence: float = 0.0  # share of the best hit's evidence (1.0 = as strong as the best)
    pinned: bool = False
    source: str = "search"  # search | hint | subject (a note the prompt names)


def usage(vault: Path, index: RecallIndex, paths: Iterable[str]) -> dict[str, Usage]:
    """Usage of ``paths`` (reads, judged useful, last read): the one function recall reads it through.

    The counts come from the index's usage API (the per-machine usage logs folded into SQLite; counters
    a note's frontmatter already had count as its starting point), never from the notes themselves.
    """
    try:
        every = snapshot(vault)
    except Exception:  # noqa: BLE001 - recall answers without its usage boost rather than not at all
        every = {}
    return {path: every.get(path, NO_USAGE) for path in paths}


def evidence(hits: Sequence[Any]) -> dict[str, float]:
    """{path: evidence share} for search hits explained per channel (``search(..., explain=True)``)."""
    best: dict[str, float] = {}
    for h in hits:
        for name, ch in (h.channels or {}).items():
            best[name] = max(best.get(name, 0.0), float(ch.get("score", 0.0)))
    out = {}
    for h in hits:
        share = 0.0
        for name, ch in (h.channels or {}).items():
            top = best.get(name, 0.0)
            # a channel whose best score is 0 matched without contrast (BM25's idf is 0 when every
            # note has the term): a match all the same
            share = max(share, float(ch.get("score", 0.0)) / top if top > 0 else 1.0)
        if h.exact:
            share = 1.0
        elif not h.channels and h.graph:
            share = GRAPH_EVIDENCE.get(int(h.graph.get("hops", 2)), 0.0)
        out[h.path] = round(min(share, 1.0), 4)
    return out


def boost(use: Usage, raw_transcript: bool = False, backlinks: int = 0, now: float | None = None) -> float:
    """The multiplier recall puts on a note's rank score for how it has been used."""
    factor = 1.0 + 0.25 * math.log1p(use.useful) + 0.05 * math.log1p(use.reads)
    if raw_transcript:
        factor *= RAW_TRANSCRIPT_FACTOR
    now = time.time() if now is None else now
    if use.last_read and now - use.last_read < RECENT_DAYS * 86400:
        factor *= 1.0 + 0.2 * (1 - (now - use.last_read) / (RECENT_DAYS * 86400))
    if backlinks:
        factor *= 1.0 + 0.3 * math.log1p(backlinks)
    return factor


def rank_score(rank: int) -> float:
    """The score a search rank (from 1) gives before boosts."""
    return 1.0 / (RANK_K + rank)
