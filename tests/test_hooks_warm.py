"""The warm prompt hook (hooks/warm.py): real hook processes, a real server socket, real settings files.

A warm hook process imports neither the settings nor recall; it answers what the full path would
(the same block for the same prompt, warm or cold), and goes back to the full path whenever a
settings file changed, the server is gone, or the event is not a prompt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_hub.server import local_socket
from memory_hub.server.state import ServerState
from tests.test_hooks import PROMPT, REPO, recall_of

# Runs the hook as the `memory-hub` command does (memory_hub.entry), then lists what it imported.
RUN = ("import json, sys\n"
       "from memory_hub.entry import main\n"
       "rc = main(sys.argv[1:])\n"
       "sys.stdout.flush()\n"
       "print('\\nMODULES ' + json.dumps(sorted(m for m in sys.modules if m.startswith('memory_hub'))), file=sys.stderr)\n"
       "sys.exit(rc)\n")
FULL_PATH = ("memory_hub.config", "memory_hub.eval.telemetry", "memory_hub.hooks.claude_code")
NEVER_WARM = (*FULL_PATH, "memory_hub.retrieval.recall", "memory_hub.retrieval.hints", "memory_hub.vaults")


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A private runtime folder for this test's socket and plans, for the server and the hooks alike."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    # a secret among the variables a plan is keyed by: it must never be written into the plan
    return {**os.environ, "XDG_RUNTIME_DIR": str(folder), "MEMORY_HUB_LLM_KEY": "sk-test-never-written"}


def _hook(vault: Path, session_id: str, env: dict[str, str], event: dict | None = None) -> tuple[str, list[str]]:
    event = event or {"hook_event_name": "UserPromptSubmit", "session_id": session_id, "prompt": PROMPT}
    proc = subprocess.run([sys.executable, "-c", RUN, "--vault", str(vault), "hook", "claude-code"],
                          input=json.dumps(event), capture_output=True, text=True, timeout=60, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr
    modules = json.loads(proc.stderr.rsplit("MODULES ", 1)[1])
    block = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout.strip() else ""
    return block, modules


def _serve(vault: Path) -> local_socket.Handle:
    """The hooks socket of a real server state, its recall index loaded (as a running server's is)."""
    handle = local_socket.start(ServerState.open(vault))
    warmed = local_socket.request(vault, {"op": "recall", "prompt": PROMPT, "session_id": "warm-up", "budget": 1200},
                                  timeout=60)
    assert warmed and warmed["ok"], warmed
    return handle


def _full_path(modules: list[str]) -> bool:
    return all(m in modules for m in FULL_PATH)


def _plans(env: dict[str, str]) -> list[dict]:
    folder = Path(env["XDG_RUNTIME_DIR"]) / "memory-hub"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("hook-plan-*.json"))]


def test_a_warm_hook_imports_no_settings_and_answers_as_the_full_path_and_the_cold_one(
        template_vault, runtime: dict[str, str]) -> None:
    vault, _ = template_vault
    handle = _serve(vault)
    try:
        first, modules = _hook(vault, "w-full", runtime)
        assert _full_path(modules), modules  # no plan yet: the full path answers, and leaves one
        assert "tls-certificate-rotation.md" in first and recall_of(vault, "w-full")["served_by"] == "warm"
        [plan] = _plans(runtime)
        assert plan["vault"] == str(vault.resolve()) and plan["budget"] == 1200 and plan["deadline"] == 3.0
        assert "sk-test-never-written" not in json.dumps(plan)  # its key's variables are kept as a digest only

        warm, modules = _hook(vault, "w-lean", runtime)
        assert warm == first  # a new session, the same prompt: the same block
        assert not any(m in modules for m in NEVER_WARM), modules
        assert recall_of(vault, "w-lean")["served_by"] == "warm"

        # A settings file changed: the full path reads it (and the plan follows it).
        settings = vault / ".memory-hub" / "config.toml"
        settings.parent.mkdir(exist_ok=True)
        settings.write_text("[hooks]\nbudget = 60\n", encoding="utf-8")
        smaller, modules = _hook(vault, "w-budget", runtime)
        assert _full_path(modules) and len(smaller) < len(first)
        assert [p["budget"] for p in _plans(runtime)] == [60]
        again, modules = _hook(vault, "w-budget-2", runtime)
        assert again == smaller and not _full_path(modules)

        # A broken settings file is never served around: the full path refuses it and says so.
        settings.write_text("[hooks]\nbudget = 10\n", encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "memory_hub.cli", "--vault", str(vault), "hook", "claude-code"],
                              input=json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "w-broken",
                                                "prompt": PROMPT}),
                              capture_output=True, text=True, timeout=60, cwd=REPO, env=runtime)
        assert proc.returncode == 0 and proc.stdout == "" and "hooks.budget must be between 50 and 8000" in proc.stderr
        settings.unlink()
    finally:
        handle.close()

    # No server: the plan is there, the socket is not; the cold recall answers the same block.
    cold, modules = _hook(vault, "w-cold", runtime)
    assert cold == first and _full_path(modules)
    line = recall_of(vault, "w-cold")
    assert line["served_by"] == "cold" and line["fallback"].startswith("no-server")


def test_a_silent_server_is_asked_once(template_vault, runtime: dict[str, str]) -> None:
    """A socket that accepts and never answers: the warm attempt waits its share of the deadline,
    then the cold recall answers without the full path asking (and waiting for) the socket again."""
    import socket
    import threading

    vault, _ = template_vault
    handle = _serve(vault)
    try:
        _hook(vault, "s-plan", runtime)  # leaves the plan
    finally:
        handle.close()
    path = local_socket.socket_path(vault)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    silent.bind(str(path))
    silent.listen(8)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(silent.accept()[0])  # read nothing, answer nothing
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        block, modules = _hook(vault, "s-cold", runtime)
    finally:
        silent.close()
        path.unlink(missing_ok=True)
        for conn in held:
            conn.close()
    assert "tls-certificate-rotation.md" in block and _full_path(modules)
    line = recall_of(vault, "s-cold")
    assert line["served_by"] == "cold" and line["fallback"].startswith("no-server"), line
    assert len(held) == 1  # asked once, by the warm attempt


def test_events_other_than_prompts_take_the_full_path(template_vault, runtime: dict[str, str]) -> None:
    vault, _ = template_vault
    note = vault / "runbooks" / "tls-certificate-rotation.md"
    event = {"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_input": {"file_path": str(note)},
             "session_id": "r1"}
    handle = _serve(vault)
    try:
        _, modules = _hook(vault, "r0", runtime)  # a prompt first: the full path leaves a plan
        assert _full_path(modules) and _plans(runtime)
        _, modules = _hook(vault, "r0", runtime)
        assert not _full_path(modules)  # with the plan and the server, a prompt is answered warm
        _, modules = _hook(vault, "r1", runtime, event)  # the same plan and server, but not a prompt
    finally:
        handle.close()
    assert "memory_hub.hooks.claude_code" in modules and "memory_hub.vault.usage" in modules


def test_plans_unused_for_a_month_or_past_the_cap_are_pruned_newest_kept(tmp_path: Path) -> None:
    """Use is ranked by the mtime the hooks set themselves (writing a plan, and every warm hook that
    loads one), never by the access time, which noatime and relatime mounts do not keep."""
    from memory_hub.hooks import warm

    folder = tmp_path / "memory-hub"
    folder.mkdir(mode=0o700)
    now = time.time()
    paths = []
    for i in range(warm.MAX_PLANS + 5):  # used one minute apart, plan 0 the most recent
        p = folder / f"hook-plan-{i:04d}.json"
        p.write_text("{}")
        os.utime(p, (now - 60 * i, now - 60 * i))
        paths.append(p)
    old = folder / "hook-plan-old.json"
    old.write_text("{}")
    os.utime(old, (now - warm.PLAN_MAX_AGE - 1, now - warm.PLAN_MAX_AGE - 1))
    # written long ago; its access time says "read today", which proves nothing on a noatime mount
    atime_only = folder / "hook-plan-atime.json"
    atime_only.write_text("{}")
    os.utime(atime_only, (now - 30, now - warm.PLAN_MAX_AGE - 1))
    # written long ago, and a warm hook really used it today: load_plan records that itself
    key = warm.plan_key("claude-code", str(tmp_path / "vault"))
    used = Path(warm._plan_path(key, str(folder)))
    used.write_text(json.dumps({"key": warm._key_digest(key), "vault": str(tmp_path / "vault"), "budget": 400,
                                "deadline": 2.0, "hint_wait": 0.0, "stamps": []}))
    os.utime(used, (now - warm.PLAN_MAX_AGE - 1, now - warm.PLAN_MAX_AGE - 1))
    assert warm.load_plan(key, str(folder)) is not None
    assert used.stat().st_mtime >= now - 5
    stale_tmp = folder / "hook-plan-0000.json.123.tmp"
    stale_tmp.write_text("{")
    os.utime(stale_tmp, (now - 7200, now - 7200))
    other = folder / "abcd.sock.txt"  # not a plan: never touched
    other.write_text("x")
    os.utime(other, (now - warm.PLAN_MAX_AGE * 2, now - warm.PLAN_MAX_AGE * 2))

    gone = {Path(p).name for p in warm.prune_plans(str(folder), keep=str(paths[-1]), now=now)}
    left = {p.name for p in folder.iterdir()}
    assert {old.name, stale_tmp.name, atime_only.name} <= gone and other.name in left
    assert paths[-1].name in left and used.name in left  # the one just written; one used today
    kept_plans = [p for p in left if p.startswith("hook-plan-")]
    assert len(kept_plans) == warm.MAX_PLANS
    # the newest by use survive: plans 0..MAX-3 plus the one used today plus the one being kept
    assert all(paths[i].name in left for i in range(warm.MAX_PLANS - 2))
    assert paths[warm.MAX_PLANS - 2].name in gone
