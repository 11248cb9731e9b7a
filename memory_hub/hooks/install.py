"""``memory-hub install-hooks claude-code|codex [--uninstall]``: the agent's hook settings, idempotently.

Claude Code reads ``~/.claude/settings.json`` (user), ``.claude/settings.json`` (project, usually
committed) and ``.claude/settings.local.json`` (project, not committed: the place for a person's
absolute paths, ``--local``); Codex reads ``~/.codex/hooks.json`` or ``.codex/hooks.json``. All share
one shape: ``{"hooks": {Event: [{"matcher": …, "hooks": [{"type": "command", "command": …}]}]}}``.

The command is ``<memory-hub> hook <agent> --vault <vault>``: the ``memory-hub`` on PATH (see
``launcher.py``) and the vault resolved at install time, so a hook never depends on the agent's
environment to find it. Installing again replaces only Memory Hub's own entries (recognised by
their command, older forms included); ``uninstall`` removes exactly those and nothing else. A file
that is not valid JSON is refused rather than rewritten, and a rewritten file keeps its permissions.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import tempfile
from pathlib import Path
from typing import Any

from ..launcher import Launcher, launcher

MARKER = "memory_hub.hooks"  # the older lean form: <python> -m memory_hub.hooks [--vault V] <agent>

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


def settings_path(agent: str, project: Path | None = None, home: Path | None = None, local: bool = False) -> Path:
    base = Path(project) if project is not None else Path(home or Path.home())
    if agent == "claude-code":
        return base / ".claude" / ("settings.local.json" if local else "settings.json")
    if agent == "codex":
        if local:
            raise InstallError("--local is Claude Code's settings.local.json; Codex has no such file")
        return base / ".codex" / "hooks.json"
    raise InstallError(f"unknown agent {agent!r}: use claude-code or codex")


def hook_command(agent: str, vault: Path | None = None, run: Launcher | None = None) -> str:
    """``<memory-hub> hook <agent> [--vault V]``."""
    args = ["hook", agent] + (["--vault", str(Path(vault).resolve())] if vault is not None else [])
    return (run or launcher()).command(*args)


def ours(entry: Any, agent: str) -> bool:
    """Our entry for ``agent``, in the current form or an older one."""
    command = str(entry.get("command", "")) if isinstance(entry, dict) else ""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if not words:
        return False
    if MARKER in words:
        return agent in words
    runs_us = os.path.basename(words[0]) == "memory-hub" or (
        len(words) > 2 and words[1] == "-m" and words[2] in ("memory_hub", "memory_hub.cli"))
    if runs_us and "hook" in words:
        i = words.index("hook")
        return i + 1 < len(words) and words[i + 1] == agent
    return False


def pinned_vault(command: str) -> str | None:
    """The ``--vault`` a hook command names, if any."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    return words[words.index("--vault") + 1] if "--vault" in words[:-1] else None


def _strip(settings: dict[str, Any], agent: str) -> int:
    """Remove our hooks for ``agent`` (and groups and events they leave empty); returns how many."""
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return 0
    removed = 0
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        cleaned = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not ours(h, agent)]
                removed += len(group["hooks"]) - len(kept)
                if not kept and group["hooks"]:
                    continue  # the group only held our hook
                group = {**group, "hooks": kept}
            cleaned.append(group)
        if cleaned:
            hooks[event] = cleaned
        elif groups:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    return removed


def merge(settings: dict[str, Any], agent: str, command: str) -> dict[str, Any]:
    """``settings`` with Memory Hub's hooks for ``agent`` set, everything else kept as it was."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError("'hooks' in the settings file is not an object; fix it by hand first")
    for event in EVENTS[agent]:
        if not isinstance(hooks.get(event, []), list):
            raise InstallError(f"'hooks.{event}' is not a list; fix it by hand first")
    _strip(settings, agent)
    hooks = settings.setdefault("hooks", {})
    for event, (matcher, timeout) in EVENTS[agent].items():
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": command, "timeout": timeout}]}
        if matcher is not None:
            entry = {"matcher": matcher, **entry}
        hooks.setdefault(event, []).append(entry)
    return settings


def _read(path: Path) -> tuple[dict[str, Any], str | None]:
    if not path.exists():
        return {}, None
    original = path.read_text(encoding="utf-8")
    try:
        settings = json.loads(original) if original.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); not rewritten") from None
    if not isinstance(settings, dict):
        raise InstallError(f"{path} does not hold a JSON object; not rewritten")
    return settings, original


def _write(path: Path, text: str) -> None:
    """Atomic replace that keeps the file's mode (a new file gets the umask's usual 0644)."""
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def install(agent: str, project: Path | None = None, vault: Path | None = None, home: Path | None = None,
            local: bool = False, run: Launcher | None = None) -> dict[str, Any]:
    """Write the hooks; returns {path, changed, events, command, vault (pinned, or null), warnings}."""
    path = settings_path(agent, project, home, local)
    settings, original = _read(path)
    run = run or launcher()
    command = hook_command(agent, vault, run)
    text = json.dumps(merge(settings, agent, command), indent=2, ensure_ascii=False) + "\n"
    changed = text != original
    if changed:
        _write(path, text)
    out: dict[str, Any] = {"path": str(path), "changed": changed, "events": list(EVENTS[agent]),
                           "command": command, "vault": str(Path(vault).resolve()) if vault else None,
                           "warnings": [run.warning] if run.warning else []}
    if agent == "codex":
        out["note"] = "Codex runs hooks only with `[features] codex_hooks = true` in ~/.codex/config.toml"
    return out


def uninstall(agent: str, project: Path | None = None, home: Path | None = None, local: bool = False
              ) -> dict[str, Any]:
    """Remove Memory Hub's hooks for ``agent``; a settings file left empty is deleted."""
    path = settings_path(agent, project, home, local)
    settings, original = _read(path)
    removed = _strip(settings, agent) if original is not None else 0
    deleted = False
    if removed:
        if settings:
            _write(path, json.dumps(settings, indent=2, ensure_ascii=False) + "\n")
        else:
            path.unlink()
            deleted = True
    return {"path": str(path), "changed": bool(removed), "removed": removed, "deleted_file": deleted}


def installed_hooks(home: Path | None = None, projects: list[Path] | None = None) -> list[dict[str, Any]]:
    """Every Memory Hub hook command found in the agents' settings files (for ``doctor``)."""
    found = []
    bases: list[tuple[Path | None, bool]] = [(None, False), (None, True)]
    bases += [(p, local) for p in (projects or []) for local in (False, True)]
    seen: set[Path] = set()
    for agent in EVENTS:
        for project, local in bases:
            try:
                path = settings_path(agent, project, home, local)
            except InstallError:
                continue
            if path in seen or not path.is_file():
                continue
            seen.add(path)
            try:
                settings, _ = _read(path)
            except (InstallError, OSError, UnicodeDecodeError) as exc:
                found.append({"agent": agent, "path": str(path), "error": str(exc)})
                continue
            commands = sorted({h["command"] for groups in (settings.get("hooks") or {}).values()
                               if isinstance(groups, list) for g in groups if isinstance(g, dict)
                               for h in (g.get("hooks") or []) if ours(h, agent)})
            for command in commands:
                found.append({"agent": agent, "path": str(path), "command": command, "vault": pinned_vault(command)})
    return found
