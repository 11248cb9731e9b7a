#!/usr/bin/env python3
"""ANN recall and cost against the share of IVF partitions probed, on any indexed vault's own vectors.

    python benchmarks/ann_shares.py VAULT [--shares 0.1,0.25,0.5,0.75] [--data ../shared/data] [--out NAME]

``bench_ann.py`` measures this on SciFact's 14k rows (14 partitions); a 100k-note vault has 393
partitions, and how many of them a query must probe for recall@100 ≥ 0.98 depends on how its
vectors cluster. This runs, on the vault's table as the product built it (its ANN index, its
embedder: ``MEMORY_HUB_EMBEDDER`` or e5), the peers' 30 obsidian-hub queries plus the 215
natural questions of ``benchmarks/natural_questions/`` (their text only) and the first 300 SciFact
and 300 JSQuAD queries (the generated vaults' bodies are those sets' passages) through:

* exact search (every vector of the table in one matrix, here in the benchmark process);
* the ANN query at each share, with the product's refine factor.

Per share: **row recall@100** (of the exact top-100 rows, how many a 100-row ANN query returns),
**channel row recall@100** (the same, from the first 100 rows of the 300-row query the vector channel
sends: ``ANN_ROWS_PER_NOTE`` rows per note wanted, so more rows are refined), **note recall@20** (of the notes ``search_notes`` ranks in its top 20 exactly, how many the ANN path
ranks there), and the CPU and wall time of one ANN query. Writes ``benchmarks/results/NAME.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def ann_ids(table: Any, vector: Any, probes: int, limit: int) -> list[str]:
    """The row ids of one ANN query as the product sends it (cosine, its refine factor)."""
    from memory_hub.index import vectors as V

    return (table.search(vector, vector_column_name="vector").distance_type("cosine").nprobes(probes)
            .refine_factor(V.ANN_REFINE).select(["id"]).limit(limit).to_arrow().column("id").to_pylist())


def questions(data: Path, per_set: int = 0) -> list[str]:
    """The peers' hub queries and the natural questions' text (cases' answers are not read), and
    with ``per_set`` the first that many queries of SciFact and JSQuAD (the generated scale vaults'
    bodies are their passages, so these ask about the rest of such a vault)."""
    import itertools
    import json

    from bench_scale import hub_queries
    from query_latency import natural_questions

    out = [*hub_queries(data), *natural_questions()]
    for name in ("scifact", "jsquad-ja") if per_set else ():
        path = data / name / "queries.jsonl"
        if path.exists():
            with path.open(encoding="utf-8") as fh:
                out.extend(json.loads(line)["text"] for line in itertools.islice(fh, per_set))
    return out


def main() -> int:
    import numpy as np
    from common import DEFAULT_DATA, machine, print_table, spread, write_result

    from memory_hub.index import vectors as V
    from memory_hub.index.embed.loader import load_embedder
    from memory_hub.index.store import Store

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--shares", default="0.1,0.25,0.5,0.75")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--per-set", type=int, default=300, help="SciFact and JSQuAD queries added (0: none)")
    ap.add_argument("--out", default="ann-shares")
    args = ap.parse_args()

    store = Store(args.vault)
    emb = load_embedder(os.environ.get("MEMORY_HUB_EMBEDDER"))
    vi = V.VectorIndex(args.vault, emb)
    table = vi._table()
    if table is None or vi._ann_index(table) is None:
        raise SystemExit(f"{args.vault}: no vector table with an ANN index (it is built from {V.ANN_FROM:,} rows)")
    qs = questions(args.data, args.per_set)
    qv = np.asarray(emb.embed_queries(qs), dtype=np.float32)
    data = table.search().select(["id", "vector"]).limit(None).to_arrow()
    ids = data.column("id").to_pylist()
    matrix = np.stack(data.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    exact_rows = [set(np.argsort(-(matrix @ v))[:100].tolist()) for v in qv]
    del matrix, data
    rows, parts = table.count_rows(), max(1, min(table.count_rows() // V.ANN_ROWS_PER_PARTITION, 4096))

    vi.ann_from = 10**12  # exact notes: the matrix path
    vi._shape = None
    exact_notes = [[h[2].path for h in vi.search_notes(store, v, None, 20)] for v in qv]
    vi._matrix = None
    vi.ann_from = V.ANN_FROM
    vi._shape = None
    results: list[dict[str, Any]] = []
    for share in [float(x) for x in args.shares.split(",")]:
        probes = max(V.ANN_MIN_PROBES, int(parts * share + 0.999))
        vi.ann_probes = probes
        recall_rows, recall_channel, recall_notes, wall, cpu = [], [], [], [], []
        for v, want_rows, want_notes in zip(qv, exact_rows, exact_notes, strict=True):
            want = {ids[i] for i in want_rows}
            recall_rows.append(len(want & set(ann_ids(table, v, min(probes, parts), 100))) / 100)
            # the vector channel asks for ANN_ROWS_PER_NOTE rows per note wanted: 300 for 100 notes
            recall_channel.append(len(want & set(ann_ids(table, v, min(probes, parts), 100 * V.ANN_ROWS_PER_NOTE)[:100])) / 100)
            t0, c0 = time.perf_counter(), time.process_time()
            notes = [h[2].path for h in vi.search_notes(store, v, None, 20)]
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            recall_notes.append(len(set(notes) & set(want_notes)) / max(1, len(want_notes)))
        results.append({"share": share, "probes": f"{min(probes, parts)}/{parts}",
                        "row_recall@100": round(statistics.mean(recall_rows), 4),
                        "row_recall@100_min": round(min(recall_rows), 2),
                        "channel_row_recall@100": round(statistics.mean(recall_channel), 4),
                        "note_recall@20": round(statistics.mean(recall_notes), 4),
                        "search_notes_wall_ms": spread(wall, 1000, 2), "search_notes_cpu_ms": spread(cpu, 1000, 2)})
        print(results[-1], flush=True)
    print_table([{"share": r["share"], "probes": r["probes"], "row_recall@100": r["row_recall@100"],
                  "channel_row_recall@100": r["channel_row_recall@100"],
                  "note_recall@20": r["note_recall@20"], "wall_p50_ms": r["search_notes_wall_ms"]["median"],
                  "cpu_p50_ms": r["search_notes_cpu_ms"]["median"]} for r in results],
                ["share", "probes", "row_recall@100", "channel_row_recall@100", "note_recall@20", "wall_p50_ms",
                 "cpu_p50_ms"])
    write_result(args.out, {"vault": str(args.vault), "rows": rows, "partitions": parts, "queries": len(qs),
                            "embedder": str(getattr(emb, "identity", "")), "refine": V.ANN_REFINE,
                            "load": [round(x, 2) for x in os.getloadavg()], "machine": machine(),
                            "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
