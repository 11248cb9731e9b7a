"""Several vaults searched as one: each vault ranks its own notes, the rankings are fused by
reciprocal rank (RRF, k=60, as the channels of one vault are), and every result names its vault.

Each vault keeps its own index and is searched by its own server when one runs (or in-process),
so nothing here knows about indexes: the inputs are the per-vault result lists, best first, as
``search --json`` shapes them. Scores of different vaults are not comparable (BM25 depends on each
vault's statistics), ranks are. A note's ``ref`` is ``vault:path`` (what ``read_note`` and
``VaultSet.split_ref`` take); ``path`` stays relative to its own vault.
"""

from __future__ import annotations

from typing import Any

RRF_K = 60


def fuse(per_vault: list[tuple[str, list[dict[str, Any]]]], k: int, rrf_k: int = RRF_K) -> list[dict[str, Any]]:
    """One ranking of ``k`` results from [(vault name, its results best first)], the first vault
    winning ties (the personal vault, or the one a run names first)."""
    scored: list[tuple[float, int, int, dict[str, Any]]] = []
    for order, (name, results) in enumerate(per_vault):
        for rank, hit in enumerate(results, start=1):
            fused = 1.0 / (rrf_k + rank)
            scored.append((-fused, order, rank, {**hit, "vault": name, "ref": f"{name}:{hit['path']}",
                                                  "vault_rank": rank, "vault_score": hit.get("score"),
                                                  "score": round(fused, 6)}))
    scored.sort(key=lambda t: (t[0], t[1], t[2]))
    return [t[3] for t in scored[:k]]
