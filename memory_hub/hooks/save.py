"""Saving a session's transcript tail into the vault as a raw capture note, redacted first.

Hooks that fire as context is about to be lost (``PreCompact``, ``Stop``, ``SessionEnd``) call this.
One note per session *segment*: later events in the same segment update that note in place (only
if nobody edited it since: the mtime must match what was written), ``PreCompact`` closes the
segment so the next save starts a new note from where the previous one ended. Nothing is written
when the tail has not changed or holds too little to be worth a note.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
from pathlib import Path
from typing import Any

import yaml

from ..config import settings
from ..retrieval import session
from ..vault.redact import redact_report
from ..vault.safe_io import OutsideVault, safe_path
from ..vault.writer import NoteExists, create_note, replace_note, unique_note_path
from .transcript import Message, read_tail, render

FOLDER = "inbox"  # the default of folders.inbox
MIN_CHARS = 200
RENDER_CHARS = 24_000  # the note holds the newest 24,000 characters of the conversation
AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex"}


def _redact_tail(messages: list[Message], max_chars: int = RENDER_CHARS) -> dict[str, int]:
    """Redact, in place, the messages the note will show (newest first, until ``max_chars``).

    Each message is redacted whole *before* the render cuts the text to its budget, so a cut can never
    leave the unrecognisable middle of a secret (a private key without its BEGIN line) behind.
    """
    counts: dict[str, int] = {}
    total = 0
    for message in reversed(messages):
        if message.role not in ("user", "assistant") or not message.text:
            continue
        done = redact_report(message.text)
        message.text = done.text
        for kind, n in done.counts.items():
            counts[kind] = counts.get(kind, 0) + n
        total += len(message.text)
        if total > max_chars:
            break
    return counts


def _note_text(title: str, description: str, agent: str, session_id: str, event: str, body: str) -> str:
    today = _dt.date.today().isoformat()
    data = {
        "title": title, "description": description, "kind": "capture", "scope": "work",
        "tags": ["transcript", agent], "created": today, "updated": today,
        "source": f"{agent}-hook", "session": session_id, "event": event,
    }
    head = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=10_000).strip()
    return f"---\n{head}\n---\n\n# {title}\n\n{body}\n"


def save_tail(vault: Path, event: dict[str, Any], agent: str = "claude-code") -> dict[str, Any]:
    """Write or update this session segment's capture note; returns what happened."""
    session_id = str(event.get("session_id") or "unknown")
    transcript = event.get("transcript_path")
    name = str(event.get("hook_event_name") or "")
    record = session.load(vault, session_id)
    capture = record.get("capture") if isinstance(record.get("capture"), dict) else {}
    start = int(record.get("segment_offset", 0) or 0)
    try:
        size = os.path.getsize(transcript) if transcript else 0
    except OSError:
        size = 0
    messages = read_tail(transcript, start=start)
    redacted = _redact_tail(messages)
    body = render(messages, max_chars=RENDER_CHARS)
    outcome: dict[str, Any] = {"event": name, "path": None, "action": "skipped"}
    if redacted:
        outcome["redacted"] = redacted
    digest = hashlib.blake2b(body.encode("utf-8"), digest_size=12).hexdigest()
    if len(body) < MIN_CHARS:
        outcome["reason"] = "too little text"
    elif capture.get("hash") == digest:
        outcome["reason"] = "unchanged"
    else:
        label = AGENT_NAMES.get(agent, agent)
        day = _dt.date.today()
        title = f"{label} session {day.isoformat()} {session_id[:8]}"
        if record.get("segment", 0):
            title += f" (part {int(record['segment']) + 1})"
        description = (f"Raw transcript tail of a {label} session, saved by the {name} hook before the "
                       "context was lost; redacted, not yet curated.")
        text = _note_text(title, description, agent, session_id, name, body)
        rel = capture.get("path")
        written = None
        if rel:
            try:
                full = safe_path(vault, rel)
                if full.exists() and full.stat().st_mtime_ns == capture.get("mtime_ns"):
                    replace_note(vault, rel, text, expected_mtime_ns=capture["mtime_ns"])
                    written, outcome["action"] = rel, "updated"
            except (OSError, NoteExists, ValueError):
                written = None  # edited by a person or gone: leave it, start a new note
        if written is None:
            try:
                for _ in range(5):
                    rel = unique_note_path(vault, settings(vault)["folders.inbox"], f"{agent} session {session_id[:8]}", day)
                    try:
                        create_note(vault, rel, text)
                        written, outcome["action"] = rel, "created"
                        break
                    except NoteExists:
                        continue
            except (OutsideVault, OSError) as exc:  # e.g. inbox/ is a symlink leading out of the vault
                outcome["reason"] = f"not saved: {exc}"
        if written:
            full = safe_path(vault, written)
            capture = {"path": written, "mtime_ns": full.stat().st_mtime_ns, "hash": digest}
            outcome["path"] = written
    changes: dict[str, Any] = {"capture": capture, "transcript_path": transcript, "cwd": event.get("cwd")}
    if name == "PreCompact":  # close the segment: the next note starts after this point
        changes.update(capture={}, segment_offset=size, segment=int(record.get("segment", 0) or 0) + 1)
    session.update(vault, session_id, **changes)
    return outcome
