"""Keep the HTTP server reachable, small and quiet under abuse: timeouts, caps, one line per kind.

uvicorn closes a keep-alive connection a few seconds after its last response, but nothing closes
a connection that never completes a request (a port scan, a stuck client, a slowloris); each holds
a file descriptor, and a process out of descriptors can accept nobody while asyncio logs a
traceback per failed accept. Abandoned MCP sessions hold memory in the same way. So:

* a connection must deliver a whole request, headers and body, within ``read_timeout`` seconds of
  opening (or of its previous response), else it is closed; idle keep-alive connections close
  after ``idle_timeout``;
* at most ``max_connections`` are open at once, kept below the process's file-descriptor limit;
  one more is answered ``503`` and closed at once;
* a streamable-HTTP session with no request for ``session_ttl`` seconds ends, and at most
  ``max_sessions`` live at once: opening one more first ends the one idle longest (its client
  gets ``404`` and, as MCP requires, opens a new session);
* warnings that repeat (refused connections, timeouts, accept errors, library warnings) are logged
  once per kind per minute with a count, never a traceback per connection.

SSE and streamable-HTTP ``GET`` streams stay open as long as their client wants: a request whose
head and body have arrived is no longer "reading", whatever its response does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import resource
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from .quiet import QuietLog

log = logging.getLogger("memory_hub.server")

Scope = dict[str, Any]
_SESSION_HEADER = b"mcp-session-id"
_BUSY = b'{"error": "too many connections; retry shortly"}'
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: " + str(len(_BUSY)).encode() + b"\r\n\r\n" + _BUSY)
_FD_RESERVE = 128  # descriptors kept for SQLite, LanceDB, models, the watcher, the hooks socket, accepts
ACCEPT_BATCH = 64  # connections accepted per wake-up (the listen backlog): refusals close between batches


def _setting(key: str) -> Any:
    """A ``server.*`` setting from its variable (files reach it through ``export_environment``)."""
    from ..config import BY_KEY

    setting = BY_KEY[key]
    raw = os.environ.get(setting.env or "")
    if raw is None or raw.strip() == "":
        return setting.default
    try:
        return setting.check(raw)
    except ValueError as exc:
        raise ValueError(f"${setting.env} {exc}, not {raw!r}") from None


def raise_fd_limit() -> int:
    """Lift the soft file-descriptor limit to the hard one (capped at 65,536); returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65_536 if hard == resource.RLIM_INFINITY else min(hard, 65_536)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
    return 65_536 if soft == resource.RLIM_INFINITY else soft


@dataclass
class HttpLimits:
    """The limits one HTTP server enforces, and what it counts while running."""

    read_timeout: float = 10.0
    idle_timeout: float = 5.0
    max_connections: int = 256
    session_ttl: float = 1800.0
    max_sessions: int = 100
    quiet: QuietLog = field(default_factory=lambda: QuietLog(log))
    refused: int = 0
    timed_out: int = 0
    evicted: int = 0
    direct_calls: int = 0  # read-only tool calls answered by direct_http.DirectCalls
    manager: Any = None  # the streamable-HTTP session manager, once the app has started
    _connections: set[Any] | None = None

    @classmethod
    def from_env(cls) -> HttpLimits:
        """The ``server.*`` settings (``MEMORY_HUB_HTTP_*``; see the README's Configuration table);
        the connection cap is lowered to fit the file-descriptor limit."""
        limits = cls(read_timeout=_setting("server.read_timeout"), idle_timeout=_setting("server.idle_timeout"),
                     max_connections=_setting("server.max_connections"), session_ttl=_setting("server.session_ttl"),
                     max_sessions=_setting("server.max_sessions"))
        fds = raise_fd_limit()
        fit = max(8, fds - max(_FD_RESERVE, fds // 4))
        if fit < limits.max_connections:
            log.warning("file-descriptor limit %d: serving at most %d HTTP connections at once", fds, fit)
            limits.max_connections = fit
        return limits

    def protocol(self) -> type[H11Protocol]:
        """The uvicorn protocol class enforcing these limits (pass as ``uvicorn.Config(http=…)``)."""
        return type("LimitedH11Protocol", (_LimitedH11Protocol,), {"limits": self})

    def sessions(self) -> int | None:
        instances = getattr(self.manager, "_server_instances", None)
        return len(instances) if isinstance(instances, dict) else None

    def snapshot(self) -> dict[str, Any]:
        """For ``/health``: what is open now against the caps, and what was refused."""
        return {"connections": len(self._connections or ()), "max_connections": self.max_connections,
                "sessions": self.sessions(), "max_sessions": self.max_sessions,
                "refused_connections": self.refused, "timed_out_connections": self.timed_out,
                "evicted_sessions": self.evicted, "direct_calls": self.direct_calls}

    def loop_exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """asyncio's errors (a failed ``accept`` when descriptors run out…) as one line per kind."""
        exc = context.get("exception")
        message = context.get("message") or "event loop error"
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        self.quiet.note(f"loop:{message}:{type(exc).__name__}", f"{message}{detail}")


class _LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline per request and a cap on open connections."""

    limits: HttpLimits

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        limits = self.limits
        limits._connections = self.connections
        if len(self.connections) >= limits.max_connections:
            self._refused = True
            limits.refused += 1
            limits.quiet.note("refused", f"HTTP connection refused: {limits.max_connections} connections "
                                         "are open (MEMORY_HUB_HTTP_MAX_CONNECTIONS)")
            with contextlib.suppress(Exception):
                transport.write(_REFUSED)
            transport.close()
            return
        super().connection_made(transport)
        self._watch_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        self._watch_reading()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_reading()

    def _reading(self) -> bool:
        """Waiting for a request's head (none in progress) or for the rest of its body."""
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return True
        return bool(cycle.more_body) and not cycle.disconnected

    def _watch_reading(self) -> None:
        if self.transport is None or self.transport.is_closing():
            self._stop_timer()
        elif self._reading():
            if self._read_timer is None:  # the deadline runs from the start of the read, not per byte
                self._read_timer = self.loop.call_later(self.limits.read_timeout, self._read_expired)
        else:
            self._stop_timer()

    def _stop_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_expired(self) -> None:
        self._read_timer = None
        if self.transport.is_closing() or not self._reading():
            return
        self.limits.timed_out += 1
        self.limits.quiet.note("read-timeout", f"HTTP connection closed: no complete request within "
                                               f"{self.limits.read_timeout:g} s (MEMORY_HUB_HTTP_READ_TIMEOUT)")
        self.transport.close()


def cap_sessions(app: Any, limits: HttpLimits) -> None:
    """Give a streamable-HTTP app's session manager ``limits``' TTL and cap once it starts.

    The manager (MCP SDK) is created in the app's lifespan; its idle timeout is passed to fastmcp's
    ``http_app`` and its cap is set here. SSE apps have none: an SSE session lives as long as its
    stream, which the connection cap bounds."""
    endpoint = next((getattr(r, "endpoint", None) for r in getattr(app, "routes", [])
                     if hasattr(getattr(r, "endpoint", None), "session_manager")), None)
    if endpoint is None:
        return
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            manager = endpoint.session_manager
            if hasattr(manager, "max_sessions"):
                manager.max_sessions = limits.max_sessions
            limits.manager = manager
            yield state

    app.router.lifespan_context = lifespan


class SessionRoom:
    """ASGI middleware: before a request that opens a session, end the idlest one if at the cap."""

    def __init__(self, app: Callable[..., Awaitable[None]], limits: HttpLimits) -> None:
        self.app, self.limits = app, limits

    async def __call__(self, scope: Scope, receive: Callable[..., Awaitable[Any]],
                       send: Callable[..., Awaitable[Any]]) -> None:
        if (scope["type"] == "http" and scope.get("method") == "POST" and self.limits.manager is not None
                and not any(k == _SESSION_HEADER for k, _ in scope.get("headers", []))):
            await self._make_room()
        await self.app(scope, receive, send)

    async def _make_room(self) -> None:
        instances = getattr(self.limits.manager, "_server_instances", None)
        cap = self.limits.max_sessions
        if not isinstance(instances, dict) or len(instances) < cap:
            return
        idle = []
        for transport in list(instances.values()):
            scope = getattr(transport, "idle_scope", None)
            if scope is not None and math.isfinite(scope.deadline) and not scope.cancel_called:
                idle.append((scope.deadline, id(transport), scope))  # deadline = last request + TTL
        idle.sort()
        for _deadline, _id, scope in idle[: len(instances) - cap + 1]:
            scope.cancel()  # the session's own task ends it and forgets it, as on a timeout
            self.limits.evicted += 1
        if idle:
            self.limits.quiet.note("evicted", f"MCP session cap reached ({cap}, MEMORY_HUB_HTTP_MAX_SESSIONS): "
                                              "ended the session idle longest")
        for _ in range(100):  # give the ended sessions' tasks a moment to let go
            if len(instances) < cap:
                return
            await asyncio.sleep(0.01)
