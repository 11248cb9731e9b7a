"""Minimal MCP clients for the benchmarks: JSON-RPC over a child's stdio, and streamable HTTP.

Deliberately thin (the standard library and httpx), so what a benchmark times is the server and
the transport, not a client framework: the same client drives Memory Hub and the peers
(``../shared/peers/mcp-bench.py`` does the same for qmd and basic-memory).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from typing import Any

PROTOCOL = "2025-06-18"
CLIENT_INFO = {"name": "memory-hub-bench", "version": "0"}


class RpcError(RuntimeError):
    pass


class StdioClient:
    """Spawn ``cmd`` and speak newline-delimited JSON-RPC on its stdin/stdout."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, stderr: Any = subprocess.DEVNULL,
                 cwd: str | None = None) -> None:
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env,
                                     bufsize=0, cwd=cwd)
        self._buf = b""
        self._next = 1

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 600.0) -> Any:
        rid = self._next
        self._next += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        while True:
            while b"\n" in self._buf:
                line, self._buf = self._buf.split(b"\n", 1)
                if not line.strip():
                    continue
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue  # not protocol (a peer printing to stdout)
                if msg.get("id") == rid and ("result" in msg or "error" in msg):
                    if "error" in msg:
                        raise RpcError(f"{method}: {msg['error']}")
                    return msg["result"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(method)
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    raise RpcError(f"server exited (rc={self.proc.poll()})")
                self._buf += chunk

    def handshake(self) -> list[dict[str, Any]]:
        """initialize + initialized + tools/list; returns the tools."""
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": CLIENT_INFO})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self.request("tools/list", {}).get("tools", [])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=20)
        except Exception:  # noqa: BLE001
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                self.proc.kill()


class HttpClient:
    """Streamable HTTP: POST JSON-RPC to ``url`` (answers may come as JSON or as one SSE event)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        import httpx

        self.url = url
        self._http = httpx.Client(timeout=600.0, headers={"Accept": "application/json, text/event-stream",
                                                         "Content-Type": "application/json", **(headers or {})})
        self._next = 1
        self._session: str | None = None

    def _post(self, msg: dict[str, Any]) -> Any:
        headers = {"mcp-protocol-version": PROTOCOL}
        if self._session:
            headers["mcp-session-id"] = self._session
        r = self._http.post(self.url, content=json.dumps(msg), headers=headers)
        r.raise_for_status()
        self._session = r.headers.get("mcp-session-id", self._session)
        if "id" not in msg or r.status_code == 202:
            return None
        body = r.text
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith("data:"):
                    data = json.loads(line[5:])
                    if data.get("id") == msg["id"]:
                        body = data
                        break
            else:
                raise RpcError(f"no answer to {msg['method']} in the event stream")
        else:
            body = json.loads(body)
        if "error" in body:
            raise RpcError(f"{msg['method']}: {body['error']}")
        return body["result"]

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        rid = self._next
        self._next += 1
        return self._post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})

    def handshake(self) -> list[dict[str, Any]]:
        self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": CLIENT_INFO})
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self.request("tools/list", {}).get("tools", [])

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def close(self) -> None:
        self._http.close()


def structured(result: dict[str, Any]) -> dict[str, Any]:
    """A tools/call result's structured content (or its JSON text content)."""
    data = result.get("structuredContent")
    if isinstance(data, dict):
        return data.get("result", data) if set(data) == {"result"} else data
    for part in result.get("content", []):
        try:
            return json.loads(part.get("text", ""))
        except (ValueError, AttributeError):
            continue
    return {}


def rss_mb(pid: int) -> float:
    """Resident memory of a process (Linux)."""
    return memory_split(pid).get("rss_mb", 0.0)


def memory_split(pid: int) -> dict[str, float]:
    """A process's resident memory split as the kernel counts it (Linux): ``anon_mb`` (heap: what
    the process holds), ``file_mb`` (mapped files: libraries, index files read through mmap; the
    kernel can drop them), and its thread count (each thread may hold an allocator arena)."""
    keys = {"VmRSS:": "rss_mb", "RssAnon:": "anon_mb", "RssFile:": "file_mb", "Threads:": "threads"}
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name = line.split(maxsplit=1)[0] if line.strip() else ""
            if name in keys:
                value = int(line.split()[1])
                out[keys[name]] = value if name == "Threads:" else round(value / 1024, 1)
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
