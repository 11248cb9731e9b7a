"""CLI: ``init``, ``index``, ``status`` — making a vault, keeping its indexes current, and its state.

``--json`` shapes (keys may be added, never renamed or removed):

* ``init``:   {vault, outcome: created|adopted|existing, git_created, commit (sha or null),
               uncommitted: [path], index: <index report>, recall: {notes, changed, removed, …}}
* ``index``:  {added, updated, deleted: [path], renamed: [[old, new]], unchanged: int,
               skipped: [{path, reason}], problems: [{path, problem}], links_resolved: int,
               usage_events: int, seconds: float, interrupted: bool, recall: {…}} (+ ``vectors`` and ``coverage``
               unless --no-vectors)
* ``status``: {vault, index, notes, attachments, kinds: {kind: n}, ranked_notes, links, dangling_links,
               last_sync, pending_changes, problems: ["path: problem"], vectors: <coverage> or null,
               usage: {events, notes_read, notes_useful, machines, unpublished, unpublished_since, bad_lines},
               conflicts: [{copy, note, when, who}] (sync conflict copies waiting to be merged)}
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .shell import CliError, print_json, vault_path


def build_recall_index(vault: Path, index: Any = None, walked: dict[str, tuple[int, int]] | None = None
                       ) -> dict[str, Any]:
    """Recall's own index, so the first prompts take the steady-state path instead of building it.
    ``index``: one the sync already filled (``recall_for_sync``): only what it did not parse is read;
    ``walked``: that sync's walk (``SyncReport.walked``), so the vault is not walked twice."""
    if index is None:
        index = recall_for_sync(vault)
    stats = dict(index.refresh(walked=walked))
    stats["notes"] = len(index.data.notes)
    return stats


def recall_for_sync(vault: Path) -> Any:
    """Recall's index, loaded, to be filled by a sync's ``note_hook`` (one parse of each note)."""
    from ..retrieval.recall import RecallIndex

    index = RecallIndex(vault)
    index.load()
    return index


def _recall_summary(stats: dict[str, Any]) -> str:
    return f"recall index: {stats.get('notes', 0)} notes"


def _ask(question: str) -> bool:
    """A yes/no question, only when a person is at the terminal (never in scripts or pipes)."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def cmd_init(args: argparse.Namespace) -> int:
    from ..index.sync import sync
    from ..vault.create import NotAFolder, init_vault
    from ..vault.git import GitError, commit_all

    path = Path(args.init_path).expanduser().resolve() if args.init_path else vault_path(args, must_exist=False)
    try:
        result = init_vault(path, commit=args.commit)
        if result.outcome != "created" and result.uncommitted and not args.commit and not args.json and _ask(
                f"{len(result.uncommitted)} files in {path} are not committed to git; commit them now?"):
            result.commit = commit_all(path, "Memory Hub: first commit of the existing notes")
            result.uncommitted = []
    except NotAFolder as exc:
        raise CliError(str(exc)) from None
    except GitError as exc:
        raise CliError(f"{path}: {exc}") from None
    report = sync(path, progress=False if args.json else None)
    recall = build_recall_index(path)
    if args.json:
        print_json({"vault": str(path), "outcome": result.outcome, "git_created": result.git_created,
                    "commit": result.commit, "uncommitted": result.uncommitted, "index": report.as_dict(),
                    "recall": recall})
        return 0
    said = {"created": "created a vault from the starter template at",
            "adopted": "adopted the folder as a vault:",
            "existing": "already a vault:"}[result.outcome]
    print(f"{said} {path}")
    print(f"indexed: {report.summary()}; {_recall_summary(recall)}")
    if result.commit and result.outcome != "created":
        print(f"committed the existing files: {result.commit[:10]}")
    if result.uncommitted:
        print(f"note: {len(result.uncommitted)} files are not committed to git; autocommit and dream leave "
              f"uncommitted notes alone. Commit them with `memory-hub init --commit {path}`.")
    print("next: `memory-hub index` adds vectors (semantic search); `memory-hub doctor` checks the setup")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from ..index.sync import SyncInterrupted, sync

    vault = vault_path(args)
    recall_index = recall_for_sync(vault)
    try:
        report = sync(vault, rebuild=args.rebuild, progress=False if args.json else None,
                      note_hook=recall_index.note_hook())
    except SyncInterrupted as exc:
        print(f"interrupted: {exc.report.summary()}; run `memory-hub index` again to finish", file=sys.stderr)
        return 130
    recall = build_recall_index(vault, recall_index, report.walked)
    code, vectors = 0, {}
    if not args.json:
        print(f"indexed {vault}: {report.summary()}; {_recall_summary(recall)}")
    if not args.no_vectors:  # the semantic index follows the lexical one (commands/retrieval.py)
        from .retrieval import update_vectors

        code, vectors = update_vectors(vault, args.json)
    if args.json:
        print_json({**report.as_dict(), "recall": recall, **vectors})
    return code


def format_status(data: dict[str, Any]) -> list[str]:
    """``status`` as lines a person reads: counts, not Python reprs."""
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(data["kinds"].items(), key=lambda kv: -kv[1]))
    lines = [
        f"vault: {data['vault']}",
        f"index: {data['index']}",
        f"notes: {data['notes']} ({kinds}); attachments: {data['attachments']}; ranked: {data['ranked_notes']}",
        f"links: {data['links']} ({data['dangling_links']} dangling)",
        f"last sync: {data['last_sync'] or 'never'}; changes not yet indexed: {data['pending_changes']}",
    ]
    vec = data.get("vectors")
    if vec is None:
        lines.append("vectors: none yet (run `memory-hub index`)")
    elif "error" in vec:
        lines.append(f"vectors: cannot check ({vec['error']})")
    else:
        share = f" ({vec['fresh'] / vec['expected']:.0%})" if vec["expected"] else ""
        extra = ", ".join(f"{len(vec[k])} {k}" for k in ("stale", "missing", "orphaned") if vec[k])
        lines.append(f"vectors: {vec['fresh']}/{vec['expected']} notes fresh{share}"
                     + (f", {extra}" if extra else "") + f" [{vec['embedder']}]")
    usage = data.get("usage") or {}
    if usage:
        lines.append("usage: " + (", ".join(f"{k.replace('_', ' ')} {v}" for k, v in usage.items()
                                            if v not in (None, [], 0)) or "no events yet"))
    conflicts = data.get("conflicts") or []
    if conflicts:
        lines.append(f"sync conflicts to merge by hand: {len(conflicts)}")
        lines += [f"  - {c['note']}: the other text is in {c['copy']}" for c in conflicts[:20]]
    lines.append(f"problems: {len(data['problems'])}")
    lines += [f"  - {p}" for p in data["problems"][:20]]
    if len(data["problems"]) > 20:
        lines.append(f"  … and {len(data['problems']) - 20} more (`memory-hub status --json` lists all)")
    return lines


def cmd_status(args: argparse.Namespace) -> int:
    from ..eval.health import status

    data = status(vault_path(args), vectors=True)
    if args.json:
        print_json(data)
    else:
        print("\n".join(format_status(data)))
    return 0


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("init", cmd_init, "create a vault from the starter template (or adopt a folder of notes) and index it")
    p.add_argument("init_path", metavar="PATH", nargs="?", help="folder (default: the vault --vault names, "
                   "else the default vault)")
    p.add_argument("--commit", action="store_true",
                   help="make a first git commit of an adopted folder's files (asked when run at a terminal)")

    p = add("index", cmd_index, "bring every index (lexical, links, recall, vectors) up to date with the vault")
    p.add_argument("--rebuild", action="store_true", help="start from nothing")
    p.add_argument("--no-vectors", action="store_true", help="skip the embedding step (lexical index only)")

    add("status", cmd_status, "index freshness, counts, vector coverage and problems")
