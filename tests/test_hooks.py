"""Agent hooks end to end: real processes, a real unix socket, real transcripts and settings files."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memory_hub.eval import telemetry
from memory_hub.hooks import claude_code
from memory_hub.hooks.codex import read_paths
from memory_hub.hooks.install import install
from memory_hub.retrieval import session
from memory_hub.server import local_socket
from memory_hub.vault import frontmatter

REPO = Path(__file__).resolve().parent.parent


def usage_of(vault: Path, path: str):  # noqa: ANN201 - index.usage.Usage
    """A note's usage as every reader sees it (the index's usage API, after folding the logs)."""
    from memory_hub.index import usage
    from memory_hub.index.store import Store

    store = Store(vault)
    usage.fold(store, vault)
    return usage.for_note(store, path)
PROMPT = "how do we rotate the TLS certificate on the legacy nginx VMs?"


def hook(vault: Path | None, event: object, agent: str = "claude-code", raw: str | None = None,
         env: dict | None = None) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "memory_hub.cli"] + (["--vault", str(vault)] if vault else []) + ["hook", agent]
    data = raw if raw is not None else json.dumps(event)
    return subprocess.run(args, input=data, capture_output=True, text=True, timeout=30, cwd=REPO,
                          env={**__import__("os").environ, **(env or {})})


def recalls(vault: Path) -> list[dict]:
    return [e for e in telemetry.events(vault) if e.get("event") == "recall"]


def test_prompt_cold_in_process(template_vault) -> None:
    vault, _ = template_vault
    out = io.StringIO()
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "c1", "prompt": PROMPT, "cwd": str(vault)}
    assert claude_code.run("claude-code", str(vault), io.StringIO(json.dumps(event)), out) == 0
    reply = json.loads(out.getvalue())
    ctx = reply["hookSpecificOutput"]["additionalContext"]
    assert reply["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert ctx.startswith("<vault-memory>\nm=") and "runbooks/tls-certificate-rotation.md" in ctx
    last = recalls(vault)[-1]
    assert last["served_by"] == "cold" and last["fallback"].startswith("no-server")


def recall_of(vault: Path, session_id: str, timeout: float = 20.0) -> dict:
    """The recall line of one session: a real hook process writes it after it has replied."""
    end = time.monotonic() + timeout
    while True:
        found = [e for e in recalls(vault) if e.get("session") == session_id]
        if found or time.monotonic() > end:
            assert found, f"no recall line for {session_id}"
            return found[-1]
        time.sleep(0.05)


def test_cold_hook_process_replies_first_and_records_the_redacted_prompt_after(template_vault) -> None:
    vault, _ = template_vault
    secret = "hunter2-Xq9vLm3pRt7w"
    prompt = PROMPT + f" (the db password is {secret})"
    proc = hook(vault, {"hook_event_name": "UserPromptSubmit", "session_id": "late-1", "prompt": prompt})
    assert proc.returncode == 0, proc.stderr
    assert "tls-certificate-rotation.md" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    line = recall_of(vault, "late-1")
    assert line["served_by"] == "cold" and "[REDACTED:" in line["prompt"] and secret not in line["prompt"]
    assert secret not in telemetry.folder(vault).joinpath(telemetry.FILENAME).read_text(encoding="utf-8")


def test_after_reply_work_runs_in_a_forked_child(tmp_path: Path) -> None:
    marker = tmp_path / "child.json"
    script = (
        "import json, os, sys, time\n"
        "from memory_hub.hooks import claude_code\n"
        f"marker = {str(marker)!r}\n"
        "claude_code.AFTER_REPLY.append(lambda: (time.sleep(0.5), open(marker, 'w').write(json.dumps("
        "{'pid': os.getpid(), 'sid': os.getsid(0)}))))\n"
        "claude_code.finish_after_reply(detach=True)\n"
        "print(json.dumps({'pid': os.getpid(), 'done': os.path.exists(marker)}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, cwd=REPO)
    parent = json.loads(proc.stdout)
    assert proc.returncode == 0 and parent["done"] is False  # the parent did not wait for the work
    end = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < end:
        time.sleep(0.05)
    child = json.loads(marker.read_text())
    assert child["pid"] != parent["pid"] and child["sid"] == child["pid"]  # its own session: no agent pipes


def test_a_block_the_hook_gave_up_on_is_not_remembered_as_shown(template_vault) -> None:
    from memory_hub.server.state import ServerState

    vault, _ = template_vault
    state = ServerState.open(vault)
    handle = local_socket.start(state)
    try:
        ask = {"op": "recall", "prompt": PROMPT, "budget": 1200}
        late = local_socket.request(vault, {**ask, "session_id": "gave-up", "reply_by": time.time() - 1}, timeout=60)
        on_time = local_socket.request(vault, {**ask, "session_id": "waited", "reply_by": time.time() + 60},
                                       timeout=60)
    finally:
        handle.close()
    assert late["ok"] and "tls-certificate-rotation.md" in late["block"] and late["telemetry"]["late"] is True
    assert session.load(vault, "gave-up")["injected"] == []  # the cold recall that follows still shows it
    assert on_time["injected"] and "late" not in on_time["telemetry"]
    assert [e["path"] for e in session.load(vault, "waited")["injected"]] == on_time["injected"]


def test_prompt_warm_over_the_socket_from_a_real_hook_process(template_vault) -> None:
    from memory_hub.server.state import ServerState

    vault, _ = template_vault
    state = ServerState.open(vault)
    handle = local_socket.start(state)
    try:
        assert local_socket.request(vault, {"op": "ping"})["ok"]
        proc = hook(vault, {"hook_event_name": "UserPromptSubmit", "session_id": "w1", "prompt": PROMPT})
        assert proc.returncode == 0, proc.stderr
        ctx = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "tls-certificate-rotation.md" in ctx
        assert recalls(vault)[-1]["served_by"] == "warm"
        # the same session is not shown the same notes twice, warm or cold
        again = hook(vault, {"hook_event_name": "UserPromptSubmit", "session_id": "w1", "prompt": PROMPT})
        assert "tls-certificate-rotation.md" not in again.stdout
        bad = local_socket.request(vault, {"op": "recall", "prompt": 5})
        assert bad == {"ok": False, "error": "prompt must be a string"}
        with pytest.raises(RuntimeError):
            local_socket.start(state)  # a live server on the same vault is left alone
    finally:
        handle.close()
    assert not local_socket.socket_path(vault).exists()
    assert local_socket.request(vault, {"op": "ping"}) is None


@pytest.mark.parametrize("raw", ["not json", "", "[1, 2]", '{"hook_event_name": "UserPromptSubmit", "prompt": 7}'])
def test_bad_input_exits_zero_quietly(template_vault, raw: str) -> None:
    vault, _ = template_vault
    proc = hook(vault, None, raw=raw)
    assert proc.returncode == 0 and proc.stdout == ""


def test_missing_vault_exits_zero(tmp_path: Path) -> None:
    proc = hook(tmp_path / "nope", {"hook_event_name": "UserPromptSubmit", "prompt": PROMPT})
    assert proc.returncode == 0 and proc.stdout == ""


def test_hard_deadline(monkeypatch) -> None:
    monkeypatch.setenv(claude_code.DEADLINE_ENV, "0.3")

    def slow(*_a, **_k):
        time.sleep(10)
        return {"never": True}

    t0 = time.monotonic()
    out = io.StringIO()
    assert claude_code.run("claude-code", None, io.StringIO("{}"), out, handler=slow) == 0
    assert time.monotonic() - t0 < 3.0 and out.getvalue() == ""


def test_read_tool_counts_an_access_only_inside_the_vault(template_vault, tmp_path) -> None:
    vault, _ = template_vault
    outside = tmp_path / "elsewhere.md"
    outside.write_text("---\ntitle: x\n---\nbody\n", encoding="utf-8")

    def count() -> int:
        return usage_of(vault, "runbooks/db-failover.md").reads

    before = count()
    for path, cwd in ((str(vault / "runbooks/db-failover.md"), "/"), ("runbooks/db-failover.md", str(vault)),
                      (str(outside), "/"), (str(vault / ".memory_hub/x.md"), "/")):
        claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Read", "cwd": cwd,
                            "tool_input": {"file_path": path}}, vault)
    claude_code.handle({"hook_event_name": "PostToolUse", "tool_name": "Grep",
                        "tool_input": {"file_path": str(vault / "runbooks/db-failover.md")}}, vault)
    assert count() == before + 2
    assert outside.read_text(encoding="utf-8") == "---\ntitle: x\n---\nbody\n"


def test_codex_shell_reads_count(template_vault) -> None:
    from memory_hub.hooks import codex

    assert read_paths("cat runbooks/db-failover.md | head -5 && rg foo x.md") == ["runbooks/db-failover.md"]
    assert read_paths("sed -n '1,80p' 'auth-flow.md'") == ["auth-flow.md"]
    vault, _ = template_vault
    codex.handle({"hook_event_name": "PostToolUse", "tool_name": "Bash", "cwd": str(vault),
                  "tool_input": {"command": "cat auth-flow.md"}}, vault)
    assert usage_of(vault, "auth-flow.md").reads == 1


def _write_transcript(path: Path, turns: int, secret: bool = True) -> None:
    lines = []
    for i in range(turns):
        lines.append({"type": "user", "message": {"role": "user", "content": f"question {i} about the deploy pipeline"}})
        text = f"Answer {i}: the deploy pipeline runs apply_secrets before the idle color scales up. " * 3
        if secret and i == 0:
            text += " Use OPENAI_API_KEY=sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789 and https://bob:hunter2pw@git.example.com/x"
        lines.append({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": text},
            {"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {"file_path": "deploy-step-apply-secrets.md"}}]}})
    with open(path, "a", encoding="utf-8") as fh:
        for item in lines:
            fh.write(json.dumps(item) + "\n")


def test_stop_saves_a_redacted_capture_and_updates_it(template_vault, tmp_path) -> None:
    vault, _ = template_vault
    transcript = tmp_path / "t.jsonl"
    _write_transcript(transcript, 3)
    event = {"hook_event_name": "Stop", "session_id": "abcdef123456", "transcript_path": str(transcript), "cwd": str(vault)}
    claude_code.handle(event, vault)
    rel = session.load(vault, "abcdef123456")["capture"]["path"]
    assert rel.startswith("inbox/")
    text = (vault / rel).read_text(encoding="utf-8")
    assert "sk-proj-Abcdef" not in text and "hunter2pw" not in text and "[REDACTED:" in text
    data = frontmatter.parse(text).data
    assert data["kind"] == "capture" and data["session"] == "abcdef123456"
    claude_code.handle(event, vault)  # nothing new: no rewrite
    assert (vault / rel).read_text(encoding="utf-8") == text
    _write_transcript(transcript, 1, secret=False)
    claude_code.handle(event, vault)  # same segment: the same note grows
    assert session.load(vault, "abcdef123456")["capture"]["path"] == rel
    assert (vault / rel).read_text(encoding="utf-8") != text
    (vault / rel).write_text((vault / rel).read_text(encoding="utf-8") + "\nmy own edit\n", encoding="utf-8")
    _write_transcript(transcript, 1, secret=False)
    claude_code.handle(event, vault)  # a person edited it: left alone, a new note instead
    assert "my own edit" in (vault / rel).read_text(encoding="utf-8")
    assert session.load(vault, "abcdef123456")["capture"]["path"] != rel


def test_session_end_hands_judging_to_a_detached_worker(template_vault, tmp_path) -> None:
    vault, _ = template_vault
    session.update(vault, "end-1", injected=[{"path": "deploy-step-apply-secrets.md", "title": "The apply_secrets deploy step",
                                              "description": "What apply_secrets does"}])
    transcript = tmp_path / "t.jsonl"
    _write_transcript(transcript, 2)
    before = usage_of(vault, "deploy-step-apply-secrets.md").useful
    t0 = time.monotonic()
    proc = hook(vault, {"hook_event_name": "SessionEnd", "session_id": "end-1", "transcript_path": str(transcript),
                        "cwd": str(vault)}, env={"MEMORY_HUB_LLM_URL": ""})
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 10
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not session.load(vault, "end-1").get("judged"):
        time.sleep(0.2)
    assert session.load(vault, "end-1").get("judged") == ["deploy-step-apply-secrets.md"]
    after = usage_of(vault, "deploy-step-apply-secrets.md").useful
    assert after == before + 1  # the assistant read the file (Read tool) and quoted it


def test_install_hooks_is_idempotent_and_keeps_other_hooks(tmp_path) -> None:
    project = tmp_path / "proj"
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    mine = {"type": "command", "command": "echo mine"}
    settings.write_text(json.dumps({"model": "x", "hooks": {"UserPromptSubmit": [{"hooks": [mine]}],
                                                            "PreToolUse": [{"matcher": "Bash", "hooks": [mine]}]}}))
    first = install("claude-code", project=project)
    text1 = settings.read_text()
    second = install("claude-code", project=project)
    assert first["changed"] and not second["changed"] and settings.read_text() == text1
    data = json.loads(text1)
    assert data["model"] == "x" and data["hooks"]["PreToolUse"] == [{"matcher": "Bash", "hooks": [mine]}]
    ups = data["hooks"]["UserPromptSubmit"]
    assert ups[0] == {"hooks": [mine]}
    ours = [h for g in ups for h in g["hooks"] if "memory-hub" in h["command"]]
    assert len(ours) == 1 and ours[0]["command"].endswith("memory-hub hook claude-code")
    # the installed command really runs: a bad event through it still exits 0 quietly
    proc = subprocess.run(ours[0]["command"], shell=True, input="{}", capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == ""
    assert [g["matcher"] for g in data["hooks"]["PostToolUse"]] == ["Read"]
    for event in ("PreCompact", "Stop", "SessionEnd"):
        assert len(data["hooks"][event]) == 1


def test_install_hooks_cli_refuses_broken_json(tmp_path) -> None:
    project = tmp_path / "proj"
    (project / ".codex").mkdir(parents=True)
    broken = project / ".codex" / "hooks.json"
    broken.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "memory_hub.cli", "install-hooks", "codex", "--project", str(project)],
                          capture_output=True, text=True, cwd=REPO, timeout=30)
    assert proc.returncode == 1 and "not valid JSON" in proc.stderr
    assert broken.read_text() == "{not json"
    broken.unlink()
    proc = subprocess.run([sys.executable, "-m", "memory_hub.cli", "install-hooks", "codex", "--project", str(project),
                           "--json"], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert proc.returncode == 0 and json.loads(proc.stdout)["changed"]
    assert "UserPromptSubmit" in json.loads(broken.read_text())["hooks"]


def test_recall_and_stats_commands(template_vault) -> None:
    vault, _ = template_vault
    base = [sys.executable, "-m", "memory_hub.cli", "--vault", str(vault)]
    proc = subprocess.run(base + ["recall", "DB フェイルオーバー の手順", "--json"], capture_output=True, text=True,
                          cwd=REPO, timeout=30)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["injected"][0] == "runbooks/db-failover.md" and data["tokens"] <= 1200
    stats = subprocess.run(base + ["stats", "--json"], capture_output=True, text=True, cwd=REPO, timeout=30)
    assert json.loads(stats.stdout)["served_by"] == {"cli": 1}


def test_warm_recall_follows_the_watcher_without_a_walk_per_prompt(template_vault) -> None:
    from memory_hub.retrieval.recall import recaller_for_state
    from memory_hub.server.state import ServerState
    from memory_hub.server.watcher import Watcher

    vault, store = template_vault
    state = ServerState.open(vault)
    state.watcher = Watcher(state.vault, state.store).start()
    try:
        recaller = recaller_for_state(state)
        assert recaller.refresh_interval is None  # prompts never stat the vault
        recaller.refresh()
        walked = recaller.index.last_refresh
        (vault / "zanzibar-ferry-schedule.md").write_text(
            "---\ntitle: Zanzibar ferry schedule\ndescription: When the ferries run\n---\n\nFerries leave at 7.\n",
            encoding="utf-8")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "zanzibar-ferry-schedule.md" not in recaller.index.data.notes:
            time.sleep(0.1)
        result = recaller.recall("when does the zanzibar ferry leave in the morning")
        assert result.notes and result.notes[0].path == "zanzibar-ferry-schedule.md"
        assert recaller.index.last_refresh >= walked
    finally:
        state.watcher.stop()


def test_a_cold_recall_past_the_deadline_is_one_none_line_and_not_shown_to_the_session(
        template_vault, monkeypatch) -> None:
    """The hook gave up and printed nothing: the block the slow recall finds later was never seen
    by the agent, so the session must not exclude its notes next time, and the prompt keeps one
    telemetry line (``served_by: none``), not a second one when the recall finishes."""
    from memory_hub.team import recall as team_recall

    vault, _ = template_vault
    real = team_recall.cold_recaller
    finished = []

    class Slow:  # the real recaller, behind a disk that answers late
        def __init__(self, inner) -> None:
            self.inner = inner
            self.vault = inner.vault

        def recall(self, *a, **k):
            time.sleep(1.2)
            out = self.inner.recall(*a, **k)
            finished.append(bool(out.block and out.block.included))
            return out

    monkeypatch.setattr(team_recall, "cold_recaller", lambda *a, **k: Slow(real(*a, **k)))
    monkeypatch.setenv(claude_code.DEADLINE_ENV, "0.5")
    out = io.StringIO()
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "late-1", "prompt": PROMPT}
    assert claude_code.run("claude-code", str(vault), io.StringIO(json.dumps(event)), out) == 0
    assert out.getvalue() == ""
    end = time.monotonic() + 20
    while not finished and time.monotonic() < end:
        time.sleep(0.05)
    assert finished == [True]  # it did find notes, after the hook had given up
    time.sleep(0.2)
    claude_code.finish_after_reply(False)
    lines = [e for e in recalls(vault) if e.get("session") == "late-1"]
    assert [e["served_by"] for e in lines] == ["none"] and "deadline" in lines[0]["fallback"]
    assert session.load(vault, "late-1")["injected"] == []
