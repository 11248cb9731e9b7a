"""Streamable HTTP's commonest request answered directly: a read-only ``tools/call`` on a live session.

Measured on obsidian-hub (benchmarks/bench_peers.py), a warm ``search`` spent ~12 ms in the HTTP
layer where stdio spends ~2 ms: the MCP SDK's session transport validates the message with
pydantic, hands it through memory streams to the session's dispatcher task, FastMCP runs its
middleware chain and validates the arguments and the result with pydantic again, and the answer
comes back the same way. For a read-only tool none of that changes the answer, so this ASGI
middleware (inside ``guard.Guard``, which has already checked the Host, the origin and the token)
answers such a call itself, with the stdio server's code (``stdio.call_result``: the same tool
functions, the same strict argument checks against FastMCP's recorded tool list, the same words for
errors), as one JSON body — which the transport allows for a POST whose client accepts
``application/json``, and which the server already chose for every POST (``json_response``).

Only the session revisions (2024-11-05 to 2025-11-25: what Claude Code, the Python SDK 1.x and most
clients speak) are answered here. Everything else goes to FastMCP as before, untouched: the
sessionless 2026 revision (the Python SDK 2.x client; its header and body checks are the SDK's),
``initialize``, notifications, other methods,
write tools (their token scope check and author binding live in ``app.ScopeGate``), batches, GET
streams, DELETE, SSE, a request without a live session (unknown, expired or ended: the SDK answers
404), a session tied to a credential, a protocol version the SDK would route elsewhere, a client
that does not accept JSON, a body that is not one well-formed JSON-RPC request. The session's idle
countdown is held while a direct call runs and restarted after it, as the SDK does for its own.
``MEMORY_HUB_HTTP_DIRECT=0`` sends every request through FastMCP
(``tests/test_server_http.py`` compares the two paths' answers).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE as MAX_BODY  # the SDK's own limit

from .http_limits import _SESSION_HEADER

log = logging.getLogger("memory_hub.server")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

MCP_PATH = "/mcp"
DIRECT_ENV = "MEMORY_HUB_HTTP_DIRECT"  # "0": every request goes through FastMCP (to compare, or to rule this out)
_VERSION = b"mcp-protocol-version"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or ():
        if key == name:
            return value.decode("latin-1")
    return None


def _accepts_json(scope: Scope) -> bool:
    """The SDK's own Accept rule for a JSON answer (wildcards count)."""
    from mcp.server.streamable_http import check_accept_headers
    from starlette.requests import Request

    return check_accept_headers(Request(scope))[0]


def _is_json_body(scope: Scope) -> bool:
    content_type = _header(scope, b"content-type") or ""
    return any(part.strip() == "application/json" for part in content_type.split(";")[0].split(","))


class DirectCalls:
    """ASGI middleware over the streamable-HTTP app: see the module docstring.

    ``limits``: the server's ``http_limits.HttpLimits``, whose ``manager`` is the SDK's session
    manager once the app has started (None before) and which counts the calls answered here
    (``/health``: ``http.direct_calls``); ``state``: what the tools answer from."""

    def __init__(self, app: Callable[..., Awaitable[None]], state: Any, limits: Any, path: str = MCP_PATH) -> None:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        from .stdio import STAGES_ENV, load_tool_list
        from .tokens import tool_writes

        self.app, self.state, self.limits, self.path = app, state, limits, path
        self.versions = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
        self.by_name = {t["name"]: t for t in load_tool_list()}
        # only tools that never write (the one rule, tokens.tool_writes, that app.ScopeGate applies):
        # a write's scope check and its author are app.ScopeGate's
        self.read_only = {name for name, t in self.by_name.items() if not tool_writes(t)}
        self.stages = bool(os.environ.get(STAGES_ENV))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        transport = self._live_session(scope)
        if transport is None:
            await self.app(scope, receive, send)
            return
        body, complete = await _read_body(receive)
        message = self._call_of(body) if complete else None
        if message is not None and self._live_session(scope) is not transport:
            message = None  # the session ended while the body arrived: the SDK says 404
        if message is None:
            await self.app(scope, _replay(body, complete, receive), send)
            return
        await self._answer(scope, send, transport, message)

    def _live_session(self, scope: Scope) -> Any:
        """The session transport this request may be answered on directly, else None."""
        if scope.get("type") != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            return None
        session = _header(scope, _SESSION_HEADER)
        manager = self.limits.manager
        if session is None or manager is None:
            return None
        instances = getattr(manager, "_server_instances", None)
        owners = getattr(manager, "_session_owners", None)
        if not isinstance(instances, dict) or not isinstance(owners, dict):
            return None
        transport = instances.get(session)
        if transport is None or owners.get(session) is not None or scope.get("user") is not None:
            return None  # unknown/expired (the SDK says 404), or a session bound to a credential
        if getattr(transport, "is_terminated", True) or getattr(transport, "mcp_session_id", None) != session:
            return None
        idle = getattr(transport, "idle_scope", None)
        if idle is not None and (idle.cancel_called or not hasattr(transport, "_requests_in_flight")):
            return None
        version = _header(scope, _VERSION)
        if version is not None and version not in self.versions:
            return None
        if not _accepts_json(scope) or not _is_json_body(scope):
            return None
        return transport

    def _call_of(self, body: bytes) -> dict[str, Any] | None:
        """The request when it is one JSON-RPC ``tools/call`` of a read-only tool, else None."""
        try:
            msg = json.loads(body)
        except (ValueError, RecursionError):  # bad or absurdly nested JSON: the SDK answers it (400)
            return None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or msg.get("method") != "tools/call":
            return None
        rid = msg.get("id")
        params = msg.get("params")
        if isinstance(rid, bool) or not isinstance(rid, (str, int)) or not isinstance(params, dict):
            return None
        name = params.get("name")
        if (not isinstance(name, str) or name not in self.read_only
                or not isinstance(params.get("arguments", {}), (dict, type(None)))):
            return None
        return msg

    async def _answer(self, scope: Scope, send: Send, transport: Any, msg: dict[str, Any]) -> None:
        import anyio

        from .guard import PRINCIPAL_KEY
        from .stdio import call_result
        from .tokens import LOCAL, Principal, bind, unbind

        found = (scope.get("state") or {}).get(PRINCIPAL_KEY)  # who guard.Guard let in (app._principal)
        principal = found if isinstance(found, Principal) else LOCAL
        received = time.perf_counter()

        def run() -> dict[str, Any]:
            bound = bind(principal)
            try:
                return call_result(self.state, self.by_name, msg["params"], received if self.stages else None)
            finally:
                unbind(bound)

        idle = getattr(transport, "idle_scope", None)
        timeout = getattr(transport, "_idle_timeout", None)
        held = idle is not None and timeout is not None
        if held:  # as the SDK's transport.handle_request: no idle expiry while a request runs
            transport._requests_in_flight += 1
            idle.deadline = float("inf")
        try:
            result = await anyio.to_thread.run_sync(run)
        finally:
            if held:
                transport._requests_in_flight -= 1
                if not transport._requests_in_flight:
                    idle.deadline = anyio.current_time() + timeout
        self.limits.direct_calls += 1
        data = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}, ensure_ascii=False,
                          separators=(",", ":"), default=str).encode("utf-8")
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
            (_SESSION_HEADER, transport.mcp_session_id.encode("latin-1"))]})
        await send({"type": "http.response.body", "body": data})


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body, up to MAX_BODY: (what was read, whether that is all of it)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: let the app see it
            return b"".join(parts), False
        chunk = message.get("body", b"")
        parts.append(chunk)
        size += len(chunk)
        if size > MAX_BODY:  # before "complete": an oversized body is the SDK's to refuse (413)
            return b"".join(parts), False
        if not message.get("more_body", False):
            return b"".join(parts), True


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body already read, then whatever follows."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return again
