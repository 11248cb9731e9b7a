"""CLI: ``search`` and ``links``.

``search`` asks a running ``memory-hub serve`` of this vault first (over the hooks' unix socket:
its models and index are already warm, so the answer takes milliseconds instead of the seconds a
fresh process spends loading them) and searches in-process when no server answers.

``--json`` shapes (keys may be added, never renamed or removed):

* ``search``: {query, results: [{path, title, description, kind, date, score, snippet, tags, exact}
               (+ channels, calibration, graph, rerank with --explain)], timings_ms: {stage: ms},
               warnings: [str], served_by: server|in-process, vaults: [name],
               low_confidence: bool (no channel found real evidence; the hits are only the nearest notes)}
               (+ vector_query and evidence with --explain: what the embedder was asked, each channel's
               evidence and weight); every result carries ``vault``; with team vaults (docs/team.md) the
               rankings are fused, results also carry ref ("vault:path"), vault_rank, vault_score, and
               served_by is {vault: server|in-process}
* ``links``:  {note, title, backlinks: int, links: [{target, kind, heading, block, alias, line,
               target_path (null when dangling)}], neighbours: [{path, title, hops, direction, via}]}
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .shell import CliError, iso_date, note_kind, positive, print_json, search_mode, settings_of, vault_path

SERVER_TIMEOUT = 10.0  # a warm server answers in milliseconds; this only bounds a stuck one


def ask_server(vault: Path, payload: dict[str, Any], timeout: float = SERVER_TIMEOUT) -> dict[str, Any] | None:
    """A running server's reply to one request, or None when none serves this vault."""
    from ..server.local_socket import UnsafeSocketDir, request

    try:
        return request(vault, {**payload, "client": "cli"}, timeout=timeout)
    except UnsafeSocketDir as exc:  # another user could be listening: never ask it, say why
        return {"ok": False, "error": f"unsafe-socket: {exc}"}


def _in_process(vault: Path, args: argparse.Namespace, mode: str | None, filters: dict[str, Any]) -> dict[str, Any]:
    from ..index.lexical import Filters
    from ..retrieval.search import QueryError
    from ..retrieval.searcher import Searcher, result_json

    searcher = Searcher(vault, mode=settings_of(args)["search.mode"])
    try:
        result = searcher.search(args.query, k=args.k, filters=Filters(**filters), explain=args.explain, mode=mode)
    except QueryError as exc:
        raise CliError(str(exc)) from None
    finally:
        searcher.close()
    return result_json(result, args.explain)


def run_search(vault: Path, args: argparse.Namespace, via: tuple[Path, str] | None = None) -> dict[str, Any]:
    """The search as ``--json`` prints it, from the warm server when one answers. ``via`` (the
    primary vault, this team vault's name): first ask the server of the primary vault, which serves
    its team vaults too (kept fresh by their watchers), then this vault's own server, then in-process."""
    filters = {"kinds": args.kind or None, "tags": args.tag or None, "path_prefix": args.path_prefix,
               "since": args.since}
    payload = {"op": "search", "query": args.query, "k": args.k, "mode": args.mode, "filters": filters,
               "explain": args.explain}
    def served(reply: dict[str, Any] | None) -> dict[str, Any] | None:
        if reply and reply.get("ok"):
            return {**{k: v for k, v in reply.items() if k not in ("ok", "vault")}, "served_by": "server"}
        if reply and reply.get("query_error"):
            raise CliError(str(reply.get("error")))
        return None

    if via is not None and not args.in_process:
        answered = served(ask_server(via[0], {**payload, "team_vault": via[1]}))
        if answered:
            return answered
    if not args.in_process:
        reply = ask_server(vault, payload)
        answered = served(reply)
        if answered:
            return answered
        fallback = None if reply is None else f"the server could not search ({reply.get('error')}); searched in-process"
    else:
        fallback = None
    data = _in_process(vault, args, args.mode, filters)
    if fallback:
        data["warnings"].append(fallback)
    return {**data, "served_by": "in-process"}


def run_team_search(vault: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``run_search`` over this vault and the team vaults configured with it (``vaults.py``): each
    searched where it is served, the rankings fused (``team/search.py``), each result naming its vault."""
    from ..config import ConfigError
    from ..team.search import fuse
    from ..vaults import vault_set

    try:
        team = vault_set(vault, only=args.vaults.split(",") if args.vaults else None)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if len(team) == 1 and not args.vaults:
        data = run_search(team.primary.path, args)
        for hit in data["results"]:
            hit["vault"] = team.primary.name
        return {**data, "vaults": [team.primary.name], "warnings": data["warnings"] + team.warnings()}
    per_vault, warnings, served = [], team.warnings(), {}
    for ref in team.refs:
        try:
            data = run_search(ref.path, args, None if ref is team.primary else (team.primary.path, ref.name))
        except CliError as exc:
            warnings.append(f"vault {ref.name!r} was not searched: {exc}")
            continue
        per_vault.append((ref.name, data["results"]))
        warnings += [f"{ref.name}: {w}" for w in data["warnings"]]
        served[ref.name] = data["served_by"]
    return {"query": args.query, "results": fuse(per_vault, args.k), "vaults": [n for n, _ in per_vault],
            "warnings": warnings, "served_by": served, "timings_ms": {}}


def says_more(snippet: str, description: str) -> bool:
    """Whether a snippet adds to the description printed above it: a one-sentence plugin note's
    snippet is often that sentence again (``--json`` keeps both)."""
    shown = snippet.strip("… ")
    return bool(shown) and shown not in description


def cmd_search(args: argparse.Namespace) -> int:
    vault = vault_path(args)
    if args.k is None:
        args.k = settings_of(args)["search.k"]
    data = run_search(vault, args) if args.this_vault_only else run_team_search(vault, args)
    many = len(data.get("vaults") or []) > 1
    if args.json:
        print_json(data)
        return 0
    low = bool(data.get("low_confidence"))
    hint = None
    if low:  # imported only then: a search through the server stays a light process
        from ..retrieval.search import LOW_CONFIDENCE_HINT as hint
    for warning in data["warnings"]:
        if warning != hint:
            print(f"warning: {warning}", file=sys.stderr)
    if args.explain and data.get("vector_query") and data["vector_query"] != data["query"]:
        print(f"vector query: {data['vector_query']}  (terms found in nearly every note in scope left out)")
    if args.explain and data.get("evidence"):
        print(f"evidence: {json.dumps(data['evidence'], ensure_ascii=False)}")
    if not data["results"]:
        print("no results")
        return 0
    if hint:
        print(hint)
    from ..textsafe import visible

    for rank, hit in enumerate(data["results"], start=1):
        flag = " [exact]" if hit["exact"] else ""
        where = f"{hit['vault']}:" if many else ""
        print(f"{rank:2}. {visible(hit['title'])}  ({where}{visible(hit['path'])}, {hit['kind']}"
              f"{', ' + hit['date'] if hit['date'] else ''}){flag}")
        if hit["description"]:
            print(f"    {visible(hit['description'])}")
        if says_more(hit["snippet"], hit["description"]):
            print(f"    › {visible(hit['snippet'])}")
        if args.explain:
            print(f"    explain: score={hit['score']} channels={json.dumps(hit.get('channels'), ensure_ascii=False)}"
                  + (f" calibration={json.dumps(hit['calibration'])}" if hit.get("calibration") else "")
                  + (f" graph={json.dumps(hit['graph'], ensure_ascii=False)}" if hit.get("graph") else "")
                  + (f" rerank={json.dumps(hit['rerank'], ensure_ascii=False)}" if hit.get("rerank") else ""))
    return 0


def cmd_links(args: argparse.Namespace) -> int:
    from ..index import graph
    from ..index.store import Store

    store = Store(vault_path(args))
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
        print_json({
            "note": row["path"], "title": row["title"], "backlinks": backlinks,
            "links": [dict(r) for r in outgoing],
            "neighbours": [{"path": n.path, "title": n.title, "hops": n.hops, "direction": n.direction, "via": n.via}
                           for n in near],
        })
        return 0
    from ..textsafe import visible

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


def add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kind", action="append", type=note_kind, help="only notes of this kind (repeatable)")
    p.add_argument("--tag", action="append", help="only notes with this tag (repeatable)")
    p.add_argument("--path-prefix", help="only notes under this folder")
    p.add_argument("--since", type=iso_date,
                   help="only notes updated on or after this date: YYYY-MM-DD, YYYY-MM, or 7d / 2w ago")


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("search", cmd_search, "search the vault (through a running server when there is one)")
    p.add_argument("query")
    p.add_argument("-k", type=positive, default=None, help="number of results (default: search.k, 10)")
    p.add_argument("--explain", action="store_true", help="show each channel's rank and score")
    p.add_argument("--mode", type=search_mode, default=None,
                   help="lexical, vector, hybrid, hybrid+graph (default: search.mode), hybrid+rerank, "
                        "hybrid+graph+rerank")
    p.add_argument("--in-process", action="store_true", help="search in this process even when a server runs")
    p.add_argument("--vaults", metavar="NAMES", help="only these vaults, comma-separated (default: this vault and "
                   "every team vault of the user settings, [vaults.NAME]; docs/team.md)")
    p.add_argument("--this-vault-only", action="store_true", help="leave the team vaults out")
    add_filters(p)

    p = add("links", cmd_links, "a note's links, and its neighbours within N hops")
    p.add_argument("note", help="vault-relative path or note name")
    p.add_argument("--hops", type=int, default=1, choices=[1, 2, 3])
