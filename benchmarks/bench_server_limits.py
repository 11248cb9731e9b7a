#!/usr/bin/env python3
"""The HTTP server under abuse: abandoned MCP sessions, idle connections at a low fd limit, silent
and half-sent requests. What it costs in memory, whether the server stays reachable, and how much
it logs.

    .venv/bin/python benchmarks/bench_server_limits.py            # table + benchmarks/results/server-limits.json
    .venv/bin/python benchmarks/bench_server_limits.py --sessions 500

Measures whatever code ``memory-hub`` imports; to compare with another checkout run it with
``PYTHONPATH=<checkout>`` and ``--label``. Nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

from benchmarks.bench_server import MEMORY_HUB, prepare_vault, rss_mb  # noqa: E402
from benchmarks.common import DEFAULT_DATA, free_port, print_table, write_result  # noqa: E402

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


class Server:
    def __init__(self, vault: Path, fd_limit: int | None = None) -> None:
        self.port = free_port()

        def limit() -> None:
            if fd_limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

        self.proc = subprocess.Popen([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http",
                                      "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, preexec_fn=limit)
        self.err: list[str] = []
        self.reader = threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True)
        self.reader.start()
        self.base = f"http://127.0.0.1:{self.port}"
        while not self.health(0.5):
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + "".join(self.err))
            time.sleep(0.05)

    def health(self, timeout: float = 3.0) -> bool:
        try:
            return httpx.get(f"{self.base}/health", timeout=timeout).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # a server that ignores SIGTERM is a finding too
            self.proc.wait()
            self.err.append("(did not stop on SIGTERM; killed)\n")
        self.reader.join(5)
        return "".join(self.err)


def abandoned_sessions(vault: Path, n: int) -> dict:
    server = Server(vault)
    try:
        time.sleep(3.0)
        before = rss_mb(server.proc.pid)
        t0 = time.perf_counter()
        refused = 0
        with httpx.Client(timeout=30) as client:
            for _ in range(n):  # opened, never closed (no DELETE)
                if client.post(f"{server.base}/mcp", json=INIT, headers=ACCEPT).status_code != 200:
                    refused += 1
        seconds = time.perf_counter() - t0
        time.sleep(1.0)
        after = rss_mb(server.proc.pid)
        live = httpx.get(f"{server.base}/health").json().get("http", {}).get("sessions")
        reachable = server.health()
    finally:
        err = server.stop()
    return {"case": f"{n} abandoned MCP sessions", "rss_before_mb": before, "rss_after_mb": after,
            "rss_growth_mb": round(after - before, 1), "live_sessions": live, "refused": refused,
            "reachable_after": reachable, "open_s": round(seconds, 1), "stderr_lines": len(err.splitlines()),
            "tracebacks": err.count("Traceback")}


def idle_connections(vault: Path, n: int, fd_limit: int, give_up: float) -> dict:
    server = Server(vault, fd_limit=fd_limit)
    held: list[socket.socket] = []
    try:
        for _ in range(n):
            try:
                held.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
            except OSError:
                break
        t0 = time.perf_counter()
        while not server.health(2.0) and time.perf_counter() - t0 < give_up:
            time.sleep(0.25)
        back = time.perf_counter() - t0
        reachable = server.health(2.0)
    finally:
        for s in held:
            s.close()
        err = server.stop()
    return {"case": f"{n} idle connections, fd limit {fd_limit}", "connected": len(held),
            "reachable_after_s": round(back, 1) if reachable else f"never (gave up after {give_up:.0f} s)",
            "stderr_lines": len(err.splitlines()), "tracebacks": err.count("Traceback"),
            "stopped_on_sigterm": "killed" not in err}


def silent_and_partial(vault: Path, give_up: float) -> list[dict]:
    server = Server(vault)
    rows = []
    try:
        for label, data in (("silent connection", b""),
                            ("half-sent request head", f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"),
                            ("half-sent request body", f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                                                       "Content-Length: 500\r\n\r\n{")):
            with socket.create_connection(("127.0.0.1", server.port)) as s:
                s.settimeout(give_up)
                if data:
                    s.sendall(data.encode() if isinstance(data, str) else data)
                t0 = time.perf_counter()
                try:
                    while s.recv(65536):
                        pass
                    closed = f"{time.perf_counter() - t0:.1f}"
                except TimeoutError:
                    closed = f"never (gave up after {give_up:.0f} s)"
            rows.append({"case": label, "closed_by_server_after_s": closed})
        for host in (f"localhost:{server.port}@evil.com", "a, b"):
            code = httpx.get(f"{server.base}/health", headers={"Host": host}).status_code
            rows.append({"case": f"Host: {host}", "closed_by_server_after_s": f"HTTP {code}"})
    finally:
        server.stop()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", type=Path, default=DEFAULT_DATA / "vaults" / "obsidian-hub",
                        help="source vault (copied, never written)")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mh-bench-server")
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=300)
    parser.add_argument("--fd-limit", type=int, default=256)
    parser.add_argument("--give-up", type=float, default=30.0, help="seconds to wait for the server before saying never")
    parser.add_argument("--label", default="this checkout", help="what code ran (e.g. main, a branch)")
    parser.add_argument("--name", default="server-limits", help="results file name")
    args = parser.parse_args()

    args.work.mkdir(parents=True, exist_ok=True)
    vault = prepare_vault(args.vault, args.work, vectors=False)
    sessions = abandoned_sessions(vault, args.sessions)
    idle = idle_connections(vault, args.connections, args.fd_limit, args.give_up)
    partial = silent_and_partial(vault, args.give_up)

    print(f"\n{args.label}; load average {os.getloadavg()[0]:.1f}\n")
    print_table([sessions], ["case", "rss_before_mb", "rss_after_mb", "live_sessions", "refused", "reachable_after",
                             "stderr_lines", "tracebacks"])
    print()
    print_table([idle], ["case", "connected", "reachable_after_s", "stderr_lines", "tracebacks", "stopped_on_sigterm"])
    print()
    print_table(partial, ["case", "closed_by_server_after_s"])
    path = write_result(args.name, {"label": args.label, "vault": args.vault.name, "sessions": sessions,
                                    "idle_connections": idle, "partial_requests": partial,
                                    "load_average": os.getloadavg()})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
