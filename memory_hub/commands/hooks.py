"""CLI: ``hook``, ``install-hooks``, ``recall`` and ``stats`` (recall on every prompt, docs/hooks.md)."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time
from pathlib import Path
from typing import Any

from .. import config
from .search import ask_server
from .shell import CliError, budget, print_json, settings_of, vault_path, warn


def cmd_hook(args: argparse.Namespace) -> int:
    """Always exit 0: a hook must never block or fail the agent."""
    if args.agent == "codex":
        from ..hooks.codex import run

        return run(args.vault, detach=True)
    from ..hooks.claude_code import run

    return run("claude-code", args.vault, detach=True)


def _project(args: argparse.Namespace) -> Path | None:
    if args.local and not args.project:
        return Path.cwd()
    if not args.project:
        return None
    project = Path(args.project).expanduser().resolve()
    if not project.is_dir():
        raise CliError(f"project folder not found: {project}")
    return project


def cmd_install_hooks(args: argparse.Namespace) -> int:
    from ..hooks.install import InstallError, install, uninstall

    project = _project(args)
    try:
        if args.uninstall:
            out = uninstall(args.agent, project=project, local=args.local)
        else:
            vault, source = config.vault_choice(args.vault)
            pin = vault if vault.is_dir() and not args.unpinned else None
            if pin is None and not args.unpinned:
                out_warning = (f"no vault at {vault} (chosen by {source}), so the hooks pin none: each run looks "
                               "for $MEMORY_HUB_VAULT, the user settings or the default vault, and does nothing "
                               "(saying so on stderr) when there is none. Create the vault (`memory-hub init`) "
                               "and install again to pin it.")
            else:
                out_warning = None
            out = install(args.agent, project=project, vault=pin, local=args.local)
            if out_warning:
                out["warnings"].insert(0, out_warning)
    except InstallError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    if args.uninstall:
        print(f"{args.agent} hooks: removed {out['removed']} from {out['path']}"
              + (" (the file held nothing else and was deleted)" if out["deleted_file"] else "")
              if out["changed"] else f"{args.agent} hooks: none installed in {out['path']}")
        return 0
    state = "updated" if out["changed"] else "already up to date"
    print(f"{args.agent} hooks {state}: {out['path']} ({', '.join(out['events'])})")
    print(f"  command: {out['command']}")
    print(f"  vault:   {out['vault'] or '(not pinned: resolved each time a hook runs)'}")
    for w in out["warnings"]:
        warn(w)
    if out.get("note"):
        print(f"note: {out['note']}")
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    vault = vault_path(args)
    if args.budget is None:
        args.budget = settings_of(args)["hooks.budget"]
    t0 = time.perf_counter()
    out = reply = None
    if not args.in_process:
        reply = ask_server(vault, {"op": "recall", "prompt": args.prompt, "session_id": args.session,
                                   "budget": args.budget, "cwd": str(Path.cwd())})
        out = reply if reply and reply.get("ok") else None
    if out is None:
        from ..hooks.prompt import answer
        from ..team.recall import cold_recaller

        why = reply.get("error") if reply else None  # a server that could not answer: say why
        out = answer(cold_recaller(vault, Path.cwd()), args.prompt, args.session, served_by="cli", budget=args.budget, fallback=why)
    event = out["telemetry"]
    if args.json:
        print_json({"block": out["block"], "injected": out["injected"], "mode": event.get("mode"),
                    "mode_chosen": event.get("mode_chosen"), "confidence": event.get("confidence"),
                    "tokens": event.get("tokens"), "skipped": event.get("skipped"),
                    "fallback": event.get("fallback"), "served_by": event.get("served_by"),
                    "search_mode": event.get("search_mode"), "low_confidence": event.get("low_confidence"),
                    "hint": event.get("hint"), "warnings": event.get("warnings") or [],
                    "vaults": (event.get("vaults") or {}).get("asked"),
                    "ms": round((time.perf_counter() - t0) * 1000, 1)})
        return 0
    for warning in event.get("warnings") or []:
        print(f"warning: {warning}", file=sys.stderr)
    if out["block"]:
        print(out["block"])
    else:
        print(f"(no block: {event.get('skipped') or 'nothing relevant'})")
    print(f"mode={event.get('mode')} (chosen {event.get('mode_chosen')}), confidence={event.get('confidence')}, "
          f"{event.get('tokens')} tokens, {event.get('candidates')} candidates, served by {event.get('served_by')}"
          + f", search {event.get('search_mode')}, hint: {event.get('hint_path')}"
          + (f", fallback: {event['fallback']}" if event.get("fallback") else ""), file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from ..eval.telemetry import summarize

    vault = vault_path(args)
    since = time.time() - args.days * 86400 if args.days else None
    data = summarize(vault, since)
    data["usage"] = _usage(vault)
    if args.json:
        print_json(data)
        return 0
    if not data["recalls"] and not data["usage"]["top"]:
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
    if data["usage"]["top"]:
        print("most used (judged useful, read):")
        for item in data["usage"]["top"]:
            print(f"  {item['useful']:4} {item['reads']:5}  {item['path']}")
    return 0


def _usage(vault: Path) -> dict[str, Any]:
    """Usage counts beside the telemetry: the index's usage API, the one every reader uses."""
    from ..index import usage
    from ..index.store import Store

    store = Store(vault)
    usage.fold(store, vault, wait=False)
    return {**usage.summary(store, vault), "top": [{"path": p, **u.as_dict()} for p, u in usage.top(store)]}


def register(add: Any) -> None:
    p = add("hook", cmd_hook, "run as an agent hook: reads the event JSON on stdin (always exits 0)")
    p.add_argument("agent", choices=["claude-code", "codex"])

    p = add("install-hooks", cmd_install_hooks,
            "write (or --uninstall) an agent's hook settings; idempotent, other hooks are kept")
    p.add_argument("agent", choices=["claude-code", "codex"])
    p.add_argument("--project", help="project folder (default: the user-level settings in your home folder)")
    p.add_argument("--local", action="store_true",
                   help="Claude Code's .claude/settings.local.json of the project (default: this folder), "
                        "which is not committed: the place for a person's absolute paths")
    p.add_argument("--uninstall", action="store_true", help="remove Memory Hub's hooks from that file, nothing else")
    p.add_argument("--unpinned", action="store_true",
                   help="do not pin the vault: hooks resolve it each run ($MEMORY_HUB_VAULT, settings, default)")

    p = add("recall", cmd_recall, "show the <vault-memory> block recall would inject for a prompt")
    p.add_argument("prompt")
    p.add_argument("--session", help="session id: notes already shown in it are not repeated")
    p.add_argument("--budget", type=budget, default=None, help="token budget of the block (default: hooks.budget, 1200)")
    p.add_argument("--in-process", action="store_true", help="recall in this process even when a server runs")

    p = add("stats", cmd_stats, "summarise recall telemetry: paths served, modes, latency, fallbacks")
    p.add_argument("--days", type=float, help="only the last N days")
