"""Score calibration: re-order the head of the RRF ranking by how strong each channel's evidence is.

RRF fuses ranks, so it cannot tell a clear BM25 winner from a photo finish: rank 1 at BM25 25.0
over rank 2 at 9.0 counts the same as 10.1 over 10.0. Calibration goes back to the raw scores for
the notes RRF put on top: each channel's scores are standardised per query (z-scores over that
channel's candidate list, so BM25's open scale and e5's narrow cosine band become comparable), and
the head is re-ordered by a weighted sum. Only the order *within* the head changes — RRF still
decides which notes are candidates and the order of everything below the head, and the head keeps
RRF's score values (permuted), so graph expansion and the rerank stage see the same scale as before.

Measured on the dev sets (README, "Benchmarks"), re-ordering the top 30 this way raised nDCG@10
over RRF alone on SciFact (0.706 → 0.724) and JSQuAD (0.945 → 0.950), LoCoMo session recall@5 a
little (0.905 → 0.908) and LoCoMo turn recall@5 more (0.587 → 0.615).

Channels used, with weights: ``bm25`` (the word table's plain OR ranking, raw BM25 — the AND-first
ranking RRF uses flattens the scores of OR-only matches) 0.6 and ``vectors`` (best-chunk cosine)
0.4. Lexical is the stronger single ranker on all three dev sets; swept offline over 0.4–0.75,
0.6 had the best mean of the three primary metrics (offline on cached channels, no identifier
pins — 0.5: SciFact 0.735 / JSQuAD 0.947 / LoCoMo 0.899; 0.6: 0.734 / 0.950 / 0.898; differences
of this size are within noise, so the choice is a judgement, not a finding). A note missing from a channel's list gets that channel's lowest
z-score. Notes with no raw score in any calibrated channel (trigram-only matches, exact-identifier
pins, graph joins) keep their slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CALIBRATION_WEIGHTS: dict[str, float] = {"bm25": 0.6, "vectors": 0.4}
HEAD = 30  # RRF positions whose order calibration may change
MIN_SCORES = 3  # a channel calibrates only with at least this many raw scores


@dataclass(frozen=True)
class Calibrated:
    """What calibration did: the new order and, per note it placed, its evidence
    (``{"z": {channel: z, "combined": …}, "before": rank, "after": rank}``, ranks from 1)."""

    order: list[int]
    evidence: dict[int, dict[str, Any]]


def standardise(scores: Sequence[tuple[int, float]]) -> dict[int, float]:
    """``[(id, raw score)]`` → ``{id: z-score}`` over that list (all 0 when the scores are all equal)."""
    if not scores:
        return {}
    values = [s for _, s in scores]
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    if std <= 1e-12:
        return {i: 0.0 for i, _ in scores}
    return {i: (s - mean) / std for i, s in scores}


def calibrate(order: Sequence[int], raw: Mapping[str, Sequence[tuple[int, float]]],
              weights: Mapping[str, float] = CALIBRATION_WEIGHTS, head: int = HEAD) -> Calibrated:
    """Re-order ``order[:head]`` by the weighted sum of each channel's z-scores.

    ``raw`` maps a channel name to its ``[(id, raw score)]`` list, best first. Channels not in
    ``weights`` (or with fewer than ``MIN_SCORES`` scores) are ignored; with fewer than two such
    channels there is nothing to calibrate against and ``order`` is returned as it is.
    """
    # A channel with fewer than MIN_SCORES scores has no spread to standardise against: its one
    # or two members would get z = 0, as high as the notes it never found, and calibration would
    # sink the only note that holds a rare identifier below the vector channel's guesses.
    used = {name: standardise(raw[name]) for name in weights
            if weights[name] > 0 and len(raw.get(name) or ()) >= MIN_SCORES}
    if len(used) < 2:
        return Calibrated(list(order), {})
    floors = {name: min(z.values()) for name, z in used.items()}
    top = list(order[:head])
    before = {i: pos for pos, i in enumerate(top, start=1)}
    zs: dict[int, dict[str, float]] = {}
    combined: dict[int, float] = {}
    for i in top:
        if not any(i in z for z in used.values()):
            continue
        parts = {name: z.get(i, floors[name]) for name, z in used.items()}
        combined[i] = sum(weights[name] * v for name, v in parts.items())
        zs[i] = {name: round(v, 3) for name, v in parts.items()} | {"combined": round(combined[i], 4)}
    slots = [pos for pos, i in enumerate(top) if i in combined]
    resorted = sorted(combined, key=lambda i: (-combined[i], before[i]))
    for pos, i in zip(slots, resorted, strict=True):
        top[pos] = i
    evidence = {i: {"z": zs[i], "before": before[i], "after": pos}
                for pos, i in enumerate(top, start=1) if i in zs}
    return Calibrated(top + list(order[head:]), evidence)


def permute_scores(before: Sequence[int], after: Sequence[int], scores: dict[int, float]) -> None:
    """Give the notes in ``after`` the score values ``before`` had at the same positions (in place).

    The head's score values stay the same set (ties split by a hair), so anything downstream that
    compares scores (graph decay offers, the rerank floor) works on the scale it was tuned for.
    """
    values = [scores[i] for i in before]
    previous = float("inf")
    for i, value in zip(after, values, strict=True):
        value = min(value, previous - 1e-9)  # strictly decreasing: a re-sort by score keeps this order
        scores[i] = previous = value
