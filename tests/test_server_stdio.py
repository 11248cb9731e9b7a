"""A real MCP client spawns `memory-hub serve` over stdio and calls every tool, good and bad input."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from memory_hub.config import template_dir
from memory_hub.index.sync import sync

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")


def snapshot(vault: Path) -> dict[str, bytes]:
    """Every file of the vault's content (not its caches), for "nothing was written" checks."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(vault):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for name in filenames:
            p = Path(dirpath) / name
            out[p.relative_to(vault).as_posix()] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    v = tmp_path_factory.mktemp("stdio") / "vault"
    shutil.copytree(template_dir(), v)
    sync(v)
    return v


async def _call(client: Client, tool: str, args: dict) -> tuple[bool, object]:
    result = await client.call_tool(tool, args, raise_on_error=False)
    if result.is_error:
        return True, result.content[0].text
    return False, result.structured_content


def test_every_tool_over_stdio(vault: Path) -> None:
    async def scenario() -> dict:
        transport = StdioTransport(command=MEMORY_HUB, args=["--vault", str(vault), "serve", "--no-warm"],
                                   env={**os.environ, "MEMORY_HUB_VAULT": ""})
        out: dict = {}
        async with Client(transport) as client:
            tools = {t.name: t for t in await client.list_tools()}
            out["tools"] = tools
            out["search"] = await _call(client, "search", {"query": "blue-green rollback", "k": 5})
            out["search_ja"] = await _call(client, "search", {"query": "認証エラー", "kinds": ["knowledge"]})
            out["search_filtered"] = await _call(client, "search", {"query": "deploy", "path_prefix": "runbooks/"})
            out["recall"] = await _call(client, "recall", {"prompt": "How do I roll back a bad release?",
                                                           "budget_tokens": 200})
            out["read"] = await _call(client, "read_note", {"path": "runbooks/blue-green-rollback.md",
                                                            "from_line": 1, "max_lines": 5})
            out["related"] = await _call(client, "related", {"path": "home.md", "hops": 2})
            out["capture"] = await _call(client, "capture", {
                "text": "We decided to pin uv 0.5 in CI because 0.6 broke lockfile parsing.",
                "title": "Pin uv in CI", "tags": ["ci"], "links": ["home"]})
            out["after_capture"] = await _call(client, "search", {"query": "lockfile parsing"})
            out["status"] = await _call(client, "status", {})
        return out

    out = asyncio.run(scenario())
    tools = out["tools"]
    assert set(tools) == {"search", "recall", "read_note", "related", "capture", "status", "update_note", "move_note",
                          "delete_note", "restore_note"}
    assert tools["search"].annotations.read_only_hint is True
    assert tools["capture"].annotations.read_only_hint is False
    assert tools["capture"].annotations.destructive_hint is False
    assert "query" in tools["search"].input_schema["required"]

    err, search = out["search"]
    assert not err and search["results"], search
    top = search["results"][0]
    assert top["path"] == "runbooks/blue-green-rollback.md"
    assert {"path", "title", "description", "date", "kind", "score", "snippet"} <= set(top)
    assert len(search["results"]) <= 5
    err, ja = out["search_ja"]
    assert not err and ja["results"][0]["path"] == "認証エラーの切り分け.md"
    assert all(r["kind"] == "knowledge" for r in ja["results"])
    err, filtered = out["search_filtered"]
    assert not err and filtered["results"] and all(r["path"].startswith("runbooks/") for r in filtered["results"])

    err, recall = out["recall"]
    assert not err
    block = recall["block"]
    assert block.startswith("<vault-memory>") and block.rstrip().endswith("</vault-memory>")
    lines = [ln for ln in block.strip().splitlines()[1:-1] if ln[:1].isdigit()]
    assert lines and all(len(line.split("|")) == 4 for line in lines)
    assert any("blue-green-rollback" in line for line in lines)
    rollback = (vault / "runbooks/blue-green-rollback.md").read_text(encoding="utf-8")
    assert rollback.splitlines()[-1] not in block  # never bodies

    err, read = out["read"]
    assert not err and read["from_line"] == 1 and read["to_line"] == 5 and "more" in read
    assert read["text"].startswith("---")
    assert read["usage"]["reads"] >= 1 and read["usage"]["last_read"]  # counted, in the usage log
    assert (vault / "runbooks/blue-green-rollback.md").read_bytes() == (
        template_dir() / "runbooks/blue-green-rollback.md").read_bytes()  # the note itself is untouched

    err, related = out["related"]
    assert not err and related["related"]
    assert {n["distance"] for n in related["related"]} <= {1, 2}
    assert any(n["distance"] == 1 and n["direction"] in ("out", "both") for n in related["related"])

    err, captured = out["capture"]
    assert not err and captured["indexed"], captured
    path = vault / captured["path"]
    assert path.is_file() and path.parent.name == "inbox" and path.name == path.name.lower()
    text = path.read_text(encoding="utf-8")
    assert "lockfile parsing" in text and "[[home]]" in text
    err, found = out["after_capture"]
    assert not err and found["results"][0]["path"] == captured["path"]  # indexed at once

    err, status = out["status"]
    assert not err and status["notes"] >= 30 and status["watcher"]["alive"] is True
    assert "pending_changes" in status and "models_ready" in status and "chunks" in status


def test_bad_input_is_a_clear_error_and_writes_nothing(vault: Path) -> None:
    async def scenario() -> list[tuple[str, dict, bool, object]]:
        transport = StdioTransport(command=MEMORY_HUB,
                                   args=["--vault", str(vault), "serve", "--no-warm", "--no-watch"])
        calls = [
            ("read_note", {"path": "../../../etc/passwd"}),
            ("read_note", {"path": "/etc/passwd"}),
            ("read_note", {"path": ".memory_hub/index.sqlite3"}),
            ("read_note", {"path": "no-such-note.md"}),
            ("related", {"path": "../outside.md"}),
            ("capture", {"text": "x" * 50_000}),
            ("capture", {"text": "   "}),
            ("capture", {"text": "ok", "kind": "../../etc"}),
            ("capture", {"text": "ok", "tags": ["a\nb"]}),
            ("search", {"query": ""}),
            ("search", {"query": "   "}),
            ("search", {"query": "deploy", "bogus": 1}),
            ("search", {"query": "deploy", "k": 0}),
            ("search", {"query": "deploy", "since": "yesterday"}),
            ("search", {"query": "deploy", "path_prefix": "../"}),
            ("recall", {"prompt": ""}),
            ("related", {"path": "home.md", "hops": 5}),
        ]
        results = []
        async with Client(transport) as client:
            for tool, args in calls:
                err, payload = await _call(client, tool, args)
                results.append((tool, args, err, payload))
            # The title cannot steer the file out of the capture folder.
            err, payload = await _call(client, "capture", {"text": "traversal probe", "title": "../../../escape"})
            results.append(("capture-title", {}, err, payload))
        return results

    before = snapshot(vault)
    results = asyncio.run(scenario())
    for tool, args, err, payload in results[:-1]:
        assert err, f"{tool}{args} should fail, got {payload}"
        message = str(payload)
        assert "Traceback" not in message and message.strip(), message
    messages = {f"{t}:{sorted(a)}:{str(a)[:20]}": str(p) for t, a, _e, p in results[:-1]}
    assert any("leaves the vault" in m or "absolute" in m for m in messages.values())
    assert "the limit is 20,000" in results[5][3]
    assert "query is empty" in results[9][3]
    assert "bogus" in results[11][3]
    after = snapshot(vault)
    _, _, err, probe = results[-1]
    assert not err and probe["path"].startswith("inbox/") and ".." not in probe["path"]
    created = set(after) - set(before)
    assert probe["path"] in created
    # Apart from the probe (and the daily note the capture links from), nothing changed.
    changed = {p for p in before if after.get(p) != before[p]}
    assert created - {probe["path"]} <= {p for p in created if p.startswith("daily/")}
    assert changed <= {p for p in before if p.startswith("daily/")}
    assert not (vault.parent / "escape.md").exists()


def test_the_stdio_tool_list_is_fastmcps() -> None:
    """The stdio front end serves FastMCP's own tool list, recorded; editing a tool in app.py without
    regenerating it fails here (`python -m memory_hub.server.stdio --write-tool-list`)."""
    from memory_hub.server.stdio import CALLS, load_tool_list, tool_list_from_fastmcp

    assert tool_list_from_fastmcp()["tools"] == load_tool_list()
    assert {t["name"] for t in load_tool_list()} == set(CALLS)


def _stdio_session(vault: Path, messages: list) -> list[dict]:
    """Feed raw lines to the stdio front end in-process; its answers, in the order written."""
    import io
    import json

    from memory_hub.server.about import INSTRUCTIONS
    from memory_hub.server.state import ServerState
    from memory_hub.server.stdio import StdioServer

    state = ServerState.open(vault)
    state.models_ready.set()
    lines = b"".join((m if isinstance(m, bytes) else json.dumps(m).encode()) + b"\n" for m in messages)
    out = io.BytesIO()
    StdioServer(state, INSTRUCTIONS, "test").serve(io.BytesIO(lines), out)
    state.store.close()
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_stdio_protocol_edges(vault: Path) -> None:
    answers = _stdio_session(vault, [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}},
        b"{not json",
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "1.0", "id": 4, "method": "ping"},
        [{"jsonrpc": "2.0", "id": 5, "method": "ping"}, {"jsonrpc": "2.0", "id": 6, "method": "prompts/list"}],
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "x", "k": "3"}}},
        {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "search", "arguments": {"query": "deploy", "k": 2}}},
    ])
    by_id = {a.get("id"): a for a in answers}
    assert by_id[1]["result"]["protocolVersion"] == "2025-03-26"  # the client's version, when known
    assert by_id[1]["result"]["serverInfo"]["name"] == "memory-hub" and "tools" in by_id[1]["result"]["capabilities"]
    assert by_id[2]["result"]["protocolVersion"] == "2025-06-18"
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[4]["error"]["code"] == -32600
    assert by_id[5]["result"] == {} and by_id[6]["result"] == {"prompts": []}
    assert by_id[7]["result"]["isError"] and "Unknown tool" in by_id[7]["result"]["content"][0]["text"]
    assert by_id[8]["result"]["isError"] and "k: input should be a valid integer" in by_id[8]["result"]["content"][0]["text"]
    ok = by_id[9]["result"]
    assert not ok["isError"] and len(ok["structuredContent"]["results"]) == 2
    assert len(answers) == 10  # the notification got no answer


def test_stdio_and_fastmcp_answer_alike(vault: Path) -> None:
    """The same calls through both front ends give the same answers (time-dependent fields aside)."""
    import json

    from memory_hub.server.app import build_server
    from memory_hub.server.state import ServerState

    calls = [("search", {"query": "blue-green rollback", "k": 5}),
             ("search", {"query": "認証エラー", "kinds": ["knowledge"], "mode": "lexical"}),
             ("search", {"query": "deploy", "path_prefix": "../"}),
             ("read_note", {"path": "runbooks/blue-green-rollback.md", "max_lines": 3}),
             ("related", {"path": "home.md", "hops": 2, "limit": 5}),
             ("related", {"path": "home.md", "hops": 9}),
             ("recall", {"prompt": "How do I roll back a bad release?", "budget_tokens": 200})]

    def comparable(result: dict) -> object:
        if result.get("isError"):
            return "error"
        data = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        data = {k: v for k, v in data.items() if k not in ("index", "timings_ms", "uptime_seconds", "usage")}
        return json.loads(json.dumps(data))

    stdio = _stdio_session(vault, [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                    "params": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls)])
    stdio_by_id = {a["id"]: comparable(a["result"]) for a in stdio}

    async def via_fastmcp() -> list:
        state = ServerState.open(vault)
        state.models_ready.set()
        out = []
        async with Client(build_server(state)) as client:
            for name, args in calls:
                res = await client.call_tool_mcp(name, args)
                out.append(comparable(res.model_dump(mode="json", by_alias=True, exclude_none=True)))
        return out

    fast = asyncio.run(via_fastmcp())
    for i, (name, args) in enumerate(calls):
        assert stdio_by_id[i] == fast[i], f"{name}{args}"


def test_stdio_stage_marks_only_when_asked(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMORY_HUB_STDIO_STAGES=1 (benchmarks) adds where the server's time went to each tools/call result."""
    from memory_hub.server.stdio import STAGES_ENV, STAGES_META

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search", "arguments": {"query": "deploy", "k": 2}}}
    monkeypatch.delenv(STAGES_ENV, raising=False)
    [plain] = _stdio_session(vault, [call])
    assert "_meta" not in plain["result"]
    monkeypatch.setenv(STAGES_ENV, "1")
    [marked] = _stdio_session(vault, [call])
    stages = marked["result"]["_meta"][STAGES_META]
    assert set(stages) == {"queued", "tool", "encode"} and all(v >= 0 for v in stages.values())
    # the tool's own mark covers the search it ran, whose total the answer reports
    assert stages["tool"] >= marked["result"]["structuredContent"]["timings_ms"]["total"] > 0
    assert marked["result"]["structuredContent"]["results"] == plain["result"]["structuredContent"]["results"]
