"""Recall: which notes to put in front of the model for this prompt, decided in milliseconds.

This module orchestrates; each step has its own module:

1. **Mode** (``recall_modes.py``): ``light``, ``targeted`` or ``graph-overview``, by rules.
2. **Recall's own scoring** (``recall_score.py``) over its own persisted index
   (``recall_index.py``), boosted by usage.
3. **Fusion** with the hybrid search (RRF), notes the prompt names pinned first, then the block
   (``block.py``) within the token budget. The warm server keeps one ``Recaller`` per vault.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vault.counters import recent_reads
from ..vault.notes import UNRANKED_KINDS
from . import fusion, recall_score
from .block import DEFAULT_BUDGET, Block, Entry, render
from .recall_index import RecallIndex, query_terms
from .recall_modes import GRAPH, LIGHT, TARGETED, ModeDecision, _Prototypes, classify, is_trivial
from .recall_score import Recalled

HYBRID_K = 10  # hybrid hits fused; beyond the top few they only add cost (snippets)
HYBRID_QUERY_TERMS = 12  # a long prompt is searched by its rarest terms, not all of its words
PER_MODE_K = {LIGHT: 6, TARGETED: 8, GRAPH: 10}
RELATIVE_FLOOR = 0.08  # recall candidates below this share of the best score are dropped
HYBRID_ONLY_TOP = 5  # a note only the hybrid search found must rank this high there

# -- recall ---------------------------------------------------------------------------------------

# A hybrid-search callable: (query, k, path_prefix) → [(path, exact)] best first.
HybridSearch = Callable[[str, int, str | None], list[tuple[str, bool]]]


def store_search(vault: Path, mode: str = "lexical") -> HybridSearch:
    """The retrieval issue's search (``search.search``) over the SQLite index, in-process.

    ``lexical`` by default: a cold hook process cannot afford to load the embedding model on the
    prompt's critical path; the warm server fuses with its full hybrid searcher instead.
    """
    state: dict[str, Any] = {}

    def run(query: str, k: int, prefix: str | None) -> list[tuple[str, bool]]:
        from ..index.lexical import Filters
        from ..index.store import Store
        from .search import search

        if "store" not in state:
            state["store"] = Store(vault)
        result = search(state["store"], query[:1000], k=k, filters=Filters(path_prefix=prefix), mode=mode)
        return [(h.path, h.exact) for h in result.hits]

    return run


@dataclass
class RecallResult:
    prompt_chars: int
    mode_chosen: str | None
    mode: str | None
    confidence: str | None
    reason: str = ""
    candidates: int = 0
    notes: list[Recalled] = field(default_factory=list)
    block: Block | None = None
    skipped: str | None = None  # why no block: trivial, no-match, all-seen
    fallback: str | None = None  # why the final mode or path differs from the first choice
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.block.text if self.block else ""

    def telemetry(self) -> dict[str, Any]:
        return {
            "mode_chosen": self.mode_chosen, "mode": self.mode, "confidence": self.confidence,
            "reason": self.reason, "candidates": self.candidates,
            "injected": [e.path for e in self.block.included] if self.block else [],
            "tokens": self.block.tokens if self.block else 0, "skipped": self.skipped,
            "fallback": self.fallback, "timings_ms": self.timings_ms, "prompt_chars": self.prompt_chars,
        }


class Recaller:
    """Recall for one vault; hold one per process (the warm server keeps it for every prompt)."""

    def __init__(self, vault: Path, *, hybrid: HybridSearch | None | bool = True, embedder: Any = None,
                 refresh_interval: float | None = 0.0) -> None:
        self.vault = Path(vault).resolve()
        self.index = RecallIndex(self.vault)
        self.index.load()
        self.hybrid: HybridSearch | None = store_search(self.vault) if hybrid is True else (hybrid or None)
        self.prototypes = _Prototypes(embedder) if embedder is not None else None
        self.refresh_interval = refresh_interval
        self._recent: tuple[float, dict[str, float]] = (0.0, {})
        self._refreshing = threading.Event()

    def refresh(self, deadline: float | None = None) -> dict[str, int]:
        return self.index.refresh(deadline=deadline)

    def _maybe_refresh(self, deadline: float | None) -> None:
        """A stat walk per prompt in a cold process; in a warm one only every ``refresh_interval``
        seconds (``None``: never on the prompt path, because a watcher feeds ``index.refresh(only=…)``)."""
        if not self.index.data.files or not self.index.last_refresh or self.refresh_interval == 0:
            self.index.refresh(deadline=deadline)
        elif self.refresh_interval is not None and not self._refreshing.is_set() and (
                time.monotonic() - self.index.last_refresh >= self.refresh_interval):
            # warm: answer from the current index and catch up in the background
            self._refreshing.set()

            def catch_up() -> None:
                try:
                    self.index.refresh()
                finally:
                    self._refreshing.clear()

            threading.Thread(target=catch_up, name="memory-hub-recall-refresh", daemon=True).start()

    def _recent_reads(self) -> dict[str, float]:
        at, data = self._recent
        if time.monotonic() - at > 2.0:
            data = recent_reads(self.vault)
            self._recent = (time.monotonic(), data)
        return data

    def hybrid_query(self, prompt: str) -> str:
        """What the hybrid search is asked: a short prompt as is; a long one by its rarest terms
        (FTS over every word of a 300-word prompt costs more than the rest of recall)."""
        if len(prompt) <= 200:
            return prompt
        postings = self.index.data.postings
        terms = [t for t in query_terms(prompt) if t in postings]
        terms.sort(key=lambda t: len(postings[t]))
        return " ".join(terms[:HYBRID_QUERY_TERMS]) or prompt[:200]

    def rank(self, prompt: str, decision: ModeDecision, prefix: str | None = None,
             limit: int = 30) -> list[Recalled]:
        """Recall's own ranking with boosts (no fusion)."""
        return recall_score.rank(self.index, prompt, decision, self._recent_reads(), prefix, limit)

    def recall(self, prompt: str, *, exclude: Iterable[str] = (), budget: int = DEFAULT_BUDGET,
               k: int | None = None, fuse: bool = True, prefix: str | None = None,
               deadline: float | None = None) -> RecallResult:
        """The notes worth showing for ``prompt`` and their block; ``exclude`` is what this session
        has already seen. Thread-safe (one prompt at a time per Recaller)."""
        with self.index._lock:
            return self._recall(prompt, exclude, budget, k, fuse, prefix, deadline)

    def _recall(self, prompt: str, exclude: Iterable[str], budget: int, k: int | None, fuse: bool,
                prefix: str | None, deadline: float | None) -> RecallResult:
        t0 = time.perf_counter()
        prompt = prompt if isinstance(prompt, str) else ""
        result = RecallResult(len(prompt), None, None, None)
        if is_trivial(prompt):
            result.skipped = "trivial"
            result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
            return result
        self._maybe_refresh(deadline)
        if not self.index.complete:
            result.fallback = "recall-index-partial"
        result.timings_ms["refresh"] = round((time.perf_counter() - t0) * 1000, 2)
        decision = classify(prompt, self.index, self.prototypes)
        result.mode_chosen, result.mode, result.confidence, result.reason = (
            decision.mode, decision.mode, decision.confidence, decision.reason)
        t1 = time.perf_counter()
        ranked = self.rank(prompt, decision, prefix)
        result.timings_ms["recall"] = round((time.perf_counter() - t1) * 1000, 2)
        notes = self.index.data.notes
        hybrid: list[tuple[str, bool]] = []
        if fuse and self.hybrid is not None:
            t2 = time.perf_counter()
            try:
                hybrid = [(p, ex) for p, ex in self.hybrid(self.hybrid_query(prompt), HYBRID_K, prefix)
                          if p in notes and notes[p].kind not in UNRANKED_KINDS]
            except Exception as exc:  # noqa: BLE001 - recall must answer even if the search index is absent
                result.fallback = result.fallback or f"hybrid-search-failed: {type(exc).__name__}"
            result.timings_ms["hybrid"] = round((time.perf_counter() - t2) * 1000, 2)
        by_path = {r.path: r for r in ranked}
        if hybrid:
            fused = fusion.rrf({"recall": [r.path for r in ranked], "hybrid": [p for p, _ in hybrid]})
            order = sorted(fused, key=lambda p: (-fused[p], p))
        else:
            order = [r.path for r in ranked]
            fused = {r.path: r.score for r in ranked}
        pins = [p for p in decision.subjects if p in notes and (not prefix or p.startswith(prefix))]
        exact = [p for p, ex in hybrid if ex]
        if decision.mode == TARGETED and not pins and not exact:
            result.mode = LIGHT
            result.fallback = result.fallback or "targeted-subject-not-found"
        pinned = list(dict.fromkeys(pins + exact))
        # The tail of either list is mostly noise: keep a recall candidate only when it scores a
        # fair share of the best one, and a search-only candidate only near the top of the search.
        floor = (ranked[0].score * RELATIVE_FLOOR) if ranked else 0.0
        hybrid_rank = {p: i for i, (p, _) in enumerate(hybrid, start=1)}
        order = pinned + [p for p in order if p not in set(pinned) and (
            (p in by_path and by_path[p].score >= floor) or hybrid_rank.get(p, 99) <= HYBRID_ONLY_TOP)]
        result.candidates = len(order)
        top = by_path.get(order[0]) if order else None
        if not pinned:
            coverage = top.coverage if top else 0.0
            result.confidence = "high" if coverage >= 0.6 else ("medium" if coverage >= 0.3 else "low")
        seen = set(exclude)
        limit = k or PER_MODE_K[result.mode or LIGHT]
        if result.confidence == "low" and not k:
            limit = min(limit, 3)
        chosen: list[Recalled] = []
        for p in order:
            if p in seen:
                continue
            info = notes.get(p)
            if info is None:
                continue
            r = by_path.get(p) or Recalled(p, info.title, info.description, 0.0)
            r.score = round(fused.get(p, r.score), 6)
            r.pinned = p in pinned
            chosen.append(r)
            if len(chosen) >= limit:
                break
        result.notes = chosen
        if not order:
            result.skipped = "no-match"
        elif not chosen:
            result.skipped = "all-seen"
        else:
            result.block = render(result.mode or LIGHT, [Entry(r.path, r.title, r.description) for r in chosen],
                                  budget=budget)
        result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
        return result


# -- the warm server ------------------------------------------------------------------------------

def _state_search(state: Any) -> HybridSearch:
    def run(query: str, k: int, prefix: str | None) -> list[tuple[str, bool]]:
        from ..index.lexical import Filters

        result = state.search(query[:1000], k=k, filters=Filters(path_prefix=prefix) if prefix else None)
        return [(h.path, bool(getattr(h, "exact", False))) for h in result.hits]

    return run


def recaller_for_state(state: Any) -> Recaller:
    """The server's long-lived Recaller (parked in ``state.extras``), fused with its searcher."""
    with _state_lock:
        recaller = state.extras.get("recaller")
        if recaller is None:
            # With a watcher, every sync it runs tells recall which files changed, so prompts never
            # pay for a stat walk; without one, a walk at most every few seconds.
            watched = getattr(state, "watcher", None) is not None
            recaller = Recaller(state.vault, hybrid=_state_search(state),
                                refresh_interval=None if watched else 5.0)
            if watched:
                from ..index.sync import on_change

                on_change(_listener(recaller))
            state.extras["recaller"] = recaller
    if recaller.prototypes is None and state.models_ready.is_set() and os.environ.get("MEMORY_HUB_RECALL_EMBED"):
        embedder = getattr(state.searcher, "embedder", None)
        if embedder is not None:
            try:
                recaller.prototypes = _Prototypes(embedder)
            except Exception:  # noqa: BLE001 - the embedding only breaks ties
                pass
    return recaller


_state_lock = threading.Lock()


def _listener(recaller: Recaller) -> Callable[[Any, Any], None]:
    def changed(store: Any, report: Any) -> None:
        if Path(store.vault).resolve() != recaller.vault:
            return
        paths = [*report.added, *report.updated, *report.deleted, *(p for pair in report.renamed for p in pair)]
        try:
            recaller.index.refresh(only=paths)
        except Exception:  # noqa: BLE001 - a failed update is caught by the next full refresh
            recaller.index.last_refresh = 0.0

    return changed


def recall_for_server(state: Any, prompt: str, budget_tokens: int = DEFAULT_BUDGET) -> dict[str, Any]:
    """The MCP ``recall`` tool: the block for ``prompt`` (no session de-duplication)."""
    result = recaller_for_state(state).recall(prompt, budget=budget_tokens)
    return {
        "block": result.text, "mode": result.mode, "confidence": result.confidence,
        "notes": len(result.block.included) if result.block else 0,
        "tokens": result.block.tokens if result.block else 0, "skipped": result.skipped,
    }
