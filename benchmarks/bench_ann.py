"""ANN against exact vector search on SciFact with real e5 vectors.

    python benchmarks/bench_ann.py DATA_DIR [--shares 0.05,0.1,0.2]

The SciFact vault and its vectors are built (or reused) as ``retrieval_compare.py`` builds them,
under ``$MEMORY_HUB_BENCH_DIR`` (default /tmp/mh-bench). The table is then forced onto the ANN path
(``VectorIndex.ann_from = 0``; the product switches at ``vectors.ANN_FROM`` rows) and, for each
share of IVF partitions probed, the dev queries are run through both paths:

* **row recall@100**: of the 100 rows (passages) exact search ranks first, how many a 100-row ANN
  query returns, and how many the query the vector channel sends (``ANN_ROWS_PER_NOTE`` rows for
  each of 100 notes) returns;
* **note recall@100**: the same for the notes the vector channel hands to fusion (``search_notes``);
* **nDCG@10** of the vector channel alone and of the full hybrid search, exact vs ANN;
* the vector stage's p50/p95 (the machine is shared: figures are under load unless said otherwise).

Writes ``benchmarks/results/ann.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import numpy as np
    import retrieval_compare as rc
    from common import (
        evaluate,
        load_qrels,
        machine,
        ndcg_at,
        percentile,
        print_table,
        read_jsonl,
        write_result,
    )

    from memory_hub.index import vectors as vectors_mod
    from memory_hub.index.store import Store

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the shared data folder (holds scifact/)")
    ap.add_argument("--shares", default="0.05,0.1,0.2", help="shares of IVF partitions probed")
    ap.add_argument("--refines", default=None,
                    help="refine factors tried with every share (default: the product's, vectors.ANN_REFINE)")
    ap.add_argument("--out", default="ann", help="result name under benchmarks/results/")
    ap.add_argument("--vault", type=Path, help="an already indexed SciFact vault (its vectors as they are)")
    ap.add_argument("--paths", type=Path, help="with --vault: its paths.json (note path -> corpus id)")
    ap.add_argument("--layout", default="current", help="with --vault: what its vector table holds (for the JSON)")
    args = ap.parse_args()
    data = args.data / "scifact"
    if args.vault:
        import json

        from common import CachedEmbedder

        from memory_hub.index.embed import load_embedder
        from memory_hub.index.vectors import VectorIndex

        vault = args.vault
        path_to_doc = json.loads(args.paths.read_text(encoding="utf-8"))
        vi = VectorIndex(vault, CachedEmbedder(load_embedder(None), rc.BENCH_DIR / "embed-cache"))
        info = {"vault": str(vault), "layout": args.layout}
    else:
        vault, path_to_doc, vi, info = rc.prepare("scifact", data / "corpus.jsonl", None, None)
    store = Store(vault)
    qrels = load_qrels(data / "qrels" / "dev.tsv")
    queries = {q["_id"]: q["text"] for q in read_jsonl(data / "queries.jsonl") if q["_id"] in qrels}
    qvecs = dict(zip(queries, vi.embedder.embed_queries(list(queries.values())), strict=True))

    # exact: the matrix in memory
    vi.ann_from = 10**12
    vi._shape = None
    matrix = vi._load(store)
    rows = len(matrix.paths)
    exact_rows = {q: set(np.argsort(-(matrix.vectors @ v))[:100].tolist()) for q, v in qvecs.items()}
    table = vi._table()
    ids = table.search().select(["id"]).limit(None).to_arrow().column("id").to_pylist()  # same order as the matrix

    def run_vectors(label: str) -> tuple[dict[str, list[str]], dict[str, list[str]], list[float]]:
        run, notes, lat = {}, {}, []
        for q, v in qvecs.items():
            t0 = time.perf_counter()
            ranked = vi.search_notes(store, v, None, 100)
            lat.append(time.perf_counter() - t0)
            notes[q] = [h[2].path for h in ranked]
            run[q] = [path_to_doc[p] for p in notes[q] if p in path_to_doc]
        return run, notes, lat

    def hybrid_run() -> dict[str, list[str]]:
        run, _lat, _err = rc.run_mode(store, queries, path_to_doc, "hybrid", vi, None)
        return run

    ndcg = {"nDCG@10": ndcg_at(10)}
    ex_run, ex_notes, ex_lat = run_vectors("exact")
    ex_hybrid = hybrid_run()
    results: list[dict[str, Any]] = [{
        "path": "exact", "probes": None, "row_recall@100": 1.0, "note_recall@100": 1.0,
        "vector_nDCG@10": round(evaluate(ex_run, qrels, ndcg)["nDCG@10"], 4),
        "hybrid_nDCG@10": round(evaluate(ex_hybrid, qrels, ndcg)["nDCG@10"], 4),
        "p50_ms": round(statistics.median(ex_lat) * 1000, 2), "p95_ms": round(percentile(ex_lat, 95) * 1000, 2),
    }]
    vi._matrix = None  # the ANN path must not need it
    vi.ann_from = 0
    t0 = time.perf_counter()
    vi.build_ann(table)
    build_s = time.perf_counter() - t0
    vi._bump(store)
    vi._shape = None
    _rows, _ann, parts = vi._table_shape(store)
    refines = [int(x) for x in args.refines.split(",")] if args.refines else [vectors_mod.ANN_REFINE]
    product_refine = vectors_mod.ANN_REFINE
    for refine, share in [(r, float(x)) for r in refines for x in args.shares.split(",")]:
        vectors_mod.ANN_REFINE = refine  # search_notes reads it at each call
        vi.ann_probes = max(1, min(parts, round(parts * share)))
        # a 100-row query (the recall@100), and the query the vector channel sends for 100
        # notes (ANN_ROWS_PER_NOTE rows a note): how many of the exact top-100 rows it brings back
        def nearest(v: np.ndarray, limit: int) -> set[str]:
            return set(vi._table().search(np.asarray(v, dtype=np.float32), vector_column_name="vector")
                       .distance_type("cosine").nprobes(vi.ann_probes).refine_factor(vectors_mod.ANN_REFINE)
                       .select(["id"]).limit(limit).to_arrow().column("id").to_pylist())

        ann_rows = {q: nearest(v, 100) for q, v in qvecs.items()}
        product_rows = {q: nearest(v, 100 * vectors_mod.ANN_ROWS_PER_NOTE) for q, v in qvecs.items()}
        row_recall = statistics.mean(len({ids[i] for i in exact_rows[q]} & ann_rows[q]) / 100 for q in qvecs)
        product_recall = statistics.mean(len({ids[i] for i in exact_rows[q]} & product_rows[q]) / 100 for q in qvecs)
        run, notes, lat = run_vectors(f"ann {share}")
        note_recall = statistics.mean(len(set(notes[q]) & set(ex_notes[q])) / max(1, len(ex_notes[q])) for q in qvecs)
        results.append({
            "path": f"ANN {vectors_mod.ANN_INDEX}", "probes": f"{vi.ann_probes}/{parts}", "refine": refine,
            "row_recall@100": round(row_recall, 4), "rows_in_channel_query@100": round(product_recall, 4),
            "note_recall@100": round(note_recall, 4),
            "vector_nDCG@10": round(evaluate(run, qrels, ndcg)["nDCG@10"], 4),
            "hybrid_nDCG@10": round(evaluate(hybrid_run(), qrels, ndcg)["nDCG@10"], 4),
            "p50_ms": round(statistics.median(lat) * 1000, 2), "p95_ms": round(percentile(lat, 95) * 1000, 2),
        })
        print(results[-1], flush=True)
    vectors_mod.ANN_REFINE = product_refine
    print_table(results, ["path", "probes", "refine", "row_recall@100", "rows_in_channel_query@100", "note_recall@100",
                          "vector_nDCG@10", "hybrid_nDCG@10", "p50_ms", "p95_ms"])
    out = {"dataset": "scifact dev", "queries": len(queries), "rows": rows, "partitions": parts,
           "refine_factor": refines, "index": vectors_mod.ANN_INDEX, "build_s": round(build_s, 2),
           "results": results, "setup": info, "machine": machine(), "note": "under load (shared 2-core machine)"}
    print("written", write_result(args.out, out))
    # the product switches to ANN only from ANN_FROM rows: leave this cached vault on the exact path
    vi._table().drop_index(vi._ann_index(vi._table()).name)
    vi._bump(store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
