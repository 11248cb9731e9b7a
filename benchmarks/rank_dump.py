#!/usr/bin/env python3
"""Dump what the peers' queries return, to compare two versions of the code byte for byte.

    PYTHONPATH=TREE python benchmarks/rank_dump.py VAULT OUT.json [--modes hybrid+graph,lexical]
    cmp BEFORE.json AFTER.json

With whichever ``memory_hub`` is first on the path (PYTHONPATH names the tree): per query, the
top-10 paths and scores of each mode, the word channel's 100-row lists (with and without the raw
OR ranking) and the pruned OR ranking at k = 5 and 20. A change meant to keep rankings identical
must leave the file unchanged.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    from bench_scale import hub_queries
    from common import DEFAULT_DATA

    from memory_hub.index import lexical
    from memory_hub.index.terms import analyze_query
    from memory_hub.retrieval.searcher import Searcher

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--modes", default="hybrid+graph,lexical")
    ap.add_argument("--queries", type=Path, default=None, help="one query a line (default: the peers' hub queries)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder (default ../shared/data)")
    args = ap.parse_args()
    queries = hub_queries(args.data) if args.queries is None else [
        q.strip() for q in args.queries.read_text(encoding="utf-8").splitlines() if q.strip()]
    searcher = Searcher(args.vault)
    conn = searcher.store.conn
    out = {}
    t0 = time.perf_counter()
    for q in queries:
        row: dict[str, object] = {}
        for mode in args.modes.split(","):
            row[mode] = [(h.path, round(h.score, 9)) for h in searcher.search(q, 10, None, mode).hits]
        terms = analyze_query(q)
        ranked, raw = lexical.word_rankings(conn, terms, lexical.NO_FILTERS, 100, want_raw=True)
        row["words"], row["words_raw"] = ranked, raw
        row["words_without_raw"] = lexical.word_rankings(conn, terms, lexical.NO_FILTERS, 100, want_raw=False)[0]
        for k in (5, 20):
            row[f"or_{k}"] = lexical._run_or(conn, "fts_words", lexical._BM25_WORDS, terms.words, terms.prefixes,
                                             lexical.NO_FILTERS, k)
        out[q] = row
    args.out.write_text(json.dumps(out, indent=0))
    import memory_hub

    print(f"{len(queries)} queries in {time.perf_counter() - t0:.2f} s, code from {memory_hub.__file__}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
