"""The HTTP reranker against real loopback servers speaking the common ``/rerank`` shapes.

Each server is a real ``ThreadingHTTPServer`` started in the test; it scores a document by how
many of the query's words it contains (enough to reorder the fused ranking visibly). Shapes: the
``documents`` → ``results[index, relevance_score]`` family (llama.cpp, Infinity, vLLM, Jina,
Cohere) and text-embeddings-inference's ``texts`` → ``[index, score]``; plus a slow server, one
that answers garbage, and one that is down.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memory_hub.retrieval.rerank import RerankerError, RerankUnavailable, load_reranker
from memory_hub.retrieval.rerank_http import HttpReranker, parse_scores
from memory_hub.retrieval.search import search


def overlap(query: str, doc: str) -> float:
    words = set(re.findall(r"\w+", query.lower()))
    return float(sum(1 for w in set(re.findall(r"\w+", doc.lower())) if w in words))


def documents_api(body: dict[str, Any]) -> tuple[int, Any]:
    """llama.cpp / Infinity / vLLM / Jina / Cohere: results sorted by score, top_n honoured."""
    if "documents" not in body:
        return 422, {"error": "documents is required"}
    scored = [{"index": i, "relevance_score": overlap(body["query"], d)} for i, d in enumerate(body["documents"])]
    scored.sort(key=lambda r: -r["relevance_score"])
    return 200, {"model": body.get("model", "stub"), "object": "list", "results": scored[: body.get("top_n") or None]}


def tei_api(body: dict[str, Any]) -> tuple[int, Any]:
    """text-embeddings-inference: ``texts`` in, a bare list of {index, score} out; rejects other shapes."""
    if "texts" not in body:
        return 422, {"error": "missing field `texts`", "error_type": "Validation"}
    scored = [{"index": i, "score": overlap(body["query"], t)} for i, t in enumerate(body["texts"])]
    return 200, sorted(scored, key=lambda r: -r["score"])


@contextmanager
def rerank_server(api: Callable[[dict[str, Any]], tuple[int, Any]], delay: float = 0.0,
                  raw: bytes | None = None) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            seen.append({"path": self.path, "body": body})
            if delay:
                time.sleep(delay)
            code, reply = api(body)
            data = raw if raw is not None else json.dumps(reply).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rerank", seen
    finally:
        server.shutdown()
        server.server_close()


NOTES = {
    "a.md": "---\ntitle: Deploy checklist\n---\nDeploy steps for the web tier.\n",
    "b.md": "---\ntitle: Deploy notes\n---\nDeploy the database migration first, then the web tier, then warm the cache.\n",
    "c.md": "---\ntitle: Deploy history\n---\nA deploy went wrong once.\n",
}
QUERY = "deploy database migration cache"


@pytest.mark.parametrize("api", [documents_api, tei_api])
def test_both_request_shapes_rerank_a_search(make_vault, api) -> None:  # noqa: ANN001
    _, store = make_vault(NOTES)
    with rerank_server(api) as (url, seen):
        reranker = load_reranker(url)
        assert isinstance(reranker, HttpReranker)
        result = search(store, QUERY, k=3, mode="hybrid+rerank", reranker=reranker, explain=True)
        again = search(store, QUERY, k=3, mode="hybrid+rerank", reranker=reranker)
    assert result.hits[0].path == "b.md"  # the note with every query word, lifted by the reranker
    assert all(h.rerank and h.rerank["model"].startswith("http/127.0.0.1") for h in result.hits)
    assert not any("reranker unavailable" in w for w in result.warnings)
    assert [h.path for h in again.hits] == [h.path for h in result.hits]
    shape = "documents" if api is documents_api else "texts"
    assert reranker.shape == shape and shape in seen[-1]["body"] and seen[-1]["body"]["query"] == QUERY
    if api is tei_api:
        assert len(seen) == 3  # the first query tried the documents shape once, then remembered "texts"


def test_a_slow_server_keeps_the_fused_order_and_says_so(make_vault) -> None:
    _, store = make_vault(NOTES)
    fused = [h.path for h in search(store, QUERY, k=3, mode="hybrid").hits]
    with rerank_server(documents_api, delay=2.0) as (url, _):
        t0 = time.monotonic()
        result = search(store, QUERY, k=3, mode="hybrid+rerank", reranker=HttpReranker(url, timeout=0.3))
        took = time.monotonic() - t0
    assert [h.path for h in result.hits] == fused
    assert any("did not answer within 0.3 s" in w for w in result.warnings)
    assert took < 1.9  # the search did not wait for the server's two seconds


@pytest.mark.parametrize("raw", [b"<html>oops</html>", b'{"results": [{"index": 9, "relevance_score": 1}]}',
                                 b'{"results": "none"}', b'[{"index": 0}]'])
def test_garbage_keeps_the_fused_order(make_vault, raw: bytes) -> None:
    _, store = make_vault(NOTES)
    fused = [h.path for h in search(store, QUERY, k=3, mode="hybrid").hits]
    with rerank_server(documents_api, raw=raw) as (url, _):
        result = search(store, QUERY, k=3, mode="hybrid+rerank", reranker=HttpReranker(url))
    assert [h.path for h in result.hits] == fused
    assert any(w.startswith("reranker unavailable") for w in result.warnings)


def test_a_server_that_is_down(make_vault) -> None:
    _, store = make_vault(NOTES)
    result = search(store, QUERY, k=3, mode="hybrid+rerank", reranker=HttpReranker("http://127.0.0.1:9/rerank"))
    assert result.hits and any("unreachable" in w for w in result.warnings)


def test_response_shapes_and_bad_specs() -> None:
    assert parse_scores([0.1, 0.9], 2) == [0.1, 0.9]
    assert parse_scores({"results": [{"index": 1, "relevance_score": 0.7}]}, 3) == pytest.approx([-0.3, 0.7, -0.3])
    assert parse_scores({"data": [{"index": 0, "score": 2}, {"index": 1, "logit": -1}]}, 2) == [2.0, -1.0]
    with pytest.raises(RerankUnavailable):
        parse_scores({"results": [{"index": True, "score": 1}]}, 2)
    with pytest.raises(RerankerError):
        HttpReranker("ftp://example/rerank")
    reranker = HttpReranker("http://127.0.0.1:9/v1/rerank", model="bge-reranker-v2-m3")
    assert reranker.body("documents", "q", ["d"])["model"] == "bge-reranker-v2-m3"
