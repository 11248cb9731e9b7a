"""A unix-socket JSON endpoint inside the running server, so an agent hook gets its block warm.

A hook process is short-lived: loading the recall index and opening SQLite on every prompt costs
far more than the lookup. The server keeps both warm; the hook sends one JSON line and reads one
back. The socket lives under ``<vault>/.memory_hub/`` (or, when that path is too long for a unix
socket, under the temp folder, named by a hash of the vault path), is private to the user
(mode 0600), and speaks only three requests:

``{"op": "ping"}`` → ``{"ok": true, "vault": …}``
``{"op": "recall", "prompt": …, "session_id": …, "budget": 1200}`` → ``{"ok": true, "block": …, …}``
``{"op": "search", "query": …, "k": 10, "mode": null, "filters": {…}, "explain": false}`` →
``{"ok": true, "results": […], …}`` (what ``memory-hub search --json`` prints; the CLI asks here first)

A request may say ``"client": "cli"``, so telemetry tells a person's ``memory-hub recall`` from a hook.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import socketserver
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ..config import index_dir

log = logging.getLogger("memory_hub.server")

SOCKET_NAME = "hooks.sock"
MAX_REQUEST = 256 * 1024
_MAX_UNIX_PATH = 100


def socket_path(vault: Path) -> Path:
    """Where the hooks socket of ``vault`` lives (the same answer in server and hook)."""
    vault = Path(vault).resolve()
    path = index_dir(vault) / SOCKET_NAME
    if len(str(path).encode()) <= _MAX_UNIX_PATH:
        return path
    digest = hashlib.blake2b(str(vault).encode(), digest_size=8).hexdigest()
    return Path(tempfile.gettempdir()) / f"memory-hub-{os.getuid()}" / f"{digest}.sock"


class _Handler(socketserver.StreamRequestHandler):
    timeout = 10.0

    def handle(self) -> None:
        try:
            raw = self.rfile.readline(MAX_REQUEST + 1)
            if len(raw) > MAX_REQUEST:
                reply: dict[str, Any] = {"ok": False, "error": "request too large"}
            else:
                reply = self.server.dispatch(json.loads(raw or b"{}"))  # type: ignore[attr-defined]
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

    def dispatch(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            return {"ok": False, "error": "request must be a JSON object"}
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "vault": str(self.state.vault), "pid": os.getpid()}
        if op == "recall":
            from ..hooks.prompt import answer
            from ..retrieval.recall import recaller_for_state

            prompt = request.get("prompt")
            if not isinstance(prompt, str):
                return {"ok": False, "error": "prompt must be a string"}
            session_id = request.get("session_id")
            budget = request.get("budget", 1200)
            if not isinstance(budget, int) or not 50 <= budget <= 8000:
                return {"ok": False, "error": "budget must be an integer between 50 and 8000"}
            out = answer(recaller_for_state(self.state), prompt,
                         session_id if isinstance(session_id, str) else None,
                         served_by="cli-warm" if request.get("client") == "cli" else "warm", budget=budget)
            return {"ok": True, **out}
        if op == "search":
            return _search(self.state, request)
        return {"ok": False, "error": f"unknown op {op!r}"}


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
    try:
        result = state.search(query, k=k, filters=filters, mode=mode, explain=explain)
    except QueryError as exc:
        return {"ok": False, "error": str(exc), "query_error": True}
    return {"ok": True, "vault": str(state.vault), **result_json(result, explain)}


class Handle:
    """The running endpoint; ``close()`` stops it and removes the socket file."""

    def __init__(self, server: _Server, path: Path, thread: threading.Thread) -> None:
        self.server, self.path, self.thread = server, path, thread

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
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
    same vault) is left alone and RuntimeError says so.
    """
    path = socket_path(state.vault)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists():
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


def request(vault: Path, payload: dict[str, Any], timeout: float = 1.0) -> dict[str, Any] | None:
    """Send one request to the server of ``vault``; None when no server answers within ``timeout``."""
    path = socket_path(vault)
    if not path.exists():
        return None
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        sock.sendall(json.dumps(payload, ensure_ascii=False).encode("utf-8") + b"\n")
        chunks = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            sock.settimeout(remaining)
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
            if data.endswith(b"\n"):
                break
        reply = json.loads(b"".join(chunks) or b"null")
        return reply if isinstance(reply, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
