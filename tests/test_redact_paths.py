"""Every path that writes outside text into the vault redacts it: end to end, then grep the vault
(files and index) and the git history after an autocommit.

Entry points: the Claude Code hook (a real ``memory-hub hook`` process reading a JSONL transcript),
``memory-hub braindump`` (text, title and tags), a page fetched for a capture (a loopback HTTP
server), the MCP ``capture`` tool, and ``learnings`` (rule-based through the CLI, and with an LLM
stand-in: the model must not see the secrets either).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from llm_stub import LLMStub

from memory_hub.capture.autocommit import autocommit
from memory_hub.capture.braindump import braindump
from memory_hub.capture.learnings import learnings_from_text

REPO = Path(__file__).resolve().parent.parent
CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "secrets_corpus.yaml").read_text(encoding="utf-8"))
SECRETS = CORPUS["secrets"]
KEPT = "\n".join(c["text"] for c in CORPUS["lookalikes"])
# The forms the issue found kept verbatim in saved transcripts, first; then the rest of the corpus.
ISSUE_FORMS = ["aws-secret-access-key-bare", "aws-configure-set", "mysql-dash-p-glued", "env-db-pass", "pass-equals",
               "password-flag-space", "sshpass-quoted", "password-is-prose", "redis-url-password-only",
               "slack-webhook", "azure-storage-connection-string", "docker-config-auth", "twilio-api-key",
               "sendgrid-key", "signing-key-64-hex-env", "short-bearer-token", "putty-key-file"]


def _parts(case: dict) -> list[str]:
    secret = case["secret"]
    return [str(s) for s in (secret if isinstance(secret, list) else [secret]) if str(s) not in KEPT]


def _cases(forms: list[str] | None = None) -> list[dict]:
    by_form = {c["form"]: c for c in SECRETS}
    return [by_form[f] for f in forms] if forms else SECRETS


def _git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=vault, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(template_vault) -> Path:
    vault, _ = template_vault
    _git(vault, "init", "-q", "-b", "main")
    _git(vault, "add", "-A")
    _git(vault, "commit", "-qm", "starter vault")
    return vault


def assert_nothing_leaked(vault: Path, cases: list[dict]) -> None:
    """No secret part in any file of the vault (index included) nor anywhere in its git history."""
    report = autocommit(vault, message="test: commit what the entry point wrote")
    assert report.committed, report
    history = _git(vault, "log", "-p", "--all", "--format=%H %s")
    blobs = [p.read_bytes() for p in vault.rglob("*") if p.is_file() and ".git" not in p.relative_to(vault).parts]
    for case in cases:
        for part in _parts(case):
            assert part not in history, f"{case['form']}: {part!r} is in the git history"
            raw = part.encode("utf-8")
            assert not any(raw in blob for blob in blobs), f"{case['form']}: {part!r} is in a vault file"


def _cli(vault: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memory_hub.cli", "--vault", str(vault), *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def _transcript(path: Path, cases: list[dict]) -> None:
    """A Claude Code JSONL: user asks, assistant answers with a few secrets each, a tool call between."""
    lines = []
    for i in range(0, len(cases), 4):
        chunk = cases[i:i + 4]
        lines.append({"type": "user", "message": {"role": "user", "content": f"step {i}: set up the deploy credentials"}})
        body = "Done. What I ran:\n\n```\n" + "\n".join(c["text"] for c in chunk) + "\n```\n"
        lines.append({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": body},
            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": chunk[0]["text"]}}]}})
        lines.append({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}]}})
    path.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")


@pytest.mark.parametrize("forms", [ISSUE_FORMS, None], ids=["issue-forms", "whole-corpus"])
def test_hook_transcript_capture_keeps_no_secret(repo: Path, tmp_path: Path, forms: list[str] | None) -> None:
    cases = _cases(forms)
    transcript = tmp_path / "session.jsonl"
    _transcript(transcript, cases)
    event = {"hook_event_name": "Stop", "session_id": "sec-0001", "transcript_path": str(transcript), "cwd": str(repo)}
    proc = _cli(repo, "hook", "claude-code", stdin=json.dumps(event))
    assert proc.returncode == 0, proc.stderr
    captures = list((repo / "inbox").glob("*sec-0001*.md"))
    assert len(captures) == 1
    text = captures[0].read_text(encoding="utf-8")
    assert "[REDACTED:" in text and "set up the deploy credentials" in text  # the conversation is still there
    assert_nothing_leaked(repo, cases)


def test_braindump_redacts_text_title_and_tags_and_says_so(repo: Path) -> None:
    cases = _cases()
    text = "Notes from the migration, keep for later:\n\n" + "\n\n".join(c["text"] for c in cases)
    proc = _cli(repo, "braindump", "-", "--json", "--no-fetch", "--title", "DB_PASS=Fake-Pw-42xyz for staging",
                "--tag", "ghp_PyhzAnar3ZLt4bnlz2MPKgcjnCqaXNv1syee", stdin=text)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["redacted"] and sum(result["redacted"].values()) >= len(cases)
    assert any("redacted" in w for w in result["warnings"])
    assert "Fake-Pw-42xyz" not in result["title"]
    note = (repo / result["path"]).read_text(encoding="utf-8")
    assert "Notes from the migration" in note
    assert_nothing_leaked(repo, cases)


class _Page(BaseHTTPRequestHandler):
    body = b""

    def log_message(self, *args: object) -> None:
        return

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def test_a_fetched_page_is_redacted_before_it_lands_in_the_capture(repo: Path) -> None:
    cases = _cases(ISSUE_FORMS[:10])
    page = "<html><head><title>Setup with sk_live_Y7uq6T2bwGfcCvJAXrF6bnZ3</title></head><body><article>"
    page += "".join(f"<p>{c['text']}</p>" for c in cases) + "</article></body></html>"
    _Page.body = page.encode("utf-8")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = braindump(repo, f"read later: http://127.0.0.1:{server.server_port}/setup", fetch_urls=True)
    finally:
        server.shutdown()
        server.server_close()
    assert result.urls and result.urls[0]["ok"], result.urls
    assert result.redacted
    note = (repo / result.path).read_text(encoding="utf-8")
    assert "## Source:" in note and "sk_live_Y7uq6T2bwGfcCvJAXrF6bnZ3" not in note
    assert_nothing_leaked(repo, cases)


def test_mcp_capture_tool_redacts(repo: Path) -> None:
    from memory_hub.server import tools
    from memory_hub.server.state import ServerState

    cases = _cases(ISSUE_FORMS)
    state = ServerState.open(repo)
    out = tools.capture(state, "\n".join(c["text"] for c in cases), title="credentials used in the incident")
    assert out["indexed"] and out["redacted"]
    assert_nothing_leaked(repo, cases)


def test_learnings_redact_before_the_model_sees_the_text_and_before_writing(repo: Path, monkeypatch) -> None:
    cases = _cases(ISSUE_FORMS)
    transcript = "\n".join(f"The fix was to export the right value, because the job failed: {c['text']}" for c in cases)
    reply = json.dumps({"learnings": [{"title": "Deploy needs DB_PASS=Fake-Pw-42xyz exported",
                                       "text": "The root cause: sshpass -p 'FakeSsh!Pass9' was missing in the job.",
                                       "tags": ["deploy"]}]})
    with LLMStub(lambda _payload: reply) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        report = learnings_from_text(repo, transcript, use_llm=True)
    assert report.judge == "llm" and report.written
    sent = json.dumps(stub.requests)
    for case in cases:
        for part in _parts(case):
            assert part not in sent, f"{case['form']} was sent to the model"
    assert any("redacted" in w for w in report.warnings)
    assert_nothing_leaked(repo, cases)


def test_learnings_cli_rule_based_redacts(repo: Path) -> None:
    cases = _cases(ISSUE_FORMS)
    transcript = "\n".join(f"Turns out the `deploy` job failed because the config must hold: {c['text']}" for c in cases)
    proc = _cli(repo, "learnings", "-", "--json", stdin=transcript)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["written"]
    assert_nothing_leaked(repo, cases)
