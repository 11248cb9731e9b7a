#!/usr/bin/env python3
"""Export a *local* Hugging Face / sentence-transformers model folder for Memory Hub.

Build-time tool (needs the optional ``export`` extra: torch + transformers);
the result is served by ONNX Runtime alone, torch is never imported at run time.

    pip install 'memory-hub[export]'
    python models/export_hf.py ./bge-small-en-v1.5 ~/.cache/memory-hub/models/bge-small
    memory-hub ... --embedder ~/.cache/memory-hub/models/bge-small   # or load_embedder(<folder>)

Output folder layout (what ``load_embedder(<folder>)`` reads):

* ``model.onnx``     - inputs ``input_ids``/``attention_mask`` (+ ``token_type_ids`` if the
  model uses them), output ``last_hidden_state`` [batch, seq, dim]; INT8 dynamic
  quantized unless ``--no-quantize``.
* ``tokenizer.json`` - the model's fast tokenizer.
* ``manifest.json``  - pooling, query/passage prefixes, dim, max tokens, identity.

Pooling and prefixes default to what the sentence-transformers files say
(``1_Pooling/config.json``, ``config_sentence_transformers.json`` prompts) and can be
overridden: e5 models want ``--query-prefix "query: " --passage-prefix "passage: "``.
Nothing is downloaded: the source must be a local folder (``local_files_only``).
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def detect_settings(src: Path) -> dict[str, Any]:
    """Pooling / prefixes / normalization from sentence-transformers side files (if any)."""
    pool = _read_json(src / "1_Pooling" / "config.json")
    if pool.get("pooling_mode_cls_token"):
        pooling = "cls"
    elif pool.get("pooling_mode_lasttoken"):
        pooling = "last"
    else:
        pooling = "mean"
    prompts = _read_json(src / "config_sentence_transformers.json").get("prompts") or {}
    # sentence-transformers truncates at max_seq_length (256 for all-MiniLM-L6-v2), not at the
    # position table's 512: serving longer inputs than it did gives different vectors.
    seq_len = _read_json(src / "sentence_bert_config.json").get("max_seq_length")
    return {
        "pooling": pooling,
        "query_prefix": prompts.get("query", ""),
        "passage_prefix": prompts.get("passage", prompts.get("document", "")),
        "max_seq_length": int(seq_len) if isinstance(seq_len, int) and seq_len > 0 else None,
    }


def export(
    src: Path,
    out: Path,
    *,
    name: str | None = None,
    pooling: str | None = None,
    query_prefix: str | None = None,
    passage_prefix: str | None = None,
    max_tokens: int | None = None,
    quantize: bool = True,
    opset: int = 17,
) -> Path:
    """Export ``src`` (local HF folder) to ``out`` in Memory Hub's model-folder layout."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    src = src.expanduser().resolve()
    tok = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    if not getattr(tok, "is_fast", False):
        raise SystemExit(
            "the model has no fast tokenizer (tokenizer.json); cannot serve it with `tokenizers`"
        )
    model = AutoModel.from_pretrained(str(src), local_files_only=True).eval()
    cfg = model.config

    sample = tok(
        ["Memory Hub export probe", "a second, longer probe sentence for dynamic axes"],
        padding=True,
        return_tensors="pt",
    )
    input_names = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]

    class _Wrap(torch.nn.Module):
        """Positional-args wrapper so the ONNX graph gets stable input names."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(input_names, args, strict=True))).last_hidden_state

    work = Path(tempfile.mkdtemp(prefix=".export-", dir=out.parent if out.parent.exists() else None))
    try:
        fp32 = work / "model.fp32.onnx"
        kwargs: dict[str, Any] = {}
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False  # the TorchScript exporter handles dynamic axes for encoders reliably
        dyn = {n: {0: "batch", 1: "seq"} for n in input_names}
        dyn["last_hidden_state"] = {0: "batch", 1: "seq"}
        with torch.no_grad():
            torch.onnx.export(
                _Wrap(model),
                tuple(sample[n] for n in input_names),
                str(fp32),
                input_names=input_names,
                output_names=["last_hidden_state"],
                dynamic_axes=dyn,
                opset_version=opset,
                do_constant_folding=True,
                **kwargs,
            )
        final = work / "model.onnx"
        if quantize:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(
                str(fp32),
                str(final),
                op_types_to_quantize=["MatMul"],
                weight_type=QuantType.QInt8,
                per_channel=True,
            )
            fp32.unlink()
        else:
            fp32.rename(final)
        tok.backend_tokenizer.save(str(work / "tokenizer.json"))

        detected = detect_settings(src)
        max_pos = int(getattr(cfg, "max_position_embeddings", 512) or 512)
        if getattr(cfg, "model_type", "") in ("xlm-roberta", "roberta", "camembert"):
            max_pos -= 2
        limit = min(max_pos, int(getattr(tok, "model_max_length", max_pos) or max_pos), 8192)
        if detected["max_seq_length"]:
            limit = min(limit, detected["max_seq_length"])
        digest = hashlib.sha256(final.read_bytes()).hexdigest()[:12]
        manifest = {
            "format": "memory-hub-embed-model/1",
            "model": name or src.name,
            "version": digest,
            "backend": "onnx-int8" if quantize else "onnx-fp32",
            "source": {"path": str(src), "model_type": getattr(cfg, "model_type", None)},
            "dim": int(cfg.hidden_size),
            "max_tokens": int(max_tokens or limit),
            "pooling": pooling or detected["pooling"],
            "normalize": True,
            "query_prefix": detected["query_prefix"] if query_prefix is None else query_prefix,
            "passage_prefix": detected["passage_prefix"] if passage_prefix is None else passage_prefix,
            "outputs": {"tokens": "last_hidden_state"},
            "quantization": "onnxruntime quantize_dynamic int8" if quantize else "none",
            "batch_invariant": not quantize,
        }
        (work / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(work), str(out))
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(
        description="Export a local HF / sentence-transformers model for Memory Hub."
    )
    ap.add_argument("src", type=Path, help="local model folder (config.json, weights, tokenizer)")
    ap.add_argument("out", type=Path, help="output folder (replaced if it exists)")
    ap.add_argument("--name", help="model name recorded in the identity key (default: source folder name)")
    ap.add_argument(
        "--pooling", choices=["mean", "cls", "last"], help="default: from 1_Pooling/config.json, else mean"
    )
    ap.add_argument(
        "--query-prefix", help='e.g. "query: " for e5 models (default: sentence-transformers prompts)'
    )
    ap.add_argument("--passage-prefix", help='e.g. "passage: " for e5 models')
    ap.add_argument(
        "--max-tokens",
        type=int,
        help="truncation length (default: sentence_bert_config.json max_seq_length, else the model's limit)",
    )
    ap.add_argument("--no-quantize", action="store_true", help="keep fp32 weights")
    ap.add_argument("--opset", type=int, default=17)
    a = ap.parse_args(argv)
    out = export(
        a.src,
        a.out,
        name=a.name,
        pooling=a.pooling,
        query_prefix=a.query_prefix,
        passage_prefix=a.passage_prefix,
        max_tokens=a.max_tokens,
        quantize=not a.no_quantize,
        opset=a.opset,
    )
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
