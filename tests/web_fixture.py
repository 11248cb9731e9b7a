"""A real `memory-hub serve --transport http` over a starter vault with a hostile note and real
telemetry (a recall through the Claude Code hook, a read recorded in the usage log, an eval run),
shared by the web page tests (test_web.py) and the browser test (test_web_browser.py)."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
PROMPT = "how do we rotate the TLS certificate on the legacy nginx VMs? token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
SESSION = "web-session-1"
HOSTILE = """---
title: Hostile <script>window.__pwned = 'title'</script>
source: javascript:window.__pwned='property'
related: "[[tls-certificate-rotation]]"
---
# Hostile note

<script>window.__pwned = 'script'</script>
<img src=x onerror="window.__pwned = 'onerror'">
<a href="javascript:window.__pwned='raw-a'">raw anchor</a>
[click me](javascript:window.__pwned='md-link') and [data](data:text/html,<script>alert(1)</script>)
[spaced](  jav&#x09;ascript:window.__pwned='entity')
![remote pixel](https://tracker.invalid/pixel.png)
<iframe src="https://example.invalid/"></iframe>
<svg onload="window.__pwned='svg'"></svg>

It links to [[tls-certificate-rotation|the TLS runbook]] and to [[no-such-note]].
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_vault(root: Path) -> Path:
    """The starter vault plus the hostile note, indexed, with one recall, one read and one eval run."""
    from memory_hub.hooks import claude_code
    from memory_hub.vault.usage import record_read

    vault = root / "vault"
    shutil.copytree(template_dir(), vault)
    (vault / "hostile.md").write_text(HOSTILE, encoding="utf-8")
    sync(vault)
    event = {"hook_event_name": "UserPromptSubmit", "session_id": SESSION, "prompt": PROMPT, "cwd": str(vault)}
    assert claude_code.run("claude-code", str(vault), io.StringIO(json.dumps(event)), io.StringIO()) == 0
    record_read(vault, "runbooks/tls-certificate-rotation.md")
    proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "eval", str(vault / "memory-hub-eval.yaml"),
                           "--mode", "lexical"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return vault


@contextmanager
def serve(vault: Path, token: str | None = None) -> Iterator[str]:
    """The server on a free loopback port; yields its base URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"}
    if token:
        env["MEMORY_HUB_TOKEN"] = token
    proc = subprocess.Popen([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http", "--host",
                             "127.0.0.1", "--port", str(port), "--no-warm"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read()}")
            try:
                httpx.get(f"{base}/health", headers=headers, timeout=0.5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
