"""The rerank stage: one interface for every reranker, and the blend that keeps it honest.

A reranker reads the query and each candidate's text together and scores them. It is often right
where first-stage retrieval is vague, and sometimes confidently wrong where retrieval was sure
(an exact identifier, a title match). So its verdict is blended by position: the top retrieval
ranks keep most of their weight, deeper ranks let the reranker decide more, and notes that contain
every exact identifier of the query stay pinned on top whatever the reranker says.

Backends (``load_reranker(spec)``):

* ``"none"`` — no rerank stage.
* ``"maxsim"`` — late interaction (ColBERT-style MaxSim) over the embedder's own token vectors: no
  extra weights; needs an embedder with ``token_embeddings`` (the ONNX e5 backend).
* ``http://HOST:PORT/rerank`` — a rerank server (``rerank_http.py``: llama.cpp, text-embeddings-inference,
  Infinity, vLLM, Jina/Cohere-style APIs), with a timeout that keeps the fused order;
* a folder with ``model.onnx`` + ``tokenizer.json`` — an ONNX cross-encoder (``cross_encoder.py``,
  when that backend is installed).
* ``"auto"`` — ``$MEMORY_HUB_RERANKER`` if set, else none: a reranker becomes the default only once
  it has been shown to beat the fused ranking on the dev sets (see README).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from ..index.embed import Embedder

SPEC_ENV = "MEMORY_HUB_RERANKER"
RERANK_DEPTH = 20  # candidates the reranker reads
DOC_CHARS = 1200  # text per candidate handed to the reranker


class RerankerError(RuntimeError):
    """A reranker that cannot be loaded; the message says what to do."""


class RerankUnavailable(RerankerError):
    """A loaded reranker that cannot answer this query (a server timed out, is down, sent garbage).

    The search keeps its fused order and adds the message to its warnings."""


@runtime_checkable
class Reranker(Protocol):
    """Scores ``docs`` against ``query``: higher is more relevant; one score per doc, same order.

    A reranker may also have a ``depth`` attribute: how many candidates it reads (default
    ``RERANK_DEPTH``); a cross-encoder folder sets it in ``manifest.json``.
    """

    name: str

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        ...


def retrieval_weight(rank: int) -> float:
    """How much of a candidate's final score its retrieval rank keeps (rank from 1)."""
    if rank <= 3:
        return 0.75
    if rank <= 10:
        return 0.6
    return 0.4


def blend(order: Sequence[int], scores: Sequence[float], pinned: Sequence[int] = ()) -> list[tuple[int, float]]:
    """Mix retrieval order with reranker scores by position: [(id, blended score)] best first.

    Both sides are turned into reciprocal ranks so neither's scale matters. ``pinned`` ids (exact
    identifier matches) come first in their retrieval order, whatever the reranker said.
    """
    if len(order) != len(scores):
        raise ValueError(f"{len(scores)} rerank scores for {len(order)} candidates")
    by_rerank = sorted(range(len(order)), key=lambda i: (-scores[i], i))
    rerank_rank = {order[i]: r for r, i in enumerate(by_rerank, start=1)}
    blended = []
    for rank, item in enumerate(order, start=1):
        w = retrieval_weight(rank)
        blended.append((item, w / rank + (1 - w) / rerank_rank[item]))
    pin = {p: n for n, p in enumerate(p for p in order if p in set(pinned))}
    blended.sort(key=lambda t: (t[0] not in pin, pin.get(t[0], 0), -t[1], t[0]))
    return blended


class MaxSimReranker:
    """Late interaction over e5 token vectors: each query token finds its best match in the doc.

    Score = mean over query tokens of the max cosine against the doc's tokens. It reuses the
    embedder already in memory, so it costs no extra weights, only a second pass over candidates.
    """

    name = "maxsim"

    def __init__(self, embedder: Embedder, max_doc_chars: int = DOC_CHARS) -> None:
        self.embedder = embedder
        self.max_doc_chars = max_doc_chars
        self.name = f"maxsim/{embedder.identity.key}"
        try:
            embedder.token_embeddings(["probe"], True)
        except NotImplementedError as exc:
            raise RerankerError(f"maxsim needs token embeddings: {exc}") from None

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        if not docs:
            return []
        q = self.embedder.token_embeddings([query], True)[0]
        ds = self.embedder.token_embeddings([d[: self.max_doc_chars] for d in docs], False)
        out = []
        for d in ds:
            if len(q) == 0 or len(d) == 0:
                out.append(0.0)
                continue
            out.append(float(np.max(q @ d.T, axis=1).mean()))
        return out


ReRankerFactory = Callable[[str, "Embedder | None"], Reranker]
_backends: dict[str, ReRankerFactory] = {}


def register_backend(name: str, factory: ReRankerFactory) -> None:
    """Let another module add a named backend (``factory(spec, embedder) -> Reranker``)."""
    _backends[name] = factory


def load_reranker(spec: str | None = "auto", embedder: Embedder | None = None) -> Reranker | None:
    """Turn a spec into a reranker, or ``None`` for no rerank stage. See the module docstring."""
    if spec is None or spec == "auto":
        spec = os.environ.get(SPEC_ENV) or "none"
    spec = spec.strip()
    if spec in ("none", "off", ""):
        return None
    if spec in _backends:
        return _backends[spec](spec, embedder)
    if spec.startswith(("http://", "https://")):
        from .rerank_http import HttpReranker

        return HttpReranker(spec)
    if spec == "maxsim":
        if embedder is None:
            from ..index.embed import load_embedder

            embedder = load_embedder("auto")
        return MaxSimReranker(embedder)
    folder = Path(spec).expanduser()
    if folder.is_dir():
        if not (folder / "model.onnx").is_file() or not (folder / "tokenizer.json").is_file():
            raise RerankerError(f"{folder} is not a cross-encoder folder: it needs model.onnx and tokenizer.json")
        try:
            from . import cross_encoder  # type: ignore[attr-defined]
        except ImportError:
            raise RerankerError("the ONNX cross-encoder backend is not installed in this build") from None
        return cross_encoder.load(folder)
    raise RerankerError(f"unknown reranker {spec!r}: use 'none', 'maxsim', a cross-encoder model folder "
                        "or a rerank server's URL (http://HOST:PORT/rerank)")
