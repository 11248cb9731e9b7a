"""CLI: ``hook``, ``install-hooks``, ``recall`` and ``stats`` (recall on every prompt, issue 5)."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path
from typing import Any


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _vault(args: argparse.Namespace) -> Path:
    from ..cli import CliError
    from ..config import ConfigError, resolve_vault

    try:
        return resolve_vault(args.vault)
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def cmd_hook(args: argparse.Namespace) -> int:
    """Always exit 0: a hook must never block or fail the agent."""
    if args.agent == "codex":
        from ..hooks.codex import run

        return run(args.vault)
    from ..hooks.claude_code import run

    return run("claude-code", args.vault)


def cmd_install_hooks(args: argparse.Namespace) -> int:
    from ..cli import CliError
    from ..hooks.install import InstallError, install

    vault = Path(args.vault).expanduser().resolve() if args.vault else None
    project = Path(args.project).expanduser().resolve() if args.project else None
    if project is not None and not project.is_dir():
        raise CliError(f"project folder not found: {project}")
    try:
        out = install(args.agent, project=project, vault=vault)
    except InstallError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _print_json(out)
    else:
        state = "updated" if out["changed"] else "already up to date"
        print(f"{args.agent} hooks {state}: {out['path']} ({', '.join(out['events'])})")
        if out.get("note"):
            print(f"note: {out['note']}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    from ..hooks.prompt import answer
    from ..retrieval.recall import Recaller

    vault = _vault(args)
    t0 = time.perf_counter()
    recaller = Recaller(vault)
    out = answer(recaller, args.prompt, args.session, served_by="cli", budget=args.budget)
    event = out["telemetry"]
    if args.json:
        _print_json({"block": out["block"], "injected": out["injected"], "mode": event.get("mode"),
                     "mode_chosen": event.get("mode_chosen"), "confidence": event.get("confidence"),
                     "tokens": event.get("tokens"), "skipped": event.get("skipped"),
                     "fallback": event.get("fallback"), "search_mode": event.get("search_mode"),
                     "low_confidence": event.get("low_confidence"), "hint": event.get("hint"), "ms": round((time.perf_counter() - t0) * 1000, 1)})
        return 0
    if out["block"]:
        print(out["block"])
    else:
        print(f"(no block: {event.get('skipped') or 'nothing relevant'})")
    print(f"mode={event.get('mode')} (chosen {event.get('mode_chosen')}), confidence={event.get('confidence')}, "
          f"{event.get('tokens')} tokens, {event.get('candidates')} candidates"
          + f", search {event.get('search_mode')}, hint: {event.get('hint_path')}"
          + (f", fallback: {event['fallback']}" if event.get("fallback") else ""), file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from ..eval.telemetry import summarize

    vault = _vault(args)
    since = time.time() - args.days * 86400 if args.days else None
    data = summarize(vault, since)
    if args.json:
        _print_json(data)
        return 0
    if not data["recalls"]:
        print("no recalls recorded yet (they are logged when hooks or `memory-hub recall` run)")
        return 0

    def when(ts: float | None) -> str:
        return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"

    print(f"recalls: {data['recalls']} ({data['with_block']} with a block), {when(data['first'])} → {when(data['last'])}")
    for key in ("served_by", "mode_chosen", "mode_final", "confidence", "skipped", "fallback", "hint_path"):
        if data[key]:
            print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in sorted(data[key].items(), key=lambda kv: -kv[1])))
    for path, lat in data["latency_ms"].items():
        print(f"latency {path}: p50 {lat['p50']} ms, p95 {lat['p95']} ms (n={lat['n']})")
    if data["block_tokens"]:
        print(f"block tokens: p50 {data['block_tokens']['p50']}, max {data['block_tokens']['max']}")
    if data["top_injected"]:
        print("most injected:")
        for path, n in data["top_injected"]:
            print(f"  {n:4}  {path}")
    return 0


def register(add: Any) -> None:
    p = add("hook", cmd_hook, "run as an agent hook: reads the event JSON on stdin (always exits 0)")
    p.add_argument("agent", choices=["claude-code", "codex"])

    p = add("install-hooks", cmd_install_hooks, "write an agent's hook settings (idempotent, keeps other hooks)")
    p.add_argument("agent", choices=["claude-code", "codex"])
    p.add_argument("--project", help="project folder (default: the user-level settings in your home folder)")

    p = add("recall", cmd_recall, "show the <vault-memory> block recall would inject for a prompt")
    p.add_argument("prompt")
    p.add_argument("--session", help="session id: notes already shown in it are not repeated")
    p.add_argument("--budget", type=int, default=1200, help="token budget of the block (default 1200)")

    p = add("stats", cmd_stats, "summarise recall telemetry: paths served, modes, latency, fallbacks")
    p.add_argument("--days", type=float, help="only the last N days")
