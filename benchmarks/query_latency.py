"""Warm query latency of a long-lived Searcher on a real vault, per mode and per stage, and its RSS.

    python benchmarks/query_latency.py VAULT [--modes lexical,hybrid,hybrid+graph] [--queries 60] [--repeat 3]
        [--natural-questions] [--dump FILE]

The vault must already be indexed (``memory-hub index``). Queries are built from the vault itself
(words from a fixed sample of note titles, plus a few questions), so the run is repeatable;
``--natural-questions`` asks the 215 questions of ``benchmarks/natural_questions/`` instead (longer,
so the lexical OR queries cost more). ``--dump FILE`` writes every query's results (path, score,
snippet) per mode, so two checkouts can be compared for identical answers (``cmp``) after a change
meant only for speed. The
Searcher is warmed first (models loaded, one query run), then each query runs ``--repeat`` times;
reported are the median and p95 over all runs, and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

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


def natural_questions() -> list[str]:
    """Every query of the natural-question set, in file order."""
    import yaml

    found: list[str] = []
    for path in sorted((Path(__file__).resolve().parent / "natural_questions").glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        found += [str(c["query"]) for c in data.get("cases", []) if isinstance(c, dict) and c.get("query")]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault")
    parser.add_argument("--modes", default="lexical,hybrid,hybrid+graph")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--embedder", default=None)
    parser.add_argument("--reranker", default=None)
    parser.add_argument("--natural-questions", action="store_true",
                        help="ask the natural-question set's 215 queries instead of title samples")
    parser.add_argument("--dump", help="write every query's results per mode to this JSON file")
    args = parser.parse_args(argv)
    searcher = Searcher(Path(args.vault), embedder=args.embedder, reranker=args.reranker)
    t0 = time.perf_counter()
    searcher.warm()
    warm_s = time.perf_counter() - t0
    queries = natural_questions() if args.natural_questions else sample_queries(searcher, args.queries)
    rows = []
    answers: dict[str, list[list[Any]]] = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        searcher.search(queries[0], k=10, mode=mode)
        stages: dict[str, list[float]] = {}
        cpu0 = time.process_time()
        for _ in range(args.repeat):
            for q in queries:
                t = time.perf_counter()
                result = searcher.search(q, k=10, mode=mode)
                stages.setdefault("wall", []).append(time.perf_counter() - t)
                for stage, ms in result.timings_ms.items():
                    stages.setdefault(stage, []).append(ms / 1000)
                answers[f"{mode}\0{q}"] = [[h.path, h.score, h.snippet] for h in result.hits] + [[result.low_confidence]]
        cpu_ms = (time.process_time() - cpu0) * 1000 / max(1, len(stages["wall"]))
        summary = {s: latency_summary(v) for s, v in stages.items()}
        rows.append({"mode": mode, "p50_ms": summary["wall"]["p50_ms"], "p95_ms": summary["wall"]["p95_ms"],
                     "cpu_ms_per_query": round(cpu_ms, 1), "runs": summary["wall"]["n"],
                     "stages": {s: {"p50_ms": v["p50_ms"], "p95_ms": v["p95_ms"]} for s, v in summary.items()}})
    if args.dump:
        Path(args.dump).write_text(json.dumps(answers, sort_keys=True, ensure_ascii=False), encoding="utf-8")
    data = {"vault": str(Path(args.vault).resolve()), "notes": searcher.store.note_count(),
            "chunks": searcher.vectors.size(searcher.store), "embedder": searcher.vectors.key,
            "warm_s": round(warm_s, 2), "results": rows, "peak_rss_mb": peak_rss_mb(),
            "queries": "natural-questions" if args.natural_questions else "title samples",
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "command": "python benchmarks/query_latency.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"{data['notes']} notes, {data['chunks']} chunks ({data['embedder']}); warm in {data['warm_s']}s; "
          f"peak RSS {data['peak_rss_mb']} MB")
    print(f"load average {data['load_average']}")
    print_table(rows, ["mode", "p50_ms", "p95_ms", "cpu_ms_per_query", "runs"])
    for row in rows:
        print(f"  {row['mode']}: " + ", ".join(f"{s} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for s, v in row["stages"].items()))
    name = "latency-" + Path(args.vault).name + ("-nq" if args.natural_questions else "")
    print(f"wrote {write_result(name, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
