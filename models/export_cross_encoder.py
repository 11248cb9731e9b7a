#!/usr/bin/env python3
"""Export a *local* Hugging Face cross-encoder (reranker) folder for Memory Hub, INT8-quantized.

Build-time tool: exporting needs the optional ``export`` extra (torch + transformers); the result
is served by onnxruntime + ``tokenizers`` alone (``memory_hub/retrieval/cross_encoder.py``), and
torch is never imported when serving. Nothing is downloaded: the source must be a local folder.

    pip install 'memory-hub[export]'
    python models/export_cross_encoder.py ./japanese-reranker-xsmall-v2 ~/.cache/memory-hub/models/ja-reranker
    export MEMORY_HUB_RERANKER=~/.cache/memory-hub/models/ja-reranker

Output folder (what ``load_reranker(<folder>)`` reads):

* ``model.onnx``     - inputs ``input_ids``/``attention_mask`` (+ ``token_type_ids`` if the model
  uses them), output ``logits`` [batch, num_labels]; INT8 dynamic quantized (per channel) unless
  ``--no-quantize``;
* ``tokenizer.json`` - the model's fast tokenizer (its pair template adds the separators);
* ``manifest.json``  - max_length, activation, label_index, num_labels, identity.

``--quantize-only SRC.onnx OUT_FOLDER`` quantizes an ONNX file that is already exported (no torch).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any


def quantize_int8(src: Path, dst: Path) -> None:
    """Dynamic INT8 quantization of the MatMul weights, per output channel (activations at run time)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    hush = logging.NullHandler()  # quantize_dynamic logs a pre-processing hint via the root logger
    root.addHandler(hush)
    try:
        quantize_dynamic(str(src), str(dst), op_types_to_quantize=["MatMul"], weight_type=QuantType.QInt8,
                         per_channel=True, extra_options={"MatMulConstBOnly": True})
    finally:
        root.removeHandler(hush)


def activation_for(config: dict[str, Any], num_labels: int) -> str:
    """The activation sentence-transformers would apply: its recorded one, else sigmoid for 1 label."""
    st = config.get("sentence_transformers") or {}
    recorded = str(st.get("activation_fn") or config.get("sbert_ce_default_activation_function") or "")
    if recorded.endswith("Identity"):
        return "none"
    if "Sigmoid" in recorded or num_labels == 1:
        return "sigmoid"
    return "softmax"


def manifest_for(name: str, model_file: Path, config: dict[str, Any], *, max_length: int | None,
                 quantized: bool, label_index: int | None = None, source: str = "") -> dict[str, Any]:
    """The ``manifest.json`` a cross-encoder folder carries (identity and scoring settings)."""
    num_labels = int(config.get("num_labels") or len(config.get("id2label") or {}) or 1)
    max_pos = int(config.get("max_position_embeddings") or 512)
    if config.get("model_type") in ("xlm-roberta", "roberta", "camembert"):
        max_pos -= 2
    return {
        "format": "memory-hub-cross-encoder/1",
        "model": name,
        "version": hashlib.sha256(model_file.read_bytes()).hexdigest()[:12],
        "backend": "onnx-int8" if quantized else "onnx-fp32",
        "source": {"path": source, "model_type": config.get("model_type")},
        "num_labels": num_labels,
        "label_index": num_labels - 1 if label_index is None else label_index,
        "activation": activation_for(config, num_labels),
        "max_length": int(min(max_length or 512, max_pos)),
        "quantization": "onnxruntime quantize_dynamic int8, per-channel (MatMul weights)" if quantized else "none",
    }


def _finish(work: Path, out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(work), str(out))
    return out


def quantize_folder(src_onnx: Path, tokenizer: Path, out: Path, *, name: str | None = None,
                    config: dict[str, Any] | None = None, max_length: int | None = None) -> Path:
    """Torch-free path: an ONNX cross-encoder + its tokenizer.json -> a quantized serving folder."""
    work = Path(tempfile.mkdtemp(prefix=".export-ce-", dir=out.parent if out.parent.exists() else None))
    try:
        quantize_int8(src_onnx, work / "model.onnx")
        shutil.copyfile(tokenizer, work / "tokenizer.json")
        manifest = manifest_for(name or out.name, work / "model.onnx", config or {}, max_length=max_length,
                                quantized=True, source=str(src_onnx))
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return _finish(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def export(src: Path, out: Path, *, name: str | None = None, max_length: int | None = None,
           quantize: bool = True, label_index: int | None = None, opset: int = 17) -> Path:
    """Export ``src`` (a local HF sequence-classification folder) to ``out``, checked against torch."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    src = src.expanduser().resolve()
    tok = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    if not getattr(tok, "is_fast", False):
        raise SystemExit("the model has no fast tokenizer (tokenizer.json); cannot serve it with `tokenizers`")
    model = AutoModelForSequenceClassification.from_pretrained(str(src), local_files_only=True).eval()
    probe_q = ["how do I restart the indexer", "検索インデックスの再構築"]
    probe_d = ["Run memory-hub index again after editing notes.", "保管庫が変わると全文検索テーブルを再構築します。"]
    sample = tok(probe_q, probe_d, padding=True, truncation=True, return_tensors="pt")
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]

    class _Wrap(torch.nn.Module):
        """Positional-args wrapper so the ONNX graph gets stable input names."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(input_names, args, strict=True))).logits

    work = Path(tempfile.mkdtemp(prefix=".export-ce-", dir=out.parent if out.parent.exists() else None))
    try:
        fp32 = work / "model.fp32.onnx"
        kwargs: dict[str, Any] = {}
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False  # the TorchScript exporter handles dynamic axes for encoders reliably
        dyn: dict[str, dict[int, str]] = {n: {0: "batch", 1: "seq"} for n in input_names}
        dyn["logits"] = {0: "batch"}
        with torch.no_grad():
            expected = model(**sample).logits.numpy()
            torch.onnx.export(_Wrap(model), tuple(sample[n] for n in input_names), str(fp32),
                              input_names=input_names, output_names=["logits"], dynamic_axes=dyn,
                              opset_version=opset, do_constant_folding=True, **kwargs)
        final = work / "model.onnx"
        if quantize:
            quantize_int8(fp32, final)
            fp32.unlink()
        else:
            fp32.rename(final)
        tok.backend_tokenizer.save(str(work / "tokenizer.json"))
        config = model.config.to_dict()
        limit = max_length or min(int(getattr(tok, "model_max_length", 512) or 512), 512)
        manifest = manifest_for(name or src.name, final, config, max_length=limit, quantized=quantize,
                                label_index=label_index, source=str(src))
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")

        import onnxruntime as ort

        sess = ort.InferenceSession(str(final), providers=["CPUExecutionProvider"])
        got = sess.run(["logits"], {n: sample[n].numpy() for n in input_names})[0]
        drift = float(np.abs(got - expected).max())
        print(f"max |logit drift| vs torch on the probe pairs: {drift:.4f}")
        return _finish(work, out)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description="Export a local HF cross-encoder (reranker) for Memory Hub.")
    ap.add_argument("src", type=Path, help="local model folder (config.json, weights, tokenizer)")
    ap.add_argument("out", type=Path, help="output folder (replaced if it exists)")
    ap.add_argument("--name", help="model name recorded in the identity (default: source folder name)")
    ap.add_argument("--max-length", type=int, help="tokens per query+doc pair (default: model limit, max 512)")
    ap.add_argument("--label-index", type=int, help="which logit means 'relevant' (default: the last)")
    ap.add_argument("--no-quantize", action="store_true", help="keep fp32 weights")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--quantize-only", action="store_true",
                    help="SRC is an exported ONNX file next to its tokenizer.json (and config.json): quantize only")
    a = ap.parse_args(argv)
    if a.quantize_only:
        src = a.src.expanduser().resolve()
        cfg_path = src.parent / "config.json"
        cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.is_file() else {}
        out = quantize_folder(src, src.parent / "tokenizer.json", a.out, name=a.name, config=cfg,
                              max_length=a.max_length)
    else:
        out = export(a.src, a.out, name=a.name, max_length=a.max_length, quantize=not a.no_quantize,
                     label_index=a.label_index, opset=a.opset)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
