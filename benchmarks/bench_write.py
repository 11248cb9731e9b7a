"""The write tools' cost on a real vault: move_note (with link rewriting), update_note, delete + restore.

    .venv/bin/python benchmarks/bench_write.py [--data ../shared/data] [--vault obsidian-hub] [--repeat 5]

The vault is copied to a temporary git repository (the copy is what is written). Three notes are
moved back and forth ``--repeat`` times: the most linked-to note, one at the median of notes with
backlinks, and the least linked-to one; each move reads the vault's files (the truth, not the index),
rewrites the links the move changes and commits. Reported per operation: median and p95 wall and
CPU time of the library call, and of the index following it (``sync`` of the changed paths, the
rename kept as a rename), with the notes and links rewritten.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_dream import prepare  # noqa: E402 - a benchmark script's sibling
from common import DEFAULT_DATA, Timer, percentile, print_table, write_result  # noqa: E402

from memory_hub.index.store import Store  # noqa: E402
from memory_hub.index.sync import sync  # noqa: E402
from memory_hub.vault.edit import update_note  # noqa: E402
from memory_hub.vault.editing import note_hash  # noqa: E402
from memory_hub.vault.move import move_note  # noqa: E402
from memory_hub.vault.trash import restore_note, trash_note  # noqa: E402


def _pick(store: Store) -> dict[str, str]:
    rows = store.conn.execute(
        "SELECT n.path, count(l.source_id) AS c FROM notes n LEFT JOIN links l ON l.target_id = n.id "
        "WHERE n.path LIKE '%.md' GROUP BY n.id ORDER BY c DESC, n.path").fetchall()
    linked = [r for r in rows if r["c"] > 0]
    return {"most linked": linked[0]["path"], "median linked": linked[len(linked) // 2]["path"],
            "least linked": rows[-1]["path"]}


def _stats(name: str, times: list[Timer], index: list[Timer], extra: dict[str, object]) -> dict[str, object]:
    wall = [t.seconds * 1000 for t in times]
    cpu = [t.cpu_seconds * 1000 for t in times]
    idx = [t.seconds * 1000 for t in index]
    return {"operation": name, "n": len(times), "p50_ms": round(statistics.median(wall), 1),
            "p95_ms": round(percentile(wall, 95), 1), "cpu_p50_ms": round(statistics.median(cpu), 1),
            "index_p50_ms": round(statistics.median(idx), 1) if idx else 0.0, **extra}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--vault", default="obsidian-hub")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    src = args.data / "vaults" / args.vault
    if not src.is_dir():
        print(f"no vault at {src}", file=sys.stderr)
        return 2
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-write-") as tmp:
        vault = prepare(src, Path(tmp) / "vault")
        store = Store(vault)
        sync(vault, store=store, progress=False)
        notes = store.note_count()
        for label, path in _pick(store).items():
            times, index, relinked, links = [], [], 0, 0
            here, there = path, path.rsplit("/", 1)[0] + "/moved-by-bench.md" if "/" in path else "moved-by-bench.md"
            for _ in range(args.repeat):
                for a, b in ((here, there), (there, here)):
                    with Timer() as t:
                        result = move_note(vault, a, b, expected_hash=note_hash((vault / a).read_bytes()))
                    times.append(t)
                    relinked = len(result.relinked)
                    links = sum(int(str(r["links"])) for r in result.relinked)
                    with Timer() as ti:
                        report = sync(vault, store=store, only=result.paths, renamed={a: b}, progress=False)
                    assert report.renamed == [(a, b)], report.as_dict()
                    index.append(ti)
            rows.append(_stats(f"move_note ({label})", times, index, {"notes_relinked": relinked, "links": links,
                                                                      "note": path}))
        target = _pick(store)["median linked"]
        times, index = [], []
        for i in range(args.repeat):
            with Timer() as t:
                update_note(vault, target, f"- bench line {i}", note_hash((vault / target).read_bytes()))
            times.append(t)
            with Timer() as ti:
                sync(vault, store=store, only=[target], progress=False)
            index.append(ti)
        rows.append(_stats("update_note (append)", times, index, {"note": target}))
        times = []
        for _ in range(args.repeat):
            with Timer() as t:
                trash_note(vault, target, expected_hash=note_hash((vault / target).read_bytes()))
                restore_note(vault, target)
            times.append(t)
        rows.append(_stats("delete_note + restore_note", times, [], {"note": target}))
        store.close()
    print(f"{args.vault}: {notes} notes; under load: {Path('/proc/loadavg').read_text().split()[:3]}")
    print_table(rows, ["operation", "n", "p50_ms", "p95_ms", "cpu_p50_ms", "index_p50_ms", "notes_relinked",
                       "links"])
    out = write_result(f"write-{args.vault}", {"vault": args.vault, "notes": notes, "repeat": args.repeat,
                                                "rows": rows})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
