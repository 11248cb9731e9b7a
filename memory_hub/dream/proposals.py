"""Pending dream proposals: the last dry run's plan, with a diff per file, kept for people to review.

A dry run (``memory-hub dream --dry-run``, or "plan" on the web page's ``/health``) plans every step
and writes nothing to the vault; this module keeps what it planned in the cache,
``<vault>/.memory_hub/dream/plan.json``: each step's actions, proposal keys and a unified diff of
every file it would change. A person can then

* **apply** a step: a real pass of just that step (``run_dream(steps=(name,))``), which plans it
  again against the files as they are now, commits it as one revertable commit, and refuses what a
  person changed meanwhile, exactly as the hourly pass does;
* **reject** a proposal key: remembered in ``.memory-hub/dream/rejected/`` (``rejected.reject``), so
  no pass proposes it again.

A saved plan goes stale when the vault moves on: each diff records a hash of the file it was made
from, and :func:`load` marks every step whose files changed since (and says so when ``HEAD`` moved).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import index_dir
from ..vault import safe_io
from ..vault.git import is_repo, run_git

PLAN_FILE = "plan.json"
MAX_DIFF_CHARS = 40_000  # per file; longer diffs are cut (the step still applies whole)


def plan_path(vault: Path) -> Path:
    return index_dir(Path(vault)) / "dream" / PLAN_FILE


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.blake2b(data, digest_size=12).hexdigest()


def _current(vault: Path, rel: str) -> bytes | None:
    try:
        return safe_io.read_bytes(vault, rel)
    except FileNotFoundError:
        return None
    except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote):
        return b"\x00unreadable"


def _head(vault: Path) -> str | None:
    if not is_repo(vault):
        return None
    proc = run_git(vault, "rev-parse", "-q", "--verify", "HEAD", check=False)
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def file_diff(vault: Path, rel: str, new_text: str | None) -> dict[str, Any]:
    """A unified diff of ``rel`` as it is now against ``new_text`` (None: the file is deleted)."""
    before = _current(vault, rel)
    old = before.decode("utf-8", errors="replace") if before is not None else ""
    new = new_text or ""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{rel}" if before is not None else "/dev/null",
                                 tofile=f"b/{rel}" if new_text is not None else "/dev/null", n=2)
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    cut = len(text) > MAX_DIFF_CHARS
    return {"path": rel, "create": before is None, "delete": new_text is None, "before": _digest(before),
            "diff": text[:MAX_DIFF_CHARS] + ("\n… (diff cut; the step applies in full)\n" if cut else ""),
            "added": sum(1 for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")),
            "removed": sum(1 for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---"))}


@dataclass
class PlannedStep:
    name: str
    actions: list[str]
    keys: list[str]
    proposals: list[dict[str, Any]]
    skipped: list[str]
    diffs: list[dict[str, Any]]
    changed: list[str] = field(default_factory=list)  # files that changed since the plan was made
    applied: str | None = None  # the commit, once applied from the page
    rejected: list[str] = field(default_factory=list)  # keys rejected since

    @property
    def stale(self) -> bool:
        return bool(self.changed)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "actions": self.actions, "keys": self.keys, "proposals": self.proposals,
                "skipped": self.skipped, "diffs": self.diffs, "applied": self.applied,
                "rejected": self.rejected}


@dataclass
class Plan:
    at: float
    head: str | None
    summary: str
    steps: list[PlannedStep]
    warnings: list[str] = field(default_factory=list)
    head_now: str | None = None

    @property
    def pending(self) -> list[PlannedStep]:
        """Steps with something to do that were neither applied nor made stale."""
        return [s for s in self.steps if (s.actions or s.proposals) and not s.applied]

    @property
    def moved(self) -> bool:
        return self.head_now != self.head

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "head": self.head, "summary": self.summary, "warnings": self.warnings,
                "steps": [s.as_dict() for s in self.steps]}


def from_report(vault: Path, report: Any) -> Plan:
    """The plan of a dry-run ``DreamReport``: its steps with a diff of every file they would write."""
    vault = Path(vault)
    steps = []
    for step in report.steps:
        diffs = [file_diff(vault, e.path, e.text) for e in step.edits]
        if not (step.actions or step.proposals or diffs):
            continue
        steps.append(PlannedStep(step.name, list(step.actions), list(step.keys),
                                 [dict(p) for p in step.proposals], list(step.skipped), diffs))
    return Plan(time.time(), _head(vault), report.summary(), steps, list(report.warnings), _head(vault))


def save(vault: Path, plan: Plan) -> Path:
    """Write the plan atomically into the cache (it is not part of the vault)."""
    target = plan_path(vault)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(plan.as_dict(), ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, target)
    return target


def load(vault: Path) -> Plan | None:
    """The saved plan, with each step's ``changed`` files worked out now; None when there is none."""
    vault = Path(vault)
    try:
        data = json.loads(plan_path(vault).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return None
    steps = []
    for s in data["steps"]:
        if not isinstance(s, dict):
            continue
        step = PlannedStep(str(s.get("name", "?")), list(s.get("actions") or []), list(s.get("keys") or []),
                           list(s.get("proposals") or []), list(s.get("skipped") or []),
                           list(s.get("diffs") or []), applied=s.get("applied"),
                           rejected=list(s.get("rejected") or []))
        if not step.applied:
            step.changed = [d["path"] for d in step.diffs
                            if isinstance(d, dict) and _digest(_current(vault, d["path"])) != d.get("before")]
        steps.append(step)
    return Plan(float(data.get("at") or 0), data.get("head"), str(data.get("summary") or ""), steps,
                list(data.get("warnings") or []), _head(vault))


def plan(vault: Path, **options: Any) -> Plan:
    """Run a dry run now and save its plan (may take a minute on a vault of thousands of notes)."""
    from .run import run_dream

    report = run_dream(vault, dry_run=True, **options)
    result = from_report(vault, report)
    save(vault, result)
    return result


class ProposalError(ValueError):
    """An apply or reject that cannot be done (no plan, unknown step or key); the message says why."""


def apply_step(vault: Path, name: str) -> dict[str, Any]:
    """Apply one planned step now, as a real pass of that step alone; returns what it did."""
    from .run import run_dream

    vault = Path(vault)
    saved = load(vault)
    step = next((s for s in saved.steps if s.name == name), None) if saved else None
    if saved is None or step is None:
        raise ProposalError(f"no planned step {name!r}; make a plan first (`memory-hub dream --dry-run`)")
    if step.applied:
        raise ProposalError(f"step {name!r} was already applied (commit {step.applied[:10]})")
    report = run_dream(vault, steps=(name,), split=name == "atomicity")
    done = next((s for s in report.steps if s.name == name), None)
    commit = done.commit if done else None
    if commit:
        step.applied = commit
        save(vault, saved)
    return {"step": name, "commit": commit, "summary": report.summary(),
            "actions": list(done.actions) if done else [], "skipped": list(done.skipped) if done else [],
            "stopped": report.skipped, "warnings": list(report.warnings)}


def reject_key(vault: Path, key: str) -> dict[str, Any]:
    """Remember ``key`` as rejected (committed under ``.memory-hub/dream/rejected/``)."""
    from .rejected import commit_rejections, reject

    vault = Path(vault)
    saved = load(vault)
    step = next((s for s in saved.steps if key in s.keys), None) if saved else None
    if step is None:
        raise ProposalError(f"{key!r} is not a proposal of the saved plan")
    keys, written = reject(vault, key)
    commit = commit_rejections(vault)
    if key not in step.rejected:
        step.rejected.append(key)
        save(vault, saved)
    return {"key": key, "keys": keys, "new": written is not None, "commit": commit}
