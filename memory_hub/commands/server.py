"""``serve``, ``sync`` and ``install-git-hook``: how agents reach the vault, and how it stays indexed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .shell import CliError, print_json, vault_path, warn


def cmd_serve(args: argparse.Namespace) -> int:
    from ..server.run import GuardError, PortInUse, exit_now, serve

    vault = vault_path(args)
    try:
        code = serve(vault, args.transport, args.host, args.port, allowed_hosts=args.allow_host or [],
                     watch=not args.no_watch, rescan_every=args.rescan or None, warm=not args.no_warm,
                     hooks_socket=not args.no_hooks_socket,
                     log_level=args.log_level)
    except GuardError as exc:
        raise CliError(str(exc), code=2) from None
    except PortInUse as exc:
        raise CliError(exc.strerror or str(exc)) from None
    exit_now(code)  # a model may still be loading natively: never finalise the interpreter under it


def cmd_sync(args: argparse.Namespace) -> int:
    """The seeds' sync_vault: notes, links and (when the vault has vectors) chunk vectors, then exit."""
    from ..index.sync import SyncInterrupted, sync

    vault = vault_path(args)
    if args.remote is not None:
        return _sync_remote(vault, args)
    try:
        report = sync(vault, progress=False if args.json else None)
    except SyncInterrupted as exc:
        print(f"interrupted: {exc.report.summary()}; run `memory-hub sync` again to finish", file=sys.stderr)
        return 130
    vectors = None if args.lexical_only else _sync_vectors(vault, args.json)
    if args.json:
        print_json({**report.as_dict(), "vectors": vectors})
    else:
        print(f"synced {vault}: {report.summary()}")
        if vectors:
            print(vectors)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    """``token add NAME``: a new random token; only its hash is stored, the token is printed once."""
    import hashlib
    import os
    import secrets
    from pathlib import Path

    from ..config import settings
    from ..server.tokens import TokensError, default_path, parse

    path = Path(args.file or settings(None)["server.tokens_file"] or default_path()).expanduser()
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    secret = secrets.token_urlsafe(32)
    entry = (f"\n[tokens.{args.name}]\nsha256 = \"{hashlib.sha256(secret.encode()).hexdigest()}\"\n"
             f"scope = \"{args.scope}\"\nrate_per_minute = {args.rate}\n")
    import tomllib

    try:
        data = tomllib.loads(existing + entry)
        parse(data, str(path))
    except (TokensError, tomllib.TOMLDecodeError) as exc:
        raise CliError(f"not added: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(entry)
    print(f"added {args.scope} token {args.name!r} to {path} (restart the server to use it)", file=sys.stderr)
    print(secret)
    return 0


def _sync_remote(vault, args: argparse.Namespace) -> int:  # noqa: ANN001 - pathlib.Path
    """``sync --remote [NAME]``: commit, exchange with the remote, re-index what changed (team/sync.py)."""
    from ..team.sync import SyncError, sync_remote

    served = _server_serving(vault)
    try:
        report = sync_remote(vault, args.remote or None, push=not args.no_push,
                             secret_check=False if args.allow_secrets else None,
                             vectors="skip" if args.lexical_only else "auto", index="server" if served else "here")
    except SyncError as exc:
        raise CliError(str(exc)) from None
    data = report.as_dict()
    if args.json:
        print_json(data)
    else:
        print(report.summary())
        for c in report.conflicts:
            if c.copy:
                print(f"  conflict: {c.path}: the remote text is kept there; yours is in {c.copy} (linked from it)")
            elif c.resolution in _SAID:
                print(f"  merged: {c.path}: {_SAID[c.resolution]}")
        for line in report.notes:
            print(f"  note: {line}")
        vectors = report.indexed.get("vectors")
        if vectors:
            print(f"  vectors: {vectors}")
        if data["unresolved_conflicts"]:
            print(f"  {len(data['unresolved_conflicts'])} conflict copy(ies) wait to be merged by hand "
                  "(`memory-hub status` lists them)")
    ex = report.exchange
    return 1 if (report.skipped and not report.skipped.startswith("another")) or (ex and ex.blocked) else 0


_SAID = {"both-inserted": "both sides only added lines; both additions kept in place",
         "kept-local": "deleted on the remote, changed here: your text was kept",
         "kept-remote": "deleted here, changed on the remote: the remote text was kept"}


def _server_serving(vault) -> bool:  # noqa: ANN001 - pathlib.Path
    """Whether a ``memory-hub serve`` of this vault answers on its hooks socket (its watcher will index)."""
    from ..server.local_socket import request

    reply = request(vault, {"op": "ping", "client": "cli"}, timeout=1.0)
    return bool(reply and reply.get("ok"))


def _sync_vectors(vault, quiet: bool) -> str | None:  # noqa: ANN001 - pathlib.Path
    """Bring chunk vectors up to date when the vault has them (``memory-hub index`` builds the first).

    Nothing changed since the last complete run (``index.vector_stamp``): said without importing
    numpy, LanceDB or the search stack, which were most of a no-change ``sync`` process."""
    from ..index.store import Store
    from ..index.vector_stamp import current_for, ever_embedded

    try:
        store = Store(vault)
        try:
            if not ever_embedded(store):
                return "vectors: none yet (run `memory-hub index` to embed the vault)"
            key = current_for(store)
        finally:
            store.close()
        if key is not None:
            return f"vectors ({key}): up to date, nothing to embed"
        from ..retrieval.searcher import Searcher

        searcher = Searcher(vault)
        try:
            report = searcher.sync_vectors(progress=False if quiet else None)
        finally:
            searcher.close()
    except Exception as exc:  # noqa: BLE001 - lexical sync already landed; say what failed
        print(f"warning: vectors not updated: {type(exc).__name__}: {exc}", file=sys.stderr)
        return f"vectors: not updated ({type(exc).__name__}: {exc})"
    summary = getattr(report, "summary", None)
    return summary() if callable(summary) else str(report)


def cmd_install_git_hook(args: argparse.Namespace) -> int:
    from ..launcher import launcher
    from ..server.githook import install_post_commit_hook, uninstall_post_commit_hook
    from ..vault.git import GitError

    vault = vault_path(args)
    run = launcher()
    try:
        if args.uninstall:
            outcome, path = uninstall_post_commit_hook(vault)
        else:
            outcome, path = install_post_commit_hook(vault, list(run.argv))
    except GitError as exc:
        raise CliError(str(exc)) from None
    warnings = [run.warning] if run.warning and not args.uninstall else []
    if args.json:
        print_json({"outcome": outcome, "hook": str(path), "warnings": warnings})
        return 0
    if args.uninstall:
        print({"removed": f"removed Memory Hub's lines from {path}; the rest of the hook is kept",
               "deleted": f"removed {path} (it held only Memory Hub's lines)",
               "absent": f"no Memory Hub lines in {path}; nothing to remove"}[outcome])
        return 0
    print(f"{outcome}: {path} runs `{run.command('sync')}` after every commit")
    for w in warnings:
        warn(w)
    return 0


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("serve", cmd_serve, "serve the vault to AI agents over MCP (stdio, SSE or streamable HTTP)")
    p.add_argument("--transport", choices=("stdio", "sse", "http"), default="stdio",
                   help="stdio (default; the client starts the server), sse, or http (streamable HTTP)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address for sse/http (default 127.0.0.1; anything else needs $MEMORY_HUB_TOKEN)")
    p.add_argument("--port", type=int, default=8765, help="port for sse/http (default 8765)")
    p.add_argument("--allow-host", action="append",
                   help="extra Host header name clients may use, e.g. a LAN name (repeatable)")
    p.add_argument("--no-watch", action="store_true", help="do not watch the vault for changes")
    p.add_argument("--rescan", type=float, default=60.0, help="seconds between full rescans (0: never)")
    p.add_argument("--no-warm", action="store_true", help="do not load models in the background at start")
    p.add_argument("--no-hooks-socket", action="store_true",
                   help="do not answer agent hooks on the local socket (saves the recall index's memory)")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))

    p = add("sync", cmd_sync, "bring every index (lexical, links, vectors) up to date with the vault and exit")
    p.add_argument("--lexical-only", action="store_true", help="skip the vector update (fast; for hooks)")
    p.add_argument("--remote", nargs="?", const="", default=None, metavar="NAME",
                   help="first commit pending changes, pull and rebase onto the git remote NAME (default: "
                        "team.remote, origin), push, then re-index what changed (docs/team.md)")
    p.add_argument("--no-push", action="store_true", help="with --remote: pull and re-index, push nothing")
    p.add_argument("--allow-secrets", action="store_true",
                   help="with --remote: push even when added lines look like secrets")

    p = add("token", cmd_token, "add a named bearer token (read or write scope) to the shared server's tokens file")
    p.add_argument("action", choices=("add",), help="add: make a token, store its SHA-256, print it once")
    p.add_argument("name", help="who uses it (shown as the author of its writes), e.g. alice or ci-bot")
    p.add_argument("--scope", choices=("read", "write"), default="read", help="read (default) or write")
    p.add_argument("--rate", type=int, default=600, help="requests per minute (0: no limit; default 600)")
    p.add_argument("--file", help="the tokens file (default: server.tokens_file, ~/.config/memory-hub/tokens.toml)")

    p = add("install-git-hook", cmd_install_git_hook,
            "run `memory-hub sync` in the background after every commit to the vault (idempotent)")
    p.add_argument("--uninstall", action="store_true", help="remove Memory Hub's lines from the hook, nothing else")

