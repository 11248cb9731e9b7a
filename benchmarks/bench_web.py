"""How fast the web pages answer on a real vault: the search page and the note page, warm.

Starts `memory-hub serve --transport http` on a loopback port for VAULT (waits until its models are
warm), then asks for each page many times over plain HTTP (httpx, one keep-alive connection) and
reports the median and p95 of the whole request as a browser would wait for it (the HTML only; the
static CSS/JS are cached by the browser). Search pages run each query in the modes given; note
pages are the notes with the most backlinks (the heaviest neighbourhood pictures) plus random ones.

    python benchmarks/bench_web.py VAULT [--runs 5] [--modes lexical,hybrid+graph] [--notes 30] [--copy]

VAULT is indexed first (`memory-hub index`); with --copy it is copied to a temp folder first (use it
for ../shared, which is read-only). Prints a table and writes benchmarks/results/web-<vault name>.json.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import latency_summary, machine, print_table, start_http, stop, write_result  # noqa: E402

QUERIES = ["how do I roll back a bad release", "ERR_CERT_AUTHORITY_INVALID", "認証 エラー", "sync vault between devices",
           "rotate TLS certificate", "plugin settings", "database failover runbook", "publish notes as a website"]
HTML = {"Accept": "text/html"}


def wait_warm(client: httpx.Client, base: str, proc: subprocess.Popen, limit: float = 900) -> None:
    deadline = time.monotonic() + limit
    # An idle server loads no model: the first search starts the warm-up (and runs lexically).
    while time.monotonic() < deadline:
        try:
            client.get(base + "/?q=warm+up", headers=HTML, timeout=60)
            break
        except httpx.TransportError:
            time.sleep(0.2)
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            if client.get(base + "/health", timeout=2).json().get("models_ready"):
                return
        except (httpx.TransportError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit("the server did not warm up in time")


def series(client: httpx.Client, urls: list[str], runs: int) -> tuple[list[float], list[float], int]:
    """(wall seconds per request, server-side data+render ms per request, bytes of the last page)."""
    for url in urls:  # warm-up: first use of a mode or note
        client.get(url, headers=HTML)
    wall, server, size = [], [], 0
    for _ in range(runs):
        for url in urls:
            t0 = time.perf_counter()
            r = client.get(url, headers=HTML)
            wall.append(time.perf_counter() - t0)
            if r.status_code != 200:
                raise SystemExit(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
            timing = r.headers.get("server-timing", "")
            server.append(sum(float(p.split("dur=")[1]) for p in timing.split(",") if "dur=" in p))
            size = len(r.content)
    return wall, server, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vault", type=Path)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--modes", default="lexical,hybrid+graph")
    ap.add_argument("--notes", type=int, default=30)
    ap.add_argument("--copy", action="store_true")
    ap.add_argument("--no-index", action="store_true", help="the vault is already indexed")
    args = ap.parse_args()
    vault = args.vault.resolve()
    tmp = None
    if args.copy:
        tmp = Path(tempfile.mkdtemp(prefix="bench-web-"))
        shutil.copytree(vault, tmp / vault.name, ignore=shutil.ignore_patterns(".git"))
        vault = tmp / vault.name
    mh = [sys.executable, "-m", "memory_hub", "--vault", str(vault)]
    if not args.no_index:
        subprocess.run([*mh, "index"], check=True, capture_output=True)
    conn = sqlite3.connect(vault / ".memory_hub" / "index.sqlite3")
    notes = conn.execute("SELECT count(*) FROM notes WHERE kind != 'attachment'").fetchone()[0]
    hubs = [r[0] for r in conn.execute(
        "SELECT n.path FROM notes n JOIN links l ON l.target_id = n.id WHERE n.kind != 'attachment' "
        "GROUP BY n.id ORDER BY count(*) DESC LIMIT ?", (args.notes // 2,))]
    others = [r[0] for r in conn.execute("SELECT path FROM notes WHERE kind != 'attachment' ORDER BY path")]
    conn.close()
    random.seed(13)
    picked = hubs + random.sample([p for p in others if p not in hubs], min(len(others), args.notes - len(hubs)))
    proc, port, _ = start_http(vault, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    rows, out = [], {"vault": vault.name, "notes": notes, "runs": args.runs, "machine": machine(), "pages": {}}
    try:
        with httpx.Client(timeout=120) as client:
            wait_warm(client, base, proc)
            pages: list[tuple[str, list[str]]] = []
            for mode in args.modes.split(","):
                pages.append((f"search ({mode})", [f"{base}/?q={quote(q)}&mode={quote(mode)}" for q in QUERIES]))
            pages.append((f"note: {len(hubs)} most linked-to", [f"{base}/note/{quote(p)}" for p in hubs]))
            pages.append((f"note: {len(picked) - len(hubs)} random", [f"{base}/note/{quote(p)}" for p in picked[len(hubs):]]))
            pages.append(("timeline", [f"{base}/timeline"]))
            pages.append(("health", [f"{base}/health"]))
            for name, urls in pages:
                wall, server, size = series(client, urls, args.runs)
                s = latency_summary(wall)
                srv = latency_summary([ms / 1000 for ms in server])
                rows.append({"page": name, "requests": s["n"], "p50 ms": s["p50_ms"], "p95 ms": s["p95_ms"],
                             "server p50 ms": srv["p50_ms"], "KB": round(size / 1024, 1)})
                out["pages"][name] = {"wall": s, "server": srv, "bytes": size}
    finally:
        stop(proc, timeout=15)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{vault.name}: {notes} notes, {args.runs} runs per URL (wall time per request; "
          f"load average {os.getloadavg()[0]:.1f} at the end)")
    print_table(rows, ["page", "requests", "p50 ms", "p95 ms", "server p50 ms", "KB"])
    print(write_result(f"web-{args.vault.name}", out))


if __name__ == "__main__":
    main()
