"""``memory-hub install-hooks claude-code|codex``: write the agent's hook settings, idempotently.

Claude Code reads ``.claude/settings.json`` (project) or ``~/.claude/settings.json`` (user); Codex
reads ``.codex/hooks.json`` or ``~/.codex/hooks.json`` with the same shape
(``{"hooks": {Event: [{"matcher": …, "hooks": [{"type": "command", "command": …}]}]}}``).
Running the installer again replaces only Memory Hub's own entries (recognised by their command),
so a user's other hooks and settings are never touched; a file that is not valid JSON is refused
rather than rewritten.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

MARKER = "memory_hub.hooks"

# event → (matcher or None, timeout seconds)
EVENTS: dict[str, dict[str, tuple[str | None, int]]] = {
    "claude-code": {
        "UserPromptSubmit": (None, 10),
        "PostToolUse": ("Read", 10),
        "PreCompact": (None, 30),
        "Stop": (None, 30),
        "SessionEnd": (None, 30),
    },
    "codex": {
        "UserPromptSubmit": (None, 10),
        "PostToolUse": ("Bash", 10),
        "Stop": (None, 30),
    },
}


class InstallError(ValueError):
    """The settings file cannot be updated safely; the message says why."""


def settings_path(agent: str, project: Path | None = None, home: Path | None = None) -> Path:
    base = Path(project) if project is not None else Path(home or Path.home())
    if agent == "claude-code":
        return base / ".claude" / "settings.json"
    if agent == "codex":
        return base / ".codex" / "hooks.json"
    raise InstallError(f"unknown agent {agent!r}: use claude-code or codex")


def hook_command(agent: str, vault: Path | None = None, python: str | None = None) -> str:
    """``python -m memory_hub.hooks [--vault V] <agent>``: the lean entry (no full CLI imports)."""
    parts = [python or sys.executable, "-m", MARKER]
    if vault is not None:
        parts += ["--vault", str(Path(vault).resolve())]
    parts += [agent]
    return " ".join(shlex.quote(p) for p in parts)


def _ours(entry: Any, agent: str) -> bool:
    """Our entry, in the current form or the older ``memory_hub.cli … hook <agent>`` one."""
    command = str(entry.get("command", "")) if isinstance(entry, dict) else ""
    return (MARKER in command and command.rstrip().endswith(f" {agent}")) or (
        "memory_hub.cli" in command and f"hook {agent}" in command)


def merge(settings: dict[str, Any], agent: str, command: str) -> dict[str, Any]:
    """``settings`` with Memory Hub's hooks for ``agent`` set, everything else kept as it was."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError("'hooks' in the settings file is not an object; fix it by hand first")
    for event, (matcher, timeout) in EVENTS[agent].items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InstallError(f"'hooks.{event}' is not a list; fix it by hand first")
        cleaned = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not _ours(h, agent)]
                if not kept and any(_ours(h, agent) for h in group["hooks"]):
                    continue  # a group that only held our hook: replaced below
                group = {**group, "hooks": kept}
            cleaned.append(group)
        ours: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        if matcher is not None:
            ours = {"matcher": matcher, **ours}
        cleaned.append(ours)
        hooks[event] = cleaned
    return settings


def install(agent: str, project: Path | None = None, vault: Path | None = None, home: Path | None = None,
            python: str | None = None) -> dict[str, Any]:
    """Write the hooks; returns {"path", "changed", "events"}."""
    path = settings_path(agent, project, home)
    settings: dict[str, Any] = {}
    original = None
    if path.exists():
        original = path.read_text(encoding="utf-8")
        try:
            settings = json.loads(original) if original.strip() else {}
        except ValueError as exc:
            raise InstallError(f"{path} is not valid JSON ({exc}); not rewritten") from None
        if not isinstance(settings, dict):
            raise InstallError(f"{path} does not hold a JSON object; not rewritten")
    merged = merge(settings, agent, hook_command(agent, vault, python))
    text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    changed = text != original
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    out = {"path": str(path), "changed": changed, "events": list(EVENTS[agent])}
    if agent == "codex":
        out["note"] = "Codex runs hooks only with `[features] codex_hooks = true` in ~/.codex/config.toml"
    return out
