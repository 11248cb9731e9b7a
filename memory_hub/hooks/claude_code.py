"""``memory-hub hook claude-code``: Claude Code's hook events in, at most one JSON object out.

* ``UserPromptSubmit`` → the ``<vault-memory>`` block as ``additionalContext``: asked of the warm
  server over the local socket first, computed in-process when no server answers; over this vault
  and the team vaults configured for the prompt's folder (``cwd``), one fused ranking
  (``team/recall.py``).
* ``PostToolUse`` of a file read inside the vault → one read recorded in the usage log (the note
  itself is never written).
* ``PreCompact`` / ``Stop`` / ``SubagentStop`` / ``SessionEnd`` → the transcript tail saved as a
  raw capture note (redacted), slow work handed to a detached worker.

A hook must never get in the agent's way: whatever happens (bad JSON, no vault, a crash, a slow
disk) the process prints nothing or valid JSON and exits 0 within a hard deadline.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .warm import plan_key, recall_request, save_plan, socket_wait, stamp

DEADLINE_ENV = "MEMORY_HUB_HOOK_DEADLINE"
DEFAULT_DEADLINE = 3.0  # seconds for UserPromptSubmit, end to end
SAVE_EVENTS = ("PreCompact", "Stop", "SubagentStop", "SessionEnd")
READ_TOOLS = ("Read", "read_file", "view", "View")
AFTER_REPLY: list[Callable[[], None]] = []  # work that must happen but need not delay the reply
# This process's warm-path plan (hooks/warm.py): its key, the settings files' stamps, and what the
# warm attempt already found (``handover``); set by ``run``.
PLAN: dict[str, Any] = {}


def _deadline() -> float:
    try:
        return max(0.2, float(os.environ.get(DEADLINE_ENV, DEFAULT_DEADLINE)))
    except ValueError:
        return DEFAULT_DEADLINE


def _vault(explicit: str | None) -> tuple[Path | None, str | None]:
    """The vault and its settings exported to this process, or None and why (a broken file, no vault)."""
    from ..config import ConfigError, resolve_vault, settings, user_config_path, vault_config_path

    try:
        # stamped before they are read (the user file before it names the vault): a file saved
        # meanwhile leaves the plan stale, never wrong
        user = user_config_path()
        stamps = [(str(user), stamp(user))]
        vault = resolve_vault(explicit)
        PLAN["stamps"] = stamps + [(str(f), stamp(f)) for f in (vault_config_path(vault),
                                                               vault / ".obsidian" / "daily-notes.json",
                                                               vault / ".obsidian" / "app.json")]
        settings(vault).export_environment()
        return vault, None
    except ConfigError as exc:
        return None, str(exc)


def _report_no_vault(reason: str, agent: str, event: dict[str, Any]) -> None:
    """Silence would look like "nothing relevant": say it on stderr and in the per-user telemetry."""
    from ..eval import telemetry

    print(f"memory-hub hook: {reason}; this {event.get('hook_event_name') or 'hook'} did nothing "
          "(pin a vault: memory-hub --vault PATH install-hooks AGENT)", file=sys.stderr)
    telemetry.record_without_vault({"event": "hook", "hook": event.get("hook_event_name"), "agent": agent,
                                    "session": event.get("session_id"), "cwd": event.get("cwd"),
                                    "reason": reason})


def prompt_context(vault: Path, event: dict[str, Any], agent: str, deadline: float) -> tuple[str, dict[str, Any]]:
    """The block for a prompt, warm if a server answers, else cold; and how it was served."""
    from ..config import settings
    from ..eval import telemetry
    from ..retrieval.hints import wait_seconds as hint_seconds
    from ..server.hook_socket import UnsafeSocketDir, request
    from ..services.llm import configured as llm_configured

    prior = PLAN.get("handover") or {}
    started = prior.get("started", time.monotonic())  # the warm attempt's time counts against the deadline
    prompt = event.get("prompt") if isinstance(event.get("prompt"), str) else ""
    cwd = event.get("cwd") if isinstance(event.get("cwd"), str) and event["cwd"].startswith("/") else None
    session_id = event.get("session_id") if isinstance(event.get("session_id"), str) else None
    budget = settings(vault)["hooks.budget"]
    # With an LLM endpoint, recall may wait this long for a same-turn hint (never past our deadline).
    hint_wait = min(hint_seconds(), deadline * 0.4) if llm_configured() else 0.0
    if "key" in PLAN:  # the next warm hook process skips the settings (hooks/warm.py)
        save_plan(PLAN["key"], vault, budget, deadline, hint_wait, PLAN.get("stamps") or [])
    unsafe = None
    if "unsafe" in prior:
        reply, unsafe = None, f"unsafe-socket: {prior['unsafe']}"
    elif "reply" in prior:
        reply = prior["reply"]  # the warm path asked already and waited its share of the deadline
    else:
        wait = socket_wait(deadline, hint_wait)
        try:
            reply = request(vault, recall_request(event, budget, hint_wait, wait), timeout=wait)
        except UnsafeSocketDir as exc:  # another user could be listening: never ask it, say why
            reply, unsafe = None, f"unsafe-socket: {exc}"
    if reply and reply.get("ok"):
        return str(reply.get("block") or ""), {"served_by": "warm"}
    fallback = unsafe or ("no-server" if reply is None else f"server-error: {reply.get('error')}")

    def cold() -> None:
        from ..team.recall import cold_recaller
        from .prompt import LATE_MARGIN_S, answer

        try:
            # this vault and the team vaults its hooks ask in this folder (vaults.py), as the server would
            recaller = cold_recaller(vault, Path(cwd) if cwd else None)
            # past the hook's deadline nobody prints the block: not recorded as shown to the session
            # (``answer`` keeps LATE_MARGIN_S for a socket's crossing; in-process there is none)
            give_up = time.time() + (started + deadline - time.monotonic()) + LATE_MARGIN_S
            out = answer(recaller, prompt, session_id, served_by="cold", budget=budget,
                                deadline=started + deadline * 0.7, fallback=fallback, extra={"agent": agent},
                                hint_until=min(time.monotonic() + hint_wait, started + deadline * 0.85),
                                defer_record=True, reply_by=give_up)
        except Exception as exc:  # noqa: BLE001 - reported in telemetry, never raised into the agent
            with lock:
                box["error"] = f"{type(exc).__name__}: {exc}"
            return
        with lock:
            if box.get("abandoned"):
                return  # the "none" line below is this prompt's one telemetry line
            box["done"] = out
            AFTER_REPLY.append(out.pop("record"))

    box: dict[str, Any] = {}
    lock = threading.Lock()
    worker = threading.Thread(target=cold, daemon=True)
    worker.start()
    worker.join(max(0.05, deadline - (time.monotonic() - started)))
    with lock:
        if "done" not in box:
            box["abandoned"] = True
    if "done" in box:
        for warning in box["done"]["telemetry"].get("warnings") or []:
            print(f"memory-hub hook: {warning}", file=sys.stderr)  # never silent: "nothing relevant" looks alike
        return str(box["done"]["block"] or ""), {"served_by": "cold", "fallback": fallback}
    reason = box.get("error") or "deadline"
    telemetry.record(vault, {"event": "recall", "served_by": "none", "session": session_id, "agent": agent,
                             "fallback": f"{fallback}; {reason}",
                             "latency_ms": round((time.monotonic() - started) * 1000, 2)})
    return "", {"served_by": "none", "fallback": reason}


def count_read(vault: Path, path: str, cwd: object) -> None:
    """A file the agent read: if it is a note of this vault, one ``read`` usage event (never raises;
    the note itself is never written, see vault/usage.py)."""
    from ..vault.usage import UsageError, record_read
    from .transcript import relative_to_vault

    rel = relative_to_vault(vault, path, cwd)
    if rel:
        try:
            record_read(vault, rel)
        except (UsageError, OSError, ValueError):
            pass  # not a note, gone, or outside the vault: nothing to count


def handle(event: dict[str, Any], vault: Path, agent: str = "claude-code",
           deadline: float | None = None) -> dict[str, Any] | None:
    """Act on one hook event; returns the JSON object to print, or None to print nothing."""
    name = event.get("hook_event_name")
    deadline = deadline if deadline is not None else _deadline()
    if name == "UserPromptSubmit":
        block, _how = prompt_context(vault, event, agent, deadline)
        if not block:
            return None
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": block}}
    if name == "PostToolUse":
        tool = str(event.get("tool_name") or "")
        args = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
        path = args.get("file_path") or args.get("path")
        if tool in READ_TOOLS and isinstance(path, str):
            count_read(vault, path, event.get("cwd"))
        return None
    if name in SAVE_EVENTS:
        from ..eval import telemetry
        from .save import save_tail
        from .worker import spawn

        outcome = save_tail(vault, event, agent)
        worker = None
        if name == "SessionEnd" and isinstance(event.get("session_id"), str):
            args = ["session-end", "--session", event["session_id"]]
            if isinstance(event.get("transcript_path"), str):
                args += ["--transcript", event["transcript_path"]]
            if isinstance(event.get("cwd"), str):
                args += ["--cwd", event["cwd"]]
            worker = spawn(vault, *args)
        elif name == "PreCompact" and outcome.get("path"):
            worker = spawn(vault, "sync")
        telemetry.record(vault, {"event": "hook", "hook": name, "agent": agent, "session": event.get("session_id"),
                                 "capture": outcome, "worker_pid": worker})
        return None
    return None


def run(agent: str, vault_arg: str | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None,
        handler: Callable[..., dict[str, Any] | None] = handle, detach: bool = False,
        handover: dict[str, Any] | None = None) -> int:
    """Read one event from stdin, handle it under a hard deadline, print the reply; always 0.

    ``detach`` (the real hook process) finishes ``AFTER_REPLY`` in a forked child so the agent,
    which waits for this process to exit, is not kept waiting; in-process callers finish inline.
    ``handover`` is what a warm attempt (``warm.try_warm``) already found out."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    PLAN.clear()
    if detach:  # a real hook process: the next one may answer from this plan (in-process callers leave none)
        PLAN["key"] = plan_key(agent, vault_arg)  # before the settings are exported to the environment
    if handover is not None:
        PLAN["handover"] = handover
    vault, problem = _vault(vault_arg)  # before the deadline: the vault's settings may set it
    limit = _deadline()
    result: dict[str, Any] = {}

    def work() -> None:
        try:
            if handover is not None and "event" in handover:
                event = handover["event"]  # the warm attempt parsed it already (tool output: up to 4 MB)
            else:
                raw = stdin.read(4 * 1024 * 1024)
                event = json.loads(raw) if raw.strip() else {}
            if not isinstance(event, dict):
                return
            if vault is None:
                _report_no_vault(problem or "no vault", agent, event)
                return
            result["out"] = handler(event, vault, agent, limit)
        except Exception as exc:  # noqa: BLE001 - a hook never fails the agent
            print(f"memory-hub hook: {type(exc).__name__}: {exc}", file=sys.stderr)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(limit + 2.0)  # UserPromptSubmit budgets itself; saves get a little more
    out = result.get("out")
    if out:
        try:
            stdout.write(json.dumps(out, ensure_ascii=False) + "\n")
            stdout.flush()
        except OSError:
            pass
    finish_after_reply(detach)
    return 0


def finish_after_reply(detach: bool) -> None:
    """Run ``AFTER_REPLY``: inline, or (``detach``, where fork exists) in a child that owns none of
    the agent's pipes, so the parent exits at once. A failure is dropped: it is telemetry."""
    tasks = list(AFTER_REPLY)
    AFTER_REPLY.clear()
    if not tasks:
        return
    pid = -1
    if detach and hasattr(os, "fork"):
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:
            pid = -1
        if pid > 0:
            return
    if pid == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    for task in tasks:
        try:
            task()
        except Exception:  # noqa: BLE001, S112 - telemetry never fails a hook
            continue
    if pid == 0:
        os._exit(0)
