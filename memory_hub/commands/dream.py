"""CLI: dream [--dry-run] [--split] [--vectors auto|lexical|embed] [--reject COMMIT|KEY]."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .shell import CliError, print_json, vault_path


def cmd_reject(args: argparse.Namespace) -> int:
    from ..dream.rejected import RejectError, commit_rejections, reject
    from ..vault.git import GitError

    vault = vault_path(args)
    out = []
    try:
        for ref in args.reject:
            keys, path = reject(vault, ref)
            out.append({"ref": ref, "keys": keys, "new": path is not None})
        commit = commit_rejections(vault)
    except (RejectError, GitError, OSError) as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json({"rejected": out, "commit": commit})
        return 0
    for item in out:
        state = "remembered" if item["new"] else "already remembered"
        print(f"{state}: {len(item['keys'])} proposal(s) of {item['ref']} will not be proposed again")
        for key in item["keys"]:
            print(f"  {key}")
    if commit:
        print(f"commit {commit[:10]} (.memory-hub/dream/rejected/)")
    print("this only remembers; to undo a dream commit's change as well, `git revert` it (a revert is "
          "remembered on its own)")
    return 0


def cmd_dream(args: argparse.Namespace) -> int:
    from ..dream import DreamError, run_dream

    if args.reject:
        return cmd_reject(args)
    vault = vault_path(args)
    try:
        report = run_dream(vault, dry_run=args.dry_run, backend=args.vectors, split=args.split,
                           use_llm=False if args.no_llm else None, max_links=args.max_links)
    except DreamError as exc:
        raise CliError(str(exc)) from None
    if args.dry_run:  # kept for review, with diffs, on the web page's /health (dream/proposals.py)
        from ..dream import proposals

        try:
            proposals.save(vault, proposals.from_report(vault, report))
        except OSError as exc:
            report.warnings.append(f"plan not saved for review: {exc}")
    if args.json:
        print_json(report.as_dict())
        return 0
    print(report.summary())
    for item in report.recovered:
        print(f"  recovered an interrupted step: {item['action']}"
              + (f" (commit {str(item['commit'])[:10]})" if item.get("commit") else "")
              + (f": {item['reason']}" if item.get("reason") else ""))
    if report.rejected.get("new"):
        print(f"  remembered {report.rejected['new']} reverted dream commit(s) as rejected; "
              "their proposals are not made again")
    for kind, paths in report.skipped_notes.items():
        if kind in ("template", "daily"):
            continue
        shown = ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")
        print(f"  not touched ({kind.replace('_', ' ')}): {shown}")
    for step in report.steps:
        for action in step.actions:
            print(f"  {step.name}: {planned(action) if args.dry_run else action}")
        if step.name == "atomicity" and not step.actions:
            for p in step.proposals:
                print(f"  atomicity: proposed split of {p['path']} (cohesion {p['cohesion']}) before {p['split_before']!r}")
        if step.commit:
            print(f"  {step.name}: commit {step.commit[:10]} (revert with `git revert {step.commit[:10]}`)")
        for skipped in step.skipped:
            print(f"  {step.name}: skipped {skipped}")
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


_PAST = {"removed": "would remove", "merged": "would merge", "folded": "would fold", "split": "would split",
         "new note": "would create the note", "cited": "would cite"}


def planned(action: str) -> str:
    """A dry run's action in the conditional: the library reports what a real pass does ("merged …")."""
    for past, would in _PAST.items():
        if action.startswith(past + " "):
            return would + action[len(past):]
        if f": {past} " in action:
            return action.replace(f": {past} ", f": {would} ", 1)
    return f"would link {action}" if " → " in action else f"would: {action}"


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("dream", cmd_dream, "consolidation pass: promote captures, add links, merge duplicates (one commit per step)")
    p.add_argument("--dry-run", action="store_true", help="plan every step, write nothing")
    p.add_argument("--split", action="store_true", help="split multi-topic notes instead of only proposing it")
    p.add_argument("--vectors", default=None, choices=["auto", "lexical", "embed"],
                   help="text vectors: e5 embeddings or lexical TF-IDF (default auto)")
    p.add_argument("--no-llm", action="store_true", help="do not use the LLM endpoint even when configured")
    p.add_argument("--max-links", type=int, default=None, help="at most this many new links per pass (default 60)")
    p.add_argument("--reject", action="append", metavar="COMMIT|KEY",
                   help="never propose again what this dream commit did (or this proposal key from --dry-run "
                        "--json); repeatable; a `git revert` of a dream commit is remembered without this")
