"""CLI: braindump, lookahead, learnings, autocommit, schedule."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from .shell import CliError, print_json, vault_path


def capture_target(args: argparse.Namespace, tags: list[str] | None = None) -> tuple[Path, str | None]:
    """The vault a capturing command writes to: the one ``--vault`` names (a path, or a team vault's
    name), else a team vault whose ``capture_tags`` the capture carries (``vaults.capture_vault``, as the
    MCP ``capture`` tool routes); and that team vault's name when it is not the one ``--vault`` chose."""
    from ..config import ConfigError
    from ..vaults import capture_vault

    vault = vault_path(args)
    try:
        ref = capture_vault(vault, None, tags or [])
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return ref.path, (ref.name if ref.path != vault else None)


def cmd_braindump(args: argparse.Namespace) -> int:
    from ..capture import CaptureError, braindump

    vault, routed = capture_target(args, args.tag)
    text = sys.stdin.read() if args.text == "-" else args.text
    try:
        result = braindump(vault, text, title=args.title, kind=args.kind, tags=args.tag, links=args.link,
                           scope=args.scope, fetch_urls=args.fetch)
    except CaptureError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json({**result.as_dict(), **({"vault": routed, "vault_path": str(vault)} if routed else {})})
        return 0
    if routed:
        print(f"to team vault {routed} ({vault}): its capture_tags claim this capture")
    print(f"captured {result.path} (scope {result.scope}{', due ' + result.due if result.due else ''}"
          f"{', deadline ' + result.deadline if result.deadline else ''})")
    if result.daily:
        print(f"linked from {result.daily}")
    for action in result.actions:
        print(f"  action: {action}")
    if result.tags:
        print(f"  tags: {', '.join(result.tags)}")
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_lookahead(args: argparse.Namespace) -> int:
    from ..capture.lookahead import iter_notes, lint, lookahead

    vault = vault_path(args)
    notes = iter_notes(vault)
    if args.lint:
        found = lint(vault, notes=notes, include_past=args.all)
        if args.json:
            print_json({"unstructured_deadlines": [f.as_dict() for f in found]})
        elif not found:
            print("no deadline sits only in prose")
        else:
            print(f"{len(found)} deadline(s) in prose that no due/deadline field holds:")
            for f in found:
                held = ", ".join(f"{k}: {v}" for k, v in f.fields.items()) or "no field"
                print(f"  {f.path}:{f.line}  {f.text!r} → {f.date}  ({held})")
        return 1 if found and args.strict else 0
    items = lookahead(vault, days=args.days, notes=notes)
    if args.json:
        print_json({"days": args.days, "items": [i.as_dict() for i in items]})
        return 0
    if not items:
        print(f"nothing due in the next {args.days} day(s)")
        return 0
    for i in items:
        when = (f"{-i.days_left}d overdue" if i.state == "overdue" else "today" if i.state == "today"
                else f"in {i.days_left}d")
        print(f"{i.date}  {when:<12} {i.field:<8} {i.title}  ({i.path})")
    return 0


def cmd_learnings(args: argparse.Namespace) -> int:
    from ..capture.learnings import TranscriptError, learnings_from_text, learnings_from_transcript
    from ..vault.walk import OutsideVault, UnreadableNote

    vault = capture_target(args)[0]  # the vault --vault names (a path or a team vault's name)
    try:
        if args.source == "-":
            report = learnings_from_text(vault, sys.stdin.read(), dry_run=args.dry_run)
        else:
            report = learnings_from_transcript(vault, args.source, dry_run=args.dry_run)
    except (OutsideVault, UnreadableNote, TranscriptError, FileNotFoundError) as exc:
        raise CliError(f"cannot read transcript {args.source}: {exc}") from None
    if args.json:
        print_json(report.as_dict())
        return 0
    print(f"judge: {report.judge}; {len(report.candidates)} candidate(s), {len(report.written)} written")
    for c in report.candidates:
        where = c.path or ("(dry run)" if c.verdict != "duplicate" else "")
        near = f" ~ {c.matches[0]['path']}" if c.matches else ""
        print(f"  [{c.verdict}] {c.title} {where}{near}")
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0


def cmd_autocommit(args: argparse.Namespace) -> int:
    from ..capture.autocommit import AutocommitError, autocommit

    vault = vault_path(args)
    try:
        report = autocommit(vault, message=args.message)
    except AutocommitError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(report.as_dict())
        return 0
    for note in report.notes:
        print(f"note: {note}")
    if report.committed:
        print(f"committed {report.commit[:10] if report.commit else ''}: {report.message}")
    elif report.skipped:
        print(f"not committed: {report.skipped}")
    elif report.blocked:
        print(f"nothing to commit; later changes wait too: {report.blocked}")
    else:
        print("nothing to commit")
    return 0


def cmd_schedule(args: argparse.Namespace) -> int:
    from ..capture import schedule
    from ..launcher import launcher

    vault = vault_path(args)
    if args.install or args.uninstall:
        kind = args.kind or schedule.default_kind()
        try:
            done = (schedule.uninstall if args.uninstall else schedule.install)(vault, kind=kind)
        except (ValueError, OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", None) or exc
            raise CliError(f"could not {'uninstall' if args.uninstall else 'install'} the schedule: {detail}") from None
        warnings = [] if args.uninstall or not launcher().warning else [launcher().warning]
        if args.json:
            print_json({"uninstalled" if args.uninstall else "installed": kind, "done": done, "warnings": warnings})
        else:
            print("\n".join(done))
            for w in warnings:
                print(f"warning: {w}", file=sys.stderr)
        return 0
    entries = [e for e in schedule.entries(vault) if not args.kind or e.kind == args.kind]
    if args.json:
        print_json([e.__dict__ for e in entries])
        return 0
    for e in entries:
        print(f"# {e.kind}" + (f": {e.path}" if e.path else ": add with `crontab -e`"))
        print(e.text)
    print(f"# install one with: memory-hub --vault {vault} schedule --install [--kind cron|systemd|launchd]"
          f" (default here: {schedule.default_kind()}); remove it with --uninstall")
    return 0


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("braindump", cmd_braindump, "capture text (or - for stdin) into inbox/, classified, dated and linked")
    p.add_argument("text", help="the text, or - to read stdin")
    p.add_argument("--title")
    p.add_argument("--kind", help="capture (default), tracker, decision, runbook, knowledge")
    p.add_argument("--scope", choices=["personal", "work", "project"], help="override the classified scope")
    p.add_argument("--tag", action="append", help="extra tag (repeatable)")
    p.add_argument("--link", action="append", help="note to link from the capture (repeatable)")
    fetch = p.add_mutually_exclusive_group()
    fetch.add_argument("--fetch", dest="fetch", action="store_true", default=None,
                       help="fetch every URL in the text (default: capture.fetch_urls — only a capture that is "
                            "just a URL is fetched)")
    fetch.add_argument("--no-fetch", dest="fetch", action="store_false", help="fetch nothing")

    p = add("lookahead", cmd_lookahead, "what is due or overdue, from the due/deadline fields")
    p.add_argument("--days", type=int, default=7, help="look this many days ahead (default 7)")
    p.add_argument("--lint", action="store_true", help="report deadlines stated in prose that no field holds")
    p.add_argument("--strict", action="store_true", help="with --lint: exit 1 when something is found")
    p.add_argument("--all", action="store_true", help="with --lint: include deadlines long past")

    p = add("learnings", cmd_learnings, "extract session learnings from a saved transcript capture")
    p.add_argument("source", help="a transcript: a vault-relative capture, an agent's transcript file anywhere "
                                  "(read only, e.g. ~/.claude/projects/…/SESSION.jsonl), or - for stdin")
    p.add_argument("--dry-run", action="store_true", help="show candidates, write nothing")

    p = add("autocommit", cmd_autocommit, "commit vault changes (never index files, never mid-merge/rebase)")
    p.add_argument("-m", "--message", help="commit message (default: names what changed)")

    p = add("schedule", cmd_schedule, "print (or install) cron/systemd/launchd entries for autocommit and dream")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--install", action="store_true", help="install the entries instead of printing them")
    action.add_argument("--uninstall", action="store_true", help="remove the entries --install added for this vault")
    p.add_argument("--kind", choices=["cron", "systemd", "launchd"])
