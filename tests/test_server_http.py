"""`memory-hub serve` over streamable HTTP and SSE on loopback, with a real client; the HTTP guard."""

from __future__ import annotations

import asyncio
import os
import resource
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
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "init"]):  # writes commit
        subprocess.run(["git", *args], cwd=v, check=True, capture_output=True)
    sync(v)
    return v


@contextmanager
def server(vault: Path, transport: str, host: str = "127.0.0.1", token: str | None = None,
           extra: list[str] | None = None, env: dict[str, str] | None = None,
           fd_limit: int | None = None) -> Iterator[tuple[int, subprocess.Popen]]:
    port = free_port()
    environ = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"} | (env or {})
    if token:
        environ["MEMORY_HUB_TOKEN"] = token

    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    proc = subprocess.Popen(
        [MEMORY_HUB, "--vault", str(vault), "serve", "--transport", transport, "--host", host,
         "--port", str(port), "--no-warm", *(extra or [])],
        env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=limit_fds if fd_limit else None,
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
        stop(proc)


def stop(proc: subprocess.Popen) -> None:
    """Terminate a server process, and kill it if it has not left within 10 s."""
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
        out["update"] = (await client.call_tool("update_note", {
            "path": out["capture"]["path"], "text": "Amended over HTTP.",
            "expected_hash": out["capture"]["hash"]})).structured_content
        stale = await client.call_tool("update_note", {"path": out["capture"]["path"], "text": "again",
                                                       "expected_hash": out["capture"]["hash"]}, raise_on_error=False)
        out["stale"] = (stale.is_error, stale.content[0].text)
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
    assert out["update"]["commit"] and "Amended over HTTP." in (vault / out["capture"]["path"]).read_text()
    assert out["stale"][0] and "changed since it was read" in out["stale"][1] and "\n" not in out["stale"][1]
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


# -- issue 11: strict headers, timeouts, caps, quiet back-pressure -------------------------------

def _raw(port: int, data: bytes, wait: float = 8.0) -> tuple[bytes, float]:
    """Send ``data`` on a fresh connection; what came back and how long until the server closed it
    (``wait`` when it never did)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(wait)
        if data:
            s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except TimeoutError:
            return got, wait
    return got, time.monotonic() - started


def test_host_and_origin_are_parsed_strictly(vault: Path) -> None:
    with server(vault, "http") as (port, _):
        base = f"http://127.0.0.1:{port}"

        def status(headers: dict[str, str]) -> int:
            return httpx.get(f"{base}/health", headers=headers).status_code

        userinfo = status({"Host": f"localhost:{port}@evil.com"})
        listed = status({"Host": f"localhost:{port}, evil.com"})
        pair = status({"Host": "a, b"})
        spaced = status({"Host": "localhost evil.com"})
        bad_port = status({"Host": "localhost:99999"})
        origin_userinfo = status({"Origin": f"http://localhost:{port}@evil.com"})
        ipv6 = status({"Host": f"[::1]:{port}"})
        twice, _ = _raw(port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: evil.com\r\n"
                              "Connection: close\r\n\r\n".encode())
        fine = status({"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
    assert userinfo == listed == pair == spaced == bad_port == 400
    assert origin_userinfo in (400, 403)
    assert twice.startswith(b"HTTP/1.1 400")
    assert ipv6 == 200 and fine == 200


def test_idle_and_partial_connections_time_out(vault: Path) -> None:
    env = {"MEMORY_HUB_HTTP_READ_TIMEOUT": "1", "MEMORY_HUB_HTTP_IDLE_TIMEOUT": "1"}
    with server(vault, "http", env=env) as (port, _):
        _, silent = _raw(port, b"")
        _, partial_head = _raw(port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())
        _, partial_body = _raw(port, f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                                     "Content-Length: 500\r\n\r\n{".encode())
        answered, kept_alive = _raw(port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        health = httpx.get(f"http://127.0.0.1:{port}/health").json()
    # Each was closed by the server (the wait is 8 s; the limits are 1 s).
    assert silent < 6 and partial_head < 6 and partial_body < 6, (silent, partial_head, partial_body)
    assert answered.startswith(b"HTTP/1.1 200") and kept_alive < 6
    assert health["http"]["timed_out_connections"] >= 3


def test_a_low_fd_limit_and_idle_connections_never_make_it_unreachable(vault: Path) -> None:
    env = {"MEMORY_HUB_HTTP_READ_TIMEOUT": "2"}
    idle: list[socket.socket] = []
    with server(vault, "http", env=env, fd_limit=256) as (port, proc):
        try:
            for _ in range(300):  # more than the process has descriptors for
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            deadline = time.monotonic() + 20
            while True:  # the idle ones are closed by the server after the read timeout
                try:
                    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=3)
                    if health.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "server unreachable"
                time.sleep(0.5)
            again = httpx.get(f"http://127.0.0.1:{port}/health", timeout=3)
        finally:
            for s in idle:
                s.close()
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    info = health.json()["http"]
    assert again.status_code == 200
    assert info["max_connections"] < 256 and info["refused_connections"] + info["timed_out_connections"] >= 100
    assert "Traceback" not in err and len(err.splitlines()) < 40, err[-3000:]


def test_abandoned_sessions_expire_and_are_capped(vault: Path) -> None:
    env = {"MEMORY_HUB_HTTP_MAX_SESSIONS": "5", "MEMORY_HUB_HTTP_SESSION_TTL": "2"}
    headers = {"Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    with server(vault, "http", env=env) as (port, _):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client() as client:  # twelve sessions opened and never closed
            ids = [client.post(f"{base}/mcp", json=init, headers=headers).headers["mcp-session-id"] for _ in range(12)]

            def use(session: str) -> int:
                return client.post(f"{base}/mcp", json=listing, headers={
                    **headers, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}).status_code

            live = httpx.get(f"{base}/health").json()["http"]
            oldest, newest = use(ids[0]), use(ids[-1])

            async def real_client() -> int:
                async with Client(f"{base}/mcp") as c:
                    return len(await c.list_tools())

            tools = asyncio.run(real_client())
            time.sleep(3.5)  # longer than the TTL, with no request
            expired = use(ids[-1])
            after = httpx.get(f"{base}/health").json()["http"]
    assert live["sessions"] <= 5 and live["evicted_sessions"] >= 7
    assert oldest == 404 and newest == 200 and tools == 10  # every tool, the write tools too
    assert expired == 404 and after["sessions"] == 0


def _post(client: httpx.Client, url: str, msg: dict, session: str | None = None,
          accept: str = "application/json, text/event-stream") -> httpx.Response:
    headers = {"Accept": accept, "mcp-protocol-version": "2025-06-18"}
    if session:
        headers["mcp-session-id"] = session
    return client.post(url, json=msg, headers=headers)


def _answers(port: int) -> dict:
    """The same read-only calls over one raw session (and a real client), plus the edges that must
    still reach FastMCP: an unknown session, a write tool, a call with bad arguments."""
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    calls = [("search", {"query": "TLS certificate renewal", "k": 3}), ("search", {"query": "認証", "mode": "lexical"}),
             ("recall", {"prompt": "TLS 証明書の更新"}), ("read_note", {"path": "home.md", "max_lines": 3}),
             ("related", {"path": "home.md", "hops": 2, "limit": 2}), ("search", {"query": "x", "k": 0}),
             ("read_note", {"path": "../secret.md"}), ("search", {"query": "x", "bogus": 1})]
    out: dict = {}
    with httpx.Client() as client:
        session = _post(client, url, init).headers["mcp-session-id"]
        _post(client, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        for i, (name, args) in enumerate(calls, start=10):
            r = _post(client, url, {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                    "params": {"name": name, "arguments": args}}, session)
            assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
            assert r.headers["mcp-session-id"] == session
            body = r.json()
            result = body["result"]
            assert body["id"] == i
            data = result.get("structuredContent") or {"text": result["content"][0]["text"]}
            data.pop("timings_ms", None)
            data.pop("usage", None)  # read_note counts each read: the second server sees one more
            # the freshness signal is the vault's state at that moment (the first server's usage log
            # may still be pending in the second's watcher), not the path that answered: keep its keys
            # (search and related carry it under "index", other tools at the top)
            for holder in (data, data.get("index") if isinstance(data.get("index"), dict) else {}):
                holder.pop("stale", None)
                for key in ("pending_changes", "models_ready"):
                    if key in holder:
                        holder[key] = "present"
            out[f"{name}-{i}"] = (bool(result.get("isError")), data)
        out["unknown_session"] = _post(client, url, {"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "x"}}}, "not-a-session").status_code
        out["no_json_accepted"] = _post(client, url, {"jsonrpc": "2.0", "id": 91, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "x"}}}, session, accept="text/event-stream").status_code
        # hostile bodies on a live session: whatever FastMCP answers, never a 500 from the direct path
        out["nested_json"] = client.post(url, content=b"[" * 100_000, headers={
            "Accept": "application/json, text/event-stream", "content-type": "application/json",
            "mcp-protocol-version": "2025-06-18", "mcp-session-id": session}).status_code
        out["name_not_a_string"] = _post(client, url, {"jsonrpc": "2.0", "id": 93, "method": "tools/call", "params": {
            "name": ["search"], "arguments": {"query": "x"}}}, session).status_code
        out["deleted"] = client.delete(url, headers={"mcp-session-id": session,
                                                     "mcp-protocol-version": "2025-06-18"}).status_code
        out["after_delete"] = _post(client, url, {"jsonrpc": "2.0", "id": 92, "method": "tools/call", "params": {
            "name": "search", "arguments": {"query": "x"}}}, session).status_code
    out["direct_calls"] = httpx.get(f"http://127.0.0.1:{port}/health").json()["http"]["direct_calls"]
    return out


def test_read_only_calls_answered_directly_as_fastmcp_answers_them(vault: Path) -> None:
    """direct_http.DirectCalls answers read-only tools/call itself: the same answers, errors and
    headers as FastMCP gives with it turned off, and everything else still reaches FastMCP."""
    with server(vault, "http", env={"MEMORY_HUB_HTTP_DIRECT": "0"}) as (port, _):
        through_fastmcp = _answers(port)
    with server(vault, "http") as (port, _):
        direct = _answers(port)

        async def real_client() -> tuple:
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                found = (await c.call_tool("search", {"query": "TLS certificate renewal", "k": 3})).structured_content
                wrote = (await c.call_tool("capture", {"text": "direct path probe: a write goes through FastMCP"})
                         ).structured_content
                return found, wrote

        found, wrote = asyncio.run(real_client())
        after_client = httpx.get(f"http://127.0.0.1:{port}/health").json()["http"]["direct_calls"]
    assert through_fastmcp.pop("direct_calls") == 0
    calls = direct.pop("direct_calls")
    assert calls == 8  # every read-only call above, none of the edges
    assert direct == through_fastmcp
    assert direct["search-15"][0] and "k" in direct["search-15"][1]["text"]  # bad arguments: one line, as FastMCP
    assert direct["unknown_session"] == 404 and direct["no_json_accepted"] == 406 and direct["after_delete"] == 404
    assert direct["nested_json"] < 500 and direct["name_not_a_string"] < 500
    assert found["results"] and wrote["path"] and (vault / wrote["path"]).is_file()
    # fastmcp 4's client speaks the sessionless 2026 revision: the SDK's own path answers it whole
    assert after_client == calls


def test_a_session_idle_past_its_ttl_is_gone_for_direct_calls_too(vault: Path) -> None:
    """direct_http holds the SDK's idle countdown while it answers and restarts it afterwards. So a
    session kept busy only by direct calls stays alive past the TTL, and once it is left idle longer
    than the TTL it expires: a direct call with its id then gets the protocol's 404 (from the SDK),
    and is not answered directly."""
    ttl = 2.0
    url_of = "http://127.0.0.1:{}/mcp".format
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}

    def call(client: httpx.Client, url: str, session: str, rid: int) -> httpx.Response:
        return _post(client, url, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                   "params": {"name": "search", "arguments": {"query": "TLS", "k": 1}}}, session)

    with server(vault, "http", env={"MEMORY_HUB_HTTP_SESSION_TTL": str(ttl)}) as (port, _):
        url, health = url_of(port), f"http://127.0.0.1:{port}/health"
        with httpx.Client() as client:
            session = _post(client, url, init).headers["mcp-session-id"]
            _post(client, url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            before = httpx.get(health).json()["http"]["direct_calls"]
            busy = []
            start = time.monotonic()
            rid = 10
            while time.monotonic() - start < 2.5 * ttl:  # only direct calls, each well inside the TTL
                busy.append(call(client, url, session, rid).status_code)
                rid += 1
                time.sleep(ttl / 4)
            answered = httpx.get(health).json()["http"]["direct_calls"] - before
            time.sleep(ttl + 1.5)  # now idle for longer than the TTL
            gone = call(client, url, session, rid)
            after = httpx.get(health).json()["http"]
    assert busy and set(busy) == {200}, busy  # kept alive by direct calls alone
    assert answered == len(busy)  # and they were answered directly
    assert gone.status_code == 404, (gone.status_code, gone.text)
    assert after["direct_calls"] - before == len(busy)  # the expired session's call was not answered directly
    assert after["sessions"] == 0


def test_the_direct_path_and_the_scope_gate_class_every_tool_alike(tmp_path: Path) -> None:
    """A read token reaches a tool through direct_http only when app.ScopeGate would let it: both must
    use tokens.tool_writes, for every tool FastMCP registers (a tool without annotations writes)."""
    from memory_hub.server.app import build_server
    from memory_hub.server.direct_http import DirectCalls
    from memory_hub.server.state import ServerState
    from memory_hub.server.stdio import load_tool_list
    from memory_hub.server.tokens import tool_writes

    state = ServerState.open(tmp_path)
    try:
        mcp = build_server(state)

        async def registered() -> dict[str, bool]:
            return {t["name"]: tool_writes(await mcp.get_tool(t["name"])) for t in load_tool_list()}

        writes = asyncio.run(registered())
    finally:
        state.store.close()
    direct = DirectCalls(app=None, state=None, limits=None)  # type: ignore[arg-type]
    assert direct.read_only == {name for name, w in writes.items() if not w}
    assert {"search", "recall", "read_note", "related", "status"} == direct.read_only
    assert writes["capture"] and writes["delete_note"]
    assert tool_writes({"name": "x"}) and tool_writes({"name": "x", "annotations": {"readOnlyHint": False}})
    assert not tool_writes({"name": "x", "annotations": {"readOnlyHint": True}})
