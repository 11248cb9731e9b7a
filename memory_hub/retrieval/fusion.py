"""Reciprocal Rank Fusion: combine ranked lists without comparing their incomparable scores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60


def rrf(rankings: Mapping[str, Sequence[int]], k: int = RRF_K,
        weights: Mapping[str, float] | None = None) -> dict[int, float]:
    """``{channel: [id, …best first]}`` → ``{id: Σ weight / (k + rank)}`` with ranks from 1."""
    scores: dict[int, float] = {}
    for channel, ids in rankings.items():
        w = 1.0 if weights is None else weights.get(channel, 1.0)
        for rank, item in enumerate(ids, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


def order(scores: Mapping[int, float]) -> list[int]:
    """Ids by descending score, ties broken by id for determinism."""
    return sorted(scores, key=lambda i: (-scores[i], i))
