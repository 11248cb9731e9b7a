#!/usr/bin/env python3
"""Latency of the ONNX cross-encoder rerank stage, on a model with MiniLM-L6's shape.

No real cross-encoder weights exist on the build machine, so the model has random weights but
exactly the compute of ``cross-encoder/ms-marco-MiniLM-L-6-v2`` (6 layers, hidden 384, 12 heads,
FFN 1536), built with the test helper and INT8-quantized with the exporter's torch-free path.
It reranks 20 candidates (the rerank depth) whose pairs fill ``max_length`` tokens.

    .venv/bin/python benchmarks/bench_cross_encoder.py            # 128/256/512 tokens, 9 runs
    .venv/bin/python benchmarks/bench_cross_encoder.py --batches  # also batch size and fp32 vs int8
    .venv/bin/python benchmarks/bench_cross_encoder.py --save /tmp/ce --save-length 128 --candidates 10
        # also keep the INT8 model as a reranker folder (manifest: that length, depth = --candidates),
        # e.g. for ``query_latency.py VAULT --reranker /tmp/ce`` (whole-pipeline latency)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "models")]

QUERY = "how do i promote the standby replica when the primary database dies"
MINILM_L6 = {"hidden": 384, "layers": 6, "heads": 12, "ffn": 1536, "max_pos": 512}


def _peak_mb() -> int:
    return [int(line.split()[1]) // 1024 for line in open("/proc/self/status") if line.startswith("VmHWM")][0]


def _time(rr, docs: list[str], runs: int) -> tuple[list[float], list[float]]:  # noqa: ANN001
    rr.rerank(QUERY, docs)  # warm
    wall, cpu = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        rr.rerank(QUERY, docs)
        wall.append((time.perf_counter() - w) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    return wall, cpu


def main() -> int:
    import export_cross_encoder as ex
    from test_cross_encoder import WORDS, make_cross_encoder

    from memory_hub.retrieval.cross_encoder import CrossEncoderReranker
    from memory_hub.retrieval.rerank import load_reranker

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--batches", action="store_true", help="also compare batch sizes and fp32 vs int8")
    ap.add_argument("--save", type=Path, help="copy the INT8 model folder here, as a ready reranker")
    ap.add_argument("--save-length", type=int, default=128, help="max_length written into the saved manifest")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ce-"))
    fp = make_cross_encoder(tmp / "fp32", max_length=512, **MINILM_L6)
    q8 = ex.quantize_folder(fp / "model.onnx", fp / "tokenizer.json", tmp / "int8", name="minilm-l6-shape",
                            config=json.loads((fp / "config.json").read_text()), max_length=512)
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(WORDS, 600)) for _ in range(args.candidates)]
    print(f"loadavg {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus")
    manifest = json.loads((q8 / "manifest.json").read_text())
    for length in (128, 256, 512):
        (q8 / "manifest.json").write_text(json.dumps({**manifest, "max_length": length}))
        rr = load_reranker(str(q8))
        assert all(len(rr.encode_pair(QUERY, d).ids) == length for d in docs)
        wall, cpu = _time(rr, docs, args.runs)
        print(f"int8, {length} tokens/pair, {args.candidates} candidates: wall p50 {np.median(wall):.0f} ms "
              f"p95 {np.percentile(wall, 95):.0f} ms, CPU p50 {np.median(cpu):.0f} ms, peak RSS {_peak_mb()} MB")
    if args.save:
        import shutil

        shutil.copytree(q8, args.save, dirs_exist_ok=True)
        (args.save / "manifest.json").write_text(json.dumps(
            {**manifest, "max_length": args.save_length, "depth": args.candidates}))
        print(f"saved {args.save} (max_length {args.save_length}, depth {args.candidates})")
    if args.batches:
        for folder, label in ((q8, "int8"), (fp, "fp32")):
            for batch in (1, 4, 8, 20):
                _, cpu = _time(CrossEncoderReranker(folder, batch=batch, max_length=256), docs, 5)
                print(f"{label} batch {batch}, 256 tokens/pair: CPU p50 {np.median(cpu):.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
