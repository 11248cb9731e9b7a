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
import hashlib
import json
import logging
import os
import socket
import socketserver
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("memory_hub.server")

MAX_REQUEST = 256 * 1024
_MAX_UNIX_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS


class UnsafeSocketDir(RuntimeError):
    """The hooks socket's folder (or the socket) could be reached by another user; it is not used."""


def _check_private(path: Path, what: str) -> None:
    """Raise UnsafeSocketDir unless ``path`` is a real directory of ours with no group/other access."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeSocketDir(f"{what} {path} is a symlink; refusing it (remove it, or point "
                              "$XDG_RUNTIME_DIR at a private folder)")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocketDir(f"{what} {path} is not a directory; refusing it")
    if st.st_uid != os.getuid():
        raise UnsafeSocketDir(f"{what} {path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
                              "another user may have made it to intercept prompts. Remove it, or set "
                              "$XDG_RUNTIME_DIR to a private folder")
    if st.st_mode & 0o077:
        raise UnsafeSocketDir(f"{what} {path} has mode {stat.S_IMODE(st.st_mode):04o}; other users could "
                              f"plant a socket there. Run `chmod 700 {path}` (or remove it)")


def runtime_dir(create: bool = False) -> Path:
    """This user's private folder for the hooks socket, checked (and made 0700 when ``create``).

    ``$XDG_RUNTIME_DIR`` (itself checked: it must be ours and 0700) else the temp folder; the
    server and the hooks must see the same ``$XDG_RUNTIME_DIR`` to find each other.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        base = Path(xdg)
        if not base.is_absolute():
            raise UnsafeSocketDir(f"$XDG_RUNTIME_DIR={xdg!r} is not an absolute path")
        folder = base / "memory-hub"
    else:
        base, folder = None, Path(tempfile.gettempdir()) / f"memory-hub-{os.getuid()}"
    if not create and not os.path.lexists(folder):
        return folder  # no server made it: nothing there to trust or to connect to
    if base is not None:
        _check_private(base, "$XDG_RUNTIME_DIR")
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)  # never parents: a missing runtime dir is not ours to invent
    _check_private(folder, "hooks socket folder")
    return folder


def socket_path(vault: Path, create: bool = False) -> Path:
    """Where the hooks socket of ``vault`` lives (the same answer in server and hook).

    Raises UnsafeSocketDir when the folder exists and is not private (and, with ``create``, OSError
    when it cannot be made)."""
    vault = Path(vault).resolve()
    digest = hashlib.blake2b(str(vault).encode(), digest_size=8).hexdigest()
    path = runtime_dir(create) / f"{digest}.sock"
    if len(str(path).encode()) > _MAX_UNIX_PATH:
        raise UnsafeSocketDir(f"hooks socket path {path} is too long for a unix socket; "
                              "set $XDG_RUNTIME_DIR or $TMPDIR to a shorter private folder")
    return path


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux ``SO_PEERCRED``); None where unsupported."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _own_socket(path: Path) -> bool:
    """Whether ``path`` is a socket file of ours (not a symlink, not another user's)."""
    st = os.lstat(path)
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


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


def request(vault: Path, payload: dict[str, Any], timeout: float = 1.0) -> dict[str, Any] | None:
    """Send one request to the server of ``vault``; None when no server answers within ``timeout``.

    Raises UnsafeSocketDir when the socket's folder or the socket is not private to this user,
    or another user's process answers: the caller falls back and says why."""
    try:
        path = socket_path(vault)
        if not _own_socket(path):
            raise UnsafeSocketDir(f"{path} is not a socket of yours; not asking it")
    except OSError:  # no folder or no socket: no server runs for this vault
        return None
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            raise UnsafeSocketDir(f"the process answering on {path} runs as uid {uid}, not as you")
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
