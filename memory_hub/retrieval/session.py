"""Per-session memory of what recall already injected, so a note is not repeated in one session.

One small JSON file per agent session under ``<vault>/.memory_hub/sessions/``; the usefulness judge
reads the same file at session end to know which notes were shown. Session ids come from the
agent and are untrusted: they are reduced to a safe file name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import index_dir
from ..locks import file_lock

MAX_AGE_DAYS = 14


def _name(session_id: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]", "", session_id)[:64].lstrip(".")
    digest = hashlib.blake2b(session_id.encode("utf-8", "replace"), digest_size=6).hexdigest()
    return f"{clean or 'session'}-{digest}.json"


def session_file(vault: Path, session_id: str) -> Path:
    return index_dir(Path(vault)) / "sessions" / _name(session_id or "default")


def load(vault: Path, session_id: str) -> dict[str, Any]:
    """The session's record: {"injected": [{path, title, description, at, mode}], ...}."""
    try:
        data = json.loads(session_file(vault, session_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"session_id": session_id, "injected": []}
    if not isinstance(data, dict) or not isinstance(data.get("injected"), list):
        return {"session_id": session_id, "injected": []}
    return data


def injected_paths(vault: Path, session_id: str | None) -> list[str]:
    if not session_id:
        return []
    return [e["path"] for e in load(vault, session_id)["injected"] if isinstance(e, dict) and "path" in e]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with file_lock(Path(str(path) + ".lock")):
        yield


def update(vault: Path, session_id: str, **changes: Any) -> dict[str, Any]:
    """Apply ``changes`` to the session record: ``injected=[entry…]`` appends, other keys set."""
    path = session_file(vault, session_id)
    with _locked(path):
        data = load(vault, session_id)
        new = changes.pop("injected", [])
        known = {e.get("path") for e in data["injected"] if isinstance(e, dict)}
        data["injected"].extend(e for e in new if e.get("path") not in known)
        data.update(changes)
        data["session_id"] = session_id
        data["updated"] = time.time()
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    return data


def prune(vault: Path, max_age_days: float = MAX_AGE_DAYS) -> int:
    """Delete session files untouched for ``max_age_days``; returns how many."""
    folder = index_dir(Path(vault)) / "sessions"
    cutoff = time.time() - max_age_days * 86400
    removed = 0
    for f in folder.glob("*.json") if folder.is_dir() else ():
        with contextlib.suppress(OSError):
            if f.stat().st_mtime < cutoff:
                f.unlink()
                Path(str(f) + ".lock").unlink(missing_ok=True)
                removed += 1
    return removed
