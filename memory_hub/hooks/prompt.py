"""One prompt's recall, the same in the warm server and in a cold hook process.

Looks up what this session was already shown, recalls, remembers what it injects now, and writes
one telemetry line saying which path served it (``warm`` over the local socket, ``cold``
in-process) and why anything fell back.
"""

from __future__ import annotations

import time
from typing import Any

from ..eval import telemetry
from ..retrieval import session
from ..retrieval.recall import Recaller


def answer(recaller: Recaller, prompt: str, session_id: str | None = None, *, served_by: str = "cold",
           budget: int = 1200, deadline: float | None = None, fallback: str | None = None,
           extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Recall for a prompt; returns {"block", "injected", "telemetry"} and records both."""
    t0 = time.perf_counter()
    seen = session.injected_paths(recaller.vault, session_id)
    result = recaller.recall(prompt, exclude=seen, budget=budget, deadline=deadline)
    injected = [e.path for e in result.block.included] if result.block else []
    if session_id and injected:
        now = time.time()
        session.update(recaller.vault, session_id, injected=[
            {"path": e.path, "title": e.title, "description": e.description, "at": now, "mode": result.mode}
            for e in result.block.included])
    event = {"event": "recall", "served_by": served_by, "session": session_id,
             "latency_ms": round((time.perf_counter() - t0) * 1000, 2), **result.telemetry(), **(extra or {})}
    if fallback:
        event["fallback"] = fallback + (f"; {event['fallback']}" if event.get("fallback") else "")
    event.update(telemetry.prompt_fields(recaller.vault, prompt, result.text))
    telemetry.record(recaller.vault, event)
    return {"block": result.text, "injected": injected, "telemetry": event}
