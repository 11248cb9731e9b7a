"""A small client for a local OpenAI-compatible chat endpoint, asked for JSON at temperature 0.

Configured by ``MEMORY_HUB_LLM_URL`` (a base such as ``http://127.0.0.1:8080/v1`` or the full
``…/chat/completions`` URL), ``MEMORY_HUB_LLM_MODEL`` and optionally ``MEMORY_HUB_LLM_KEY`` and
``MEMORY_HUB_LLM_TIMEOUT`` (seconds). Without a URL every caller uses its deterministic path, so
nothing here is ever required. Only loopback/LAN endpoints are intended: notes are private.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from typing import Any


class LLMError(RuntimeError):
    """The endpoint failed or answered with something that is not the JSON asked for."""


@dataclass(frozen=True)
class LLMConfig:
    url: str
    model: str
    key: str | None = None
    timeout: float = 60.0

    @property
    def endpoint(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/chat/completions") else url + "/chat/completions"


def configured() -> LLMConfig | None:
    """The endpoint from the environment, or None when no URL is set."""
    url = os.environ.get("MEMORY_HUB_LLM_URL", "").strip()
    if not url:
        return None
    return LLMConfig(url=url, model=os.environ.get("MEMORY_HUB_LLM_MODEL", "local").strip() or "local",
                     key=os.environ.get("MEMORY_HUB_LLM_KEY") or None,
                     timeout=float(os.environ.get("MEMORY_HUB_LLM_TIMEOUT", "60")))


_client = None
_client_lock = threading.Lock()


def _http():  # noqa: ANN202 - an httpx.Client, shared: a new client per call costs tens of ms (SSL setup)
    global _client
    if _client is None:
        import httpx

        with _client_lock:
            if _client is None:
                _client = httpx.Client()
    return _client


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_json_reply(content: str) -> Any:
    """The JSON in a model's reply, tolerating a code fence or prose around one object."""
    text = _FENCE.sub("", content.strip())
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        start, end = text.find("{"), text.rfind("}")
        if start >= 0 and end > start:
            try:
                return json.loads(text[start:end + 1])
            except json.JSONDecodeError:
                pass
    raise LLMError(f"model reply is not JSON: {content[:200]!r}")


def chat_json(system: str, user: str, config: LLMConfig | None = None, *, max_tokens: int | None = None,
              timeout: float | None = None) -> Any:
    """One chat completion (temperature 0, JSON mode) and its parsed JSON content.

    ``max_tokens`` caps the reply (what a model is asked to write is what its latency is made of);
    ``timeout`` overrides the configured one for a caller with a hard deadline."""
    import httpx

    config = config or configured()
    if config is None:
        raise LLMError("no LLM endpoint configured (set MEMORY_HUB_LLM_URL)")
    payload: dict[str, Any] = {
        "model": config.model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    }
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    headers = {"Authorization": f"Bearer {config.key}"} if config.key else {}
    try:
        resp = _http().post(config.endpoint, json=payload, headers=headers,
                          timeout=config.timeout if timeout is None else timeout)
        resp.raise_for_status()
        data = resp.json()
        content = data["choices"][0]["message"]["content"]
    except httpx.HTTPStatusError as exc:
        raise LLMError(f"LLM endpoint answered HTTP {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        raise LLMError(f"LLM endpoint unreachable: {type(exc).__name__}: {exc}") from None
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMError(f"LLM endpoint sent an unexpected response: {exc}") from None
    if not isinstance(content, str):
        raise LLMError("LLM reply has no text content")
    return parse_json_reply(content)
