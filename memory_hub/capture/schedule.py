"""Schedule entries for the background paths: auto-commit every 10 minutes, dream every hour.

``entries`` renders all three forms (cron, a systemd user timer, launchd agents) so a person can
read exactly what would run; ``install`` writes one form, idempotently, and only when asked;
``uninstall`` removes exactly what ``install`` wrote for that vault. Entries are named per vault
(a short hash of its path), so two vaults get two schedules. They run the ``memory-hub`` on PATH
(``launcher.py``), never one clone's virtualenv by default. The programs they drive (``crontab``,
``systemctl``, ``launchctl``) are looked up on PATH, so tests put stand-ins there.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..launcher import launcher

JOBS = {
    "autocommit": ("autocommit", 10 * 60, "*/10 * * * *", "*:0/10"),
    "dream": ("dream", 60 * 60, "17 * * * *", "*:17"),
}
LABEL = "memory-hub"
CRON_MARK = "# memory-hub"
KINDS = ("cron", "systemd", "launchd")


@dataclass
class Entry:
    kind: str  # cron | systemd | launchd
    path: str | None  # where the entry lives (None: crontab)
    text: str


def vault_id(vault: Path) -> str:
    """A short, stable name for a vault in unit and agent names."""
    return hashlib.blake2b(str(Path(vault).resolve()).encode(), digest_size=4).hexdigest()


def command(vault: Path, job: str) -> list[str]:
    """The command a scheduler runs."""
    return [*launcher().argv, "--vault", str(vault), JOBS[job][0]]


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def systemd_dir() -> Path:
    return _config_home() / "systemd" / "user"


def launchd_dir() -> Path:
    return Path.home() / "Library" / "LaunchAgents"


def _unit(vault: Path, job: str) -> str:
    return f"{LABEL}-{job}-{vault_id(vault)}"


def _label(vault: Path, job: str) -> str:
    return f"com.{LABEL}.{job}.{vault_id(vault)}"


def cron_lines(vault: Path) -> list[str]:
    out = []
    for job, (_, _, cron, _) in JOBS.items():
        cmd = " ".join(shlex.quote(c) for c in command(vault, job))
        out.append(f"{cron} {cmd} >/dev/null 2>&1 {CRON_MARK} {job} {vault}")
    return out


def systemd_units(vault: Path) -> dict[str, str]:
    units = {}
    for job, (_, _, _, calendar) in JOBS.items():
        name = _unit(vault, job)
        cmd = " ".join(shlex.quote(c) for c in command(vault, job))
        units[f"{name}.service"] = (
            f"[Unit]\nDescription=Memory Hub {job} for {vault}\n\n"
            f"[Service]\nType=oneshot\nExecStart={cmd}\nNice=10\n"
        )
        units[f"{name}.timer"] = (
            f"[Unit]\nDescription=Run Memory Hub {job} for {vault}\n\n"
            f"[Timer]\nOnCalendar={calendar}\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"
        )
    return units


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def launchd_plists(vault: Path) -> dict[str, str]:
    plists = {}
    for job, (_, interval, _, _) in JOBS.items():
        label = _label(vault, job)
        args = "".join(f"\n      <string>{_xml(a)}</string>" for a in command(vault, job))
        plists[f"{label}.plist"] = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
            '<plist version="1.0">\n<dict>\n'
            f"  <key>Label</key><string>{label}</string>\n"
            f"  <key>ProgramArguments</key>\n    <array>{args}\n    </array>\n"
            f"  <key>StartInterval</key><integer>{interval}</integer>\n"
            "  <key>LowPriorityIO</key><true/>\n"
            "</dict>\n</plist>\n"
        )
    return plists


def entries(vault: Path) -> list[Entry]:
    out = [Entry("cron", None, "\n".join(cron_lines(vault)) + "\n")]
    out += [Entry("systemd", str(systemd_dir() / name), text) for name, text in systemd_units(vault).items()]
    out += [Entry("launchd", str(launchd_dir() / name), text) for name, text in launchd_plists(vault).items()]
    return out


def default_kind() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if shutil.which("systemctl") and Path("/run/systemd/system").exists():
        return "systemd"
    return "cron"


def _target(vault: Path, kind: str | None) -> tuple[Path, str]:
    kind = kind or default_kind()
    if kind not in KINDS:
        raise ValueError(f"unknown schedule kind {kind!r}: use cron, systemd or launchd")
    return Path(vault).resolve(), kind


def _split_crontab(vault: Path) -> tuple[str, list[str]]:
    """The crontab as it is, and its lines that are not this vault's entries."""
    existing = _crontab()
    return existing, [ln for ln in existing.splitlines() if not _ours_in_cron(ln, vault)]


def _crontab() -> str:
    proc = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else ""  # "no crontab for user" is an empty one


def _set_crontab(text: str) -> None:
    subprocess.run(["crontab", "-"], input=text, text=True, check=True, capture_output=True)


def _ours_in_cron(line: str, vault: Path) -> bool:
    return CRON_MARK in line and line.rstrip().endswith(f" {vault}")


def _run(cmd: list[str]) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        return f"{' '.join(cmd)}: {exc.strerror}"
    return f"{' '.join(cmd)}: " + ("ok" if proc.returncode == 0 else proc.stderr.strip() or f"exit {proc.returncode}")


def install(vault: Path, kind: str | None = None, activate: bool = True) -> list[str]:
    """Install one form of the schedule; returns what was done. Re-running changes nothing."""
    vault, kind = _target(vault, kind)
    if kind == "cron":
        existing, keep = _split_crontab(vault)
        new = "\n".join(keep + cron_lines(vault)) + "\n"
        if new == existing:
            return ["crontab already up to date"]
        _set_crontab(new)
        return ["crontab updated"]
    done: list[str] = []
    wanted = [e for e in entries(vault) if e.kind == kind]
    for entry in wanted:
        assert entry.path is not None
        path = Path(entry.path)
        if path.exists() and path.read_text(encoding="utf-8") == entry.text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(entry.text, encoding="utf-8")
        tmp.replace(path)
        done.append(f"wrote {path}")
    if activate and kind == "systemd" and done:
        timers = [f"{_unit(vault, job)}.timer" for job in JOBS]
        done.append(_run(["systemctl", "--user", "daemon-reload"]))
        done.append(_run(["systemctl", "--user", "enable", "--now", *timers]))
    if activate and kind == "launchd" and done:
        done += [_run(["launchctl", "load", "-w", str(e.path)]) for e in wanted]
    return done or [f"{kind} entries already up to date"]


def uninstall(vault: Path, kind: str | None = None, activate: bool = True) -> list[str]:
    """Remove what ``install`` added for this vault (one form), and nothing else."""
    vault, kind = _target(vault, kind)
    if kind == "cron":
        existing, keep = _split_crontab(vault)
        if len(keep) == len(existing.splitlines()):
            return ["no crontab entries for this vault"]
        _set_crontab("\n".join(keep) + "\n" if keep else "")
        return [f"crontab: removed {len(existing.splitlines()) - len(keep)} lines"]
    found = [Path(e.path) for e in entries(vault) if e.kind == kind and e.path and Path(e.path).exists()]
    if not found:
        return [f"no {kind} entries for this vault"]
    done: list[str] = []
    if activate and kind == "systemd":
        timers = [p.name for p in found if p.suffix == ".timer"]
        if timers:
            done.append(_run(["systemctl", "--user", "disable", "--now", *timers]))
    if activate and kind == "launchd":
        done += [_run(["launchctl", "unload", "-w", str(p)]) for p in found]
    for p in found:
        p.unlink()
        done.append(f"removed {p}")
    if activate and kind == "systemd":
        done.append(_run(["systemctl", "--user", "daemon-reload"]))
    return done


def installed_commands(vault: Path) -> list[tuple[str, str]]:
    """(where, command line) of every installed schedule entry for this vault (for ``doctor``)."""
    vault = Path(vault).resolve()
    out: list[tuple[str, str]] = []
    if shutil.which("crontab"):
        for line in _crontab().splitlines():
            if _ours_in_cron(line, vault):
                out.append(("crontab", line.split(" ", 5)[5].split(" >/dev/null")[0]))
    for e in entries(vault):
        if e.kind != "cron" and e.path and Path(e.path).is_file() and e.path.endswith((".service", ".plist")):
            text = Path(e.path).read_text(encoding="utf-8", errors="replace")
            if e.kind == "systemd":
                cmd = next((ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("ExecStart=")), "")
            else:
                cmd = " ".join(shlex.quote(a) for a in re.findall(r"<string>(.*?)</string>", text.split("<array>")[-1]))
            out.append((e.path, cmd))
    return out
