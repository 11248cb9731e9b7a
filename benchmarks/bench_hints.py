"""What same-turn hints cost per prompt, and (with a real model) what they add.

    python benchmarks/bench_hints.py [--vault VAULT] [--cases benchmarks/natural_questions/*.yaml]
                                     [--llm-url http://127.0.0.1:8080/v1] [--delays 0 0.3 1.5]

Every prompt runs through ``hooks.prompt.answer`` (the code path both hook paths use), first with
no endpoint, then against a loopback stand-in speaking the OpenAI chat API that answers after a
fixed delay (the prompt's three rarest words as its "terms": a cost probe, not a model), with the
default hint deadline (``MEMORY_HUB_HINT_DEADLINE``, 1 s). Reported per setting: recall latency
p50/p95, which hint path served, lines injected. With ``--llm-url`` (a real local model, e.g.
``llama-server -m SmolLM2-135M-Instruct.Q4_1.gguf --port 8080``) it also scores hit@5 of the
injected notes against the cases' expected paths, with and without hints.

Cases: ``memory-hub eval`` YAML (``cases: [{query, expect: [paths]}]``); the vault defaults to a
copy of the starter vault (``../shared`` and the vault are never written: a copy under --work).
Writes ``benchmarks/results/hints.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import latency_summary, print_table, write_result  # noqa: E402

from memory_hub.config import INDEX_DIRNAME, template_dir  # noqa: E402
from memory_hub.hooks.prompt import answer  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.retrieval.recall import Recaller  # noqa: E402
from memory_hub.retrieval.recall_index import query_terms  # noqa: E402


def stand_in(delay: float, df: Callable[[list[str]], dict[str, int]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            prompt = body["messages"][-1]["content"]
            counts = df(query_terms(prompt))
            terms = sorted((t for t, n in counts.items() if n), key=lambda t: counts[t])[:3]
            time.sleep(delay)
            data = json.dumps({"choices": [{"message": {"role": "assistant",
                                                        "content": json.dumps({"terms": terms})}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


def load_cases(paths: list[str], vault: Path) -> list[dict[str, Any]]:
    import yaml

    files = [Path(p) for p in paths] or [vault / "memory-hub-eval.yaml"]
    cases = []
    for f in files:
        spec = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        cases += [c for c in spec.get("cases", []) if isinstance(c.get("query"), str)]
    return cases


def run(recaller: Recaller, cases: list[dict[str, Any]], label: str) -> dict[str, Any]:
    times, paths, lines, hits = [], {}, [], []
    for i, case in enumerate(cases):
        t0 = time.perf_counter()
        out = answer(recaller, case["query"], f"bench-{label}-{i}", served_by="bench")
        times.append(time.perf_counter() - t0)
        path = out["telemetry"].get("hint_path")
        paths[path] = paths.get(path, 0) + 1
        lines.append(len(out["injected"]))
        if case.get("expect"):
            hits.append(any(e in out["injected"] for e in case["expect"]))
    return {"setting": label, **latency_summary(times), "paths": paths,
            "lines per prompt": round(statistics.fmean(lines), 2),
            "hit@injected": round(sum(hits) / len(hits), 4) if hits else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", help="a vault to copy (default: the starter vault)")
    parser.add_argument("--cases", nargs="*", default=[])
    parser.add_argument("--work", default="/tmp/memory-hub-bench-hints")
    parser.add_argument("--delays", type=float, nargs="*", default=[0.0, 0.3, 1.5])
    parser.add_argument("--llm-url", help="a real OpenAI-compatible endpoint to measure quality with")
    args = parser.parse_args()
    src = Path(args.vault) if args.vault else template_dir()
    vault = Path(args.work) / "vault"
    if vault.exists():
        shutil.rmtree(vault)
    shutil.copytree(src, vault, ignore=shutil.ignore_patterns(INDEX_DIRNAME))
    sync(vault, progress=False)
    cases = load_cases(args.cases, vault)
    recaller = Recaller(vault, refresh_interval=None)
    recaller.refresh()
    os.environ.pop("MEMORY_HUB_LLM_URL", None)
    run(recaller, cases, "warm-up")  # first searches load SQLite pages and the tokenizer: not what a hint costs
    rows = [run(recaller, cases, "no endpoint")]
    for delay in args.delays:
        server = stand_in(delay, recaller.index.df)
        os.environ["MEMORY_HUB_LLM_URL"] = f"http://127.0.0.1:{server.server_address[1]}/v1"
        try:
            rows.append(run(recaller, cases, f"stand-in, answers after {delay:g} s"))
        finally:
            server.shutdown()
            server.server_close()
    if args.llm_url:
        os.environ["MEMORY_HUB_LLM_URL"] = args.llm_url
        rows.append(run(recaller, cases, f"model at {args.llm_url}"))
    os.environ.pop("MEMORY_HUB_LLM_URL", None)
    print(f"\n## Same-turn hints: {len(cases)} prompts on {src.name} (hint deadline "
          f"{os.environ.get('MEMORY_HUB_HINT_DEADLINE', '1')} s)")
    print_table(rows, ["setting", "p50_ms", "p95_ms", "max_ms", "paths", "lines per prompt", "hit@injected"])
    path = write_result("hints", {"args": vars(args), "cases": len(cases), "rows": rows})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
