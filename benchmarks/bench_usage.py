"""Usage counts benchmark: what a read costs now that it is a log line, and what readers pay to fold.

    .venv/bin/python benchmarks/bench_usage.py [--vault obsidian-hub] [--data DIR] [--events 20000] [--runs 5]

The shared vault is copied to a temp folder (never written in place) and made a git repository, so
events go to the journal as they do for a real user. Measured:

* ``record_read``: one read event appended (note check + journal append), p50/p95 over ``--events``;
* ``fold (full)``: every event folded into a fresh index (what ``index --rebuild`` pays);
* ``fold (incremental)``: one new event after the rest are folded (what each reader pays);
* ``snapshot``: recall's call (fold attempt, then every note's counts): with nothing new (the
  counts of the last call are reused), and right after one new read (computed again);
* ``publish``: the journal moved into the tracked log.

Each timing is a median over ``--runs`` repeats (p95 beside it); CPU time is reported because the
machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import DEFAULT_DATA, latency_summary, peak_rss_mb, print_table, write_result  # noqa: E402
from memory_hub.index import usage  # noqa: E402
from memory_hub.index.store import Store, reset  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.vault import usage as log  # noqa: E402


def timed(fn, runs: int) -> tuple[list[float], list[float]]:  # noqa: ANN001
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vault", default="obsidian-hub")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    src = args.data / "vaults" / args.vault
    if not src.is_dir():
        print(f"vault not found: {src}", file=sys.stderr)
        return 2
    os.environ.setdefault(log.MACHINE_ENV, "bench-machine")
    with tempfile.TemporaryDirectory(prefix="bench-usage-") as tmp:
        vault = Path(tmp) / args.vault
        shutil.copytree(src, vault, ignore=shutil.ignore_patterns(".memory_hub", ".git"))
        subprocess.run(["git", "init", "-q"], cwd=vault, check=True)
        store = Store(vault)
        sync(vault, store=store, progress=False)
        notes = [r[0] for r in store.conn.execute("SELECT path FROM notes WHERE kind != 'attachment'")]
        rng = random.Random(7)
        per_read = []
        for _ in range(args.events):
            path = rng.choice(notes)
            t0 = time.perf_counter()
            log.record_read(vault, path)
            per_read.append(time.perf_counter() - t0)
        rows = [{"step": "record_read", **latency_summary(per_read)}]

        def full_fold() -> None:
            store.close()
            reset(vault)
            fresh = Store(vault)
            usage.fold(fresh, vault)

        wall, cpu = timed(full_fold, args.runs)
        rows.append({"step": f"fold (full, {args.events} events)", **latency_summary(wall),
                     "cpu_p50_ms": round(sorted(cpu)[len(cpu) // 2] * 1000, 3)})
        store = Store(vault)
        usage.fold(store, vault)

        def one_more() -> None:
            log.record_read(vault, rng.choice(notes))
            usage.fold(store, vault, wait=False)

        wall, cpu = timed(one_more, args.runs * 20)
        rows.append({"step": "fold (incremental, 1 event)", **latency_summary(wall),
                     "cpu_p50_ms": round(sorted(cpu)[len(cpu) // 2] * 1000, 3)})
        with_counts = len(usage.counts(store))
        usage.snapshot(vault, store)
        wall, cpu = timed(lambda: usage.snapshot(vault, store), args.runs * 20)
        rows.append({"step": "snapshot, nothing new", **latency_summary(wall),
                     "cpu_p50_ms": round(sorted(cpu)[len(cpu) // 2] * 1000, 3)})

        def after_read() -> None:
            log.record_read(vault, rng.choice(notes))
            usage.snapshot(vault, store)

        wall, cpu = timed(after_read, args.runs * 20)
        rows.append({"step": f"snapshot after a read ({with_counts} notes with counts)", **latency_summary(wall),
                     "cpu_p50_ms": round(sorted(cpu)[len(cpu) // 2] * 1000, 3)})
        wall, cpu = timed(lambda: log.publish(vault), 1)
        rows.append({"step": "publish (journal → log)", **latency_summary(wall),
                     "cpu_p50_ms": round(cpu[0] * 1000, 3)})
        size = (vault / log.log_place(vault).rel).stat().st_size
    print(f"{args.vault}: {len(notes)} notes, {args.events} events, log {size / 1024:.0f} KiB "
          f"({size / args.events:.0f} bytes per event); load average {os.getloadavg()[0]:.1f}")
    print_table(rows, ["step", "p50_ms", "p95_ms", "max_ms", "cpu_p50_ms", "n"])
    out = write_result(f"usage-{args.vault}", {"vault": args.vault, "notes": len(notes), "events": args.events,
                                              "log_bytes": size, "rows": rows, "peak_rss_mb": peak_rss_mb()})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
