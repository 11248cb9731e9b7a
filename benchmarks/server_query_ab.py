"""Before/after of ``bench_scale.py``'s query stage over MCP stdio, interleaved in the same minutes.

    python benchmarks/server_query_ab.py --before OLD_CHECKOUT OLD_VAULT --after NEW_CHECKOUT NEW_VAULT
        [--rounds 3] [--repeat 3] [--queries-file ../shared/peers/hub-queries.txt] [--meta-write]
        [--label NAME]

Each round starts a fresh ``memory-hub serve --transport stdio`` of each checkout (its own
``.venv/bin/memory-hub``) on its own copy of the vault, waits until the vectors are loaded, then asks
every query ``--repeat`` times as ``bench_scale.py`` does: hybrid+graph, lexical, and lexical inside
the vault's first top-level folder, ``k`` = 5. Two copies, because an index keeps what its code's
syncs made (the new code's path index, a compacted vector table): each side is measured on the index
its own code leaves. Reported per side: the median over rounds of each p50/p95 and the server's CPU
milliseconds per query (from ``/proc``), with the load average; ``results/server-query-ab-<label>.json``.

``--meta-write`` writes ``last_sync`` into the index before every query, as the server's watcher does
once a minute when it rescans and finds nothing: what a query sees when agents ask now and then
rather than in a burst. Set ``MEMORY_HUB_EMBEDDER`` as the vault's vectors need (the stand-in
embedder for the generated scale vaults).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_scale import QUERY_KINDS as KINDS  # noqa: E402
from benchmarks.bench_scale import time_queries, wait_for_vectors  # noqa: E402
from benchmarks.common import print_table, spread, write_result  # noqa: E402
from benchmarks.mcp_client import StdioClient, cpu_seconds  # noqa: E402


def touch_meta(vault: Path) -> None:
    """What a watcher rescan that found nothing writes: ``last_sync`` (a meta-only transaction)."""
    conn = sqlite3.connect(vault / ".memory_hub" / "index.sqlite3", timeout=30)
    try:
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('last_sync', ?)", (str(time.time()),))
    finally:
        conn.close()


def one_server(code: Path, vault: Path, queries: list[str], repeat: int, meta_write: bool) -> dict[str, Any]:
    """One fresh server: every query ``repeat`` times in the three kinds; p50/p95 and CPU per query."""
    env = {**os.environ, "MEMORY_HUB_LOG": "warning"}
    client = StdioClient([str(code / ".venv" / "bin" / "memory-hub"), "--vault", str(vault), "serve",
                          "--transport", "stdio"], env=env)
    try:
        client.handshake()
        wait_for_vectors(client, queries[0])
        time.sleep(1.0)
        top = sorted(p.name for p in vault.iterdir() if p.is_dir() and not p.name.startswith("."))[0]
        cpu0 = cpu_seconds(client.pid)
        timings = time_queries(client, queries, repeat, top, before_each=(lambda: touch_meta(vault)) if meta_write
                               else None)
        cpu_ms = (cpu_seconds(client.pid) - cpu0) * 1000 / sum(len(v) for v in timings.values())
    finally:
        client.close()
    summaries = {k: spread(v, 1000, 1) for k, v in timings.items()}
    return {**{k: {"p50_ms": s["median"], "p95_ms": s["p95"]} for k, s in summaries.items()},
            "server_cpu_ms_per_query": round(cpu_ms, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", nargs=2, metavar=("CHECKOUT", "VAULT"), required=True)
    ap.add_argument("--after", nargs=2, metavar=("CHECKOUT", "VAULT"), required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="times each query is asked per server")
    ap.add_argument("--queries-file", type=Path, default=Path("../shared/peers/hub-queries.txt"),
                    help="one query a line (default: the 30 bench_scale.py asks, from the repository's folder)")
    ap.add_argument("--meta-write", action="store_true", help="write last_sync before every query")
    ap.add_argument("--label", default=None)
    args = ap.parse_args(argv)
    queries = [q.strip() for q in args.queries_file.read_text(encoding="utf-8").splitlines() if q.strip()]
    sides = {"before": (Path(args.before[0]).resolve(), Path(args.before[1]).resolve()),
             "after": (Path(args.after[0]).resolve(), Path(args.after[1]).resolve())}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
    loads: list[float] = []
    for r in range(args.rounds):
        for side, (code, vault) in sides.items():
            loads.append(round(os.getloadavg()[0], 2))
            got = one_server(code, vault, queries, args.repeat, args.meta_write)
            runs[side].append(got | {"load": loads[-1]})
            print(f"round {r + 1} {side} (load {loads[-1]}): " + ", ".join(
                f"{k} {got[k]['p50_ms']}/{got[k]['p95_ms']}" for k in KINDS)
                + f", server CPU {got['server_cpu_ms_per_query']} ms/query", flush=True)
    rows = []
    for kind in KINDS:
        row: dict[str, Any] = {"query": kind}
        for side in sides:
            for key in ("p50_ms", "p95_ms"):
                row[f"{side}_{key}"] = statistics.median(x[kind][key] for x in runs[side])
        rows.append(row)
    rows.append({"query": "server CPU ms/query", **{
        f"{side}_p50_ms": statistics.median(x["server_cpu_ms_per_query"] for x in runs[side]) for side in sides}})
    print(f"{len(queries)} queries x {args.repeat}, median of {args.rounds} alternating rounds; load average "
          f"{min(loads)}-{max(loads)}" + ("; last_sync written before every query" if args.meta_write else ""))
    print_table(rows, ["query", "before_p50_ms", "before_p95_ms", "after_p50_ms", "after_p95_ms"])
    label = args.label or sides["after"][1].name + ("-meta-write" if args.meta_write else "")
    data = {"sides": {k: {"code": str(c), "vault": str(v)} for k, (c, v) in sides.items()},
            "queries": str(args.queries_file), "repeat": args.repeat, "rounds": args.rounds,
            "meta_write": args.meta_write, "load_average_during": [min(loads), max(loads)], "results": rows,
            "runs": runs, "command": "python benchmarks/server_query_ab.py " + " ".join(argv or sys.argv[1:])}
    print(f"wrote {write_result('server-query-ab-' + label, data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
