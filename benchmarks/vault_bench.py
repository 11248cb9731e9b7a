"""Index and query speed on a real vault folder.

    python benchmarks/vault_bench.py ../shared/data/vaults/obsidian-hub [--runs 3] [--queries 200]

Reports: cold index time (median of ``--runs`` fresh copies, each indexed from nothing by the real
``sync``), no-change re-sync time, lexical query latency p50/p95 over a fixed, seeded set of
realistic queries drawn from note titles and body words, 2-hop neighbourhood time p50/p95, the
index size on disk and this process's peak RSS. The source folder is never written to.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DEFAULT_DATA, Timer, latency_summary, peak_rss_mb, print_table, write_result  # noqa: E402

from memory_hub.config import INDEX_DIRNAME  # noqa: E402
from memory_hub.index import graph  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.retrieval.search import search  # noqa: E402

_WORD = re.compile(r"[^\W\d_][\w'-]{3,}|[\u3040-\u30ff\u3400-\u9fff]{2,6}")


def copy_vault(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(INDEX_DIRNAME), symlinks=True)
    return dst


def make_queries(store: Store, n: int, seed: int = 7) -> list[str]:
    """A fixed mix: whole titles, title words, word pairs from a description or body, short terms."""
    rng = random.Random(seed)
    rows = store.conn.execute(
        "SELECT n.title, n.description, t.body FROM notes n JOIN fts_trigram t ON t.rowid = n.id "
        "WHERE n.ranked = 1 ORDER BY n.path"
    ).fetchall()
    if not rows:
        return []
    queries: list[str] = []
    while len(queries) < n:
        title, description, body = rng.choice(rows)
        words = _WORD.findall(f"{description} {body[:2000]}") or _WORD.findall(title) or [title]
        shape = len(queries) % 4
        if shape == 0:
            q = title
        elif shape == 1:
            q = rng.choice(_WORD.findall(title) or words)
        elif shape == 2:
            q = " ".join(rng.sample(words, min(2, len(words))))
        else:
            q = " ".join(rng.sample(words, min(4, len(words))))
        if q.strip():
            queries.append(q.strip()[:200])
    return queries


def db_size(vault: Path) -> int:
    return sum(p.stat().st_size for p in (vault / INDEX_DIRNAME).glob("index.sqlite3*") if p.is_file())


def bench(src: Path, runs: int = 3, n_queries: int = 200, resyncs: int = 5, mode: str = "lexical") -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="mh-vault-bench-"))
    try:
        cold: list[float] = []
        cold_cpu: list[float] = []
        vault = work / "run0"
        for r in range(runs):
            vault = copy_vault(src, work / f"run{r}")
            with Timer() as t:
                report = sync(vault, progress=False)
            cold.append(t.seconds)
            cold_cpu.append(t.cpu_seconds)
            if r < runs - 1:
                shutil.rmtree(vault)
        store = Store(vault)
        warm: list[float] = []
        warm_cpu: list[float] = []
        for _ in range(resyncs):
            with Timer() as t:
                again = sync(vault, store=store, progress=False)
            warm.append(t.seconds)
            warm_cpu.append(t.cpu_seconds)
            assert not again.changed, "a no-change re-sync changed something"
        conn = store.conn
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM notes WHERE kind != 'attachment'), (SELECT count(*) FROM notes "
            "WHERE kind = 'attachment'), (SELECT count(*) FROM links), (SELECT count(*) FROM links WHERE target_id IS NULL)"
        ).fetchone()
        queries = make_queries(store, n_queries)
        for q in queries[:10]:  # warm the page cache once
            search(store, q, k=10, mode=mode)
        q_lat: list[float] = []
        q_cpu: list[float] = []
        empty = 0
        for q in queries:
            with Timer() as t:
                hits = search(store, q, k=10, mode=mode).hits
            q_lat.append(t.seconds)
            q_cpu.append(t.cpu_seconds)
            empty += not hits
        rng = random.Random(11)
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM notes WHERE kind != 'attachment' ORDER BY id")]
        sample = rng.sample(ids, min(200, len(ids)))
        g_lat: list[float] = []
        g_cpu: list[float] = []
        sizes: list[int] = []
        for nid in sample:
            with Timer() as t:
                near = graph.neighbourhood(conn, [nid], 2)
            g_lat.append(t.seconds)
            g_cpu.append(t.cpu_seconds)
            sizes.append(len(near))
        store.close()
        return {
            "vault": str(src), "notes": counts[0], "attachments": counts[1], "links": counts[2], "dangling": counts[3],
            "skipped": len(report.skipped), "problems": len(report.problems),
            "cold_index_s": {"median": round(statistics.median(cold), 2), "runs": [round(c, 2) for c in cold],
                             "cpu_median": round(statistics.median(cold_cpu), 2)},
            "resync_no_change_s": {"median": round(statistics.median(warm), 3), "max": round(max(warm), 3),
                                   "cpu_median": round(statistics.median(warm_cpu), 3)},
            "query": {"mode": mode, **latency_summary(q_lat), "empty_results": empty,
                      "cpu": latency_summary(q_cpu)},
            "two_hop": {**latency_summary(g_lat), "median_neighbours": statistics.median(sizes) if sizes else 0,
                        "cpu": latency_summary(g_cpu)},
            "db_bytes": db_size(vault), "peak_rss_mb": peak_rss_mb(),
            "sample_queries": queries[:8],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vault", nargs="?", default=str(DEFAULT_DATA / "vaults" / "obsidian-hub"))
    parser.add_argument("--runs", type=int, default=3, help="fresh copies to cold-index (median reported)")
    parser.add_argument("--queries", type=int, default=200, help="number of queries (at least 100 recommended)")
    parser.add_argument("--mode", default="lexical")
    parser.add_argument("--out", help="result name (default: vault-<folder name>)")
    args = parser.parse_args(argv)
    src = Path(args.vault)
    if not src.is_dir():
        print(f"error: vault folder not found: {src}", file=sys.stderr)
        return 2
    summary = bench(src, args.runs, args.queries, mode=args.mode)
    summary["command"] = "python benchmarks/vault_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"load average {os.getloadavg()}")
    print(f"{src.name}: {summary['notes']} notes, {summary['attachments']} attachments, {summary['links']} links "
          f"({summary['dangling']} dangling)")
    rows = [
        {"measure": "cold index (median of runs)", "value": f"{summary['cold_index_s']['median']} s",
         "detail": f"runs {json.dumps(summary['cold_index_s']['runs'])}; CPU {summary['cold_index_s']['cpu_median']} s"},
        {"measure": "no-change re-sync", "value": f"{summary['resync_no_change_s']['median']} s",
         "detail": f"max {summary['resync_no_change_s']['max']} s; CPU {summary['resync_no_change_s']['cpu_median']} s"},
        {"measure": f"{args.mode} query p50 / p95", "value": f"{summary['query']['p50_ms']} / {summary['query']['p95_ms']} ms",
         "detail": f"{summary['query']['n']} queries, {summary['query']['empty_results']} empty; "
                   f"CPU {summary['query']['cpu']['p50_ms']} / {summary['query']['cpu']['p95_ms']} ms"},
        {"measure": "2-hop neighbourhood p50 / p95", "value": f"{summary['two_hop']['p50_ms']} / {summary['two_hop']['p95_ms']} ms",
         "detail": f"{summary['two_hop']['n']} notes, median {summary['two_hop']['median_neighbours']} neighbours; "
                   f"CPU {summary['two_hop']['cpu']['p50_ms']} / {summary['two_hop']['cpu']['p95_ms']} ms"},
        {"measure": "index size", "value": f"{summary['db_bytes'] / 1e6:.1f} MB", "detail": "index.sqlite3 + wal"},
        {"measure": "peak RSS", "value": f"{summary['peak_rss_mb']} MB", "detail": "whole benchmark process"},
    ]
    print_table(rows, ["measure", "value", "detail"])
    print(f"wrote {write_result(args.out or 'vault-' + src.name, summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
