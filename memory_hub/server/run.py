"""Start the server: open the vault, start the watcher and the warm-up, then serve one transport.

Order matters for start-up time: nothing here loads a model or walks the vault before the
transport is listening. The watcher's first full rescan and the model warm-up run in background
threads, so a client gets its ``initialize`` answer within about a second.

A health thread checks every few seconds that the index and the hooks socket are still the files
the server opened (someone may delete ``.memory_hub/`` or the socket) and reopens them if not.

Leaving is always clean: stdin closing ends a stdio server with 0, Ctrl-C with 130, SIGTERM with
143. The process then ends without tearing the interpreter down (:func:`exit_now`), because a
model may still be loading in a native thread, and finalising under it aborts the process.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

from ..index import blas
from . import allocator
from .guard import Guard, GuardError, allowed_hosts_for, is_loopback, require_token, token_from_env
from .state import ServerState
from .tokens import TokensError, TokenTable
from .tokens import default_path as default_tokens_path
from .tokens import load as load_token_file

log = logging.getLogger("memory_hub.server")

TRANSPORTS = ("stdio", "sse", "http")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
CATCH_UP_DELAY = 1.5  # seconds after start before the first full rescan
BACKGROUND_DELAY = 0.8  # seconds after start before models load and the hooks socket opens
HEALTH_EVERY = 2.0  # seconds between checks that the index and the hooks socket still exist
def endpoint_url(transport: str, host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/" + ("sse" if transport == "sse" else "mcp")


def client_snippet(transport: str, url: str, token: bool) -> dict[str, Any]:
    """The ``mcpServers`` entry a client needs for this running server."""
    entry: dict[str, Any] = {"type": "sse" if transport == "sse" else "http", "url": url}
    if token:
        entry["headers"] = {"Authorization": "Bearer ${MEMORY_HUB_TOKEN}"}
    return {"mcpServers": {"memory-hub": entry}}


class PortInUse(OSError):
    """The address is taken (another server, probably this one already running)."""


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves, so a taken port is a clear error before anything prints."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto=IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it every response after a connection's first waited ~40 ms (Nagle + delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)  # with SO_REUSEADDR, a port another server listens on fails here, not at bind
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(exc.errno, f"port {port} on {host} is already in use (is memory-hub already "
                                       "serving? pass --port to pick another)") from None
        raise
    sock.set_inheritable(True)
    return sock


def _configure_logging(level: str) -> None:
    """Everything goes to stderr (on stdio, stdout belongs to the protocol), repeated warnings once
    a minute: a flood of bad connections must not become a flood of log lines."""
    from .quiet import QuietFilter, QuietLog

    quiet = QuietFilter(QuietLog(log))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    handler.addFilter(quiet)
    root = logging.getLogger("memory_hub")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
    # Libraries (uvicorn, the MCP SDK) log through the root logger, with the same filter.
    other = logging.StreamHandler(sys.stderr)
    other.setFormatter(handler.formatter)
    other.addFilter(quiet)
    other.setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    logging.getLogger().handlers[:] = [other]


def start_local_socket(state: ServerState) -> Any:
    """The hooks' local socket (``server/local_socket.py``); None if it cannot start."""
    from . import local_socket

    try:
        return local_socket.start(state)
    except Exception as exc:  # noqa: BLE001 - hooks fall back to in-process recall; MCP must still start
        message = f"hooks socket not started, hooks will recall in-process: {exc}"
        if state.extras.get("local_socket_error") != message:
            log.warning("%s", message)
        state.extras["local_socket_error"] = message
        return None


def _keep_healthy(state: ServerState, stop: threading.Event, hooks_socket: bool) -> None:
    """Every few seconds: reopen an index deleted under the server, rebind a deleted hooks socket."""
    reopened = state.index_reopened
    while not stop.wait(HEALTH_EVERY):
        try:
            state.check_index()
            if state.index_reopened != reopened:
                # The old index's connections (one per thread) sit in reference cycles (sqlite3's
                # statement cache); collect them so the deleted file's space and descriptors go.
                reopened = state.index_reopened
                gc.collect()
            handle = state.extras.get("local_socket")
            if hooks_socket and handle is not None and not handle.intact():
                log.warning("the hooks socket %s was deleted or replaced; opening it again", handle.path)
                state.extras.pop("local_socket", None)
                handle.close()
                handle = None
            if hooks_socket and handle is None and "_background_timer" not in state.extras:
                fresh = start_local_socket(state)
                if fresh is not None:
                    state.extras["local_socket"] = fresh
                    state.extras.pop("local_socket_error", None)
        except Exception as exc:  # noqa: BLE001 - the check must never stop checking
            log.warning("health check failed: %s", exc)


def open_state(vault: Path, *, watch: bool = True, rescan_every: float | None = 60.0,
               warm: bool = True, hooks_socket: bool = True) -> ServerState:
    """A ready ServerState with its watcher, warm-up thread and hooks socket started."""
    from .watcher import Watcher

    state = ServerState.open(vault)
    if watch:
        state.watcher = Watcher(state.vault, state.store, rescan_every=rescan_every,
                                on_synced=state.sync_vectors).start()
        # Catch up on whatever changed while no server ran, once the client's handshake is done:
        # a stat walk of a large vault would otherwise compete with it for the GIL.
        timer = threading.Timer(CATCH_UP_DELAY, state.watcher.request_full)
        timer.daemon = True
        timer.start()
        # Every team vault served beside this one gets its own watcher (server/team_vaults.py), at the
        # same moment and for the same reason: a pull or an edit there is searchable without a restart.
        team = threading.Timer(CATCH_UP_DELAY, _watch_team_vaults, args=(state, rescan_every))
        team.daemon = True
        state.extras["_team_timer"] = team
        team.start()
    if not warm:
        state.models_ready.set()
    else:
        # server.warm_at_start: the models, the vector index and one search's caches are read now, in
        # the background, once the client's handshake is done (the first query then waits for none
        # of it; an idle server holds them). By default the first search starts the warm-up instead.
        starter = threading.Timer(BACKGROUND_DELAY, _warm_at_start, args=(state,))
        starter.daemon = True
        state.extras["_warm_timer"] = starter
        starter.start()
    if hooks_socket:
        # The hooks' socket opens just after the handshake window, for the same reason. Models are
        # not loaded here: the first search starts that (state.ensure_warm), so an idle server stays
        # small; meanwhile searches run lexically and hooks fall back to the CLI path.
        def background() -> None:
            handle = start_local_socket(state)
            if handle is not None:
                state.extras["local_socket"] = handle
            state.extras.pop("_background_timer", None)

        later = threading.Timer(BACKGROUND_DELAY, background)
        later.daemon = True
        state.extras["_background_timer"] = later
        later.start()
    stop = threading.Event()
    health = threading.Thread(target=_keep_healthy, args=(state, stop, hooks_socket),
                              name="memory-hub-health", daemon=True)
    health.start()
    state.extras["_health"] = (stop, health)
    return state


def _warm_at_start(state: ServerState) -> None:
    """Start the warm-up now, with one whole search, when ``server.warm_at_start`` asks for it."""
    from ..config import settings

    try:
        wanted = bool(settings(state.vault)["server.warm_at_start"])
    except Exception as exc:  # noqa: BLE001 - a bad setting must not stop the server
        log.warning("server.warm_at_start not read: %s", exc)
        return
    if wanted and not state.extras.get("_closed"):
        state.ensure_warm(search=True)


def _watch_team_vaults(state: ServerState, rescan_every: float | None) -> None:
    from .team_vaults import for_state

    try:
        team = for_state(state)
        if team is not None and not state.extras.get("_closed"):
            team.watch(rescan_every)
    except Exception as exc:  # noqa: BLE001 - the server's own vault is served whatever happens here
        log.warning("team vaults not watched: %s", exc)


def close_state(state: ServerState) -> None:
    """Stop the health check, the watchers (the vault's and its team vaults') and the hooks socket
    (idempotent)."""
    health = state.extras.pop("_health", None)
    if health is not None:
        health[0].set()
        health[1].join(timeout=5)
    warm_timer = state.extras.pop("_warm_timer", None)
    if warm_timer is not None:
        warm_timer.cancel()
    timer = state.extras.pop("_background_timer", None)
    if timer is not None:
        timer.cancel()
        timer.join(timeout=5)  # a background() already running finishes, so its socket gets closed
    state.extras["_closed"] = True
    team_timer = state.extras.pop("_team_timer", None)
    if team_timer is not None:
        team_timer.cancel()
        team_timer.join(timeout=30)  # a team vault's first sync in progress finishes, then its watcher stops
    if state.watcher is not None:
        state.watcher.stop()
    team = state.extras.get("team")
    if team is not None:
        team.close()
    handle = state.extras.pop("local_socket", None)
    if handle is not None:
        try:
            handle.close()
        except Exception as exc:  # noqa: BLE001
            log.warning("closing the hooks socket: %s", exc)


class _Terminated(Exception):
    """SIGTERM: leave as after Ctrl-C, with the conventional status 143."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated()


def exit_now(code: int) -> NoReturn:
    """End the process at once, without finalising the interpreter.

    The model warm-up may still be inside onnxruntime or LanceDB in a background thread; tearing
    the interpreter down under it aborts the process (``terminate called without an active
    exception``, exit 134). Nothing is lost by skipping it: SQLite commits per note, the hooks
    socket is already removed, and stdout/stderr are flushed here."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def serve(vault: Path, transport: str = "stdio", host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
          allowed_hosts: list[str] | None = None, watch: bool = True, rescan_every: float | None = 60.0,
          warm: bool = True, hooks_socket: bool = True, log_level: str = "warning") -> int:
    """Serve ``vault`` over MCP; returns the exit status (0: the client left, 130: Ctrl-C, 143: SIGTERM).

    Raises GuardError for an unsafe HTTP setup. Call :func:`exit_now` with the status afterwards
    (``memory-hub serve`` does)."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose {', '.join(TRANSPORTS)}")
    _configure_logging(log_level)
    blas.limit_before_numpy()  # before the first search imports numpy (index/blas.py)
    allocator.hold_mmap_threshold()  # large freed buffers go back to the system (allocator.py)
    token = sock = limits = tokens = None
    if transport != "stdio":
        from .http_limits import HttpLimits

        tokens = load_tokens(vault)
        token = require_token(host, token_from_env(), tokens)  # refuse before opening anything
        try:
            limits = HttpLimits.from_env()
        except ValueError as exc:
            raise GuardError(str(exc)) from None
        sock = bind_socket(host, port)
    held: list[ServerState] = []
    if transport == "stdio":
        _stop_stdio_on_signals(held)
    else:
        signal.signal(signal.SIGTERM, _raise_terminated)  # uvicorn shuts down gracefully, then re-raises it
    try:
        state = open_state(vault, watch=watch, rescan_every=rescan_every, warm=warm, hooks_socket=hooks_socket)
        held.append(state)
        if transport == "stdio" and not os.environ.get("MEMORY_HUB_STDIO_FASTMCP"):
            _serve_stdio(state)  # no FastMCP on stdio: start-up and every message cost a fraction (stdio.py)
            return 0
        from .app import build_server

        mcp = build_server(state)
        web = add_web_routes(mcp, state, token, tokens) if transport != "stdio" else None
        _add_health_route(mcp, state, limits, web)
        if transport == "stdio":
            mcp.run("stdio", show_banner=False, log_level=log_level.upper())
            return 0
        url = endpoint_url(transport, host, port)
        hosts = allowed_hosts_for(host, allowed_hosts or [])
        print(f"memory-hub: serving {state.vault} over {transport} at {url}", file=sys.stderr)
        print(f"memory-hub: web pages at http://{host if ':' not in host else f'[{host}]'}:{port}/ "
              f"({'writes with the token' if token else 'read-only: no MEMORY_HUB_TOKEN'})", file=sys.stderr)
        if tokens:
            print(f"memory-hub: {len(tokens)} named token(s) accepted ("
                  + ", ".join(f"{e.principal.name}: {e.principal.scope}" for e in tokens.entries) + ")",
                  file=sys.stderr)
        if not is_loopback(host):
            print(f"memory-hub: bound to {host}; clients must send a bearer token (a named one, or "
                  f"$MEMORY_HUB_TOKEN); allowed Host names: {', '.join(hosts)}", file=sys.stderr)
        print("memory-hub: add this to your client's MCP config (see docs/clients.md):", file=sys.stderr)
        print(json.dumps(client_snippet(transport, url, token is not None or bool(tokens)), indent=2),
              file=sys.stderr, flush=True)
        _run_http(mcp, transport, sock, hosts, token, limits, log_level, tokens, state)
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        return 143
    finally:
        for state in held:
            close_state(state)


def _serve_stdio(state: ServerState) -> None:
    from .about import INSTRUCTIONS, server_version
    from .stdio import StdioServer

    StdioServer(state, INSTRUCTIONS, server_version()).serve()


STOP_CLEANUP_SECONDS = 5.0  # what Ctrl-C / SIGTERM on stdio waits for the clean-up before leaving


def _stop_stdio_on_signals(held: list[ServerState]) -> None:
    """Ctrl-C / SIGTERM on stdio: clean up and leave now.

    Unwinding normally would wait for the thread blocked reading stdin, that is until the client
    closes it (forever, for a client that is itself waiting for us to exit)."""

    def stop(signum: int, frame: Any) -> None:
        code = 130 if signum == signal.SIGINT else 143

        def clean_up() -> None:
            for state in held:
                with contextlib.suppress(Exception):
                    close_state(state)

        # The handler runs in the main thread between two of its bytecodes, so a lock that the
        # main thread holds at that moment cannot be taken by the clean-up: run it in a thread of
        # its own and leave after STOP_CLEANUP_SECONDS whatever it is waiting for (the full suite
        # once saw a SIGTERM during the model's load never end the process).
        cleaner = threading.Thread(target=clean_up, name="memory-hub-stop", daemon=True)
        cleaner.start()
        cleaner.join(STOP_CLEANUP_SECONDS)
        if cleaner.is_alive():
            print(f"leaving without finishing the clean-up (still busy after {STOP_CLEANUP_SECONDS:g} s)",
                  file=sys.stderr)
        if signum == signal.SIGINT:
            print("interrupted", file=sys.stderr)
        exit_now(code)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def load_tokens(vault: Path) -> TokenTable | None:
    """The named tokens of ``server.tokens_file`` (default ``~/.config/memory-hub/tokens.toml`` when it
    exists); GuardError when the file is unusable, so a server never starts with tokens half-read."""
    from ..config import ConfigError, settings

    try:
        named = settings(vault)["server.tokens_file"]
    except ConfigError as exc:
        raise GuardError(str(exc)) from None
    path = Path(named) if named else default_tokens_path()
    if not named and not path.exists():
        return None
    try:
        table = load_token_file(path)
    except TokensError as exc:
        raise GuardError(str(exc)) from None
    return table or None


def _run_http(mcp: Any, transport: str, sock: socket.socket, hosts: list[str], token: str | None,
              limits: Any, log_level: str, tokens: TokenTable | None = None, state: ServerState | None = None) -> None:
    """Run uvicorn on the bound socket with the guard, timeouts and caps of ``http_limits``."""
    import anyio
    import uvicorn
    from starlette.middleware import Middleware

    from .direct_http import DIRECT_ENV, DirectCalls
    from .http_limits import ACCEPT_BATCH, SessionRoom, cap_sessions

    # json_response: a tools/call is answered as one JSON body, not as a one-event SSE stream (its task
    # group, memory streams and framing cost ~3.5 ms of server CPU per request, half of a ping; the
    # spec lets a server choose either, and no tool sends notifications mid-call). GET /mcp still
    # opens the stream for server-initiated messages.
    # DirectCalls (inside the guard): a read-only tools/call on a live session is answered without
    # the SDK's session streams and FastMCP's middleware, ~10 ms less per search (direct_http.py).
    direct = transport == "http" and state is not None and os.environ.get(DIRECT_ENV, "").strip() != "0"
    inner = [Middleware(DirectCalls, state=state, limits=limits)] if direct else []
    app = mcp.http_app(transport=transport, host_origin_protection=False, session_idle_timeout=limits.session_ttl,
                       json_response=True,
                       middleware=[Middleware(Guard, allowed_hosts=hosts, token=token, tokens=tokens),
                                   Middleware(SessionRoom, limits=limits), *inner])
    cap_sessions(app, limits)
    config = uvicorn.Config(app, log_config=None, log_level=log_level.lower(), access_log=False, lifespan="on",
                            http=limits.protocol(), ws="none", timeout_keep_alive=limits.idle_timeout,
                            timeout_graceful_shutdown=2, backlog=ACCEPT_BATCH)
    server = uvicorn.Server(config)

    async def main() -> None:
        import asyncio

        asyncio.get_running_loop().set_exception_handler(limits.loop_exception_handler)
        await server.serve(sockets=[sock])

    anyio.run(main)


def add_web_routes(mcp: Any, state: ServerState, token: str | None, tokens: TokenTable | None = None) -> Any:
    """The web pages (``server/web/``) on the HTTP port, behind the same guard as ``/mcp``."""
    from .app import SEARCH_MODES
    from .web.app import Web

    web = Web(state, token, SEARCH_MODES, tokens)
    for route in web.routes():
        mcp.custom_route(route.path, methods=sorted(route.methods - {"HEAD"}))(route.endpoint)
    return web


def _add_health_route(mcp: Any, state: ServerState, limits: Any = None, web: Any = None) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    @mcp.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> Response:
        if web is not None:
            from .web.app import wants_html

            if wants_html(request):  # a browser: the page; scripts and tests keep the JSON
                return await web.health(request)
        state.check_index()
        watcher = state.watcher
        return JSONResponse({
            "ok": state.index_problem is None, "vault": str(state.vault),
            "models_ready": state.models_ready.is_set(),
            "pending_changes": watcher.pending if watcher is not None else None,
            "uptime_seconds": round(state.uptime(), 2),
            **state.index_health(),
            **({"http": limits.snapshot()} if limits is not None else {}),
        })


__all__ = ["GuardError", "PortInUse", "TRANSPORTS", "client_snippet", "close_state", "endpoint_url", "exit_now",
           "open_state", "serve", "add_web_routes"]
