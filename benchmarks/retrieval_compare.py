"""Compare search modes on the same run: lexical, vector, hybrid, hybrid+graph, hybrid+rerank.

A mode with the suffix ``:rrf`` (``hybrid:rrf``) runs without score calibration, i.e. RRF's order
as it is, so the table shows what calibration adds.

Two rows are plain baselines, not the product, so every channel is shown beside what it must beat:

* ``bm25`` — one FTS5 table, one column (title + text), ``bm25()`` unweighted, the query's words
  OR-ed; the same porter/unicode61 tokenizer and, so that Japanese is not a straw man, the same CJK
  bigrams as the word table (``terms.words_text``), but no field weights, no AND-first, no trigram.
* ``note-vector`` — one e5 vector per note from title + description + the first 2,000 characters
  of the body (seed 000's recipe; the model truncates at its window), ranked by cosine.

Embeddings are cached by text (``common.CachedEmbedder``, under ``$MEMORY_HUB_BENCH_DIR/embed-cache``):
a re-run, or a chunking that keeps a text, costs no embedding, and the report says how many vectors
came from the cache (throughput is measured only on a run that embedded).

    python benchmarks/retrieval_compare.py scifact  [--modes ...] [--limit N] [--embedder onnx]
    python benchmarks/retrieval_compare.py jsquad-ja
    python benchmarks/retrieval_compare.py locomo    # session- and turn-level evidence recall

Each dataset becomes a vault (``benchmarks/beir.py``'s ``build_vault``) kept under
``$MEMORY_HUB_BENCH_DIR`` (default ``/tmp/mh-bench/<dataset>``), so its lexical index and its vectors
(one LanceDB table per embedder) are reused between runs: only the first run pays for embedding.
Indexing throughput (chunks/s) is reported for the run that embedded. Every query goes through the
real ``retrieval.search.search`` with the vault's ``VectorIndex``; per-stage latencies come from the
pipeline's own ``timings_ms``. LoCoMo questions are searched only within their own conversation
(one folder per conversation, ``Filters(path_prefix=...)``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from beir import build_vault  # noqa: E402
from common import (  # noqa: E402
    DEFAULT_DATA,
    METRICS,
    CachedEmbedder,
    Metric,
    evaluate,
    latency_summary,
    load_qrels,
    mrr_at,
    ndcg_at,
    peak_rss_mb,
    print_table,
    read_jsonl,
    recall_at,
    write_result,
)

from memory_hub.index.embed import load_embedder  # noqa: E402
from memory_hub.index.lexical import Filters  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.index.terms import words_text  # noqa: E402
from memory_hub.index.vectors import VectorIndex  # noqa: E402
from memory_hub.retrieval.rerank import load_reranker  # noqa: E402
from memory_hub.retrieval.search import QueryError, search  # noqa: E402

BENCH_DIR = Path(os.environ.get("MEMORY_HUB_BENCH_DIR", "/tmp/mh-bench"))
DEFAULT_MODES = "bm25,note-vector,lexical,vector,hybrid:rrf,hybrid,hybrid+graph"
BASELINES = ("bm25", "note-vector")
NOTE_VECTOR_CHARS = 2000

LOCOMO_METRICS: dict[str, Metric] = {
    "R@1": recall_at(1), "R@5": recall_at(5), "R@10": recall_at(10), "nDCG@10": ndcg_at(10), "MRR@10": mrr_at(10),
}


def prepare(name: str, corpus: Path, folder_of: Callable[[dict[str, Any], int], str] | None,
            embedder_spec: str | None) -> tuple[Path, dict[str, str], VectorIndex, dict[str, Any]]:
    """Build (or reuse) the dataset's vault, sync lexically, then embed what is missing."""
    work = BENCH_DIR / name
    vault = work / "vault"
    paths_file = work / "paths.json"
    if paths_file.exists() and vault.is_dir():
        path_to_doc = json.loads(paths_file.read_text(encoding="utf-8"))
    else:
        work.mkdir(parents=True, exist_ok=True)
        path_to_doc = build_vault(read_jsonl(corpus), vault, folder_of)
        paths_file.write_text(json.dumps(path_to_doc), encoding="utf-8")
    t0 = time.perf_counter()
    store = Store(vault)
    sync(vault, store=store, progress=False)
    lexical_s = time.perf_counter() - t0
    vi = VectorIndex(vault, CachedEmbedder(load_embedder(embedder_spec), BENCH_DIR / "embed-cache"))
    report = vi.sync(store, progress=True)
    if report.interrupted:
        raise KeyboardInterrupt
    info = {"lexical_index_s": round(lexical_s, 2), "embedder": vi.key, "vectors": report.as_dict(),
            "chunks": vi.size(store), "coverage_ok": vi.coverage(store).ok,
            "embed_cache": {"hits": vi.embedder.hits, "misses": vi.embedder.misses}}
    if report.chunks_embedded:
        (work / f"embed-{vi.name}.json").write_text(json.dumps(report.as_dict()), encoding="utf-8")
    elif (work / f"embed-{vi.name}.json").exists():  # throughput of the run that did the embedding
        info["vectors_first_run"] = json.loads((work / f"embed-{vi.name}.json").read_text(encoding="utf-8"))
    store.close()
    return vault, path_to_doc, vi, info


def _note_rows(store: Store) -> list[tuple[str, str, str, str]]:
    """(path, title, description, body) of every ranked note."""
    rows = store.conn.execute(
        "SELECT n.path, n.title, n.description, coalesce(f.body, '') FROM notes n "
        "JOIN fts_trigram f ON f.rowid = n.id WHERE n.ranked = 1 ORDER BY n.path").fetchall()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def note_vector_text(title: str, description: str, body: str) -> str:
    """Seed 000's recipe: title, description, the first 2,000 characters (the model truncates)."""
    return "\n\n".join(x for x in (title, description, body[:NOTE_VECTOR_CHARS]) if x.strip())


def run_baseline(store: Store, queries: Mapping[str, str], path_to_doc: Mapping[str, str], mode: str,
                 vi: VectorIndex, prefix_of: Callable[[str], str | None] | None = None, k: int = 100,
                 map_doc: Callable[[str], str] | None = None) -> tuple[dict[str, list[str]], dict[str, Any], int]:
    """The plain baselines (module docstring), over the same notes as the pipeline."""
    import sqlite3

    import numpy as np

    notes = _note_rows(store)
    paths = np.asarray([p for p, *_ in notes], dtype=object)
    if mode == "note-vector":
        texts = [note_vector_text(t, d, b) for _, t, d, b in notes]
        # in groups, so an interrupted run keeps what it embedded in the cache (common.CachedEmbedder)
        matrix = np.concatenate([vi.embedder.embed_passages(texts[s:s + 256]) for s in range(0, len(texts), 256)]) \
            if texts else np.zeros((0, int(vi.embedder.dim)), dtype=np.float32)
    else:
        mem = sqlite3.connect(":memory:")
        mem.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, text, "
                    "tokenize = 'porter unicode61 remove_diacritics 2')")
        mem.executemany("INSERT INTO docs VALUES (?, ?)", ((p, words_text(t + "\n" + b)) for p, t, _, b in notes))
    run: dict[str, list[str]] = {}
    wall: list[float] = []
    for qid, text in queries.items():
        t0 = time.perf_counter()
        prefix = prefix_of(qid) if prefix_of else None
        if mode == "note-vector":
            scores = matrix @ vi.embedder.embed_queries([text])[0]
            if prefix:
                scores = np.where([str(p).startswith(prefix) for p in paths], scores, -np.inf)
            top = np.argsort(-scores, kind="stable")[:k]
            found = [str(paths[i]) for i in top if np.isfinite(scores[i])]
        else:
            words = sorted({w for w in re.findall(r"\w+", words_text(text).lower())})
            expr = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            sql = "SELECT path FROM docs WHERE docs MATCH ?" + (" AND path LIKE ?" if prefix else "") + \
                " ORDER BY bm25(docs) LIMIT ?"
            found = [r[0] for r in mem.execute(sql, (expr, *([prefix + "%"] if prefix else []), k))] if words else []
        wall.append(time.perf_counter() - t0)
        docs = [path_to_doc[p] for p in found if p in path_to_doc]
        run[qid] = [map_doc(d) for d in docs] if map_doc else docs
    latency = {"wall": {k2: v for k2, v in latency_summary(wall).items() if k2 in ("p50_ms", "p95_ms")}}
    return run, latency, 0


def run_mode(store: Store, queries: Mapping[str, str], path_to_doc: Mapping[str, str], mode: str, vi: VectorIndex,
             reranker: Any, prefix_of: Callable[[str], str | None] | None = None, k: int = 100,
             map_doc: Callable[[str], str] | None = None) -> tuple[dict[str, list[str]], dict[str, Any], int]:
    run: dict[str, list[str]] = {}
    stages: dict[str, list[float]] = {}
    errors = 0
    for qid, text in queries.items():
        filters = Filters(path_prefix=prefix_of(qid)) if prefix_of else None
        t0 = time.perf_counter()
        try:
            result = search(store, text, k=k, filters=filters, mode=mode.removesuffix(":rrf"), vectors=vi,
                            reranker=reranker, calibrated=not mode.endswith(":rrf"))
        except QueryError:
            errors += 1
            run[qid] = []
            continue
        stages.setdefault("wall", []).append(time.perf_counter() - t0)
        for stage, ms in result.timings_ms.items():
            stages.setdefault(stage, []).append(ms / 1000)
        docs = [path_to_doc[h.path] for h in result.hits if h.path in path_to_doc]
        run[qid] = [map_doc(d) for d in docs] if map_doc else docs
    latency = {stage: {k2: v for k2, v in latency_summary(vals).items() if k2 in ("p50_ms", "p95_ms")}
               for stage, vals in stages.items()}
    return run, latency, errors


def compare(name: str, dataset: Path, split_qrels: dict[str, Path], modes: list[str], limit: int | None,
            embedder: str | None, reranker_spec: str | None, corpus_file: str = "corpus.jsonl",
            folder_of: Callable[[dict[str, Any], int], str] | None = None,
            prefix_of: Callable[[str], str | None] | None = None,
            metrics: Mapping[str, Metric] = METRICS, map_doc: Callable[[str], str] | None = None) -> dict[str, Any]:
    vault, path_to_doc, vi, info = prepare(name, dataset / corpus_file, folder_of, embedder)
    qrels_sets = {label: load_qrels(p) for label, p in split_qrels.items()}
    judged = set().union(*(set(q) for q in qrels_sets.values()))
    queries = {str(q["_id"]): str(q["text"]) for q in read_jsonl(dataset / "queries.jsonl") if str(q["_id"]) in judged}
    ids = sorted(queries)[:limit] if limit else sorted(queries)
    queries = {q: queries[q] for q in ids}
    reranker = load_reranker(reranker_spec, vi.embedder) if any("rerank" in m for m in modes) else None
    store = Store(vault)
    rows = []
    for mode in modes:
        if mode in BASELINES:
            run, latency, errors = run_baseline(store, queries, path_to_doc, mode, vi, prefix_of, map_doc=map_doc)
        else:
            run, latency, errors = run_mode(store, queries, path_to_doc, mode, vi, reranker, prefix_of,
                                            map_doc=map_doc)
        for label, qrels in qrels_sets.items():
            scores = evaluate(run, qrels, metrics)
            row: dict[str, Any] = {"mode": mode, "level": label, **{m: round(v, 4) for m, v in scores.items()}}
            row["p50_ms"] = latency.get("wall", {}).get("p50_ms", 0.0)
            row["p95_ms"] = latency.get("wall", {}).get("p95_ms", 0.0)
            row["stages"] = latency
            row["query_errors"] = errors
            rows.append(row)
        print(f"  {mode}: done", file=sys.stderr)
    store.close()
    return {"dataset": name, "documents": len(path_to_doc), "queries": len(queries), **info, "modes": modes,
            "reranker": getattr(reranker, "name", None), "results": rows, "peak_rss_mb": peak_rss_mb()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", choices=["scifact", "jsquad-ja", "locomo"])
    parser.add_argument("--modes", default=DEFAULT_MODES)
    parser.add_argument("--limit", type=int, help="only the first N judged queries (sorted by id)")
    parser.add_argument("--embedder", default=None, help="embedder spec (default: auto)")
    parser.add_argument("--reranker", default="maxsim", help="reranker for the +rerank modes (default maxsim)")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    args = parser.parse_args(argv)
    data = Path(args.data) / args.dataset
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    started = time.time()
    if args.dataset == "locomo":
        def conv(doc: dict[str, Any], n: int) -> str:
            return str(doc["_id"]).split(":")[0]

        def prefix(qid: str) -> str:
            return qid.split(":")[0] + "/"

        summary = compare("locomo-sessions", data, {"session": data / "qrels" / "sessions.tsv"}, modes, args.limit,
                          args.embedder, args.reranker, "corpus_sessions.jsonl", conv, prefix, LOCOMO_METRICS)
        turns = compare("locomo-turns", data, {"turn": data / "qrels" / "turns.tsv"}, modes, args.limit,
                        args.embedder, args.reranker, "corpus_turns.jsonl", conv, prefix, LOCOMO_METRICS)
        summary["results"] += turns["results"]
        summary["turns"] = {k: v for k, v in turns.items() if k != "results"}
        columns = ["mode", "level", *LOCOMO_METRICS, "p50_ms", "p95_ms"]
    else:
        summary = compare(args.dataset, data, {"dev": data / "qrels" / "dev.tsv"}, modes, args.limit,
                          args.embedder, args.reranker)
        columns = ["mode", *METRICS, "p50_ms", "p95_ms"]
    summary["wall_s"] = round(time.time() - started, 1)
    summary["command"] = "python benchmarks/retrieval_compare.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{args.dataset}: {summary['documents']} documents, {summary['queries']} queries, "
          f"{summary['chunks']} chunks ({summary['embedder']}), peak RSS {summary['peak_rss_mb']} MB")
    print_table(summary["results"], columns)
    for row in summary["results"]:
        stages = ", ".join(f"{s} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for s, v in row["stages"].items())
        print(f"  {row['mode']} stages p50/p95 ms: {stages}")
    name = f"compare-{args.dataset}" + (f"-limit{args.limit}" if args.limit else "")
    print(f"wrote {write_result(name, summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
