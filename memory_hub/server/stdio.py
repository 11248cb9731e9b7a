"""MCP over stdio, answered directly: newline-delimited JSON-RPC 2.0, the same tools, no framework.

A stdio server is a child process an agent spawns and waits for, so its start-up and its
per-message cost are what the agent feels. Measured here: FastMCP (with mcp and pydantic) cost
about three quarters of the CPU a stdio server spent before it could answer ``initialize``, and
about 4 ms of CPU per message after that — as much as a lexical search. This module speaks the
few methods an MCP client uses over stdio (``initialize``, ``ping``, ``tools/list``,
``tools/call``, the empty ``resources``/``prompts`` lists, ``logging/setLevel``) and calls the
same functions in ``tools.py`` that the FastMCP server does. HTTP and SSE keep FastMCP: sessions,
streams and their security checks are where a framework earns its cost.

What clients see is FastMCP's own tool list, recorded in ``tool_list.py`` (regenerate with
``python -m memory_hub.server.stdio --write-tool-list``); ``tests/test_server_stdio.py`` builds
FastMCP's list and fails when the two differ, and compares both servers' answers tool by tool.
Arguments are checked against that list's JSON schemas, strictly (no "3" for 3, no unknown
names), as FastMCP's strict input validation does.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from . import tools
from .state import ServerState

log = logging.getLogger("memory_hub.server")

TOOL_LIST = Path(__file__).with_name("tool_list.py")
PROTOCOLS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
DEFAULT_PROTOCOL = "2025-06-18"
WORKERS = 4  # tool calls in flight at once (a slow capture must not hold up a search)
# With this variable set (benchmarks set it), every tools/call result carries where the server's
# time went, in ``_meta`` (which MCP allows on any result): read -> worker thread, the tool function,
# encoding its answer. What a client measures beyond these is the pipe, the reply's own encoding
# and the client.
STAGES_ENV = "MEMORY_HUB_STDIO_STAGES"
STAGES_META = "memory-hub/stages_ms"

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

# The tool functions, as app.py calls them (same order of arguments).
CALLS: dict[str, Callable[[ServerState, dict[str, Any]], Any]] = {
    "search": lambda s, a: tools.search(s, a["query"], a["k"], a["mode"], a["kinds"], a["tags"], a["path_prefix"],
                                        a["since"]),
    "recall": lambda s, a: tools.recall(s, a["prompt"], a["budget_tokens"]),
    "read_note": lambda s, a: tools.read_note(s, a["path"], a["from_line"], a["max_lines"]),
    "related": lambda s, a: tools.related(s, a["path"], a["hops"], a["limit"]),
    "capture": lambda s, a: tools.capture(s, a["text"], a["title"], a["kind"], a["tags"], a["links"], a["vault"]),
    "update_note": lambda s, a: tools.update_note(s, a["path"], a["text"], a["expected_hash"], a["heading"],
                                                  a["mode"]),
    "move_note": lambda s, a: tools.move_note(s, a["path"], a["new_path"], a["expected_hash"]),
    "delete_note": lambda s, a: tools.delete_note(s, a["path"], a["expected_hash"]),
    "restore_note": lambda s, a: tools.restore_note(s, a["path"], a["new_path"]),
    "status": lambda s, a: tools.status(s),
}


def load_tool_list() -> list[dict[str, Any]]:
    from .tool_list import TOOLS_JSON

    return json.loads(TOOLS_JSON)["tools"]


# -- argument checks ---------------------------------------------------------------------------------

_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check(schema: dict[str, Any], value: Any, where: str) -> str | None:
    """Why ``value`` does not fit ``schema`` (the subset FastMCP emits for our tools), or None;
    worded as FastMCP words pydantic's errors (``app.argument_error``)."""
    if "anyOf" in schema:
        reasons = [_check(option, value, where) for option in schema["anyOf"]]
        return None if any(r is None for r in reasons) else next(r for r in reasons if r)
    kind = schema.get("type")
    if kind and not _TYPES.get(kind, lambda v: True)(value):
        return f"{where}: input should be a valid {kind} (got {_short(value)})"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: input should be {' or '.join(map(repr, schema['enum']))} (got {_short(value)})"
    if "minimum" in schema and value < schema["minimum"]:
        return f"{where}: input should be greater than or equal to {schema['minimum']} (got {_short(value)})"
    if "maximum" in schema and value > schema["maximum"]:
        return f"{where}: input should be less than or equal to {schema['maximum']} (got {_short(value)})"
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            reason = _check(schema["items"], item, f"{where}[{i}]")
            if reason:
                return reason
    return None


def arguments(tool: dict[str, Any], given: Any) -> dict[str, Any]:
    """The call's arguments with defaults filled in; ValueError saying what is wrong otherwise."""
    if given is None:
        given = {}
    if not isinstance(given, dict):
        raise ValueError("arguments must be an object")
    schema = tool["inputSchema"]
    props: dict[str, Any] = schema.get("properties", {})
    # worded as the FastMCP transports word them (app.argument_error)
    problems = [f"{name}: unknown argument ({tool.get('name', 'the tool')} takes {', '.join(props)})"
                for name in given if name not in props]
    problems += [f"{name}: required, missing" for name in schema.get("required", []) if name not in given]
    out = {}
    for name, prop in props.items():
        if name in given:
            reason = _check(prop, given[name], name)
            if reason:
                problems.append(reason)
            out[name] = given[name]
        else:
            out[name] = prop.get("default")
    if problems:
        raise ValueError("; ".join(problems))
    return out


# -- the server --------------------------------------------------------------------------------------

class StdioServer:
    """One client on stdin/stdout. ``serve()`` returns when stdin closes."""

    def __init__(self, state: ServerState, instructions: str, version: str,
                 tool_list: list[dict[str, Any]] | None = None, workers: int = WORKERS) -> None:
        self.state = state
        self.instructions = instructions
        self.version = version
        self.tools = tool_list if tool_list is not None else load_tool_list()
        self.by_name = {t["name"]: t for t in self.tools}
        missing = sorted(set(self.by_name) ^ set(CALLS))
        if missing:
            raise RuntimeError(f"tool list and dispatch table disagree on {missing}")
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="memory-hub-tool")
        self._out: IO[bytes] | None = None
        self._write_lock = threading.Lock()
        self._stages = bool(os.environ.get(STAGES_ENV))

    def serve(self, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
        stdin = stdin or sys.stdin.buffer
        self._out = stdout or sys.stdout.buffer
        try:
            for line in stdin:
                if line.strip():
                    self._handle_line(line)
        finally:
            self._pool.shutdown(wait=True, cancel_futures=False)  # answer what is in flight

    def _write(self, msg: dict[str, Any]) -> None:
        data = json.dumps(msg, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8") + b"\n"
        assert self._out is not None
        with self._write_lock:
            try:
                self._out.write(data)
                self._out.flush()
            except (BrokenPipeError, ValueError):  # the client went away
                pass

    def _error(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self._write({"jsonrpc": "2.0", "id": rid, "error": err})

    def _handle_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            self._error(None, PARSE_ERROR, "Parse error")
            return
        for one in msg if isinstance(msg, list) else [msg]:  # batches (2025-03-26) are answered one by one
            self._handle(one)

    def _handle(self, msg: Any) -> None:
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            self._error(msg.get("id") if isinstance(msg, dict) else None, INVALID_REQUEST, "Invalid Request")
            return
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method is None:
            return  # a response to something we never asked
        if "id" not in msg:
            return  # notifications: initialized, cancelled, roots changed — nothing to do
        if method == "tools/call":
            self._pool.submit(self._call, rid, params, time.perf_counter())
            return
        try:
            result = self._answer(method, params)
        except LookupError:
            self._error(rid, METHOD_NOT_FOUND, "Method not found", method)
            return
        self._write({"jsonrpc": "2.0", "id": rid, "result": result})

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            return {"protocolVersion": asked if asked in PROTOCOLS else DEFAULT_PROTOCOL,
                    "capabilities": {"logging": {}, "tools": {"listChanged": False}},
                    "serverInfo": {"name": "memory-hub", "version": self.version},
                    "instructions": self.instructions}
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tools}
        if method == "resources/list":
            return {"resources": []}
        if method == "resources/templates/list":
            return {"resourceTemplates": []}
        if method == "prompts/list":
            return {"prompts": []}
        if method == "logging/setLevel":
            return {}
        raise LookupError(method)

    def _call(self, rid: Any, params: dict[str, Any], received: float | None = None) -> None:
        result = call_result(self.state, self.by_name, params, received if self._stages else None)
        self._write({"jsonrpc": "2.0", "id": rid, "result": result})


def call_result(state: ServerState, by_name: dict[str, dict[str, Any]], params: Any,
                received: float | None = None) -> dict[str, Any]:
    """The ``tools/call`` result for ``params`` (``name``, ``arguments``), as FastMCP words it: what
    this server and the HTTP transports' direct path (``direct_http.py``) answer. ``received``: when
    the request was read (``time.perf_counter()``), to add where the time went in ``_meta``."""
    name = params.get("name") if isinstance(params, dict) else None
    tool = by_name.get(name) if isinstance(name, str) else None
    if tool is None:
        return _failed(f"Unknown tool: {name!r}")
    try:
        args = arguments(tool, params.get("arguments"))
    except ValueError as exc:
        return _failed(f"invalid arguments for {name}: {exc}")
    started = time.perf_counter()
    try:
        check = getattr(state, "check_index", None)
        if check is not None:
            check()
        data = CALLS[name](state, args)
    except tools.ToolError as exc:
        return _failed(str(exc))
    except Exception as exc:  # noqa: BLE001 - one line to the client, the traceback to the log
        log.exception("tool %s failed", name)
        return _failed(f"internal error in {name}: {type(exc).__name__}: {exc}")
    done = time.perf_counter()
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)
    result = {"content": [{"type": "text", "text": text}], "structuredContent": data, "isError": False}
    if received is not None:
        result["_meta"] = {STAGES_META: {"queued": _ms(started - received), "tool": _ms(done - started),
                                         "encode": _ms(time.perf_counter() - done)}}
    return result


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _failed(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def tool_list_from_fastmcp() -> dict[str, Any]:
    """FastMCP's tools/list answer for ``app.build_server`` (imports FastMCP: for the test and the
    regeneration only)."""
    import asyncio
    import tempfile

    from fastmcp import Client

    from .app import build_server

    async def listed(mcp: Any) -> dict[str, Any]:
        async with Client(mcp) as client:
            result = await client.list_tools_mcp()
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    with tempfile.TemporaryDirectory() as vault:
        state = ServerState.open(Path(vault))
        try:
            return asyncio.run(listed(build_server(state)))
        finally:
            state.store.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-tool-list"]:
        data = tool_list_from_fastmcp()
        body = json.dumps({"tools": data["tools"]}, ensure_ascii=False, indent=1)
        TOOL_LIST.write_text(
            '"""FastMCP\'s tools/list answer for ``app.build_server``, recorded for the stdio server.\n\n'
            "Generated: ``python -m memory_hub.server.stdio --write-tool-list``. Do not edit; "
            'tests/test_server_stdio.py fails when it differs from FastMCP\'s list."""\n\n'
            f"TOOLS_JSON = r\'\'\'\n{body}\n\'\'\'\n", encoding="utf-8")
        print(f"wrote {TOOL_LIST} ({len(data['tools'])} tools)")
    else:
        sys.exit("usage: python -m memory_hub.server.stdio --write-tool-list")
