"""Per-case look at the natural questions a mode misses: where each channel ranks the expected notes.

    MEMORY_HUB_NQ_DIR=DIR python benchmarks/nq_misses.py [--vaults a,b] [--depth 30] [--all] [--json]

Reads the indexed copies ``benchmarks/nq_eval.py`` keeps under ``$MEMORY_HUB_NQ_DIR`` (run it
first; nothing is re-indexed here). For every answerable case whose best expected note is not at
rank 1 of hybrid+graph (``--all``: every case), prints the query, what the embedder was asked,
and, for each expected note, its rank in the word, trigram and vector channels and in
hybrid+graph (``-`` = beyond ``--depth``), with its title and description, the evidence the
fusion saw, and the top 3 of hybrid+graph. A diagnosis tool: it never changes a case or a weight.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


from nq_eval import CASES_DIR, VAULTS, WORK_DIR  # noqa: E402  (the copies nq_eval indexed)

from memory_hub.eval.golden import load_cases  # noqa: E402
from memory_hub.index.embed import load_embedder  # noqa: E402
from memory_hub.index.lexical import Filters  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.vectors import VectorIndex  # noqa: E402
from memory_hub.retrieval import search as pipeline  # noqa: E402


def ranks_of(ranked: list[tuple[int, float]], depth: int) -> dict[int, int]:
    return {nid: pos for pos, (nid, _) in enumerate(ranked[:depth], start=1)}


def analyse(vault_name: str, depth: int, every: bool) -> list[dict[str, Any]]:
    vault = WORK_DIR / vault_name / "vault"
    if not vault.is_dir():
        raise SystemExit(f"no indexed copy at {vault}: run benchmarks/nq_eval.py first")
    cases, _, _ = load_cases(CASES_DIR / f"{vault_name}.yaml")
    store = Store(vault)
    vi = VectorIndex(vault, load_embedder(None))
    plan = pipeline.stages("hybrid+graph")
    meta = {int(r[0]): (r[1], r[2], r[3]) for r in store.conn.execute("SELECT id, path, title, description FROM notes")}
    paths = {path: nid for nid, (path, _, _) in meta.items()}
    out = []
    for case in cases:
        if not case.expect:
            continue
        g = pipeline.gather(store, pipeline.check_query(case.query), Filters(), plan, vi)
        r = pipeline.rank(store, g, plan)
        fused = {nid: pos for pos, nid in enumerate(r.order[:depth], start=1)}
        chans = {name: ranks_of(lst, depth) for name, lst in g.channels.items()}
        best = min((fused.get(paths.get(e, -1), 999) for e in case.expect), default=999)
        if best == 1 and not every:
            continue
        rows = []
        for e in case.expect:
            nid = paths.get(e)
            if nid is None:
                rows.append({"path": e, "missing": True})
                continue
            _, title, desc = meta[nid]
            rows.append({"path": e, "title": title, "description": (desc or "")[:160],
                         "words": chans.get("words", {}).get(nid), "trigram": chans.get("trigram", {}).get(nid),
                         "vectors": chans.get("vectors", {}).get(nid), "fused": fused.get(nid),
                         "chunk": g.best_chunk.get(nid, (0, 0, ""))[2] if nid in g.best_chunk else None})
        out.append({"vault": vault_name, "query": case.query, "category": case.category, "best": best,
                    "vector_query": g.vector_query, "terms": g.terms.words, "exact": len(g.exact),
                    "evidence": g.evidence.as_dict(pipeline.DEFAULT_PARAMS),
                    "top": [meta[i][0] for i in r.order[:3]], "expected": rows})
    store.close()
    return out


def show(item: dict[str, Any]) -> None:
    best = item["best"] if item["best"] < 999 else "-"
    print(f"\n[{item['vault']} / {item['category']}] best fused rank {best}: {item['query']}")
    print(f"  words {item['terms']}  vector query {item['vector_query']!r}  evidence {item['evidence']}"
          + (f"  pinned {item['exact']}" if item["exact"] else ""))
    for e in item["expected"]:
        if e.get("missing"):
            print(f"  ? {e['path']} (not in the index)")
            continue
        cell = " ".join(f"{k}={e[k] if e[k] is not None else '-'}" for k in ("words", "trigram", "vectors", "fused"))
        print(f"  {cell}  {e['path']}  title={e['title']!r} chunk={e['chunk']!r}")
        if e["description"]:
            print(f"      desc: {e['description']!r}")
    print("  top3: " + " | ".join(item["top"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vaults", default=",".join(VAULTS))
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--all", action="store_true", help="every answerable case, not only those off rank 1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    items = []
    for name in [v.strip() for v in args.vaults.split(",") if v.strip()]:
        items += analyse(name, args.depth, args.all)
    if args.json:
        print(json.dumps(items, ensure_ascii=False, indent=1))
    else:
        for item in items:
            show(item)
        print(f"\n{len(items)} cases shown")
    return 0


if __name__ == "__main__":
    sys.exit(main())
