"""Retrieval quality on any BEIR-layout collection, through the real vault → sync → search path.

    python benchmarks/beir.py ../shared/data/scifact --split dev [--modes lexical,hybrid] [--limit N]

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
``text``) and ``qrels/<split>.tsv``. Each document becomes one Markdown note (frontmatter title,
text as body) in a temporary vault, indexed by ``memory_hub.index.sync.sync``; each judged query
goes through ``memory_hub.retrieval.search.search(store, q, k=100, mode=mode)``. Reports the
metrics in ``common.METRICS`` (nDCG@10, recall@100, MRR@10) and query latency p50/p95 per mode.

Extending: a new search mode needs nothing here (``--modes`` is passed through); a new metric is a
function in ``common.METRICS``; a collection whose documents belong together (LoCoMo
conversations) passes ``folder_of`` to ``build_vault``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_DATA,
    METRICS,
    Metric,
    Qrels,
    Timer,
    evaluate,
    latency_summary,
    load_qrels,
    peak_rss_mb,
    print_table,
    read_jsonl,
    write_result,
)

from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.retrieval.search import QueryError, search  # noqa: E402

DOCS_PER_FOLDER = 500
_UNSAFE = re.compile(r"[^\w.-]+")


def _file_stem(doc_id: str) -> str:
    stem = _UNSAFE.sub("_", doc_id).strip("._") or "doc"
    return "d-" + stem  # never mistaken for a daily note (YYYY-MM-DD) or a hidden file


def note_text(doc: dict[str, Any]) -> str:
    """One BEIR document as a note: the title in frontmatter (JSON is valid YAML), the text as body."""
    title = str(doc.get("title") or "").strip()
    head = f"---\ntitle: {json.dumps(title, ensure_ascii=False)}\n---\n" if title else ""
    return head + str(doc.get("text") or "") + "\n"


def build_vault(corpus: Iterable[dict[str, Any]], root: Path,
                folder_of: Callable[[dict[str, Any], int], str] | None = None) -> dict[str, str]:
    """Write one note per document under ``root``; returns {vault-relative path: doc id}.

    ``folder_of(doc, n)`` picks a document's folder; by default documents are spread over folders of
    ``DOCS_PER_FOLDER`` so no directory gets huge.
    """
    paths: dict[str, str] = {}
    for n, doc in enumerate(corpus):
        folder = folder_of(doc, n) if folder_of else f"docs/{n // DOCS_PER_FOLDER:03d}"
        stem = _file_stem(str(doc["_id"]))
        rel = f"{folder}/{stem}.md"
        dup = 1
        while rel in paths:
            dup += 1
            rel = f"{folder}/{stem}-{dup}.md"
        full = root / rel
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(note_text(doc), encoding="utf-8")
        paths[rel] = str(doc["_id"])
    return paths


def run_queries(store: Store, queries: dict[str, str], path_to_doc: dict[str, str], mode: str, k: int = 100
                ) -> tuple[dict[str, list[str]], list[float], int, list[float]]:
    """Each query through the real search: ({query id: [doc ids]}, latencies in seconds, errors,
    CPU seconds per query — the machine is shared, CPU time is what an idle one would show)."""
    run: dict[str, list[str]] = {}
    latencies: list[float] = []
    cpu: list[float] = []
    errors = 0
    for qid, text in queries.items():
        with Timer() as t:
            try:
                hits = search(store, text, k=k, mode=mode).hits
            except QueryError:
                hits = []
                errors += 1
        latencies.append(t.seconds)
        cpu.append(t.cpu_seconds)
        run[qid] = [path_to_doc[h.path] for h in hits if h.path in path_to_doc]
    return run, latencies, errors, cpu


def benchmark(dataset: Path, split: str, modes: Sequence[str], limit: int | None = None,
              metrics: dict[str, Metric] = METRICS, folder_of: Callable[[dict[str, Any], int], str] | None = None,
              keep: Path | None = None, qrels: Qrels | None = None) -> dict[str, Any]:
    """Build, index and query; return the summary that is printed and written as JSON."""
    qrels = qrels if qrels is not None else load_qrels(dataset / "qrels" / f"{split}.tsv")
    queries = {str(q["_id"]): str(q["text"]) for q in read_jsonl(dataset / "queries.jsonl") if str(q["_id"]) in qrels}
    ids = sorted(queries)
    if limit:
        ids = ids[:limit]
    queries = {q: queries[q] for q in ids}
    workdir = Path(tempfile.mkdtemp(prefix="mh-beir-")) if keep is None else keep
    vault = workdir / "vault"
    try:
        if vault.exists() and keep is not None and (vault / ".memory_hub").exists():
            path_to_doc = json.loads((workdir / "paths.json").read_text(encoding="utf-8"))
            build_s = 0.0
        else:
            with Timer() as tb:
                path_to_doc = build_vault(read_jsonl(dataset / "corpus.jsonl"), vault, folder_of)
            build_s = tb.seconds
            (workdir / "paths.json").write_text(json.dumps(path_to_doc), encoding="utf-8")
        with Timer() as ti:
            report = sync(vault, progress=False)
        store = Store(vault)
        rows = []
        for mode in modes:
            run, latencies, errors, cpu = run_queries(store, queries, path_to_doc, mode)
            scores = evaluate(run, qrels, metrics)
            rows.append({"mode": mode, **{m: round(v, 4) for m, v in scores.items()},
                         **{f"latency_{k}": v for k, v in latency_summary(latencies).items() if k != "n"},
                         **{f"cpu_{k}": v for k, v in latency_summary(cpu).items() if k in ("p50_ms", "p95_ms")},
                         "queries": len(run), "query_errors": errors})
        store.close()
        return {
            "dataset": str(dataset), "split": split, "documents": len(path_to_doc), "queries": len(queries),
            "write_vault_s": round(build_s, 2), "index_s": round(ti.seconds, 2),
            "indexed": len(report.added) + len(report.updated), "skipped": len(report.skipped),
            "results": rows, "peak_rss_mb": peak_rss_mb(),
        }
    finally:
        if keep is None:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=str(DEFAULT_DATA / "scifact"),
                        help="BEIR folder (default: ../shared/data/scifact); a bare name is looked up in the data folder")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--modes", default="lexical", help="comma-separated search modes (default: lexical)")
    parser.add_argument("--limit", type=int, help="only the first N judged queries (sorted by id)")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="data folder for bare dataset names")
    parser.add_argument("--keep", help="build the vault in this folder and keep it (reused when present)")
    parser.add_argument("--out", help="result name (default: beir-<dataset>-<split>[-limitN])")
    args = parser.parse_args(argv)

    dataset = Path(args.dataset)
    if not dataset.exists() and (Path(args.data) / args.dataset).exists():
        dataset = Path(args.data) / args.dataset
    if not (dataset / "corpus.jsonl").is_file():
        print(f"error: {dataset} is not a BEIR folder (no corpus.jsonl)", file=sys.stderr)
        return 2
    if not (dataset / "qrels" / f"{args.split}.tsv").is_file():
        print(f"error: no qrels/{args.split}.tsv in {dataset}", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    keep = Path(args.keep).resolve() if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    started = time.time()
    summary = benchmark(dataset, args.split, modes, args.limit, keep=keep)
    summary["wall_s"] = round(time.time() - started, 1)
    summary["command"] = "python benchmarks/beir.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"{dataset.name} ({args.split}): {summary['documents']} documents, {summary['queries']} queries; "
          f"indexed in {summary['index_s']}s")
    print(f"load average {os.getloadavg()}")
    print_table(summary["results"], ["mode", *METRICS, "latency_p50_ms", "latency_p95_ms", "cpu_p50_ms", "cpu_p95_ms",
                                      "queries"])
    name = args.out or f"beir-{dataset.name}-{args.split}" + (f"-limit{args.limit}" if args.limit else "")
    print(f"wrote {write_result(name, summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
