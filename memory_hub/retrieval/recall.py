"""Recall: which notes to put in front of the model for this prompt, decided in milliseconds.

Recall ranks with the search pipeline (``search.search``), the same way in the warm server and in a
cold hook process: one ``RecallSearch`` in one mode (``MEMORY_HUB_RECALL_MODE``, default
``lexical``, the mode a cold process can afford inside the hook's deadline), so the same prompt
over the same vault gets the same block on either path. What recall adds, each in its own module:

1. **Mode** (``recall_modes.py``): ``light``, ``targeted`` or ``graph-overview``, by rules over
   recall's own persisted index (``recall_index.py``: cheap, warm restart from one file, names and
   links of every note). Notes the prompt names are pinned first; trivial prompts get no block.
2. **Adjustments** (``recall_score.py``): the weak tail dropped (a relative evidence cut-off), usage
   boosts, backlinks in graph-overview; nothing when the search reports ``low_confidence``.
3. **Same-turn hints** (``hints.py``), when a local LLM endpoint is configured: this turn's hint if it
   beats its deadline, else the session's previous one; what its terms find joins the ranking.
4. The block (``block.py``) within the token budget; the session's already-shown notes left out.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vault.notes import UNRANKED_KINDS
from . import hints as hint_paths
from . import recall_score
from .block import DEFAULT_BUDGET, Block, Entry, render
from .recall_index import RecallIndex, query_terms, tokens
from .recall_modes import (
    _GRAPH_JA,
    _GRAPH_WORDS,
    GRAPH,
    LIGHT,
    TARGETED,
    ModeDecision,
    _Prototypes,
    classify,
    is_trivial,
)
from .recall_score import Recalled

MODE_ENV = "MEMORY_HUB_RECALL_MODE"
SEARCH_MODES = ("lexical", "hybrid", "hybrid+graph")
DEFAULT_SEARCH_MODE = "lexical"
SEARCH_K = 10  # search hits recall reads; the block shows at most PER_MODE_K of them
SEARCH_QUERY_TERMS = 12  # a long prompt is searched by its rarest terms, not all of its words
PER_MODE_K = {LIGHT: 5, TARGETED: 6, GRAPH: 8}
HINT_K = 3  # hits of a hint's terms that may join the block
HINT_WEIGHT = {hint_paths.WON: 0.5, hint_paths.PREVIOUS: 0.25}  # against the prompt's own ranking (1.0)


def search_mode() -> str:
    """The search mode recall ranks with (``MEMORY_HUB_RECALL_MODE``); ValueError for an unknown one."""
    mode = (os.environ.get(MODE_ENV) or DEFAULT_SEARCH_MODE).strip()
    if mode not in SEARCH_MODES:
        raise ValueError(f"{MODE_ENV}={mode!r}: use one of {', '.join(SEARCH_MODES)}")
    return mode


@dataclass
class Ranked:
    """One search run as recall reads it."""

    hits: list[Any]
    low_confidence: bool = False
    mode: str = DEFAULT_SEARCH_MODE
    fallback: str | None = None  # why the search ran in another mode than asked
    warnings: list[str] = field(default_factory=list)


FIRST_INDEX_MAX_FILES = 400  # a never-indexed vault this small is indexed on the spot (~1 s)


def _first_index(vault: Path, store: Any) -> None:
    """A vault nobody has indexed yet: recall ranks with the search index, so a small one is
    indexed here (lexical and links, what a first ``memory-hub index`` does before vectors); a large
    one is left alone, and recall says ``no-index`` rather than a silent "nothing relevant"."""
    from ..index.sync import sync
    from ..vault.walk import walk

    files = 0
    for _ in walk(vault):
        files += 1
        if files > FIRST_INDEX_MAX_FILES:
            return
    sync(vault, store=store, progress=False)


def never_indexed(store: Any) -> bool:
    """True when the search index has never been built for this vault."""
    return store.get_meta("last_sync") is None


class RecallSearch:
    """The search recall ranks with: ``search.search`` over one store, in one mode, explained.

    Warm and cold build it the same way; they differ only in where the store and the vectors come
    from (the server's, already open, or this process's). When the mode needs vectors and the
    models are not available (a server still loading them), it searches lexically and says so.
    """

    def __init__(self, store: Any, mode: str = DEFAULT_SEARCH_MODE,
                 vectors: Callable[[], tuple[Any, str | None]] | None = None) -> None:
        if mode not in SEARCH_MODES:
            raise ValueError(f"recall search mode {mode!r}: use one of {', '.join(SEARCH_MODES)}")
        self._store = store
        self.mode = mode
        self._vectors = vectors

    @property
    def store(self) -> Any:
        if callable(self._store):
            self._store = self._store()
        return self._store

    @classmethod
    def cold(cls, vault: Path, mode: str | None = None) -> RecallSearch:
        """In-process: opens the vault's SQLite index on first use (and its vectors, if the mode needs them)."""
        def store() -> Any:
            from ..index.store import Store

            opened = Store(vault)
            if opened.get_meta("last_sync") is None:
                _first_index(vault, opened)
            return opened

        search = cls(store, mode or search_mode())

        def vectors() -> tuple[Any, str | None]:
            from .search import default_vectors

            return default_vectors(search.store), None

        search._vectors = vectors
        return search

    @classmethod
    def for_state(cls, state: Any, mode: str | None = None) -> RecallSearch:
        """The warm server's: its open store, and its searcher's vectors once the models are loaded."""
        def vectors() -> tuple[Any, str | None]:
            from .search import has_vectors

            if not has_vectors(state.store):
                return None, None  # the same as a cold process: search() warns and stays lexical
            state.ensure_warm()
            if not state.models_ready.is_set():
                return None, "models-loading"
            if state.models_error:
                return None, f"models-unavailable: {state.models_error}"
            return state.searcher.vectors, None

        return cls(state.store, mode or search_mode(), vectors)

    def __call__(self, query: str, k: int, prefix: str | None) -> Ranked:
        from ..index.lexical import Filters
        from .search import search

        mode, vectors, fallback = self.mode, None, None
        if mode != "lexical" and self._vectors is not None:
            try:
                vectors, fallback = self._vectors()
            except Exception as exc:  # noqa: BLE001 - a model that cannot load leaves lexical search
                vectors, fallback = None, f"vectors-failed: {type(exc).__name__}"
            if vectors is None:
                mode = "lexical" if fallback else mode
        result = search(self.store, query[:1000], k=k, filters=Filters(path_prefix=prefix), explain=True,
                        mode=mode, vectors=vectors)
        return Ranked(result.hits, bool(getattr(result, "low_confidence", False)), mode, fallback,
                      list(result.warnings))


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
    skipped: str | None = None  # why no block: trivial, no-index, no-match, low-confidence, all-seen
    fallback: str | None = None  # why the final mode or path differs from the first choice
    search_mode: str | None = None
    low_confidence: bool = False
    dropped_tail: int = 0  # search hits left out as a weak tail
    hint: dict[str, Any] | None = None  # which hint path served, and what it added
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what a person should hear about (stderr, --json)
    vaults: dict[str, Any] | None = None  # several vaults recalled together (team/recall.py): who gave what

    @property
    def text(self) -> str:
        return self.block.text if self.block else ""

    def telemetry(self, count_tokens: bool = True) -> dict[str, Any]:
        """The recall's telemetry fields; ``count_tokens=False`` leaves ``tokens`` None when the
        block has not been counted yet (a cold hook counts it after replying)."""
        tokens = (self.block.tokens if count_tokens or self.block.counted is not None else None) if self.block else 0
        return {
            "mode_chosen": self.mode_chosen, "mode": self.mode, "confidence": self.confidence,
            "reason": self.reason, "candidates": self.candidates,
            "injected": [e.path for e in self.block.included] if self.block else [],
            "tokens": tokens, "skipped": self.skipped,
            "fallback": self.fallback, "search_mode": self.search_mode, "low_confidence": self.low_confidence,
            "dropped_tail": self.dropped_tail, "hint": self.hint, "timings_ms": self.timings_ms,
            "prompt_chars": self.prompt_chars, **({"warnings": self.warnings} if self.warnings else {}),
            **({"vaults": self.vaults} if self.vaults else {}),
        }


def _note_fallback(result: RecallResult, reason: str | None) -> None:
    if reason and reason not in (result.fallback or ""):
        result.fallback = f"{result.fallback}; {reason}" if result.fallback else reason


class Recaller:
    """Recall for one vault; hold one per process (the warm server keeps it for every prompt)."""

    def __init__(self, vault: Path, *, search: RecallSearch | None = None, embedder: Any = None,
                 refresh_interval: float | None = 0.0) -> None:
        self.vault = Path(vault).resolve()
        self.index = RecallIndex(self.vault)
        self.index.load()
        self.search = search or RecallSearch.cold(self.vault)
        self.prototypes = _Prototypes(embedder) if embedder is not None else None
        self.refresh_interval = refresh_interval
        self._refreshing = threading.Event()

    @property
    def search_mode(self) -> str:
        return self.search.mode

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

    def search_query(self, prompt: str, decision: ModeDecision | None = None) -> str:
        """What the search is asked. A graph-overview prompt loses the words of "how do they relate"
        (the ask is X and Y); a long prompt is asked by its rarest terms (FTS over every word of a
        300-word prompt costs more than the rest of recall)."""
        if decision is not None and decision.mode == GRAPH:
            words = _GRAPH_JA.sub(" ", prompt).split()
            kept = [w for w in words if not (set(tokens(w)) and set(tokens(w)) <= _GRAPH_WORDS)]
            prompt = " ".join(kept) or prompt
        if len(prompt) <= 200:
            return prompt
        counts = self.index.df(query_terms(prompt))  # read per term, not every posting
        terms = [t for t, n in counts.items() if n]
        terms.sort(key=lambda t: counts[t])
        return " ".join(terms[:SEARCH_QUERY_TERMS]) or prompt[:200]

    def recall(self, prompt: str, *, exclude: Iterable[str] = (), budget: int = DEFAULT_BUDGET,
               k: int | None = None, prefix: str | None = None, deadline: float | None = None,
               hint: hint_paths.HintRace | None = None) -> RecallResult:
        """The notes worth showing for ``prompt`` and their block; ``exclude`` is what this session
        has already seen; ``hint`` races a same-turn hint (``hints.start``). Thread-safe."""
        with self.index._lock:
            return self._recall(prompt, exclude, budget, k, prefix, deadline, hint)

    def _search(self, query: str, prefix: str | None, result: RecallResult) -> Ranked:
        try:
            ranked = self.search(query, SEARCH_K, prefix)
        except Exception as exc:  # noqa: BLE001 - recall must answer even if the search index is absent
            _note_fallback(result, f"search-failed: {type(exc).__name__}: {exc}"[:200])
            return Ranked([], mode=self.search.mode)
        _note_fallback(result, ranked.fallback)
        notes = self.index.data.notes
        ranked.hits = [h for h in ranked.hits if h.kind not in UNRANKED_KINDS
                       and not (h.path in notes and notes[h.path].kind in UNRANKED_KINDS)]
        return ranked

    def _recall(self, prompt: str, exclude: Iterable[str], budget: int, k: int | None, prefix: str | None,
                deadline: float | None, hint: hint_paths.HintRace | None) -> RecallResult:
        t0 = time.perf_counter()
        prompt = prompt if isinstance(prompt, str) else ""
        result = RecallResult(len(prompt), None, None, None, search_mode=self.search.mode)
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
        if never_indexed(self.search.store):
            result.skipped = "no-index"
            result.warnings.append(f"{self.vault} has no search index yet: run `memory-hub index` "
                                   "(recall injected nothing)")
            result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
            return result
        ranked = self._search(self.search_query(prompt, decision), prefix, result)
        result.search_mode, result.low_confidence = ranked.mode, ranked.low_confidence
        result.timings_ms["search"] = round((time.perf_counter() - t1) * 1000, 2)
        hinted, weight = Ranked([]), 0.0
        if hint is not None:
            t2 = time.perf_counter()
            terms, path, info = hint.resolve()
            result.timings_ms["hint_wait"] = round((time.perf_counter() - t2) * 1000, 2)
            if terms:
                t3 = time.perf_counter()
                hinted = self._search(" ".join(terms), prefix, result)
                weight = HINT_WEIGHT.get(path, 0.0)
                result.timings_ms["hint_search"] = round((time.perf_counter() - t3) * 1000, 2)
                info["low_confidence"] = hinted.low_confidence
            result.hint = info
        self._choose(result, decision, ranked, hinted, weight, exclude, budget, k, prefix)
        result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
        return result

    def _choose(self, result: RecallResult, decision: ModeDecision, ranked: Ranked, hinted: Ranked,
                weight: float, exclude: Iterable[str], budget: int, k: int | None, prefix: str | None) -> None:
        """Pins, the weak-tail cut, hint hits, usage boosts, the session's exclusions, the block."""
        notes = self.index.data.notes
        pins = [p for p in decision.subjects if p in notes and (not prefix or p.startswith(prefix))]
        exact = [h.path for h in ranked.hits if h.exact]
        if decision.mode == TARGETED and not pins and not exact:
            result.mode = LIGHT
            _note_fallback(result, "targeted-subject-not-found")
        by_path: dict[str, Any] = {}
        scores: dict[str, float] = {}
        strength: dict[str, float] = {}
        sources: dict[str, str] = {}
        for name, run, w, cap in (("search", ranked, 1.0, SEARCH_K), ("hint", hinted, weight, HINT_K)):
            if not run.hits or w <= 0:
                continue
            ev = recall_score.evidence(run.hits)
            kept = [h for i, h in enumerate(run.hits)
                    if i < recall_score.KEEP_TOP or ev[h.path] >= recall_score.TAIL_SHARE]
            if run.low_confidence:
                kept = [h for h in kept if h.exact]  # no real evidence: nothing but exact matches
            if name == "search":
                result.dropped_tail = len(run.hits) - len(kept)
            for rank, h in enumerate(kept[:cap], start=1):
                by_path.setdefault(h.path, h)
                scores[h.path] = scores.get(h.path, 0.0) + w * recall_score.rank_score(rank)
                strength[h.path] = max(strength.get(h.path, 0.0), ev[h.path])
                sources.setdefault(h.path, name)
        backlinks = self.index.backlinks() if decision.mode == GRAPH else {}
        use = recall_score.usage(self.vault, self.index, scores)
        now = time.time()
        for path in scores:
            info = notes.get(path)
            scores[path] *= recall_score.boost(use[path], bool(info and info.raw_transcript),
                                               backlinks.get(path, 0), now)
        pinned = list(dict.fromkeys(pins + exact))
        order = pinned + sorted((p for p in scores if p not in set(pinned)), key=lambda p: (-scores[p], p))
        result.candidates = len(order)
        if pinned:
            result.confidence = "high"
        elif ranked.low_confidence:
            result.confidence = "low"
        elif order:
            result.confidence = "medium"
        seen = set(exclude)
        limit = k or PER_MODE_K[result.mode or LIGHT]
        chosen: list[Recalled] = []
        for p in order:
            if p in seen:
                continue
            hit = by_path.get(p)
            info = notes.get(p)
            if hit is None and info is None:
                continue
            title = hit.title if hit is not None else info.title
            description = hit.description if hit is not None else info.description
            chosen.append(Recalled(p, title, description, round(scores.get(p, 0.0), 6), strength.get(p, 1.0),
                                   p in pinned, "subject" if p in pins else sources.get(p, "search")))
            if len(chosen) >= limit:
                break
        result.notes = chosen
        if result.hint is not None:
            result.hint["added"] = [r.path for r in chosen if r.source == "hint"]
        if not order:
            result.skipped = "low-confidence" if ranked.low_confidence else "no-match"
        elif not chosen:
            result.skipped = "all-seen"
        else:
            result.block = render(result.mode or LIGHT, [Entry(r.path, r.title, r.description) for r in chosen],
                                  budget=budget)


# -- the warm server ------------------------------------------------------------------------------

def recaller_for_state(state: Any) -> Recaller:
    """The server's long-lived Recaller (parked in ``state.extras``), ranking through its open store."""
    with _state_lock:
        recaller = state.extras.get("recaller")
        if recaller is None:
            # With a watcher, every sync it runs tells recall which files changed, so prompts never
            # pay for a stat walk; without one, a walk at most every few seconds.
            watched = getattr(state, "watcher", None) is not None
            recaller = Recaller(state.vault, search=RecallSearch.for_state(state),
                                refresh_interval=None if watched else 5.0)
            if watched:
                from ..index.sync import on_change

                on_change(change_listener(recaller))
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


def change_listener(recaller: Recaller) -> Callable[[Any, Any], None]:
    def changed(store: Any, report: Any) -> None:
        if Path(store.vault).resolve() != recaller.vault:
            return
        paths = [*report.added, *report.updated, *report.deleted, *(p for pair in report.renamed for p in pair)]
        try:
            recaller.index.refresh(only=paths)
        except Exception:  # noqa: BLE001 - a failed update is caught by the next full refresh
            recaller.index.last_refresh = 0.0

    return changed


def recall_for_server(state: Any, prompt: str, budget_tokens: int = DEFAULT_BUDGET,
                      recaller: Any = None) -> dict[str, Any]:
    """The MCP ``recall`` tool: the block for ``prompt`` (no session de-duplication, no hints);
    ``recaller`` is the server's own unless given (several vaults: ``team/recall.py``)."""
    result = (recaller or recaller_for_state(state)).recall(prompt, budget=budget_tokens)
    return {
        "block": result.text, "mode": result.mode, "confidence": result.confidence,
        "notes": len(result.block.included) if result.block else 0,
        "tokens": result.block.tokens if result.block else 0, "skipped": result.skipped,
        **({"warnings": result.warnings} if result.warnings else {}),
    }

