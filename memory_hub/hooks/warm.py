"""The warm prompt hook: ask the running server for the block, importing almost nothing.

An agent starts a hook process before every prompt and waits for it. When a server holds the
hooks socket, all that process does is send one JSON line and print the answer, so what it costs
is the interpreter and its imports: the whole path (settings, telemetry, hints) imported ~130 ms
of modules to make a 32 ms round trip. This module uses the standard library's json, os and
socket only (with ``server/hook_socket.py``).

What the full path works out from the settings files (the vault, the block's budget, the deadline,
the hint wait) is kept after each full run as a small *plan* in the private hooks-socket folder,
named by everything that can change the answer (the ``--vault`` argument, the working folder, the
``MEMORY_HUB_*`` and XDG variables) and stamped with every file the settings were read from
(``config.settings`` reads the same four). A warm hook uses the plan only when every stamp still
matches; otherwise, with no plan, no server, any reply but a block, or an event other than a
prompt, it hands over to the full path (``claude_code.run``), saying what the socket already
answered so the full path does not wait for it twice. Warm and full paths send the same request
(:func:`recall_request`), so they get the same block.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..server.hook_socket import UnsafeSocketDir, request, runtime_folder, socket_digest

TYPE_CHECKING = False  # neither typing nor pathlib is imported on the warm path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

PLAN_VERSION = 1
MAX_PLANS = 64  # a plan per (agent, vault argument, working folder, variables): kept, newest first
MARK_EVERY = 3600.0  # a plan's use is recorded at most this often (its mtime; see _mark_used)
PLAN_MAX_AGE = 30 * 86400.0  # a plan unused this long is removed (the next full run writes it again)
SOCKET_TIMEOUT = 1.0  # at most this long (and 40 % of the deadline) for the server's answer
_ENV_PREFIXES = ("MEMORY_HUB_", "XDG_")


def recall_request(event: dict[str, Any], budget: int, hint_wait: float, wait: float) -> dict[str, Any]:
    """The ``recall`` request for a prompt event (warm and full path alike)."""
    prompt = event.get("prompt") if isinstance(event.get("prompt"), str) else ""
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) and event["cwd"].startswith("/") else None
    session_id = event.get("session_id") if isinstance(event.get("session_id"), str) else None
    # reply_by: past it the hook has given up and recalls cold, so the server must not remember
    # its block as shown to the session (the cold block would then leave those notes out).
    return {"op": "recall", "prompt": prompt, "session_id": session_id, "budget": budget,
            "hint_wait_ms": int(hint_wait * 1000), "cwd": cwd, "reply_by": time.time() + wait}


def socket_wait(deadline: float, hint_wait: float) -> float:
    """How long a hook waits for the server's answer."""
    return min(SOCKET_TIMEOUT, deadline * 0.4) + hint_wait


def plan_key(agent: str, vault_arg: str | None, environ: Any = None) -> str:
    """Everything the plan's answer depends on besides the files it stamps."""
    environ = os.environ if environ is None else environ
    env = sorted((k, v) for k, v in environ.items() if k.startswith(_ENV_PREFIXES) or k == "HOME")
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    return json.dumps([PLAN_VERSION, agent, vault_arg, cwd, env], ensure_ascii=False)


def _plan_path(key: str, folder: str | None = None) -> str:
    return os.path.join(runtime_folder() if folder is None else folder, f"hook-plan-{socket_digest(key)}.json")


def _key_digest(key: str) -> str:
    """What the plan file keeps of its key: a digest, never the variables (MEMORY_HUB_LLM_KEY is one)."""
    return socket_digest(key, size=32)


def stamp(path: str | os.PathLike[str]) -> list[int] | None:
    """(mtime_ns, size) of a settings file, None when it does not exist."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


def save_plan(key: str, vault: str | Path, budget: int, deadline: float, hint_wait: float,
              stamps: list[tuple[str, list[int] | None]]) -> None:
    """Keep what the full path worked out for the next warm hook (only where a server made the
    private folder; never raises: the plan only saves time)."""
    try:
        folder = runtime_folder()
        if not os.path.isdir(folder):
            return  # no server ever ran here: no warm hook to save time for
        path = _plan_path(key, folder)
        body = json.dumps({"key": _key_digest(key), "vault": str(vault), "budget": budget, "deadline": deadline,
                           "hint_wait": hint_wait, "stamps": stamps}, ensure_ascii=False)
        try:
            with open(path, encoding="utf-8") as fh:
                if fh.read() == body:
                    _mark_used(path)
                    return  # the plan there already says this (every prompt while the server is down)
        except OSError:
            pass
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body)
        os.replace(tmp, path)
        prune_plans(folder, keep=path)
    except (OSError, UnsafeSocketDir, ValueError):
        pass


def _mark_used(path: str) -> None:
    """Record a plan's use as its mtime (what :func:`prune_plans` ranks by): access times say
    nothing on noatime or relatime mounts. At most once per MARK_EVERY: a warm prompt then costs
    a ``stat``, not a metadata write, and pruning by days loses nothing by it."""
    try:
        if time.time() - os.stat(path).st_mtime > MARK_EVERY:
            os.utime(path)
    except OSError:
        pass


def prune_plans(folder: str, keep: str | None = None, now: float | None = None) -> list[str]:
    """Remove plans unused for ``PLAN_MAX_AGE`` and all but the ``MAX_PLANS`` most recently used
    (a plan is written per working folder, so without this they pile up), and temporary files a
    killed hook left. "Used" is the file's mtime, which writing a plan and every use of it set
    (:func:`_mark_used`), never its access time. Returns the removed paths; never raises."""
    now = time.time() if now is None else now
    plans, removed = [], []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith("hook-plan-") or entry.path == keep:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        used = st.st_mtime
        if entry.name.endswith(".tmp"):
            if now - st.st_mtime > 3600:
                removed.append(entry.path)
        elif now - used > PLAN_MAX_AGE:
            removed.append(entry.path)
        else:
            plans.append((used, entry.path))
    plans.sort(reverse=True)
    removed += [path for _, path in plans[MAX_PLANS - (keep is not None):]]
    gone = []
    for path in removed:
        try:
            os.unlink(path)
            gone.append(path)
        except OSError:
            pass
    return gone


def load_plan(key: str, folder: str | None = None) -> dict[str, Any] | None:
    """The plan for ``key`` if every file it was read from is unchanged, else None (``folder``: the
    checked ``runtime_folder()``, when the caller has it already)."""
    try:
        path = _plan_path(key, folder)
        with open(path, encoding="utf-8") as fh:
            plan = json.load(fh)
    except (OSError, UnsafeSocketDir, ValueError):
        return None
    if not isinstance(plan, dict) or plan.get("key") != _key_digest(key):
        return None
    try:
        if any(stamp(p) != s for p, s in plan["stamps"]):
            return None
        found = {"vault": str(plan["vault"]), "budget": int(plan["budget"]), "deadline": float(plan["deadline"]),
                 "hint_wait": float(plan["hint_wait"])}
    except (KeyError, TypeError, ValueError):
        return None
    _mark_used(path)
    return found


MAX_EVENT = 4 * 1024 * 1024


def read_event(stdin: Any, limit: float) -> str | None:
    """The hook event on stdin, read within ``limit`` seconds; None when stdin stayed open past it
    (the full path would have given up on it too and printed nothing)."""
    try:
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return stdin.read(MAX_EVENT) if stdin is not None else ""
    import select

    chunks, size, end = [], 0, time.monotonic() + limit
    while size < MAX_EVENT:
        left = end - time.monotonic()
        if left <= 0:
            return None
        try:
            ready, _, _ = select.select([fd], [], [], left)
        except (OSError, ValueError):  # not selectable (a file, on some systems): read it as it is
            return stdin.read(MAX_EVENT)
        if not ready:
            return None
        data = os.read(fd, MAX_EVENT - size)
        if not data:
            break
        chunks.append(data)
        size += len(data)
    return b"".join(chunks).decode(getattr(stdin, "encoding", None) or "utf-8", errors="replace")


def read_limit() -> float:
    """How long reading the event may take: the hook's deadline (``MEMORY_HUB_HOOK_DEADLINE``) plus
    the 2 s the full path gives a save."""
    try:
        return max(0.2, float(os.environ.get("MEMORY_HUB_HOOK_DEADLINE", "3.0"))) + 2.0
    except ValueError:
        return 5.0


def try_warm(agent: str, vault_arg: str | None, raw: str, stdout: Any = None) -> dict[str, Any] | None:
    """Answer a prompt event from the running server; None when it was answered (printed), else
    what the full path needs to know: ``{"started": …}`` plus, when the socket was asked, its
    ``"reply"`` (None: no answer in time) or the ``"unsafe"`` reason it was not asked."""
    started = time.monotonic()
    handover: dict[str, Any] = {"started": started}
    try:
        event = json.loads(raw) if raw.strip() else None
    except ValueError:
        return handover
    handover["event"] = {} if event is None else event  # parsed once: the full path takes it from here
    if not isinstance(event, dict) or event.get("hook_event_name") != "UserPromptSubmit":
        return handover
    try:
        folder = runtime_folder()  # checked once: the plan and the socket both live in it
    except (OSError, UnsafeSocketDir):
        return handover  # the full path looks again and says why
    plan = load_plan(plan_key(agent, vault_arg), folder)
    if plan is None:
        return handover
    wait = socket_wait(plan["deadline"], plan["hint_wait"])
    try:
        reply = request(plan["vault"], recall_request(event, plan["budget"], plan["hint_wait"], wait),
                        timeout=wait, folder=folder)
    except UnsafeSocketDir as exc:
        return {**handover, "unsafe": str(exc)}
    if not (reply and reply.get("ok")):
        return {**handover, "reply": reply}
    block = str(reply.get("block") or "")
    if block:
        out = stdout or sys.stdout
        try:
            out.write(json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                                         "additionalContext": block}}, ensure_ascii=False) + "\n")
            out.flush()
        except OSError:
            pass
    return None
