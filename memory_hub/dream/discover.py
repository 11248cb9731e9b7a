"""Link discovery: propose links between notes that are about the same thing.

Candidate pairs are scored on two axes at once — how similar their text is, and how much they
already link to the same notes (Jaccard overlap of their neighbourhoods) — and a pair must pass on
the combined score. Shared vocabulary alone does not make a link; shared vocabulary plus shared
neighbours does. Hub notes (home, index, MOCs) are excluded by title: they relate to everything.
Raw captures, daily notes and templates are not linked either; knowledge, decisions, runbooks and
trackers are. A link is written as a ``- [[target]]`` line under ``## Related`` in the one note of
the pair that may be written.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from ..vault.notes import DECISION, KNOWLEDGE, RUNBOOK, TRACKER
from .corpus import Corpus
from .edits import Edit, StepResult, append_to_section
from .rejected import Rejections, pair_key
from .vectors import top_pairs

LINKABLE = frozenset({KNOWLEDGE, DECISION, RUNBOOK, TRACKER})
TEXT_WEIGHT = 0.6
GRAPH_WEIGHT = 0.4
THRESHOLD = 0.40
MAX_LINKS = 60  # per pass
MAX_PER_NOTE = 3
HUBLIKE_DEGREE = 40  # a neighbour this connected says little about two notes sharing it


@dataclass(frozen=True)
class Proposal:
    a: str
    b: str
    text: float
    graph: float
    score: float

    def as_dict(self) -> dict[str, object]:
        return {"a": self.a, "b": self.b, "text": round(self.text, 3), "graph": round(self.graph, 3),
                "score": round(self.score, 3)}


def _neighbourhood(corpus: Corpus, path: str) -> set[str]:
    """Neighbours that say something: hubs and hub-like notes (very many links) left out."""
    return {n for n in corpus.neighbours(path)
            if not corpus.is_hub(n) and len(corpus.neighbours(n)) <= HUBLIKE_DEGREE}


def score_pairs(corpus: Corpus, vectors: dict[str, np.ndarray], k: int = 10, near_duplicate: float = 1.01
                ) -> list[Proposal]:
    """Every candidate pair not yet linked, scored; best first."""
    paths = [p for p, d in corpus.docs.items()
             if d.note.kind in LINKABLE and not corpus.is_hub(p) and p in vectors]
    if len(paths) < 2:
        return []
    index = {p: i for i, p in enumerate(paths)}
    mat = np.stack([vectors[p] for p in paths])
    pairs: dict[tuple[int, int], float] = {(a, b): s for a, b, s in top_pairs(mat, k=k, min_sim=0.05)}
    # pairs that share neighbours, even when their wording differs
    shared: Counter[tuple[int, int]] = Counter()
    by_neighbour: dict[str, list[int]] = defaultdict(list)
    for p in paths:
        for n in _neighbourhood(corpus, p):
            by_neighbour[n].append(index[p])
    for members in by_neighbour.values():
        if len(members) > HUBLIKE_DEGREE:
            continue
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                a, b = sorted((members[x], members[y]))
                shared[(a, b)] += 1
    for (a, b), count in shared.items():
        if count >= 2 and (a, b) not in pairs:
            pairs[(a, b)] = float(mat[a] @ mat[b])
    hoods = {p: _neighbourhood(corpus, p) for p in paths}
    out = []
    for (a, b), text in pairs.items():
        pa, pb = paths[a], paths[b]
        if pb in corpus.neighbours(pa):
            continue  # already linked, either way
        if text >= near_duplicate:
            continue  # the same note twice: dedupe merges it rather than linking it
        na, nb = hoods[pa] - {pb}, hoods[pb] - {pa}
        union = na | nb
        graph = len(na & nb) / len(union) if union else 0.0
        score = TEXT_WEIGHT * max(text, 0.0) + GRAPH_WEIGHT * graph
        out.append(Proposal(pa, pb, text, graph, score))
    out.sort(key=lambda p: (-p.score, p.a, p.b))
    return out


def discover(corpus: Corpus, vectors: dict[str, np.ndarray], max_links: int = MAX_LINKS,
             threshold: float = THRESHOLD, near_duplicate: float = 1.01,
             rejected: Rejections | None = None) -> StepResult:
    step = StepResult("links")
    rejected = rejected or Rejections()
    per_note: Counter[str] = Counter()
    texts: dict[str, str] = {}
    for prop in score_pairs(corpus, vectors, near_duplicate=near_duplicate):
        if prop.score < threshold or len(step.proposals) >= max_links:
            break
        key = pair_key("links", prop.a, prop.b)
        why = rejected.blocks(key)
        if why:
            step.skipped.append(f"link {prop.a} ↔ {prop.b}: rejected earlier ({why})")
            continue
        # write into the note of the pair that may be written, preferring the less-linked one
        options = [p for p in (prop.a, prop.b) if corpus.writable(p) and per_note[p] < MAX_PER_NOTE]
        if not options:
            continue
        source = min(options, key=lambda p: (len(corpus.out_edges.get(p, ())), p))
        target = prop.b if source == prop.a else prop.a
        base = texts.get(source, corpus.docs[source].text)
        texts[source] = append_to_section(base, "Related", [f"- [[{corpus.docs[target].link}]]"])
        per_note[source] += 1
        step.keys.append(key)
        step.proposals.append(prop.as_dict() | {"written_in": source})
        step.actions.append(f"{source} → {target} (text {prop.text:.2f}, shared {prop.graph:.2f})")
    for source, text in texts.items():
        step.edits.append(Edit(source, text, expected_mtime_ns=corpus.docs[source].mtime_ns))
    return step
