"""A real `memory-hub serve --transport http` over a starter vault with a hostile note and real
telemetry (a recall through the hooks' prompt path, a read recorded in the usage log, an eval run),
shared by the web page tests (test_web.py) and the browser test (test_web_browser.py)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from test_server_http import MEMORY_HUB, server

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

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


def build_vault(root: Path) -> Path:
    """The starter vault plus the hostile note, indexed, with one recall, one read and one eval run."""
    from memory_hub.hooks.prompt import answer
    from memory_hub.retrieval.recall import Recaller
    from memory_hub.vault.usage import record_read

    vault = root / "vault"
    shutil.copytree(template_dir(), vault)
    (vault / "hostile.md").write_text(HOSTILE, encoding="utf-8")
    sync(vault)
    # the hook's own recall and telemetry line, without the hook's deadline (a loaded machine would
    # cut it short and leave the block empty)
    shown = answer(Recaller(vault), PROMPT, SESSION, served_by="cold")
    assert "runbooks/tls-certificate-rotation.md" in shown["injected"], shown["telemetry"]
    record_read(vault, "runbooks/tls-certificate-rotation.md")
    proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "eval", str(vault / "memory-hub-eval.yaml"),
                           "--mode", "lexical"], capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    return vault


@contextmanager
def serve(vault: Path, token: str | None = None) -> Iterator[str]:
    """The server on a free loopback port (test_server_http's helper, --no-warm); yields its base URL."""
    with server(vault, "http", token=token) as (port, _proc):
        yield f"http://127.0.0.1:{port}"
