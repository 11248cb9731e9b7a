"""CLI: ``usage`` — how notes are used (reads, useful), publishing it to git, and the opt-in mirror."""

from __future__ import annotations

import argparse
import datetime as _dt
from typing import Any

from .shell import CliError, print_json, vault_path


def cmd_usage(args: argparse.Namespace) -> int:
    vault = vault_path(args)
    if args.action == "publish":
        return _publish(vault, args)
    if args.action == "mirror":
        return _mirror(vault, args)
    from ..index import usage
    from ..index.store import Store

    store = Store(vault)
    folded = usage.fold(store, vault)
    summary = usage.summary(store, vault)
    top = usage.top(store, args.top)
    if args.json:
        print_json({**summary, "problems": [f"{p}: {r}" for p, r in folded.problems],
                     "notes": [{"path": p, **u.as_dict()} for p, u in top]})
        return 0
    for where, reason in folded.problems:
        print(f"warning: {where}: {reason}")
    print(f"{summary['events']} usage event(s) from {len(summary['machines'])} machine(s); "
          f"{summary['notes_read']} note(s) read, {summary['notes_useful']} judged useful; "
          f"{summary['unpublished']} not yet published to git")
    for path, u in top:
        last = _dt.datetime.fromtimestamp(u.last_read).strftime("%Y-%m-%d") if u.last_read else "-"
        print(f"  {u.reads:5} read  {u.useful:4} useful  last {last}  {path}")
    return 0


def _publish(vault: Any, args: argparse.Namespace) -> int:
    from ..capture.usage_mirror import MirrorError, publish_and_commit

    try:
        moved, commit = publish_and_commit(vault)
    except MirrorError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json({"published": moved, "commit": commit})
    else:
        print(f"published {moved} event(s)" + (f"; committed {commit[:10]}" if commit else "; nothing to commit"))
    return 0


def _mirror(vault: Any, args: argparse.Namespace) -> int:
    from ..capture.usage_mirror import MirrorError, mirror

    try:
        report = mirror(vault, quiet_s=args.quiet_minutes * 60, dry_run=args.dry_run)
    except MirrorError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(report.as_dict())
        return 0
    verb = "would write" if report.dry_run else "wrote"
    print(f"{verb} counts into {len(report.written)} note(s); {report.unchanged} already up to date"
          + (f"; commit {report.commit[:10]}" if report.commit else ""))
    for path, reason in report.skipped:
        print(f"  skipped {path}: {reason}")
    return 0


def register(add: Any) -> None:
    p = add("usage", cmd_usage, "how notes are used (reads, judged useful); publish it to git; mirror it into notes")
    p.add_argument("action", nargs="?", default="show", choices=["show", "publish", "mirror"],
                   help="show (default): counts; publish: commit this machine's usage log; "
                        "mirror: write access_count/useful_count into notes' frontmatter (opt-in, one commit)")
    p.add_argument("--top", type=int, default=20, help="notes to list (show)")
    p.add_argument("--quiet-minutes", type=float, default=10.0,
                   help="mirror: leave notes modified this recently alone (default 10)")
    p.add_argument("--dry-run", action="store_true", help="mirror: say what would be written, write nothing")
