#!/usr/bin/env python3
"""A no-change ``memory-hub sync`` process, whole (interpreter, imports, walk, stamps, vector check):
wall and CPU (user + system, from the child's rusage), median and p95, optionally interleaved run by
run with another checkout on the same vault.

    MEMORY_HUB_EMBEDDER=/tmp/standin-embedder nice -n 5 .venv/bin/python benchmarks/bench_sync_process.py \\
        VAULT --baseline /work/wt/base --runs 9 --name 30k
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, run_timed, spread, write_result  # noqa: E402


def run_one(checkout: Path, vault: Path) -> dict[str, Any]:
    """One process: its wall time and CPU (the child and what it waited for)."""
    out, wall, cpu = run_timed([str(checkout / ".venv/bin/memory-hub"), "--vault", str(vault), "--json", "sync"],
                               cwd=checkout, check=True)
    report = json.loads(out.stdout)
    if report.get("added") or report.get("updated") or report.get("deleted") or report.get("renamed"):
        raise RuntimeError(f"not a no-change sync: {out.stdout[:300]!r}")
    return {"wall": wall, "cpu": cpu, "sync_s": report.get("seconds"), "vectors": report.get("vectors")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--baseline", type=Path, help="another checkout (with its .venv), timed interleaved")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--name", default="vault")
    args = ap.parse_args()
    repo = Path(__file__).resolve().parents[1]
    sides = {"this checkout": repo, **({"baseline": args.baseline} if args.baseline else {})}
    for checkout in sides.values():  # warm-up: page cache, and a first walk that records its digest
        run_one(checkout, args.vault)
    load_before = os.getloadavg()
    got: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
    for _ in range(args.runs):
        for name, checkout in sides.items():
            got[name].append(run_one(checkout, args.vault))
    files = sum(1 for _ in args.vault.rglob("*") if ".memory_hub" not in _.parts and ".git" not in _.parts and _.is_file())
    result: dict[str, Any] = {"vault": args.name, "files": files, "runs": args.runs, "load_average_before": load_before,
                              "load_average_after": os.getloadavg(), "sides": {}}
    rows = []
    for name, runs in got.items():
        s = {"wall_s": spread([r["wall"] for r in runs]), "cpu_s": spread([r["cpu"] for r in runs]),
             "sync_report_s": spread([r["sync_s"] or 0.0 for r in runs]), "vectors": runs[-1]["vectors"]}
        result["sides"][name] = s
        rows.append({"side": name, "wall med / p95 s": f"{s['wall_s']['median']:.3f} / {s['wall_s']['p95']:.3f}",
                     "CPU med / p95 s": f"{s['cpu_s']['median']:.3f} / {s['cpu_s']['p95']:.3f}",
                     "CPU us / file": f"{s['cpu_s']['median'] / max(files, 1) * 1e6:.1f}",
                     "sync's own s": f"{s['sync_report_s']['median']:.3f}"})
    print_table(rows, ["side", "wall med / p95 s", "CPU med / p95 s", "CPU us / file", "sync's own s"])
    print(f"{files} files; load average {load_before} -> {result['load_average_after']}")
    write_result(f"sync-process-{args.name}", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
