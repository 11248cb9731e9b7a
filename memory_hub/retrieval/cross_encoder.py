"""An ONNX cross-encoder reranker served from a local folder (``model.onnx`` + ``tokenizer.json``).

A cross-encoder reads the query and one candidate together and returns a relevance logit: slower
than comparing vectors, but it sees how the words of both relate. Nothing here downloads or imports
torch: the folder is made once by ``models/export_cross_encoder.py`` (any Hugging Face
cross-encoder a user has locally) and served by onnxruntime + ``tokenizers`` alone.

Settings come from ``manifest.json`` (written by the exporter), else the HF ``config.json``:

* ``max_length`` — tokens per query+doc pair (default 512, never more than the position table);
  the doc is cut first, the query only if it alone would not fit;
* ``activation`` — ``sigmoid`` (default for one-logit models, as sentence-transformers does),
  ``softmax`` or ``none`` (raw logits); one choice per model, so scores are always comparable;
* ``label_index`` — which logit is "relevant" in a multi-label head (default: the last).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..index.embed.base import as_text_list, clean_text, cpu_count, length_sorted_batches, pad_rows
from ..index.embed.onnx_backend import SideBySide, session_options
from .rerank import RERANK_DEPTH, RerankerError

MAX_LENGTH = 512
# Pairs per onnxruntime call, and padded tokens per call. One pair per call by default: dynamic
# INT8 quantizes activations per batch tensor, so a pair's score would move with its batch-mates
# and their padding (up to 0.087 in sigmoid score on an exported random BERT), and on CPU larger
# batches measured slower, not faster: a MiniLM-L6-sized INT8 model took 876/896/1062/1350 ms CPU
# for 20 pairs of 256 tokens at batch 1/4/8/20. A manifest's ``batch`` overrides it.
BATCH = 1
BATCH_TOKENS = 1024
ACTIVATIONS = ("sigmoid", "softmax", "none")


class Pair(NamedTuple):
    """One encoded query+doc pair, ready to feed."""

    ids: list[int]
    type_ids: list[int]


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RerankerError(f"cannot read {path}: {exc}") from None
    return data if isinstance(data, dict) else {}


def folder_settings(folder: Path) -> dict[str, Any]:
    """What a cross-encoder folder says about itself: manifest first, then the HF config."""
    manifest = _read_json(folder / "manifest.json")
    cfg = _read_json(folder / "config.json")
    num_labels = manifest.get("num_labels") or len(cfg.get("id2label") or {}) or 1
    # sentence-transformers records the activation it applies in config.json
    st = cfg.get("sentence_transformers") or {}
    st_act = str(st.get("activation_fn") or cfg.get("sbert_ce_default_activation_function") or "")
    activation = manifest.get("activation")
    if activation is None and st_act:
        activation = "none" if st_act.endswith("Identity") else "sigmoid" if "Sigmoid" in st_act else None
    if activation is None:
        activation = "sigmoid" if num_labels == 1 else "softmax"
    if activation not in ACTIVATIONS:
        raise RerankerError(f"{folder}: activation {activation!r} is not one of {', '.join(ACTIVATIONS)}")
    max_pos = cfg.get("max_position_embeddings")
    if isinstance(max_pos, int) and cfg.get("model_type") in ("xlm-roberta", "roberta", "camembert"):
        max_pos -= 2  # RoBERTa-family position tables reserve two slots
    limit = int(manifest.get("max_length") or min(int(max_pos or MAX_LENGTH), MAX_LENGTH))
    if limit < 8:
        raise RerankerError(f"{folder}: max_length {limit} is too small for a query and a document")
    label_index = int(manifest.get("label_index", num_labels - 1))
    if not 0 <= label_index < num_labels:
        raise RerankerError(f"{folder}: label_index {label_index} outside the model's {num_labels} labels")
    return {
        "model": str(manifest.get("model") or cfg.get("_name_or_path") or folder.name),
        "version": str(manifest.get("version") or ""),
        "max_length": limit,
        "activation": activation,
        "label_index": label_index,
        "batch": int(manifest.get("batch") or BATCH),
        "depth": int(manifest.get("depth") or RERANK_DEPTH),
    }


class CrossEncoderReranker:
    """Scores (query, doc) pairs with an ONNX sequence-classification model.

    ``rerank`` returns one float per doc in input order; higher is more relevant.
    """

    def __init__(self, folder: str | Path, *, num_threads: int | None = None, batch: int | None = None,
                 max_length: int | None = None, depth: int | None = None) -> None:
        folder = Path(folder).expanduser().resolve()
        for name in ("model.onnx", "tokenizer.json"):
            if not (folder / name).is_file():
                raise RerankerError(f"{folder} is not a cross-encoder folder: it needs model.onnx and tokenizer.json")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        s = folder_settings(folder)
        self.folder = folder
        self.max_length: int = int(max_length or s["max_length"])
        self.activation: str = s["activation"]
        self.label_index: int = s["label_index"]
        self.batch: int = max(1, int(batch or s["batch"]))
        # candidates read per query: cost is depth × pair length, so a slow machine lowers one of them
        self.depth: int = max(1, int(depth or s["depth"]))
        self.name = f"cross-encoder/{s['model']}"
        try:
            tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # tokenizers raises plain Exception subclasses
            raise RerankerError(f"{folder / 'tokenizer.json'}: not a valid tokenizers file: {exc}") from None
        tok.no_padding()
        tok.no_truncation()  # truncation is ours: the doc is cut first
        tok.encode_special_tokens = True  # a literal "[SEP]" in a note stays text
        self._tok = tok
        self._specials = tok.num_special_tokens_to_add(is_pair=True)
        pad = next((tok.token_to_id(t) for t in ("[PAD]", "<pad>") if tok.token_to_id(t) is not None), 0)
        self._pad_id = int(pad)

        # One pair per call (the default) runs pairs side by side, one per core, like the embedder;
        # larger batches split each call across the cores instead.
        threads = num_threads or cpu_count()
        self._side = SideBySide(threads if self.batch == 1 else 1, "memory-hub-rerank")
        # Query-sized batches vary in shape, so the arena and memory patterns only hold on to memory.
        so = session_options(max(1, threads // self._side.workers), spin=False, arena=False)
        try:
            self._sess = ort.InferenceSession(str(folder / "model.onnx"), sess_options=so,
                                              providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise RerankerError(f"{folder / 'model.onnx'}: onnxruntime cannot load it: {exc}") from None
        self._inputs = {i.name for i in self._sess.get_inputs()}
        if "input_ids" not in self._inputs:
            raise RerankerError(f"{folder / 'model.onnx'}: graph has no 'input_ids' input")
        outputs = [o.name for o in self._sess.get_outputs()]
        self._output = "logits" if "logits" in outputs else outputs[0]

    # -- encoding -------------------------------------------------------------------------------
    def encode_pair(self, query: str, doc: str) -> Pair:
        """Token ids for one pair, within ``max_length``: the doc is cut first, then the query."""
        return self._encode_pairs(clean_text(query), [clean_text(doc)])[0]

    def _encode_pairs(self, query: str, docs: list[str]) -> list[Pair]:
        budget = self.max_length - self._specials
        q = self._tok.encode(query, add_special_tokens=False)
        out = []
        for d in self._tok.encode_batch(docs, add_special_tokens=False):
            nq, nd = len(q.ids), len(d.ids)
            if nq + nd > budget:
                keep_d = max(budget - nq, min(nd, budget // 2))  # a huge query leaves the doc half
                keep_q = budget - keep_d
                qq = self._copy_truncated(q, keep_q)
                d.truncate(keep_d)
            else:
                qq = q
            e = self._tok.post_process(qq, d, add_special_tokens=True)
            out.append(Pair(list(e.ids), list(e.type_ids)))
        return out

    def _copy_truncated(self, enc: Any, n: int) -> Any:
        if len(enc.ids) <= n:
            return enc
        from tokenizers import Encoding

        copy = Encoding.merge([enc])
        copy.truncate(n)
        return copy

    # -- scoring --------------------------------------------------------------------------------
    def _feeds(self, pairs: list[Pair]) -> dict[str, np.ndarray]:
        ids, mask = pad_rows([p.ids for p in pairs], self._pad_id)
        feeds = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = pad_rows([p.type_ids for p in pairs], 0)[0]
        return feeds

    def _activate(self, logits: np.ndarray) -> np.ndarray:
        logits = np.asarray(logits, dtype=np.float64)
        if logits.ndim == 1:
            logits = logits[:, None]
        if self.activation == "softmax" and logits.shape[1] > 1:
            z = np.exp(logits - logits.max(axis=1, keepdims=True))
            return (z / z.sum(axis=1, keepdims=True))[:, self.label_index]
        col = logits[:, min(self.label_index, logits.shape[1] - 1)]
        if self.activation == "sigmoid":
            return 1.0 / (1.0 + np.exp(-col))
        return col

    def logits(self, query: str, docs: Sequence[str]) -> np.ndarray:
        """Raw model outputs, (n_docs, n_labels), in input order."""
        items = as_text_list(docs)
        pairs = self._encode_pairs(clean_text(query), items)
        if self.batch == 1 and pairs:
            def one(pair: Pair) -> np.ndarray:
                return np.asarray(self._sess.run([self._output], self._feeds([pair]))[0]).reshape(-1)

            return np.stack(self._side.map(one, pairs, [len(p.ids) for p in pairs])).astype(np.float32)
        out: np.ndarray | None = None
        for idx in length_sorted_batches([len(p.ids) for p in pairs], self.batch, BATCH_TOKENS):
            got = np.asarray(self._sess.run([self._output], self._feeds([pairs[i] for i in idx]))[0])
            got = got.reshape(len(idx), -1)
            if out is None:
                out = np.zeros((len(pairs), got.shape[1]), dtype=np.float32)
            out[idx] = got
        return out if out is not None else np.zeros((0, 1), dtype=np.float32)

    def rerank(self, query: str, docs: list[str]) -> list[float]:
        """One relevance score per doc, same order; the model's activation applied consistently."""
        if not docs:
            return []
        scores = self._activate(self.logits(query, docs))
        return [float(x) if math.isfinite(x) else 0.0 for x in scores]


def load(folder: str | Path) -> CrossEncoderReranker:
    """The entry point ``load_reranker(<folder>)`` calls."""
    return CrossEncoderReranker(folder)
