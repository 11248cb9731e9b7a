"""The nginx configuration of docs/team.md: `nginx -t` accepts it, and it proxies a real server over
TLS on loopback (self-signed certificate made here), tokens and scopes intact. Skips without nginx."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from test_server_http import stop

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
pytestmark = pytest.mark.skipif(NGINX is None or shutil.which("openssl") is None,
                                reason="nginx or openssl not installed (apt-get install nginx-light openssl)")
DOC = Path(__file__).resolve().parent.parent / "docs" / "team.md"
MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
READ, WRITE = "reader-secret-0123456789abcdef", "writer-secret-0123456789abcdef"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def documented_config() -> str:
    blocks = re.findall(r"```nginx\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "docs/team.md should hold exactly one nginx block"
    return blocks[0]


def nginx_conf(tmp: Path, https: int, http: int, upstream: int) -> Path:
    """The documented block with loopback ports and a throwaway certificate, in a minimal main file."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=memory.example.com", "-keyout", str(tmp / "key.pem"), "-out", str(tmp / "cert.pem")],
                   check=True, capture_output=True)
    body = documented_config()
    body = body.replace("127.0.0.1:8765", f"127.0.0.1:{upstream}")
    body = body.replace("listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;").replace("listen 80;",
                                                                                     f"listen 127.0.0.1:{http};")
    body = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {tmp / 'cert.pem'};", body)
    body = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {tmp / 'key.pem'};", body)
    temp = "".join(f"{k}_temp_path {tmp / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = tmp / "nginx.conf"
    conf.write_text(f"daemon off;\nmaster_process off;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
                    f"events {{}}\nhttp {{\naccess_log off;\n{temp}{body}\n}}\n", encoding="utf-8")
    return conf


def test_the_documented_config_passes_nginx_t(tmp_path: Path) -> None:
    conf = nginx_conf(tmp_path, _port(), _port(), _port())
    proc = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "syntax is ok" in proc.stderr and "test is successful" in proc.stderr


def _rpc(client: httpx.Client, url: str, token: str, body: dict, session: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
               "Host": "memory.example.com", **({"mcp-session-id": session} if session else {})}
    return client.post(url, headers=headers, json=body)


def _payload(r: httpx.Response) -> dict:
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        data = [ln[5:].strip() for ln in r.text.splitlines() if ln.startswith("data:")]
        return json.loads(data[-1])
    return r.json()


def _tools_through(client: httpx.Client, url: str, token: str) -> list[str]:
    init = _rpc(client, url, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "proxy-test", "version": "0"}}})
    assert init.status_code == 200, init.text
    session = init.headers.get("mcp-session-id")
    _rpc(client, url, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    listed = _rpc(client, url, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session)
    return sorted(t["name"] for t in _payload(listed)["result"]["tools"])


def test_a_real_server_behind_the_documented_proxy(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(template_dir(), vault)
    sync(vault)
    tokens = tmp_path / "tokens.toml"
    tokens.write_text("".join(f'[tokens.{n}]\nsha256 = "{hashlib.sha256(s.encode()).hexdigest()}"\nscope = "{sc}"\n'
                              for n, s, sc in (("reader", READ, "read"), ("writer", WRITE, "write"))),
                      encoding="utf-8")
    upstream, https, http = _port(), _port(), _port()
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"} | {"MEMORY_HUB_TOKENS_FILE": str(tokens)}
    server = subprocess.Popen([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http", "--port",
                               str(upstream), "--no-warm", "--allow-host", "memory.example.com"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    conf = nginx_conf(tmp_path, https, http, upstream)
    proxy = subprocess.Popen([NGINX, "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        base = f"https://127.0.0.1:{https}"
        with httpx.Client(verify=False, timeout=10) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    r = client.get(f"{base}/health", headers={"Host": "memory.example.com",
                                                              "Authorization": f"Bearer {READ}"})
                    if r.status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None and proxy.poll() is None, "server or nginx exited"
                assert time.monotonic() < deadline, "no answer through the proxy"
                time.sleep(0.1)
            assert r.json()["ok"]
            url = f"{base}/mcp"
            assert client.get(f"{base}/health", headers={"Host": "memory.example.com"}).status_code == 401
            assert "capture" not in _tools_through(client, url, READ)
            assert "capture" in _tools_through(client, url, WRITE)
            assert client.get(f"{base}/other", headers={"Host": "memory.example.com"}).status_code == 404
            plain = httpx.get(f"http://127.0.0.1:{http}/mcp", headers={"Host": "memory.example.com"})
            assert plain.status_code == 301 and plain.headers["location"].startswith("https://memory.example.com")
    finally:
        for proc in (proxy, server):
            stop(proc)
