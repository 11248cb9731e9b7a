"""Team memory benchmark: replication through a git remote, and a shared server under 8 token clients.

    .venv/bin/python benchmarks/bench_team.py [--vault PATH] [--runs 15] [--notes 100] [--seconds 10]

Everything runs in a temp folder: a bare remote and two clones seeded from ``--vault`` (default:
the starter template; e.g. ``--vault ../shared/data/vaults/obsidian-hub`` for a real vault, which
is copied, never written in place). Measured:

* ``propagation``: a capture on clone A until it is searchable on clone B, through the remote and
  B's file watcher (the server's): A captures and runs ``sync --remote``, B runs
  ``sync --remote`` (its watcher indexes the pulled files); p50/p95 over ``--runs``. The wait for a
  schedule's next run is not included (that is ``team.sync_minutes``).
* ``sync (nothing to do)``: ``sync --remote`` on a clone that is up to date, p50/p95.
* ``sync (N new notes)``: A pushes ``--notes`` new notes; B pulls and re-indexes them (lexical,
  links, recall; no vectors), a few repeats.
* ``server``: ``serve --transport http`` with a tokens file; 8 concurrent MCP clients, each with
  its own token, call ``search`` (lexical) for ``--seconds``; then 6 readers and 2 writers
  (``capture``, each committed with its author). Calls/s and per-call p50/p95.
* ``recall per prompt``: the hooks' recall over the personal vault alone and with the team vault
  beside it (one fused block), cold (in-process, as a hook process without a server) and warm (as
  the running server answers the hooks' socket), wall and CPU ms; and a note edited by hand in the
  team vault until the running server recalls it (the team vault's own watcher).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import latency_summary, print_table, start_http, stop, write_result  # noqa: E402
from memory_hub.config import template_dir  # noqa: E402
from memory_hub.index.store import Store  # noqa: E402
from memory_hub.retrieval.search import search  # noqa: E402
from memory_hub.team.sync import sync_remote  # noqa: E402

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def found(store: Store, word: str) -> bool:
    return bool(search(store, word, k=3, mode="lexical").hits)


def synced(vault: Path, **kw: object):  # noqa: ANN201 - a RemoteSyncReport
    """``sync --remote`` without the secret check (the seed vaults are public test data); a refused
    or skipped exchange stops the benchmark with the reason instead of timing nothing."""
    report = sync_remote(vault, secret_check=False, **kw)
    ex = report.exchange
    if report.skipped or ex is None or ex.blocked or ex.skipped:
        raise RuntimeError(f"sync --remote of {vault.name} did not go through: "
                           f"{report.skipped or (ex and (ex.blocked or ex.skipped))}")
    return report


def setup(root: Path, seed: Path) -> tuple[Path, Path, Path]:
    remote, a, b = root / "remote.git", root / "a", root / "b"
    git(root, "init", "-q", "--bare", "-b", "main", str(remote))
    git(root, "clone", "-q", str(remote), str(a))
    for item in seed.iterdir():
        if item.name in (".git", ".memory_hub"):
            continue
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, a / item.name)
    synced(a, vectors="skip")
    git(root, "clone", "-q", str(remote), str(b))
    synced(b, vectors="skip")
    return remote, a, b


def bench_propagation(a: Path, b: Path, runs: int) -> dict:
    from memory_hub.capture import braindump
    from memory_hub.server.watcher import Watcher

    store = Store(b)
    watcher = Watcher(b, store, rescan_every=None).start()
    total, parts = [], {"a_capture_and_sync": [], "b_sync": [], "b_watcher": []}
    try:
        for i in range(runs):
            word = f"zqprop{i}x{os.getpid()}"
            t0 = time.perf_counter()
            braindump(a, f"Propagation probe {i}: remember {word}.", title=f"probe {i} {word}")
            synced(a, vectors="skip")
            t1 = time.perf_counter()
            synced(b, index="server")
            t2 = time.perf_counter()
            deadline = t2 + 30
            while not found(store, word):
                if time.perf_counter() > deadline:
                    raise RuntimeError(f"{word} never became searchable on B")
                time.sleep(0.01)
            t3 = time.perf_counter()
            total.append(t3 - t0)
            parts["a_capture_and_sync"].append(t1 - t0)
            parts["b_sync"].append(t2 - t1)
            parts["b_watcher"].append(t3 - t2)
    finally:
        watcher.stop()
        store.close()
    return {"total": latency_summary(total), **{k: latency_summary(v) for k, v in parts.items()}}


def bench_sync(a: Path, b: Path, runs: int, notes: int) -> dict:
    idle = []
    for _ in range(runs):
        t0 = time.perf_counter()
        synced(b, vectors="skip")
        idle.append(time.perf_counter() - t0)
    push, pull = [], []
    for r in range(3):
        for i in range(notes):
            (a / "bulk").mkdir(exist_ok=True)
            (a / "bulk" / f"r{r}-n{i}.md").write_text(f"---\ntitle: Bulk {r} {i}\n---\n# Bulk {r} {i}\n\n"
                                                      f"Note {i} of round {r}, word zqbulk{r}n{i}.\n", encoding="utf-8")
        t0 = time.perf_counter()
        synced(a, vectors="skip")
        t1 = time.perf_counter()
        report = synced(b, vectors="skip")
        t2 = time.perf_counter()
        assert report.indexed.get("paths", 0) >= notes, report.indexed
        push.append(t1 - t0)
        pull.append(t2 - t1)
    return {"nothing_to_do": latency_summary(idle), f"push_{notes}": latency_summary(push),
            f"pull_and_index_{notes}": latency_summary(pull)}


RECALL_PROMPTS = ["how do we rotate the TLS certificate on the legacy nginx VMs?",
                  "the passkey login fails in one region, what did we do last time?",
                  "S3 bucket policy broke the deploy again", "blue green deploy cache invalidation order",
                  "認証エラーの切り分け手順は？", "Go service error handling conventions",
                  "what happened with the expired intermediate certificate", "オンボーディングの手順を教えて"]



def _timed_recalls(recall: Callable[[str], object], runs: int) -> dict:
    """Wall and CPU of ``runs`` recalls over the prompts in turn (p50/p95 wall, p50 CPU)."""
    wall, cpu = [], []
    for i in range(runs):
        w0, c0 = time.perf_counter(), time.process_time()
        recall(RECALL_PROMPTS[i % len(RECALL_PROMPTS)])
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    return {**latency_summary(wall), "cpu_p50_ms": round(latency_summary(cpu)["p50_ms"], 1)}

def bench_team_recall(root: Path, team: Path, runs: int) -> dict:
    """Recall on every prompt over the personal vault alone and with a team vault beside it, cold
    (what a hook process does in-process, interpreter start not included) and warm (what the running
    server does for the hooks' socket); and a note edited by hand in the team vault until the
    running server recalls it (its team watcher). Wall and CPU time per prompt."""
    from memory_hub.config import template_dir
    from memory_hub.index.sync import sync
    from memory_hub.server.run import close_state, open_state
    from memory_hub.server.team_vaults import prompt_recaller
    from memory_hub.team.recall import cold_recaller

    personal = root / "personal"
    shutil.copytree(template_dir(), personal)
    sync(personal, progress=False)
    cfg = root / "cfg"
    (cfg / "memory-hub").mkdir(parents=True)
    conf = cfg / "memory-hub" / "config.toml"
    saved = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(cfg)
    out: dict = {}
    try:
        for label, text in (("personal only", ""), ("personal + team", f'[vaults.team]\npath = "{team}"\n')):
            conf.write_text(f'vault = "{personal}"\n\n{text}', encoding="utf-8")
            cold_recaller(personal, root).recall(RECALL_PROMPTS[0])  # imports, not counted
            out[f"cold, {label}"] = _timed_recalls(lambda p: cold_recaller(personal, root).recall(p), runs)
            state = open_state(personal, warm=False, hooks_socket=False, rescan_every=None)
            try:
                deadline = time.monotonic() + 60
                while text and "team" not in getattr(state.extras.get("team"), "watchers", {}):
                    if time.monotonic() > deadline:
                        raise RuntimeError("the team vault's watcher never started")
                    time.sleep(0.05)
                for prompt in RECALL_PROMPTS:  # first use: indexes opened, not counted
                    prompt_recaller(state, None).recall(prompt)
                out[f"warm, {label}"] = _timed_recalls(lambda p, s=state: prompt_recaller(s, None).recall(p), runs)
                if text:
                    fresh = []
                    for i in range(max(3, runs // 5)):
                        word = f"zqteamedit{i}x{os.getpid()}"
                        t0 = time.perf_counter()
                        (team / f"edited-{word}.md").write_text(f"---\ntitle: Edited {word}\n---\n# {word}\n\n"
                                                                f"Edited by hand: {word}.\n", encoding="utf-8")
                        deadline = t0 + 30
                        while not any(word in n.path for n in prompt_recaller(state, None).recall(
                                f"{word} edited by hand").notes):
                            if time.perf_counter() > deadline:
                                raise RuntimeError(f"{word} never reached the running server's recall")
                            time.sleep(0.01)
                        fresh.append(time.perf_counter() - t0)
                    out["team-vault edit → recalled by the running server"] = latency_summary(fresh)
            finally:
                close_state(state)
    finally:
        if saved is None:
            os.environ.pop("XDG_CONFIG_HOME", None)
        else:
            os.environ["XDG_CONFIG_HOME"] = saved
    return out


async def _client(url: str, token: str, seconds: float, write: bool, lat: list[float]) -> int:
    from fastmcp import Client

    n = 0
    async with Client(url, auth=token) as client:
        await client.call_tool("search", {"query": "warm up", "k": 1, "mode": "lexical"})  # not counted
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            if write:
                await client.call_tool("capture", {"text": f"bench capture {n} by {token[:6]}", "title": f"b {n}"})
            else:
                await client.call_tool("search", {"query": "deploy rollback runbook", "k": 5, "mode": "lexical"})
            lat.append(time.perf_counter() - t0)
            n += 1
    return n


async def _load(url: str, tokens: list[str], seconds: float, writers: int) -> dict:
    read_lat: list[float] = []
    write_lat: list[float] = []
    t0 = time.perf_counter()  # includes each client's connect and warm-up call: calls/s is a floor
    counts = await asyncio.gather(*[_client(url, t, seconds, i < writers, write_lat if i < writers else read_lat)
                                    for i, t in enumerate(tokens)])
    wall = time.perf_counter() - t0
    out = {"clients": len(tokens), "writers": writers, "calls": sum(counts),
           "calls_per_s": round(sum(counts) / wall, 1), "search": latency_summary(read_lat)}
    if writers:
        out["capture"] = latency_summary(write_lat)
    return out


def bench_server(vault: Path, root: Path, seconds: float) -> dict:
    secrets = [f"bench-token-{i}-0123456789abcdef" for i in range(8)]
    tokens = root / "tokens.toml"
    tokens.write_text("".join(f'[tokens.user{i}]\nsha256 = "{hashlib.sha256(s.encode()).hexdigest()}"\n'
                              f'scope = "write"\nrate_per_minute = 0\n' for i, s in enumerate(secrets)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"} | {"MEMORY_HUB_TOKENS_FILE": str(tokens)}
    proc, port, _ = start_http(vault, ["--no-warm"], env=env, headers={"Authorization": f"Bearer {secrets[0]}"})
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        readers = asyncio.run(_load(url, secrets, seconds, 0))
        mixed = asyncio.run(_load(url, secrets, seconds, 2))
    finally:
        stop(proc)
    authored = len(git(vault, "log", "--format=%an", "--author=user").splitlines())
    return {"8_readers": readers, "6_readers_2_writers": mixed, "authored_commits": authored}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vault", type=Path, default=template_dir(), help="seed vault (copied)")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--notes", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--name", default="team", help="results file name (benchmarks/results/NAME.json)")
    args = parser.parse_args()
    os.environ.setdefault("XDG_DATA_HOME", tempfile.mkdtemp(prefix="bench-team-xdg-"))
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        root = Path(tmp)
        _remote, a, b = setup(root, args.vault)
        notes = len(list(a.rglob("*.md")))
        prop = bench_propagation(a, b, args.runs)
        syn = bench_sync(a, b, args.runs, args.notes)
        recall = bench_team_recall(root, b, max(args.runs, 16))
        server = None if args.skip_server else bench_server(b, root, args.seconds)
    rows = [{"measure": f"propagation {k}", **v} for k, v in prop.items()]
    rows += [{"measure": f"sync --remote {k}", **v} for k, v in syn.items()]
    print(f"seed: {args.vault} ({notes} notes), load average {os.getloadavg()[0]:.2f} "
          f"(under load when well above 0: the figures then include waiting for the CPU)")
    print_table(rows, ["measure", "p50_ms", "p95_ms", "max_ms", "n"])
    print()
    print_table([{"recall per prompt": k, **v} for k, v in recall.items()],
                ["recall per prompt", "p50_ms", "p95_ms", "cpu_p50_ms", "n"])
    if server:
        srows = []
        for name in ("8_readers", "6_readers_2_writers"):
            s = server[name]
            srows.append({"load": name, "calls/s": s["calls_per_s"], "search p50": s["search"]["p50_ms"],
                          "search p95": s["search"]["p95_ms"],
                          "capture p50": s.get("capture", {}).get("p50_ms", ""),
                          "capture p95": s.get("capture", {}).get("p95_ms", "")})
        print()
        print_table(srows, ["load", "calls/s", "search p50", "search p95", "capture p50", "capture p95"])
        print(f"commits authored by the tokens: {server['authored_commits']}")
    path = write_result(args.name, {"seed": str(args.vault), "seed_notes": notes, "runs": args.runs,
                                 "load_average": os.getloadavg(), "propagation": prop, "sync": syn,
                                 "team_recall": recall, "server": server})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
