"""Schedule entries for the background paths: auto-commit every 10 minutes, dream every hour.

``entries`` renders all three forms (cron, a systemd user timer, launchd agents) so a person can
read exactly what would run; ``install`` writes one form, idempotently, and only when asked.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

JOBS = {
    "autocommit": ("autocommit", 10 * 60, "*/10 * * * *", "*:0/10"),
    "dream": ("dream", 60 * 60, "17 * * * *", "*:17"),
}
LABEL = "memory-hub"
CRON_MARK = "# memory-hub"


@dataclass
class Entry:
    kind: str  # cron | systemd | launchd
    path: str | None  # where the entry lives (None: crontab)
    text: str


def command(vault: Path, job: str) -> list[str]:
    """The command a scheduler runs: the installed ``memory-hub`` script, else ``python -m``."""
    exe = shutil.which("memory-hub")
    base = [exe] if exe else [sys.executable, "-m", "memory_hub.cli"]
    return base + ["--vault", str(vault), JOBS[job][0]]


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def cron_lines(vault: Path) -> list[str]:
    out = []
    for job, (_, _, cron, _) in JOBS.items():
        cmd = " ".join(shlex.quote(c) for c in command(vault, job))
        out.append(f"{cron} {cmd} >/dev/null 2>&1 {CRON_MARK} {job} {vault}")
    return out


def systemd_units(vault: Path) -> dict[str, str]:
    units = {}
    for job, (_, _, _, calendar) in JOBS.items():
        name = f"{LABEL}-{job}"
        cmd = " ".join(shlex.quote(c) for c in command(vault, job))
        units[f"{name}.service"] = (
            f"[Unit]\nDescription=Memory Hub {job} for {vault}\n\n"
            f"[Service]\nType=oneshot\nExecStart={cmd}\nNice=10\n"
        )
        units[f"{name}.timer"] = (
            f"[Unit]\nDescription=Run Memory Hub {job}\n\n"
            f"[Timer]\nOnCalendar={calendar}\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"
        )
    return units


def launchd_plists(vault: Path) -> dict[str, str]:
    plists = {}
    for job, (_, interval, _, _) in JOBS.items():
        label = f"com.{LABEL}.{job}"
        args = "".join(f"\n      <string>{a}</string>" for a in command(vault, job))
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
    sd = _config_home() / "systemd" / "user"
    out += [Entry("systemd", str(sd / name), text) for name, text in systemd_units(vault).items()]
    la = Path.home() / "Library" / "LaunchAgents"
    out += [Entry("launchd", str(la / name), text) for name, text in launchd_plists(vault).items()]
    return out


def default_kind() -> str:
    if sys.platform == "darwin":
        return "launchd"
    if shutil.which("systemctl") and Path("/run/systemd/system").exists():
        return "systemd"
    return "cron"


def install(vault: Path, kind: str | None = None, activate: bool = True) -> list[str]:
    """Install one form of the schedule; returns what was done. Re-running changes nothing."""
    kind = kind or default_kind()
    done: list[str] = []
    if kind == "cron":
        current = subprocess.run(["crontab", "-l"], capture_output=True, text=True)
        existing = current.stdout if current.returncode == 0 else ""
        keep = [ln for ln in existing.splitlines() if not (CRON_MARK in ln and str(vault) in ln)]
        new = "\n".join(keep + cron_lines(vault)) + "\n"
        if new != existing:
            subprocess.run(["crontab", "-"], input=new, text=True, check=True)
            done.append("crontab updated")
        return done or ["crontab already up to date"]
    wanted = [e for e in entries(vault) if e.kind == kind]
    if not wanted:
        raise ValueError(f"unknown schedule kind {kind!r}: use cron, systemd or launchd")
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
    if activate and kind == "systemd":
        for cmd in (["systemctl", "--user", "daemon-reload"],
                    ["systemctl", "--user", "enable", "--now", f"{LABEL}-autocommit.timer", f"{LABEL}-dream.timer"]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            done.append(f"{' '.join(cmd)}: " + ("ok" if proc.returncode == 0 else proc.stderr.strip()))
    if activate and kind == "launchd":
        for entry in wanted:
            proc = subprocess.run(["launchctl", "load", "-w", str(entry.path)], capture_output=True, text=True)
            done.append(f"launchctl load {entry.path}: " + ("ok" if proc.returncode == 0 else proc.stderr.strip()))
    return done or [f"{kind} entries already up to date"]
