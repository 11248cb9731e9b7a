"""Warm query latency of a long-lived Searcher on a real vault, per mode and per stage, and its RSS.

    python benchmarks/query_latency.py VAULT [--modes lexical,hybrid,hybrid+graph] [--queries 60] [--repeat 3]

The vault must already be indexed (``memory-hub index``). Queries are built from the vault itself
(words from a fixed sample of note titles, plus a few questions), so the run is repeatable. The
Searcher is warmed first (models loaded, one query run), then each query runs ``--repeat`` times;
reported are the median and p95 over all runs, and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, peak_rss_mb, print_table, write_result  # noqa: E402

from memory_hub.retrieval.searcher import Searcher  # noqa: E402

QUESTIONS = ["how do I sync my vault across devices", "ノートを同期する方法", "which plugin shows a calendar",
             "keyboard shortcut for the command palette", "テンプレートの使い方"]


def sample_queries(searcher: Searcher, n: int, seed: int = 7) -> list[str]:
    titles = [r[0] for r in searcher.store.conn.execute("SELECT title FROM notes WHERE ranked = 1 ORDER BY path")]
    rng = random.Random(seed)
    picked = rng.sample(titles, min(n, len(titles)))
    return [" ".join(t.split()[:3]) for t in picked if t.strip()] + QUESTIONS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault")
    parser.add_argument("--modes", default="lexical,hybrid,hybrid+graph")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--reranker", default=None)
    args = parser.parse_args(argv)
    searcher = Searcher(Path(args.vault), embedder=args.embedder, reranker=args.reranker)
    t0 = time.perf_counter()
    searcher.warm()
    warm_s = time.perf_counter() - t0
    queries = sample_queries(searcher, args.queries)
    rows = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        searcher.search(queries[0], k=10, mode=mode)
        stages: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            for q in queries:
                t = time.perf_counter()
                result = searcher.search(q, k=10, mode=mode)
                stages.setdefault("wall", []).append(time.perf_counter() - t)
                for stage, ms in result.timings_ms.items():
                    stages.setdefault(stage, []).append(ms / 1000)
        summary = {s: latency_summary(v) for s, v in stages.items()}
        rows.append({"mode": mode, "p50_ms": summary["wall"]["p50_ms"], "p95_ms": summary["wall"]["p95_ms"],
                     "runs": summary["wall"]["n"], "stages": {s: {"p50_ms": v["p50_ms"], "p95_ms": v["p95_ms"]}
                                                            for s, v in summary.items()}})
    data = {"vault": str(Path(args.vault).resolve()), "notes": searcher.store.note_count(),
            "chunks": searcher.vectors.size(searcher.store), "embedder": searcher.vectors.key,
            "warm_s": round(warm_s, 2), "results": rows, "peak_rss_mb": peak_rss_mb(),
            "command": "python benchmarks/query_latency.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"{data['notes']} notes, {data['chunks']} chunks ({data['embedder']}); warm in {data['warm_s']}s; "
          f"peak RSS {data['peak_rss_mb']} MB")
    print_table(rows, ["mode", "p50_ms", "p95_ms", "runs"])
    for row in rows:
        print(f"  {row['mode']}: " + ", ".join(f"{s} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for s, v in row["stages"].items()))
    print(f"wrote {write_result('latency-' + Path(args.vault).name, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
