"""A unix-socket JSON endpoint inside the running server, so an agent hook gets its block warm.

A hook process is short-lived: loading the recall index and opening SQLite on every prompt costs
far more than the lookup. The server keeps both warm; the hook sends one JSON line and reads one
back.

Whoever answers on that socket writes into the agent's prompt, and whoever listens reads it, so
the socket lives only where no other user can reach: a folder of this user's private runtime
directory (``$XDG_RUNTIME_DIR/memory-hub/``, else ``<tmp>/memory-hub-<uid>/``, mode 0700), named
by a hash of the vault path. Both ends check that folder before use (a real directory, not a
symlink, owned by this user, no group or other permissions) and refuse it otherwise with
:class:`UnsafeSocketDir`; the socket itself is mode 0600, and on Linux each end checks the other's
uid (``SO_PEERCRED``). The protocol is one JSON object per line each way:

``{"op": "ping"}`` → ``{"ok": true, "vault": …, "pid": …}``
``{"op": "recall", "prompt": …, "session_id": …, "budget": 1200, "hint_wait_ms": 1000, "cwd": …}`` →
``{"ok": true, "block": …, …}`` (``hint_wait_ms``: how long recall may wait for a same-turn hint;
``cwd``: the folder the prompt was asked in, which picks the team vaults its hooks ask, ``vaults.py``).
``{"op": "search", …, "team_vault": NAME}`` searches a team vault the server serves beside its own.
``{"op": "search", "query": …, "k": 10, "mode": null, "filters": {…}, "explain": false}`` →
``{"ok": true, "results": […], …}`` (what ``memory-hub search --json`` prints; the CLI asks here first)

A request may say ``"client": "cli"``, so telemetry tells a person's ``memory-hub recall`` from a hook.
New requests go in :data:`OPS` (one function each); anything else answers ``unknown op``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import hook_socket
from .hook_socket import (  # noqa: F401 - the client side, re-exported: callers import it from here
    MAX_REQUEST,
    UnsafeSocketDir,
    _own_socket,
    peer_uid,
    socket_path,
)

log = logging.getLogger("memory_hub.server")

# -- requests --------------------------------------------------------------------------------------

def _ping(state: Any, request: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True, "vault": str(state.vault), "pid": os.getpid()}


def _recall(state: Any, request: dict[str, Any]) -> dict[str, Any]:
    from ..hooks.prompt import answer
    from .team_vaults import prompt_recaller

    prompt = request.get("prompt")
    if not isinstance(prompt, str):
        return {"ok": False, "error": "prompt must be a string"}
    session_id = request.get("session_id")
    budget = request.get("budget", 1200)
    if not isinstance(budget, int) or not 50 <= budget <= 8000:
        return {"ok": False, "error": "budget must be an integer between 50 and 8000"}
    wait_ms = request.get("hint_wait_ms")
    hint_until = None
    if isinstance(wait_ms, int) and not isinstance(wait_ms, bool):
        hint_until = time.monotonic() + max(0, min(wait_ms, 10_000)) / 1000
    cwd = request.get("cwd")
    recaller = prompt_recaller(state, Path(cwd) if isinstance(cwd, str) and cwd.startswith("/") else None)
    reply_by = request.get("reply_by")
    out = answer(recaller, prompt, session_id if isinstance(session_id, str) else None,
                 served_by="cli-warm" if request.get("client") == "cli" else "warm", budget=budget,
                 hint_until=hint_until,
                 reply_by=float(reply_by) if isinstance(reply_by, (int, float)) and not isinstance(reply_by, bool)
                 else None)
    return {"ok": True, **out}


def _search(state: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The ``search`` op: the warm searcher's answer in ``memory-hub search --json``'s shape."""
    from ..index.lexical import Filters
    from ..retrieval.search import MODES, QueryError
    from ..retrieval.searcher import result_json

    query, k, mode = request.get("query"), request.get("k", 10), request.get("mode")
    raw = request.get("filters") or {}
    if not isinstance(query, str) or not isinstance(raw, dict):
        return {"ok": False, "error": "query must be a string and filters an object"}
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        return {"ok": False, "error": "k must be an integer between 1 and 1000"}
    if mode is not None and mode not in MODES:
        return {"ok": False, "error": f"unknown mode {mode!r}"}
    lists = {name: raw.get(name) for name in ("kinds", "tags")}
    if any(v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)) for v in lists.values()):
        return {"ok": False, "error": "kinds and tags must be lists of strings"}
    texts = {name: raw.get(name) for name in ("path_prefix", "since")}
    if any(v is not None and not isinstance(v, str) for v in texts.values()):
        return {"ok": False, "error": "path_prefix and since must be strings"}
    filters = Filters(kinds=lists["kinds"] or None, tags=lists["tags"] or None, **texts)
    explain = request.get("explain") is True
    search, where = state.search, state.vault
    if request.get("team_vault") is not None:  # a team vault this server serves beside its own
        from .team_vaults import for_state

        team, name = for_state(state), request.get("team_vault")
        ref = next((r for r in team.vaults.refs[1:] if r.name == name), None) if team is not None else None
        if ref is None:
            return {"ok": False, "error": f"this server serves no team vault named {name!r}"}
        search, where = team.searcher(ref).search, ref.path
    try:
        result = search(query, k=k, filters=filters, mode=mode, explain=explain)
    except QueryError as exc:
        return {"ok": False, "error": str(exc), "query_error": True}
    return {"ok": True, "vault": str(where), **result_json(result, explain)}


# op name → handler(state, request) → reply. The one place to add a request.
OPS: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {"ping": _ping, "recall": _recall,
                                                                    "search": _search}


def dispatch(state: Any, request: Any) -> dict[str, Any]:
    """Answer one decoded request."""
    if not isinstance(request, dict):
        return {"ok": False, "error": "request must be a JSON object"}
    handler = OPS.get(request.get("op"))  # type: ignore[arg-type]
    if handler is None:
        return {"ok": False, "error": f"unknown op {request.get('op')!r}"}
    check = getattr(state, "check_index", None)
    if callable(check):
        check()  # an index deleted under the server is reopened before it answers from it
    return handler(state, request)


class _Handler(socketserver.StreamRequestHandler):
    timeout = 10.0

    def handle(self) -> None:
        uid = peer_uid(self.request)
        if uid is not None and uid != os.getuid():  # the 0600 socket should make this impossible
            log.warning("hooks socket: refused a connection from uid %s", uid)
            return
        try:
            raw = self.rfile.readline(MAX_REQUEST + 1)
            if len(raw) > MAX_REQUEST:
                reply: dict[str, Any] = {"ok": False, "error": "request too large"}
            else:
                reply = dispatch(self.server.state, json.loads(raw or b"{}"))  # type: ignore[attr-defined]
        except (ValueError, UnicodeDecodeError) as exc:
            reply = {"ok": False, "error": f"bad request: {exc}"}
        except Exception as exc:  # noqa: BLE001 - one bad request must not take the endpoint down
            log.warning("hooks socket request failed: %s", exc)
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(reply, ensure_ascii=False).encode("utf-8") + b"\n")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, path: Path, state: Any) -> None:
        self.state = state
        super().__init__(str(path), _Handler)


class Handle:
    """The running endpoint; ``close()`` stops it and removes the socket file."""

    def __init__(self, server: _Server, path: Path, thread: threading.Thread) -> None:
        self.server, self.path, self.thread = server, path, thread
        st = os.lstat(path)
        self._identity = (st.st_dev, st.st_ino)

    def intact(self) -> bool:
        """Whether the socket file is still the one this server bound (not deleted or replaced)."""
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._identity

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.intact():  # never remove a socket another server has bound since
            with contextlib.suppress(OSError):
                self.path.unlink()


def _alive(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(0.5)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def start(state: Any) -> Handle:
    """Serve hook requests for ``state.vault`` in a daemon thread.

    A stale socket file left by a crashed server is replaced; a live one (another server on the
    same vault) is left alone and RuntimeError says so. UnsafeSocketDir when the folder, or a file
    already at the socket's path, is not private to this user.
    """
    path = socket_path(state.vault, create=True)
    if os.path.lexists(path):
        if not _own_socket(path):
            raise UnsafeSocketDir(f"{path} exists and is not a socket of yours; refusing to replace it")
        if _alive(path):
            raise RuntimeError(f"another server already answers hooks on {path}")
        path.unlink()
    old_umask = os.umask(0o177)
    try:
        server = _Server(path, state)
    finally:
        os.umask(old_umask)
    thread = threading.Thread(target=server.serve_forever, name="memory-hub-hooks-socket", daemon=True)
    thread.start()
    log.info("hooks socket listening on %s", path)
    return Handle(server, path, thread)


request = hook_socket.request  # the client's side (hooks, CLI), importable from here as before
