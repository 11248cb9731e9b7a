"""Named tokens with scopes over the wire: a real server process, real MCP clients, a real git vault.

A read token never reaches a tool that writes (not listed, refused when called by name); a write
records its author in the commit; a token over its rate limit gets 429; concurrent writers with
different tokens lose nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastmcp import Client
from mcp.types import ToolAnnotations
from test_server_http import server

from memory_hub.config import template_dir
from memory_hub.index.sync import sync
from memory_hub.server.tokens import Principal, TokensError, parse, tool_writes

SECRETS = {name: f"{name}-secret-0123456789abcdef" for name in ("alice", "bob", "carol", "dave", "reader")}


def _tokens_file(tmp: Path, limited_rate: int = 0) -> Path:
    lines = []
    for name, secret in SECRETS.items():
        scope = "read" if name == "reader" else "write"
        lines += [f"[tokens.{name}]", f'sha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"',
                  f'scope = "{scope}"', "rate_per_minute = 0", ""]
    lines += ["[tokens.slow]", f'sha256 = "{hashlib.sha256(b"slow-secret-0123456789ab").hexdigest()}"',
              'scope = "read"', f"rate_per_minute = {limited_rate or 60}", ""]
    path = tmp / "tokens.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(params=["http"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    vault = tmp_path / "vault"
    shutil.copytree(template_dir(), vault)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=vault, check=True)
    subprocess.run(["git", "add", "-A"], cwd=vault, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=vault, check=True)
    sync(vault)
    transport = request.param
    with server(vault, transport, env={"MEMORY_HUB_TOKENS_FILE": str(_tokens_file(tmp_path))}) as (port, _proc):
        yield f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}", vault


async def _as_reader(url: str) -> dict:
    async with Client(url, auth=SECRETS["reader"]) as client:
        listed = sorted(t.name for t in await client.list_tools())
        found = (await client.call_tool("search", {"query": "TLS certificate", "k": 3})).structured_content
        refused = await client.call_tool("capture", {"text": "a read token tries to write"}, raise_on_error=False)
        return {"tools": listed, "found": found, "refused": (refused.is_error, refused.content[0].text)}


@pytest.mark.parametrize("shared", ["http", "sse"], indirect=True)
def test_a_read_token_never_reaches_a_write_tool(shared) -> None:
    url, vault = shared
    before = subprocess.run(["git", "status", "--porcelain"], cwd=vault, capture_output=True, text=True).stdout
    out = asyncio.run(_as_reader(url))
    assert "capture" not in out["tools"] and "search" in out["tools"]
    assert out["found"]["results"]
    assert out["refused"][0] and "read scope" in out["refused"][1]
    after = subprocess.run(["git", "status", "--porcelain"], cwd=vault, capture_output=True, text=True).stdout
    assert after == before  # nothing was written
    assert not list((vault / "inbox").glob("*read-token*"))
    # a wrong token, and none at all, are refused before MCP is reached
    for headers in ({"Authorization": "Bearer wrong-token-0123456789abcdef"}, {}):
        r = httpx.post(url, headers=headers | {"content-type": "application/json"}, json={})
        assert r.status_code == 401


async def _writer(url: str, name: str, n: int) -> list[str]:
    paths = []
    async with Client(url, auth=SECRETS[name]) as client:
        for i in range(n):
            res = await client.call_tool("capture", {"text": f"{name} remembers item {i}: zq{name}{i}word.",
                                                     "title": f"{name} item {i}"})
            data = res.structured_content
            assert data["git"]["committed"], data
            paths.append(data["path"])
    return paths


async def _readers(url: str, rounds: int) -> int:
    async with Client(url, auth=SECRETS["reader"]) as client:
        hits = 0
        for _ in range(rounds):
            hits += len((await client.call_tool("search", {"query": "remembers item", "k": 5})).structured_content[
                "results"])
        return hits


async def _all_at_once(url: str) -> tuple[dict[str, list[str]], int]:
    names = ["alice", "bob", "carol", "dave"]
    results = await asyncio.gather(*[_writer(url, n, 3) for n in names], _readers(url, 6))
    return dict(zip(names, results[:-1], strict=True)), results[-1]


def test_concurrent_writers_lose_nothing_and_each_commit_names_its_author(shared) -> None:
    url, vault = shared
    written, _hits = asyncio.run(_all_at_once(url))
    for name, paths in written.items():
        assert len(set(paths)) == 3
        for i, rel in enumerate(paths):
            text = (vault / rel).read_text(encoding="utf-8")
            assert f"zq{name}{i}word" in text
            log = subprocess.run(["git", "log", "--format=%an|%s", "--", rel], cwd=vault, capture_output=True,
                                 text=True).stdout.splitlines()
            assert log == [f"{name}|capture: {rel}"], log
    # every capture is committed, nothing is left behind in the working tree but the daily note's last links
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=vault,
                            capture_output=True, text=True).stdout
    assert "inbox/" not in status, status


async def _update_as(url: str, name: str, path: str) -> dict:
    async with Client(url, auth=SECRETS[name]) as client:
        read = (await client.call_tool("read_note", {"path": path, "max_lines": 1})).structured_content
        return (await client.call_tool("update_note", {"path": path, "text": f"Checked by {name}.",
                                                       "expected_hash": read["hash"]})).structured_content


def test_a_write_tool_commits_as_the_token_that_sent_it(shared) -> None:
    url, vault = shared
    done = asyncio.run(_update_as(url, "carol", "home.md"))
    assert done["changed"] and done["commit"]
    log = subprocess.run(["git", "log", "-1", "--format=%an|%s", "--", "home.md"], cwd=vault,
                         capture_output=True, text=True, check=True).stdout.strip()
    assert log.startswith("carol|"), log


def test_a_token_over_its_rate_limit_gets_429(shared) -> None:
    url, _vault = shared
    headers = {"Authorization": "Bearer slow-secret-0123456789ab"}
    health = url.replace("/mcp", "/health")
    codes = [httpx.get(health, headers=headers).status_code for _ in range(12)]  # burst: a tenth of 60
    assert codes[:6] == [200] * 6 and 429 in codes
    r = httpx.get(health, headers=headers)
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert httpx.get(health, headers={"Authorization": f"Bearer {SECRETS['reader']}"}).status_code == 200


def test_tokens_file_errors_and_the_write_rule() -> None:
    table = parse({"tokens": {"a": {"secret": "x" * 20, "scope": "read"}, "b": {"secret": "y" * 20, "scope": "write"}}})
    assert table.authenticate("x" * 20) == Principal("a", "read")
    assert table.authenticate("y" * 20) == Principal("b", "write")
    assert table.authenticate("z" * 20) is None
    for bad, message in (({"tokens": {"a": {"secret": "short"}}}, "at least 16"),
                         ({"tokens": {"a": {"secret": "x" * 20, "scope": "admin"}}}, "read or write"),
                         ({"tokens": {"a": {"sha256": "00"}}}, "64 hex"),
                         ({"tokens": {"a": {}}}, "exactly one"),
                         ({"tokens": {"a": {"secret": "x" * 20}, "b": {"secret": "x" * 20}}}, "reuses"),
                         ({"tokens": {"A B": {"secret": "x" * 20}}}, "token name")):
        with pytest.raises(TokensError, match=message):
            parse(bad)

    class T:
        def __init__(self, annotations: ToolAnnotations | None) -> None:
            self.annotations = annotations

    assert not tool_writes(T(ToolAnnotations(readOnlyHint=True)))
    assert tool_writes(T(ToolAnnotations(readOnlyHint=False)))
    assert tool_writes(T(None))  # fail-closed: a tool that does not say it is read-only needs write


def test_plain_secrets_in_a_readable_file_are_refused(tmp_path: Path) -> None:
    from memory_hub.server.tokens import load

    path = tmp_path / "tokens.toml"
    path.write_text('[tokens.a]\nsecret = "0123456789abcdefghij"\nscope = "write"\n', encoding="utf-8")
    path.chmod(0o644)
    with pytest.raises(TokensError, match="chmod 600"):
        load(path)
    path.chmod(0o600)
    assert len(load(path)) == 1


def test_token_add_stores_only_the_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memory_hub.cli import main
    from memory_hub.server.tokens import load

    path = tmp_path / "t" / "tokens.toml"
    assert main(["token", "add", "ci-bot", "--scope", "read", "--file", str(path)]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret and secret not in path.read_text(encoding="utf-8")
    assert load(path).authenticate(secret) == Principal("ci-bot", "read")
    assert path.stat().st_mode & 0o077 == 0
    assert main(["token", "add", "ci-bot", "--file", str(path)]) == 1  # one name, one token


def test_doctor_checks_the_tokens_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_hub.eval.doctor import check_tokens

    path = tmp_path / "tokens.toml"
    monkeypatch.setenv("MEMORY_HUB_TOKENS_FILE", str(path))
    assert check_tokens(tmp_path)[0].status == "fail"  # named but missing
    path.write_text('[tokens.a]\nsha256 = "' + "ab" * 32 + '"\nscope = "write"\n', encoding="utf-8")
    [ok] = check_tokens(tmp_path)
    assert ok.status == "pass" and "a (write)" in ok.message
    path.write_text('[tokens.a]\nscope = "admin"\n', encoding="utf-8")
    assert check_tokens(tmp_path)[0].status == "fail"
