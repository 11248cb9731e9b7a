"""A long-lived searcher: one per process, holding the index and the models warm.

The CLI makes one per command; the MCP server keeps one for its lifetime. Models load lazily (or in
``warm()``), so creating a Searcher is instant and a lexical search never waits for an embedder.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..index.embed import Embedder, EmbedderError, load_embedder
from ..index.embed.loader import embedder_fingerprint
from ..index.lexical import Filters
from ..index.store import Store
from ..index.vectors import Coverage, VectorIndex, VectorReport, current_coverage, current_embedder
from .rerank import Reranker, load_reranker
from .search import DEFAULT_MODE, SearchResult, has_vectors, search, stages


class Searcher:
    """``Searcher(vault).search(query, k, filters, mode, explain) -> SearchResult``.

    ``embedder`` and ``reranker`` are specs (see ``load_embedder`` / ``load_reranker``); ``None``
    means the defaults (``auto``), which honour ``$MEMORY_HUB_EMBEDDER`` / ``$MEMORY_HUB_RERANKER``.
    """

    def __init__(self, vault: Path, store: Store | None = None, embedder: str | None = None,
                 reranker: str | None = None, mode: str = DEFAULT_MODE) -> None:
        stages(mode)  # fail early on a bad default mode
        self.vault = Path(vault).resolve()
        self.store = store or Store(self.vault)
        self.mode = mode
        self._embedder_spec = embedder
        self._reranker_spec = reranker
        self._embedder: Embedder | None = None
        self._vectors: VectorIndex | None = None
        self._reranker: Reranker | None = None
        self._reranker_loaded = False
        self._lock = threading.Lock()
        self._models_from: Searcher | None = None

    def share_models(self, other: Searcher) -> Searcher:
        """Use ``other``'s embedder and reranker (loaded once, by whichever searcher needs them first)
        when both name the same ones: a server searching several vaults holds one copy of each."""
        if (other._embedder_spec, other._reranker_spec) == (self._embedder_spec, self._reranker_spec):
            self._models_from = other
        return self

    @property
    def embedder(self) -> Embedder:
        if self._models_from is not None:
            return self._models_from.embedder
        with self._lock:
            if self._embedder is None:
                self._embedder = load_embedder(self._embedder_spec)
            return self._embedder

    @property
    def vectors(self) -> VectorIndex:
        emb = self.embedder
        with self._lock:
            if self._vectors is None:
                self._vectors = VectorIndex(self.vault, emb, self._fingerprint())
            return self._vectors

    @property
    def vectors_open(self) -> bool:
        """Whether the vector index is open (its model loaded): keeping vectors fresh then loads nothing."""
        return self._vectors is not None

    def _fingerprint(self) -> str | None:
        try:
            return embedder_fingerprint(self._embedder_spec)
        except EmbedderError:
            return None

    @property
    def reranker(self) -> Reranker | None:
        if self._models_from is not None:
            return self._models_from.reranker
        if not self._reranker_loaded:
            emb = self.embedder if (self._reranker_spec or "") == "maxsim" else None
            with self._lock:
                if not self._reranker_loaded:
                    self._reranker = load_reranker(self._reranker_spec or "auto", emb)
                    self._reranker_loaded = True
        return self._reranker

    def search(self, query: str, k: int = 10, filters: Filters | None = None, mode: str | None = None,
               explain: bool = False) -> SearchResult:
        """Search with this searcher's models. Vector stages are skipped (with a warning) until vectors exist."""
        mode = mode or self.mode
        plan = stages(mode)
        vectors = self.vectors if plan.vectors and (self._vectors is not None or has_vectors(self.store)) else None
        reranker = self.reranker if plan.rerank else None
        if plan.vectors and vectors is None:
            result = search(self.store, query, k, filters, explain, "lexical" if plan.lexical else mode,
                            vectors=None, reranker=reranker)
            result.warnings.append("no vectors for this vault yet (run `memory-hub index`); searched lexically")
            return result
        result = search(self.store, query, k, filters, explain, mode, vectors=vectors, reranker=reranker)
        if vectors is not None:
            have, ranked = vectors.notes_covered(self.store)
            if have < ranked:  # an embedding run in progress or interrupted: say how blind the channel is
                result.warnings.append(
                    f"vectors cover {have:,} of {ranked:,} notes ({have / ranked:.0%}); the others are found by "
                    "the lexical channels only until embedding finishes (`memory-hub index`)")
        return result

    def warm(self, search: bool = False) -> None:
        """Load the embedder, the vectors and the reranker now, and run one query through them;
        ``search``: also one whole search in this searcher's mode, which reads what a first search
        reads (the ANN index's partitions, the link graph, the vault-wide counts, the coverage)."""
        if has_vectors(self.store):
            self.vectors.size(self.store)
            self.embedder.embed_queries(["warm up"])
        if "rerank" in self.mode:
            _ = self.reranker
        if search:
            self.search("warm up", k=1)

    def sync_vectors(self, progress: bool | None = None, changes: Any = None,
                     defer_ann: bool = False) -> VectorReport:
        """Embed what changed since the last run (see ``VectorIndex.sync``; ``changes``: the lexical
        sync's report, so only its notes are compared). When nothing changed since the last complete
        run, says so without loading the model or reading the table, whether or not this searcher has
        loaded them: a server's start-up catch-up runs after its warm-up loaded both, and comparing every
        note with the table cost ~1.4 s of CPU and ~250 MB of RSS at 100k notes for nothing."""
        fingerprint = getattr(self._vectors, "fingerprint", None) or self._fingerprint()
        key = current_embedder(self.store, fingerprint) if fingerprint else None
        if key is not None:
            return VectorReport(key)
        return self.vectors.sync(self.store, progress=progress, changes=changes, defer_ann=defer_ann)

    def coverage(self) -> Coverage:
        """Vector coverage; answered from the last complete sync's stamp when nothing changed since."""
        if self._vectors is None:
            fingerprint = self._fingerprint()
            known = current_coverage(self.store, fingerprint) if fingerprint else None
            if known is not None:
                return known
        return self.vectors.coverage(self.store)

    def reopen(self, store: Store) -> None:
        """Answer from ``store`` from now on (the old index was deleted under a running server).

        Loaded models stay; the vector index is reopened on next use."""
        with self._lock:
            self.store = store
            self._vectors = None

    def close(self) -> None:
        self.store.close()


def result_json(result: SearchResult, explain: bool = False) -> dict[str, Any]:
    """A search result as ``memory-hub search --json`` prints it (and the hooks socket returns it)."""
    return {
        "query": result.query,
        "results": [h.as_dict(explain=explain) for h in result.hits],
        "timings_ms": result.timings_ms,
        "warnings": result.warnings,
        "low_confidence": result.low_confidence,
        **({"vector_query": result.vector_query} if explain and result.vector_query else {}),
        **({"evidence": result.evidence} if explain and result.evidence else {}),
    }
