"""One prompt's recall, the same in the warm server and in a cold hook process.

Looks up what this session was already shown (and its previous hint), starts this turn's hint call
when an LLM endpoint is configured, recalls, remembers what it injects now, and writes one
telemetry line saying which path served it (``warm`` over the local socket, ``cold`` in-process),
which hint path (``hints.PATHS``) and why anything fell back.

A hint that loses the race is not wasted: it becomes the session's "previous hint" for the next
prompt. In the warm server the call simply finishes on its thread; a cold hook process is about to
exit, so it hands the prompt to the detached worker (``worker.py hint``), which asks again.
"""

from __future__ import annotations

import time
from typing import Any

from ..eval import telemetry
from ..retrieval import hints, session
from ..retrieval.recall import Recaller
from ..retrieval.recall_modes import is_trivial
from ..team.recall import VaultsRecaller

LATE_MARGIN_S = 0.05  # the reply still has to cross the socket


def store_hint(recaller: Recaller | VaultsRecaller, session_id: str, terms: list[str] | None, error: str | None = None) -> None:
    """Keep a computed hint as the session's previous hint (or record why there is none)."""
    if terms:
        session.update(recaller.vault, session_id, hint={"terms": terms, "at": time.time()}, hint_pending=None)
    elif error:
        session.update(recaller.vault, session_id, hint_pending=None, hint_error=error[:200])


def answer(recaller: Recaller | VaultsRecaller, prompt: str, session_id: str | None = None, *, served_by: str = "cold",
           budget: int = 1200, deadline: float | None = None, fallback: str | None = None,
           extra: dict[str, Any] | None = None, hint_until: float | None = None,
           defer_record: bool = False, reply_by: float | None = None) -> dict[str, Any]:
    """Recall for a prompt; returns {"block", "injected", "telemetry"} and records both.

    ``recaller`` is one vault's, or several vaults' fused (``team/recall.py``): sessions, hints and
    telemetry live in the first vault either way.
    ``deadline`` bounds recall's own work (a monotonic time); ``hint_until`` is when this turn's hint
    must have arrived (default: ``hints.wait_seconds()`` from now). With ``defer_record`` the
    telemetry line is not written yet: the result's ``"record"`` writes it. A cold hook process
    calls that after it has printed its block, because the line keeps the prompt redacted and the
    redactor's ~120 rules take ~0.15 s to compile in a fresh process (the warm server has them).
    ``reply_by`` (a ``time.time()``) is when the asking hook stops waiting: a block ready later is
    not recorded as shown, since the agent never got it."""
    t0 = time.perf_counter()
    record = session.load(recaller.vault, session_id) if session_id else {"injected": []}
    seen = [e["path"] for e in record["injected"] if isinstance(e, dict) and "path" in e]
    previous = record.get("hint", {}).get("terms") if isinstance(record.get("hint"), dict) else None
    race = None
    if isinstance(prompt, str) and not is_trivial(prompt):
        wait = None if hint_until is None else max(0.0, hint_until - time.monotonic())
        race = hints.start(prompt, previous if isinstance(previous, list) else None, wait=wait)
    result = recaller.recall(prompt, exclude=seen, budget=budget, deadline=deadline, hint=race)
    injected = [e.path for e in result.block.included] if result.block else []
    late = reply_by is not None and time.time() > reply_by - LATE_MARGIN_S
    if session_id and injected and not late:
        now = time.time()
        session.update(recaller.vault, session_id, injected=[
            {"path": e.path, "title": e.title, "description": e.description, "at": now, "mode": result.mode}
            for e in result.block.included])
    if session_id and race is not None and race.call is not None:
        _keep_hint_for_next_prompt(recaller, session_id, prompt, race, served_by)
    event = {"event": "recall", "served_by": served_by, "session": session_id,
             "latency_ms": round((time.perf_counter() - t0) * 1000, 2),
             **result.telemetry(count_tokens=not defer_record), **(extra or {})}
    event["hint_path"] = (result.hint or {}).get("path") or (
        "not-asked" if hints.configured() is not None else hints.NO_LLM)  # not-asked: a trivial prompt
    if late:
        event["late"] = True  # the hook had given up: recorded, but not as shown to the session
    if fallback:
        event["fallback"] = fallback + (f"; {event['fallback']}" if event.get("fallback") else "")

    def record() -> None:
        if event.get("tokens") is None:
            event["tokens"] = result.block.tokens if result.block else 0
        event.update(telemetry.prompt_fields(recaller.vault, prompt, result.text))
        telemetry.record(recaller.vault, event)

    if defer_record:
        return {"block": result.text, "injected": injected, "telemetry": event, "record": record}
    record()
    return {"block": result.text, "injected": injected, "telemetry": event}


def _keep_hint_for_next_prompt(recaller: Recaller | VaultsRecaller, session_id: str, prompt: str, race: hints.HintRace,
                               served_by: str) -> None:
    call = race.call
    assert call is not None

    def done(terms: list[str] | None, error: str | None) -> None:
        store_hint(recaller, session_id, terms, error)

    if served_by == "warm" and call.set_on_done(done):
        return  # the server lives on: the call finishes on its thread and stores its terms
    if call.done:
        store_hint(recaller, session_id, call.terms, call.error)
        return
    # A cold process exits with the hook: the detached worker asks again and stores the hint.
    from ..vault.redact import redact
    from .worker import spawn

    call.set_on_done(None)
    session.update(recaller.vault, session_id, hint_pending={"prompt": redact(prompt)[:hints.PROMPT_CHARS],
                                                             "at": time.time()})
    spawn(recaller.vault, "hint", "--session", session_id)
