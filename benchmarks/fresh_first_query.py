#!/usr/bin/env python3
"""A fresh stdio server's first queries, with and without ``server.warm_at_start``.

    PYTHONPATH=TREE python benchmarks/fresh_first_query.py VAULT --settle 4 --runs 2 [--warm]

Each run spawns ``memory-hub serve`` (real MCP stdio client), times the handshake (ready), waits
``--settle`` seconds (0: the agent asks at once), reads the RSS, then times the first three of the
peers' queries in hybrid+graph and reads the RSS again. ``--warm`` sets MEMORY_HUB_WARM_AT_START=1.
Prints one JSON line. An error answer fails the run (an error's time is no query's time).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp_client import StdioClient, rss_mb  # noqa: E402


def main() -> int:
    from bench_scale import hub_queries
    from common import DEFAULT_DATA

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault")
    ap.add_argument("--settle", type=float, default=0.0)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--warm", action="store_true")
    ap.add_argument("--queries", type=Path, default=None, help="one query a line (default: the peers' hub queries)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder (default ../shared/data)")
    args = ap.parse_args()
    env = {**os.environ, "MEMORY_HUB_LOG": "warning"}
    env.pop("MEMORY_HUB_WARM_AT_START", None)
    if args.warm:
        env["MEMORY_HUB_WARM_AT_START"] = "1"
    queries = (hub_queries(args.data) if args.queries is None else [
        q.strip() for q in args.queries.read_text(encoding="utf-8").splitlines() if q.strip()])[:3]
    memory_hub = str(Path(sys.executable).parent / "memory-hub")
    runs = []
    for _ in range(args.runs):
        client = StdioClient([memory_hub, "--vault", args.vault, "serve", "--transport", "stdio"], env=env)
        try:
            client.handshake()
            ready = time.perf_counter() - client.spawned
            time.sleep(args.settle)
            before = rss_mb(client.pid)
            times = []
            for q in queries:
                t = time.perf_counter()
                answer = client.call("search", {"query": q, "k": 5, "mode": "hybrid+graph"})
                times.append(round((time.perf_counter() - t) * 1000, 1))
                if answer.get("isError"):
                    raise RuntimeError(f"search failed: {str(answer.get('content'))[:300]}")
            runs.append({"ready_s": round(ready, 3), "rss_before_first_mb": round(before, 1), "query_ms": times,
                         "rss_after_mb": round(rss_mb(client.pid), 1)})
        finally:
            client.close()
    print(json.dumps({"warm_at_start": args.warm, "settle_s": args.settle, "load": round(os.getloadavg()[0], 2),
                      "runs": runs}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
