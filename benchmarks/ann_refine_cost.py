#!/usr/bin/env python3
"""CPU of the ANN path's ``search_notes`` at refine x4 and x2, alternated, on an indexed vault.

    MEMORY_HUB_EMBEDDER=DIR python benchmarks/ann_refine_cost.py VAULT

Stand-in vectors are costs only; the quality of each refine factor is bench_ann.py --refines.
"""
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench_scale import hub_queries  # noqa: E402
from common import DEFAULT_DATA  # noqa: E402

from memory_hub.index import vectors as V  # noqa: E402
from memory_hub.index.embed.loader import load_embedder  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402

vault = Path(sys.argv[1])
emb = load_embedder(os.environ.get("MEMORY_HUB_EMBEDDER"))
vi = V.VectorIndex(vault, emb)
st = Store(vault)
qs = hub_queries(DEFAULT_DATA)
qv = [np.asarray(emb.embed_queries([q])[0], dtype=np.float32) for q in qs]
for v in qv:
    vi.search_notes(st, v, None, 100)
res: dict[int, list[float]] = {4: [], 2: []}
wall: dict[int, list[float]] = {4: [], 2: []}
for rep in range(4):
    for r in (4, 2) if rep % 2 == 0 else (2, 4):
        V.ANN_REFINE = r
        c, t = time.process_time(), time.perf_counter()
        for v in qv:
            vi.search_notes(st, v, None, 100)
        res[r].append((time.process_time() - c) / len(qv) * 1000)
        wall[r].append((time.perf_counter() - t) / len(qv) * 1000)
print("load", round(os.getloadavg()[0], 2),
      {f"refine {r}: CPU ms/query": [round(x, 1) for x in v] for r, v in res.items()},
      {f"refine {r}: wall ms/query": [round(x, 1) for x in v] for r, v in wall.items()})
