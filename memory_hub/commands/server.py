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


def _sync_vectors(vault, quiet: bool) -> str | None:  # noqa: ANN001 - pathlib.Path
    """Bring chunk vectors up to date when the vault has them (``memory-hub index`` builds the first)."""
    try:
        from ..retrieval.search import has_vectors
        from ..retrieval.searcher import Searcher
    except ImportError:
        return None
    searcher = Searcher(vault)
    try:
        if not has_vectors(searcher.store):
            return "vectors: none yet (run `memory-hub index` to embed the vault)"
        report = searcher.sync_vectors(progress=False if quiet else None)
    except Exception as exc:  # noqa: BLE001 - lexical sync already landed; say what failed
        print(f"warning: vectors not updated: {type(exc).__name__}: {exc}", file=sys.stderr)
        return f"vectors: not updated ({type(exc).__name__}: {exc})"
    finally:
        searcher.close()
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

    p = add("install-git-hook", cmd_install_git_hook,
            "run `memory-hub sync` in the background after every commit to the vault (idempotent)")
    p.add_argument("--uninstall", action="store_true", help="remove Memory Hub's lines from the hook, nothing else")

