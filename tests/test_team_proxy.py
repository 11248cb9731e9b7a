"""The reverse proxies of docs/team.md, really run: nginx and Caddy, each with the configuration the
document shows (read from it here; only ports and certificate paths are replaced), in front of a real
`memory-hub serve --transport http` on loopback, with TLS from a certificate made in the test.

Over the wire through each proxy: a real MCP client over streamable HTTP with a read token (it
searches, does not see `capture`, and is refused if it calls it) and with a write token (its capture
is committed with the token as author); a missing token is refused; a browser signs in to the web
pages with a named token; plain HTTP is redirected to HTTPS. `make proxies` (part of `make test`)
installs Debian's nginx and Caddy when it may; without them these tests skip and say so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_server_http import stop

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
CADDY = shutil.which("caddy")
OPENSSL = shutil.which("openssl")
DOC = Path(__file__).resolve().parent.parent / "docs" / "team.md"
MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
READ, WRITE = "reader-secret-0123456789abcdef", "writer-secret-0123456789abcdef"
HOST = "memory.example.com"
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="openssl not installed (make proxies)")
need_nginx = pytest.mark.skipif(NGINX is None, reason="nginx not installed (make proxies: apt-get install nginx-light)")
need_caddy = pytest.mark.skipif(CADDY is None, reason="caddy not installed (make proxies: apt-get install caddy)")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def documented(lang: str) -> str:
    """The one ```<lang> block of docs/team.md: the configuration a reader copies is the one tested."""
    blocks = re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, f"docs/team.md should hold exactly one {lang} block"
    return blocks[0]


def certificate(tmp: Path) -> tuple[Path, Path]:
    """A throwaway self-signed certificate for the documented name and 127.0.0.1 (so a client can
    verify it: the test trusts exactly this certificate, never skips verification)."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    if not cert.exists():
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={HOST}",
                        "-addext", f"subjectAltName=DNS:{HOST},IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True)
    return cert, key


def nginx_conf(tmp: Path, https: int, http: int, upstream: int) -> Path:
    """The documented block with loopback ports and the throwaway certificate, in a minimal main file."""
    cert, key = certificate(tmp)
    body = documented("nginx")
    body = body.replace("127.0.0.1:8765", f"127.0.0.1:{upstream}")
    body = body.replace("listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;").replace("listen 80;",
                                                                                     f"listen 127.0.0.1:{http};")
    body = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", body)
    body = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", body)
    temp = "".join(f"{k}_temp_path {tmp / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = tmp / "nginx.conf"
    conf.write_text(f"daemon off;\nmaster_process off;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'};\n"
                    f"events {{}}\nhttp {{\naccess_log off;\n{temp}{body}\n}}\n", encoding="utf-8")
    return conf


def caddyfile(tmp: Path, https: int, http: int, upstream: int) -> Path:
    """The documented Caddyfile: loopback ports, the throwaway certificate instead of ACME, and the
    site also answering as 127.0.0.1 (the test has no DNS name for it)."""
    cert, key = certificate(tmp)
    body = documented("caddyfile").replace("127.0.0.1:8765", f"127.0.0.1:{upstream}")
    assert body.startswith(f"{HOST} {{\n"), body
    body = f"{HOST}:{https}, 127.0.0.1:{https} {{\n\ttls {cert} {key}\n" + body[len(f"{HOST} {{\n"):]
    glob = (f"{{\n\tadmin off\n\tskip_install_trust\n\thttp_port {http}\n\thttps_port {https}\n"
            f"\tstorage file_system {tmp / 'caddy-data'}\n}}\n\n")
    path = tmp / "Caddyfile"
    path.write_text(glob + body, encoding="utf-8")
    return path


def _env(tmp: Path) -> dict[str, str]:
    """Caddy's own state in the test's folder, not the user's home."""
    return {**os.environ, "HOME": str(tmp), "XDG_DATA_HOME": str(tmp / "xdg-data"),
            "XDG_CONFIG_HOME": str(tmp / "xdg-config")}


@need_nginx
def test_the_documented_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    conf = nginx_conf(tmp_path, _port(), _port(), _port())
    proc = subprocess.run([NGINX, "-t", "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "syntax is ok" in proc.stderr and "test is successful" in proc.stderr


@need_caddy
def test_the_documented_caddyfile_passes_caddy_validate(tmp_path: Path) -> None:
    path = caddyfile(tmp_path, _port(), _port(), _port())
    proc = subprocess.run([CADDY, "validate", "--config", str(path), "--adapter", "caddyfile"],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "Valid configuration" in proc.stdout + proc.stderr


@need_caddy
def test_the_documented_caddyfile_buffers_request_bodies(tmp_path: Path) -> None:
    """Caddy 2.6 streams a request body to the upstream; a client that half-closed early then lost
    the reply mid-write (8 failures in 50 runs). The documented file reads each body whole first."""
    path = caddyfile(tmp_path, _port(), _port(), _port())
    proc = subprocess.run([CADDY, "adapt", "--config", str(path), "--adapter", "caddyfile"],
                          capture_output=True, text=True, env=_env(tmp_path), timeout=60)
    assert proc.returncode == 0, proc.stderr
    found: list[dict] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("handler") in ("reverse_proxy", "request_body"):
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(proc.stdout))
    proxy = [n for n in found if n["handler"] == "reverse_proxy"]
    body = [n for n in found if n["handler"] == "request_body"]
    assert proxy and all(n.get("buffer_requests") is True for n in proxy), proxy
    assert proxy[0].get("flush_interval") == -1, proxy
    assert body and body[0].get("max_size") == 4 * 1024 * 1024, body


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """One real server with a read and a write token, shared by the nginx and the Caddy test."""
    tmp = tmp_path_factory.mktemp("proxied")
    vault = tmp / "vault"
    shutil.copytree(template_dir(), vault)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "team vault"]):
        subprocess.run(["git", *args], cwd=vault, check=True, capture_output=True)
    sync(vault)
    tokens = tmp / "tokens.toml"
    tokens.write_text("".join(f'[tokens.{n}]\nsha256 = "{hashlib.sha256(s.encode()).hexdigest()}"\nscope = "{sc}"\n'
                              "rate_per_minute = 0\n"
                              for n, s, sc in (("reader", READ, "read"), ("writer", WRITE, "write"))),
                      encoding="utf-8")
    port = _port()
    env = {k: v for k, v in os.environ.items() if k != "MEMORY_HUB_TOKEN"} | {"MEMORY_HUB_TOKENS_FILE": str(tokens)}
    server = subprocess.Popen([MEMORY_HUB, "--vault", str(vault), "serve", "--transport", "http", "--port",
                               str(port), "--no-warm", "--allow-host", HOST],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield port, vault
    finally:
        stop(server)


async def _mcp(url: str, token: str, cert: Path, text: str | None = None) -> dict:
    """A real MCP client over streamable HTTP through the proxy, trusting only the test's certificate."""
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    trust = ssl.create_default_context(cafile=str(cert))
    async with Client(StreamableHttpTransport(url, auth=token, verify=trust)) as client:
        tools = sorted(t.name for t in await client.list_tools())
        found = (await client.call_tool("search", {"query": "TLS certificate rotation", "k": 3})).structured_content
        wrote = await client.call_tool("capture", {"text": text or "a read token tries to write"},
                                       raise_on_error=False)
        return {"tools": tools, "found": found, "wrote": wrote}


def _through(proxy: subprocess.Popen, base: str, cert: Path, upstream_port: int, vault: Path, http: int) -> None:
    with httpx.Client(verify=ssl.create_default_context(cafile=str(cert)), timeout=30) as client:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = client.get(f"{base}/health", headers={"Authorization": f"Bearer {READ}"})
                if r.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proxy.poll() is None, f"the proxy exited: {proxy.stderr.read() if proxy.stderr else ''}"
            assert time.monotonic() < deadline, "no answer through the proxy"
            time.sleep(0.2)
        assert r.json()["ok"]
        assert client.get(f"{base}/health").status_code == 401  # no token: refused behind the proxy too
        # the web pages: a browser signs in with the read token and views a page
        login = client.post(f"{base}/login", data={"token": READ, "next": "/"})
        assert login.status_code == 303, login.text
        assert login.cookies["memory_hub_session"] and READ not in login.cookies["memory_hub_session"]
        page = client.get(f"{base}/", headers={"Accept": "text/html"})  # the client's jar holds the cookie
        assert page.status_code == 200 and "signed in as reader" in page.text
    url = f"{base}/mcp"
    reader = asyncio.run(_mcp(url, READ, cert))
    assert "capture" not in reader["tools"] and "search" in reader["tools"]
    assert reader["found"]["results"]
    assert reader["wrote"].is_error and "read scope" in reader["wrote"].content[0].text
    word = f"zqproxied{http}"
    writer = asyncio.run(_mcp(url, WRITE, cert, text=f"Written through the proxy: {word}."))
    assert "capture" in writer["tools"] and not writer["wrote"].is_error, writer["wrote"]
    written = writer["wrote"].structured_content
    assert word in (vault / written["path"]).read_text(encoding="utf-8")
    author = subprocess.run(["git", "log", "-1", "--format=%an", "--", written["path"]], cwd=vault,
                            capture_output=True, text=True, check=True).stdout.strip()
    assert author == "writer"
    # plain HTTP is sent to HTTPS
    plain = httpx.get(f"http://127.0.0.1:{http}/mcp", headers={"Host": HOST}, timeout=30)
    assert plain.status_code in (301, 308) and plain.headers["location"].startswith(f"https://{HOST}")


@need_nginx
def test_a_real_server_behind_the_documented_nginx(tmp_path: Path, upstream: tuple[int, Path]) -> None:
    port, vault = upstream
    https, http = _port(), _port()
    conf = nginx_conf(tmp_path, https, http, port)
    proxy = subprocess.Popen([NGINX, "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-c", str(conf)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _through(proxy, f"https://127.0.0.1:{https}", tmp_path / "cert.pem", port, vault, http)
    finally:
        stop(proxy)


@need_caddy
def test_a_real_server_behind_the_documented_caddy(tmp_path: Path, upstream: tuple[int, Path]) -> None:
    port, vault = upstream
    https, http = _port(), _port()
    path = caddyfile(tmp_path, https, http, port)
    proxy = subprocess.Popen([CADDY, "run", "--config", str(path), "--adapter", "caddyfile"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        _through(proxy, f"https://127.0.0.1:{https}", tmp_path / "cert.pem", port, vault, http)
    finally:
        stop(proxy)
