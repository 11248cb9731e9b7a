"""Telemetry: one JSON line per recall (and per hook event) under ``<vault>/.memory_hub/telemetry/``.

Enough to reconstruct why a turn got what it got: time, the mode chosen and the mode finally used,
the confidence band, how many candidates there were, which notes were injected, latency, whether a
warm server or a cold in-process run served it, and any fallback reason. It is a cache like every
other file under ``.memory_hub``: deleting it loses history, never notes.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import index_dir, state_home

FILENAME = "recall.jsonl"
MAX_BYTES = 5 * 1024 * 1024  # rotate to recall.1.jsonl beyond this
NO_VAULT = "no-vault.jsonl"


def folder(vault: Path) -> Path:
    return index_dir(Path(vault)) / "telemetry"


def record(vault: Path, event: dict[str, Any], name: str = FILENAME) -> None:
    """Append one event (``ts`` added when missing). Never raises: telemetry must not break a hook."""
    _append(folder(vault) / name, event)


def record_without_vault(event: dict[str, Any]) -> None:
    """A hook that found no vault has none to log into: a per-user log (``doctor`` reads it)."""
    _append(state_home() / "telemetry" / NO_VAULT, event)


def events_without_vault() -> Iterator[dict[str, Any]]:
    yield from _read([state_home() / "telemetry" / NO_VAULT])


def _append(target: Path, event: dict[str, Any]) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {"ts": round(time.time(), 3), **event}
        line = json.dumps(data, ensure_ascii=False, default=str) + "\n"
        try:
            if target.stat().st_size > MAX_BYTES:
                os.replace(target, target.with_name(target.stem + ".1.jsonl"))
        except FileNotFoundError:
            pass
        # One write() of a short line in append mode: concurrent hooks do not interleave lines.
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line)
    except OSError:
        pass


PROMPT_CHARS = 2000  # of a prompt kept in telemetry (after redaction)


def prompt_fields(vault: Path, prompt: str, block: str) -> dict[str, Any]:
    """What a recall line keeps of its prompt and block for the timeline (``memory-hub serve``'s web
    page): the prompt with secrets redacted (``vault/redact.py``) and cut to ``PROMPT_CHARS``, and
    the block as injected. Nothing with ``telemetry.prompts = "off"``; never raises."""
    try:
        from ..config import settings

        if settings(vault)["telemetry.prompts"] == "off":
            return {}
        from ..vault.redact import redact

        text = redact(prompt or "")
        return {"prompt": text[:PROMPT_CHARS] + ("…" if len(text) > PROMPT_CHARS else ""), "block": block or ""}
    except Exception as exc:  # noqa: BLE001 - telemetry must not break a hook
        return {"prompt_error": f"{type(exc).__name__}: {exc}"[:200]}


def events(vault: Path, name: str = FILENAME) -> Iterator[dict[str, Any]]:
    """Recorded events, oldest first (rotated file included); broken lines are skipped."""
    base = folder(vault)
    yield from _read([base / (Path(name).stem + ".1.jsonl"), base / name])


def _read(paths: list[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        if not path.exists():
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            for raw in fh:
                try:
                    item = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(item, dict):
                    yield item


def _pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))], 2)


def summarize(vault: Path, since: float | None = None) -> dict[str, Any]:
    """Counts and latencies of recalls: by path served, mode, confidence, fallback reason."""
    recalls = [e for e in events(vault) if e.get("event") == "recall" and (since is None or e.get("ts", 0) >= since)]
    latency: dict[str, list[float]] = {}
    for e in recalls:
        if isinstance(e.get("latency_ms"), (int, float)):
            latency.setdefault(str(e.get("served_by", "?")), []).append(float(e["latency_ms"]))
    injected = Counter(p for e in recalls for p in e.get("injected", []) or [])
    tokens = [e["tokens"] for e in recalls if isinstance(e.get("tokens"), int) and e.get("tokens")]
    return {
        "recalls": len(recalls),
        "with_block": sum(1 for e in recalls if e.get("injected")),
        "served_by": dict(Counter(str(e.get("served_by", "?")) for e in recalls)),
        "mode_chosen": dict(Counter(str(e.get("mode_chosen")) for e in recalls)),
        "mode_final": dict(Counter(str(e.get("mode")) for e in recalls)),
        "confidence": dict(Counter(str(e.get("confidence")) for e in recalls)),
        "fallback": dict(Counter(str(e["fallback"]) for e in recalls if e.get("fallback"))),
        "skipped": dict(Counter(str(e["skipped"]) for e in recalls if e.get("skipped"))),
        "hint_path": dict(Counter(str(e["hint_path"]) for e in recalls if e.get("hint_path"))),
        "latency_ms": {k: {"p50": round(statistics.median(v), 2), "p95": _pct(v, 95), "n": len(v)}
                       for k, v in latency.items()},
        "block_tokens": {"p50": statistics.median(tokens), "max": max(tokens)} if tokens else {},
        "top_injected": injected.most_common(10),
        "first": recalls[0]["ts"] if recalls else None,
        "last": recalls[-1]["ts"] if recalls else None,
    }
