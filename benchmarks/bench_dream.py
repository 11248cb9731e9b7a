"""Dream pass benchmark: pass time on a copy of obsidian-hub, and precision of proposed links/merges.

    .venv/bin/python benchmarks/bench_dream.py [--vault obsidian-hub] [--runs 3] [--real]

The shared vault is copied to a temp folder (never written in place), its files are given an old
mtime (a fresh copy would otherwise look like "a person is editing everything right now"), and it
is made a git repository. Then:

* ``--runs`` dry-run passes are timed (median and p95 reported; the first run includes fitting);
* with ``--real``, one real pass runs on the copy (each step a commit) and is timed;
* the proposed links and merges of the dry run are written to ``results/dream-proposals.json``;
* precision is computed from ``dream_labels.json`` — pairs judged by hand (see that file's
  ``how`` field); a proposal with no label is reported as unlabelled, not counted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import DEFAULT_DATA, latency_summary, machine, peak_rss_mb, write_result  # noqa: E402
from memory_hub.dream import run_dream  # noqa: E402

LABELS = Path(__file__).resolve().parent / "dream_labels.json"
OLD = dt.datetime(2026, 1, 1).timestamp()


def prepare(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".memory_hub", ".git"))
    for root, _dirs, files in os.walk(dst):
        for name in files:
            os.utime(os.path.join(root, name), (OLD, OLD))
    with open(dst / ".gitignore", "a", encoding="utf-8") as fh:
        fh.write("\n.memory_hub/\n")
    os.utime(dst / ".gitignore", (OLD, OLD))
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "bench copy"]):
        subprocess.run(cmd, cwd=dst, check=True, env=env, capture_output=True)
    return dst


def merge_sample(src: Path, dst: Path, copies: int = 8) -> tuple[Path, set[str]]:
    """A labelled near-duplicate sample made from real notes.

    The obsidian-help-en notes are copied; for ``copies`` of the longer ones (every n-th by path, so
    the choice is deterministic) a second version is added next to them — same title plus " (old)",
    its last paragraph dropped and one sentence added — the way a re-captured note drifts. The true
    merges are exactly (original, its copy); every other proposed merge is a false positive.
    """
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".memory_hub", ".git", ".obsidian"))
    notes = sorted(p for p in dst.rglob("*.md") if len(p.read_text(encoding="utf-8")) > 1500)
    step = max(1, len(notes) // copies)
    truth: set[str] = set()
    for path in notes[::step][:copies]:
        text = path.read_text(encoding="utf-8")
        paras = text.rstrip().split("\n\n")
        dup_text = "\n\n".join(paras[:-1] if len(paras) > 3 else paras) + "\n\nNoted again while re-reading.\n"
        dup = path.with_name(path.stem + " (old).md")
        dup.write_text(dup_text, encoding="utf-8")
        truth.add(key(str(path.relative_to(dst)), str(dup.relative_to(dst))))
    for root, _dirs, files in os.walk(dst):
        for name in files:
            os.utime(os.path.join(root, name), (OLD, OLD))
    return dst, truth


def key(a: str, b: str) -> str:
    return " <-> ".join(sorted((a, b)))


def precision(proposals: list[dict], labels: dict[str, bool]) -> dict[str, object]:
    judged = [labels[p["key"]] for p in proposals if p["key"] in labels]
    good = sum(judged)
    return {"proposed": len(proposals), "judged": len(judged), "correct": good,
            "precision": round(good / len(judged), 3) if judged else None,
            "unlabelled": len(proposals) - len(judged)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vault", default="obsidian-hub")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--vectors", default="lexical", choices=["lexical", "embed", "auto"])
    ap.add_argument("--real", action="store_true", help="also time one real pass on the copy")
    args = ap.parse_args()
    src = DEFAULT_DATA / "vaults" / args.vault
    if not src.is_dir():
        print(f"vault not found: {src}", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="dream-bench-"))
    try:
        vault = prepare(src, work / args.vault)
        notes = sum(1 for _ in vault.rglob("*.md"))
        times, report = [], None
        for _ in range(args.runs):
            t = time.perf_counter()
            report = run_dream(vault, dry_run=True, backend=args.vectors, use_llm=False)
            times.append(time.perf_counter() - t)
        assert report is not None
        steps = {s.name: s for s in report.steps}
        links = [{"key": key(p["a"], p["b"]), **p} for p in steps["links"].proposals]
        merges = [{"key": key(p["winner"], p["loser"]), **p} for p in steps["dedupe"].proposals
                  if not p.get("blocked_by")]
        (Path(__file__).resolve().parent / "results").mkdir(exist_ok=True)
        out_props = Path(__file__).resolve().parent / "results" / "dream-proposals.json"
        out_props.write_text(json.dumps({"links": links, "merges": merges,
                                         "splits": steps["atomicity"].proposals}, indent=1, ensure_ascii=False))
        labels = json.loads(LABELS.read_text(encoding="utf-8")) if LABELS.exists() else {}
        result: dict[str, object] = {
            "vault": args.vault, "notes": notes, "vectors": report.backend,
            "dry_run_seconds": latency_summary(times), "dry_run_step_seconds": report.timings,
            "summary": report.summary(),
            "link_precision": precision(links, {k: v["ok"] for k, v in labels.get("links", {}).items()}),
            "merge_precision": precision(merges, {k: v["ok"] for k, v in labels.get("merges", {}).items()}),
            "splits_proposed": len(steps["atomicity"].proposals),
        }
        help_src = DEFAULT_DATA / "vaults" / "obsidian-help-en"
        if help_src.is_dir():
            sample, truth = merge_sample(help_src, work / "merge-sample")
            rep = run_dream(sample, dry_run=True, backend=args.vectors, use_llm=False, steps=("dedupe",))
            found = {key(p["winner"], p["loser"]) for p in rep.steps[0].proposals if not p.get("blocked_by")}
            result["merge_sample"] = {
                "vault": "obsidian-help-en + 8 drifted copies", "true_pairs": len(truth),
                "proposed": len(found), "correct": len(found & truth),
                "precision": round(len(found & truth) / len(found), 3) if found else None,
                "recall": round(len(found & truth) / len(truth), 3) if truth else None,
                "false": sorted(found - truth), "missed": sorted(truth - found)}
        if args.real:
            from memory_hub.index.sync import sync

            t = time.perf_counter()
            sync(vault, progress=False)  # an hourly pass finds the index built; time that apart
            result["index_build_seconds"] = round(time.perf_counter() - t, 2)
            t = time.perf_counter()
            real = run_dream(vault, backend=args.vectors, use_llm=False)
            result["real_pass_seconds"] = round(time.perf_counter() - t, 2)
            result["real_pass_summary"] = real.summary()
            result["real_pass_commits"] = len(real.commits)
        result["peak_rss_mb"] = peak_rss_mb()
        result["machine"] = machine()
        path = write_result(f"dream-{args.vault}-{report.backend}", result)
        print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1, ensure_ascii=False))
        print(f"wrote {path} and {out_props}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
