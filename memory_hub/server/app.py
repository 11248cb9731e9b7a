"""The MCP surface: ten tools with typed parameters, descriptions written for a model, annotations.

The logic lives in ``tools.py``; this module only declares what a client sees. Every tool runs in
a worker thread (fastmcp's default for sync functions), so a slow search never blocks the event
loop, and every failure reaches the client as a one-line ``ToolError`` — arguments the schema
refuses too (``OneLineArgumentErrors``), which pydantic would report in several lines and a link.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError, ValidationError
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from mcp.types import ToolAnnotations
from pydantic import Field
from pydantic import ValidationError as PydanticValidationError

from . import tools
from .about import INSTRUCTIONS
from .about import server_version as _version
from .guard import PRINCIPAL_KEY
from .state import ServerState
from .tokens import LOCAL, Principal, bind, tool_writes, unbind

log = logging.getLogger("memory_hub.server")


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
# Changes to existing notes. Each is made against the note's hash (or refused), so repeating a
# call changes nothing more: idempotent. update/move/delete change or remove what a person may
# have written (destructive, though every change is a commit and a delete goes to .trash/);
# restore only brings a note back.
CHANGES = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)
RESTORES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
HASH_HELP = "The 'hash' read_note returned for this note: the change is refused if the note changed since."

Kind = Literal["knowledge", "capture", "decision", "runbook", "tracker", "daily", "template"]


def _guarded(state: ServerState) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for the tools over ``state``: the index is checked first (one stat, so no answer
    comes from an index deleted under the server), and unexpected exceptions become one-line tool
    errors (the traceback goes to the log)."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                state.check_index()
                return func(*args, **kwargs)
            except ToolError:
                raise
            except tools.ToolError as exc:
                raise ToolError(str(exc)) from None
            except Exception as exc:
                log.exception("tool %s failed", func.__name__)
                raise ToolError(f"internal error in {func.__name__}: {type(exc).__name__}: {exc}") from None

        return wrapper

    return decorate


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def argument_error(tool: str, exc: Exception, params: list[str] | None = None) -> str:
    """One line for a call whose arguments the tool's schema refused (pydantic's errors, condensed)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, PydanticValidationError) else exc
    if not isinstance(cause, PydanticValidationError):
        return f"invalid arguments for {tool}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
    errors = cause.errors()
    parts = []
    for err in errors[:3]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        kind = err.get("type", "")
        if kind == "unexpected_keyword_argument":
            what = "unknown argument" + (f" ({tool} takes {', '.join(params)})" if params else "")
        elif kind in ("missing_argument", "missing"):
            what = "required, missing"
        else:
            msg = str(err.get("msg", "invalid"))
            what = f"{msg[:1].lower()}{msg[1:]} (got {_short(err.get('input'))})"
        parts.append(f"{where}: {what}")
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"invalid arguments for {tool}: " + "; ".join(parts) + more


class OneLineArgumentErrors(Middleware):
    """Arguments refused by a tool's schema reach the client as one ``ToolError`` line."""

    def __init__(self, params: dict[str, list[str]]) -> None:
        self.params = params

    async def on_call_tool(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        try:
            return await call_next(context)
        except (ValidationError, PydanticValidationError) as exc:
            name = getattr(context.message, "name", "tool")
            raise ToolError(argument_error(name, exc, self.params.get(name))) from None


# The retrieval layer validates modes (retrieval.search.MODES); listed here so that building the tool
# list does not import the retrieval stack at start-up. A test keeps the two in step.
SEARCH_MODES = ("lexical", "vector", "hybrid", "hybrid+graph", "hybrid+rerank", "hybrid+graph+rerank")


def _mode_help() -> str:
    modes = ", ".join(SEARCH_MODES)
    return (f"Ranking mode, one of: {modes}. Leave empty for the server's default (lexical while models "
            "are still loading). 'lexical' is keyword-only; modes with 'rerank' are slower but sharper.")


def _principal() -> Principal:
    """Who sent the request being served: the principal ``guard.Guard`` put in the HTTP request's
    state; LOCAL on stdio (the person who started the server)."""
    from fastmcp.server.dependencies import get_http_request

    try:
        request = get_http_request()
    except RuntimeError:
        return LOCAL
    found = (request.scope.get("state") or {}).get(PRINCIPAL_KEY)
    return found if isinstance(found, Principal) else LOCAL


class ScopeGate(Middleware):
    """The one place a token's scope is enforced: a read token never reaches a tool that writes.

    Whether a tool writes is ``tokens.tool_writes`` (not annotated ``readOnlyHint=True``), decided on
    the registered tool at call time, so every write tool added to this server is covered. A read
    token does not see write tools in its list either. The principal is bound for the call, so a
    write can name its author (``tokens.current``)."""

    def __init__(self, mcp: FastMCP) -> None:
        self.mcp = mcp

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        principal = _principal()
        if not principal.can_write:
            tool = await self.mcp.get_tool(context.message.name)
            if tool is None or tool_writes(tool):
                raise ToolError(f"token {principal.name!r} has the read scope; {context.message.name!r} "
                                "changes the vault and needs a write token")
        bound = bind(principal)
        try:
            return await call_next(context)
        finally:
            unbind(bound)

    async def on_list_tools(self, context: Any, call_next: Any) -> Any:
        listed = await call_next(context)
        if _principal().can_write:
            return listed
        return [t for t in listed if not tool_writes(t)]


def build_server(state: ServerState) -> FastMCP:
    """A FastMCP server whose tools answer from ``state``."""
    mcp = FastMCP("memory-hub", instructions=INSTRUCTIONS, version=_version(),
                  mask_error_details=False, strict_input_validation=True)
    mcp.add_middleware(ScopeGate(mcp))
    guarded = _guarded(state)

    @mcp.tool(annotations=READ_ONLY, title="Search memory")
    @guarded
    def search(
        query: Annotated[str, Field(description="Words, a phrase or an identifier (English or Japanese). "
                                                "Example: 'postgres failover runbook' or '認証 パスキー'.")],
        k: Annotated[int, Field(ge=1, le=tools.MAX_K, description="How many notes to return.")] = 10,
        mode: Annotated[str | None, Field(description=_mode_help())] = None,
        kinds: Annotated[list[Kind] | None, Field(description="Only these note kinds.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only notes carrying all of these tags.")] = None,
        path_prefix: Annotated[str | None, Field(description="Only notes under this folder, e.g. 'decisions/'.")] = None,
        since: Annotated[str | None, Field(description="Only notes updated on or after this ISO date (YYYY-MM-DD).")] = None,
    ) -> dict[str, Any]:
        """Search the user's memory vault and return the best-matching notes, best first.

        Each result has path, title, description, date, kind, score and a short snippet. Read the
        descriptions first; call read_note(path) only for notes you actually need. When team vaults
        are searched too, results carry 'vault' and 'ref' ('vault:path'): pass ref to read_note. When
        low_confidence is true no note really matched: the results are only the nearest notes."""
        return tools.search(state, query, k, mode, kinds, tags, path_prefix, since)

    @mcp.tool(annotations=READ_ONLY, title="Recall relevant notes")
    @guarded
    def recall(
        prompt: Annotated[str, Field(description="The user's request or the task at hand, verbatim.")],
        budget_tokens: Annotated[int, Field(ge=50, le=tools.MAX_RECALL_TOKENS,
                                            description="Upper bound on the size of the block.")] = 600,
    ) -> dict[str, Any]:
        """A compact table of contents of the notes relevant to a prompt: a <vault-memory> block with
        one line per note, 'rank|title|path|description', never note bodies. Use it at the start of
        a task; open promising notes with read_note."""
        return tools.recall(state, prompt, budget_tokens)

    @mcp.tool(annotations=READ_ONLY, title="Read a note")
    @guarded
    def read_note(
        path: Annotated[str, Field(description="Vault-relative path from search/recall, e.g. 'runbooks/deploy.md' "
                                               "(a note name also works).")],
        from_line: Annotated[int, Field(ge=1, description="First line to return (1-based).")] = 1,
        max_lines: Annotated[int, Field(ge=1, le=tools.MAX_READ_LINES,
                                        description="How many lines to return at most.")] = tools.DEFAULT_READ_LINES,
    ) -> dict[str, Any]:
        """Read a note's Markdown (frontmatter included), optionally a range of lines. Long notes
        say how to fetch the rest. Reading counts as a use of the note."""
        return tools.read_note(state, path, from_line, max_lines)

    @mcp.tool(annotations=READ_ONLY, title="Linked notes")
    @guarded
    def related(
        path: Annotated[str, Field(description="Vault-relative path of the starting note.")],
        hops: Annotated[int, Field(ge=1, le=2, description="1: direct links and backlinks; 2: also their links.")] = 1,
        limit: Annotated[int, Field(ge=1, le=tools.MAX_RELATED,
                                    description="At most this many notes, nearest and most linked-to first.")] = 50,
    ) -> dict[str, Any]:
        """Notes linked to or from a note within 1–2 hops, with direction ('out', 'in', 'both', or a
        two-step path such as 'out>in') and distance. Use it to find context around a note."""
        return tools.related(state, path, hops, limit)

    @mcp.tool(
        annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False,
                                    openWorldHint=False),
        title="Capture a memory",
    )
    @guarded
    def capture(
        text: Annotated[str, Field(description="What to remember, in Markdown: the decision, fact, fix or "
                                               "lesson, with the why. Short and self-contained.")],
        title: Annotated[str | None, Field(description="A short title; derived from the text when empty.")] = None,
        kind: Annotated[Kind | None, Field(description="Note kind; 'capture' when empty.")] = None,
        tags: Annotated[list[str] | None, Field(description="Topic tags without '#'.")] = None,
        links: Annotated[list[str] | None, Field(description="Names of existing notes to link with [[wikilinks]].")] = None,
        vault: Annotated[str | None, Field(description="A team vault's name to capture into (see search "
                                                       "results' 'vault'); empty: the personal vault, or the "
                                                       "team vault whose capture tags match.")] = None,
    ) -> dict[str, Any]:
        """Save a new note into the vault's capture folder and index it at once. Never overwrites
        an existing note; returns the new note's path and hash (for update_note)."""
        return tools.capture(state, text, title, kind, tags, links, vault)

    @mcp.tool(annotations=CHANGES, title="Update a note")
    @guarded
    def update_note(
        path: Annotated[str, Field(description="Vault-relative path of the note, e.g. 'decisions/use-sqlite.md'.")],
        text: Annotated[str, Field(description="Markdown to write. Secrets are redacted before writing.")],
        expected_hash: Annotated[str, Field(description=HASH_HELP)],
        heading: Annotated[str | None, Field(description="Change only this section: its heading text, e.g. "
                                                         "'Consequences' (or '## Consequences' to pin the level). "
                                                         "Empty: the whole body.")] = None,
        mode: Annotated[Literal["append", "replace"], Field(
            description="'append': add text at the end of the section (created when missing) or of the note; "
                        "'replace': replace the section's content (its heading stays) or the whole body "
                        "(the frontmatter stays).")] = "append",
    ) -> dict[str, Any]:
        """Correct or extend an existing note, then commit the change. Read the note first: pass the
        hash read_note returned, so an edit a person made meanwhile is never overwritten (a stale
        hash is refused with the current one). Returns the new hash for a next change."""
        return tools.update_note(state, path, text, expected_hash, heading, mode)

    @mcp.tool(annotations=CHANGES, title="Move or rename a note")
    @guarded
    def move_note(
        path: Annotated[str, Field(description="Vault-relative path of the note to move.")],
        new_path: Annotated[str, Field(description="Its new vault-relative path ('.md' added when missing; "
                                                   "a path ending in '/' keeps the file name).")],
        expected_hash: Annotated[str | None, Field(description=HASH_HELP + " Needed when a person is "
                                                                           "editing the note.")] = None,
    ) -> dict[str, Any]:
        """Rename or move a note and rewrite the links in other notes that pointed to it (every
        wikilink, embed and relative Markdown link form), as one commit. Notes a person is
        editing are left as they are and listed under 'skipped'. Never overwrites a file."""
        return tools.move_note(state, path, new_path, expected_hash)

    @mcp.tool(annotations=CHANGES, title="Delete a note (to the trash)")
    @guarded
    def delete_note(
        path: Annotated[str, Field(description="Vault-relative path of the note to retire.")],
        expected_hash: Annotated[str | None, Field(description=HASH_HELP + " Needed when a person is "
                                                                           "editing the note.")] = None,
    ) -> dict[str, Any]:
        """Retire a note that is wrong or obsolete: it moves to the vault's .trash/ folder and the
        change is committed, so restore_note brings it back. Lists the notes whose links to it
        now dangle."""
        return tools.delete_note(state, path, expected_hash)

    @mcp.tool(annotations=RESTORES, title="Restore a deleted note")
    @guarded
    def restore_note(
        path: Annotated[str, Field(description="The deleted note's old path, or the 'trash_path' delete_note "
                                               "returned.")],
        new_path: Annotated[str | None, Field(description="Restore it at this path instead of its old one.")] = None,
    ) -> dict[str, Any]:
        """Bring back a note delete_note retired (from .trash/, or from git history when the trash
        was emptied), then commit. Never overwrites a note: pass new_path if its old path is taken."""
        return tools.restore_note(state, path, new_path)

    @mcp.tool(annotations=READ_ONLY, title="Memory status")
    @guarded
    def status() -> dict[str, Any]:
        """Index health: note and chunk counts, last sync, pending (not yet indexed) changes,
        embedding coverage and model, watcher state. Check it when results look stale."""
        return tools.status(state)

    declared = (search, recall, read_note, related, capture, update_note, move_note, delete_note, restore_note,
                status)
    mcp.add_middleware(OneLineArgumentErrors({_name(f): list(inspect.signature(f).parameters) for f in declared}))
    return mcp


def _name(tool: Any) -> str:
    return getattr(tool, "name", None) or getattr(tool, "__name__", "tool")
