"""Shared pieces of the benchmark runners: data loading, metrics, timing statistics, reporting.

Metric functions take one query's ranked list of document ids and its relevance judgements
(``{doc_id: grade}``) and return a number; ``METRICS`` maps the report's column names to them, so a
new metric (for example LoCoMo evidence recall) is one function and one entry, not a new runner.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = Path(os.environ.get("MEMORY_HUB_SHARED_DATA", REPO.parent / "shared" / "data"))
RESULTS = Path(__file__).resolve().parent / "results"

Qrels = dict[str, dict[str, int]]
Metric = Callable[[Sequence[str], Mapping[str, int]], float]


# -- data -----------------------------------------------------------------------------------------

def read_jsonl(path: Path) -> Iterable[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_qrels(path: Path) -> Qrels:
    """A BEIR qrels TSV (``query-id  corpus-id  score``, with a header) → {query: {doc: grade}}."""
    qrels: Qrels = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or (n == 0 and not parts[2].lstrip("-").isdigit()):
                continue
            qrels.setdefault(parts[0], {})[parts[1]] = int(parts[2])
    return qrels


# -- metrics --------------------------------------------------------------------------------------

def ndcg_at(k: int) -> Metric:
    def ndcg(ranked: Sequence[str], rel: Mapping[str, int]) -> float:
        dcg = sum((2 ** rel.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
        ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:k]
        idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
        return dcg / idcg if idcg else 0.0

    return ndcg


def recall_at(k: int) -> Metric:
    def recall(ranked: Sequence[str], rel: Mapping[str, int]) -> float:
        relevant = {d for d, g in rel.items() if g > 0}
        return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0

    return recall


def mrr_at(k: int) -> Metric:
    def mrr(ranked: Sequence[str], rel: Mapping[str, int]) -> float:
        for i, d in enumerate(ranked[:k]):
            if rel.get(d, 0) > 0:
                return 1.0 / (i + 1)
        return 0.0

    return mrr


METRICS: dict[str, Metric] = {
    "nDCG@10": ndcg_at(10),
    "recall@100": recall_at(100),
    "MRR@10": mrr_at(10),
}


def evaluate(run: Mapping[str, Sequence[str]], qrels: Qrels, metrics: Mapping[str, Metric] = METRICS
             ) -> dict[str, float]:
    """Mean of each metric over the judged queries in ``run`` (a query with no hits scores 0)."""
    judged = [q for q in run if q in qrels]
    if not judged:
        return {name: 0.0 for name in metrics}
    return {name: sum(fn(run[q], qrels[q]) for q in judged) / len(judged) for name, fn in metrics.items()}


# -- timing ---------------------------------------------------------------------------------------

def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0 for an empty list."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def spread(values: Sequence[float], scale: float = 1.0, digits: int = 3) -> dict[str, float]:
    """Median, p95 (``percentile``), min, max and count of repeated measurements, each times
    ``scale``: the one summary every runner reports, so their p95s mean the same thing."""
    vals = [v * scale for v in values]
    if not vals:
        return {"median": 0.0, "p95": 0.0, "min": 0.0, "max": 0.0, "n": 0}
    return {"median": round(statistics.median(vals), digits), "p95": round(percentile(vals, 95), digits),
            "min": round(min(vals), digits), "max": round(max(vals), digits), "n": len(vals)}


def run_timed(cmd: Sequence[str], **kwargs: Any) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run ``cmd`` to its end (``subprocess.run`` with ``kwargs``, text captured): (the finished
    process, wall seconds, CPU seconds of the child and what it waited for). CPU is the guide on a
    shared machine: wall time under load measures the neighbours."""
    before = os.times()
    t0 = time.perf_counter()
    proc = subprocess.run(list(cmd), capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = after.children_user - before.children_user + after.children_system - before.children_system
    return proc, wall, cpu


def degraded_lines(stderr: str) -> list[str]:
    """What a ``memory-hub`` process said about running degraded: its parse workers failed and the
    sync read every file in one process (``index.sync``'s warning). A figure measured that way is
    not the product's: a hand-made entry-point script without ``if __name__ == "__main__"`` did it
    to the first 2026-12-07 scale round (the forkserver workers re-ran the script), unnoticed, since
    the benchmark dropped stderr."""
    return [ln.strip() for ln in stderr.splitlines() if "index workers" in ln]


HOOK_MODULE = [sys.executable, "-m", "memory_hub.hooks"]  # + --vault V claude-code
HOOK_COMMAND = [str(Path(sys.executable).parent / "memory-hub")]  # + --vault V hook claude-code: what agents run


def hook_process(vault: Path, prompt: str, session: str, command: list[str] | None = None,
                 cwd: Path = REPO, env: Mapping[str, str] | None = None,
                 check: bool = False) -> tuple[float, dict[str, Any] | None, float]:
    """One whole hook process fed a UserPromptSubmit event: (wall seconds, its reply, its CPU
    seconds). ``-m`` runs the code of ``cwd`` (it comes first on ``sys.path``), so a benchmark's
    ``--baseline`` can point it at another checkout; ``command=HOOK_COMMAND`` runs what agents run.
    ``check``: a hook that exits non-zero raises instead of being timed."""
    event = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": prompt})
    args = [*HOOK_COMMAND, "--vault", str(vault), "hook", "claude-code"] if command is HOOK_COMMAND else \
        [*HOOK_MODULE, "--vault", str(vault), "claude-code"]
    proc, wall, cpu = run_timed(args, input=event, timeout=60, cwd=cwd, env=None if env is None else dict(env))
    if check and proc.returncode != 0:
        raise RuntimeError(f"hook exited {proc.returncode}: {proc.stderr[-300:]}")
    return wall, (json.loads(proc.stdout) if proc.stdout.strip() else None), cpu


def first_recall(vault: Path, deadline_s: float) -> tuple[dict[str, Any], float]:
    """The first recall answered by a server just started on ``vault`` (its hooks socket opens after
    the MCP handshake; a stale socket file may be there until then): (reply, seconds it took).
    That first request loads recall's saved index: what the first prompt after a start pays."""
    from memory_hub.server import local_socket

    deadline = time.monotonic() + deadline_s
    first, took = None, 0.0
    while first is None and time.monotonic() < deadline:
        t0 = time.perf_counter()
        first = local_socket.request(vault, {"op": "recall", "prompt": "warm up the recall index please"},
                                     timeout=120)
        took = time.perf_counter() - t0
        if first is None:
            time.sleep(0.1)
    assert first and first.get("ok"), first
    return first, took


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"p50_ms": round(statistics.median(ms), 3) if ms else 0.0, "p95_ms": round(percentile(ms, 95), 3),
            "max_ms": round(max(ms), 3) if ms else 0.0, "n": len(ms)}


class Timer:
    """``with Timer() as t: ...; t.seconds, t.cpu_seconds``

    CPU time is reported next to wall time because the benchmark machine is shared: under load,
    wall time measures the neighbours; this process's CPU time is what an idle machine would see
    for single-threaded work that does not wait on the disk.
    """

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.cpu_start = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start
        self.cpu_seconds = time.process_time() - self.cpu_start


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


# -- reporting ------------------------------------------------------------------------------------

def machine() -> dict[str, Any]:
    import sqlite3

    return {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "cpus": os.cpu_count(),
            "platform": platform.platform(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def print_table(rows: list[dict[str, Any]], columns: Sequence[str], stream: Any = None) -> None:
    stream = stream or sys.stdout

    def fmt(v: Any) -> str:
        return f"{v:.4f}" if isinstance(v, float) and abs(v) < 10 else (f"{v:.1f}" if isinstance(v, float) else str(v))

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)), file=stream)
    print("  ".join("-" * w for w in widths), file=stream)
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)), file=stream)


def write_result(name: str, data: dict[str, Any], out_dir: Path = RESULTS) -> Path:
    """Write ``<out_dir>/<name>.json`` (small: summaries, never per-query dumps)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    payload = {"benchmark": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": machine(),
               **data}
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


# -- embedding cache ----------------------------------------------------------------------------

class CachedEmbedder:
    """An embedder that remembers every vector it made, on disk, keyed by (embedder, prefix, text).

    Benchmarks embed the same corpora again and again while chunking or scoring is explored; the
    INT8 model runs one text per call, so a text's vector does not depend on its batch and a cached
    vector is bit-identical to a fresh one. Same identity, dimension, window and token counts as
    the embedder it wraps, so a ``VectorIndex`` built through it is the one the product builds.
    ``hits``/``misses`` say how much was reused: a run served from the cache measures no embedding
    throughput, and the runners say so.
    """

    def __init__(self, inner: Any, folder: Path) -> None:
        import sqlite3

        self.inner = inner
        self.identity = inner.identity
        self.dim = inner.dim
        self.max_tokens = inner.max_tokens
        folder.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(folder / "embeddings.sqlite3", isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self.hits = 0
        self.misses = 0

    def _key(self, kind: str, text: str) -> str:
        import hashlib

        return hashlib.sha1(f"{self.identity.key}\0{kind}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()

    def _cached(self, kind: str, texts: Sequence[str], embed: Callable[[list[str]], Any]) -> Any:
        import numpy as np

        keys = [self._key(kind, t) for t in texts]
        found: dict[str, Any] = {}
        for s in range(0, len(keys), 500):
            part = keys[s:s + 500]
            rows = self._db.execute(f"SELECT key, v FROM vec WHERE key IN ({','.join('?' * len(part))})", part)
            found.update({k: np.frombuffer(v, dtype=np.float32) for k, v in rows})
        todo = [i for i, k in enumerate(keys) if k not in found]
        self.hits += len(texts) - len(todo)
        self.misses += len(todo)
        if todo:
            fresh = embed([texts[i] for i in todo])
            self._db.execute("BEGIN")
            for i, vec in zip(todo, fresh, strict=True):
                vec = np.asarray(vec, dtype=np.float32)
                found[keys[i]] = vec
                self._db.execute("INSERT OR REPLACE INTO vec VALUES (?, ?)", (keys[i], vec.tobytes()))
            self._db.execute("COMMIT")
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, self.dim), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        return self._cached("passage", list(texts), self.inner.embed_passages)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self._cached("query", list(texts), self.inner.embed_queries)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def token_embeddings(self, texts: Sequence[str], is_query: bool) -> Any:
        return self.inner.token_embeddings(texts, is_query)


def stop(proc: subprocess.Popen[Any], timeout: float = 10) -> None:
    """Terminate a server a benchmark spawned, and kill it if it has not left in ``timeout`` s."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http(vault: Path, extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
               headers: Mapping[str, str] | None = None, limit: float = 120.0,
               stderr: Any = subprocess.DEVNULL) -> tuple[subprocess.Popen[Any], int, float]:
    """Spawn ``memory-hub serve --transport http`` on a free loopback port; return it, its port and
    the seconds until ``/health`` answered. ``env`` replaces the environment (default: this one
    without ``MEMORY_HUB_TOKEN``, so a benchmark never inherits a token it did not choose)."""
    import httpx

    port = free_port()
    environ = dict(env) if env is not None else {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(Path(sys.executable).parent / "memory-hub"), "--vault", str(vault), "serve",
                             "--transport", "http", "--port", str(port), *extra], env=environ,
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    deadline = time.monotonic() + limit
    while True:
        try:
            httpx.get(f"http://127.0.0.1:{port}/health", headers=dict(headers or {}), timeout=0.5)
            return proc, port, time.perf_counter() - t0
        except httpx.TransportError:
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.stderr else ""
                stop(proc)
                raise RuntimeError(f"server did not start: {err[-500:]}") from None
            time.sleep(0.01)
