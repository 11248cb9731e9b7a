#!/usr/bin/env python3
"""Recall's own index, warm restart: a fresh process opens the saved index and answers its first prompt.

Times, per fresh process (wall and CPU): the import, ``RecallIndex.load()`` (the issue's "warm
restart"), and the index's part of a first prompt (its mode from the names of every note, the
rarest terms of a long prompt: what recall reads from its own index before the search). With
``--baseline CHECKOUT --baseline-vault VAULT`` the same is timed for another checkout (its own copy
of the vault, since the two versions keep different files), interleaved run by run. Also the size
of the saved index on disk.

    nice -n 5 .venv/bin/python benchmarks/bench_recall_restart.py --vault /tmp/v-new \\
        --baseline /work/wt/base --baseline-vault /tmp/v-old --runs 7 --name 30k
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_table, spread, write_result  # noqa: E402

CHILD = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
from pathlib import Path
from memory_hub.retrieval.recall_index import RecallIndex, query_terms
from memory_hub.retrieval.recall_modes import classify
t1, c1 = time.perf_counter(), time.process_time()
index = RecallIndex(Path(sys.argv[1]))
ok = index.load()
t2, c2 = time.perf_counter(), time.process_time()
prompt = sys.argv[2]
decision = classify(prompt, index)
terms = query_terms(prompt)
if hasattr(index, "df"):
    counts = index.df(terms)
else:  # before: one pickle, postings in memory
    counts = {t: len(index.data.postings.get(t, ())) for t in terms}
rare = sorted((t for t in terms if counts[t]), key=lambda t: counts[t])[:12]
t3, c3 = time.perf_counter(), time.process_time()
import resource
print(json.dumps({"ok": ok, "notes": len(index.data.notes), "import_s": t1 - t0, "load_s": t2 - t1,
                  "load_cpu": c2 - c1, "prompt_s": t3 - t2, "prompt_cpu": c3 - c2,
                  "open_and_prompt_s": t3 - t1, "open_and_prompt_cpu": c3 - c1,
                  "mode": decision.mode, "subjects": decision.subjects, "rare": rare,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

DEFAULT_PROMPT = ("Walk me through how the community plugins and the publish workflow relate, and which "
                  "notes describe the template setup, the daily notes and the graph view; I keep getting "
                  "confused about aliases, tags, front matter fields and embedded queries in this vault.")


def index_bytes(vault: Path) -> int:
    folder = vault / ".memory_hub" / "recall"
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) if folder.is_dir() else 0


def one(python: str, vault: Path, prompt: str, cwd: Path) -> dict[str, Any]:
    out = subprocess.run([python, "-c", CHILD, str(vault), prompt], capture_output=True, text=True, cwd=cwd,
                         env={**os.environ, "PYTHONPATH": str(cwd)}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vault", type=Path, required=True)
    ap.add_argument("--baseline", type=Path, help="another checkout (its .venv) to time interleaved")
    ap.add_argument("--baseline-vault", type=Path, help="that checkout's copy of the vault")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--name", default="vault")
    args = ap.parse_args()
    repo = Path(__file__).resolve().parents[1]
    sides = {"this checkout": (repo / ".venv/bin/python", args.vault, repo)}
    if args.baseline:
        sides["baseline"] = (args.baseline / ".venv/bin/python", args.baseline_vault or args.vault, args.baseline)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
    load_before = os.getloadavg()
    for py, vault, cwd in sides.values():  # one warm-up each (page cache), not counted
        one(str(py), vault, args.prompt, cwd)
    for _ in range(args.runs):
        for name, (py, vault, cwd) in sides.items():
            runs[name].append(one(str(py), vault, args.prompt, cwd))
    result: dict[str, Any] = {"vault": args.name, "runs": args.runs, "load_average": load_before, "sides": {}}
    rows: list[dict[str, Any]] = []
    columns = ["side", "notes", "load s med / p95", "load CPU s", "first prompt ms", "open+prompt s med / p95",
               "open+prompt CPU s", "RSS MB", "index MB"]
    for name, got in runs.items():
        vault = sides[name][1]
        s = {k: spread([r[k] for r in got], digits=4) for k in ("load_s", "load_cpu", "prompt_s", "prompt_cpu", "open_and_prompt_s",
                                          "open_and_prompt_cpu", "import_s", "rss_mb")}
        same = {json.dumps([r["mode"], r["subjects"], r["rare"]]) for r in got}
        s.update(notes=got[0]["notes"], ok=all(r["ok"] for r in got), index_mb=round(index_bytes(vault) / 1e6, 1),
                 answer=json.loads(next(iter(same))), answers_identical_across_runs=len(same) == 1)
        result["sides"][name] = s
        rows.append(dict(zip(columns, [name, s["notes"], f"{s['load_s']['median']:.3f} / {s['load_s']['p95']:.3f}",
                     f"{s['load_cpu']['median']:.3f}", f"{s['prompt_s']['median'] * 1000:.1f}",
                     f"{s['open_and_prompt_s']['median']:.3f} / {s['open_and_prompt_s']['p95']:.3f}",
                     f"{s['open_and_prompt_cpu']['median']:.3f}", f"{s['rss_mb']['median']:.0f}", s["index_mb"]], strict=True)))
    if args.baseline:
        a, b = result["sides"]["this checkout"]["answer"], result["sides"]["baseline"]["answer"]
        result["same_answer_as_baseline"] = a == b
    result["load_average_after"] = os.getloadavg()
    print_table(rows, columns)
    print(f"load average {result['load_average']} -> {result['load_average_after']}",
          f"same answer: {result.get('same_answer_as_baseline')}")
    write_result(f"recall-restart-{args.name}", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
