"""What each MCP tool does, as plain functions over a ``ServerState``.

Kept apart from the MCP wiring (``app.py``) so the logic reads on its own. Every function returns
plain JSON-able data or raises ``ToolError`` with a message a model can act on; any other exception
is a bug and is reported as one line, never a traceback.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import threading
from pathlib import Path
from typing import Any

from ..index import graph
from ..index.lexical import Filters
from ..index.sync import sync
from ..vault.editing import WriteRefused, note_hash
from ..vault.notes import KINDS
from ..vault.walk import OutsideVault, UnreadableNote, decode_note, read_note_bytes, safe_path
from .state import ServerState

log = logging.getLogger("memory_hub.server")

class ToolError(Exception):
    """A failure the caller can act on: both MCP front ends (``app.py`` over FastMCP, ``stdio.py``)
    send its message as the tool's error. Kept free of FastMCP so a stdio server never imports it."""


MAX_K = 50
MAX_CAPTURE_CHARS = 20_000
MAX_TITLE_CHARS = 200
MAX_READ_LINES = 2_000
DEFAULT_READ_LINES = 400
MAX_RECALL_TOKENS = 4_000
MAX_RELATED = 500


def _freshness(state: ServerState) -> dict[str, Any]:
    """Cheap staleness signal for every answer: what the watcher has seen but not indexed yet."""
    watcher = state.watcher
    pending = watcher.pending if watcher is not None else None
    out: dict[str, Any] = {"models_ready": state.models_ready.is_set()}
    if pending is None:
        out["watcher"] = "off"
        out["stale"] = "unknown: no watcher is running; call status() or run `memory-hub sync`"
    else:
        out["pending_changes"] = pending
        if pending:
            out["stale"] = f"{pending} changed file(s) are being re-indexed; results may be a second old"
    if state.index_problem:
        out["stale"] = state.index_problem
    return out


def _check_date(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        _dt.date.fromisoformat(value[:10])
    except ValueError:
        raise ToolError(f"{name} must be an ISO date such as 2026-05-01, not {value!r}") from None
    return value[:10]


def _check_kinds(kinds: list[str] | None) -> list[str] | None:
    if not kinds:
        return None
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        raise ToolError(f"unknown kind(s) {bad}; choose from {', '.join(KINDS)}")
    return kinds


def _filters(kinds: list[str] | None, tags: list[str] | None, path_prefix: str | None,
             since: str | None) -> Filters:
    prefix = None
    if path_prefix:
        if path_prefix.startswith("/") or ".." in path_prefix.split("/"):
            raise ToolError(f"path_prefix must be a folder inside the vault, such as 'decisions/', not {path_prefix!r}")
        prefix = path_prefix
    return Filters(kinds=_check_kinds(kinds), tags=[t.lstrip("#") for t in tags] if tags else None,
                   path_prefix=prefix, since=_check_date(since, "since"))


def _run_search(state: ServerState, query: str, k: int, filters: Filters | None, mode: str | None) -> Any:
    from ..retrieval.search import QueryError

    if not isinstance(query, str) or not query.strip():
        raise ToolError("query is empty: pass a few words or an identifier to search for")
    if not 1 <= k <= MAX_K:
        raise ToolError(f"k must be between 1 and {MAX_K}, not {k}")
    try:
        return state.search(query, k=k, filters=filters, mode=mode or None)
    except QueryError as exc:
        raise ToolError(str(exc)) from None


# -- tools ----------------------------------------------------------------------------------------

def search(state: ServerState, query: str, k: int = 10, mode: str | None = None,
           kinds: list[str] | None = None, tags: list[str] | None = None,
           path_prefix: str | None = None, since: str | None = None) -> dict[str, Any]:
    result = _run_search(state, query, k, _filters(kinds, tags, path_prefix, since), mode)
    hits = []
    for rank, h in enumerate(result.hits, start=1):
        hits.append({
            "rank": rank, "path": h.path, "title": h.title, "description": h.description,
            "date": h.date, "kind": h.kind, "score": h.score, "snippet": h.snippet,
            "tags": list(h.tags), **({"exact": True} if h.exact else {}),
        })
    out: dict[str, Any] = {"query": result.query, "results": hits, "low_confidence": result.low_confidence,
                           "index": _freshness(state)}
    if getattr(result, "timings_ms", None):
        out["timings_ms"] = dict(result.timings_ms)  # where the time went, per stage (benchmarks read it)
    used = getattr(result, "mode", None)
    if used:
        out["mode"] = used
    warnings = list(result.warnings)
    team = team_vaults(state)
    if team is not None:
        out["results"], out["vaults"], more = _with_team_vaults(state, team, hits, query, k, mode,
                                                                _filters(kinds, tags, path_prefix, since))
        warnings += more
    if warnings:
        out["warnings"] = warnings
    if not hits:
        out["hint"] = "no notes matched; try other words, fewer filters, or the other language (日本語/English)"
    elif result.low_confidence:
        out["hint"] = ("low confidence: the vault has no note with most of this query's words; "
                       "these are only the nearest notes, not answers")
    return out


def team_vaults(state: ServerState) -> Any:
    """The vault set of this server when team vaults are configured with it (``vaults.py``), else None."""
    from .team_vaults import for_state

    team = for_state(state)
    return None if team is None else team.vaults


def _team_searcher(state: ServerState, ref: Any) -> Any:
    from .team_vaults import for_state

    return for_state(state).searcher(ref)  # type: ignore[union-attr]


def _with_team_vaults(state: ServerState, team: Any, hits: list[dict[str, Any]], query: str, k: int, mode: str | None,
                      filters: Filters | None) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """This vault's hits fused with each team vault's (``team/search.py``); every result names its vault."""
    from ..team.search import fuse

    per_vault = [(team.primary.name, hits)]
    warnings = team.warnings()
    for ref in team.refs[1:]:
        try:
            result = _team_searcher(state, ref).search(query, k=k, filters=filters, mode=mode or None)
        except Exception as exc:  # noqa: BLE001 - one unreadable team vault must not fail the search
            warnings.append(f"vault {ref.name!r} was not searched: {type(exc).__name__}: {exc}")
            continue
        per_vault.append((ref.name, [{"path": h.path, "title": h.title, "description": h.description,
                                      "date": h.date, "kind": h.kind, "score": h.score, "snippet": h.snippet,
                                      "tags": list(h.tags), **({"exact": True} if h.exact else {})}
                                     for h in result.hits]))
    fused = fuse(per_vault, k)
    for rank, hit in enumerate(fused, start=1):
        hit["rank"] = rank
    return fused, [name for name, _ in per_vault], warnings


def recall(state: ServerState, prompt: str, budget_tokens: int = 600) -> dict[str, Any]:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ToolError("prompt is empty: pass the user's request or the task you are about to do")
    if not 50 <= budget_tokens <= MAX_RECALL_TOKENS:
        raise ToolError(f"budget_tokens must be between 50 and {MAX_RECALL_TOKENS}, not {budget_tokens}")
    from ..retrieval.recall import recall_for_server  # imported on first use: start-up stays fast
    from .team_vaults import for_state

    team = for_state(state)
    if team is None:
        return {**recall_for_server(state, prompt, budget_tokens), "index": _freshness(state)}
    # One block over this vault and the team vaults, fused as the hooks fuse it (team/recall.py).
    out = recall_for_server(state, prompt, budget_tokens, recaller=team.for_prompt(None))
    return {**out, "index": _freshness(state), "vaults": team.vaults.names()}


def _resolve_note(state: ServerState, path: str) -> str:
    """A vault-relative note path from a path or a note name, refusing anything outside the vault."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("path is empty: pass a vault-relative path such as 'decisions/use-sqlite.md'")
    path = path.strip().replace("\\", "/")
    try:
        safe_path(state.vault, path)
    except OutsideVault as exc:
        raise ToolError(f"refused: {exc}") from None
    conn = state.store.conn
    if conn.execute("SELECT 1 FROM notes WHERE path = ?", (path,)).fetchone():
        return path
    resolved = graph.build_resolver(conn).resolve(path.removesuffix(".md"))
    if resolved:
        return resolved
    if path.lower().endswith(".md") and safe_path(state.vault, path).is_file():
        return path  # on disk, not indexed yet (saved a moment ago)
    raise ToolError(f"no note at {path!r}; use a path returned by search() (vault-relative, with .md)")


def read_note(state: ServerState, path: str, from_line: int = 1, max_lines: int = DEFAULT_READ_LINES
              ) -> dict[str, Any]:
    if from_line < 1:
        raise ToolError(f"from_line starts at 1, not {from_line}")
    if not 1 <= max_lines <= MAX_READ_LINES:
        raise ToolError(f"max_lines must be between 1 and {MAX_READ_LINES}, not {max_lines}")
    team = team_vaults(state) if isinstance(path, str) and ":" in path else None
    ref, rest = team.split_ref(path.strip()) if team is not None else (None, path)
    if ref is not None and ref is not team.primary:
        return _read_team_note(ref, rest, from_line, max_lines)
    rel = _resolve_note(state, rest)
    if not rel.lower().endswith(".md"):
        raise ToolError(f"{rel} is an attachment, not a Markdown note")
    try:
        data = read_note_bytes(state.vault, rel)
        text = decode_note(data)
    except FileNotFoundError:
        raise ToolError(f"{rel} was deleted; the index will drop it within a second") from None
    except (UnreadableNote, OutsideVault) as exc:
        raise ToolError(f"cannot read {rel}: {exc}") from None
    row = state.store.note_row(rel)
    out: dict[str, Any] = {"path": rel, "title": row["title"] if row else rel, **_line_range(text, from_line, max_lines),
                           "hash": note_hash(data)}
    out["usage"] = _record_read(state, rel)
    return out


def _line_range(text: str, from_line: int, max_lines: int) -> dict[str, Any]:
    """The lines ``read_note`` returns, and how to ask for the rest."""
    lines = text.splitlines()
    chunk = lines[from_line - 1 : from_line - 1 + max_lines]
    to_line = from_line - 1 + len(chunk)
    out: dict[str, Any] = {"from_line": from_line, "to_line": to_line, "total_lines": len(lines),
                           "text": "\n".join(chunk)}
    if to_line < len(lines):
        out["more"] = f"{len(lines) - to_line} more line(s): call read_note again with from_line={to_line + 1}"
    return out


def _read_team_note(ref: Any, rel: str, from_line: int, max_lines: int) -> dict[str, Any]:
    """``read_note("platform:runbooks/x.md")``: a note of a team vault, by the same rules."""
    rel = rel.strip().replace("\\", "/")
    try:
        safe_path(ref.path, rel)
        text = decode_note(read_note_bytes(ref.path, rel))
    except FileNotFoundError:
        raise ToolError(f"no note at {rel!r} in vault {ref.name!r}") from None
    except (UnreadableNote, OutsideVault) as exc:
        raise ToolError(f"cannot read {ref.name}:{rel}: {exc}") from None
    return {"path": rel, "vault": ref.name, "ref": f"{ref.name}:{rel}", **_line_range(text, from_line, max_lines)}


def _record_read(state: ServerState, rel: str) -> dict[str, Any]:
    """One ``read`` usage event (appended to a log, never to the note) and the note's counts now."""
    from ..index import usage
    from ..vault.usage import record_read

    try:
        record_read(state.vault, rel)
    except Exception as exc:  # noqa: BLE001 - counting a read must never fail it
        log.warning("could not record a read of %s: %s", rel, exc)
    try:
        usage.fold(state.store, state.vault, wait=False)
        return usage.for_note(state.store, rel).as_dict()
    except Exception as exc:  # noqa: BLE001
        return {"error": f"usage unavailable: {exc}"}


def related(state: ServerState, path: str, hops: int = 1, limit: int = 50) -> dict[str, Any]:
    if hops not in (1, 2):
        raise ToolError(f"hops must be 1 or 2, not {hops}")
    if not 1 <= limit <= MAX_RELATED:
        raise ToolError(f"limit must be between 1 and {MAX_RELATED}, not {limit}")
    rel = _resolve_note(state, path)
    conn = state.store.conn
    row = conn.execute("SELECT id, title FROM notes WHERE path = ?", (rel,)).fetchone()
    note_id = int(row["id"])
    near = graph.neighbours(conn, note_id, hops)
    # A hub note can have thousands of neighbours: nearest first, then the most linked-to.
    backlinks = graph.backlink_counts(conn, [n.note_id for n in near] + [note_id])
    near.sort(key=lambda n: (n.hops, -backlinks.get(n.note_id, 0), n.path))
    shown = near[:limit]
    descriptions = {
        r[0]: r[1] for r in conn.execute(
            "SELECT path, description FROM notes WHERE id IN (SELECT value FROM json_each(?))",
            (json.dumps([n.note_id for n in shown]),),
        )
    }
    out: dict[str, Any] = {
        "path": rel, "title": row["title"], "backlinks": backlinks.get(note_id, 0),
        "related": [
            {"path": n.path, "title": n.title, "distance": n.hops, "direction": n.direction,
             "description": descriptions.get(n.path, ""), **({"via": n.via} if n.via else {})}
            for n in shown
        ],
        "total": len(near),
        "directions": "out: this note links to it; in: it links to this note; both; a>b: two hops",
        "index": _freshness(state),
    }
    if len(near) > limit:
        out["more"] = f"{len(near) - limit} more; showing the nearest and most linked-to {limit}"
    return out


def capture(state: ServerState, text: str, title: str | None = None, kind: str | None = None,
            tags: list[str] | None = None, links: list[str] | None = None, vault: str | None = None
            ) -> dict[str, Any]:
    if not isinstance(text, str) or not text.strip():
        raise ToolError("text is empty: pass what should be remembered")
    if len(text) > MAX_CAPTURE_CHARS:
        raise ToolError(f"text is {len(text):,} characters; the limit is {MAX_CAPTURE_CHARS:,}. "
                        "Capture the essence (a decision, a fact, a fix), not a transcript")
    if title is not None and len(title) > MAX_TITLE_CHARS:
        raise ToolError(f"title is {len(title)} characters; the limit is {MAX_TITLE_CHARS}")
    if kind is not None and kind not in KINDS:
        raise ToolError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    for value in (tags or []) + (links or []):
        if not isinstance(value, str) or not value.strip() or "\n" in value or len(value) > 200:
            raise ToolError(f"tags and links must be short single-line names, not {value!r}")
    from ..capture import braindump  # imported on first use: start-up stays fast

    team = team_vaults(state)
    if vault and team is None:
        raise ToolError(f"no vault named {vault!r}: this server has no team vaults ([vaults.NAME] in the user "
                        "settings)")
    if team is not None:
        from ..config import ConfigError

        try:
            target = team.capture_target(vault, tags or [])
        except ConfigError as exc:
            raise ToolError(str(exc)) from None
        if target is not team.primary:
            return _capture_in_team_vault(target, text, title, kind, tags, links)
    try:
        # URLs are kept in the note but not fetched: a tool call must not reach the network.
        result = braindump(state.vault, text, title=title, kind=kind, tags=tags, links=links, fetch_urls=False)
        written = result.path
        also = [result.daily] if result.daily else []
        extra = {k: v for k, v in (("scope", result.scope), ("tags", result.tags), ("due", result.due),
                                   ("deadline", result.deadline), ("daily", result.daily),
                                   ("warnings", result.warnings), ("redacted", result.redacted)) if v}
    except (OutsideVault, FileExistsError, ValueError) as exc:
        raise ToolError(f"not captured: {exc}") from None
    rel = _relative(state, written)
    report = sync(state.vault, store=state.store, only=[rel, *[_relative(state, a) for a in also]], progress=False)
    row = state.store.note_row(rel)
    paths = [rel, *[_relative(state, a) for a in also]]
    digest = _written(state)[rel] = note_hash(read_note_bytes(state.vault, rel))
    out = {"path": rel, "title": row["title"] if row else title, "kind": row["kind"] if row else kind,
           "indexed": row is not None, "hash": digest, **extra, "index": report.summary()}
    return out | authored_commit(state, paths, f"capture: {rel}")


INLINE_INDEX = 200  # files a write tool re-indexes before it answers; more are indexed in the background


def _changed(state: ServerState, paths: list[str], renamed: dict[str, str] | None = None) -> str:
    """Index the files a write changed (the watcher would, a second later); what the index did.

    A move that rewrote links in hundreds of notes would keep the client waiting for minutes of
    re-indexing, so beyond ``INLINE_INDEX`` files that runs in a background thread and the answer
    says so (searches meanwhile flag the pending changes).
    """
    def run() -> str:
        return sync(state.vault, store=state.store, only=paths, renamed=renamed, progress=False).summary()

    if len(paths) <= INLINE_INDEX:
        return run()

    def background() -> None:
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - the watcher's rescan catches up
            log.warning("indexing %d changed files failed: %s", len(paths), exc)

    threading.Thread(target=background, name="memory-hub-write-index", daemon=True).start()
    return f"indexing {len(paths)} changed files in the background; searches flag them as pending until done"


def _check_text(text: Any, name: str = "text") -> str:
    if not isinstance(text, str):
        raise ToolError(f"{name} must be a string")
    if len(text) > MAX_CAPTURE_CHARS:
        raise ToolError(f"{name} is {len(text):,} characters; the limit is {MAX_CAPTURE_CHARS:,}")
    return text


def _check_hash(expected_hash: str | None, required: bool) -> str | None:
    if expected_hash is None or not str(expected_hash).strip():
        if required:
            raise ToolError("expected_hash is empty: pass the hash read_note returned for this note")
        return None
    value = str(expected_hash).strip().lower()
    if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        raise ToolError(f"expected_hash must be the 32-character hash read_note returned, not {expected_hash!r}")
    return value


MAX_LISTED = 50


def _capped(out: dict[str, Any], key: str) -> dict[str, Any]:
    """``out`` with the list under ``key`` cut to ``MAX_LISTED`` items and its full length beside it."""
    items = out.get(key)
    if isinstance(items, list) and len(items) > MAX_LISTED:
        out[key] = items[:MAX_LISTED]
        out[f"{key}_total"] = len(items)
    return out


def _written(state: ServerState) -> dict[str, str]:
    """{path: hash} of notes this server wrote and did not commit (captures): an uncommitted recent
    save with that hash is the agent's own, not a person's edit in progress."""
    return state.extras.setdefault("written", {})


def _token_name() -> str | None:
    """The named token that sent this write (a shared server's tokens), or None for a local one."""
    from .tokens import LOCAL, current

    who = current()
    return None if who == LOCAL else who.name


def _author() -> Any:
    """The block a write tool commits in: named after the token that sent the write, else git's
    own identity."""
    from ..vault import git

    name = _token_name()
    if name is None:
        return git.author(None)
    from ..team.authored import author_line

    return git.author(author_line(name))


def update_note(state: ServerState, path: str, text: str, expected_hash: str, heading: str | None = None,
                mode: str = "append") -> dict[str, Any]:
    from ..vault.edit import update_note as update

    rel = _resolve_note(state, path)
    try:
        with _author():
            result = update(state.vault, rel, _check_text(text), _check_hash(expected_hash, True), mode=mode,
                            heading=heading, own_hash=_written(state).get(rel))
    except WriteRefused as exc:
        raise ToolError(str(exc)) from None
    out = result.as_dict()
    if result.changed:
        out["index"] = _changed(state, [rel])
    return out


def move_note(state: ServerState, path: str, new_path: str, expected_hash: str | None = None) -> dict[str, Any]:
    from ..vault.move import move_note as move

    rel = _resolve_note(state, path)
    if not isinstance(new_path, str) or not new_path.strip():
        raise ToolError("new_path is empty: pass the vault-relative path the note should have, e.g. 'decisions/x.md'")
    try:
        with _author():
            result = move(state.vault, rel, new_path, _check_hash(expected_hash, False))
    except WriteRefused as exc:
        raise ToolError(str(exc)) from None
    out = _capped(_capped(result.as_dict(), "relinked"), "skipped")
    _carry_usage(state, result.old, result.new)
    out["index"] = _changed(state, result.paths, renamed={result.old: result.new})
    if result.skipped:
        out["hint"] = ("some notes are being edited and still link to the old name; update them later with "
                       "update_note, or ask the person")
    return out


def _carry_usage(state: ServerState, old: str, new: str) -> None:
    from ..index import usage

    try:
        usage.carry(state.store, state.vault, old, new)
    except Exception as exc:  # noqa: BLE001 - the move is done and committed; counts are secondary
        log.warning("usage counts of %s did not follow it to %s: %s", old, new, exc)


def delete_note(state: ServerState, path: str, expected_hash: str | None = None) -> dict[str, Any]:
    from ..vault.trash import trash_note

    rel = _resolve_note(state, path)
    try:
        with _author():
            result = trash_note(state.vault, rel, _check_hash(expected_hash, False))
    except WriteRefused as exc:
        raise ToolError(str(exc)) from None
    out = _capped(result.as_dict(), "backlinks")
    out["index"] = _changed(state, [rel])
    out["restore"] = f"restore_note(path={rel!r}) brings it back"
    if result.backlinks:
        out["hint"] = f"{len(result.backlinks)} note(s) still link to it; fix them with update_note if they should not"
    return out


def restore_note(state: ServerState, path: str, new_path: str | None = None) -> dict[str, Any]:
    from ..vault.trash import restore_note as restore

    if not isinstance(path, str) or not path.strip():
        raise ToolError("path is empty: pass the deleted note's path (or its .trash/ path from delete_note)")
    try:
        with _author():
            result = restore(state.vault, path, new_path or None)
    except WriteRefused as exc:
        raise ToolError(str(exc)) from None
    out = result.as_dict()
    out["index"] = _changed(state, [result.path])
    if result.moved_from:
        _carry_usage(state, result.moved_from, result.path)
    return out



def _capture_in_team_vault(ref: Any, text: str, title: str | None, kind: str | None, tags: list[str] | None,
                           links: list[str] | None) -> dict[str, Any]:
    """A capture that names a team vault, or carries one of its ``capture_tags``: written there,
    indexed in that vault's own index, committed with its author like any write."""
    from ..capture import braindump

    try:
        result = braindump(ref.path, text, title=title, kind=kind, tags=tags, links=links, fetch_urls=False)
    except (OutsideVault, FileExistsError, ValueError) as exc:
        raise ToolError(f"not captured in {ref.name}: {exc}") from None
    paths = [Path(p).as_posix() if not Path(p).is_absolute() else Path(p).resolve().relative_to(ref.path).as_posix()
             for p in [result.path, *([result.daily] if result.daily else [])]]
    report = sync(ref.path, only=paths, progress=False)
    out = {"path": paths[0], "vault": ref.name, "ref": f"{ref.name}:{paths[0]}", "indexed": True,
           "index": report.summary(), **({"redacted": result.redacted} if result.redacted else {})}
    return out | _authored(ref.path, paths, f"capture: {paths[0]}")


def authored_commit(state: ServerState, paths: list[str], message: str) -> dict[str, Any]:
    """A write by a named token of a shared server is committed at once with the token as author
    (``team/authored.py``); other writes (stdio, no tokens) are left to autocommit as before.
    Every MCP write tool calls this after writing."""

    return _authored(state.vault, paths, message)


def _authored(vault: Any, paths: list[str], message: str) -> dict[str, Any]:
    name = _token_name()
    if name is None:
        return {}
    from ..team.authored import commit_as

    return {"git": commit_as(vault, paths, name, f"{message}\n\nWritten through the MCP server by "
                                                 f"token {name!r}.")}


def _relative(state: ServerState, written: Any) -> str:
    from pathlib import Path

    p = Path(written)
    if p.is_absolute():
        p = p.resolve().relative_to(state.vault)
    return p.as_posix()


def status(state: ServerState) -> dict[str, Any]:
    conn = state.store.conn
    kinds = {r[0]: r[1] for r in conn.execute("SELECT kind, count(*) FROM notes GROUP BY kind")}
    notes = sum(v for k, v in kinds.items() if k != "attachment")
    last = state.store.get_meta("last_sync")
    pending = state.pending_changes()
    out: dict[str, Any] = {
        "vault": str(state.vault),
        "notes": notes,
        "attachments": kinds.get("attachment", 0),
        "kinds": {k: v for k, v in sorted(kinds.items()) if k != "attachment"},
        "links": conn.execute("SELECT count(*) FROM links").fetchone()[0],
        "last_sync": (_dt.datetime.fromtimestamp(float(last)).isoformat(timespec="seconds") if last else None),
        "pending_changes": pending,
        "fresh": pending == 0 and not state.index_problem,
        "problems": conn.execute("SELECT count(*) FROM problems").fetchone()[0],
        "models_ready": state.models_ready.is_set(),
        "uptime_seconds": round(state.uptime(), 1),
    }
    if state.models_error:
        out["models_error"] = state.models_error
    out.update(state.index_health())
    out["usage"] = _usage_status(state)
    out.update(_vector_status(state))
    watcher = state.watcher
    if watcher is not None:
        out["watcher"] = {"alive": watcher.alive, "pending": watcher.pending, "syncs": watcher.syncs,
                          "mode": getattr(watcher, "mode", "events"),
                          **({"reason": watcher.fallback_reason} if getattr(watcher, "fallback_reason", None) else {}),
                          **({"last_error": watcher.last_error} if watcher.last_error else {}),
                          **({"failed": sorted(watcher.failed)} if watcher.failed else {})}
    else:
        out["watcher"] = "off"
    if pending:
        out["stale"] = f"{pending} file(s) changed since the last sync; they will be indexed shortly"
    from .team_vaults import for_state

    team = for_state(state)
    if team is not None:  # each team vault served beside this one, and whether a watcher keeps it fresh
        out["team_vaults"] = team.status()
    return out


def _usage_status(state: ServerState) -> dict[str, Any]:
    from ..index import usage

    try:
        usage.fold(state.store, state.vault, wait=False)
        return usage.summary(state.store, state.vault)
    except Exception as exc:  # noqa: BLE001 - status must answer
        return {"error": f"usage unavailable: {exc}"}


def _vector_status(state: ServerState) -> dict[str, Any]:
    """Chunk count, embedding coverage and model, from the searcher's vector index when it has one."""
    if not state.vectors_enabled():
        return {"chunks": 0, "model": None, "embedding_coverage": None,
                "vectors": "none yet: run `memory-hub index` to embed the vault; search is lexical"}
    if not state.models_ready.is_set():
        return {"chunks": None, "model": None, "embedding_coverage": None, "vectors": "models are loading"}
    if state.models_error:
        return {"chunks": None, "model": None, "embedding_coverage": None, "vectors": state.models_error}
    try:
        cov = state.searcher.coverage()
        chunks = state.searcher.vectors.size(state.store)
    except Exception as exc:  # noqa: BLE001
        return {"chunks": None, "model": None, "embedding_coverage": None, "vectors": f"unreadable: {exc}"}
    out: dict[str, Any] = {
        "chunks": chunks, "model": cov.embedder,
        "embedding_coverage": {"fresh": cov.fresh, "expected": cov.expected,
                               "ratio": round(cov.fresh / cov.expected, 4) if cov.expected else 1.0},
    }
    if not cov.ok:
        out["vectors"] = (f"{len(cov.stale)} stale, {len(cov.missing)} missing, {len(cov.orphaned)} orphaned; "
                          "being updated")
    if state.ann_upkeep:
        out["ann_upkeep"] = state.ann_upkeep
    return out
