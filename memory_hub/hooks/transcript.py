"""Reading an agent's transcript (JSON lines) from its tail: messages, tool calls, files opened.

Claude Code writes ``{"type": "user"|"assistant", "message": {"role", "content": str | [blocks]}}``
per line, with ``tool_use`` blocks (``name``, ``input``) inside assistant messages; Codex writes
``{"type": "response_item", "payload": {"type": "message", "role", "content": [...]}}`` and
``function_call`` items. Both are read by shape, not by version, and only the last
``max_bytes`` of the file, so a week-long session costs the same as a short one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vault.safe_io import UnreadableNote, open_regular

TAIL_BYTES = 512 * 1024


@dataclass
class Message:
    role: str  # user | assistant | tool
    text: str
    tools: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (tool name, input)


def _text_of(content: Any) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    tools: list[tuple[str, dict[str, Any]]] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, str):
                texts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind in ("text", "output_text", "input_text") and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif kind == "tool_use":
                    args = block.get("input")
                    tools.append((str(block.get("name", "")), args if isinstance(args, dict) else {}))
    return "\n".join(texts), tools


def parse_line(item: Any) -> Message | None:
    """One transcript line as a Message, or None for lines that are not conversation."""
    if not isinstance(item, dict):
        return None
    payload = item.get("payload") if isinstance(item.get("payload"), dict) else None
    if payload is not None:  # Codex rollout
        if payload.get("type") == "message":
            text, tools = _text_of(payload.get("content"))
            return Message(str(payload.get("role", "")), text, tools)
        if payload.get("type") in ("function_call", "local_shell_call", "custom_tool_call"):
            raw = payload.get("arguments") or payload.get("input") or payload.get("action") or {}
            if isinstance(raw, str):
                try:
                    raw = json.loads(raw)
                except ValueError:
                    raw = {"command": raw}
            return Message("assistant", "", [(str(payload.get("name", payload.get("type"))),
                                              raw if isinstance(raw, dict) else {})])
        return None
    message = item.get("message")
    if isinstance(message, dict):
        role = str(message.get("role") or item.get("type") or "")
        text, tools = _text_of(message.get("content"))
        if role == "user" and not text and isinstance(message.get("content"), list):
            role = "tool"  # a user turn that only carries tool results
        return Message(role, text, tools)
    if item.get("type") in ("user", "assistant") and isinstance(item.get("content"), (str, list)):
        text, tools = _text_of(item["content"])
        return Message(str(item["type"]), text, tools)
    return None


def read_tail(path: str | os.PathLike[str] | None, max_bytes: int = TAIL_BYTES, start: int = 0) -> list[Message]:
    """The messages in the last ``max_bytes`` of a transcript (never before byte ``start``);
    [] when it cannot be read."""
    if not path:
        return []
    try:
        # Never blocks on a FIFO or a device named like a transcript: regular files only.
        with os.fdopen(open_regular(path), "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            begin = max(0, start if start <= size else 0, size - max_bytes)
            fh.seek(begin)
            data = fh.read(size - begin)
    except (OSError, UnreadableNote):
        return []
    if begin > 0 and begin != start:
        data = data.split(b"\n", 1)[-1]  # the first line is probably cut
    out = []
    for raw in data.splitlines():
        try:
            msg = parse_line(json.loads(raw))
        except ValueError:
            continue
        if msg is not None and (msg.text.strip() or msg.tools):
            out.append(msg)
    return out


def assistant_text(messages: list[Message]) -> str:
    return "\n".join(m.text for m in messages if m.role == "assistant" and m.text)


_READ_TOOLS = {"read", "view", "open", "read_file", "readfile", "cat", "mcp__memory-hub__read_note", "read_note"}


def opened_files(messages: list[Message]) -> list[str]:
    """Paths the assistant opened with a read tool (Claude Code ``Read``, MCP ``read_note``, …)."""
    out = []
    for m in messages:
        for name, args in m.tools:
            short = name.lower().rsplit("__", 1)[-1]
            if name.lower() in _READ_TOOLS or short in _READ_TOOLS:
                for key in ("file_path", "path", "notebook_path", "filename"):
                    if isinstance(args.get(key), str):
                        out.append(args[key])
                        break
    return out


def render(messages: list[Message], max_chars: int = 24_000) -> str:
    """The conversation as Markdown, newest last, cut from the front to ``max_chars``."""
    parts = []
    for m in messages:
        if m.role not in ("user", "assistant"):
            continue
        body = m.text.strip()
        calls = ", ".join(name for name, _ in m.tools)
        if not body and not calls:
            continue
        head = f"**{m.role}**" + (f" (tools: {calls})" if calls else "")
        parts.append(f"{head}\n\n{body}" if body else head)
    text = "\n\n---\n\n".join(parts)
    if len(text) > max_chars:
        text = "…\n\n" + text[-max_chars:]
    return text


def relative_to_vault(vault: Path, path: str, cwd: str | None = None) -> str | None:
    """``path`` (absolute, or relative to ``cwd``) as a vault-relative note path, or None outside."""
    try:
        p = Path(path)
        if not p.is_absolute():
            p = Path(cwd or os.getcwd()) / p
        real = Path(os.path.realpath(p))
        root = Path(os.path.realpath(vault))
        rel = real.relative_to(root).as_posix()
    except (ValueError, OSError):
        return None
    if any(part.startswith(".") for part in rel.split("/")) or not rel.lower().endswith(".md"):
        return None
    return rel
