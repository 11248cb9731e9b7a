"""Where a serving process's memory goes at scale: three small probes behind the README's 100k RSS figures.

    python benchmarks/rss_probe.py trace VAULT --embedder DIR [--pythonpath OTHER_CHECKOUT]
    python benchmarks/rss_probe.py parts VAULT --embedder DIR
    python benchmarks/rss_probe.py embedder SPEC            # "default" (e5) or a model folder

``trace``: one real ``serve --transport stdio`` over its life (handshake, first hybrid answer, idle
while the start-up catch-up runs, three rounds of the 30 queries); ``--pythonpath`` runs another
checkout's code for an interleaved A/B. ``parts``: the same steps in one process (``Searcher``), RSS
after each. ``embedder``: the RSS a query embedder adds (load + one query), to compare e5 with the
stand-in when only stand-in vectors exist. Prints JSON; nothing is written to the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.bench_scale import MEMORY_HUB, hub_queries, time_queries, wait_for_vectors  # noqa: E402
from benchmarks.common import DEFAULT_DATA  # noqa: E402
from benchmarks.mcp_client import StdioClient, rss_mb  # noqa: E402


def own_rss() -> float:
    return rss_mb(os.getpid())


def queries() -> list[str]:
    return hub_queries(DEFAULT_DATA)


def trace(vault: Path, embedder: str, pythonpath: str | None) -> list[Any]:
    """(step, seconds since spawn, RSS MB) of one server."""
    env = {**os.environ, "MEMORY_HUB_EMBEDDER": embedder, "MEMORY_HUB_LOG": "warning"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    client = StdioClient([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"], env=env)
    out: list[Any] = []

    def mark(step: str) -> None:
        out.append((step, round(time.perf_counter() - client.spawned, 1), round(rss_mb(client.pid), 1)))

    qs = queries()
    try:
        client.handshake()
        mark("handshake")
        wait_for_vectors(client, qs[0])
        mark("first hybrid answered")
        for _ in range(3):
            time.sleep(5)
            mark("idle 5 s more")
        for r in range(3):
            time_queries(client, qs, 1, "", "hybrid+graph", before_each=None)
            mark(f"after query round {r + 1}")
    finally:
        client.close()
    return out


def parts(vault: Path, embedder: str) -> list[Any]:
    """The server's steps in one process, RSS after each."""
    os.environ["MEMORY_HUB_EMBEDDER"] = embedder
    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync
    from memory_hub.retrieval.search import warm_caches
    from memory_hub.retrieval.searcher import Searcher

    t0 = time.perf_counter()
    out: list[Any] = []

    def mark(step: str) -> None:
        out.append((step, round(time.perf_counter() - t0, 2), own_rss()))

    store = Store(vault)
    mark("store open")
    sync(vault, store=store, progress=False)
    mark("catch-up sync")
    warm_caches(store)
    mark("warm_caches")
    searcher = Searcher(vault, store=store, mode="hybrid+graph")
    searcher.warm()
    mark("searcher.warm")
    searcher.sync_vectors(progress=False)
    mark("sync_vectors (catch-up)")
    for i, q in enumerate(queries()):
        result = searcher.search(q, k=5, mode="hybrid+graph")
        if i == 0:
            mark(f"first hybrid query ({len(result.hits)} hits)")
    mark("30 queries")
    return out


def embedder_rss(spec: str) -> dict[str, Any]:
    import numpy  # noqa: F401 - counted in the base, as a server has it before any model

    from memory_hub.index.embed.loader import load_embedder

    base = own_rss()
    emb = load_embedder(None if spec == "default" else spec)
    emb.embed_queries(["warm up"])
    return {"spec": spec, "model": str(getattr(emb, "identity", "")), "base_mb": base, "loaded_mb": own_rss()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("probe", choices=("trace", "parts", "embedder"))
    ap.add_argument("target", help="the vault (trace, parts) or the embedder spec (embedder)")
    ap.add_argument("--embedder", default="default")
    ap.add_argument("--pythonpath", default=None)
    args = ap.parse_args()
    if args.probe == "trace":
        print(json.dumps(trace(Path(args.target), args.embedder, args.pythonpath)))
    elif args.probe == "parts":
        print(json.dumps(parts(Path(args.target), args.embedder)))
    else:
        print(json.dumps(embedder_rss(args.target)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
