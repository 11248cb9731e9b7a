"""Warm query latency of a long-lived Searcher on a real vault, per mode and per stage, and its RSS.

    python benchmarks/query_latency.py VAULT [--modes lexical,hybrid,hybrid+graph] [--queries 60] [--repeat 3]
        [--natural-questions] [--dump FILE]

    python benchmarks/query_latency.py VAULT --against OLD_CHECKOUT [--rounds 3] [...]

The vault must already be indexed (``memory-hub index``). Queries are built from the vault itself
(words from a fixed sample of note titles, plus a few questions), so the run is repeatable;
``--natural-questions`` asks the 215 questions of ``benchmarks/natural_questions/`` instead (longer,
so the lexical OR queries cost more). ``--dump FILE`` writes every query's results (path, score,
snippet) per mode, so two checkouts can be compared for identical answers (``cmp``) after a change
meant only for speed. The
Searcher is warmed first (models loaded, one query run), then each query runs ``--repeat`` times;
reported are the median and p95 over all runs, and the process's peak resident memory.

``--queries-file FILE`` asks one query per line instead (e.g. ``../shared/peers/hub-queries.txt``,
the 30 queries ``bench_scale.py`` sends, with ``--k 5`` as it does). ``--code DIR`` imports
``memory_hub`` from another checkout (a ``git worktree`` of the code before a change).
``--against DIR`` measures before/after on a shared, noisy machine: it runs this benchmark
``--rounds`` times for DIR's code and for this checkout's, alternately (old, new, old, new, ...),
each in a fresh process, and reports the median over rounds of each p50/p95 (and CPU ms per query)
side by side, with the load average; ``results/latency-ab-<vault>.json``.
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
if "--code" in sys.argv[:-1]:  # measure another checkout's code (must come before importing it)
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))

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


def against(args: argparse.Namespace, argv: list[str]) -> int:
    """Alternate runs of DIR's code and this checkout's; the median over rounds of each figure."""
    import statistics
    import subprocess
    import tempfile

    rest: list[str] = []
    skip = False
    for a in argv:  # the same arguments, minus --against/--rounds/--dump
        if skip:
            skip = False
            continue
        if a in ("--against", "--against-vault", "--rounds", "--dump", "--code"):
            skip = True
            continue
        if a.startswith(("--against=", "--against-vault=", "--rounds=", "--dump=", "--code=")):
            continue
        rest.append(a)
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for label, code in (("before", str(Path(args.against).resolve())),
                                ("after", str(Path(__file__).resolve().parent.parent))):
                out = Path(tmp) / f"{label}-{r}.json"
                # the old code on its own copy when the index layout changed (it cannot read the new one)
                mine = [args.against_vault if label == "before" and args.against_vault and a == args.vault else a
                        for a in rest]
                cmd = [sys.executable, __file__, *mine, "--code", code, "--json-out", str(out)]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                runs[label].append(json.loads(out.read_text(encoding="utf-8")))
                loads.append(runs[label][-1]["load_average"][0])
                print(f"round {r + 1} {label}: " + ", ".join(
                    f"{x['mode']} {x['p50_ms']:.1f}/{x['p95_ms']:.1f}" for x in runs[label][-1]["results"]),
                    flush=True)
    rows = []
    for mode in [x["mode"] for x in runs["after"][0]["results"]]:
        row: dict[str, Any] = {"mode": mode}
        for label in ("before", "after"):
            got = [next(x for x in run["results"] if x["mode"] == mode) for run in runs[label]]
            for key in ("p50_ms", "p95_ms", "cpu_ms_per_query"):
                row[f"{label}_{key}"] = round(statistics.median(x[key] for x in got), 1)
        row["p50_ratio"] = round(row["after_p50_ms"] / max(row["before_p50_ms"], 1e-9), 2)
        rows.append(row)
    data = {"vault": str(Path(args.vault).resolve()), "before_code": str(Path(args.against).resolve()),
            "before_vault": str(Path(args.against_vault or args.vault).resolve()),
            "rounds": args.rounds, "notes": runs["after"][0]["notes"], "queries": runs["after"][0]["queries"],
            "k": args.k, "load_average_during": [min(loads), max(loads)], "results": rows,
            "runs": {label: [[{k: x[k] for k in ("mode", "p50_ms", "p95_ms", "cpu_ms_per_query")}
                              for x in run["results"]] for run in got] for label, got in runs.items()},
            "command": "python benchmarks/query_latency.py " + " ".join(argv)}
    print(f"{data['notes']} notes; median of {args.rounds} alternating rounds; load average "
          f"{min(loads):.1f}-{max(loads):.1f} (under load unless ~1)")
    print_table(rows, ["mode", "before_p50_ms", "before_p95_ms", "after_p50_ms", "after_p95_ms", "p50_ratio",
                       "before_cpu_ms_per_query", "after_cpu_ms_per_query"])
    name = "latency-ab-" + (args.label or Path(args.vault).name)
    print(f"wrote {write_result(name, data)}")
    return 0


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
    parser.add_argument("--queries-file", help="ask these queries (one a line) instead")
    parser.add_argument("--k", type=int, default=10, help="results per query")
    parser.add_argument("--dump", help="write every query's results per mode to this JSON file")
    parser.add_argument("--code", help="import memory_hub from this checkout instead of this one")
    parser.add_argument("--against", help="another checkout: alternate runs of its code and this one's")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: runs of each")
    parser.add_argument("--against-vault", help="with --against: the vault copy the old code searches, indexed "
                        "by it (when the index layout changed in between)")
    parser.add_argument("--label", help="name of the result file (default: the vault folder's name)")
    parser.add_argument("--json-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    argv = list(argv if argv is not None else sys.argv[1:])
    if args.against:
        return against(args, argv)
    searcher = Searcher(Path(args.vault), embedder=args.embedder, reranker=args.reranker)
    t0 = time.perf_counter()
    searcher.warm()
    warm_s = time.perf_counter() - t0
    if args.queries_file:
        queries = [q.strip() for q in Path(args.queries_file).read_text(encoding="utf-8").splitlines() if q.strip()]
    else:
        queries = natural_questions() if args.natural_questions else sample_queries(searcher, args.queries)
    rows = []
    answers: dict[str, list[list[Any]]] = {}
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        searcher.search(queries[0], k=args.k, mode=mode)
        stages: dict[str, list[float]] = {}
        cpu0 = time.process_time()
        for _ in range(args.repeat):
            for q in queries:
                t = time.perf_counter()
                result = searcher.search(q, k=args.k, mode=mode)
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
            "queries": (args.queries_file if args.queries_file else
                        "natural-questions" if args.natural_questions else "title samples"),
            "k": args.k, "code": str(Path(args.code).resolve()) if args.code else None,
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "command": "python benchmarks/query_latency.py " + " ".join(argv)}
    if args.json_out:  # a round of --against: the parent reports
        Path(args.json_out).write_text(json.dumps(data), encoding="utf-8")
        return 0
    print(f"{data['notes']} notes, {data['chunks']} chunks ({data['embedder']}); warm in {data['warm_s']}s; "
          f"peak RSS {data['peak_rss_mb']} MB")
    print(f"load average {data['load_average']}")
    print_table(rows, ["mode", "p50_ms", "p95_ms", "cpu_ms_per_query", "runs"])
    for row in rows:
        print(f"  {row['mode']}: " + ", ".join(f"{s} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for s, v in row["stages"].items()))
    name = "latency-" + (args.label or Path(args.vault).name + ("-nq" if args.natural_questions else ""))
    print(f"wrote {write_result(name, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
