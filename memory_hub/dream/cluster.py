"""Clustering without chaining: partition the titles into topics in one step.

Scoring pairs and merging them transitively is what once collapsed a 280-capture backlog into one
279-item cluster: once the graph is dense, any pairwise signal chains everything together. So no
pair is ever merged here. With an LLM endpoint, one call over the numbered list of titles returns
the partition. Without one, a medoid partition over title vectors: the note with the most close
neighbours becomes a medoid and takes the notes close *to it* (not to any member), then the next
— every member is within the threshold of its medoid, so a chain A~B~C never joins A and C. One
reassignment pass moves each note to its most similar medoid. Groups larger than ``MAX_GROUP``
are grab-bags and are split back into singles.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

MAX_GROUP = 8
THRESHOLD = {"lexical": 0.35, "embed": 0.45}


def partition_vectors(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Medoid partition of the rows of ``vectors`` (unit vectors); every row lands in one group."""
    n = len(vectors)
    if n == 0:
        return []
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, 1.0)
    close = sims >= threshold
    unassigned = set(range(n))
    medoids: list[int] = []
    while unassigned:
        pool = sorted(unassigned)
        sub = close[np.ix_(pool, pool)]
        degree = sub.sum(axis=1)
        # most close neighbours first; ties broken by total similarity, then index (deterministic)
        strength = sims[np.ix_(pool, pool)].sum(axis=1)
        best = max(range(len(pool)), key=lambda k: (int(degree[k]), float(strength[k]), -pool[k]))
        medoid = pool[best]
        medoids.append(medoid)
        unassigned -= {j for j in pool if close[medoid, j]}
    groups: dict[int, list[int]] = {m: [] for m in medoids}
    for i in range(n):
        if i in groups:
            groups[i].append(i)
            continue
        best_m = max(medoids, key=lambda m: (float(sims[i, m]), -m))
        if sims[i, best_m] >= threshold:
            groups[best_m].append(i)
        else:  # cannot happen for a medoid's own members, kept for safety
            groups.setdefault(i, []).append(i)
    return [sorted(g) for g in groups.values() if g]


def split_grab_bags(groups: list[list[int]], max_group: int = MAX_GROUP) -> list[list[int]]:
    out: list[list[int]] = []
    for g in groups:
        if len(g) > max_group:
            out.extend([i] for i in g)
        else:
            out.append(g)
    return out


_SYSTEM = (
    "You partition a numbered list of note titles into topics. Every number appears in exactly one "
    "group; a title that fits no other goes alone. Do not make a group of more than 8. Reply with "
    'JSON only: {"groups": [[1, 4], [2], [3, 5, 6]]}.'
)


def partition_llm(titles: Sequence[str]) -> list[list[int]]:
    """One call over the list of titles; the reply is validated into a true partition."""
    from ..services.llm import LLMError, chat_json

    listing = "\n".join(f"{i + 1}. {t}" for i, t in enumerate(titles))
    reply = chat_json(_SYSTEM, listing)
    groups = reply.get("groups") if isinstance(reply, dict) else None
    if not isinstance(groups, list):
        raise LLMError("model reply has no 'groups' list")
    seen: set[int] = set()
    out: list[list[int]] = []
    for group in groups:
        if not isinstance(group, list):
            continue
        members = []
        for item in group:
            try:
                idx = int(item) - 1
            except (TypeError, ValueError):
                continue
            if 0 <= idx < len(titles) and idx not in seen:
                seen.add(idx)
                members.append(idx)
        if members:
            out.append(sorted(members))
    out.extend([i] for i in range(len(titles)) if i not in seen)  # anything the model left out
    return out


def cluster(titles: Sequence[str], vectors: np.ndarray | None, backend: str, use_llm: bool = False
            ) -> tuple[list[list[int]], str, list[str]]:
    """(groups, method, warnings): LLM partition when asked and working, else the medoid partition."""
    warnings: list[str] = []
    if use_llm and titles:
        from ..services.llm import LLMError

        try:
            return split_grab_bags(partition_llm(titles)), "llm", warnings
        except LLMError as exc:
            warnings.append(f"LLM clustering failed ({exc}); used the vector partition instead")
    if vectors is None:
        return [[i] for i in range(len(titles))], "none", warnings
    groups = partition_vectors(vectors, THRESHOLD[backend])
    return split_grab_bags(groups), f"medoid-{backend}", warnings


def describe(groups: list[list[int]], titles: Sequence[str]) -> str:
    return json.dumps([[titles[i] for i in g] for g in groups], ensure_ascii=False)
