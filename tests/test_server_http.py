"""`memory-hub serve` over streamable HTTP and SSE on loopback, with a real client; the HTTP guard."""

from __future__ import annotations

import asyncio
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
import pytest
from fastmcp import Client

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
TOKEN = "test-token-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    v = tmp_path_factory.mktemp("http") / "vault"
    shutil.copytree(template_dir(), v)
    sync(v)
    return v


@contextmanager
def server(vault: Path, transport: str, host: str = "127.0.0.1", token: str | None = None,
           extra: list[str] | None = None) -> Iterator[tuple[int, subprocess.Popen]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"}
    if token:
        env["MEMORY_HUB_TOKEN"] = token
    proc = subprocess.Popen(
        [MEMORY_HUB, "--vault", str(vault), "serve", "--transport", transport, "--host", host,
         "--port", str(port), "--no-warm", *(extra or [])],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited: {proc.stderr.read()}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", headers=headers, timeout=0.5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield port, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _exercise(url: str, auth: str | None = None) -> dict:
    out = {}
    async with Client(url, auth=auth) as client:
        out["tools"] = sorted(t.name for t in await client.list_tools())
        out["search"] = (await client.call_tool("search", {"query": "TLS certificate renewal", "k": 3})).structured_content
        out["recall"] = (await client.call_tool("recall", {"prompt": "TLS 証明書の更新"})).structured_content
        out["read"] = (await client.call_tool("read_note", {"path": "home.md", "max_lines": 3})).structured_content
        out["related"] = (await client.call_tool("related", {"path": "home.md"})).structured_content
        out["related_capped"] = (await client.call_tool("related", {"path": "home.md", "hops": 2, "limit": 2})
                                 ).structured_content
        out["capture"] = (await client.call_tool("capture", {"text": f"HTTP capture probe {url}"})).structured_content
        out["status"] = (await client.call_tool("status", {})).structured_content
        bad = await client.call_tool("read_note", {"path": "../secret.md"}, raise_on_error=False)
        out["bad"] = (bad.is_error, bad.content[0].text)
    return out


@pytest.mark.parametrize("transport,path", [("http", "mcp"), ("sse", "sse")])
def test_every_tool_over_loopback(vault: Path, transport: str, path: str) -> None:
    with server(vault, transport) as (port, proc):
        out = asyncio.run(_exercise(f"http://127.0.0.1:{port}/{path}"))
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
    assert out["tools"] == ["capture", "delete_note", "move_note", "read_note", "recall", "related", "restore_note",
                            "search", "status", "update_note"]
    results = out["search"]["results"]
    assert results and len(results) <= 3
    assert any("tls" in r["path"].lower() or "tls" in r["title"].lower() for r in results)
    assert "<vault-memory>" in out["recall"]["block"]
    assert out["read"]["path"] == "home.md" and out["read"]["to_line"] == 3
    assert out["related"]["related"]
    capped = out["related_capped"]
    assert len(capped["related"]) == 2 and capped["total"] > 2 and "more" in capped
    assert [n["distance"] for n in capped["related"]] == [1, 1]  # nearest first
    assert (vault / out["capture"]["path"]).is_file() and out["capture"]["indexed"]
    assert out["status"]["notes"] >= 30
    assert out["bad"][0] and "leaves the vault" in out["bad"][1]
    assert health["ok"] and health["vault"] == str(vault.resolve())
    # stderr tells a person how to connect.
    _, err = proc.communicate(timeout=10)
    assert f"http://127.0.0.1:{port}/{path}" in err and '"mcpServers"' in err


def test_loopback_rejects_dns_rebinding(vault: Path) -> None:
    with server(vault, "http") as (port, _):
        base = f"http://127.0.0.1:{port}"
        ok = httpx.get(f"{base}/health")
        ok_named = httpx.get(f"{base}/health", headers={"Host": f"localhost:{port}"})
        rebound = httpx.get(f"{base}/health", headers={"Host": f"attacker.example:{port}"})
        cross = httpx.get(f"{base}/health", headers={"Origin": "http://attacker.example"})
        same = httpx.get(f"{base}/health", headers={"Origin": f"http://localhost:{port}"})
        mcp_rebound = httpx.post(f"{base}/mcp", headers={"Host": "attacker.example"}, json={})
        second = subprocess.run([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http",
                                 "--port", str(port), "--no-warm", "--no-hooks-socket"],
                                capture_output=True, text=True, timeout=60)
    assert ok.status_code == 200 and ok_named.status_code == 200 and same.status_code == 200
    assert rebound.status_code == 421 and "attacker.example" in rebound.json()["error"]
    assert cross.status_code == 403
    assert mcp_rebound.status_code == 421
    assert second.returncode == 1 and "already in use" in second.stderr and "Traceback" not in second.stderr


def test_non_loopback_bind_requires_a_token(vault: Path) -> None:
    proc = subprocess.run(
        [MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http", "--host", "0.0.0.0",
         "--port", str(free_port())],
        env={k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"},
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 2
    assert "MEMORY_HUB_TOKEN" in proc.stderr and "Traceback" not in proc.stderr


def test_token_is_checked_when_bound_beyond_loopback(vault: Path) -> None:
    with server(vault, "http", host="0.0.0.0", token=TOKEN, extra=["--allow-host", "memory.lan"]) as (port, _):
        base = f"http://127.0.0.1:{port}"
        missing = httpx.get(f"{base}/health")
        wrong = httpx.get(f"{base}/health", headers={"Authorization": "Bearer nope"})
        right = httpx.get(f"{base}/health", headers={"Authorization": f"Bearer {TOKEN}"})
        lan = httpx.get(f"{base}/health", headers={"Authorization": f"Bearer {TOKEN}", "Host": "memory.lan"})
        foreign = httpx.get(f"{base}/health", headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})
        unauth_mcp = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Accept": "application/json, text/event-stream"})

        async def call() -> list:
            async with Client(f"{base}/mcp", auth=TOKEN) as client:
                result = await client.call_tool("search", {"query": "deploy", "k": 2})
                return result.structured_content["results"]

        results = asyncio.run(call())
    assert missing.status_code == 401 and wrong.status_code == 401
    assert missing.headers.get("www-authenticate") == "Bearer"
    assert right.status_code == 200 and lan.status_code == 200
    assert foreign.status_code == 421
    assert unauth_mcp.status_code == 401
    assert len(results) == 2
