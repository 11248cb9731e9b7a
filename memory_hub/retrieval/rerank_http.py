"""A reranker served over HTTP: the ``/rerank`` API that rerank servers widely share.

``MEMORY_HUB_RERANKER=http://127.0.0.1:8080/rerank`` (the full URL of the endpoint) sends the
query and the candidates' texts to a local server and reads one relevance score per candidate.
Two request shapes exist in the wild, and both are spoken:

* ``{"query", "documents": [...], "top_n"}`` → ``{"results": [{"index", "relevance_score"}]}`` —
  llama.cpp's ``llama-server --reranking``, Infinity, vLLM, and the Jina / Cohere-style APIs
  (which also want ``"model"``: set ``MEMORY_HUB_RERANKER_MODEL``);
* ``{"query", "texts": [...]}`` → ``[{"index", "score"}]`` — Hugging Face text-embeddings-inference.

The first shape is tried first; a server that refuses it (HTTP 4xx) is asked the second, and the
one that worked is remembered. A server that is slow (``MEMORY_HUB_RERANKER_TIMEOUT``, default
2 s), down, or answers something that is not one score per candidate raises ``RerankUnavailable``:
the search keeps its fused order and says so in its warnings. Only loopback/LAN servers are meant:
the candidates' text is your notes.
"""

from __future__ import annotations

import math
import os
from typing import Any
from urllib.parse import urlsplit

from .rerank import RERANK_DEPTH, RerankerError, RerankUnavailable

TIMEOUT_ENV = "MEMORY_HUB_RERANKER_TIMEOUT"
MODEL_ENV = "MEMORY_HUB_RERANKER_MODEL"
KEY_ENV = "MEMORY_HUB_RERANKER_KEY"
DEPTH_ENV = "MEMORY_HUB_RERANKER_DEPTH"
DEFAULT_TIMEOUT = 2.0
SHAPES = ("documents", "texts")
SCORE_KEYS = ("relevance_score", "score", "logit")


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        raise RerankerError(f"{name} must be a number of seconds, not {os.environ.get(name)!r}") from None


def parse_scores(data: Any, n: int) -> list[float]:
    """One score per document, in request order, from any of the common response shapes.

    Documents a server left out (``top_n``) score below every returned one; anything else that is
    not a score per document raises ``RerankUnavailable``.
    """
    items = data
    if isinstance(data, dict):
        items = next((data[k] for k in ("results", "data", "rerank", "scores") if isinstance(data.get(k), list)), None)
    if not isinstance(items, list):
        raise RerankUnavailable(f"rerank response has no list of results: {str(data)[:120]!r}")
    if len(items) == n and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in items):
        scores = [float(x) for x in items]
    else:
        found: dict[int, float] = {}
        for item in items:
            if not isinstance(item, dict):
                raise RerankUnavailable(f"rerank result is not an object: {str(item)[:80]!r}")
            index = item.get("index")
            value = next((item[k] for k in SCORE_KEYS if k in item), None)
            if (not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n
                    or not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise RerankUnavailable(f"rerank result without a valid index and score: {str(item)[:80]!r}")
            found[index] = float(value)
        if not found:
            raise RerankUnavailable("rerank response scored no document")
        floor = min(found.values()) - 1.0
        scores = [found.get(i, floor) for i in range(n)]
    if any(math.isnan(s) or math.isinf(s) for s in scores):
        raise RerankUnavailable("rerank response has a score that is not a finite number")
    return scores


class HttpReranker:
    """``rerank(query, docs)`` through a ``/rerank`` endpoint; ``RerankUnavailable`` when it cannot."""

    def __init__(self, url: str, timeout: float | None = None, model: str | None = None,
                 key: str | None = None, depth: int | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise RerankerError(f"reranker URL {url!r} must look like http://HOST:PORT/rerank")
        self.url = url
        self.name = f"http/{parts.netloc}{parts.path}"
        self.timeout = timeout if timeout is not None else _env_float(TIMEOUT_ENV, DEFAULT_TIMEOUT)
        self.model = model if model is not None else (os.environ.get(MODEL_ENV) or None)
        self.key = key if key is not None else (os.environ.get(KEY_ENV) or None)
        self.depth = depth if depth is not None else int(_env_float(DEPTH_ENV, RERANK_DEPTH))
        self.shape: str | None = None  # the request shape this server accepted

    def body(self, shape: str, query: str, docs: list[str]) -> dict[str, Any]:
        if shape == "texts":
            body: dict[str, Any] = {"query": query, "texts": docs, "raw_scores": False, "truncate": True}
        else:
            body = {"query": query, "documents": docs, "top_n": len(docs), "return_documents": False}
        if self.model:
            body["model"] = self.model
        return body

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        import httpx

        if not docs:
            return []
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        shapes = [self.shape] if self.shape else list(SHAPES)
        last = ""
        for shape in shapes:
            try:
                resp = httpx.post(self.url, json=self.body(shape, query, docs), headers=headers, timeout=self.timeout)
            except httpx.TimeoutException:
                raise RerankUnavailable(f"{self.name} did not answer within {self.timeout:g} s") from None
            except httpx.HTTPError as exc:
                raise RerankUnavailable(f"{self.name} unreachable: {type(exc).__name__}") from None
            if 400 <= resp.status_code < 500 and self.shape is None:
                last = f"HTTP {resp.status_code}"
                continue  # this server wants the other request shape
            if resp.status_code != 200:
                raise RerankUnavailable(f"{self.name} answered HTTP {resp.status_code}")
            try:
                data = resp.json()
            except ValueError:
                raise RerankUnavailable(f"{self.name} answered something that is not JSON") from None
            scores = parse_scores(data, len(docs))
            self.shape = shape
            return scores
        raise RerankUnavailable(f"{self.name} refused both request shapes ({last})")
