"""What each stage costs as the vault grows: 1k, 10k, 30k notes (100k with ``--sizes``).

    python benchmarks/bench_scale.py DATA_DIR [--vaults /tmp/scale-vaults] [--sizes 1k,10k,30k]
                                     [--vectors-up-to 30k] [--repeats 5] [--rounds 3]
                                     [--stages cold,vectors,sync,edit,status,server] [--merge]

``--stages`` runs some stages only (without ``cold`` the vault's index is kept as it is, so a long
size can be measured in parts, or again on new code without its hour-long cold index); ``--merge``
updates the rows of an existing ``--out`` JSON (same ``notes``) instead of replacing the file. Each
row records the load average as each stage began (``load``), since the machine is shared.

Vaults come from ``scale_vault.py`` (made under ``--vaults`` when missing; never committed). Every
figure is a real process or a real MCP client against a real ``memory-hub serve --transport stdio``:

* ``cold_lexical_s``: ``memory-hub index --no-vectors`` from no index (lexical + links + recall);
* vectors: ``memory-hub vectors`` with the **stand-in embedder** (``standin_embedder.py``: e5's
  tokenizer and chunking, hashed-token vectors ~100× cheaper), so the vector index's *cost* (rows,
  disk, search, memory) is measured at sizes where e5 would take hours; quality is never measured
  with it (ANN recall and nDCG: ``bench_ann.py``, real e5 on SciFact);
* ``nochange_sync_s``: a ``memory-hub sync`` process with nothing to do (median, p95 of repeats);
* ``edit_to_searchable_s``: one note edited, then a ``memory-hub sync`` process and an in-process
  lexical ``search`` process, until the new word is found (whole processes: imports and model load
  included); ``watcher_edit_to_searchable_s``: the same edit seen by a running server, its watcher's
  one-file sync, polled through MCP ``search`` (the issue's target);
* over MCP stdio: ready, idle RSS, hybrid+graph p50/p95 (the 30 ``hub-queries.txt``, ``--rounds``
  rounds), lexical p95 with and without a folder filter, serving RSS after the queries;
* ``status`` and ``vectors --coverage`` processes; the index's size on disk.

Writes ``benchmarks/results/scale.json`` in the issue's shape (more keys welcome) and
``benchmarks/results/scale.png`` (log axes, each cost against vault size). The machine is shared:
every figure is under load unless the JSON says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import (  # noqa: E402
    HOOK_COMMAND,
    degraded_lines,
    first_recall,
    hook_process,
    machine,
    print_table,
    run_timed,
    spread,
    write_result,
)
from benchmarks.mcp_client import StdioClient, memory_split, rss_mb, structured  # noqa: E402

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
STAGES = ("cold", "vectors", "sync", "edit", "status", "server", "fresh", "hook")
SIZES = {"1k": 1_000, "10k": 10_000, "30k": 30_000, "100k": 100_000, "300k": 300_000}
PLOTTED = [("cold_lexical_s", "cold lexical+graph index (s)"), ("nochange_sync_s", "no-change sync (s)"),
           ("watcher_edit_to_searchable_s", "one edit searchable, watcher (s)"), ("hybrid_graph_p50_ms", "hybrid+graph p50 (ms)"),
           ("lexical_p95_ms", "lexical p95 (ms)"), ("serving_rss_mb", "serving RSS (MB)"),
           ("index_disk_mb", "index on disk (MB)")]


def code_version() -> str:
    """The commit the measured code is (a stage of a merged row may come from another run);
    ``$BENCH_CODE_VERSION`` names it when the code runs from an exported copy."""
    if os.environ.get("BENCH_CODE_VERSION"):
        return os.environ["BENCH_CODE_VERSION"]
    try:
        out = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def size_of(label: str) -> int:
    return SIZES[label] if label in SIZES else int(label)


def env_for(xdg: Path, standin: Path | None) -> dict[str, str]:
    env = {**os.environ, "XDG_DATA_HOME": str(xdg), "MEMORY_HUB_LOG": "warning"}
    if standin is not None:
        env["MEMORY_HUB_EMBEDDER"] = str(standin)
    return env


CPU: dict[str, float] = {}  # CPU seconds of the last process per label: wall time under load says little
STDERR: dict[str, str] = {}  # what the last process per label wrote to stderr


def timed(cmd: list[str], env: dict[str, str], label: str | None = None) -> tuple[float, str]:
    proc, wall, cpu = run_timed(cmd, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[3:6])} exited {proc.returncode}: {proc.stderr[-600:]}")
    if label:
        CPU[label] = round(cpu, 2)
        STDERR[label] = proc.stderr
    return wall, proc.stdout


QUERY_KINDS = ("hybrid_graph", "lexical", "lexical_filtered")


def checked(answer: dict[str, Any]) -> dict[str, Any]:
    """A tools/call answer, or an error: an error's time is no query's time (a fresh server's hybrid
    searches once all failed on a half-imported LanceDB, and were timed as fast queries)."""
    if answer.get("isError"):
        raise RuntimeError(f"search failed: {str(answer.get('content'))[:300]}")
    return answer


def hub_queries(data: Path) -> list[str]:
    """The peers' 30 obsidian-hub queries (``../shared/peers/hub-queries.txt`` beside ``data``), or a
    few stand-ins when that folder is absent."""
    path = data.parent / "peers" / "hub-queries.txt"
    if not path.exists():
        return ["graph view", "daily notes template", "sync plugin", "canvas", "dataview query"]
    return [q.strip() for q in path.read_text().splitlines() if q.strip()]


def wait_for_vectors(client: StdioClient, query: str, mode: str = "hybrid+graph", limit_s: float = 300.0) -> None:
    """Search until the answer no longer says the models are loading (the vectors are read)."""
    t0 = time.monotonic()
    while True:
        out = structured(checked(client.call("search", {"query": query, "k": 5, "mode": mode})))
        if not any("loading" in w for w in out.get("warnings", [])) or time.monotonic() - t0 > limit_s:
            return
        time.sleep(0.5)


def time_queries(client: StdioClient, queries: list[str], rounds: int, prefix: str, mode: str = "hybrid+graph",
                 before_each: Any = None) -> dict[str, list[float]]:
    """Seconds of each query, ``rounds`` times, in the three kinds (``QUERY_KINDS``): ``mode``, lexical,
    and lexical inside the folder ``prefix``; ``k`` = 5. ``before_each()``, when given, runs untimed
    before every call."""
    timings: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
    for _ in range(rounds):
        for q in queries:
            for key, args in zip(QUERY_KINDS, ({"mode": mode}, {"mode": "lexical"},
                                               {"mode": "lexical", "path_prefix": prefix}), strict=True):
                if before_each is not None:
                    before_each()
                t1 = time.perf_counter()
                answer = client.call("search", {"query": q, "k": 5, **args})
                timings[key].append(time.perf_counter() - t1)
                checked(answer)
    return timings


def disk_mb(folder: Path) -> float:
    return round(sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20, 1)


def measure_server(vault: Path, env: dict[str, str], queries: list[str], rounds: int, prefix: str,
                   vectors: bool) -> dict[str, Any]:
    client = StdioClient([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"], env=env)
    try:
        client.handshake()
        ready_s = time.perf_counter() - client.spawned
        time.sleep(1.0)
        idle = rss_mb(client.pid)
        mode = "hybrid+graph" if vectors else "lexical"
        if vectors:
            wait_for_vectors(client, queries[0], mode)
        timings = time_queries(client, queries, rounds, prefix, mode)
        split = memory_split(client.pid)
        serving = split.get("rss_mb", 0.0)
        watcher = edit_through_watcher(client, vault)
        watcher_vec = edit_through_watcher(client, vault, mode="vector") if vectors else None
    finally:
        client.close()
    return {"ready_s": round(ready_s, 3), "idle_rss_mb": round(idle, 1), "serving_rss_mb": round(serving, 1),
            "serving_memory": split, "query_mode": mode, **{f"{k}_ms": spread(v, 1000, 2) for k, v in timings.items()},
            "watcher_edit_to_searchable": spread(watcher) if watcher else None,
            "watcher_edit_to_vector_searchable": spread(watcher_vec) if watcher_vec else None}


def fresh_server(vault: Path, env: dict[str, str], queries: list[str], mode: str, n: int = 5,
                 settle_s: float = 0.0) -> dict[str, Any]:
    """The first ``n`` queries of a freshly started server, each timed apart (a new agent session's
    first searches), with the RSS after each: what the start-up catch-up and warm-up leave to the
    first callers. ``settle_s`` waits after the handshake (0: the agent asks at once)."""
    client = StdioClient([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"], env=env)
    try:
        client.handshake()
        ready_s = time.perf_counter() - client.spawned
        if settle_s:
            time.sleep(settle_s)
        times, rss, warnings = [], [], []
        for q in queries[:n]:
            t1 = time.perf_counter()
            answer = client.call("search", {"query": q, "k": 5, "mode": mode})
            times.append(round((time.perf_counter() - t1) * 1000, 1))
            out = structured(checked(answer))
            rss.append(round(rss_mb(client.pid), 1))
            warnings.append(out.get("warnings", []))
    finally:
        client.close()
    return {"mode": mode, "settle_s": settle_s, "ready_s": round(ready_s, 3), "query_ms": times, "rss_mb": rss,
            "warnings": warnings}


def hook_recall(vault: Path, env: dict[str, str], queries: list[str], rounds: int) -> dict[str, Any]:
    """Warm hook recall as agents run it: a running ``serve`` (its hooks socket), then whole
    ``memory-hub --vault V hook claude-code`` processes fed a UserPromptSubmit event (interpreter
    start included), and the socket round trip alone (what the hook process waits for)."""
    from memory_hub.server import local_socket

    vault = vault.resolve()  # the socket is named after the vault's real path, as the server opens it
    client = StdioClient([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "stdio"], env=env)
    run = f"{int(time.time())}-{os.getpid()}"
    prompts = [f"how does {q} work in my notes?" for q in queries]
    try:
        client.handshake()
        t0 = time.perf_counter()
        first_recall(vault, 120)  # the socket opens after the handshake
        first_s = time.perf_counter() - t0  # with the retries: how long the first prompt waits
        sock, hook, hook_cpu, modes = [], [], [], {}
        for r in range(rounds):
            for i, prompt in enumerate(prompts):
                t1 = time.perf_counter()
                reply = local_socket.request(vault, {"op": "recall", "prompt": prompt,
                                                     "session_id": f"scale-s{run}-{r}-{i}"}, timeout=30)
                sock.append(time.perf_counter() - t1)
                assert reply and reply.get("ok"), reply
                mode = reply["telemetry"].get("mode")
                modes[mode] = modes.get(mode, 0) + 1
                wall, _, cpu = hook_process(vault, prompt, f"scale-h{run}-{r}-{i}", HOOK_COMMAND, env=env, check=True)
                hook.append(wall)
                hook_cpu.append(cpu)
        serving = rss_mb(client.pid)
    finally:
        client.close()
    return {"hook_first_socket_request_s": round(first_s, 3), "hook_socket_ms": spread(sock, 1000, 2),
            "hook_process_ms": spread(hook, 1000, 1), "hook_process_cpu_ms": spread(hook_cpu, 1000, 1),
            "hook_recall_modes": modes, "hook_server_rss_mb": round(serving, 1)}


def edit_target(vault: Path) -> Path:
    """The note the edit figures change: a ranked one (a template or a daily note is never returned)."""
    concepts = vault / "05 - Concepts"
    return sorted(concepts.rglob("*.md"))[0] if concepts.is_dir() else sorted(vault.rglob("*.md"))[0]


def _paragraph(seed: str, words: int = 40) -> str:
    """A paragraph of made-up words no note holds (its vector points nowhere else)."""
    import hashlib

    out = []
    for i in range(words):
        h = hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()
        out.append("".join(chr(ord("a") + int(c, 16) % 26) for c in h[:8]))
    return " ".join(out)


def edit_through_watcher(client: StdioClient, vault: Path, edits: int = 3, deadline_s: float = 60.0,
                         mode: str = "lexical") -> list[float]:
    """Seconds from writing new text into a note until the running server's ``search`` finds it:
    the watcher's one-file sync, as an agent sees it. ``mode`` "lexical": a new word, found by a
    lexical search; "vector": a new paragraph of made-up words, found when a vector-only search for
    it returns the note with that paragraph as its passage (re-embedded, the table re-read)."""
    note = edit_target(vault)
    rel = note.relative_to(vault).as_posix()
    original = note.read_bytes()
    out: list[float] = []

    def found(text: str) -> bool:
        hits = structured(client.call("search", {"query": text, "k": 3, "mode": mode})).get("results") or []
        if mode == "lexical":
            return bool(hits)
        first = text.split()[0]  # the new passage itself: the note's best passage is the new one
        return any(h.get("path") == rel and first in (h.get("snippet") or "") for h in hits)

    try:
        for i in range(edits):
            word = f"zqwatch{i}x{int(time.time())}"
            text = word if mode == "lexical" else _paragraph(word)
            assert not found(text), "the note answers the new text before the edit"
            note.write_bytes(original + f"\n\n{text}\n".encode())
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < deadline_s:
                if found(text):
                    out.append(time.perf_counter() - t0)
                    break
                time.sleep(0.05)
            time.sleep(0.5 if mode == "lexical" else 3.0)  # vectors: let the fold-in after the sync finish
    finally:
        note.write_bytes(original)
    return out


def one_size(label: str, args: argparse.Namespace, queries: list[str], standin: Path | None) -> dict[str, Any]:
    n = size_of(label)
    vault = args.vaults / f"notes-{n}"
    if not (vault / ".scale-manifest.json").exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "scale_vault.py"), str(args.data), str(args.vaults),
                        "--sizes", str(n)], check=True)
    xdg = args.vaults / ".xdg"
    with_vectors = (standin is not None or args.e5) and n <= size_of(args.vectors_up_to)
    env = env_for(xdg, standin if with_vectors and not args.e5 else None)
    if args.e5:
        env.pop("MEMORY_HUB_EMBEDDER", None)  # the real model, whatever the calling shell says
    stages = set(args.stages.split(","))
    kind = "e5 (multilingual-e5-small, real vectors)" if args.e5 else "stand-in embedder"
    row: dict[str, Any] = {"notes": n, "vectors": kind if with_vectors else "none (lexical only)",
                           "load_before": [round(x, 2) for x in os.getloadavg()], "load": {}, "code": {},
                           "stages": sorted(stages)}

    def stage(name: str) -> bool:
        if name in stages:
            row["load"][name] = [round(x, 2) for x in os.getloadavg()]
            row["code"][name] = code_version()
            print(f"   {name} (load {row['load'][name][0]})", file=sys.stderr, flush=True)
        return name in stages

    print(f"== {n} notes", file=sys.stderr, flush=True)
    if stage("cold"):
        # One sample of a minute-long build says little on a shared machine: --cold-repeats builds
        # it again from nothing and reports the median, with every run kept. A run whose parse
        # workers failed is recorded and announced (``common.degraded_lines``), never silently timed.
        walls, cpus = [], []
        for _ in range(max(1, args.cold_repeats)):
            shutil.rmtree(vault / ".memory_hub", ignore_errors=True)
            cold, _ = timed([MEMORY_HUB, "--vault", str(vault), "index", "--no-vectors"], env, "cold_lexical")
            walls.append(round(cold, 2))
            cpus.append(round(CPU["cold_lexical"], 2))
            said = degraded_lines(STDERR["cold_lexical"])
            if said:
                row.setdefault("cold_lexical_degraded", []).extend(said)
                print(f"   WARNING: the cold index ran degraded: {said[0]}", file=sys.stderr)
        row["cold_lexical_s"] = round(statistics.median(walls), 2)
        row["cold_lexical_cpu_s"] = round(statistics.median(cpus), 2)
        if len(walls) > 1:
            row["cold_lexical_runs_s"] = walls
            row["cold_lexical_runs_cpu_s"] = cpus
    elif not (vault / ".memory_hub" / "index.sqlite3").exists():
        raise SystemExit(f"{vault} has no index: run the cold stage first")
    if with_vectors and stage("vectors"):
        wall, out = timed([MEMORY_HUB, "--vault", str(vault), "--json", "vectors"], env, "vectors")
        report = json.loads(out)
        report = {**report.get("vectors", {}), **report}  # `vectors --json` nests the sync's report
        row["vectors_s"] = round(wall, 2)
        row["vectors_cpu_s"] = CPU["vectors"]
        row["vectors_report"] = {k: report.get(k) for k in ("chunks_embedded", "chunks_per_second", "embed_seconds",
                                                             "seconds", "ann") if k in report}
        if report.get("chunks_embedded"):  # rows a second of the whole process (chunking, writes, ANN included)
            row["vectors_rows_per_s"] = round(report["chunks_embedded"] / wall, 1)
    sync_stages(row, vault, env, args, n, with_vectors, stage)
    if stage("server"):
        top = sorted(p.name for p in vault.iterdir() if p.is_dir() and not p.name.startswith("."))[0]
        server = measure_server(vault, env, queries, args.rounds, top, with_vectors)
        row.update(server)
        row["watcher_edit_to_searchable_s"] = (server["watcher_edit_to_searchable"] or {}).get("median")
        row["watcher_edit_to_vector_searchable_s"] = (server["watcher_edit_to_vector_searchable"] or {}).get("median")
        row["hybrid_graph_p50_ms"] = server["hybrid_graph_ms"]["median"]
        row["hybrid_graph_p95_ms"] = server["hybrid_graph_ms"]["p95"]
        row["lexical_p95_ms"] = server["lexical_ms"]["p95"]
        row["lexical_filtered_p95_ms"] = server["lexical_filtered_ms"]["p95"]
    if stage("fresh"):
        mode = "hybrid+graph" if with_vectors else "lexical"
        row["fresh_server"] = [fresh_server(vault, env, queries, mode) for _ in range(args.repeats)]
        firsts = [f["query_ms"] for f in row["fresh_server"]]
        row["fresh_first_query_ms"] = spread([f[0] for f in firsts], 1, 1)
        row["fresh_second_query_ms"] = spread([f[1] for f in firsts], 1, 1)
        row["fresh_fifth_query_ms"] = spread([f[4] for f in firsts if len(f) > 4], 1, 1)
    if stage("hook"):
        row.update(hook_recall(vault, env, queries, args.rounds))
        row["hook_p95_ms"] = row["hook_process_ms"]["p95"]
        row["hook_p50_ms"] = row["hook_process_ms"]["median"]
    if stage("status"):
        row.update(recall_restart(vault, env))
    row.update(disk_parts(vault / ".memory_hub"))
    import sqlite3

    with sqlite3.connect(vault / ".memory_hub" / "index.sqlite3") as conn:
        row["chunks"] = None
        if with_vectors and stages & {"vectors", "server"}:  # a cold-only run has no vectors to count
            from memory_hub.index.embed.loader import load_embedder
            from memory_hub.index.store import Store
            from memory_hub.index.vectors import VectorIndex

            vi = VectorIndex(vault, load_embedder(None if args.e5 else str(standin)))
            row["chunks"] = vi.size(Store(vault))
            row["ann_path"] = vi.uses_ann(Store(vault))
        row["links"] = conn.execute("SELECT count(*) FROM links").fetchone()[0]
    row["ann_recall_at_100"] = None  # measured on real e5 vectors, not per size: results/ann.json
    row.setdefault("hook_p95_ms", None)  # the hook stage measures it
    row["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


_RECALL_LOAD = """import json, resource, sys, time
from pathlib import Path
from memory_hub.retrieval.recall_index import RecallIndex
t, c = time.perf_counter(), time.process_time()
index = RecallIndex(Path(sys.argv[1]))
ok = index.load()
print(json.dumps({"ok": ok, "notes": len(index.data.notes), "s": time.perf_counter() - t, "cpu": time.process_time() - c}))
"""


def recall_restart(vault: Path, env: dict[str, str]) -> dict[str, Any]:
    """Recall's index read back by a fresh process (its warm restart; the issue's target is 1 s)."""
    out = subprocess.run([sys.executable, "-c", _RECALL_LOAD, str(vault)], capture_output=True, text=True, env=env,
                         timeout=600)
    try:
        got = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"recall_warm_restart_s": None, "recall_warm_restart_error": out.stderr[-300:]}
    if not got["ok"]:
        return {"recall_warm_restart_s": None, "recall_warm_restart_error": "no saved recall index"}
    return {"recall_warm_restart_s": round(got["s"], 2), "recall_warm_restart_cpu_s": round(got["cpu"], 2)}


def disk_parts(index: Path) -> dict[str, Any]:
    """The index's size on disk, and what takes it: SQLite tables (``dbstat``), vectors, recall."""
    out: dict[str, Any] = {"index_disk_mb": disk_mb(index)}
    parts = {p.name: disk_mb(p) if p.is_dir() else round(p.stat().st_size / 2**20, 1)
             for p in index.iterdir() if not p.name.endswith(".lock")}
    import sqlite3

    try:
        with sqlite3.connect(f"file:{index / 'index.sqlite3'}?mode=ro", uri=True) as conn:
            rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
        tables: dict[str, float] = {}
        for name, size in rows:  # an FTS5 table is five shadow tables: count them as one
            base = next((t for t in ("fts_trigram", "fts_words") if name.startswith(t)), name)
            tables[base] = round(tables.get(base, 0) + size / 2**20, 1)
        parts["sqlite_tables_mb"] = dict(sorted(tables.items(), key=lambda kv: -kv[1])[:6])
    except sqlite3.Error as exc:  # dbstat is a compile-time option of SQLite
        parts["sqlite_tables_mb"] = f"unavailable: {exc}"
    out["index_disk_parts_mb"] = parts
    return out


def sync_stages(row: dict[str, Any], vault: Path, env: dict[str, str], args: argparse.Namespace, n: int,
                with_vectors: bool, stage: Any) -> None:
    """No-change sync, one edit through ``sync`` + ``search`` processes, ``status`` and coverage."""
    if stage("sync"):
        nochange_sync(row, vault, env, args)
    if stage("edit"):
        one_edit(row, vault, env, n)
    if stage("status"):
        row["status_s"] = round(timed([MEMORY_HUB, "--vault", str(vault), "--json", "status"], env, "status")[0], 2)
        row["status_cpu_s"] = CPU["status"]
        if with_vectors:
            row["coverage_s"] = round(timed([MEMORY_HUB, "--vault", str(vault), "vectors", "--coverage"], env,
                                            "coverage")[0], 2)
            row["coverage_cpu_s"] = CPU["coverage"]


def nochange_sync(row: dict[str, Any], vault: Path, env: dict[str, str], args: argparse.Namespace) -> None:
    timed([MEMORY_HUB, "--vault", str(vault), "sync"], env)  # whatever an earlier stage left, done first
    syncs, cpu = [], []
    for _ in range(args.repeats):
        syncs.append(timed([MEMORY_HUB, "--vault", str(vault), "sync"], env, "sync")[0])
        cpu.append(CPU["sync"])
    row["nochange_sync"] = spread(syncs)
    row["nochange_sync_cpu_s"] = spread(cpu)
    row["nochange_sync_s"] = row["nochange_sync"]["median"]


def one_edit(row: dict[str, Any], vault: Path, env: dict[str, str], n: int) -> None:
    note = edit_target(vault)
    original = note.read_bytes()
    edits, edit_cpu = [], []
    try:
        for i in range(3):
            word = f"zqscale{n}x{i}x{int(time.time())}"
            note.write_bytes(original + f"\n\n{word}\n".encode())
            t0 = time.perf_counter()
            timed([MEMORY_HUB, "--vault", str(vault), "sync"], env, "edit_sync")
            _, out = timed([MEMORY_HUB, "--vault", str(vault), "--json", "search", word, "--mode", "lexical",
                            "--in-process"], env, "edit_search")
            edits.append(time.perf_counter() - t0)
            edit_cpu.append(CPU["edit_sync"] + CPU["edit_search"])
            assert json.loads(out)["results"], f"{word} not searchable after sync"
    finally:
        note.write_bytes(original)
        timed([MEMORY_HUB, "--vault", str(vault), "sync"], env)
    row["edit_to_searchable"] = spread(edits)
    row["edit_to_searchable_cpu_s"] = spread(edit_cpu)
    row["edit_to_searchable_s"] = row["edit_to_searchable"]["median"]


def plot(rows: list[dict[str, Any]], path: Path) -> bool:
    """Draw the curves to ``path``; False (and a word on stderr) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:  # the JSON is written already; say so rather than lose the run's table
        print(f"plot skipped: matplotlib is not installed ({path.name} not drawn; "
              "`.venv/bin/pip install matplotlib` to draw it)", file=sys.stderr)
        return False

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    rows = sorted(rows, key=lambda r: r["notes"])
    xs = [r["notes"] for r in rows]
    with_model = ("hybrid_graph_p50_ms", "serving_rss_mb")  # a lexical-only row measured neither
    for key, label in PLOTTED:
        pts = [(x, r.get(key)) for x, r in zip(xs, rows, strict=True) if r.get(key)
               and not (key in with_model and str(r.get("vectors", "")).startswith("none"))]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("notes in the vault")
    ax.set_ylabel("cost (unit in the legend)")
    loads = [load[0] for r in rows for load in (r.get("load") or {}).values() if load]
    span = f"load {min(loads):.1f}–{max(loads):.1f}" if loads else "load not recorded"
    ax.set_title(f"memory-hub: cost against vault size ({span}, stand-in vectors)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the shared data folder")
    ap.add_argument("--vaults", type=Path, default=Path("/tmp/scale-vaults"))
    ap.add_argument("--sizes", default="1k,10k,30k")
    ap.add_argument("--vectors-up-to", default="30k", help="largest size embedded (with the stand-in embedder)")
    ap.add_argument("--standin", type=Path, default=Path("/tmp/standin-embedder"),
                    help="the stand-in embedder's folder (built there when missing)")
    ap.add_argument("--out", default="scale", help="result name under benchmarks/results/ (.json and .png)")
    ap.add_argument("--no-vectors", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold-repeats", type=int, default=1,
                    help="cold lexical builds per size (the median is reported, every run kept)")
    ap.add_argument("--e5", action="store_true",
                    help="vectors by the real e5 model instead of the stand-in (an hour of both cores per 100k notes "
                    "to embed; quality and ANN recall then mean something)")
    ap.add_argument("--stages", default=",".join(STAGES),
                    help=f"comma-separated, of {','.join(STAGES)} (without cold, the existing index is measured)")
    ap.add_argument("--merge", action="store_true",
                    help="update the rows (by notes) of the existing --out JSON instead of replacing it")
    args = ap.parse_args()
    unknown = set(args.stages.split(",")) - set(STAGES)
    if unknown:
        ap.error(f"unknown stages: {', '.join(sorted(unknown))}")
    # Byte-compile the package once: with PYTHONDONTWRITEBYTECODE set (as on the shared machine) every
    # timed process would compile its sources again (~0.3 s of CPU), which no installed copy does.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "memory_hub")], check=False,
                   stdout=subprocess.DEVNULL)
    queries = hub_queries(args.data)
    standin = None
    if not args.no_vectors and not args.e5:
        if not (args.standin / "model.onnx").exists():
            subprocess.run([sys.executable, str(REPO / "benchmarks" / "standin_embedder.py"), str(args.standin)],
                           check=True)
        standin = args.standin
    rows: list[dict[str, Any]] = []
    previous = REPO / "benchmarks" / "results" / f"{args.out}.json"
    if args.merge and previous.exists():
        rows = json.loads(previous.read_text())["sizes"]
    ann = REPO / "benchmarks" / "results" / "ann.json"
    drawn = False
    for label in args.sizes.split(","):
        new = one_size(label, args, queries, standin)
        old = next((r for r in rows if r["notes"] == new["notes"]), None)
        if old is None:
            rows.append(new)
        else:  # measured keys replace the old ones; the stages and loads of both runs are kept
            merged = {key: {**old.get(key, {}), **new.pop(key)} for key in ("load", "code")}
            stages = sorted(set(old.get("stages", [])) | set(new.pop("stages")))
            old.update({k: v for k, v in new.items() if v is not None or k not in old})
            old.update(merged, stages=stages)
        rows.sort(key=lambda r: r["notes"])
        out = {"sizes": rows, "machine": machine(), "under_load": True,
               "notes": "vectors by the stand-in embedder (cost only); ANN recall/nDCG with real e5: ann.json",
               **({"ann": json.loads(ann.read_text())["results"]} if ann.exists() else {})}
        path = write_result(args.out, out)  # after every size: a long run that is stopped keeps what it measured
        drawn = plot(rows, path.with_suffix(".png"))
    print_table([{k: r.get(k) for k in ("notes", "chunks", "cold_lexical_s", "nochange_sync_s", "edit_to_searchable_s",
                                        "hybrid_graph_p50_ms", "hybrid_graph_p95_ms", "lexical_p95_ms",
                                        "lexical_filtered_p95_ms", "idle_rss_mb", "serving_rss_mb", "ready_s",
                                        "status_s", "index_disk_mb")} for r in rows],
                ["notes", "chunks", "cold_lexical_s", "nochange_sync_s", "edit_to_searchable_s", "hybrid_graph_p50_ms",
                 "hybrid_graph_p95_ms", "lexical_p95_ms", "lexical_filtered_p95_ms", "idle_rss_mb", "serving_rss_mb",
                 "ready_s", "status_s", "index_disk_mb"])
    print("written", path, *([path.with_suffix(".png")] if drawn else ["(no plot)"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
