#!/usr/bin/env python3
"""Where a warm query's time goes, in process, per stage and per SQL statement.

    MEMORY_HUB_EMBEDDER=/tmp/standin-embedder .venv/bin/python benchmarks/query_profile.py VAULT \
        [--modes hybrid+graph,lexical] [--rounds 2] [--queries FILE] [--json OUT]

Every SQLite statement the search runs (both threads: the vector channel's runs beside the
lexical SQL) is timed from ``execute`` to its last row (the rows are read at once, so a statement's
time is its whole cost), and grouped by its SQL text with the numbers replaced. The first round
warms the caches (document counts, the link graph, the vector index); the rounds after it are
reported: each search's ``timings_ms`` per stage (median, p95, max over the queries) and, per
statement shape, how many times it ran and its total and worst time, plus each query's statement
count and SQL time. Real SQLite, real LanceDB; the stand-in embedder's vectors are costs only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO))  # appended: a PYTHONPATH naming another tree (the code before a change) wins

from common import DEFAULT_DATA, spread  # noqa: E402

from memory_hub.index import store as store_mod  # noqa: E402

_GLOBAL = {"on": False}
RECORDS: list[tuple[str, str, float, int, str]] = []  # (thread, sql shape, ms, rows, parameters)
_records_lock = threading.Lock()


class _Rows:
    """A cursor's rows, already read (so the statement's time includes every step)."""

    def __init__(self, rows: list[Any], description: Any, rowcount: int, lastrowid: Any) -> None:
        self._rows, self._at = rows, 0
        self.description, self.rowcount, self.lastrowid = description, rowcount, lastrowid

    def fetchone(self) -> Any:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        rest, self._at = self._rows[self._at:], len(self._rows)
        return rest

    def fetchmany(self, n: int = 1) -> list[Any]:
        part = self._rows[self._at:self._at + n]
        self._at += len(part)
        return part

    def __iter__(self) -> Any:
        while (row := self.fetchone()) is not None:
            yield row


_NUM = re.compile(r"\b\d+\b")


def shape(sql: str) -> str:
    return _NUM.sub("N", " ".join(sql.split()))[:160]


class TimedConnection(sqlite3.Connection):
    def execute(self, sql: str, params: Any = ()) -> Any:  # type: ignore[override]
        if not _GLOBAL["on"]:
            return super().execute(sql, params)
        t = time.perf_counter()
        cur = super().execute(sql, params)
        rows = cur.fetchall() if cur.description is not None else []
        ms = (time.perf_counter() - t) * 1000
        with _records_lock:
            RECORDS.append((threading.current_thread().name, shape(sql), ms, len(rows), repr(params)[:120]))
        return _Rows(rows, cur.description, cur.rowcount, cur.lastrowid)


def _connect(path: Path, busy_ms: int = 30_000, named_rows: bool = True) -> sqlite3.Connection:
    return _plain_connect(path, busy_ms, named_rows, factory=TimedConnection)


_plain_connect = store_mod.connect
store_mod.connect = _connect  # type: ignore[assignment]


def _on(flag: bool) -> None:
    """Log statements in every thread (the vector channel's threads read the same switch)."""
    _GLOBAL["on"] = flag


def _queries(path: Path | None, data: Path) -> list[str]:
    """The queries of ``path`` (one a line), else the peers' hub queries (``bench_scale.hub_queries``)."""
    if path is None:
        from bench_scale import hub_queries

        return hub_queries(data)
    return [q.strip() for q in path.read_text(encoding="utf-8").splitlines() if q.strip()]


def main() -> int:
    from memory_hub.retrieval.searcher import Searcher

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--modes", default="hybrid+graph,lexical")
    ap.add_argument("--rounds", type=int, default=2, help="rounds after the warming one")
    ap.add_argument("--queries", type=Path, default=None,
                    help="one query a line (default: the peers' 30 obsidian-hub queries beside --data)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder (default ../shared/data)")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--path-prefix", default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    queries = _queries(args.queries, args.data)
    from memory_hub.index.lexical import Filters

    filters = Filters(path_prefix=args.path_prefix) if args.path_prefix else None
    searcher = Searcher(args.vault)
    import memory_hub

    out: dict[str, Any] = {"vault": str(args.vault), "queries": len(queries), "code": memory_hub.__file__,
                           "load": os.getloadavg(), "modes": {}}
    print(f"code from {memory_hub.__file__}, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    for mode in args.modes.split(","):
        t = time.perf_counter()
        for q in queries:  # warming round
            searcher.search(q, args.k, filters, mode)
        warm_s = time.perf_counter() - t
        stages: dict[str, list[float]] = defaultdict(list)
        by_shape: dict[str, list[float]] = defaultdict(list)
        rows_by_shape: dict[str, int] = defaultdict(int)
        per_query: list[dict[str, Any]] = []
        for _ in range(args.rounds):
            for q in queries:
                RECORDS.clear()
                _on(True)
                t = time.perf_counter()
                result = searcher.search(q, args.k, filters, mode)
                wall = (time.perf_counter() - t) * 1000
                _on(False)
                for name, ms in result.timings_ms.items():
                    stages[name].append(ms)
                stages["wall"].append(wall)
                main_sql = sum(ms for th, _, ms, _, _ in RECORDS if not th.startswith("memory-hub-vectors"))
                side_sql = sum(ms for th, _, ms, _, _ in RECORDS if th.startswith("memory-hub-vectors"))
                for _th, sh, ms, n, _ in RECORDS:
                    by_shape[sh].append(ms)
                    rows_by_shape[sh] += n
                per_query.append({"query": q, "wall_ms": round(wall, 2), "statements": len(RECORDS),
                                  "sql_ms_main": round(main_sql, 2), "sql_ms_vector_thread": round(side_sql, 2),
                                  "timings_ms": result.timings_ms,
                                  "hits": [h.path for h in result.hits]})
        top = sorted(by_shape.items(), key=lambda kv: -sum(kv[1]))[:args.top]
        report = {
            "warming_round_s": round(warm_s, 2),
            "stages_ms": {k: spread(v, digits=2) for k, v in sorted(stages.items())},
            "statements_per_query": spread([p["statements"] for p in per_query], digits=2),
            "sql_ms_main_thread": spread([p["sql_ms_main"] for p in per_query], digits=2),
            "top_statements": [{"sql": sh, "runs": len(v), "total_ms": round(sum(v), 1), "max_ms": round(max(v), 2),
                                "rows": rows_by_shape[sh]} for sh, v in top],
            "slowest_queries": sorted(per_query, key=lambda p: -p["wall_ms"])[:8],
        }
        out["modes"][mode] = report
        print(f"== {mode}: warming round {warm_s:.2f} s", file=sys.stderr)
        for k, v in report["stages_ms"].items():
            print(f"  {k:16s} {v}", file=sys.stderr)
        print(f"  statements/query {report['statements_per_query']}  main-thread SQL ms {report['sql_ms_main_thread']}",
              file=sys.stderr)
        for s in report["top_statements"]:
            print(f"  {s['total_ms']:8.1f} ms {s['runs']:4d}x max {s['max_ms']:7.2f} rows {s['rows']:6d}  {s['sql']}",
                  file=sys.stderr)
        for p in report["slowest_queries"][:5]:
            print(f"  slow: {p['wall_ms']:7.1f} ms {p['statements']:3d} stmts {p['query']!r} {p['timings_ms']}",
                  file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
