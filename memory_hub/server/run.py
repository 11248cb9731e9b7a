"""Start the server: open the vault, start the watcher and the warm-up, then serve one transport.

Order matters for start-up time: nothing here loads a model or walks the vault before the
transport is listening. The watcher's first full rescan and the model warm-up run in background
threads, so a client gets its ``initialize`` answer within about a second.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

from .guard import Guard, GuardError, allowed_hosts_for, is_loopback, require_token, token_from_env
from .state import ServerState

log = logging.getLogger("memory_hub.server")

TRANSPORTS = ("stdio", "sse", "http")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
CATCH_UP_DELAY = 1.5  # seconds after start before the first full rescan
BACKGROUND_DELAY = 0.8  # seconds after start before models load and the hooks socket opens


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
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
    """Everything goes to stderr: on stdio, stdout belongs to the protocol."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    root = logging.getLogger("memory_hub")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def start_local_socket(state: ServerState) -> Any:
    """The hooks' local socket (``server/local_socket.py``); None if it cannot start."""
    from . import local_socket

    try:
        return local_socket.start(state)
    except Exception as exc:  # noqa: BLE001 - hooks fall back to the CLI; the MCP server must still start
        log.warning("local socket for hooks not started: %s", exc)
        return None


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
    if not warm:
        state.models_ready.set()
    if hooks_socket:
        # The hooks' socket opens just after the handshake window, for the same reason. Models are
        # not loaded here: the first search starts that (state.ensure_warm), so an idle server stays
        # small; meanwhile searches run lexically and hooks fall back to the CLI path.
        def background() -> None:
            handle = start_local_socket(state)
            if handle is not None:
                state.extras["local_socket"] = handle

        later = threading.Timer(BACKGROUND_DELAY, background)
        later.daemon = True
        later.start()
        state.extras["_background_timer"] = later
    return state


def close_state(state: ServerState) -> None:
    """Stop the watcher and the hooks socket (idempotent)."""
    timer = state.extras.pop("_background_timer", None)
    if timer is not None:
        timer.cancel()
        timer.join(timeout=5)  # a background() already running finishes, so its socket gets closed
    if state.watcher is not None:
        state.watcher.stop()
    handle = state.extras.pop("local_socket", None)
    if handle is not None:
        try:
            handle.close()
        except Exception as exc:  # noqa: BLE001
            log.warning("closing the hooks socket: %s", exc)


def serve(vault: Path, transport: str = "stdio", host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *,
          allowed_hosts: list[str] | None = None, watch: bool = True, rescan_every: float | None = 60.0,
          warm: bool = True, hooks_socket: bool = True, log_level: str = "warning") -> None:
    """Serve ``vault`` over MCP until interrupted. Raises GuardError for an unsafe HTTP setup."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; choose {', '.join(TRANSPORTS)}")
    _configure_logging(log_level)
    token = None
    sock = None
    if transport != "stdio":
        token = require_token(host, token_from_env())  # refuse before opening anything
        sock = bind_socket(host, port)
    state = open_state(vault, watch=watch, rescan_every=rescan_every, warm=warm, hooks_socket=hooks_socket)
    if transport == "stdio" and not os.environ.get("MEMORY_HUB_STDIO_FASTMCP"):
        try:
            _serve_stdio(state)  # no FastMCP on stdio: start-up and every message cost a fraction (stdio.py)
        finally:
            close_state(state)
        return
    from .app import build_server

    mcp = build_server(state)
    _add_health_route(mcp, state)
    try:
        if transport == "stdio":
            mcp.run("stdio", show_banner=False, log_level=log_level.upper())
            return
        from starlette.middleware import Middleware

        url = endpoint_url(transport, host, port)
        hosts = allowed_hosts_for(host, allowed_hosts or [])
        print(f"memory-hub: serving {state.vault} over {transport} at {url}", file=sys.stderr)
        if not is_loopback(host):
            print(f"memory-hub: bound to {host}; clients must send the bearer token from $MEMORY_HUB_TOKEN; "
                  f"allowed Host names: {', '.join(hosts)}", file=sys.stderr)
        print("memory-hub: add this to your client's MCP config (see docs/clients.md):", file=sys.stderr)
        print(json.dumps(client_snippet(transport, url, token is not None), indent=2), file=sys.stderr, flush=True)
        mcp.run(transport, show_banner=False, host=host, port=port, log_level=log_level.upper(),
                middleware=[Middleware(Guard, allowed_hosts=hosts, token=token)],
                host_origin_protection=False, sockets=[sock])
    finally:
        close_state(state)


def _serve_stdio(state: ServerState) -> None:
    from .about import INSTRUCTIONS, server_version
    from .stdio import StdioServer

    StdioServer(state, INSTRUCTIONS, server_version()).serve()


def _add_health_route(mcp: Any, state: ServerState) -> None:
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    @mcp.custom_route("/health", methods=["GET"])
    async def health(request: Request) -> JSONResponse:
        watcher = state.watcher
        return JSONResponse({
            "ok": True, "vault": str(state.vault), "models_ready": state.models_ready.is_set(),
            "pending_changes": watcher.pending if watcher is not None else None,
            "uptime_seconds": round(state.uptime(), 2),
        })


__all__ = ["GuardError", "PortInUse", "TRANSPORTS", "client_snippet", "close_state", "endpoint_url", "open_state", "serve"]
