#!/usr/bin/env python3
"""Memory Hub against qmd on obsidian-hub, in one run, interleaved: the ratios the issue asks for.

    export PEERS_ROOT=/tmp/peers      # ../shared/peers/setup-peers.sh filled it (qmd's hub index built)
    .venv/bin/python benchmarks/bench_peers.py $PEERS_ROOT ../shared/data [--work /tmp/mh-peers] [--rounds 3]

What is compared (qmd in keyword mode: BM25 over SQLite FTS5, no models; Memory Hub in its default
mode, hybrid+graph: two BM25 channels, e5 vectors, RRF, calibration, graph expansion):

* **query** — both MCP servers running at once, each of the 30 queries of
  ``../shared/peers/hub-queries.txt`` sent to Memory Hub over stdio, to qmd over stdio, to Memory
  Hub over streamable HTTP, in turn, ``--rounds`` times; p50/p95 of the client-observed round
  trip. Memory Hub's answers carry ``timings_ms`` (its own stages), so the table also says how much
  of a round trip is search and how much is the MCP layer.
* **ready** — spawn → ``initialize`` + ``tools/list`` answered, each server cold, alternately.
* **cold index** — keyword + link index from nothing: ``memory-hub index --no-vectors`` on a fresh
  copy against ``qmd collection add`` into a fresh named index, alternately; wall and CPU time.
* **no-change sync** — ``memory-hub sync`` (lexical, links and vectors checked) as a whole process,
  against ``qmd update`` for reference.

Ratios are Memory Hub ÷ qmd (below 1.0: Memory Hub is faster). The machine is shared: every figure
is measured in the same run, interleaved, and the JSON records the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.common import degraded_lines, percentile, print_table, start_http, write_result  # noqa: E402
from benchmarks.mcp_client import HttpClient, StdioClient, cpu_seconds, rss_mb, structured  # noqa: E402

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
TARGETS = {"query_p50_ratio": 1.0, "query_p95_ratio": 1.0, "ready_s": 0.5, "cold_index_ratio": 1.0,
           "nochange_sync_s": 0.5}


def qmd_env(peers: Path) -> tuple[list[str], dict[str, str]]:
    home = Path(os.environ.get("QMD_HOME", peers / "qmd-home"))
    node_bin = Path(os.environ.get("QMD_NODE_BIN", peers / "node22/node_modules/node/bin"))
    prefix = Path(os.environ.get("QMD_PREFIX", peers / "qmd"))
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config"), "QMD_CONFIG_DIR": str(home / ".config/qmd"), "NO_COLOR": "1",
           "PATH": f"{node_bin}:{os.environ['PATH']}"}
    return [str(node_bin / "node"), str(prefix / "node_modules/@tobilu/qmd/bin/qmd")], env


def run_timed(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> tuple[float, float, str]:
    """Run a process to the end: (wall seconds, CPU seconds of it and its children, stdout)."""
    t0 = time.perf_counter()
    before = os.times()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}… exited {proc.returncode}: {proc.stderr[-800:]}")
    if degraded_lines(proc.stderr):
        raise RuntimeError(f"{' '.join(cmd[:4])}… ran degraded, not timing it: {degraded_lines(proc.stderr)[0]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu, proc.stdout


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(percentile(ms, 95), 2), "n": len(ms)}


def mh_env(xdg: Path) -> dict[str, str]:
    # MEMORY_HUB_STDIO_STAGES: the stdio server says where its time went on each call (stdio.py)
    return {**os.environ, "XDG_DATA_HOME": str(xdg), "MEMORY_HUB_LOG": "warning", "MEMORY_HUB_STDIO_STAGES": "1"}


def stdio_stages(result: dict[str, Any], round_trip_ms: float, into: dict[str, list[float]]) -> None:
    """One stdio call's path, client send -> client has the answer: the server's own marks (read ->
    worker thread, the tool function, encoding its answer), search()'s own total inside the tool, and
    the rest (the pipe both ways, the reply's envelope encoding and write, the client's decoding)."""
    marks = (result.get("_meta") or {}).get("memory-hub/stages_ms")
    if not marks:
        return
    search_total = float((structured(result).get("timings_ms") or {}).get("total", 0))
    parts = {"1 queued (read -> worker thread)": marks["queued"],
             "2 tool, outside search() (arguments, filters, freshness, result dicts)": marks["tool"] - search_total,
             "3 search() itself": search_total,
             "4 encode the answer (JSON text)": marks["encode"],
             "5 pipe, envelope write, client decode": round_trip_ms - marks["queued"] - marks["tool"] - marks["encode"]}
    for k, v in parts.items():
        into.setdefault(k, []).append(v)


def prepare(data: Path, work: Path, xdg: Path) -> Path:
    """A copy of obsidian-hub with every index built (vectors included: hybrid is what is timed)."""
    vault = work / "obsidian-hub"
    if not vault.exists():
        shutil.copytree(data / "vaults" / "obsidian-hub", vault, ignore=shutil.ignore_patterns(".git", ".memory_hub"))
    print(f"indexing {vault} (vectors too: the first time this embeds ~24k chunks)", file=sys.stderr)
    subprocess.run([MEMORY_HUB, "--vault", str(vault), "index"], env=mh_env(xdg), check=True,
                   stdout=subprocess.DEVNULL)
    return vault


def wait_warm(client: Any, deadline_s: float = 300.0) -> None:
    """Until a default-mode search runs hybrid (models loaded, vectors read)."""
    t0 = time.monotonic()
    while True:
        out = structured(client.call("search", {"query": "graph view", "k": 10}))
        warnings = " ".join(out.get("warnings", []))
        if "loading" not in warnings and out.get("mode", "hybrid+graph") != "lexical":
            return
        if time.monotonic() - t0 > deadline_s:
            raise RuntimeError(f"models never became ready: {warnings}")
        time.sleep(0.5)


def start_http_client(vault: Path, xdg: Path) -> tuple[subprocess.Popen, HttpClient]:
    """``common.start_http`` (spawn, wait for /health) plus an MCP client that did the handshake."""
    proc, port, _ = start_http(vault, env=mh_env(xdg))
    client = HttpClient(f"http://127.0.0.1:{port}/mcp")
    client.handshake()
    return proc, client


def measure_queries(vault: Path, xdg: Path, peers: Path, queries: list[str], rounds: int) -> dict[str, Any]:
    qmd_cmd, qenv = qmd_env(peers)
    ours = StdioClient([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"], env=mh_env(xdg))
    qmd = StdioClient([*qmd_cmd, "--index", "hub", "mcp"], env=qenv)
    http_proc, http = start_http_client(vault, xdg)
    try:
        ours.handshake()
        qmd.handshake()
        wait_warm(ours)
        wait_warm(http)
        qmd.call("query", {"searches": [{"type": "lex", "query": queries[0]}], "limit": 10, "rerank": False})
        times: dict[str, list[float]] = {"mh_stdio": [], "qmd_stdio": [], "mh_http": []}
        stages: dict[str, list[float]] = {}
        # the MCP layer: a round trip minus the search's own total (transport, JSON, tool dispatch)
        layer: dict[str, list[float]] = {"mh_stdio": [], "mh_http": []}
        empty = {"mh": 0, "qmd": 0}
        path: dict[str, list[float]] = {}
        cpu0 = {"mh_stdio": cpu_seconds(ours.pid), "mh_http": cpu_seconds(http_proc.pid), "qmd_stdio": cpu_seconds(qmd.pid)}
        for _ in range(rounds):
            for q in queries:
                t = time.perf_counter()
                raw = ours.call("search", {"query": q, "k": 10})
                times["mh_stdio"].append(time.perf_counter() - t)
                res = structured(raw)
                stdio_stages(raw, times["mh_stdio"][-1] * 1000, path)
                for k, v in (res.get("timings_ms") or {}).items():
                    stages.setdefault(k, []).append(float(v))
                layer["mh_stdio"].append(times["mh_stdio"][-1] * 1000 - float((res.get("timings_ms") or {}).get("total", 0)))
                empty["mh"] += not res.get("results")
                t = time.perf_counter()
                qres = qmd.call("query", {"searches": [{"type": "lex", "query": q}], "limit": 10, "rerank": False})
                times["qmd_stdio"].append(time.perf_counter() - t)
                empty["qmd"] += not (qres.get("structuredContent") or {}).get("results")
                t = time.perf_counter()
                hres = structured(http.call("search", {"query": q, "k": 10}))
                times["mh_http"].append(time.perf_counter() - t)
                layer["mh_http"].append(times["mh_http"][-1] * 1000 - float((hres.get("timings_ms") or {}).get("total", 0)))
        calls = rounds * len(queries)
        cpu_ms = {k: round((cpu_seconds(pid) - cpu0[k]) * 1000 / calls, 2) for k, pid in
                  (("mh_stdio", ours.pid), ("mh_http", http_proc.pid), ("qmd_stdio", qmd.pid))}
        rss = {"mh_stdio_mb": rss_mb(ours.pid), "mh_http_mb": rss_mb(http_proc.pid), "qmd_mb": rss_mb(qmd.pid)}
        import httpx

        # how many of the HTTP calls the server answered without FastMCP (server/direct_http.py)
        direct = httpx.get(http.url.rsplit("/mcp", 1)[0] + "/health").json().get("http", {}).get("direct_calls")
    finally:
        ours.close()
        qmd.close()
        http.close()
        http_proc.terminate()
        http_proc.wait(timeout=20)
    out = {name: summary(v) for name, v in times.items()}
    out["stages_p50_ms"] = {k: round(statistics.median(v), 2) for k, v in sorted(stages.items())}
    out["mcp_layer_p50_ms"] = {k: round(statistics.median(v), 2) for k, v in layer.items()}
    out["stdio_path_ms"] = {k: {"p50": round(statistics.median(v), 2), "p95": round(percentile(v, 95), 2)}
                            for k, v in sorted(path.items())}
    out["server_cpu_ms_per_query"] = cpu_ms
    out["empty_results"] = {k: v // rounds for k, v in empty.items()}
    out["rss"] = rss
    out["mh_http_direct_calls"] = direct
    return out


def measure_ready(vault: Path, xdg: Path, peers: Path, repeats: int) -> dict[str, Any]:
    qmd_cmd, qenv = qmd_env(peers)
    samples: dict[str, list[float]] = {"mh": [], "qmd": [], "mh_cpu": []}
    for _ in range(repeats):
        for who in ("mh", "qmd"):
            cmd = [MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"] if who == "mh" \
                else [*qmd_cmd, "--index", "hub", "mcp"]
            client = StdioClient(cmd, env=mh_env(xdg) if who == "mh" else qenv)
            client.handshake()
            samples[who].append(time.perf_counter() - client.spawned)
            if who == "mh":
                samples["mh_cpu"].append(cpu_seconds(client.pid))
            client.close()
    return {k: {"median_s": round(statistics.median(v), 3), "p95_s": round(percentile(v, 95), 3),
                "samples": [round(x, 3) for x in v]} for k, v in samples.items()}


def measure_cold_index(data: Path, work: Path, xdg: Path, peers: Path, repeats: int) -> dict[str, Any]:
    qmd_cmd, qenv = qmd_env(peers)
    source = data / "vaults" / "obsidian-hub"
    qmd_vault = peers / "vaults" / "hub"  # qmd's pristine copy (it never writes into it)
    cache = Path(qenv["XDG_CACHE_HOME"]) / "qmd"
    config = Path(qenv["QMD_CONFIG_DIR"])
    res: dict[str, list[float]] = {"mh_wall": [], "mh_cpu": [], "qmd_wall": [], "qmd_cpu": []}
    for i in range(repeats):
        copy = work / f"cold-{i}"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(".git", ".memory_hub"))
        subprocess.run(["sync"], check=False)
        wall, cpu, _ = run_timed([MEMORY_HUB, "--vault", str(copy), "index", "--no-vectors"], env=mh_env(xdg))
        res["mh_wall"].append(wall)
        res["mh_cpu"].append(cpu)
        shutil.rmtree(copy, ignore_errors=True)
        name = f"mhbench-cold-{os.getpid()}-{i}"
        try:
            wall, cpu, _ = run_timed([*qmd_cmd, "--index", name, "collection", "add", str(qmd_vault), "--name", name],
                                     env=qenv)
            res["qmd_wall"].append(wall)
            res["qmd_cpu"].append(cpu)
        finally:
            for p in [*cache.glob(f"{name}.sqlite*"), config / f"{name}.yml"]:
                p.unlink(missing_ok=True)
    return {k: {"median_s": round(statistics.median(v), 2), "samples": [round(x, 2) for x in v]} for k, v in res.items()}


def measure_sync(vault: Path, xdg: Path, peers: Path, repeats: int) -> dict[str, Any]:
    qmd_cmd, qenv = qmd_env(peers)
    res: dict[str, list[float]] = {"mh_wall": [], "mh_cpu": [], "qmd_wall": [], "qmd_cpu": []}
    run_timed([MEMORY_HUB, "--vault", str(vault), "sync"], env=mh_env(xdg))  # settle (first run after an index)
    for _ in range(repeats):
        wall, cpu, out = run_timed([MEMORY_HUB, "--vault", str(vault), "sync"], env=mh_env(xdg))
        res["mh_wall"].append(wall)
        res["mh_cpu"].append(cpu)
        wall, cpu, _ = run_timed([*qmd_cmd, "--index", "hub", "update"], env=qenv)
        res["qmd_wall"].append(wall)
        res["qmd_cpu"].append(cpu)
    return {k: {"median_s": round(statistics.median(v), 3), "p95_s": round(percentile(v, 95), 3)}
            for k, v in res.items()} | {"last_output": out.strip()[-300:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("peers_root", type=Path, help="$PEERS_ROOT (qmd installed, its 'hub' index built)")
    ap.add_argument("data", type=Path, help="the shared data folder (vaults/obsidian-hub)")
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mh-bench-peers",
                    help="scratch folder; an indexed copy there is reused")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the 30 queries")
    ap.add_argument("--repeats", type=int, default=5, help="start-ups and no-change syncs per system")
    ap.add_argument("--index-repeats", type=int, default=3, help="cold indexes per system")
    ap.add_argument("--skip", default="", help="comma list of parts to skip: query,ready,cold,sync")
    ap.add_argument("--label", default="peers",
                    help="result file name (results/LABEL.json); a partial run (--skip) can keep peers.json whole")
    args = ap.parse_args()
    queries_file = Path(__file__).resolve().parents[2] / "shared" / "peers" / "hub-queries.txt"
    if not queries_file.exists():
        queries_file = args.data.parent / "peers" / "hub-queries.txt"
    queries = [q.strip() for q in queries_file.read_text(encoding="utf-8").splitlines()
               if q.strip() and not q.startswith("#")]
    args.work.mkdir(parents=True, exist_ok=True)
    # byte-compiled once: with PYTHONDONTWRITEBYTECODE set every timed process would recompile its sources
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "memory_hub")], check=False,
                   stdout=subprocess.DEVNULL)
    xdg = args.work / "xdg"
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    vault = prepare(args.data, args.work, xdg)
    result: dict[str, Any] = {"vault": "obsidian-hub", "queries": len(queries), "rounds": args.rounds,
                              "load_before": [round(x, 2) for x in os.getloadavg()]}
    if "query" not in skip:
        result["query"] = measure_queries(vault, xdg, args.peers_root, queries, args.rounds)
    if "ready" not in skip:
        result["ready"] = measure_ready(vault, xdg, args.peers_root, args.repeats)
    if "sync" not in skip:
        result["nochange_sync"] = measure_sync(vault, xdg, args.peers_root, args.repeats)
    if "cold" not in skip:
        result["cold_index"] = measure_cold_index(args.data, args.work, xdg, args.peers_root, args.index_repeats)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]

    ratios: dict[str, float] = {}
    rows = []
    if "query" in result:
        q = result["query"]
        for t in ("mh_stdio", "mh_http"):
            ratios[f"query_p50_ratio_{t}"] = round(q[t]["p50_ms"] / q["qmd_stdio"]["p50_ms"], 3)
            ratios[f"query_p95_ratio_{t}"] = round(q[t]["p95_ms"] / q["qmd_stdio"]["p95_ms"], 3)
        rows += [{"measure": f"query p50 / p95 ms ({t})", "memory-hub": f"{q[t]['p50_ms']} / {q[t]['p95_ms']}",
                  "qmd (BM25)": f"{q['qmd_stdio']['p50_ms']} / {q['qmd_stdio']['p95_ms']}",
                  "ratio": f"{ratios[f'query_p50_ratio_{t}']} / {ratios[f'query_p95_ratio_{t}']}"}
                 for t in ("mh_stdio", "mh_http")]
    if "ready" in result:
        r = result["ready"]
        ratios["ready_ratio"] = round(r["mh"]["median_s"] / r["qmd"]["median_s"], 3)
        rows.append({"measure": "ready s (spawn → initialize + tools/list)", "memory-hub": r["mh"]["median_s"],
                     "qmd (BM25)": r["qmd"]["median_s"], "ratio": ratios["ready_ratio"]})
    if "cold_index" in result:
        c = result["cold_index"]
        ratios["cold_index_ratio"] = round(c["mh_wall"]["median_s"] / c["qmd_wall"]["median_s"], 3)
        ratios["cold_index_cpu_ratio"] = round(c["mh_cpu"]["median_s"] / c["qmd_cpu"]["median_s"], 3)
        rows.append({"measure": "cold keyword+link index s (wall; cpu)",
                     "memory-hub": f"{c['mh_wall']['median_s']}; {c['mh_cpu']['median_s']}",
                     "qmd (BM25)": f"{c['qmd_wall']['median_s']}; {c['qmd_cpu']['median_s']}",
                     "ratio": f"{ratios['cold_index_ratio']}; {ratios['cold_index_cpu_ratio']}"})
    if "nochange_sync" in result:
        s = result["nochange_sync"]
        rows.append({"measure": "no-change sync process s (wall; cpu)",
                     "memory-hub": f"{s['mh_wall']['median_s']}; {s['mh_cpu']['median_s']}",
                     "qmd (BM25)": f"{s['qmd_wall']['median_s']}; {s['qmd_cpu']['median_s']}",
                     "ratio": round(s["mh_wall"]["median_s"] / s["qmd_wall"]["median_s"], 3)})
    result["ratios"] = ratios
    print_table(rows, ["measure", "memory-hub", "qmd (BM25)", "ratio"])
    if "query" in result:
        print("memory-hub stages (p50 ms, inside search):", result["query"]["stages_p50_ms"])
        print("MCP layer (p50 ms, round trip minus the search's total):", result["query"]["mcp_layer_p50_ms"])
        print("server CPU per query (ms):", result["query"]["server_cpu_ms_per_query"])
        print("\nstdio search, client send -> answer, by stage (ms):")
        print_table([{"stage": k, **v} for k, v in result["query"]["stdio_path_ms"].items()], ["stage", "p50", "p95"])
    result["command"] = "python benchmarks/bench_peers.py " + " ".join(sys.argv[1:])
    path = write_result(args.label, result)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
