"""CLI: ``note hash|update|move|delete|restore`` — the MCP write tools, for a person or a script."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .shell import CliError, print_json, vault_path

WHO = "memory-hub"  # commits read "memory-hub move_note: a.md → b.md"


def _index(vault: Any, paths: list[str], renamed: dict[str, str] | None = None) -> str:
    from ..index.sync import sync

    return sync(vault, only=paths, renamed=renamed, progress=False).summary()


def _carry_usage(vault: Any, old: str, new: str) -> None:
    from ..index import usage
    from ..index.store import Store

    try:
        store = Store(vault)
        try:
            usage.carry(store, vault, old, new)
        finally:
            store.close()
    except Exception as exc:  # noqa: BLE001 - the move is committed; say what did not follow
        print(f"warning: usage counts of {old} did not follow it: {exc}", file=sys.stderr)


def cmd_note(args: argparse.Namespace) -> int:
    from ..vault.editing import WriteRefused, note_hash

    vault = vault_path(args)
    path = args.path.strip().replace("\\", "/")
    try:
        if args.action == "hash":
            from ..vault.editing import read_for_change

            data, _mtime = read_for_change(vault, path)
            out: dict[str, Any] = {"path": path, "hash": note_hash(data)}
            text = out["hash"]
        elif args.action == "update":
            from ..vault.edit import update_note

            if args.arg is None or not args.hash:
                raise CliError("usage: memory-hub note update PATH TEXT|- --hash HASH [--heading H] [--replace]")
            body = sys.stdin.read() if args.arg == "-" else args.arg
            result = update_note(vault, path, body, args.hash, mode="replace" if args.replace else "append",
                                 heading=args.heading, who=WHO)
            out = result.as_dict()
            if result.changed:
                out["index"] = _index(vault, [path])
            text = f"updated {path}" + (f" (commit {result.commit[:10]})" if result.commit else " (no change)")
        elif args.action == "move":
            from ..vault.move import move_note

            if args.arg is None:
                raise CliError("usage: memory-hub note move PATH NEW_PATH [--hash HASH]")
            moved = move_note(vault, path, args.arg, args.hash, who=WHO)
            _carry_usage(vault, moved.old, moved.new)
            out = moved.as_dict()
            out["index"] = _index(vault, moved.paths, {moved.old: moved.new})
            text = f"moved {moved.old} → {moved.new}; links rewritten in {len(moved.relinked)} note(s)"
            text += "".join(f"\n  skipped {s['path']}: {s['reason']}" for s in moved.skipped)
        elif args.action == "delete":
            from ..vault.trash import trash_note

            trashed = trash_note(vault, path, args.hash, who=WHO)
            out = trashed.as_dict()
            out["index"] = _index(vault, [path])
            text = f"moved {path} to {trashed.trash_path}; `memory-hub note restore {path}` brings it back"
            if trashed.backlinks:
                text += f"\n  still linked from {len(trashed.backlinks)} note(s): {', '.join(trashed.backlinks[:10])}"
        else:
            from ..vault.trash import restore_note

            restored = restore_note(vault, path, args.arg, who=WHO)
            out = restored.as_dict()
            out["index"] = _index(vault, [restored.path])
            if restored.moved_from:
                _carry_usage(vault, restored.moved_from, restored.path)
            text = f"restored {restored.path} from {restored.source}"
    except WriteRefused as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(out)
    else:
        print(text)
    return 0


def register(add: Any) -> None:
    p = add("note", cmd_note, "change a note the way the MCP write tools do: update, move, delete, restore "
                              "(each one commit)")
    p.add_argument("action", choices=["hash", "update", "move", "delete", "restore"],
                   help="hash: the hash to pass as --hash; update PATH TEXT|-; move PATH NEW_PATH; "
                        "delete PATH (to .trash/); restore PATH [NEW_PATH]")
    p.add_argument("path", help="vault-relative path of the note (for restore: its old path or .trash/ path)")
    p.add_argument("arg", nargs="?", help="update: the text (- for stdin); move: the new path; restore: another path")
    p.add_argument("--hash", help="the note's hash (`memory-hub note hash PATH`): refused if it changed since")
    p.add_argument("--heading", help="update: only this section (by its heading)")
    p.add_argument("--replace", action="store_true", help="update: replace the section (or body) instead of appending")
