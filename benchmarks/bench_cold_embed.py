#!/usr/bin/env python3
"""A true cold ``memory-hub index`` (lexical + vectors) of a whole vault, timed end to end.

Copies the vault to a fresh folder (no ``.memory_hub/``), runs ``memory-hub --vault COPY index
--json`` under ``/usr/bin/time -v`` (wall time, peak RSS of the whole process), then reads the
LanceDB table it wrote for the chunk count and token statistics. ``--compare OTHER_COPY`` checks
the new vectors against another indexed copy, chunk by chunk (same chunk id = same path, span,
text and embedder): the cosine of every shared chunk, and which chunks only one side has.

    .venv/bin/python benchmarks/bench_cold_embed.py ../shared/data/vaults/obsidian-hub
    .venv/bin/python benchmarks/bench_cold_embed.py VAULT --work /tmp/x --label after --compare /tmp/y
    .venv/bin/python benchmarks/bench_cold_embed.py VAULT --work /tmp/y --label before --code /tmp/old-src

Under ``/usr/bin/time -v`` it runs ``python -m memory_hub.cli`` with ``PYTHONPATH`` set to ``--code`` (default:
this checkout), so a run can use a frozen copy of the sources while the checkout is being edited.

Writes ``benchmarks/results/cold_embed.json`` (one entry per ``--label``, earlier labels kept).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import DEFAULT_DATA, REPO, RESULTS, machine, print_table  # noqa: E402
from memory_hub.index.vectors import TABLE_PREFIX  # noqa: E402

OUT = RESULTS / "cold_embed.json"


def _time_v(text: str) -> dict[str, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds from ``/usr/bin/time -v`` output."""
    out: dict[str, float] = {}
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    if m:
        secs = 0.0
        for part in m.group(1).split(":"):
            secs = secs * 60 + float(part)
        out["wall_s"] = round(secs, 1)
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["peak_rss_mb"] = round(int(m.group(1)) / 1024, 1)
    user = re.search(r"User time \(seconds\): ([\d.]+)", text)
    system = re.search(r"System time \(seconds\): ([\d.]+)", text)
    if user and system:
        out["cpu_s"] = round(float(user.group(1)) + float(system.group(1)), 1)
    return out


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """The index report with its lists of paths turned into counts (results stay small)."""
    return {k: len(v) if isinstance(v, list) else _summary(v) if isinstance(v, dict) else v
            for k, v in report.items()}


def _table(vault: Path) -> Any:
    import lancedb

    db = lancedb.connect(str(vault / ".memory_hub" / "lancedb"))
    names = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    # vectors2_ since the passage layout of issue 15; chunks_ for a checkout from before it (--code)
    names = [str(n) for n in getattr(names, "tables", names) if str(n).startswith((TABLE_PREFIX, "chunks_"))]
    if len(names) != 1:
        raise SystemExit(f"{vault}: expected one chunk table, found {names}")
    return db.open_table(names[0])


def chunk_stats(vault: Path) -> dict[str, Any]:
    """Chunk count and token statistics of what the index holds (tokens as the embedder counts them)."""
    from memory_hub.index.embed import load_embedder

    data = _table(vault).search().select(["path", "text"]).limit(None).to_arrow()
    emb = load_embedder("auto")
    tokens = np.array([min(emb.count_tokens(t), emb.max_tokens) for t in data.column("text").to_pylist()])
    return {
        "chunks": int(data.num_rows),
        "notes_with_vectors": len(set(data.column("path").to_pylist())),
        "tokens_total": int(tokens.sum()),
        "tokens_mean": round(float(tokens.mean()), 1) if len(tokens) else 0.0,
        "tokens_p50": int(np.percentile(tokens, 50)) if len(tokens) else 0,
        "tokens_p95": int(np.percentile(tokens, 95)) if len(tokens) else 0,
        "tokens_max": int(tokens.max()) if len(tokens) else 0,
    }


def compare(vault: Path, other: Path) -> dict[str, Any]:
    """Cosine between the two copies' vectors for every chunk id they share."""
    def load(v: Path) -> dict[str, np.ndarray]:
        d = _table(v).search().select(["id", "vector"]).limit(None).to_arrow()
        vecs = d.column("vector").combine_chunks().flatten().to_numpy().reshape(d.num_rows, -1)
        return dict(zip(d.column("id").to_pylist(), vecs, strict=True))

    a, b = load(vault), load(other)
    shared = sorted(set(a) & set(b))
    cos = np.array([float(np.dot(a[i], b[i])) for i in shared]) if shared else np.zeros(0)
    return {
        "against": str(other), "shared_chunks": len(shared), "only_here": len(set(a) - set(b)),
        "only_there": len(set(b) - set(a)),
        "cosine_min": round(float(cos.min()), 6) if len(cos) else None,
        "cosine_mean": round(float(cos.mean()), 6) if len(cos) else None,
        "identical": int((cos >= 1 - 1e-6).sum()) if len(cos) else 0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path, nargs="?", default=DEFAULT_DATA / "vaults" / "obsidian-hub")
    ap.add_argument("--work", type=Path, help="where to copy the vault (default: a temp dir, removed after)")
    ap.add_argument("--label", default="run", help="name of this run in the JSON (e.g. before / after)")
    ap.add_argument("--compare", type=Path, help="another indexed copy to compare vectors with")
    ap.add_argument("--keep", action="store_true", help="keep the temp copy (to --compare a later run with it)")
    ap.add_argument("--note", default="", help="free text stored with the run (e.g. what else was running)")
    ap.add_argument("--code", type=Path,
                    help="run memory_hub from this folder (e.g. a `git archive` of a commit) instead of the checkout")
    ap.add_argument("--commit", default="", help="the commit --code was taken from (recorded only)")
    ap.add_argument("--adopt", nargs=2, type=Path, metavar=("TIME_FILE", "REPORT_JSON"),
                    help="record a run already made on --work (its `time -v` output and `index --json` report)")
    args = ap.parse_args()

    tmp = None
    code = args.code.resolve() if args.code else REPO
    cmd = ["/usr/bin/time", "-v", "-o", "TIME_FILE", sys.executable, "-m", "memory_hub.cli", "--vault", "VAULT",
           "index", "--json"]
    load_before: list[float] | None = [round(x, 2) for x in os.getloadavg()]
    if args.adopt:
        if not args.work:
            raise SystemExit("--adopt needs --work (the indexed copy)")
        work, (time_file, report_file) = args.work, args.adopt
        cmd[3], cmd[8] = str(time_file), str(work)
        report, wall = json.loads(report_file.read_text()), 0.0
        load_before = load_after = None  # not known afterwards: say it in --note
    else:
        if args.work:
            work = args.work
            if work.exists():
                raise SystemExit(f"{work} exists: a cold run needs a fresh copy")
        else:
            tmp = tempfile.mkdtemp(prefix="cold-embed-")
            work = Path(tmp) / "vault"
        shutil.copytree(args.vault, work, ignore=shutil.ignore_patterns(".memory_hub"))
        time_file = work.parent / f".{work.name}.time"
        cmd[3], cmd[8] = str(time_file), str(work)
        env = {**os.environ, "PYTHONPATH": str(code)}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=code, env=env)
        wall = time.perf_counter() - t0
        load_after = [round(x, 2) for x in os.getloadavg()]
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            raise SystemExit(f"memory-hub index exited {proc.returncode}")
        report = json.loads(proc.stdout)
    timing = _time_v(time_file.read_text())
    vec = report.get("vectors") or report
    stats = chunk_stats(work)
    run: dict[str, Any] = {
        "command": " ".join(cmd), "code": str(code),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=REPO).stdout.strip() if code == REPO else args.commit,
        "wall_s": timing.get("wall_s", round(wall, 1)), "cpu_s": timing.get("cpu_s"),
        "peak_rss_mb": timing.get("peak_rss_mb"),
        "vectors_seconds": vec.get("seconds"), "vectors_chunks_per_s": vec.get("chunks_per_second"),
        "chunks_per_s_end_to_end": round(stats["chunks"] / timing.get("wall_s", wall), 1),
        **stats, "load_average_before": load_before, "load_average_after": load_after, "note": args.note,
        "index_report": _summary(report),
    }
    if args.compare:
        run["vectors_vs"] = compare(work, args.compare)
    previous = json.loads(OUT.read_text()) if OUT.exists() else {}
    runs = {**previous.get("runs", {}), args.label: run}
    payload = {"benchmark": "cold_embed", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "machine": machine(), "vault": str(args.vault), "runs": runs}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(payload, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    cols = ["label", "wall_s", "cpu_s", "peak_rss_mb", "chunks", "chunks_per_s_end_to_end", "vectors_chunks_per_s",
            "tokens_mean", "tokens_p95", "load_average_after"]
    print_table([{"label": k, **v, "load_average_after": str(v["load_average_after"])} for k, v in runs.items()],
                cols)
    if "vectors_vs" in run:
        print("vectors vs", run["vectors_vs"])
    print(f"wrote {OUT}")
    if tmp and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
