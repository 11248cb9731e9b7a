"""The natural-question dev set (``benchmarks/natural_questions/``) per category, for every mode.

    python benchmarks/nq_eval.py [DATA_DIR] [--modes lexical,vector,hybrid,hybrid+graph] [--fresh]

DATA_DIR defaults to ../shared/data and is never written to: each vault in DATA_DIR/vaults is
copied to ``$MEMORY_HUB_NQ_DIR/<vault>/vault`` (default ``/tmp/mh-nq``) and indexed there (lexical
and vectors). The copy and its index are kept between runs and reused while the source files are
unchanged (obsidian-hub's vectors take minutes cold); ``--fresh`` rebuilds them.

Every case of ``natural_questions/<vault>.yaml`` runs through ``memory_hub.eval.golden.run_eval``
(the code behind ``memory-hub eval``) with the real ``retrieval.search.search``, top 10, in each
mode, plus a plain baseline built here: SQLite FTS5 BM25, unweighted, ``porter unicode61``
tokenizer, over the file name (as title) and body (frontmatter removed) of the same notes, the
query's words OR-ed together.

Metrics, per category (pooled over the three vaults) and overall:
- hit@1, hit@5: any expected note at rank 1 / in the top 5; MRR@10 (0 beyond rank 10);
- all@5 for two-notes cases: every expected note in the top 5 (stricter than hit@5);
- no-answer cases: ``pass`` = share whose search returned nothing or flagged low confidence
  (``golden.LOW_CONFIDENCE_FIELD`` on the result; absent counts as confident). They are not part
  of the overall hit/MRR figures, which cover the answerable cases only.
Prints one table and writes ``benchmarks/results/nq_eval.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DEFAULT_DATA, latency_summary, peak_rss_mb, print_table, write_result  # noqa: E402

from memory_hub.config import INDEX_DIRNAME  # noqa: E402
from memory_hub.eval.golden import CaseResult, Ranked, load_cases, run_eval  # noqa: E402
from memory_hub.index.embed import load_embedder  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.index.vectors import VectorIndex  # noqa: E402
from memory_hub.retrieval.search import QueryError, search  # noqa: E402

CASES_DIR = Path(__file__).resolve().parent / "natural_questions"
WORK_DIR = Path(os.environ.get("MEMORY_HUB_NQ_DIR", "/tmp/mh-nq"))
VAULTS = ["obsidian-help-en", "obsidian-help-ja", "obsidian-hub"]
BASELINE = "bm25-plain"
DEFAULT_MODES = "lexical,vector,hybrid,hybrid+graph"
DEPTH = 10  # results asked of every search; hit@5 and all@5 read the first five
CATEGORY_ORDER = ["paraphrase-en", "paraphrase-ja", "en-to-ja", "ja-to-en", "identifier", "short-term",
                  "two-notes", "hub-natural", "no-answer"]
_FRONTMATTER = re.compile(r"\A---\s*\n.*?\n---\s*(\n|\Z)", re.S)
_WORD = re.compile(r"\w+")


# -- vault copies ---------------------------------------------------------------------------------

def fingerprint(src: Path) -> str:
    """Path, size and mtime of every file outside dot folders: changes when the source vault does."""
    h = hashlib.sha256()
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts[:-1]):
            st = p.stat()
            h.update(f"{rel.as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def prepare(name: str, src: Path, embedder_spec: str | None, fresh: bool) -> tuple[Path, VectorIndex, dict[str, Any]]:
    """Copy (or reuse) the vault under WORK_DIR, bring its lexical index and vectors up to date."""
    work = WORK_DIR / name
    vault = work / "vault"
    stamp = work / "source.json"
    fp = fingerprint(src)
    reused = not fresh and vault.is_dir() and stamp.exists() and \
        json.loads(stamp.read_text(encoding="utf-8")).get("fingerprint") == fp
    if not reused:
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        shutil.copytree(src, vault, ignore=shutil.ignore_patterns(INDEX_DIRNAME, ".git"), symlinks=True)
        stamp.write_text(json.dumps({"source": str(src), "fingerprint": fp}), encoding="utf-8")
    t0 = time.perf_counter()
    store = Store(vault)
    sync(vault, store=store, progress=False)
    lexical_s = time.perf_counter() - t0
    vi = VectorIndex(vault, load_embedder(embedder_spec))
    t1 = time.perf_counter()
    report = vi.sync(store, progress=True)
    if report.interrupted:
        raise KeyboardInterrupt
    coverage = vi.coverage(store)
    notes = store.conn.execute("SELECT count(*) FROM notes WHERE kind != 'attachment'").fetchone()[0]
    info = {"copy_reused": reused, "notes": notes, "lexical_sync_s": round(lexical_s, 2),
            "vector_sync_s": round(time.perf_counter() - t1, 2), "embedder": vi.key,
            "chunks_embedded": report.chunks_embedded, "chunks": vi.size(store), "coverage_ok": coverage.ok,
            "coverage": coverage.summary()}
    store.close()
    return vault, vi, info


# -- the plain baseline ---------------------------------------------------------------------------

class PlainBM25:
    """FTS5 BM25 over file name + body, default weights, porter/unicode61: what anyone gets for free."""

    def __init__(self, vault: Path, paths: list[str]) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute("CREATE VIRTUAL TABLE docs USING fts5(path UNINDEXED, title, body, "
                          "tokenize = 'porter unicode61')")
        rows = []
        for rel in paths:
            text = (vault / rel).read_text(encoding="utf-8", errors="replace")
            rows.append((rel, Path(rel).stem, _FRONTMATTER.sub("", text, count=1)))
        self.conn.executemany("INSERT INTO docs (path, title, body) VALUES (?, ?, ?)", rows)

    def search(self, query: str, k: int) -> list[str]:
        words = _WORD.findall(query)
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.conn.execute("SELECT path FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?", (match, k))
        return [r[0] for r in rows]


# -- metrics --------------------------------------------------------------------------------------

def summarize(cases: list[CaseResult]) -> dict[str, Any]:
    """hit@1, hit@5, MRR@10 (answerable cases), all@5 (expect_all cases), pass (no-answer cases)."""
    cases = [c for c in cases if c.status != "skip"]
    answerable = [c for c in cases if not c.no_answer]
    multi = [c for c in answerable if c.expect_all]
    refused = [c for c in cases if c.no_answer]
    out: dict[str, Any] = {"n": len(cases)}
    if answerable:
        out["hit@1"] = round(sum(c.rank == 1 for c in answerable) / len(answerable), 4)
        out["hit@5"] = round(sum(c.rank is not None and c.rank <= 5 for c in answerable) / len(answerable), 4)
        out["MRR@10"] = round(sum(1 / c.rank if c.rank else 0.0 for c in answerable) / len(answerable), 4)
    if multi:
        out["all@5"] = round(sum(all(r is not None and r <= 5 for r in c.ranks.values()) for c in multi)
                             / len(multi), 4)
    if refused:
        out["pass"] = round(sum(c.status == "pass" for c in refused) / len(refused), 4)
        out["flagged"] = sum(c.low_confidence for c in refused)
    return out


def cell(m: dict[str, Any], category: str) -> str:
    if category == "no-answer":
        return f"pass {m['pass']:.2f}" if "pass" in m else "-"
    if "hit@1" not in m:
        return "-"
    text = f"{m['hit@1']:.2f}/{m['hit@5']:.2f}/{m['MRR@10']:.2f}"
    return text + (f" all {m['all@5']:.2f}" if "all@5" in m else "")


def run_vault(name: str, data_dir: Path, modes: list[str], embedder: str | None, fresh: bool
              ) -> dict[str, Any]:
    src = data_dir / "vaults" / name
    cases, _, _ = load_cases(CASES_DIR / f"{name}.yaml")
    vault, vi, info = prepare(name, src, embedder, fresh)
    store = Store(vault)
    paths = [r[0] for r in store.conn.execute("SELECT path FROM notes WHERE kind != 'attachment' ORDER BY path")
             if r[0].endswith(".md")]
    baseline = PlainBM25(vault, paths)
    results: dict[str, list[CaseResult]] = {}
    latency: dict[str, dict[str, float]] = {}
    warnings: dict[str, set[str]] = {}
    for mode in [BASELINE, *modes]:
        seconds: list[float] = []
        seen: set[str] = set()

        def run(query: str, k: int, mode: str = mode, seconds: list[float] = seconds, seen: set[str] = seen
                ) -> Ranked:
            t0 = time.perf_counter()
            try:
                if mode == BASELINE:
                    return Ranked(baseline.search(query, k))
                result = search(store, query, k=k, mode=mode, vectors=vi)
            except QueryError as exc:
                seen.add(str(exc))
                return Ranked([])
            finally:
                seconds.append(time.perf_counter() - t0)
            seen.update(result.warnings)
            return Ranked.of(result, [h.path for h in result.hits])

        results[mode] = run_eval(vault, cases, run, k=DEPTH, mode=mode).cases
        latency[mode] = {k: v for k, v in latency_summary(seconds).items() if k in ("p50_ms", "p95_ms")}
        warnings[mode] = seen
        print(f"  {name} {mode}: done", file=sys.stderr)
    store.close()
    return {"vault": name, "cases": len(cases), **info, "results": results, "latency": latency,
            "warnings": {m: sorted(w) for m, w in warnings.items() if w}}


def report(runs: list[dict[str, Any]], modes: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pool the vaults: a table row per category (+ overall), and the JSON figures per vault too."""
    all_modes = [BASELINE, *modes]
    pooled: dict[str, dict[str, list[CaseResult]]] = {m: {} for m in all_modes}
    per_vault: dict[str, Any] = {}
    for run in runs:
        per_vault[run["vault"]] = {}
        for mode in all_modes:
            by_cat: dict[str, list[CaseResult]] = {}
            for c in run["results"][mode]:
                by_cat.setdefault(c.category or "uncategorized", []).append(c)
                pooled[mode].setdefault(c.category or "uncategorized", []).append(c)
            per_vault[run["vault"]][mode] = {cat: summarize(cs) for cat, cs in by_cat.items()}
            per_vault[run["vault"]][mode]["overall"] = summarize([c for c in run["results"][mode] if not c.no_answer])
    categories = [c for c in CATEGORY_ORDER if c in pooled[BASELINE]] + \
        sorted(set(pooled[BASELINE]) - set(CATEGORY_ORDER))
    figures: dict[str, Any] = {m: {cat: summarize(pooled[m][cat]) for cat in categories} for m in all_modes}
    for m in all_modes:  # overall: every answerable case, "either note" for two-notes (all@5 stays in its row)
        overall = summarize([c for cat in categories for c in pooled[m][cat] if not c.no_answer])
        overall.pop("all@5", None)
        figures[m]["overall"] = overall
    rows = []
    for cat in [*categories, "overall"]:
        row: dict[str, Any] = {"category": cat, "n": figures[BASELINE][cat]["n"]}
        for m in all_modes:
            row[m] = cell(figures[m][cat], cat)
        rows.append(row)
    return rows, {"pooled": figures, "per_vault": per_vault}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA), help="data folder (default ../shared/data)")
    parser.add_argument("--modes", default=DEFAULT_MODES)
    parser.add_argument("--vaults", default=",".join(VAULTS))
    parser.add_argument("--embedder", default=None, help="embedder spec (default: auto)")
    parser.add_argument("--fresh", action="store_true", help="re-copy and re-index even if the cache is current")
    args = parser.parse_args(argv)
    data_dir = Path(args.data)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    vaults = [v.strip() for v in args.vaults.split(",") if v.strip()]
    missing = [v for v in vaults if not (data_dir / "vaults" / v).is_dir()]
    if missing:
        print(f"error: no vault folder for {', '.join(missing)} under {data_dir / 'vaults'}", file=sys.stderr)
        return 2
    started = time.time()
    runs = [run_vault(v, data_dir, modes, args.embedder, args.fresh) for v in vaults]
    rows, figures = report(runs, modes)
    for run in runs:
        print(f"{run['vault']}: {run['cases']} cases, {run['notes']} notes, {run['chunks']} chunks "
              f"({run['embedder']}), vectors: {run['coverage']}" + ("" if run["coverage_ok"] else "  ** INCOMPLETE **")
              + (", reused cached copy" if run["copy_reused"] else ", fresh copy"))
        for mode, ws in run["warnings"].items():
            for w in ws:
                print(f"  warning ({mode}): {w}")
    print("cells: hit@1/hit@5/MRR@10 (two-notes: + all@5 = every note in top 5); "
          "no-answer: share returning nothing or flagged low-confidence")
    print_table(rows, ["category", "n", BASELINE, *modes])
    print(f"latency p50/p95 ms (load average {os.getloadavg()[0]:.1f} at the end): " + "; ".join(
        f"{run['vault']} " + ", ".join(f"{m} {v['p50_ms']:.0f}/{v['p95_ms']:.0f}" for m, v in run["latency"].items())
        for run in runs))
    summary = {
        "command": "python benchmarks/nq_eval.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "modes": [BASELINE, *modes], "depth": DEPTH, "table": rows, **figures,
        "vaults": [{k: v for k, v in run.items() if k != "results"} for run in runs],
        "wall_s": round(time.time() - started, 1), "peak_rss_mb": peak_rss_mb(),
    }
    print(f"wrote {write_result('nq_eval', summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
