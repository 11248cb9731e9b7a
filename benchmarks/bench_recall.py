"""Recall on every prompt: hook round trip (warm and cold), block size, and recall quality.

    python benchmarks/bench_recall.py [--runs 40] [--hook-runs 12] [--skip-locomo] [--locomo-limit N]

1. **Latency on obsidian-hub** (copied to ``--work`` first; ../shared is never written):
   recall-index build from nothing and warm restart; then, with a real server process holding the
   hooks socket, the socket round trip (what a hook waits for) and the full hook *process* round
   trip (``python -m memory_hub.cli hook claude-code``, interpreter start included); then the same
   hook with no server (cold, in-process). Prompts are generated deterministically from note
   titles: ordinary turns, prompts naming a note, and "how do X and Y relate" questions.
2. **Block size**: tokens (cl100k) of every block served; the budget is 1,200.
3. **Quality on LoCoMo**: every turn of every conversation is a note (``<conversation>/<turn>.md``),
   questions are prompts, restricted to their own conversation; evidence recall@5 of the notes
   recall returns (k=5) and of exactly the notes it injects (its block, weak tail dropped), with
   lines per prompt and the share of injected lines that are evidence, against the search it
   follows (``lexical``; with ``--vectors`` also ``MEMORY_HUB_RECALL_MODE=hybrid``); then a sweep
   of the weak-tail cut (``--tail-settings``). Also hit@5 on the starter vault's golden cases.

Writes ``benchmarks/results/recall.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_DATA,
    HOOK_COMMAND,
    REPO,
    first_recall,
    hook_process,
    latency_summary,
    load_qrels,
    print_table,
    read_jsonl,
    write_result,
)

from memory_hub.config import INDEX_DIRNAME, index_dir  # noqa: E402
from memory_hub.index.lexical import Filters  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.retrieval import recall_score  # noqa: E402
from memory_hub.retrieval.block import Block  # noqa: E402
from memory_hub.retrieval.recall import Recaller, RecallSearch  # noqa: E402
from memory_hub.retrieval.recall_index import RecallIndex  # noqa: E402
from memory_hub.retrieval.recall_modes import is_trivial  # noqa: E402
from memory_hub.retrieval.search import search  # noqa: E402
from memory_hub.server import local_socket  # noqa: E402

BUDGET = 1200


def copy_vault(src: Path, dst: Path) -> Path:
    if not dst.exists():
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(INDEX_DIRNAME), symlinks=True)
    return dst


def make_prompts(index: RecallIndex, n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    titles = sorted({info.title for info in index.data.notes.values()
                     if info.kind not in ("daily", "template", "attachment") and 8 <= len(info.title) <= 80})
    words = sorted({w for t in titles for w in re.findall(r"[A-Za-z]{5,}", t)})
    prompts = []
    for i in range(n):
        shape = i % 4
        if shape == 0:
            a, b = rng.sample(words, 2)
            prompts.append(f"I need to change how {a.lower()} works with {b.lower()} in this plugin, where do I start?")
        elif shape == 1:
            prompts.append(f"Summarize what we know about {rng.choice(titles)} and what to watch out for")
        elif shape == 2:
            prompts.append(f"How do {rng.choice(titles)} and {rng.choice(titles)} relate?")
        else:
            a, b, c = rng.sample(words, 3)
            prompts.append(f"fix the bug where {a.lower()} breaks the {b.lower()} view after {c.lower()}")
    return prompts


def interpreter_floor(runs: int) -> dict[str, float]:
    """``python -c pass``: what any hook process pays before its first import of ours."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return latency_summary(times)


# Sessions are new on every run: a work folder kept from an earlier run holds its sessions, whose
# notes recall would leave out as already shown (empty blocks, cheaper than real ones).
RUN = f"{int(time.time())}-{os.getpid()}"

SERVER = """
import sys, time
from pathlib import Path
from memory_hub.server.run import open_state
state = open_state(Path(sys.argv[1]), watch=True, warm=False)
print("ready", flush=True)
time.sleep(3600)
"""


def latency(args: argparse.Namespace) -> dict[str, Any]:
    src = Path(args.vault_src)
    vault = copy_vault(src, Path(args.work) / src.name)
    t0 = time.perf_counter()
    report = sync(vault, progress=False)
    sync_s = time.perf_counter() - t0
    shutil.rmtree(index_dir(vault) / "recall", ignore_errors=True)
    index = RecallIndex(vault)
    t0 = time.perf_counter()
    index.refresh()
    build_s = time.perf_counter() - t0
    restarts = []
    for _ in range(3):
        t0 = time.perf_counter()
        warm = RecallIndex(vault)
        warm.load()
        warm.refresh()
        restarts.append(time.perf_counter() - t0)
    prompts = make_prompts(index, args.runs)
    notes = len(index.data.notes)

    server = subprocess.Popen([sys.executable, "-c", SERVER, str(vault)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        first, first_request_s = first_recall(vault, 60)
        socket_times, tokens, modes = [], [], {}
        for i, prompt in enumerate(prompts * args.repeat):
            t0 = time.perf_counter()
            reply = local_socket.request(vault, {"op": "recall", "prompt": prompt, "session_id": f"bench-w{RUN}-{i}"},
                                         timeout=10)
            socket_times.append(time.perf_counter() - t0)
            assert reply and reply.get("ok"), reply
            tel = reply["telemetry"]
            tokens.append(tel.get("tokens") or 0)
            modes[tel.get("mode")] = modes.get(tel.get("mode"), 0) + 1
        # The first warm hook of a run takes the full path (it reads the settings and leaves the
        # plan later hooks answer from, hooks/warm.py); it is timed apart. Module and command
        # forms interleave, so both see the same load.
        first_warm, _, first_cpu = hook_process(vault, prompts[0], f"bench-hw{RUN}-first")
        warm_hook, warm_cpu, command_hook, command_cpu = [], [], [], []
        base_wall: list[float] = []
        base_cpu: list[float] = []
        for i, prompt in enumerate(prompts[: args.hook_runs]):
            if args.baseline:  # the same prompt through another checkout's hook, interleaved
                took, out, cpu = hook_process(vault, prompt, f"bench-hb{RUN}-{i}", cwd=Path(args.baseline))
                base_wall.append(took)
                base_cpu.append(cpu)
            took, out, cpu = hook_process(vault, prompt, f"bench-hw{RUN}-{i}")
            warm_hook.append(took)
            warm_cpu.append(cpu)
            took, out, cpu = hook_process(vault, prompt, f"bench-hx{RUN}-{i}", HOOK_COMMAND)
            command_hook.append(took)
            command_cpu.append(cpu)
        floor = interpreter_floor(args.hook_runs)
    finally:
        server.terminate()
        server.wait(10)
    cold_hook, cold_cpu = [], []
    for i, prompt in enumerate(prompts[: args.hook_runs]):
        took, out, cpu = hook_process(vault, prompt, f"bench-hc{RUN}-{i}")
        cold_hook.append(took)
        cold_cpu.append(cpu)
    # A cold hook writes its telemetry line after replying (from a forked child): wait for them all.
    cold_ids = {f"bench-hc{RUN}-{i}" for i in range(len(cold_hook))}
    deadline = time.monotonic() + 30
    while True:
        served = [e.get("served_by") for e in _events(vault) if e.get("session") in cold_ids]
        if len(served) >= len(cold_ids) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return {
        "vault": src.name, "notes": notes, "sync_seconds": round(sync_s, 2), "sync": report.summary(),
        "recall_index_build_s": round(build_s, 2),
        "recall_index_restart_s": round(statistics.median(restarts), 3),
        "first_request_after_start_s": round(first_request_s, 3),
        "recall_index_bytes": index.path.stat().st_size,
        "prompts": len(socket_times), "modes": modes,
        "warm_socket": latency_summary(socket_times),
        "warm_hook_process": latency_summary(warm_hook),
        "warm_hook_process_cpu_ms_p50": round(statistics.median(warm_cpu) * 1000, 1),
        "warm_hook_command": latency_summary(command_hook),
        "warm_hook_command_cpu_ms_p50": round(statistics.median(command_cpu) * 1000, 1),
        "first_warm_hook_full_path": {"wall_ms": round(first_warm * 1000, 1), "cpu_ms": round(first_cpu * 1000, 1)},
        "interpreter_floor": floor,
        **({"baseline": {"checkout": str(args.baseline), "warm_hook_process": latency_summary(base_wall),
                         "cpu_ms_p50": round(statistics.median(base_cpu) * 1000, 1)}} if args.baseline else {}),
        "cold_hook_process": latency_summary(cold_hook),
        "cold_hook_process_cpu_ms_p50": round(statistics.median(cold_cpu) * 1000, 1),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cold_served_by": sorted(set(served)),
        "block_tokens": {"p50": statistics.median(tokens), "max": max(tokens), "budget": BUDGET,
                         "over_budget": sum(1 for t in tokens if t > BUDGET)},
    }


def _events(vault: Path) -> list[dict[str, Any]]:
    from memory_hub.eval.telemetry import events

    return [e for e in events(vault) if e.get("event") == "recall"]


# -- LoCoMo ---------------------------------------------------------------------------------------

def _note_path(doc_id: str) -> str:
    sample, turn = doc_id.split(":", 1)
    return f"{sample}/{turn.replace(':', '-')}.md"


def build_locomo(data: Path, vault: Path) -> dict[str, str]:
    """One note per turn; returns {note path: corpus id}."""
    mapping = {}
    fresh = not vault.exists()
    for doc in read_jsonl(data / "corpus_turns.jsonl"):
        rel = _note_path(doc["_id"])
        mapping[rel] = doc["_id"]
        if fresh:
            path = vault / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = doc["text"].replace("[[", "[ [")
            title = json.dumps(doc["title"], ensure_ascii=False)
            path.write_text(f"---\ntitle: {title}\nkind: knowledge\n---\n\n{text}\n", encoding="utf-8")
    return mapping


def locomo(args: argparse.Namespace) -> dict[str, Any]:
    data = Path(args.data) / "locomo"
    vault = Path(args.work) / "locomo-turns"
    mapping = build_locomo(data, vault)
    sync(vault, progress=False)
    store = Store(vault)
    qrels = load_qrels(data / "qrels" / "turns.tsv")
    queries = [q for q in read_jsonl(data / "queries.jsonl") if q["_id"] in qrels]
    if args.locomo_limit:
        queries = queries[: args.locomo_limit]
    lexical = Recaller(vault, search=RecallSearch(store, "lexical"), refresh_interval=None)
    lexical.refresh()
    recallers = {"lexical": lexical}
    systems = ["search (lexical)", "recall (lexical), k=5", "recall (lexical), as injected"]
    if args.vectors:  # MEMORY_HUB_RECALL_MODE=hybrid: lexical + e5 vectors, models loaded once
        from memory_hub.retrieval.searcher import Searcher

        searcher = Searcher(vault, store=store, mode="hybrid")
        t0 = time.perf_counter()
        searcher.sync_vectors(progress=False)
        print(f"vectors for {len(mapping)} turn notes in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        recallers["hybrid"] = Recaller(vault, search=RecallSearch(store, "hybrid", lambda: (searcher.vectors, None)),
                                       refresh_interval=None)
        recallers["hybrid"].refresh()
        systems += ["search (hybrid)", "recall (hybrid), k=5", "recall (hybrid), as injected"]

    def relevant(qid: str) -> set[str]:
        return {d for d, g in qrels[qid].items() if g > 0}

    def run_system(name: str, prompt: str, prefix: str) -> list[str]:
        mode = name.split("(", 1)[1].split(")", 1)[0]
        if name.startswith("search"):
            if mode == "hybrid":
                return [h.path for h in searcher.search(prompt, k=5, filters=Filters(path_prefix=prefix), mode="hybrid").hits]
            return [h.path for h in search(store, prompt, k=5, filters=Filters(path_prefix=prefix), mode="lexical").hits]
        if name.endswith("k=5"):
            return [n.path for n in recallers[mode].recall(prompt, k=5, prefix=prefix).notes]
        block = recallers[mode].recall(prompt, prefix=prefix).block
        return [e.path for e in block.included] if block else []

    totals: dict[str, dict[str, list[float]]] = {n: {"recall": [], "lines": [], "precision": [], "ms": []} for n in systems}

    def measure(name: str, paths: list[str], qid: str, took: float) -> None:
        rel = relevant(qid)
        got = [mapping.get(p) for p in paths[:5]]
        t = totals[name]
        t["recall"].append(len(rel & set(got)) / len(rel) if rel else 0.0)
        t["lines"].append(len(got))
        if got:
            t["precision"].append(sum(1 for g in got if g in rel) / len(got))
        t["ms"].append(took)

    for q in queries:
        prefix = q["metadata"]["sample_id"] + "/"
        for name in systems:
            t0 = time.perf_counter()
            paths = run_system(name, q["text"], prefix)
            measure(name, paths, q["_id"], time.perf_counter() - t0)
    # The weak-tail cut: what each share of the best hit's evidence keeps (lexical recall, as injected).
    sweep = []
    saved = recall_score.KEEP_TOP, recall_score.TAIL_SHARE
    try:
        for setting in args.tail_settings:
            keep, share = setting.split(":")
            recall_score.KEEP_TOP, recall_score.TAIL_SHARE = int(keep), float(share)
            name = f"as injected, top {keep} kept, then share >= {share}"
            totals[name] = {"recall": [], "lines": [], "precision": [], "ms": []}
            for q in queries:
                t0 = time.perf_counter()
                block = lexical.recall(q["text"], prefix=q["metadata"]["sample_id"] + "/").block
                measure(name, [e.path for e in block.included] if block else [], q["_id"], time.perf_counter() - t0)
            sweep.append(name)
    finally:
        recall_score.KEEP_TOP, recall_score.TAIL_SHARE = saved

    def row(name: str) -> dict[str, Any]:
        t = totals[name]
        return {"system": name, "recall@5": round(statistics.fmean(t["recall"]), 4),
                "lines per prompt": round(statistics.fmean(t["lines"]), 2),
                "precision of lines": round(statistics.fmean(t["precision"]), 4) if t["precision"] else 0.0,
                "empty blocks": sum(1 for n in t["lines"] if n == 0),
                "p50_ms": latency_summary(t["ms"])["p50_ms"], "queries": len(t["recall"])}

    return {"notes": len(mapping), "queries": len(queries), "rows": [row(n) for n in systems],
            "tail_sweep": [row(n) for n in sweep]}


def golden(args: argparse.Namespace) -> list[dict[str, Any]]:
    import yaml

    from memory_hub.config import template_dir

    vault = Path(args.work) / "template-vault"
    if vault.exists():
        shutil.rmtree(vault)
    shutil.copytree(template_dir(), vault)
    sync(vault, progress=False)
    store = Store(vault)
    spec = yaml.safe_load((vault / "memory-hub-eval.yaml").read_text(encoding="utf-8"))
    recaller = Recaller(vault, search=RecallSearch(store, "lexical"), refresh_interval=None)
    rows = []
    for name, fn in (
        ("search (lexical)", lambda q: [h.path for h in search(store, q, k=5, mode="lexical").hits]),
        ("recall, k=5", lambda q: [n.path for n in recaller.recall(q, k=5).notes]),
        ("recall, as injected", lambda q: [e.path for e in (recaller.recall(q).block or Block("", "")).included]),
    ):
        hits = [any(e in fn(c["query"]) for e in c["expect"]) for c in spec["cases"]]
        # recall gives prompts of one or two characters no block, by design (too short to be a prompt)
        long = [h for h, c in zip(hits, spec["cases"], strict=True) if not is_trivial(c["query"])]
        rows.append({"system": name, "hit@5": round(sum(hits) / len(hits), 4), "cases": len(hits),
                     "hit@5 (prompt-length cases)": round(sum(long) / len(long), 4), "prompt-length cases": len(long)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault-src", default=str(DEFAULT_DATA / "vaults" / "obsidian-hub"))
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--work", default="/tmp/memory-hub-bench-recall")
    parser.add_argument("--runs", type=int, default=40, help="distinct prompts for the warm socket")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the prompts (fresh sessions)")
    parser.add_argument("--hook-runs", type=int, default=12, help="hook processes per warm/cold series")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--baseline", default=None,
                        help="another checkout (e.g. a worktree of main): its warm hook process is timed too, "
                             "interleaved with this one's, against the same server")
    parser.add_argument("--skip-locomo", action="store_true")
    parser.add_argument("--locomo-limit", type=int, default=0)
    parser.add_argument("--tail-settings", nargs="*", default=["10:0", "1:0.3", "2:0.3", "3:0.3", "3:0.5"],
                        help="weak-tail cuts to sweep on LoCoMo, KEEP_TOP:TAIL_SHARE (10:0 = no cut)")
    parser.add_argument("--vectors", action="store_true",
                        help="also compare with the lexical+vector hybrid search (embeds the LoCoMo turns first)")
    args = parser.parse_args()
    Path(args.work).mkdir(parents=True, exist_ok=True)
    os.environ.pop("MEMORY_HUB_LLM_URL", None)
    result: dict[str, Any] = {"args": vars(args)}
    if not args.skip_latency:
        lat = latency(args)
        result["latency"] = lat
        print(f"\n## Hook round trip on {lat['vault']} ({lat['notes']} notes)")
        print(f"recall index: build {lat['recall_index_build_s']} s from nothing, warm restart "
              f"{lat['recall_index_restart_s']} s, {lat['recall_index_bytes'] / 1e6:.1f} MB; modes {lat['modes']}")
        cpu = {"warm_hook_process": lat["warm_hook_process_cpu_ms_p50"],
               "warm_hook_command": lat["warm_hook_command_cpu_ms_p50"],
               "cold_hook_process": lat["cold_hook_process_cpu_ms_p50"]}
        print_table([{"path": k, **lat[k], "cpu_p50_ms": cpu.get(k, "")} for k in
                     ("interpreter_floor", "warm_socket", "warm_hook_process", "warm_hook_command", "cold_hook_process")],
                    ["path", "p50_ms", "p95_ms", "max_ms", "n", "cpu_p50_ms"])
        if "baseline" in lat:
            print(f"baseline {lat['baseline']['checkout']}: warm hook process {lat['baseline']['warm_hook_process']}, "
                  f"CPU p50 {lat['baseline']['cpu_ms_p50']} ms")
        print(f"first warm hook of the run (full path, leaves the plan): {lat['first_warm_hook_full_path']}; "
              f"load average {lat['load_average']}")
        print(f"block tokens: p50 {lat['block_tokens']['p50']}, max {lat['block_tokens']['max']} "
              f"(budget {BUDGET}, over budget: {lat['block_tokens']['over_budget']})")
    golden_rows = golden(args)
    result["golden"] = golden_rows
    print("\n## Starter vault golden cases (hit@5)")
    print_table(golden_rows, ["system", "hit@5", "cases", "hit@5 (prompt-length cases)", "prompt-length cases"])
    if not args.skip_locomo:
        loc = locomo(args)
        result["locomo"] = loc
        print(f"\n## LoCoMo evidence recall@5 ({loc['queries']} questions, {loc['notes']} turn notes)")
        cols = ["system", "recall@5", "lines per prompt", "precision of lines", "empty blocks", "p50_ms", "queries"]
        print_table(loc["rows"], cols)
        if loc["tail_sweep"]:
            print("\n## The weak-tail cut (recall, lexical, as injected)")
            print_table(loc["tail_sweep"], cols)
    path = write_result("recall", result)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
