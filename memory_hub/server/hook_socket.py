"""The hooks socket as a hook process sees it: where it is, whether it is private, one request.

Split from ``local_socket.py`` (the server's side) so that a warm hook process, which exists only
to ask the running server for its block, imports the standard library's socket, json and os and
nothing else (see ``hooks/warm.py``): ``socketserver``, ``logging`` and ``threading`` are the
server's. Paths are plain strings inside (``pathlib`` and ``typing`` cost a fresh process more than
the round trip's own CPU); the functions the server and the CLI call still return ``Path``.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import time

TYPE_CHECKING = False  # typing itself is not imported (see above)
if TYPE_CHECKING:
    from pathlib import Path

MAX_REQUEST = 256 * 1024
_MAX_UNIX_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS


class UnsafeSocketDir(RuntimeError):
    """The hooks socket's folder (or the socket) could be reached by another user; it is not used."""


def _check_private(path: str, what: str) -> None:
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


def runtime_folder(create: bool = False) -> str:
    """This user's private folder for the hooks socket, checked (and made 0700 when ``create``).

    ``$XDG_RUNTIME_DIR`` (itself checked: it must be ours and 0700) else the temp folder; the
    server and the hooks must see the same ``$XDG_RUNTIME_DIR`` to find each other.
    """
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        if not os.path.isabs(xdg):
            raise UnsafeSocketDir(f"$XDG_RUNTIME_DIR={xdg!r} is not an absolute path")
        base: str | None = xdg
        folder = os.path.join(xdg, "memory-hub")
    else:
        base, folder = None, os.path.join(_tempdir(), f"memory-hub-{os.getuid()}")
    if not create and not os.path.lexists(folder):
        return folder  # no server made it: nothing there to trust or to connect to
    if base is not None:
        _check_private(base, "$XDG_RUNTIME_DIR")
    if create:
        try:
            os.mkdir(folder, 0o700)  # never parents: a missing runtime dir is not ours to invent
        except FileExistsError:
            pass
    _check_private(folder, "hooks socket folder")
    return folder


def socket_path(vault: Path, create: bool = False) -> Path:
    """Where the hooks socket of ``vault`` lives (the same answer in server and hook).

    Raises UnsafeSocketDir when the folder exists and is not private (and, with ``create``, OSError
    when it cannot be made)."""
    from pathlib import Path

    return Path(socket_file(vault, create))


def socket_file(vault: str | os.PathLike[str], create: bool = False, folder: str | None = None) -> str:
    """``socket_path`` as a string. The vault is resolved as ``Path.resolve`` does (``realpath``);
    ``folder`` is a ``runtime_folder()`` the caller already checked (a warm hook looks it up once)."""
    base = runtime_folder(create) if folder is None else folder
    path = os.path.join(base, f"{socket_digest(os.path.realpath(vault))}.sock")
    if len(path.encode()) > _MAX_UNIX_PATH:
        raise UnsafeSocketDir(f"hooks socket path {path} is too long for a unix socket; "
                              "set $XDG_RUNTIME_DIR or $TMPDIR to a shorter private folder")
    return path


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux ``SO_PEERCRED``); None where unsupported."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def _own_socket(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a socket file of ours (not a symlink, not another user's)."""
    st = os.lstat(path)
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def _tempdir() -> str:
    """``tempfile.gettempdir()`` without importing tempfile (which costs a hook process ~15 % of its
    CPU) when no variable names another folder: then it is /tmp wherever /tmp is usable."""
    if not any(os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")) and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    import tempfile

    return tempfile.gettempdir()


def socket_digest(vault: str, size: int = 8) -> str:
    """The socket's file name part for a (resolved) vault path (and, ``size`` bytes long, any
    other short digest a hook process needs)."""
    try:
        from _blake2 import blake2b  # the C module hashlib wraps, without loading OpenSSL (~5 ms)
    except ImportError:  # pragma: no cover - an interpreter built without it
        from hashlib import blake2b
    return blake2b(str(vault).encode(), digest_size=size).hexdigest()


def request(vault: str | os.PathLike[str], payload: dict, timeout: float = 1.0,
            folder: str | None = None) -> dict | None:
    """Send one request to the server of ``vault``; None when no server answers within ``timeout``.
    ``folder``: the checked ``runtime_folder()``, when the caller has it already.

    Raises UnsafeSocketDir when the socket's folder or the socket is not private to this user,
    or another user's process answers: the caller falls back and says why."""
    try:
        path = socket_file(vault, folder=folder)
        if not _own_socket(path):
            raise UnsafeSocketDir(f"{path} is not a socket of yours; not asking it")
    except OSError:  # no folder or no socket: no server runs for this vault
        return None
    deadline = time.monotonic() + timeout
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
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
