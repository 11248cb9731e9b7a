"""Choose fusion settings by k-fold cross-validation over every dev set at once.

    python benchmarks/cross_validate.py [--sets scifact,jsquad-ja,locomo,nq] [--folds 5] [--limit N]

One setting for all sets (no per-dataset switch). Each query of each set is searched once; what
the channels found (``search.gather``: ranked lists, raw scores, pins, evidence) is kept on disk,
so every candidate setting is then tried by re-running only fusion, pins and graph
(``search.rank``) — the same functions the product runs, not a re-implementation.

The queries of every set are split into ``--folds`` folds (each set split on its own, so every
fold holds a fifth of each). For each fold, the setting with the best mean objective over the
other folds is chosen — among those within ``--tolerance`` of the best, the simplest (fewest
departures from plain RRF + calibration) — and scored on the held-out fold. Reported: the
held-out mean and spread of every set's metric across folds, which setting each fold chose, and
the in-sample score of every setting.

Objective per query: SciFact and JSQuAD nDCG@10, LoCoMo session recall@5, and for the natural
questions (``benchmarks/natural_questions/*.yaml``) the mean of hit@5 and MRR@10 — where an
answerable question flagged ``low_confidence`` counts as a miss (the agent was told nothing was
found) and a no-answer question passes only when flagged or empty. The objective of a setting is
the mean over sets of their mean (each set counts once, however many queries it has).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import pickle
import random
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import yaml  # noqa: E402
from common import (  # noqa: E402
    DEFAULT_DATA,
    CachedEmbedder,
    load_qrels,
    ndcg_at,
    print_table,
    read_jsonl,
    recall_at,
    write_result,
)
from retrieval_compare import BENCH_DIR, prepare  # noqa: E402

from memory_hub.index import hubness  # noqa: E402
from memory_hub.index import vectors as vector_module  # noqa: E402
from memory_hub.index.embed import load_embedder  # noqa: E402
from memory_hub.index.lexical import Filters  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.index.vectors import VectorIndex  # noqa: E402
from memory_hub.retrieval import search as pipeline  # noqa: E402
from memory_hub.retrieval.fusion import DEFAULT_PARAMS, FusionParams  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
NQ_DIR = REPO / "benchmarks" / "natural_questions"
NDCG10, R5 = ndcg_at(10), recall_at(5)
# The code whose output the cache holds: a change to any of these makes the cache stale.
GATHER_CODE = ("memory_hub/retrieval/search.py", "memory_hub/index/lexical.py", "memory_hub/index/terms.py",
               "memory_hub/index/vectors.py", "memory_hub/index/chunks.py", "memory_hub/vault/notes.py",
               "memory_hub/vault/markdown.py", "memory_hub/index/describe.py", "memory_hub/index/hubness.py")


@dataclass
class Query:
    """One dev question: where it is searched, and how its answer is judged."""

    set: str
    qid: str
    text: str
    prefix: str | None
    judge: Callable[[list[str], bool], float]  # (ranked paths, low_confidence) → objective in [0, 1]
    category: str = ""
    details: Callable[[list[str], bool], dict[str, float]] | None = None


@dataclass
class Corpus:
    """One searchable vault with the queries asked of it."""

    name: str
    store: Store
    vectors: VectorIndex
    queries: list[Query] = field(default_factory=list)
    graph: bool = False  # whether the vault has links worth the graph stage


def _code_key() -> str:
    h = hashlib.sha1()
    for rel in GATHER_CODE:
        h.update((REPO / rel).read_bytes())
    return h.hexdigest()[:10]


# -- the sets -------------------------------------------------------------------------------------

def _beir(name: str, data: Path, limit: int | None) -> Corpus:
    vault, path_to_doc, vi, _ = prepare(name, data / name / "corpus.jsonl", None, None)
    qrels = load_qrels(data / name / "qrels" / "dev.tsv")
    texts = {str(q["_id"]): str(q["text"]) for q in read_jsonl(data / name / "queries.jsonl") if str(q["_id"]) in qrels}
    ids = sorted(texts)[:limit] if limit else sorted(texts)
    corpus = Corpus(name, Store(vault), vi)
    for qid in ids:
        def judge(paths: list[str], low: bool, rel: dict[str, int] = qrels[qid]) -> float:
            return NDCG10([path_to_doc[p] for p in paths if p in path_to_doc], rel)
        corpus.queries.append(Query(name, qid, texts[qid], None, judge))
    return corpus


def _locomo(data: Path, limit: int | None) -> Corpus:
    folder = data / "locomo"
    vault, path_to_doc, vi, _ = prepare("locomo-sessions", folder / "corpus_sessions.jsonl",
                                         lambda doc, n: str(doc["_id"]).split(":")[0], None)
    qrels = load_qrels(folder / "qrels" / "sessions.tsv")
    texts = {str(q["_id"]): str(q["text"]) for q in read_jsonl(folder / "queries.jsonl") if str(q["_id"]) in qrels}
    ids = sorted(texts)[:limit] if limit else sorted(texts)
    corpus = Corpus("locomo", Store(vault), vi)
    for qid in ids:
        def judge(paths: list[str], low: bool, rel: dict[str, int] = qrels[qid]) -> float:
            return R5([path_to_doc[p] for p in paths if p in path_to_doc], rel)
        corpus.queries.append(Query("locomo", qid, texts[qid], qid.split(":")[0] + "/", judge))
    return corpus


def nq_vault(name: str, data: Path, embedder: Any) -> tuple[Store, VectorIndex]:
    """A writable, indexed, embedded copy of a shared vault (reused between runs)."""
    work = BENCH_DIR / f"nq-{name}"
    vault = work / "vault"
    if not vault.is_dir():
        shutil.copytree(data / "vaults" / name, vault, ignore=shutil.ignore_patterns(".memory_hub", ".git"))
    store = Store(vault)
    sync(vault, store=store, progress=False)
    vi = VectorIndex(vault, embedder)
    vi.sync(store, progress=True)
    return store, vi


def nq_judge(expect: list[str], k: int = 5) -> tuple[Callable[[list[str], bool], float],
                                                     Callable[[list[str], bool], dict[str, float]]]:
    """hit@k and MRR@10 of a natural question; a no-answer question passes when flagged or empty."""
    wanted = set(expect)

    def details(paths: list[str], low: bool) -> dict[str, float]:
        if not wanted:
            ok = float(low or not paths)
            return {"hit@5": ok, "mrr@10": ok}
        if low:
            return {"hit@5": 0.0, "mrr@10": 0.0}
        rank = next((i for i, p in enumerate(paths[:10], start=1) if p in wanted), None)
        return {"hit@5": float(rank is not None and rank <= k), "mrr@10": 1.0 / rank if rank else 0.0}

    def judge(paths: list[str], low: bool) -> float:
        d = details(paths, low)
        return (d["hit@5"] + d["mrr@10"]) / 2

    return judge, details


def _nq(data: Path, limit: int | None, embedder: Any, vaults: set[str] | None = None) -> list[Corpus]:
    out = []
    for path in sorted(NQ_DIR.glob("*.yaml")):
        if vaults and path.stem not in vaults:
            continue
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        store, vi = nq_vault(path.stem, data, embedder)
        corpus = Corpus(f"nq:{path.stem}", store, vi, graph=True)
        for n, case in enumerate(spec["cases"][:limit] if limit else spec["cases"]):
            judge, details = nq_judge(list(case.get("expect") or []), int(case.get("k") or spec.get("k") or 5))
            corpus.queries.append(Query("nq", f"{path.stem}:{n}", str(case["query"]), None, judge,
                                        str(case.get("category") or ""), details))
        out.append(corpus)
    return out


def load_sets(names: Iterable[str], data: Path, limit: int | None, nq_vaults: set[str] | None = None) -> list[Corpus]:
    embedder = CachedEmbedder(load_embedder(None), BENCH_DIR / "embed-cache")
    corpora: list[Corpus] = []
    for name in names:
        if name in ("scifact", "jsquad-ja"):
            corpora.append(_beir(name, data, limit))
        elif name == "locomo":
            corpora.append(_locomo(data, limit))
        elif name == "nq":
            corpora.extend(_nq(data, limit, embedder, nq_vaults))
        else:
            raise SystemExit(f"unknown set {name!r}")
    return corpora


# -- gather once, rank many times -------------------------------------------------------------------

def gathered(corpus: Corpus, refresh: bool = False) -> list[pipeline.Gathered]:
    """Every query's channels, from the disk cache when the code and the index are unchanged."""
    plan = pipeline.stages("hybrid+graph")
    key = f"{corpus.name}-{_code_key()}-{corpus.vectors.name}-{len(corpus.queries)}"
    if vector_module.CHUNK_DRAWS_PENALTY:  # the vector channel's scoring is part of what was gathered
        key += f"-draws{vector_module.CHUNK_DRAWS_PENALTY}"
    key += f"-hub{hubness.WEIGHT}"
    path = BENCH_DIR / "cv-cache" / f"{key.replace(':', '_')}.pkl"
    if path.exists() and not refresh:
        return pickle.loads(path.read_bytes())
    out = []
    t0 = time.perf_counter()
    for q in corpus.queries:
        filters = Filters(path_prefix=q.prefix) if q.prefix else Filters()
        out.append(pipeline.gather(corpus.store, pipeline.check_query(q.text), filters, plan, corpus.vectors,
                                   feedback=True, informative=True))
    print(f"  {corpus.name}: gathered {len(out)} queries in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(out))
    return out


def ranked_paths(corpus: Corpus, g: pipeline.Gathered, params: FusionParams, mode: str = "hybrid+graph",
                 k: int = 10) -> tuple[list[str], bool]:
    plan = pipeline.stages(mode if corpus.graph else mode.replace("+graph", ""))
    if mode == "lexical":
        g = replace(g, channels={n: v for n, v in g.channels.items() if n != "vectors"},
                    raw={n: v for n, v in g.raw.items() if n != "vectors"}, evidence=replace(g.evidence, separation=None))
    elif mode == "vector":
        g = replace(g, channels={n: v for n, v in g.channels.items() if n == "vectors"},
                    raw={n: v for n, v in g.raw.items() if n == "vectors"}, evidence=replace(g.evidence, coverage=None))
    if not g.channels and not g.exact:
        return [], True
    r = pipeline.rank(corpus.store, g, plan, params)
    rows = corpus.store.conn.execute("SELECT id, path FROM notes WHERE id IN (SELECT value FROM json_each(?))",
                                     (json.dumps(r.order[:k]),)).fetchall()
    by_id = dict(rows)
    return [by_id[i] for i in r.order[:k] if i in by_id], r.fused.low_confidence


# -- the grid -------------------------------------------------------------------------------------

def grid(kind: str) -> list[tuple[str, FusionParams]]:
    """Named candidate settings. Names list what departs from the plain setting (``plain``)."""
    base = replace(DEFAULT_PARAMS, lexical_low=0.0, lexical_high=0.0)  # plain RRF + calibration
    out: list[tuple[str, FusionParams]] = [("plain", base)]
    vec_w = (0.5, 0.75, 1.0) if kind == "full" else (0.5, 1.0)
    bm25_w = (0.5, 0.6, 0.7) if kind == "full" else (0.6,)
    lex = ((0.0, 0.0), (0.1, 0.4), (0.2, 0.6), (0.3, 0.8))
    # "lean": without the vector ramp, which no fold chose on LoCoMo + NQ (cv-partial-limit500.json)
    vec = ((0.0, 0.0),) if kind == "lean" else ((0.0, 0.0), (1.0, 3.0), (2.0, 4.0))
    unknown = (0.5, 0.7)  # the unknown-word share above which a result is low-confidence
    for vw, bw, (ll, lh), (vl, vh), un in itertools.product(vec_w, bm25_w, lex, vec, unknown):
        params = replace(base, weights={**base.weights, "vectors": vw}, calibration={"bm25": bw, "vectors": 1 - bw},
                         lexical_low=ll, lexical_high=lh, vector_low=vl, vector_high=vh, unknown_low_confidence=un)
        if params == base:
            continue
        parts = []
        if vw != base.weights["vectors"]:
            parts.append(f"vec={vw}")
        if bw != base.calibration["bm25"]:
            parts.append(f"bm25={bw}")
        if lh:
            parts.append(f"lex_ramp={ll}-{lh}")
        if vh:
            parts.append(f"vec_ramp={vl}-{vh}")
        if un != base.unknown_low_confidence:
            parts.append(f"unknown={un}")
        out.append((" ".join(parts), params))
    return out


def evidence_grid() -> list[tuple[str, FusionParams]]:
    """Around the current default (``plain`` here): how much to trust the lexical channel for a
    cross-script query (``Evidence.cross_script``), the vector channel for a 1–2 term query
    (``Evidence.terms``), and the unknown-word share above which a result is low-confidence."""
    out: list[tuple[str, FusionParams]] = []
    for xs, (short, factor), unknown in itertools.product((1.0, 0.5, 0.0), ((0, 1.0), (2, 0.5), (2, 0.0), (1, 0.0), (1, 0.5)),
                                                          (0.5, 0.45, 0.4)):
        parts = ([f"cross_script_lexical={xs}"] if xs != 1.0 else []) + (
            [f"short_vector={factor}@{short}"] if short else []) + ([f"unknown={unknown}"] if unknown != DEFAULT_PARAMS.unknown_low_confidence else [])
        out.append((" ".join(parts) or "plain", replace(DEFAULT_PARAMS, cross_script_lexical=xs, short_query_terms=short,
                                                        short_vector_factor=factor, unknown_low_confidence=unknown)))
    return out


def recall_grid() -> list[tuple[str, FusionParams]]:
    """Around the current default (``plain`` here): let each channel's best few notes into the
    calibrated head (``FusionParams.channel_head``), read the lexical evidence from informative
    terms only (``FusionParams.informative_coverage``), and weigh the pseudo-relevance feedback
    channel (``search.feedback_channel``), always or only while no note holds every term
    (``FusionParams.feedback_below`` 1.0)."""
    out: list[tuple[str, FusionParams]] = []
    base = DEFAULT_PARAMS
    feedback = ((0.0, None), (0.5, None), (0.5, 1.0))
    for heads, informative, (fb, below) in itertools.product((0, 3), (False, True), feedback):
        parts = ([f"channel_head={heads}"] if heads else []) + (["informative"] if informative else []) + (
            [f"feedback={fb}"] if fb != base.weights.get("feedback", 0.0) else []) + (
            [f"feedback_below={below}"] if below is not None else [])
        out.append((" ".join(parts) or "plain", replace(base, channel_head=heads, informative_coverage=informative,
                                                        weights={**base.weights, "feedback": fb},
                                                        feedback_below=below)))
    return out


def slot_grid() -> list[tuple[str, FusionParams]]:
    """The vector channel's best note guaranteed a place in the fused head (``FusionParams.vector_slot``),
    at any separation or only a clear one (``vector_slot_separation``); ``plain`` is no slot."""
    out: list[tuple[str, FusionParams]] = [("plain", replace(DEFAULT_PARAMS, vector_slot=0, vector_slot_separation=0.0))]
    for slot, sep in itertools.product((2, 3, 5), (0.0, 3.0, 4.0)):
        name = f"vector_slot={slot}" + (f" separation={sep}" if sep else "")
        out.append((name, replace(DEFAULT_PARAMS, vector_slot=slot, vector_slot_separation=sep)))
    return out


def trust_grid() -> list[tuple[str, FusionParams]]:
    """How far to trust the vector channel now that it is the better single ranker on the natural
    questions: its RRF weight, its share of calibration, and a guaranteed place for its second
    note (``FusionParams.vector_second_slot``); ``plain`` is the shipped default."""
    out: list[tuple[str, FusionParams]] = []
    base = DEFAULT_PARAMS
    for vw, cal, second in itertools.product((0.5, 0.75, 1.0), (0.4, 0.5), (0, 4, 5)):
        parts = ([f"vec={vw}"] if vw != base.weights["vectors"] else []) + (
            [f"cal={cal}"] if cal != base.calibration["vectors"] else []) + ([f"second_slot={second}"] if second else [])
        out.append((" ".join(parts) or "plain", replace(base, weights={**base.weights, "vectors": vw},
                                                        calibration={"bm25": round(1 - cal, 2), "vectors": cal},
                                                        vector_second_slot=second)))
    return out


def trigram_grid() -> list[tuple[str, FusionParams]]:
    """The trigram channel voting for every note it matched (``plain``, the earlier behaviour) or only
    for notes the word channel did not rank (``fusion.recall_only``)."""
    return [("plain", replace(DEFAULT_PARAMS, trigram_recall_only=False)),
            ("trigram_recall_only", replace(DEFAULT_PARAMS, trigram_recall_only=True))]


# ``--grid chunks``: the vector channel's penalty for a long note's many chunks
# (``vectors.CHUNK_DRAWS_PENALTY``), cosine per unit of sqrt(2 ln n). It changes what the vector
# channel returns, so each value is gathered on its own (and cached under its own key).
CHUNK_DRAWS = (0.0, 0.003, 0.006, 0.009)
# ``--grid hubness``: the vector channel's hubness correction (``hubness.WEIGHT``), gathered once per
# value, each crossed with two calibration weightings (the corrected channel may deserve more).
HUBNESS = (0.0, 0.25, 0.35, 0.5)
CALIBRATIONS = ({"bm25": 0.6, "vectors": 0.4}, {"bm25": 0.5, "vectors": 0.5})


def complexity(name: str) -> int:
    return 0 if name == "plain" else len(name.split())


# -- cross-validation -----------------------------------------------------------------------------

def folds_of(queries: list[Query], k: int, seed: int = 15) -> list[int]:
    """A fold number per query, each set split into ``k`` near-equal parts on its own."""
    fold = [0] * len(queries)
    by_set: dict[str, list[int]] = {}
    for i, q in enumerate(queries):
        by_set.setdefault(q.set, []).append(i)
    rng = random.Random(seed)
    for idx in by_set.values():
        idx = sorted(idx, key=lambda i: queries[i].qid)
        rng.shuffle(idx)
        for n, i in enumerate(idx):
            fold[i] = n % k
    return fold


def objective(scores: list[float], queries: list[Query], members: list[int]) -> dict[str, float]:
    """Mean score per set over ``members`` (query indexes), and their mean (``"all"``)."""
    per: dict[str, list[float]] = {}
    for i in members:
        per.setdefault(queries[i].set, []).append(scores[i])
    out = {s: sum(v) / len(v) for s, v in per.items()}
    out["all"] = sum(out.values()) / len(out)
    return out


def by_category(queries: list[Query], gathered_all: list[tuple[Corpus, pipeline.Gathered]], params: FusionParams,
                modes: Iterable[str] = ("lexical", "vector", "hybrid", "hybrid+graph")) -> list[dict[str, Any]]:
    """Natural questions per category and mode: hit@5 and MRR@10 (answerable questions flagged
    low-confidence count as misses; no-answer questions pass when flagged or empty)."""
    rows: list[dict[str, Any]] = []
    for mode in modes:
        per: dict[str, list[dict[str, float]]] = {}
        for q, (corpus, g) in zip(queries, gathered_all, strict=True):
            if q.set != "nq" or q.details is None:
                continue
            paths, low = ranked_paths(corpus, g, params, mode)
            d = q.details(paths, low)
            per.setdefault(q.category, []).append(d)
            per.setdefault("all", []).append(d)
        for cat, ds in sorted(per.items()):
            rows.append({"mode": mode, "category": cat, "n": len(ds),
                         "hit@5": round(sum(d["hit@5"] for d in ds) / len(ds), 3),
                         "mrr@10": round(sum(d["mrr@10"] for d in ds) / len(ds), 3)})
    return rows


def vector_variant_scores(corpora: list[Corpus], refresh: bool, mode: str, module: Any, attr: str, label: str,
                          values: Iterable[float], calibrations: Iterable[Mapping[str, float]] = ()
                          ) -> tuple[dict[str, list[float]], dict[str, dict[str, float]]]:
    """Per value of ``module.attr`` (a setting of the vector channel itself, so each is gathered
    on its own): every query's objective in ``mode`` at the default fusion and at each of
    ``calibrations``, and each set's in-sample objective of the vector channel alone. The first
    value is the baseline (``plain``, what ties fall back to), whatever the shipped default is."""
    default = getattr(module, attr)
    values = list(values)
    scores: dict[str, list[float]] = {}
    vector_mode: dict[str, dict[str, float]] = {}
    variants = [("", DEFAULT_PARAMS)] + [
        (f"cal={c['vectors']}", replace(DEFAULT_PARAMS, calibration=dict(c)))
        for c in calibrations if dict(c) != dict(DEFAULT_PARAMS.calibration)]
    try:
        for value in values:
            setattr(module, attr, value)
            name = "" if value == values[0] else f"{label}={value}"
            rows: dict[str, list[float]] = {suffix: [] for suffix, _ in variants}
            per_set: dict[str, list[float]] = {}
            for corpus in corpora:
                for q, g in zip(corpus.queries, gathered(corpus, refresh), strict=True):
                    for suffix, params in variants:
                        paths, low = ranked_paths(corpus, g, params, mode)
                        rows[suffix].append(q.judge(paths, low))
                    vpaths, vlow = ranked_paths(corpus, g, DEFAULT_PARAMS, "vector")
                    per_set.setdefault(q.set, []).append(q.judge(vpaths, vlow))
            for suffix, row in rows.items():
                scores[" ".join(x for x in (name, suffix) if x) or "plain"] = row
            vector_mode[name or "plain"] = {k: round(sum(v) / len(v), 4) for k, v in per_set.items()}
            print(f"  {name or 'plain'}: vector channel alone {vector_mode[name or 'plain']}", file=sys.stderr)
    finally:
        setattr(module, attr, default)
    return scores, vector_mode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="scifact,jsquad-ja,locomo,nq")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--limit", type=int, help="only the first N queries of each set (exploring)")
    parser.add_argument("--grid", choices=["lean", "small", "full", "evidence", "recall", "trigram", "chunks", "hubness", "slot", "trust"], default="small",
                        help="evidence: around the default, the cross-script and short-query factors; "
                        "recall: channel heads admitted to calibration, informative-term coverage; "
                        "trigram: whether the trigram channel votes only for notes the word channel lacks; "
                        "chunks: the vector channel's penalty for a note's many chunks (gathered once per value); "
                        "hubness: the vector channel's hubness correction, with two calibration weightings")
    parser.add_argument("--mode", default="hybrid+graph", choices=["lexical", "vector", "hybrid", "hybrid+graph"],
                        help="the mode whose ranking the objective scores (default hybrid+graph)")
    parser.add_argument("--tolerance", type=float, default=0.002,
                        help="settings within this of the best training objective count as tied; the simplest wins")
    parser.add_argument("--refresh", action="store_true", help="search again even if cached")
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default="cross-validate")
    parser.add_argument("--nq-vaults", help="only these natural-question vaults (comma-separated), while exploring")
    parser.add_argument("--categories", action="store_true",
                        help="also print the natural questions per category and mode, at the default setting")
    args = parser.parse_args(argv)
    started = time.time()
    nq_vaults = {v.strip() for v in args.nq_vaults.split(",")} if args.nq_vaults else None
    corpora = load_sets([s.strip() for s in args.sets.split(",") if s.strip()], Path(args.data), args.limit, nq_vaults)
    queries: list[Query] = []
    gathered_all: list[tuple[Corpus, pipeline.Gathered]] = []
    for corpus in corpora:
        for q, g in zip(corpus.queries, gathered(corpus, args.refresh), strict=True):
            queries.append(q)
            gathered_all.append((corpus, g))
    if args.categories:
        cats = by_category(queries, gathered_all, DEFAULT_PARAMS)
        print_table(cats, ["mode", "category", "n", "hit@5", "mrr@10"])
    scores: dict[str, list[float]] = {}
    extra: dict[str, Any] = {}
    if args.grid == "chunks":
        scores, extra["vector_mode_in_sample"] = vector_variant_scores(
            corpora, args.refresh, args.mode, vector_module, "CHUNK_DRAWS_PENALTY", "chunk_draws", CHUNK_DRAWS)
    elif args.grid == "hubness":
        scores, extra["vector_mode_in_sample"] = vector_variant_scores(
            corpora, args.refresh, args.mode, hubness, "WEIGHT", "hubness", HUBNESS, CALIBRATIONS)
    else:
        settings = {"evidence": evidence_grid, "recall": recall_grid, "trigram": trigram_grid, "slot": slot_grid,
                    "trust": trust_grid}.get(
            args.grid, lambda: grid(args.grid))()
        print(f"{len(queries)} queries, {len(settings)} settings", file=sys.stderr)
        for n, (name, params) in enumerate(settings):
            row = []
            for q, (corpus, g) in zip(queries, gathered_all, strict=True):
                paths, low = ranked_paths(corpus, g, params, args.mode)
                row.append(q.judge(paths, low))
            scores[name] = row
            if n % 10 == 0:
                print(f"  {n + 1}/{len(settings)} settings scored", file=sys.stderr)
    fold = folds_of(queries, args.folds)
    chosen = []
    held: list[dict[str, float]] = []
    everything = list(range(len(queries)))
    for f in range(args.folds):
        train = [i for i in everything if fold[i] != f]
        test = [i for i in everything if fold[i] == f]
        train_obj = {name: objective(row, queries, train)["all"] for name, row in scores.items()}
        best = max(train_obj.values())
        tied = [name for name, v in train_obj.items() if v >= best - args.tolerance]
        pick = min(tied, key=lambda name: (complexity(name), -train_obj[name]))
        chosen.append(pick)
        held.append(objective(scores[pick], queries, test))
    sets = sorted({q.set for q in queries})
    summary = {s: {"mean": round(statistics.mean(h[s] for h in held), 4),
                   "stdev": round(statistics.pstdev(h[s] for h in held), 4),
                   "min": round(min(h[s] for h in held), 4), "max": round(max(h[s] for h in held), 4)}
               for s in [*sets, "all"]}
    in_sample = sorted(((name, objective(row, queries, everything)) for name, row in scores.items()),
                       key=lambda t: -t[1]["all"])
    print(f"\n{args.folds}-fold cross-validation, held-out folds (objective: nDCG@10 / session R@5 / "
          "NQ (hit@5 + MRR@10) / 2):")
    for s, v in summary.items():
        print(f"  {s:10} mean {v['mean']:.4f}  stdev {v['stdev']:.4f}  [{v['min']:.4f}, {v['max']:.4f}]")
    print("chosen per fold:", chosen)
    print("\nin-sample, best 12 settings:")
    for name, obj in in_sample[:12]:
        print(f"  {obj['all']:.4f}  " + "  ".join(f"{s} {obj[s]:.4f}" for s in sets) + f"  {name}")
    plain = objective(scores["plain"], queries, everything)
    print(f"  plain: {plain['all']:.4f}  " + "  ".join(f"{s} {plain[s]:.4f}" for s in sets))
    result = {"folds": args.folds, "mode": args.mode, "queries": {s: sum(q.set == s for q in queries) for s in sets},
              "held_out": summary, "chosen": chosen, "grid": args.grid, "tolerance": args.tolerance,
              "in_sample": [{"setting": n, **{k2: round(v, 4) for k2, v in o.items()}} for n, o in in_sample],
              **extra, "wall_s": round(time.time() - started, 1),
              "command": "python benchmarks/cross_validate.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"wrote {write_result(args.out + (f'-limit{args.limit}' if args.limit else ''), result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
