"""``memory-hub hook codex``: Codex's hooks, which share Claude Code's event shape.

Differences handled here: Codex reads files through its shell tool, so ``PostToolUse`` of ``Bash``
counts an access for each vault note the command reads (``cat``, ``sed -n``, ``head``, ``less``…);
and Codex has no ``SessionEnd``, so ``Stop`` (end of a turn) also hands the usefulness judging of
any not-yet-judged injected notes to the detached worker.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from . import claude_code

_READERS = {"cat", "sed", "head", "tail", "less", "more", "bat", "nl", "view"}


def read_paths(command: str) -> list[str]:
    """Markdown files a shell command reads with a plain reader."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out: list[str] = []
    reading = False
    for w in words:
        if w in ("|", "&&", ";", "||"):
            reading = False
            continue
        base = w.rsplit("/", 1)[-1]
        if base in _READERS:
            reading = True
            continue
        if reading and re.search(r"\.md$", w, re.IGNORECASE):
            out.append(w)
    return out


def handle(event: dict[str, Any], vault: Path, agent: str = "codex", deadline: float | None = None
           ) -> dict[str, Any] | None:
    name = event.get("hook_event_name")
    if name == "PostToolUse" and str(event.get("tool_name")) in ("Bash", "shell", "local_shell"):
        args = event.get("tool_input") if isinstance(event.get("tool_input"), dict) else {}
        command = args.get("command")
        if isinstance(command, list):
            command = " ".join(str(c) for c in command)
        for path in read_paths(command) if isinstance(command, str) else []:
            claude_code.count_read(vault, path, event.get("cwd"))
        return None
    out = claude_code.handle(event, vault, agent, deadline)
    if name == "Stop" and isinstance(event.get("session_id"), str):
        from ..retrieval import session
        from .worker import spawn

        record = session.load(vault, event["session_id"])
        judged = set(record.get("judged", []))
        if any(e.get("path") not in judged for e in record.get("injected", []) if isinstance(e, dict)):
            args = ["session-end", "--session", event["session_id"]]
            if isinstance(event.get("transcript_path"), str):
                args += ["--transcript", event["transcript_path"]]
            spawn(vault, *args)
    return out


def run(vault_arg: str | None = None, detach: bool = False, stdin: Any = None, handover: dict[str, Any] | None = None
        ) -> int:
    return claude_code.run("codex", vault_arg, stdin=stdin, handler=handle, detach=detach, handover=handover)
