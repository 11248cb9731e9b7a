#!/usr/bin/env python3
"""A cheap, deterministic stand-in for the e5 embedder, for the *cost* curves of bench_scale.py.

Embedding 100k notes (~300k chunks) with e5 takes about an hour of both cores here, per run. What
the vector index costs (disk, build, ANN, search, serving memory) does not depend on what the
vectors mean, only on how many there are and their width. So the scale benchmark embeds its large
vaults with this model: a real ONNX model folder, loaded through the same ``OnnxEmbedder`` code
path and the same SentencePiece tokenizer as e5 (so chunking and chunk counts are e5's), that
maps each token id to one of 4,093 fixed random 384-d vectors and mean-pools them — a bag of
hashed tokens, ~100× cheaper than e5 per chunk.

It is *not* for quality: ANN recall and nDCG are measured with real e5 vectors (SciFact corpus),
and every figure made with this model says so. Its identity (``hashed-token-standin``) gets its own
LanceDB table, so it can never mix with e5 vectors.

    .venv/bin/python benchmarks/standin_embedder.py /tmp/standin-embedder   # then
    MEMORY_HUB_EMBEDDER=/tmp/standin-embedder memory-hub index
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_hub.index.embed.loader import e5_onnx_dir  # noqa: E402

BUCKETS = 4093  # token ids are folded onto this many vectors (a prime: ids spread evenly)
DIM = 384
NAME = "hashed-token-standin"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "normalization.json")


def build(folder: Path, seed: int = 14) -> Path:
    """Write the stand-in model folder (idempotent) and return it."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder = Path(folder)
    manifest = folder / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("model") == NAME:
        return folder
    source = e5_onnx_dir()
    missing = [f for f in TOKENIZER_FILES if not (source / f).exists()]
    if missing:
        sys.exit(f"the e5 model is not built in {source} (missing {missing}); run `memory-hub models build`")
    folder.mkdir(parents=True, exist_ok=True)
    for f in TOKENIZER_FILES:
        shutil.copy2(source / f, folder / f)
    table = np.random.default_rng(seed).standard_normal((BUCKETS, DIM)).astype(np.float32)
    nodes = [
        helper.make_node("Mod", ["input_ids", "buckets"], ["bucket"]),
        helper.make_node("Gather", ["table", "bucket"], ["last_hidden_state"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "last_axis"], ["mask3"]),
        helper.make_node("Mul", ["last_hidden_state", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "token_axis"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask3", "token_axis"], ["count"], keepdims=0),
        helper.make_node("Max", ["count", "one"], ["count1"]),
        helper.make_node("Div", ["summed", "count1"], ["mean"]),
        helper.make_node("LpNormalization", ["mean"], ["sentence_embedding"], axis=-1, p=2),
    ]
    graph = helper.make_graph(
        nodes, "hashed_token_standin",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", DIM]),
         helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", DIM])],
        [numpy_helper.from_array(table, "table"),
         numpy_helper.from_array(np.array(BUCKETS, dtype=np.int64), "buckets"),
         numpy_helper.from_array(np.array([-1], dtype=np.int64), "last_axis"),
         numpy_helper.from_array(np.array([1], dtype=np.int64), "token_axis"),
         numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="memory-hub-bench")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    e5 = json.loads((source / "manifest.json").read_text())
    manifest.write_text(json.dumps({
        "format": "memory-hub-embed-model/1", "model": NAME, "version": f"1-seed{seed}", "backend": "onnx",
        "dim": DIM, "max_tokens": e5.get("max_tokens", 512), "pooling": "mean", "normalize": True,
        "query_prefix": e5.get("query_prefix", "query: "), "passage_prefix": e5.get("passage_prefix", "passage: "),
        "outputs": {"sentence": "sentence_embedding", "tokens": "last_hidden_state"},
        "batch_invariant": True, "note": "benchmark stand-in for cost curves only; see benchmarks/standin_embedder.py",
    }, indent=1))
    return folder


if __name__ == "__main__":
    print(build(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/standin-embedder")))
