"""memory-hub: long-term memory for AI coding agents, kept in a Markdown vault.

A thin shell over the library: parse, call one function, print.

Errors go to stderr with a non-zero exit; ``--json`` output is stable (see README, "JSON output").
The core commands' ``--json`` shapes (keys may be added, never renamed or removed):

* ``init``:   {vault, outcome: created|adopted, index: <index report>}
* ``index``:  {added, updated, deleted: [path], renamed: [[old, new]], unchanged: int,
               skipped: [{path, reason}], problems: [{path, problem}], links_resolved: int,
               seconds: float, interrupted: bool} (+ the vector step's keys unless --no-vectors)
* ``search``: {query, results: [{path, title, description, kind, date, score, snippet, tags, exact}
               (+ channels, calibration, graph, rerank with --explain)], timings_ms: {stage: ms}, warnings: [str]}
               (+ vector_query with --explain: what the embedder was asked)
* ``links``:  {note, title, backlinks: int, links: [{target, kind, heading, block, alias, line,
               target_path (null when dangling)}], neighbours: [{path, title, hops, direction, via}]}
* ``status``: {vault, index, notes, attachments, kinds: {kind: n}, ranked_notes, links, dangling_links,
               last_sync, pending_changes, problems: ["path: problem"]}
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import config


class CliError(Exception):
    """An error for the user: printed without a traceback, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def _print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def _vault(args: argparse.Namespace) -> Path:
    try:
        return config.resolve_vault(args.vault)
    except config.ConfigError as exc:
        raise CliError(str(exc)) from None


# -- commands -------------------------------------------------------------------------------------

def cmd_init(args: argparse.Namespace) -> int:
    from .index.sync import sync
    from .vault.create import init_vault

    path = Path(args.path).expanduser() if args.path else config.resolve_vault(args.vault, must_exist=False)
    outcome = init_vault(path)
    report = sync(path.resolve())
    if args.json:
        _print_json({"vault": str(path.resolve()), "outcome": outcome, "index": report.as_dict()})
    else:
        print(f"{outcome} vault at {path.resolve()}; indexed: {report.summary()}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from .index.sync import SyncInterrupted, sync

    vault = _vault(args)
    try:
        report = sync(vault, rebuild=args.rebuild)
    except SyncInterrupted as exc:
        print(f"interrupted: {exc.report.summary()}; run `memory-hub index` again to finish", file=sys.stderr)
        return 130
    code, vectors = 0, {}
    if not args.json:
        print(f"indexed {vault}: {report.summary()}")
    if not args.no_vectors:  # the semantic index follows the lexical one (commands/retrieval.py)
        from .commands.retrieval import update_vectors

        code, vectors = update_vectors(vault, args.json)
    if args.json:
        _print_json({**report.as_dict(), **vectors})
    return code


def _filters(args: argparse.Namespace):  # noqa: ANN202 - returns lexical.Filters
    from .index.lexical import Filters

    return Filters(kinds=args.kind or None, tags=args.tag or None, path_prefix=args.path_prefix, since=args.since)


def cmd_search(args: argparse.Namespace) -> int:
    from .retrieval.search import QueryError
    from .retrieval.searcher import Searcher

    vault = _vault(args)
    try:
        result = Searcher(vault).search(args.query, k=args.k, filters=_filters(args), explain=args.explain,
                                        mode=args.mode)
    except QueryError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        _print_json({
            "query": result.query,
            "results": [h.as_dict(explain=args.explain) for h in result.hits],
            "timings_ms": result.timings_ms,
            "warnings": result.warnings,
            **({"vector_query": result.vector_query} if args.explain and result.vector_query else {}),
        })
        return 0
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.explain and result.vector_query and result.vector_query != result.query:
        print(f"vector query: {result.vector_query}  (terms found in nearly every note in scope left out)")
    if not result.hits:
        print("no results")
        return 0
    from .textsafe import visible

    for rank, hit in enumerate(result.hits, start=1):
        flag = " [exact]" if hit.exact else ""
        print(f"{rank:2}. {visible(hit.title)}  ({visible(hit.path)}, {hit.kind}{', ' + hit.date if hit.date else ''}){flag}")
        if hit.description:
            print(f"    {visible(hit.description)}")
        if hit.snippet:
            print(f"    › {visible(hit.snippet)}")
        if args.explain:
            print(f"    explain: score={hit.score} channels={json.dumps(hit.channels, ensure_ascii=False)}"
                  + (f" calibration={json.dumps(hit.calibration)}" if hit.calibration else "")
                  + (f" graph={json.dumps(hit.graph, ensure_ascii=False)}" if hit.graph else "")
                  + (f" rerank={json.dumps(hit.rerank, ensure_ascii=False)}" if hit.rerank else ""))
    return 0


def cmd_links(args: argparse.Namespace) -> int:
    from .index import graph
    from .index.store import Store

    vault = _vault(args)
    store = Store(vault)
    conn = store.conn
    row = conn.execute("SELECT id, path, title FROM notes WHERE path = ?", (args.note,)).fetchone()
    if row is None:
        resolved = graph.build_resolver(conn).resolve(args.note)
        row = conn.execute("SELECT id, path, title FROM notes WHERE path = ?", (resolved,)).fetchone() if resolved else None
    if row is None:
        raise CliError(f"no note matches {args.note!r} (try a vault-relative path or a note name)")
    outgoing = graph.outgoing(conn, row["id"])
    near = graph.neighbours(conn, row["id"], args.hops)
    backlinks = graph.backlink_counts(conn, [row["id"]]).get(row["id"], 0)
    if args.json:
        _print_json({
            "note": row["path"], "title": row["title"], "backlinks": backlinks,
            "links": [dict(r) for r in outgoing],
            "neighbours": [{"path": n.path, "title": n.title, "hops": n.hops, "direction": n.direction, "via": n.via}
                           for n in near],
        })
        return 0
    from .textsafe import visible

    print(f"{visible(row['title'])} ({visible(row['path'])}) — {backlinks} backlinks")
    print("links:")
    for r in outgoing:
        where = visible(r["target_path"]) if r["target_path"] else "(dangling)"
        print(f"  {r['kind']:<11} [[{visible(r['target'])}]] → {where}")
    print(f"within {args.hops} hop(s):")
    for n in near:
        via = f" via {visible(n.via)}" if n.via else ""
        print(f"  {n.hops} {n.direction:<8} {visible(n.path)}{via}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from .eval.health import status

    vault = _vault(args)
    data = status(vault)
    if args.json:
        _print_json(data)
        return 0
    for key, value in data.items():
        if isinstance(value, list):
            print(f"{key}: {len(value)}")
            for item in value[:20]:
                print(f"  - {item}")
        else:
            print(f"{key}: {value}")
    return 0


# -- parser ---------------------------------------------------------------------------------------

Command = Callable[[argparse.Namespace], int]


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", action="append", help="only notes of this kind (repeatable)")
    p.add_argument("--tag", action="append", help="only notes with this tag (repeatable)")
    p.add_argument("--path-prefix", help="only notes under this folder")
    p.add_argument("--since", help="only notes updated on or after this ISO date")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memory-hub", description=__doc__.splitlines()[0])
    parser.add_argument("--vault", help="vault folder (default: $MEMORY_HUB_VAULT, else the default vault)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(func=func)
        return p

    p = add("init", cmd_init, "create a vault from the starter template (or adopt a folder of notes) and index it")
    p.add_argument("path", nargs="?", help="folder (default: the default vault)")

    p = add("index", cmd_index, "bring the index up to date with the vault")
    p.add_argument("--rebuild", action="store_true", help="start from nothing")
    p.add_argument("--no-vectors", action="store_true", help="skip the embedding step (lexical index only)")

    p = add("search", cmd_search, "search the vault")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--explain", action="store_true", help="show each channel's rank and score")
    p.add_argument("--mode", default=None, help="lexical, vector, hybrid, hybrid+graph (default), hybrid+rerank")
    _add_filters(p)

    p = add("links", cmd_links, "a note's links, and its neighbours within N hops")
    p.add_argument("note", help="vault-relative path or note name")
    p.add_argument("--hops", type=int, default=1, choices=[1, 2, 3])

    add("status", cmd_status, "index freshness, counts and problems")

    for register in _extensions():
        register(add)
    return parser


def _extensions() -> list[Callable[..., None]]:
    """Commands contributed by later stages (see ``memory_hub/commands/``)."""
    import importlib

    from .commands import MODULES

    found = []
    for name in MODULES:
        try:
            module = importlib.import_module(f"{__package__}.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.commands.{name}":
                raise
            continue
        found.append(module.register)
    return found


# Commands whose stdout is a protocol (MCP over stdio, a hook's JSON reply) are left untouched.
_RAW_OUTPUT = frozenset({"serve", "hook"})


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    streams = sys.stdout, sys.stderr
    if args.command not in _RAW_OUTPUT:  # note names and fields print visibly, never as raw controls
        from .textsafe import VisibleStream

        sys.stdout, sys.stderr = VisibleStream(sys.stdout), VisibleStream(sys.stderr)
    try:
        return _run(args)
    finally:
        sys.stdout, sys.stderr = streams


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except config.ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
