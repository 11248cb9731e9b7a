"""Opt-in: publish usage to git, and copy the counts into notes' frontmatter in one batched commit.

Counts live in the usage logs (``vault/usage.py``); a person who wants to see ``access_count`` and
``useful_count`` in Obsidian (or query them with Dataview) runs ``memory-hub usage mirror``. Nothing
else ever writes them. One pass:

1. refuse unless the vault is a git repository on a branch with no merge/rebase/dream in progress;
2. publish this clone's journal into its log and sync the index (counts as every reader sees them);
3. record a ``baseline`` event for each note about to be written that has none yet, holding the
   counters its frontmatter had (so the log alone holds the truth and the mirrored values are
   never counted twice);
4. write the two fields with ``frontmatter.set_fields`` (only those lines change) through
   ``writer.replace_note`` with the mtime it read, into notes that are committed (no uncommitted
   change a person is making) and quiet (not modified in the last ``quiet_s`` seconds);
5. commit exactly the notes written and the log, as one commit (``git revert`` undoes the pass).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..index import usage as counts_api
from ..index.store import Store
from ..index.sync import sync
from ..vault import frontmatter, safe_io
from ..vault import usage as log
from ..vault.git import GitError, commit_blocker, is_repo, run_git
from ..vault.writer import NoteExists, replace_note
from .autocommit import dream_running

READS, USEFUL = "access_count", "useful_count"
QUIET_S = 600.0


class MirrorError(RuntimeError):
    """The vault cannot be mirrored into right now; the message says why and what to do."""


@dataclass
class MirrorReport:
    written: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    unchanged: int = 0
    baselines: int = 0
    published: int = 0
    commit: str | None = None
    dry_run: bool = False

    def as_dict(self) -> dict[str, object]:
        data = dict(self.__dict__)
        data["skipped"] = [{"path": p, "reason": r} for p, r in self.skipped]
        return data


def check_committable(vault: Path) -> None:
    """MirrorError saying why nothing should be committed now (no repository, a detached HEAD, a
    merge or rebase in progress, a dream pass running), else nothing."""
    if not is_repo(vault):
        raise MirrorError(f"{vault} is not a git repository; usage is already in its log, nothing to commit")
    blocker = commit_blocker(vault)
    if blocker:
        raise MirrorError(blocker)
    if dream_running(vault):
        raise MirrorError("a dream pass is running; try again when it is done")


def _dirty(vault: Path) -> set[str]:
    out = run_git(vault, "status", "--porcelain", "-z", "--untracked-files=all").stdout
    paths, fields, i = set(), out.split("\0"), 0
    while i < len(fields) and fields[i]:
        entry = fields[i]
        paths.add(entry[3:])
        if entry[:1] in ("R", "C"):
            i += 1  # the rename's source follows
            paths.add(fields[i])
        i += 1
    return paths


def publish_and_commit(vault: Path) -> tuple[int, str | None]:
    """``memory-hub usage publish``: the journal into the log, and a commit of the log alone."""
    vault = Path(vault).resolve()
    check_committable(vault)
    moved = log.publish(vault)
    rel = log.log_place(vault).rel
    if not safe_io.is_file(vault, rel, hidden=True):
        return moved, None
    run_git(vault, "add", "--", rel)
    if run_git(vault, "diff", "--cached", "--quiet", "--", rel, check=False).returncode == 0:
        return moved, None
    run_git(vault, "commit", "-q", "-m", f"usage: {moved} event(s) from {log.machine_id()}", "--", rel, identity=True)
    return moved, run_git(vault, "rev-parse", "HEAD").stdout.strip()


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def mirror(vault: Path, *, quiet_s: float = QUIET_S, dry_run: bool = False) -> MirrorReport:
    """Write current counts into the frontmatter of committed, quiet notes; one commit. See module doc."""
    vault = Path(vault).resolve()
    check_committable(vault)
    report = MirrorReport(dry_run=dry_run)
    if not dry_run:
        report.published = log.publish(vault)
    store = Store(vault)
    sync(vault, store=store, progress=False)
    totals = counts_api.counts(store)
    dirty = _dirty(vault)
    baselined = counts_api.baselined(store)
    plan: list[tuple[str, str, int, dict[str, int], tuple[int, int]]] = []
    now_ns = time.time_ns()
    for path, used in sorted(totals.items()):
        try:
            data, st = safe_io.read_bytes_and_stat(vault, path)
            text = safe_io.decode_note(data)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote) as exc:
            report.skipped.append((path, f"not readable: {exc}"))
            continue
        block = frontmatter.parse(text)
        if block.problem:
            report.skipped.append((path, f"frontmatter left alone: {block.problem}"))
            continue
        want = {READS: used.reads, USEFUL: used.useful}
        have = {READS: block.data.get(READS), USEFUL: block.data.get(USEFUL)}
        if have == want:
            report.unchanged += 1
            continue
        if path in dirty:
            report.skipped.append((path, "has uncommitted changes"))
            continue
        if now_ns - st.st_mtime_ns < quiet_s * 1e9:
            report.skipped.append((path, f"modified in the last {quiet_s:.0f} s (maybe open in an editor)"))
            continue
        plan.append((path, text, st.st_mtime_ns, want, (_int(have[READS]), _int(have[USEFUL]))))
    if dry_run:
        report.written = [p for p, *_ in plan]
        return report
    report.baselines = log.record_baselines(vault, {p: legacy for p, _t, _m, _w, legacy in plan if p not in baselined})
    for path, text, mtime_ns, want, _legacy in plan:
        try:
            replace_note(vault, path, frontmatter.set_fields(text, want), expected_mtime_ns=mtime_ns)
        except (NoteExists, ValueError, OSError, safe_io.OutsideVault) as exc:
            report.skipped.append((path, f"not written: {exc}"))
            continue
        report.written.append(path)
    touched = report.written + ([log.log_place(vault).rel] if report.baselines or report.published else [])
    if touched:
        try:
            run_git(vault, "add", "--", *touched)
            run_git(vault, "commit", "-q", "-m", f"usage: mirror counts into {len(report.written)} note(s)",
                    "--", *touched, identity=True)
            report.commit = run_git(vault, "rev-parse", "HEAD").stdout.strip()
        except GitError as exc:
            raise MirrorError(f"counts written but not committed: {exc}") from None
    sync(vault, store=store, progress=False)
    return report
