"""Same-turn hints: a small local model says what to look for, raced against a hard deadline.

The seed's measurement: a local model asked only for a hint answers in about a second, the same
model asked for a structured plan in about four; what the model is asked to write sets the
latency. So the call asks for a few search terms (JSON ``{"terms": [...]}``, at most
``MAX_TOKENS`` tokens), never a plan. Recall answers from its synchronous ranking first, then waits
for the hint until a hard deadline: if the hint wins, its terms are searched and what they find
joins the ranking; if it loses (or fails), the hint computed after the previous prompt of the
same session is used instead, kept in the session record (``session.py``). The prompt is never
held past the hook's deadline. Which way each prompt was served is recorded in telemetry:

* ``no-llm`` — no endpoint configured (``MEMORY_HUB_LLM_URL``);
* ``hint-won`` — this prompt's hint came back in time;
* ``previous-hint`` — it did not (late or failed); the session's previous hint was used;
* ``hint-timeout`` — it was late and the session had no previous hint: synchronous ranking only;
* ``sync-only`` — the endpoint answered with an error or something that is not a list of terms,
  and there was no previous hint: synchronous ranking only (the error is recorded).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..services.llm import LLMConfig, LLMError, chat_json, configured

__all__ = ["LLMError", "configured", "HintCall", "HintRace", "ask", "parse_terms", "start", "wait_seconds"]

WAIT_ENV = "MEMORY_HUB_HINT_DEADLINE"
DEFAULT_WAIT = 1.0  # seconds recall waits for a same-turn hint after its own ranking is ready
MAX_TOKENS = 48
MAX_TERMS = 5
MAX_TERM_CHARS = 40
PROMPT_CHARS = 2000

NO_LLM, WON, PREVIOUS, TIMEOUT, SYNC_ONLY = "no-llm", "hint-won", "previous-hint", "hint-timeout", "sync-only"
PATHS = (NO_LLM, WON, PREVIOUS, TIMEOUT, SYNC_ONLY)

SYSTEM = (
    "You help a search engine over a person's Markdown notes (English and Japanese). Given the user's "
    "message, reply with JSON only, exactly {\"terms\": [...]}: up to 5 short search terms (single words "
    "or two-word phrases) that a note answering the message would contain. Prefer specific nouns and "
    "names; add a Japanese or English equivalent when the notes may use the other language. No "
    "sentences, no explanations, no plan."
)

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")


def wait_seconds() -> float:
    """How long recall waits for a same-turn hint (``MEMORY_HUB_HINT_DEADLINE``, seconds)."""
    try:
        return max(0.0, float(os.environ.get(WAIT_ENV, DEFAULT_WAIT)))
    except ValueError:
        return DEFAULT_WAIT


def parse_terms(reply: Any) -> list[str]:
    """The search terms in a model's JSON reply; LLMError when there are none worth searching.

    Accepts ``{"terms": [...]}`` (also ``keywords``/``queries``) or a bare list. Each term becomes one
    clean line of at most ``MAX_TERM_CHARS`` characters; at most ``MAX_TERMS`` are kept.
    """
    items = reply
    if isinstance(reply, dict):
        items = next((reply[k] for k in ("terms", "keywords", "queries", "search_terms") if k in reply), None)
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list):
        raise LLMError(f"hint reply has no list of terms: {str(reply)[:120]!r}")
    terms: list[str] = []
    for item in items:
        if not isinstance(item, str):
            continue
        term = re.sub(r"\s+", " ", _CONTROL.sub(" ", item)).strip(" \"'`.,;:")
        if not term or len(term) > MAX_TERM_CHARS or term.lower() in (t.lower() for t in terms):
            continue
        terms.append(term)
        if len(terms) >= MAX_TERMS:
            break
    if not terms:
        raise LLMError(f"hint reply has no usable terms: {str(reply)[:120]!r}")
    return terms


def ask(prompt: str, config: LLMConfig | None = None, timeout: float | None = None) -> list[str]:
    """One hint call: the prompt in, a few search terms out (raises LLMError)."""
    reply = chat_json(SYSTEM, prompt[:PROMPT_CHARS], config, max_tokens=MAX_TOKENS, timeout=timeout)
    return parse_terms(reply)


class HintCall:
    """A hint request in flight on a daemon thread; ``on_done(terms, error)`` runs when it ends."""

    def __init__(self, prompt: str, config: LLMConfig,
                 on_done: Callable[[list[str] | None, str | None], None] | None = None) -> None:
        self.terms: list[str] | None = None
        self.error: str | None = None
        self.started = time.monotonic()
        self.elapsed: float | None = None
        self._on_done = on_done
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, args=(prompt, config), name="memory-hub-hint",
                                        daemon=True)
        self._thread.start()

    def _run(self, prompt: str, config: LLMConfig) -> None:
        try:
            self.terms = ask(prompt, config)
        except LLMError as exc:
            self.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - a hint is optional; its failure is recorded, never raised
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.elapsed = time.monotonic() - self.started
            self._done.set()
            with self._lock:
                callback = self._on_done
            if callback is not None:
                try:
                    callback(self.terms, self.error)
                except Exception:  # noqa: BLE001 - storing a hint for later is best effort
                    pass

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, until: float) -> bool:
        """Wait until the call ends or ``until`` (a ``time.monotonic()`` value); True if it ended."""
        return self._done.wait(max(0.0, until - time.monotonic()))

    def set_on_done(self, callback: Callable[[list[str] | None, str | None], None] | None) -> bool:
        """Replace the completion callback; False when the call already ended (call it yourself)."""
        with self._lock:
            self._on_done = callback
            return not self._done.is_set()


@dataclass
class HintRace:
    """What recall needs to decide a prompt's hint: this turn's call, its deadline, the previous hint."""

    call: HintCall | None  # None: no endpoint configured
    until: float = 0.0  # monotonic deadline for this turn's hint
    previous: list[str] = field(default_factory=list)  # the session's hint from its previous prompt

    def resolve(self) -> tuple[list[str], str, dict[str, Any]]:
        """Wait (at most until ``until``) and return (terms to search, path, telemetry)."""
        if self.call is None:
            return [], NO_LLM, {"path": NO_LLM}
        ended = self.call.wait(self.until)
        info: dict[str, Any] = {"waited_ms": round((time.monotonic() - self.call.started) * 1000, 1)}
        if ended and self.call.terms:
            return self.call.terms, WON, {**info, "path": WON, "terms": self.call.terms}
        if ended:
            info["error"] = self.call.error
        if self.previous:
            return self.previous, PREVIOUS, {**info, "path": PREVIOUS, "terms": self.previous}
        path = SYNC_ONLY if ended else TIMEOUT
        return [], path, {**info, "path": path}


def start(prompt: str, previous: list[str] | None = None, wait: float | None = None,
          not_after: float | None = None,
          on_done: Callable[[list[str] | None, str | None], None] | None = None) -> HintRace:
    """Start this turn's hint call (when an endpoint is configured) and set its deadline.

    The deadline is ``wait`` seconds from now (default ``wait_seconds()``), never later than
    ``not_after`` (the hook's own deadline, as a monotonic time).
    """
    config = configured()
    if config is None:
        return HintRace(None, 0.0, list(previous or []))
    until = time.monotonic() + (wait_seconds() if wait is None else wait)
    if not_after is not None:
        until = min(until, not_after)
    return HintRace(HintCall(prompt, config, on_done), until, list(previous or []))
