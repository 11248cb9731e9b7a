"""What each page shows, as plain data from the same library calls the CLI and MCP use.

One function per page: ``search_page``, ``note_page``, ``timeline_page``, ``health_page``. Each takes
the running server's ``ServerState`` and the request's parameters and returns a dict for its
template; nothing here knows about HTTP (``app.py`` does) or HTML (the templates do), except the
note body, which ``markdown.render`` turns into safe HTML. Note text, titles and prompts go into
the templates as plain strings, and Jinja's autoescaping escapes them.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from ...index import graph
from ...index import usage as usage_api
from ...index.lexical import Filters
from ...vault import frontmatter
from ...vault.notes import KINDS
from ...vault.walk import OutsideVault, UnreadableNote, read_note_text, safe_path
from ..state import ServerState
from . import markdown, svg

MAX_K = 50
MAX_BACKLINKS_SHOWN = 300
MAX_OUTGOING_SHOWN = 300
DEFAULT_NEVER_DAYS = 30
MAX_NEVER_SHOWN = 200
MAX_PROBLEMS_SHOWN = 200
MAX_DANGLING_SHOWN = 100


class PageError(Exception):
    """A request the page cannot answer (bad parameter, no such note); ``status`` is the HTTP status."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


# -- small formatting helpers shared by the templates ---------------------------------------------

def ago(ts: float | None, now: float | None = None) -> str:
    """'3 min ago', '2 h ago', '5 days ago' — how long since a unix time."""
    if not ts:
        return "never"
    s = max(0.0, (now or time.time()) - float(ts))
    if s < 60:
        return f"{int(s)} s ago"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{s / 3600:.0f} h ago"
    return f"{s / 86400:.0f} days ago"


def when(ts: float | None) -> str:
    """Local date and time of a unix time, to the second."""
    if not ts:
        return ""
    return _dt.datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M:%S")


# -- search ---------------------------------------------------------------------------------------

@dataclass
class Why:
    """One reason a hit ranked where it did, in words."""

    stage: str  # exact, words, trigram, vectors, calibration, graph, rerank, fused
    text: str


def explain_hit(hit: Any) -> list[Why]:
    """The explain record of a hit (channels, calibration, graph, pin, rerank) as sentences."""
    out: list[Why] = []
    if getattr(hit, "exact", False):
        out.append(Why("exact", "contains every exact identifier of the query: pinned above the rest"))
    channels = getattr(hit, "channels", None) or {}
    names = {"words": "word match (BM25 over stemmed words and CJK bigrams)",
             "trigram": "substring match (trigram BM25)", "vectors": "meaning (e5 vector cosine)"}
    for name in ("words", "trigram", "vectors"):
        entry = channels.get(name)
        if not entry:
            continue
        text = f"#{entry.get('rank')} by {names[name]}, score {entry.get('score')}"
        if name == "vectors" and entry.get("chunk"):
            text += f"; best passage: “{entry['chunk']}”"
        out.append(Why(name, text))
    for name, entry in channels.items():
        if name not in names and isinstance(entry, dict):
            out.append(Why(name, f"#{entry.get('rank')} in channel {name}, score {entry.get('score')}"))
    if not channels and not getattr(hit, "exact", False) and not getattr(hit, "graph", None):
        out.append(Why("fused", "no channel detail (the search ran without explain data)"))
    cal = getattr(hit, "calibration", None)
    if cal:
        before, after = cal.get("before"), cal.get("after")
        moved = ("kept its place" if before == after else f"moved from #{before} to #{after}")
        z = cal.get("z")
        if isinstance(z, dict):
            z = ", ".join(f"{k} {v}" for k, v in z.items())
        out.append(Why("calibration", f"calibration by raw scores {moved} (evidence z: {z})"))
    g = getattr(hit, "graph", None)
    if g:
        hops = g.get("hops")
        if g.get("joined"):
            out.append(Why("graph", f"joined through the link graph, {hops} hop(s) from {g.get('from')}"))
        else:
            out.append(Why("graph", f"raised by the link graph ({hops} hop(s) from {g.get('from')}): "
                                    f"score {g.get('before')} → {g.get('score')}"))
    rr = getattr(hit, "rerank", None)
    if rr:
        out.append(Why("rerank", f"reranker {rr.get('model')}: #{rr.get('before')} → #{rr.get('after')} "
                                 f"(score {rr.get('score')})"))
    extra = getattr(hit, "explain", None)  # richer per-hit explain data, where the pipeline gives it
    if isinstance(extra, dict):
        for key, value in extra.items():
            out.append(Why(str(key), value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)))
    return out


def _int(value: str | None, name: str, lo: int, hi: int, default: int) -> int:
    if value in (None, ""):
        return default
    try:
        n = int(str(value))
    except ValueError:
        raise PageError(f"{name} must be a whole number, not {value!r}") from None
    if not lo <= n <= hi:
        raise PageError(f"{name} must be between {lo} and {hi}, not {n}")
    return n


def search_filters(kind: str | None, tag: str | None, path: str | None, since: str | None) -> Filters:
    if kind and kind not in KINDS:
        raise PageError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    if path and (path.startswith("/") or ".." in path.split("/")):
        raise PageError(f"folder must be inside the vault, such as 'decisions/', not {path!r}")
    if since:
        try:
            _dt.date.fromisoformat(since[:10])
        except ValueError:
            raise PageError(f"since must be a date such as 2026-05-01, not {since!r}") from None
    return Filters(kinds=[kind] if kind else None, tags=[tag.lstrip("#")] if tag else None,
                   path_prefix=path or None, since=since[:10] if since else None)


def search_page(state: ServerState, params: dict[str, str], modes: tuple[str, ...]) -> dict[str, Any]:
    """Search results with the reasons for each rank; an empty query gives the landing page."""
    from ...retrieval.search import QueryError

    query = (params.get("q") or "").strip()
    mode = params.get("mode") or ""
    if mode and mode not in modes:
        raise PageError(f"unknown mode {mode!r}; choose one of {', '.join(modes)}")
    k = _int(params.get("k"), "k", 1, MAX_K, 10)
    form = {"q": query, "mode": mode, "k": k, "kind": params.get("kind") or "", "tag": params.get("tag") or "",
            "path": params.get("path") or "", "since": params.get("since") or ""}
    ctx: dict[str, Any] = {"form": form, "modes": modes, "kinds": KINDS, "query": query}
    if not query:
        ctx["landing"] = landing(state)
        return ctx
    filters = search_filters(form["kind"], form["tag"], form["path"], form["since"])
    t0 = time.perf_counter()
    try:
        result = state.search(query, k=k, filters=filters, mode=mode or None, explain=True)
    except QueryError as exc:
        raise PageError(str(exc)) from None
    ctx["ms"] = round((time.perf_counter() - t0) * 1000, 1)
    ctx["mode_used"] = getattr(result, "mode", None) or mode
    ctx["warnings"] = list(result.warnings)
    ctx["low_confidence"] = bool(getattr(result, "low_confidence", False))
    ctx["vector_query"] = result.vector_query if result.vector_query and result.vector_query != query else None
    ctx["timings"] = result.timings_ms
    ctx["hits"] = [{"rank": i, "path": h.path, "title": h.title, "description": h.description, "kind": h.kind,
                    "date": h.date, "score": h.score, "snippet": h.snippet, "tags": list(h.tags),
                    "exact": h.exact, "why": explain_hit(h)} for i, h in enumerate(result.hits, start=1)]
    return ctx


def landing(state: ServerState) -> dict[str, Any]:
    """The page without a query: what is in the vault and what the agent uses most."""
    conn = state.store.conn
    kinds = {r[0]: r[1] for r in conn.execute("SELECT kind, count(*) FROM notes GROUP BY kind")}
    last = state.store.get_meta("last_sync")
    top = usage_api.top(state.store, 8)
    titles = _titles(state, [p for p, _ in top])
    return {"notes": sum(v for k, v in kinds.items() if k != "attachment"), "kinds": kinds,
            "last_sync": float(last) if last else None,
            "top": [{"path": p, "title": titles.get(p, p), "reads": u.reads, "useful": u.useful} for p, u in top]}


def _titles(state: ServerState, paths: list[str]) -> dict[str, str]:
    if not paths:
        return {}
    return {r[0]: r[1] for r in state.store.conn.execute(
        "SELECT path, title FROM notes WHERE path IN (SELECT value FROM json_each(?))", (json.dumps(paths),))}


# -- note -----------------------------------------------------------------------------------------

def resolve(state: ServerState, path: str) -> str:
    """The indexed note at ``path`` (or named ``path``); PageError 404 when there is none."""
    path = path.strip().replace("\\", "/")
    if not path:
        raise PageError("no note path given", 404)
    try:
        safe_path(state.vault, path)
    except OutsideVault as exc:
        raise PageError(f"refused: {exc}", 404) from None
    conn = state.store.conn
    if conn.execute("SELECT 1 FROM notes WHERE path = ?", (path,)).fetchone():
        return path
    found = graph.build_resolver(conn).resolve(path.removesuffix(".md"))
    if found:
        return found
    raise PageError(f"no note at {path!r} in the index", 404)


def _links_of(state: ServerState, note_id: int) -> tuple[list[dict[str, Any]], markdown.Links]:
    rows = graph.outgoing(state.store.conn, note_id)
    targets: dict[str, str] = {}
    out = []
    for r in rows:
        if r["target_path"]:
            targets.setdefault(str(r["target"]).lower(), r["target_path"])
        out.append({"target": r["target"], "kind": r["kind"], "heading": r["heading"], "alias": r["alias"],
                    "line": r["line"], "path": r["target_path"]})
    resolved = sorted({p for p in targets.values()})
    attachments = {r[0] for r in state.store.conn.execute(
        "SELECT path FROM notes WHERE kind = 'attachment' AND path IN (SELECT value FROM json_each(?))",
        (json.dumps(resolved),))}
    return out, markdown.Links(targets, attachments)


def _property(value: Any, links: markdown.Links) -> Any:
    """A frontmatter value for the properties table: strings with links, lists as lists."""
    if isinstance(value, list):
        return [_property(v, links) for v in value]
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, str):
        if markdown.is_safe_external(value):
            return {"url": value.strip()}
        return markdown.Markup(markdown.render_value(value, links)) if "[[" in value else value
    return value if value is not None else ""


def note_page(state: ServerState, path: str) -> dict[str, Any]:
    rel = resolve(state, path)
    conn = state.store.conn
    row = state.store.note_row(rel)
    assert row is not None
    note_id = int(row["id"])
    ctx: dict[str, Any] = {"path": rel, "title": row["title"], "kind": row["kind"],
                           "description": row["description"], "tags": json.loads(row["tags"]),
                           "aliases": json.loads(row["aliases"]), "dates": json.loads(row["dates"]),
                           "folder": str(PurePosixPath(rel).parent) if "/" in rel else "",
                           "indexed_at": row["indexed_at"]}
    outgoing, links = _links_of(state, note_id)
    ctx["outgoing"] = outgoing[:MAX_OUTGOING_SHOWN]
    ctx["outgoing_total"] = len(outgoing)
    if row["kind"] == "attachment":
        ctx["attachment"] = True
        ctx["image"] = rel.lower().endswith(markdown.IMAGE_EXTENSIONS)
    else:
        try:
            text = read_note_text(state.vault, rel)
        except FileNotFoundError:
            raise PageError(f"{rel} was deleted; the index will drop it within a second", 404) from None
        except (UnreadableNote, OutsideVault, OSError) as exc:
            raise PageError(f"cannot read {rel}: {exc}", 422) from None
        fm = frontmatter.parse(text)
        ctx["properties"] = [(str(k), _property(v, links)) for k, v in fm.data.items()]
        ctx["frontmatter_problem"] = fm.problem
        ctx["body_html"] = markdown.Markup(markdown.render(fm.body, links))
    back = conn.execute(
        "SELECT n.path, n.title, min(l.line) AS line, count(*) AS times FROM links l JOIN notes n ON n.id = l.source_id "
        "WHERE l.target_id = ? AND l.source_id != ? GROUP BY n.id ORDER BY n.path", (note_id, note_id)).fetchall()
    ctx["backlinks"] = [dict(r) for r in back[:MAX_BACKLINKS_SHOWN]]
    ctx["backlinks_total"] = len(back)
    ctx["graph"], ctx["graph_left_out"], ctx["near_total"] = _neighbourhood(state, note_id, rel, row["title"])
    usage_api.fold(state.store, state.vault, wait=False)
    ctx["usage"] = usage_api.for_note(state.store, rel)
    from ...eval.timeline import timeline

    shown, total = timeline(state.vault).injections_of(rel, limit=20)
    ctx["injections"] = shown
    ctx["injections_total"] = total
    return ctx


def _edges(conn: Any, ids: list[int]) -> list[tuple[int, int]]:
    """Resolved links touching any of ``ids`` (either end), as (source, target)."""
    return [(int(a), int(b)) for a, b in conn.execute(
        "SELECT source_id, target_id FROM links WHERE target_id IS NOT NULL AND "
        "(source_id IN (SELECT value FROM json_each(:ids)) OR target_id IN (SELECT value FROM json_each(:ids)))",
        {"ids": json.dumps(ids)})]


def _direction(links: set[tuple[int, int]], a: int, b: int) -> str:
    out, inn = (a, b) in links, (b, a) in links
    return "both" if out and inn else ("out" if out else ("in" if inn else ""))


def _neighbourhood(state: ServerState, note_id: int, rel: str, title: str) -> tuple[Any, int, int]:
    """The picture of the notes within two links, built only for the notes it draws.

    ``graph.neighbours`` gives every two-hop neighbour its direction and path: ~0.2 s for a note whose
    neighbour is a hub (2,700 notes within two links on obsidian-hub). The picture draws at most
    ``MAX_FIRST_DRAWN`` + ``MAX_SECOND_DRAWN`` of them, so: direct neighbours and their backlink
    counts first, the most linked-to chosen, then second hops only around those, the most linked-to
    again; the total within two links comes from the index's recursive walk (``graph.neighbourhood``)."""
    conn = state.store.conn
    total = len(graph.neighbourhood(conn, [note_id], 2))
    if not total:
        return None, 0, 0
    direct = set(_edges(conn, [note_id]))
    first_ids = sorted({b for a, b in direct if a == note_id} | {a for a, b in direct if b == note_id} - {note_id})
    counts = graph.backlink_counts(conn, first_ids)
    first = sorted(first_ids, key=lambda i: (-counts.get(i, 0), i))[:MAX_FIRST_DRAWN]
    around = set(_edges(conn, first)) if first else set()
    known = set(first_ids) | {note_id}
    rank = {m: n for n, m in enumerate(first)}
    via_of: dict[int, int] = {}
    for a, b in around:
        for m, other in ((a, b), (b, a)):
            if m in rank and other not in known and (other not in via_of or rank[m] < rank[via_of[other]]):
                via_of[other] = m
    second_counts = graph.backlink_counts(conn, list(via_of))
    second = sorted(via_of, key=lambda i: (-second_counts.get(i, 0), i))[:MAX_SECOND_DRAWN]
    info = _info(conn, first + second)
    nodes = [svg.Node(info[i][0], info[i][1], 1, _direction(direct, note_id, i), None, counts.get(i, 0))
             for i in first if i in info]
    nodes += [svg.Node(info[i][0], info[i][1], 2,
                       f"{_direction(direct, note_id, via_of[i])}>{_direction(around, via_of[i], i)}",
                       info[via_of[i]][0], second_counts.get(i, 0))
              for i in second if i in info and via_of[i] in info]
    picture, _ = svg.neighbourhood(svg.Node(rel, title, 0), nodes, max_first=MAX_FIRST_DRAWN,
                                   max_second=MAX_SECOND_DRAWN)
    return picture, max(0, total - len(nodes)), total


MAX_FIRST_DRAWN = 14
MAX_SECOND_DRAWN = 20


def _info(conn: Any, ids: list[int]) -> dict[int, tuple[str, str]]:
    if not ids:
        return {}
    return {int(r[0]): (r[1], r[2]) for r in conn.execute(
        "SELECT id, path, title FROM notes WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(ids),))}


# -- timeline -------------------------------------------------------------------------------------

def timeline_page(state: ServerState, params: dict[str, str]) -> dict[str, Any]:
    from ...eval import telemetry
    from ...eval.timeline import timeline

    tl = timeline(state.vault)
    session = params.get("session") or None
    day = params.get("day") or None
    if day:
        try:
            _dt.date.fromisoformat(day)
        except ValueError:
            raise PageError(f"day must be a date such as 2026-05-01, not {day!r}") from None
    before = None
    if params.get("before"):
        try:
            before = float(params["before"])
        except ValueError:
            raise PageError(f"before must be a unix time, not {params['before']!r}") from None
    only_blocks = params.get("blocks") == "1"
    limit = _int(params.get("limit"), "limit", 1, 500, 50)
    recalls, next_before = tl.page(session=session, day=day, before=before, limit=limit, with_block_only=only_blocks)
    usage_api.fold(state.store, state.vault, wait=False)
    tl.follow_up(recalls, usage_api.events(state.vault))
    titles = _titles(state, sorted({s.path for r in recalls for s in r.shown}))
    summary = telemetry.summarize(state.vault)
    return {"recalls": recalls, "titles": titles, "next_before": next_before,
            "filters": {"session": session or "", "day": day or "", "blocks": only_blocks, "limit": limit},
            "sessions": tl.sessions()[:200], "days": tl.days()[:120], "summary": summary,
            "total": len(tl.recalls)}


# -- health ---------------------------------------------------------------------------------------

def health_page(state: ServerState, params: dict[str, str], *, doctor: bool = False) -> dict[str, Any]:
    from ...dream import proposals
    from ...eval.golden import history
    from ...eval.timeline import timeline
    from .. import tools

    status = tools.status(state)
    conn = state.store.conn
    ctx: dict[str, Any] = {"status": status}
    ctx["last_sync"] = float(state.store.get_meta("last_sync") or 0) or None
    ctx["problems"] = [dict(r) for r in conn.execute(
        "SELECT path, problem, at FROM problems ORDER BY path LIMIT ?", (MAX_PROBLEMS_SHOWN,))]
    ctx["problems_total"] = status.get("problems", 0)
    dangling = conn.execute(
        "SELECT l.target, count(*) AS links, count(DISTINCT l.source_id) AS notes, min(n.path) AS example "
        "FROM links l JOIN notes n ON n.id = l.source_id WHERE l.target_id IS NULL "
        "GROUP BY lower(l.target) ORDER BY links DESC, l.target LIMIT ?", (MAX_DANGLING_SHOWN,)).fetchall()
    ctx["dangling"] = [dict(r) for r in dangling]
    ctx["dangling_total"] = conn.execute("SELECT count(*) FROM links WHERE target_id IS NULL").fetchone()[0]
    # golden eval over time
    runs = history(state.vault)
    ctx["eval_runs"] = runs[-30:][::-1]
    ctx["eval_chart"] = _eval_chart(runs)
    ctx["eval_cases"] = _eval_cases_file(state)
    # notes never returned
    days = _int(params.get("days"), "days", 1, 3650, DEFAULT_NEVER_DAYS)
    tl = timeline(state.vault)
    since = time.time() - days * 86400
    injected = tl.injected_since(since)
    read_recently = {p for ts, kind, p in usage_api.events(state.vault) if kind == "read" and ts >= since}
    ranked = conn.execute(
        "SELECT path, title, dates FROM notes WHERE ranked = 1 AND kind NOT IN ('daily', 'template', 'attachment') "
        "ORDER BY path").fetchall()
    never = [r for r in ranked if r["path"] not in injected and r["path"] not in read_recently]
    ctx["never"] = {"days": days, "total": len(never), "ranked": len(ranked),
                    "notes": [{"path": r["path"], "title": r["title"]} for r in never[:MAX_NEVER_SHOWN]],
                    "telemetry_since": tl.first_ts(), "recalls": len(tl.recalls),
                    "most": Counter(injected).most_common(5)}
    # dream
    plan = proposals.load(state.vault)
    ctx["plan"] = plan
    ctx["planning"] = state.extras.get("web_planning")
    ctx["doctor"] = _doctor(state) if doctor else None
    return ctx


def _eval_cases_file(state: ServerState) -> str | None:
    from ...vault.safe_io import is_file

    return EVAL_CASES if is_file(state.vault, EVAL_CASES) else None


EVAL_CASES = "memory-hub-eval.yaml"  # the starter vault's suite; the page runs it when asked


def _eval_chart(runs: list[dict[str, Any]]) -> Any:
    if not runs:
        return None
    runs = runs[-60:]
    rate = [(float(r["ts"]), float(r.get("pass_rate") or 0),
             f"{when(r['ts'])} · {r.get('cases')} · {r.get('mode')}: {r.get('passed')}/{r.get('evaluable')} passed")
            for r in runs]
    mrr = [(float(r["ts"]), float(r.get("mrr") or 0), f"{when(r['ts'])} · MRR {r.get('mrr')}") for r in runs]
    first, last = float(runs[0]["ts"]), float(runs[-1]["ts"])
    labels = [(first, when(first)[:10])] + ([(last, when(last)[:10])] if last - first > 86400 else [])
    threshold = runs[-1].get("threshold")
    return svg.line_chart([svg.Series("pass rate", rate, "s-pass"), svg.Series("MRR", mrr, "s-mrr")],
                          x_labels=labels, label="golden eval results over time",
                          guide=(float(threshold), f"threshold {float(threshold):.0%}") if threshold else None)


def _doctor(state: ServerState) -> dict[str, Any]:
    from ...eval.doctor import run_doctor

    try:
        return run_doctor(str(state.vault)).as_dict()
    except Exception as exc:  # noqa: BLE001 - the rest of the page must still show
        return {"error": f"{type(exc).__name__}: {exc}"}
