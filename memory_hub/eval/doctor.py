"""``memory-hub doctor``: is this installation set up right, and what exactly to do when it is not.

Each check says pass, warn or fail in one line, with a one-line fix. *fail* means something that
is installed or configured does not work (a broken settings file, a hook whose program is gone, a
vault that does not exist); *warn* means something is missing or degraded but everything still
answers (no server running, vectors not built yet, uncommitted notes). A fresh vault with no server
therefore warns and never fails. The checks only read: nothing here writes a file.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import config

PASS, WARN, FAIL = "pass", "warn", "fail"


@dataclass
class Check:
    name: str
    status: str
    message: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Report:
    vault: str
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.status != FAIL for c in self.checks)

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for c in self.checks if c.status == s) for s in (PASS, WARN, FAIL)}

    def as_dict(self) -> dict[str, Any]:
        return {"vault": self.vault, "ok": self.ok, "counts": self.counts(),
                "checks": [c.as_dict() for c in self.checks]}


# -- the checks -----------------------------------------------------------------------------------

def check_settings(vault: Path, error: str | None) -> Check:
    if error:
        return Check("settings", FAIL, error, "fix that line (`memory-hub config` shows every setting and its source)")
    s = config.load_settings(vault if vault.is_dir() else None)
    files = [f"{layer}: {p}" for layer, p in s.files.items()]
    return Check("settings", PASS, "; ".join(files) if files else "no settings files: defaults everywhere",
                 data={"files": {k: str(v) for k, v in s.files.items()}})


def check_vault(vault: Path, source: str) -> Check:
    if not vault.is_dir():
        return Check("vault", FAIL, f"{vault} (chosen by {source}) does not exist",
                     f"memory-hub init {shlex.quote(str(vault))}", {"path": str(vault), "source": source})
    return Check("vault", PASS, f"{vault} (chosen by {source})", data={"path": str(vault), "source": source})


def check_entry_point() -> Check:
    from ..launcher import launcher, source_checkout

    run = launcher()
    data = {"command": list(run.argv), "source": run.source, "checkout": str(source_checkout() or "")}
    if run.warning:
        return Check("entry point", WARN, run.warning,
                     "make install (in the clone), or pipx install / uv tool install the project", data)
    return Check("entry point", PASS, f"hooks and schedules run {run.command()}", data=data)


def check_index(vault: Path) -> Check:
    if not config.db_path(vault).is_file():
        return Check("index", WARN, "not indexed yet", "memory-hub index")
    from ..index.store import Store
    from .health import pending_changes

    store = Store(vault)
    try:
        notes = store.conn.execute("SELECT count(*) FROM notes WHERE kind != 'attachment'").fetchone()[0]
        problems = store.conn.execute("SELECT count(*) FROM problems").fetchone()[0]
        pending = pending_changes(store)
    finally:
        store.close()
    data = {"notes": notes, "pending_changes": pending, "problems": problems}
    extra = f"; {problems} files could not be indexed (`memory-hub status` says why)" if problems else ""
    if pending:
        return Check("index", WARN, f"{notes} notes, {pending} changes not indexed yet{extra}",
                     "memory-hub index (or keep `memory-hub serve` running: its watcher indexes edits)", data)
    return Check("index", PASS, f"{notes} notes, up to date{extra}", data=data)


def check_model() -> Check:
    from ..index.embed.loader import e5_onnx_dir, onnx_build_state

    folder = e5_onnx_dir()
    state = onnx_build_state(folder)
    if state == "ok":
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        version = f"{manifest.get('model')}@{manifest.get('version')} ({manifest.get('backend')})"
        return Check("model", PASS, f"{version} in {folder}", data={"folder": str(folder), "version": version})
    what = "not built yet (it is built on first need, once)" if state == "missing" else "out of date"
    return Check("model", WARN, f"e5 ONNX model {what}: {folder}", "memory-hub models build",
                 {"folder": str(folder), "state": state})


def check_vectors(vault: Path) -> Check:
    from .health import vector_coverage

    if not config.db_path(vault).is_file():
        return Check("vectors", WARN, "no index yet", "memory-hub index")
    cov = vector_coverage(vault)
    if cov is None:
        return Check("vectors", WARN, "no vectors yet: search is lexical only", "memory-hub index")
    if "error" in cov:
        return Check("vectors", WARN, f"cannot check: {cov['error']}", "memory-hub models build; memory-hub index",
                     cov)
    msg = f"{cov['fresh']}/{cov['expected']} notes have fresh vectors ({cov['embedder']})"
    if not cov["ok"]:
        return Check("vectors", WARN, msg + f"; {len(cov['stale'])} stale, {len(cov['missing'])} missing",
                     "memory-hub index", {k: cov[k] for k in ("fresh", "expected", "embedder")})
    return Check("vectors", PASS, msg, data={k: cov[k] for k in ("fresh", "expected", "embedder")})


def check_recall_index(vault: Path) -> Check:
    from ..retrieval.recall import RecallIndex

    index = RecallIndex(vault)
    if not index.path.is_file():
        old = index.old_files()
        if old:
            return Check("recall index", WARN, f"{old[0]} is an earlier version's: the next refresh rebuilds it",
                         "memory-hub index")
        return Check("recall index", WARN, "not built yet: the first prompts build it on the hook's clock",
                     "memory-hub index")
    if not index.load():
        return Check("recall index", WARN, f"{index.path} cannot be read ({index.load_error or 'another version'})",
                     "memory-hub index")
    age = time.time() - index.saved_at()
    index.close()
    return Check("recall index", PASS, f"{len(index.data.notes)} notes, saved {_ago(age)} ago",
                 data={"notes": len(index.data.notes), "path": str(index.path)})


def check_server(vault: Path) -> Check:
    from ..server.local_socket import UnsafeSocketDir, request, socket_path

    try:
        path = socket_path(vault)
        reply = request(vault, {"op": "ping"}, timeout=1.0)
    except UnsafeSocketDir as exc:
        return Check("server", FAIL, f"the hooks socket's folder is not private, so nothing uses it: {exc}",
                     "make it yours with mode 0700 (or remove it), or set $XDG_RUNTIME_DIR to a private folder")
    if reply and reply.get("ok"):
        return Check("server", PASS, f"`memory-hub serve` (pid {reply.get('pid')}) serves {reply.get('vault')} "
                     f"and answers on {path}",
                     data={"socket": str(path), "pid": reply.get("pid"), "vault": reply.get("vault")})
    hint = "memory-hub serve (stdio servers are started by the agent; hooks and CLI search then answer warm)"
    if path.exists():
        return Check("server", WARN, f"{path} exists but nobody answers (a server that crashed?)", hint)
    return Check("server", WARN, "no server running: hooks and CLI searches work in-process, slower", hint)


def _git(vault: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=vault, capture_output=True, text=True,
                          env=dict(os.environ, GIT_TERMINAL_PROMPT="0"))


def check_git(vault: Path) -> Check:
    if shutil.which("git") is None:
        return Check("git", WARN, "git is not installed: no history, autocommit or dream", "install git")
    top = _git(vault, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        return Check("git", WARN, "the vault is not a git repository: no history, autocommit or dream",
                     f"git -C {shlex.quote(str(vault))} init, or memory-hub init --commit {shlex.quote(str(vault))}")
    gitdir = Path(_git(vault, "rev-parse", "--absolute-git-dir").stdout.strip())
    ops = [name for marker, name in (("MERGE_HEAD", "a merge"), ("rebase-merge", "a rebase"),
                                     ("rebase-apply", "a rebase"), ("CHERRY_PICK_HEAD", "a cherry-pick"),
                                     ("REVERT_HEAD", "a revert"), ("BISECT_LOG", "a bisect"))
           if (gitdir / marker).exists()]
    status = _git(vault, "status", "--porcelain", "--untracked-files=all")
    dirty = [ln[3:] for ln in status.stdout.splitlines() if len(ln) > 3]
    detached = _git(vault, "symbolic-ref", "-q", "HEAD").returncode != 0
    has_commit = _git(vault, "rev-parse", "-q", "--verify", "HEAD").returncode == 0
    data = {"uncommitted": len(dirty), "operation": ops[0] if ops else None, "detached": detached}
    if ops:
        return Check("git", WARN, f"{ops[0]} is in progress: autocommit and dream wait for it",
                     "finish it (git status says how) or abort it", data)
    if not has_commit:
        return Check("git", WARN, "no commit yet", f"memory-hub init --commit {shlex.quote(str(vault))}", data)
    if detached:
        return Check("git", WARN, "HEAD is detached: commits made now belong to no branch",
                     "git switch <branch>", data)
    if dirty:
        return Check("git", WARN, f"{len(dirty)} files not committed (dream leaves uncommitted notes alone)",
                     "memory-hub autocommit (or schedule it: memory-hub schedule --install)", data)
    return Check("git", PASS, "clean, on a branch", data=data)


def _command_problem(command: str) -> str | None:
    """Why a recorded command line cannot run any more (its program or its Python is gone)."""
    from ..launcher import missing_program

    missing = missing_program(command)
    if missing:
        return f"its program {missing} no longer exists"
    words = shlex.split(command)
    if len(words) > 2 and words[1] == "-m" and words[2].startswith("memory_hub"):
        proc = subprocess.run([words[0], "-c", "import memory_hub"], capture_output=True, text=True, timeout=30)
        if proc.returncode != 0:
            return f"{words[0]} cannot import memory_hub any more"
    return None


def check_hooks(vault: Path, home: Path | None, projects: list[Path]) -> list[Check]:
    from ..hooks.install import installed_hooks

    found = installed_hooks(home=home, projects=projects)
    if not found:
        return [Check("agent hooks", PASS, "none installed (optional)", "memory-hub install-hooks claude-code")]
    checks = []
    for h in found:
        name = f"hooks: {h['agent']} {h['path']}"
        if "error" in h:
            checks.append(Check(name, FAIL, h["error"], "fix the JSON by hand"))
            continue
        problem = _command_problem(h["command"])
        agent_fix = f"memory-hub install-hooks {h['agent']}" + _where(h["path"], home)
        if problem:
            checks.append(Check(name, FAIL, f"`{h['command']}`: {problem}", agent_fix, h))
        elif h["vault"] and not Path(h["vault"]).is_dir():
            checks.append(Check(name, FAIL, f"pinned vault {h['vault']} does not exist",
                                f"memory-hub --vault PATH install-hooks {h['agent']}", h))
        elif h["vault"]:
            same = "" if Path(h["vault"]).resolve() == vault else f" (the CLI resolves {vault})"
            checks.append(Check(name, PASS, f"vault {h['vault']}{same}", data=h))
        else:
            checks.append(Check(name, WARN, f"no pinned vault: resolves {vault} here, but the agent's environment "
                                "may differ", f"memory-hub --vault {shlex.quote(str(vault))} install-hooks "
                                f"{h['agent']}" + _where(h["path"], home), h))
    return checks


def _where(settings_file: str, home: Path | None) -> str:
    path = Path(settings_file)
    home_base = Path(home or Path.home())
    if path.parent.parent == home_base:
        return ""
    return (" --local" if path.name == "settings.local.json" else "") + f" --project {shlex.quote(str(path.parent.parent))}"


_MCP_FILES = (".claude.json", ".mcp.json", ".cursor/mcp.json", ".kiro/settings/mcp.json", ".vscode/mcp.json")


def _mcp_entries(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(server name, entry) of every MCP server entry in one client config file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    if not isinstance(data, dict):
        return []
    tables = [data.get("mcpServers"), data.get("servers")]
    tables += [p.get("mcpServers") for p in (data.get("projects") or {}).values() if isinstance(p, dict)] \
        if isinstance(data.get("projects"), dict) else []
    return [(name, entry) for table in tables if isinstance(table, dict)
            for name, entry in table.items() if isinstance(entry, dict)]


def check_mcp_clients(vault: Path, home: Path | None, projects: list[Path]) -> list[Check]:
    """Memory Hub entries in MCP client configs: does the command exist, which vault does it serve."""
    home = Path(home or Path.home())
    files = [home / name for name in _MCP_FILES if name != ".mcp.json" and name != ".vscode/mcp.json"]
    files += [p / name for p in projects for name in _MCP_FILES if name != ".claude.json"]
    out: list[Check] = []
    for path in dict.fromkeys(files):
        for name, entry in _mcp_entries(path) if path.is_file() else []:
            words = [str(entry.get("command", ""))] + [str(a) for a in entry.get("args", []) if isinstance(a, str)]
            url = entry.get("url") or entry.get("serverUrl") or entry.get("httpUrl")
            if not any("memory-hub" in w or "memory_hub" in w for w in words) and name != "memory-hub":
                continue
            label = f"mcp: {name} in {path}"
            if url:
                out.append(Check(label, PASS, f"connects to {url} (the server there chooses the vault)"))
                continue
            problem = _command_problem(" ".join(shlex.quote(w) for w in words if w))
            env = entry.get("env") if isinstance(entry.get("env"), dict) else {}
            served = words[words.index("--vault") + 1] if "--vault" in words[:-1] else env.get("MEMORY_HUB_VAULT")
            served = os.path.expandvars(str(served)) if served else None
            if problem:
                out.append(Check(label, FAIL, f"`{' '.join(words)}`: {problem}",
                                 f"point it at {shutil.which('memory-hub') or 'the memory-hub command'}"))
            elif served and not Path(served).expanduser().is_dir():
                out.append(Check(label, FAIL, f"serves {served}, which does not exist",
                                 "fix --vault / MEMORY_HUB_VAULT in that entry"))
            else:
                out.append(Check(label, PASS, f"serves {served or f'{vault} (as the CLI resolves it here)'}"))
    return out


def check_git_hook(vault: Path) -> Check | None:
    from ..server.githook import installed_command

    command = installed_command(vault)
    if command is None:
        return None
    problem = _command_problem(command)
    if problem:
        return Check("git hook", FAIL, f"post-commit runs `{command}`: {problem}", "memory-hub install-git-hook")
    return Check("git hook", PASS, f"post-commit runs `{command} … sync`")


def check_schedule(vault: Path) -> list[Check]:
    from ..capture.schedule import installed_commands

    out = []
    for where, command in installed_commands(vault):
        problem = _command_problem(command)
        if problem:
            out.append(Check(f"schedule: {where}", FAIL, f"`{command}`: {problem}",
                             "memory-hub schedule --uninstall, then --install"))
        else:
            out.append(Check(f"schedule: {where}", PASS, f"runs `{command}`"))
    return out


def check_team(vault: Path) -> list[Check]:
    """Team memory: sync conflicts waiting for a person, team vaults that are configured but absent."""
    from ..vault.remote import unresolved
    from ..vaults import vault_set

    out = []
    waiting = unresolved(vault)
    if waiting:
        shown = ", ".join(f"{c['copy']} (of {c['note']})" for c in waiting[:5])
        out.append(Check("sync conflicts", WARN, f"{len(waiting)} conflict copy(ies) wait to be merged: {shown}"
                         + (" …" if len(waiting) > 5 else ""),
                         "merge the text you need into the note, then delete the copy and the note's "
                         "'Sync conflict' callout", {"conflicts": waiting}))
    try:
        team = vault_set(vault)
    except config.ConfigError as exc:
        return [*out, Check("team vaults", FAIL, str(exc), "fix [vaults.NAME] in the user settings")]
    for ref in team.missing:
        out.append(Check(f"team vault {ref.name}", WARN, f"configured at {ref.path}, which does not exist: "
                         "it is not searched", f"git clone <the team remote> {shlex.quote(str(ref.path))}"))
    for ref in team.refs[1:]:
        out.append(Check(f"team vault {ref.name}", PASS, f"searched with this vault ({ref.path})"
                         + (f"; hooks ask it in {len(ref.projects)} project folder(s)" if ref.projects else "")))
    out += check_tokens(vault)
    return out


def check_tokens(vault: Path) -> list[Check]:
    """The shared server's tokens file: readable, valid, and who may write."""
    from ..server.tokens import TokensError, default_path, load

    named = config.settings(vault)["server.tokens_file"]
    path = Path(named) if named else default_path()
    if not path.exists():
        if named:
            return [Check("server tokens", FAIL, f"server.tokens_file names {path}, which does not exist",
                          f"memory-hub token add NAME --scope read --file {shlex.quote(str(path))}")]
        return []
    try:
        table = load(path)
    except TokensError as exc:
        return [Check("server tokens", FAIL, str(exc), "fix the file; `serve --transport http` refuses to start")]
    scopes = ", ".join(f"{e.principal.name} ({e.principal.scope})" for e in table.entries) or "none"
    return [Check("server tokens", PASS, f"{len(table)} named token(s) in {path}: {scopes}",
                  data={"tokens": [{"name": e.principal.name, "scope": e.principal.scope,
                                    "rate_per_minute": e.rate_per_minute} for e in table.entries]})]


def check_inotify(vault: Path) -> Check | None:
    limit_file = Path("/proc/sys/fs/inotify/max_user_watches")
    if not limit_file.is_file():
        return None
    try:
        limit = int(limit_file.read_text().strip())
    except (OSError, ValueError):
        return None
    from ..vault.walk import walk

    folders = {"."}
    for st in walk(vault):
        parent = st.path.rpartition("/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    n = len(folders)
    data = {"folders": n, "max_user_watches": limit}
    fix = "sudo sysctl fs.inotify.max_user_watches=524288 (and in /etc/sysctl.d/ to keep it)"
    if n >= limit:
        return Check("watcher", FAIL, f"{n} folders but inotify allows {limit} watches: the watcher cannot see "
                     "every folder (edits there wait for the 60 s rescan)", fix, data)
    if n > limit // 2:
        return Check("watcher", WARN, f"{n} folders use over half of the {limit} inotify watches (shared with "
                     "editors and other watchers)", fix, data)
    return Check("watcher", PASS, f"{n} folders, inotify allows {limit} watches", data=data)


def check_hook_failures() -> Check | None:
    from .telemetry import events_without_vault

    recent = [e for e in events_without_vault() if e.get("ts", 0) > time.time() - 7 * 86400]
    if not recent:
        return None
    last = recent[-1]
    return Check("hook runs", WARN, f"{len(recent)} hook runs in the last 7 days found no vault (last: "
                 f"{last.get('reason', '?')})", "pin the vault: memory-hub --vault PATH install-hooks AGENT",
                 {"count": len(recent), "last": last})


def _ago(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def run_doctor(vault_arg: str | None = None, *, settings_error: str | None = None, home: Path | None = None,
               projects: list[Path] | None = None) -> Report:
    """Every check, in the order a person would fix things."""
    vault, source = config.vault_choice(vault_arg)
    checks = [check_settings(vault, settings_error), check_vault(vault, source), check_entry_point()]
    usable = vault.is_dir() and settings_error is None
    steps: list[Callable[[], Check | list[Check] | None]] = [check_model]
    if usable:
        steps = [lambda: check_index(vault), check_model, lambda: check_vectors(vault),
                 lambda: check_recall_index(vault), lambda: check_server(vault), lambda: check_git(vault),
                 lambda: check_git_hook(vault), lambda: check_schedule(vault), lambda: check_team(vault),
                 lambda: check_inotify(vault)]
    where = projects if projects is not None else [Path.cwd()]
    steps += [lambda: check_mcp_clients(vault, home, where), lambda: check_hooks(vault, home, where),
              check_hook_failures]
    for step in steps:
        try:
            got = step()
        except Exception as exc:  # noqa: BLE001 - one broken check must not hide the others
            got = Check(getattr(step, "__name__", "check"), FAIL, f"the check itself failed: "
                        f"{type(exc).__name__}: {exc}")
        if isinstance(got, Check):
            checks.append(got)
        elif got:
            checks.extend(got)
    return Report(str(vault), checks)
