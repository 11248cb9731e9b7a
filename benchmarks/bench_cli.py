"""How long one `memory-hub search` takes as a user runs it: a whole process, interpreter start included.

Two ways: in-process (the command loads the index and the models itself: what every CLI search cost
before it could ask a server) and through a running `memory-hub serve` of the same vault (the command
sends the query over the hooks' unix socket and prints the warm answer). `memory-hub --version` is
the floor: an interpreter that imports the CLI and exits.

    python benchmarks/bench_cli.py VAULT [--runs 15] [--mode hybrid+graph] [--copy]

Wall time is what a person waits; under load it mostly measures the neighbours, so each row also
gives the median CPU time of its processes (user + system), closer to what a quiet machine sees.
VAULT is indexed first (`memory-hub index`, vectors included unless --no-vectors); with --copy it is
copied to a temp folder first (use it for ../shared, which is read-only). Prints a table and writes
benchmarks/results/cli-<vault name>.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import latency_summary, machine, print_table, write_result  # noqa: E402
from memory_hub.server import local_socket  # noqa: E402

QUERIES = ["how do I roll back a bad release", "ERR_CERT_AUTHORITY_INVALID", "認証 エラー", "sync vault between devices",
           "rotate TLS certificate", "plugin settings", "database failover runbook", "publish notes as a website"]


def mh(*args: str) -> list[str]:
    return [sys.executable, "-m", "memory_hub", *args]


CPU: list[float] = []  # CPU seconds of the last series' processes (user + system), load-independent-ish


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str]) -> tuple[float, dict]:
    c0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    seconds = time.perf_counter() - t0
    CPU.append(_children_cpu() - c0)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr}")
    return seconds, (json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {})


def series(vault: Path, runs: int, mode: str | None, extra: list[str], expect: str) -> tuple[list[float], list[float]]:
    out = []
    CPU.clear()
    for i in range(runs):
        query = QUERIES[i % len(QUERIES)]
        cmd = mh("--vault", str(vault), "search", query, "--json", *extra) + (["--mode", mode] if mode else [])
        seconds, data = timed(cmd)
        if data.get("served_by") != expect:
            raise SystemExit(f"expected served_by={expect}, got {data.get('served_by')} ({data.get('warnings')})")
        out.append(seconds)
    return out, list(CPU)


def row(label: str, wall: list[float], cpu: list[float]) -> dict:
    return {"path": label, **latency_summary(wall), "cpu_p50_ms": round(statistics.median(cpu) * 1000, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--mode", default=None, help="search mode (default: the vault's search.mode)")
    ap.add_argument("--copy", action="store_true", help="copy the vault to a temp folder first")
    ap.add_argument("--no-vectors", action="store_true", help="index lexically only")
    args = ap.parse_args()
    vault = args.vault.resolve()
    tmp = None
    if args.copy:
        tmp = Path(tempfile.mkdtemp(prefix="bench-cli-"))
        shutil.copytree(vault, tmp / vault.name, ignore=shutil.ignore_patterns(".memory_hub"))
        vault = tmp / vault.name
    index = [*mh("--vault", str(vault), "index")] + (["--no-vectors"] if args.no_vectors else [])
    t0 = time.perf_counter()
    subprocess.run(index, check=True, capture_output=True)
    index_seconds = time.perf_counter() - t0

    CPU.clear()
    floor = [timed(mh("--version"))[0] for _ in range(args.runs)]
    floor_cpu = list(CPU)
    cold, cold_cpu = series(vault, args.runs, args.mode, ["--in-process"], "in-process")
    server = subprocess.Popen(mh("--vault", str(vault), "serve", "--transport", "http", "--port", "0", "--no-watch"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (local_socket.request(vault, {"op": "ping"}, timeout=0.5) or {}).get("ok"):
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.2)
        # first search starts the model load; wait until the server says it searches with vectors
        for _ in range(120):
            _, data = timed(mh("--vault", str(vault), "search", "warm up", "--json")
                            + (["--mode", args.mode] if args.mode else []))
            if not any("loading" in w for w in data.get("warnings", [])):
                break
            time.sleep(1)
        warm, warm_cpu = series(vault, args.runs, args.mode, [], "server")
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    rows = [
        row("memory-hub --version (interpreter + CLI import)", floor, floor_cpu),
        row("search in-process (loads index and models)", cold, cold_cpu),
        row("search through a running server (socket)", warm, warm_cpu),
    ]
    print(f"{vault.name}: {args.runs} runs per row, mode {args.mode or 'default'}, "
          f"load average {machine()['load_average']}")
    print_table(rows, ["path", "p50_ms", "p95_ms", "max_ms", "cpu_p50_ms", "n"])
    path = write_result(f"cli-{args.vault.resolve().name}", {
        "vault": str(args.vault), "mode": args.mode, "runs": args.runs, "index_seconds": round(index_seconds, 1),
        "vectors": not args.no_vectors, "rows": rows, "machine": machine(),
        "command": " ".join(["python", "benchmarks/bench_cli.py", *sys.argv[1:]]),
    })
    print(f"wrote {path}")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
