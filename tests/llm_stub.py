"""A tiny OpenAI-compatible chat-completions server on loopback, for tests that drive LLM paths.

The test decides every reply: give ``LLMStub`` a function from the request's JSON payload to the
reply's content string (or a fixed list of contents, served in order). Every request is recorded in
``stub.requests`` so a test can check what was asked (model, temperature, messages).

    with LLMStub(lambda payload: '{"learnings": []}') as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)   # http://127.0.0.1:PORT/v1
        ...
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], str]


class LLMStub:
    def __init__(self, reply: Reply | list[str], status: int = 200) -> None:
        if isinstance(reply, list):
            queue = list(reply)
            self._reply: Reply = lambda _payload: queue.pop(0) if queue else "{}"
        else:
            self._reply = reply
        self.status = status
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    payload = {}
                stub.requests.append({"path": self.path, "payload": payload})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": "not found"})
                    return
                if stub.status != 200:
                    self._send(stub.status, {"error": "stub failure"})
                    return
                content = stub._reply(payload)
                self._send(200, {
                    "id": "stub-1", "object": "chat.completion", "model": payload.get("model", "stub"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                })

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> LLMStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
