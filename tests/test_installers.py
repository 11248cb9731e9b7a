"""Installers and `doctor`, as a user runs them: real CLI processes, a private HOME, real git, and
stand-ins for crontab/systemctl/launchctl on PATH (no test ever touches a real crontab or agent).

Every installer runs the `memory-hub` on PATH (here a link in a temp bin, as `make install` makes),
pins what it resolved, keeps what it did not write, and `--uninstall` removes exactly its own part."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memory_hub.config import template_dir

REPO = Path(__file__).resolve().parent.parent
ENTRY = Path(sys.executable).parent / "memory-hub"

FAKE = """#!/bin/sh
# stand-in for {name}: records its arguments, keeps a crontab in a file
echo "{name} $*" >> "$FAKE_LOG"
if [ "{name}" = crontab ]; then
  if [ "$1" = "-l" ]; then [ -f "$FAKE_CRONTAB" ] && cat "$FAKE_CRONTAB" && exit 0; echo "no crontab for you" >&2; exit 1; fi
  if [ "$1" = "-" ]; then cat > "$FAKE_CRONTAB"; exit 0; fi
fi
exit 0
"""


@pytest.fixture
def user(tmp_path: Path) -> dict:
    """A person with a private HOME, `memory-hub` on PATH, and stand-in schedulers."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    home.mkdir()
    if not ENTRY.exists():
        pytest.skip(f"no console script at {ENTRY} (run `make setup`)")
    (bin_dir / "memory-hub").symlink_to(ENTRY)
    for name in ("crontab", "systemctl", "launchctl"):
        path = bin_dir / name
        path.write_text(FAKE.format(name=name))
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_HUB_") or k == "MEMORY_HUB_SHARED_DATA"}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_STATE_HOME": str(home / ".state"),
                "XDG_DATA_HOME": str(home / ".data"), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                "FAKE_LOG": str(tmp_path / "fake.log"), "FAKE_CRONTAB": str(tmp_path / "crontab.txt")})
    # never the real thing: every scheduler the code can reach is a stand-in
    for name in ("crontab", "systemctl", "launchctl"):
        assert shutil.which(name, path=env["PATH"]) == str(bin_dir / name)
    vault = tmp_path / "vault"
    shutil.copytree(template_dir(), vault)
    subprocess.run(["git", "init", "-q"], cwd=vault, check=True)
    subprocess.run(["git", "add", "-A"], cwd=vault, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=vault, check=True, env={**os.environ, **env})
    project = tmp_path / "project"
    project.mkdir()
    return {"env": env, "home": home, "bin": bin_dir, "vault": vault, "project": project, "tmp": tmp_path}


def mh(user: dict, *args: str, env: dict | None = None, stdin: str | None = None,
       cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(user["bin"] / "memory-hub"), *args], capture_output=True, text=True, timeout=120,
                          env={**user["env"], **(env or {})}, input=stdin, cwd=cwd or user["project"])
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_install_hooks_pins_the_vault_runs_and_uninstalls_exactly(user) -> None:
    vault = user["vault"]
    settings = user["home"] / ".claude" / "settings.json"
    settings.parent.mkdir()
    original = json.dumps({"model": "opus", "hooks": {"UserPromptSubmit": [{"hooks": [
        {"type": "command", "command": "echo theirs"}]}]}}, indent=2) + "\n"
    settings.write_text(original)
    settings.chmod(0o600)
    proc = mh(user, "--vault", str(vault), "install-hooks", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert f"vault:   {vault}" in proc.stdout and proc.stderr == ""  # stable command: nothing to warn about
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600  # the file keeps its permissions
    data = json.loads(settings.read_text())
    command = data["hooks"]["SessionEnd"][0]["hooks"][0]["command"]
    assert command == f"{user['bin'] / 'memory-hub'} hook claude-code --vault {vault}"
    assert data["hooks"]["UserPromptSubmit"][0] == {"hooks": [{"type": "command", "command": "echo theirs"}]}
    # the hook command really answers, from any folder, with the agent's environment unset
    event = {"hook_event_name": "UserPromptSubmit", "session_id": "s1",
             "prompt": "how do we rotate the TLS certificate on the legacy nginx VMs?"}
    env = {k: v for k, v in user["env"].items() if k not in ("XDG_DATA_HOME",)}
    env["MEMORY_HUB_HOOK_DEADLINE"] = "60"  # a cold in-process recall on 2 busy cores can pass 3 s
    ran = subprocess.run(command, shell=True, input=json.dumps(event), capture_output=True, text=True, timeout=60,
                         env=env, cwd="/")
    assert ran.returncode == 0 and "runbooks/tls-certificate-rotation.md" in ran.stdout, ran.stderr
    again = mh(user, "--vault", str(vault), "install-hooks", "claude-code", "--json")
    assert json.loads(again.stdout)["changed"] is False
    out = mh(user, "install-hooks", "claude-code", "--uninstall", "--json")
    assert json.loads(out.stdout)["removed"] == 5
    assert settings.read_text() == original and stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert json.loads(mh(user, "install-hooks", "claude-code", "--uninstall", "--json").stdout)["changed"] is False


def test_install_hooks_local_file_older_forms_and_a_missing_vault(user) -> None:
    project, vault = user["project"], user["vault"]
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    old = f"{sys.executable} -m memory_hub.hooks --vault {vault} claude-code"
    local.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": old}]}]}}))
    proc = mh(user, "--vault", str(vault), "install-hooks", "claude-code", "--local", "--json")
    data = json.loads(proc.stdout)
    assert data["path"] == str(local) and data["vault"] == str(vault)
    hooks = json.loads(local.read_text())["hooks"]
    assert len(hooks["Stop"]) == 1 and "memory_hub.hooks" not in json.dumps(hooks)  # the old entry was replaced
    assert not (project / ".claude" / "settings.json").exists()  # the committed file is untouched
    assert mh(user, "install-hooks", "claude-code", "--local", "--uninstall").returncode == 0
    assert not local.exists()  # it held only our hooks: nothing of ours is left behind
    # no vault: said loudly, and nothing pinned
    proc = mh(user, "--vault", str(user["tmp"] / "nowhere"), "install-hooks", "codex")
    assert proc.returncode == 0 and "warning: no vault at" in proc.stderr and "pin none" in proc.stderr
    assert "--vault" not in json.loads((user["home"] / ".codex" / "hooks.json").read_text())["hooks"]["Stop"][0][
        "hooks"][0]["command"]


def test_hook_that_finds_no_vault_says_so_and_exits_zero(user) -> None:
    event = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": "x", "prompt": "deploy rollback steps"})
    proc = mh(user, "hook", "claude-code", stdin=event)  # no vault anywhere: the default one does not exist
    assert proc.returncode == 0 and proc.stdout == ""
    assert "memory-hub hook: vault not found" in proc.stderr and "did nothing" in proc.stderr
    log = user["home"] / ".state" / "memory-hub" / "telemetry" / "no-vault.jsonl"
    entry = json.loads(log.read_text().splitlines()[-1])
    assert entry["hook"] == "UserPromptSubmit" and entry["agent"] == "claude-code" and "not found" in entry["reason"]
    report = json.loads(mh(user, "doctor", "--json").stdout)
    runs = [c for c in report["checks"] if c["name"] == "hook runs"]
    assert runs and runs[0]["status"] == "warn" and "found no vault" in runs[0]["message"]


def test_git_hook_install_and_uninstall_keep_the_persons_lines(user) -> None:
    vault = user["vault"]
    hook = vault / ".git" / "hooks" / "post-commit"
    assert mh(user, "--vault", str(vault), "install-git-hook").returncode == 0
    assert str(user["bin"] / "memory-hub") in hook.read_text()
    out = mh(user, "--vault", str(vault), "install-git-hook", "--uninstall", "--json")
    assert json.loads(out.stdout)["outcome"] == "deleted" and not hook.exists()
    mine = "#!/bin/sh\necho person > /dev/null\nexit 0\n"
    hook.write_text(mine)
    hook.chmod(0o750)
    mh(user, "--vault", str(vault), "install-git-hook")
    out = mh(user, "--vault", str(vault), "install-git-hook", "--uninstall")
    assert "the rest of the hook is kept" in out.stdout
    assert hook.read_text() == mine and stat.S_IMODE(hook.stat().st_mode) & 0o750 == 0o750
    assert "nothing to remove" in mh(user, "--vault", str(vault), "install-git-hook", "--uninstall").stdout


def test_schedules_install_and_uninstall_exactly_their_own_entries(user) -> None:
    vault = user["vault"]
    crontab = Path(user["env"]["FAKE_CRONTAB"])
    theirs = "0 3 * * * /usr/bin/backup --all\n"
    crontab.write_text(theirs)
    assert mh(user, "--vault", str(vault), "schedule", "--install", "--kind", "cron").returncode == 0
    lines = crontab.read_text().splitlines()
    assert lines[0] == theirs.strip() and len(lines) == 3
    assert all(f"{user['bin'] / 'memory-hub'} --vault {vault}" in ln for ln in lines[1:])
    assert "already up to date" in mh(user, "--vault", str(vault), "schedule", "--install", "--kind", "cron").stdout
    assert mh(user, "--vault", str(vault), "schedule", "--uninstall", "--kind", "cron").returncode == 0
    assert crontab.read_text() == theirs

    units = user["home"] / ".config" / "systemd" / "user"
    assert mh(user, "--vault", str(vault), "schedule", "--install", "--kind", "systemd").returncode == 0
    made = sorted(p.name for p in units.iterdir())
    assert len(made) == 4 and all(n.startswith("memory-hub-") for n in made)
    other = units / "something-else.timer"
    other.write_text("[Timer]\n")
    log = Path(user["env"]["FAKE_LOG"]).read_text()
    assert "systemctl --user enable --now memory-hub-autocommit-" in log
    assert mh(user, "--vault", str(vault), "schedule", "--uninstall", "--kind", "systemd").returncode == 0
    assert [p.name for p in units.iterdir()] == ["something-else.timer"]
    assert "systemctl --user disable --now memory-hub-autocommit-" in Path(user["env"]["FAKE_LOG"]).read_text()

    agents = user["home"] / "Library" / "LaunchAgents"
    assert mh(user, "--vault", str(vault), "schedule", "--install", "--kind", "launchd").returncode == 0
    assert len(list(agents.iterdir())) == 2
    assert mh(user, "--vault", str(vault), "schedule", "--uninstall", "--kind", "launchd").returncode == 0
    assert list(agents.iterdir()) == [] and "launchctl unload -w" in Path(user["env"]["FAKE_LOG"]).read_text()


def test_doctor_on_a_fresh_vault_warns_and_never_fails(user) -> None:
    vault = user["tmp"] / "fresh"
    assert mh(user, "init", str(vault)).returncode == 0
    proc = mh(user, "--vault", str(vault), "doctor", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] and report["counts"]["fail"] == 0, proc.stdout
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["vault"]["status"] == "pass" and by_name["server"]["status"] == "warn"
    assert by_name["vectors"]["status"] == "warn" and by_name["vectors"]["fix"] == "memory-hub index"
    assert by_name["entry point"]["status"] == "pass" and by_name["recall index"]["status"] == "pass"
    assert by_name["git"]["status"] == "pass" and by_name["settings"]["status"] == "pass"
    assert all(c["status"] == "pass" or c["fix"] for c in report["checks"])  # every warning says what to do
    text = mh(user, "--vault", str(vault), "doctor")
    assert text.returncode == 0 and "WARN  server" in text.stdout and "fix: memory-hub serve" in text.stdout


def test_doctor_fails_on_hooks_whose_command_is_gone_and_on_a_bad_settings_file(user) -> None:
    vault = user["vault"]
    gone = user["tmp"] / "moved-clone" / ".venv" / "bin" / "memory-hub"
    assert mh(user, "--vault", str(vault), "install-hooks", "claude-code",
              env={"MEMORY_HUB_COMMAND": str(gone)}).returncode == 0
    codex = user["home"] / ".codex" / "hooks.json"
    codex.parent.mkdir()
    codex.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [
        {"type": "command", "command": f"/old/clone/.venv/bin/python -m memory_hub.hooks --vault {vault} codex"}]}]}}))
    mh(user, "--vault", str(vault), "install-git-hook", env={"MEMORY_HUB_COMMAND": str(gone)})
    proc = mh(user, "--vault", str(vault), "doctor", "--json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    failed = {c["name"]: c for c in report["checks"] if c["status"] == "fail"}
    claude = next(c for n, c in failed.items() if n.startswith("hooks: claude-code"))
    assert str(gone) in claude["message"] and "no longer exists" in claude["message"]
    assert claude["fix"] == "memory-hub install-hooks claude-code"
    assert any(n.startswith("hooks: codex") and "/old/clone/.venv/bin/python" in c["message"] for n, c in failed.items())
    assert "git hook" in failed
    # reinstalling with the command on PATH repairs them
    mh(user, "--vault", str(vault), "install-hooks", "claude-code")
    mh(user, "--vault", str(vault), "install-hooks", "codex")
    mh(user, "--vault", str(vault), "install-git-hook")
    report = json.loads(mh(user, "--vault", str(vault), "doctor", "--json").stdout)
    assert report["ok"], [c for c in report["checks"] if c["status"] == "fail"]
    # a broken settings file is a failure that names the file and line, not a crash
    bad = vault / ".memory-hub" / "config.toml"
    bad.parent.mkdir()
    bad.write_text("[search]\nk = 0\n")
    proc = mh(user, "--vault", str(vault), "doctor")
    assert proc.returncode == 1 and "FAIL  settings" in proc.stdout and f"{bad}:2" in proc.stdout


def test_doctor_reads_mcp_client_configs(user) -> None:
    vault, project = user["vault"], user["project"]
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "memory-hub": {"command": "memory-hub", "args": ["serve"], "env": {"MEMORY_HUB_VAULT": str(vault)}},
        "other-tool": {"command": "/nonexistent/other", "args": []}}}))
    (user["home"] / ".claude.json").write_text(json.dumps({"projects": {"/x": {"mcpServers": {
        "notes": {"command": "/gone/.venv/bin/memory-hub", "args": ["serve", "--vault", str(vault)]}}}}}))
    report = json.loads(mh(user, "--vault", str(vault), "doctor", "--json").stdout)
    mcp = {c["name"]: c for c in report["checks"] if c["name"].startswith("mcp:")}
    assert len(mcp) == 2  # someone else's server is not ours to judge
    ok = mcp[f"mcp: memory-hub in {project / '.mcp.json'}"]
    assert ok["status"] == "pass" and str(vault) in ok["message"]
    gone = mcp[f"mcp: notes in {user['home'] / '.claude.json'}"]
    assert gone["status"] == "fail" and "/gone/.venv/bin/memory-hub no longer exists" in gone["message"]
    assert not report["ok"]
