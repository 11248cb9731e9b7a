"""Recall on every prompt across team vaults, and team vaults kept fresh by a running server.

Two real vault repos (a personal vault and a team vault cloned from a bare remote), the mapping of
a project folder to the team vault in the user settings, real hook processes, a real
``memory-hub serve`` with its real watchers. Nothing mocked; freshness is polled with a generous
bound, never timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memory_hub.eval import telemetry
from memory_hub.index.sync import sync
from memory_hub.server import local_socket

MEMORY_HUB = str(Path(sys.executable).parent / "memory-hub")
PROMPT = "how do we handle kafka partition rebalancing on the brokers?"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _write(root: Path, notes: dict[str, str]) -> None:
    for rel, text in notes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


@pytest.fixture
def team_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    personal = tmp_path / "me"
    personal.mkdir()
    git(personal, "init", "-q", "-b", "main")
    _write(personal, {
        "ideas.md": "---\ntitle: Kafka ideas\n---\n# Kafka ideas\n\nMy own notes on kafka partition rebalancing.\n",
        "diary.md": "# Diary\n\nNothing about brokers here.\n"})
    git(personal, "add", "-A")
    git(personal, "commit", "-qm", "personal notes")
    remote = tmp_path / "platform.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(remote), str(seed))
    _write(seed, {
        "runbooks/kafka.md": "---\ntitle: Kafka runbook\n---\n# Kafka runbook\n\nRestart a kafka broker safely; "
                             "check partition rebalancing first.\n",
        "runbooks/dns.md": "# DNS\n\nFlush resolvers.\n"})
    git(seed, "add", "-A")
    git(seed, "commit", "-qm", "team notes")
    git(seed, "push", "-q", "origin", "main")
    team = tmp_path / "platform"
    git(tmp_path, "clone", "-q", str(remote), str(team))
    for vault in (personal, team):
        sync(vault, progress=False)
    project = tmp_path / "src" / "payments"
    project.mkdir(parents=True)
    home = tmp_path / "cfg"
    (home / "memory-hub").mkdir(parents=True)
    (home / "memory-hub" / "config.toml").write_text(
        f'vault = "{personal}"\n\n[vaults.platform]\npath = "{team}"\nprojects = ["{project}"]\n', encoding="utf-8")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return {"personal": personal, "team": team, "seed": seed, "project": project, "elsewhere": tmp_path}


def hook(vault: Path, session: str, cwd: Path, prompt: str = PROMPT) -> str:
    """A real hook process; the block it injects ("" when none)."""
    event = {"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": prompt, "cwd": str(cwd)}
    proc = subprocess.run([MEMORY_HUB, "--vault", str(vault), "hook", "claude-code"], input=json.dumps(event),
                          capture_output=True, text=True, timeout=60, cwd=cwd, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"] if proc.stdout.strip() else ""


def recall_of(vault: Path, session: str, bound: float = 30.0) -> dict:
    """The telemetry line of a session's last prompt (a cold hook writes it from a forked child after
    it replied, so it may come a moment after the hook process ended)."""
    deadline = time.monotonic() + bound
    while True:
        found = [e for e in telemetry.events(vault) if e.get("event") == "recall" and e.get("session") == session]
        if found:
            return found[-1]
        assert time.monotonic() < deadline, f"no recall line for session {session}"
        time.sleep(0.05)


class Server:
    """``memory-hub serve`` on stdio (stdin held open), its stderr collected."""

    def __init__(self, vault: Path) -> None:
        self.vault = vault
        self.proc = subprocess.Popen([MEMORY_HUB, "--vault", str(vault), "serve", "--no-warm"],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ))
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 60
        while local_socket.request(vault, {"op": "ping"}) is None:
            assert time.monotonic() < deadline and self.proc.poll() is None, "".join(self.lines)
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.reader.join(5)


def _where_it_stopped(team: Path, server: Server) -> str:
    """For a failure message: whether the edited note reached the team vault's index (the watcher's
    part) or not, and the server's last words."""
    import sqlite3

    from memory_hub.config import DB_FILENAME, INDEX_DIRNAME

    conn = sqlite3.connect(team / INDEX_DIRNAME / DB_FILENAME)
    try:
        indexed = bool(conn.execute("SELECT 1 FROM notes WHERE path = 'runbooks/etcd.md'").fetchall())
    finally:
        conn.close()
    return f"in the team vault's index: {indexed}; server stderr: {''.join(server.lines)[-3000:]!r}"


def poll(check, what: str, bound: float = 60.0):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + bound
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"not within {bound:.0f}s: {what}"
        time.sleep(0.25)


def test_every_prompt_recalls_the_team_vaults_of_its_folder_warm_and_cold(team_setup) -> None:
    personal, project = team_setup["personal"], team_setup["project"]
    cold = hook(personal, "cold-1", project)
    lines = cold.splitlines()[2:-1]
    # one block, one fused ranking, every line naming its vault
    assert cold.count("<vault-memory>") == 1
    refs = [line.split("|")[2] for line in lines]
    assert "personal:ideas.md" in refs and "platform:runbooks/kafka.md" in refs
    assert all(ref.split(":", 1)[0] in ("personal", "platform") for ref in refs)
    assert [int(line.split("|")[0]) for line in lines] == list(range(1, len(lines) + 1))
    event = recall_of(personal, "cold-1")
    assert event["served_by"] == "cold" and event["vaults"]["asked"] == ["personal", "platform"]
    assert event["injected"] == refs
    # outside the project folder the team vault is not asked: the personal vault alone, unprefixed
    alone = hook(personal, "cold-2", team_setup["elsewhere"])
    assert "|ideas.md|" in alone and "platform:" not in alone and "personal:" not in alone
    # the session remembers what it was shown, in every vault
    assert "kafka" not in hook(personal, "cold-1", project).lower()
    assert "ideas.md" not in hook(personal, "cold-1", team_setup["elsewhere"])  # shown as personal:ideas.md

    server = Server(personal)
    try:
        n = iter(range(1000))  # until the server has its team vaults open (a prompt meanwhile goes cold)
        def served_warm() -> str | None:
            session = f"warm-{next(n)}"
            hook(personal, session, project)
            return session if recall_of(personal, session)["served_by"] == "warm" else None

        session = poll(served_warm, "a prompt served by the running server")
        warm = hook(personal, "warm-fresh", project)
        assert recall_of(personal, "warm-fresh")["served_by"] == "warm"
        assert warm == cold  # the same block through the running server as in a cold process
        assert "platform:" not in hook(personal, "warm-elsewhere", team_setup["elsewhere"])
        assert hook(personal, session, project) == ""  # already shown this session, warm too
    finally:
        server.stop()


def test_a_running_server_keeps_its_team_vaults_fresh(team_setup) -> None:
    """A note pulled into the team vault by `sync --remote`, and one edited there by hand, reach the
    running server's recall without a restart (the team vault's own watcher)."""
    personal, team, seed, project = (team_setup[k] for k in ("personal", "team", "seed", "project"))
    server = Server(personal)
    n = iter(range(1000))  # a new session per prompt: nothing is left out as already shown
    try:
        poll(lambda: "platform:" in hook(personal, f"first-{next(n)}", project), "the server recalls the team vault")
        # a teammate pushes a note; this machine pulls it with sync --remote
        _write(seed, {"runbooks/zookeeper.md": "---\ntitle: Zookeeper quorum loss\n---\n# Zookeeper quorum\n\n"
                                               "Recover the zqxquorum ensemble before restarting brokers.\n"})
        git(seed, "add", "-A")
        git(seed, "commit", "-qm", "zookeeper runbook")
        git(seed, "push", "-q", "origin", "main")
        pulled = subprocess.run([MEMORY_HUB, "--vault", str(team), "sync", "--remote", "--json"],
                                capture_output=True, text=True, timeout=120, env=dict(os.environ))
        assert pulled.returncode == 0, pulled.stderr
        assert (team / "runbooks" / "zookeeper.md").is_file()
        poll(lambda: "platform:runbooks/zookeeper.md" in hook(personal, f"pull-{next(n)}", project,
                                                               "zookeeper zqxquorum ensemble recovery"),
             "a pulled team note recalled through the running server")
        # edited by hand in the team vault, nothing run: only the watcher can tell the server
        _write(team, {"runbooks/etcd.md": "---\ntitle: Etcd defrag\n---\n# Etcd defrag\n\n"
                                          "Defragment the zqyetcdword members one at a time.\n"})
        try:
            poll(lambda: "platform:runbooks/etcd.md" in hook(personal, f"edit-{next(n)}", project,
                                                              "etcd defragment zqyetcdword members"),
                 "a hand-edited team note recalled through the running server")
        except AssertionError as exc:  # seen once in CI (2026-12-03): say where the edit stopped
            raise AssertionError(f"{exc}\n{_where_it_stopped(team, server)}") from None
        assert "platform:runbooks/etcd.md" in hook(personal, "edit-final", project, "etcd defragment zqyetcdword")
        assert recall_of(personal, "edit-final")["served_by"] == "warm"  # through the server, not a cold process
        # `memory-hub search` asks the running server for its team vaults too
        found = subprocess.run([MEMORY_HUB, "--vault", str(personal), "search", "zqyetcdword", "--json", "--mode",
                                "lexical"], capture_output=True, text=True, timeout=60, env=dict(os.environ))
        assert found.returncode == 0, found.stderr
        data = json.loads(found.stdout)
        assert [r["ref"] for r in data["results"]] == ["platform:runbooks/etcd.md"]
        assert data["served_by"] == {"personal": "server", "platform": "server"}
    finally:
        server.stop()
