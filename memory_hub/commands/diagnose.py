"""CLI: ``config`` (every setting, its value and where it came from) and ``doctor`` (is the setup right).

``--json`` shapes (keys may be added, never renamed or removed):

* ``config``: {vault, precedence: [layer], files: {user: {path, exists}, vault: {path, exists}},
               settings: {key: {value, source, layer}}, obsidian_excluded: [filter]}
* ``doctor``: {vault, ok, counts: {pass, warn, fail}, checks: [{name, status, message, fix, data}]}
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .. import config
from .shell import CliError, print_json, settings_of

PRECEDENCE = ["default", "user", "obsidian", "vault", "env", "cli"]


def cmd_config(args: argparse.Namespace) -> int:
    s = settings_of(args)
    path, _source = config.vault_choice(args.vault)
    data = s.as_dict()
    if args.key:
        if args.key not in data:
            raise CliError(f"unknown setting {args.key!r}; `memory-hub config` lists them all")
        if args.json:
            print_json(data[args.key])
        else:
            value = data[args.key]["value"]
            print(" ".join(value) if isinstance(value, list) else ("" if value is None else value))
        return 0
    files = {"user": config.user_config_path(), "vault": config.vault_config_path(path)}
    if args.json:
        print_json({"vault": str(path), "precedence": PRECEDENCE,
                    "files": {k: {"path": str(p), "exists": p.is_file()} for k, p in files.items()},
                    "settings": data, "obsidian_excluded": s.obsidian_excluded})
        return 0
    width = max(len(k) for k in data)
    for key, v in data.items():
        shown = _show(v["value"])
        print(f"{key:<{width}}  {shown:<28}  {v['source']}")
    print()
    for layer, p in files.items():
        print(f"{layer} file: {p}" + ("" if p.is_file() else " (none)"))
    if s.obsidian_excluded:
        print(f"Obsidian's Excluded files (.obsidian/app.json): {', '.join(s.obsidian_excluded)}"
              + ("" if s["ignore.obsidian"] else " (not applied: ignore.obsidian = false)"))
    print("later wins: " + " < ".join(PRECEDENCE))
    return 0


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..eval.doctor import FAIL, PASS, WARN, run_doctor

    report = run_doctor(args.vault, settings_error=getattr(args, "settings_error", None))
    if args.json:
        print_json(report.as_dict())
        return 0 if report.ok else 1
    label = {PASS: "ok  ", WARN: "WARN", FAIL: "FAIL"}
    width = max(len(c.name) for c in report.checks)
    for c in report.checks:
        print(f"{label[c.status]}  {c.name:<{width}}  {c.message}")
        if c.fix and c.status != PASS:
            print(f"      {'':<{width}}  fix: {c.fix}")
    counts = report.counts()
    print(f"\n{counts[PASS]} ok, {counts[WARN]} warnings, {counts[FAIL]} failures"
          + ("" if report.ok else ": fix the failures above"))
    return 0 if report.ok else 1


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("config", cmd_config, "show every setting: its effective value and where it came from")
    p.add_argument("key", nargs="?", help="one setting (e.g. search.k): print only its value")

    add("doctor", cmd_doctor, "check the installation: vault, settings, server, models, index, git, hooks "
        "(exit 1 on a failure)", reports_config_errors=True)
