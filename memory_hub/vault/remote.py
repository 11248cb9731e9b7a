"""Exchange a vault's commits with a git remote: fetch, rebase the local commits onto the remote
branch, push. Git is the replication engine; this module only drives it so that nothing is lost.

* **Conflicts keep both texts.** Git merges what it can (edits to different parts of a note). A real
  conflict on a note keeps the remote version at its path, with a callout linking to a copy of the
  local text saved beside it, byte for byte, as ``<name>.conflict-<UTC time>-<who>.md``; the copy
  stays until a person merges it and deletes it (:func:`unresolved`). A note deleted on one side
  and changed on the other keeps the changed text. Append-only logs (``.memory-hub/usage/*.jsonl``,
  one per machine) are merged as the union of their lines, by the ``merge=union`` attribute this
  module keeps in ``.gitattributes`` (:func:`ensure_gitattributes`) and, should a clone lack it,
  by the resolver itself.
* **Never mid-operation.** Nothing starts while a merge, rebase, cherry-pick, revert or bisect is in
  progress or HEAD is detached (``git.commit_blocker``), nor with uncommitted changes; a rebase
  that fails for any other reason is aborted, which puts the branch back as it was.
* **Never the caches.** A tree that tracks ``.memory_hub/`` is not pushed.
* **Concurrent pushers.** A push the remote rejects because another clone pushed first is retried
  (fetch, rebase, push) a few times with a random pause.

What changed in the working tree (the paths to re-index) comes back in the report; re-indexing is
the caller's job (``team/sync.py``), since this layer knows nothing of indexes.
"""

from __future__ import annotations

import datetime as _dt
import os
import random
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..config import INDEX_DIRNAME, STATE_DIRNAME
from . import safe_io
from .git import GitError, _identity_args, commit_blocker, current_branch, is_repo

# Per-machine append-only logs: a merge keeps every line of both sides.
UNION_PATTERNS = (f"{STATE_DIRNAME}/usage/*.jsonl",)
ATTRIBUTE_LINES = tuple(f"{p} merge=union" for p in UNION_PATTERNS)
CONFLICT_RE = re.compile(r"\.conflict-(\d{8}-\d{6})-([A-Za-z0-9_-]+?)(?:-([0-9a-f]{8}))?(?:-(\d+))?(\.[^./]+)?$")
CALLOUT_MARK = "> [!warning] Sync conflict"
PUSH_ATTEMPTS = 5


class RemoteError(RuntimeError):
    """The exchange could not be done (no such remote, git failed); the branch is as it was."""


@dataclass
class Conflict:
    """One path git could not merge, and what was done so both texts survive."""

    path: str
    # both-kept (the local text saved beside, linked) | both-inserted (each side only added lines: both
    # kept in place) | kept-local (deleted remotely) | kept-remote (deleted locally) | union (a usage log)
    resolution: str
    copy: str | None = None  # where the local text was saved (both-kept)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class ExchangeReport:
    remote: str
    branch: str
    before: str | None = None  # HEAD before the exchange
    after: str | None = None  # HEAD after it
    fetched: int = 0  # remote commits that were not here
    pushed: int = 0  # local commits the remote did not have
    changed: list[str] = field(default_factory=list)  # working-tree paths the pull changed (re-index these)
    conflicts: list[Conflict] = field(default_factory=list)
    attempts: int = 0
    skipped: str | None = None  # why nothing was exchanged
    blocked: str | None = None  # why the push was refused (the pull may have happened)
    created_branch: bool = False  # the remote had no such branch: the push created it

    def as_dict(self) -> dict[str, object]:
        data = dict(self.__dict__)
        data["conflicts"] = [c.as_dict() for c in self.conflicts]
        return data


def _git(vault: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git with the vault's identity, no prompts, no editor, and no configuration that would change
    what a rebase does behind our back (autostash, update-refs)."""
    cmd = ["git", *_identity_args(vault), "-c", "rebase.autoStash=false", "-c", "rebase.updateRefs=false",
           "-c", "merge.conflictStyle=merge", "-c", "core.quotePath=false", *args]
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_SEQUENCE_EDITOR="true",
               GIT_MERGE_AUTOEDIT="no")
    proc = subprocess.run(cmd, cwd=vault, capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise GitError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


def _rev(vault: Path, ref: str) -> str | None:
    proc = _git(vault, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
    return proc.stdout.strip() or None


def _count(vault: Path, spec: str) -> int:
    return int(_git(vault, "rev-list", "--count", spec).stdout.strip() or 0)


def remote_url(vault: Path, remote: str) -> str:
    proc = _git(vault, "remote", "get-url", remote, check=False)
    if proc.returncode != 0:
        names = _git(vault, "remote", check=False).stdout.split()
        known = f"; this vault has {', '.join(names)}" if names else "; this vault has no remote yet"
        raise RemoteError(f"no git remote named {remote!r}{known} (add one: git -C {vault} remote add "
                          f"{remote} URL)")
    return proc.stdout.strip()


def ensure_gitattributes(vault: Path) -> bool:
    """``.gitattributes`` merges the per-machine usage logs by union. True when it had to be changed."""
    try:
        existing = safe_io.read_text(vault, ".gitattributes", hidden=True)
    except FileNotFoundError:
        existing = ""
    except safe_io.UnreadableNote as exc:
        raise GitError(f".gitattributes cannot be read ({exc}); fix it by hand") from None
    present = {" ".join(ln.split()) for ln in existing.splitlines()}
    missing = [ln for ln in ATTRIBUTE_LINES if ln not in present]
    if not missing:
        return False
    text = existing + ("" if not existing or existing.endswith("\n") else "\n") + "\n".join(missing) + "\n"
    safe_io.replace_file(vault, ".gitattributes", text.encode("utf-8"), hidden=True, create=True)
    return True


# -- conflicts ------------------------------------------------------------------------------------

def _who(vault: Path) -> str:
    """Who made the local edit, for the copy's name: the git user, else this machine's id."""
    ident = _git(vault, "var", "GIT_AUTHOR_IDENT", check=False).stdout.strip()
    name = ident.split(" <", 1)[0] if " <" in ident else ""
    if not name or name == "Memory Hub":
        from .usage import machine_id

        try:
            name = machine_id()
        except ValueError:
            name = "local"
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:32] or "local"


def conflict_copy_path(vault: Path, path: str, who: str, when: _dt.datetime | None = None,
                       blob: str = "") -> str:
    """A free path beside ``path`` for the local text: ``notes/x.conflict-20261201-101500-alice-1a2b3c4d.md``
    (the last part: the local text's blob id, so two clones with one identity resolving at the same
    second never pick the same name for different texts)."""
    when = when or _dt.datetime.now(_dt.UTC)
    folder, _, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:
        stem, ext = name, ""
    base = f"{stem}.conflict-{when:%Y%m%d-%H%M%S}-{who}" + (f"-{blob[:8]}" if blob else "")
    for n in range(1, 1000):
        candidate = f"{base}{'' if n == 1 else f'-{n}'}{'.' + ext if ext else ''}"
        rel = f"{folder}/{candidate}" if folder else candidate
        if not (Path(vault) / rel).exists() and _git(vault, "ls-files", "--error-unmatch", "--", rel,
                                                       check=False).returncode != 0:
            return rel
    raise RemoteError(f"no free name for a conflict copy of {path}")


def callout(copy: str, who: str, when: _dt.datetime) -> str:
    """The lines appended to the remote version of a note, pointing at the local text's copy."""
    target = copy[:-3] if copy.lower().endswith(".md") else copy
    return (f"\n\n{CALLOUT_MARK}\n> This note was changed on another clone while {who} changed it here "
            f"({when:%Y-%m-%d %H:%M} UTC). The text above is the remote one; {who}'s text is kept whole in "
            f"[[{target}]]. Merge what is needed into this note, then delete that copy and this callout.\n")


def _stages(vault: Path) -> dict[str, dict[int, str]]:
    """{path: {stage: blob sha}} of every unmerged path (1 base, 2 the remote side, 3 the local commit)."""
    out: dict[str, dict[int, str]] = {}
    for entry in _git(vault, "ls-files", "-u", "-z").stdout.split("\0"):
        if not entry:
            continue
        meta, _, path = entry.partition("\t")
        _mode, sha, stage = meta.split()
        out.setdefault(path, {})[int(stage)] = sha
    return out


def _blob(vault: Path, sha: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", sha], cwd=vault, capture_output=True, check=True).stdout


def _union(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """Every line of both sides, once: the remote's lines, then the local lines it lacks."""
    seen = set(ours.splitlines(keepends=False))
    old = set(base.splitlines(keepends=False))
    lines = ours.splitlines(keepends=False)
    lines += [ln for ln in theirs.splitlines(keepends=False) if ln not in seen and ln not in old]
    return b"".join(ln + b"\n" for ln in lines if ln)


def _only_added(base: bytes, side: bytes) -> bool:
    """Whether ``side`` keeps every line of ``base``, in order (its edits only inserted lines)."""
    lines = iter(side.splitlines())
    return all(any(b == s for s in lines) for b in base.splitlines())


def _shared_start(ours: bytes, theirs: bytes) -> bytes:
    """The lines two texts created apart begin with, when that start is a note's own (its whole
    frontmatter, or at least three non-blank lines): two clones creating today's daily note each
    write the same template and then their own links. Empty when the texts diverge sooner."""
    a, b = ours.splitlines(keepends=True), theirs.splitlines(keepends=True)
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    start = a[:n]
    closed_frontmatter = bool(start) and start[0].strip() == b"---" and any(ln.strip() == b"---" for ln in start[1:])
    if closed_frontmatter or sum(1 for ln in start if ln.strip()) >= 3:
        return b"".join(start)
    return b""


def merge_insertions(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """Both sides only inserted lines (two people appending to one note, two captures linked from
    one daily note): both insertions, remote's first, via ``git merge-file --union``. A note both
    sides created counts when both begin with the same frontmatter or lines (:func:`_shared_start`)
    and only add after it. None otherwise."""
    if not base:
        base = _shared_start(ours, theirs)
    if not base or not (_only_added(base, ours) and _only_added(base, theirs)):
        return None
    import tempfile

    with tempfile.TemporaryDirectory(prefix="mh-merge-") as tmp:
        files = []
        for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            files.append(str(path))
        proc = subprocess.run(["git", "merge-file", "-p", "--union", *files], capture_output=True)
    return proc.stdout if proc.returncode >= 0 else None


def _is_union(path: str) -> bool:
    from fnmatch import fnmatch

    return any(fnmatch(path, p) for p in UNION_PATTERNS)


def _write(vault: Path, rel: str, data: bytes) -> None:
    safe_io.replace_file(vault, rel, data, hidden=rel.startswith(".") or "/." in rel, create=True)


def resolve_conflicts(vault: Path, who: str) -> list[Conflict]:
    """Resolve every unmerged path of a stopped rebase so that no text is lost; returns what was done."""
    done: list[Conflict] = []
    when = _dt.datetime.now(_dt.UTC)
    for path, stages in sorted(_stages(vault).items()):
        remote, local = stages.get(2), stages.get(3)
        if remote and local and _is_union(path):
            base = _blob(vault, stages[1]) if 1 in stages else b""
            _write(vault, path, _union(base, _blob(vault, remote), _blob(vault, local)))
            _git(vault, "add", "--", path)
            done.append(Conflict(path, "union"))
        elif remote and local and (merged := merge_insertions(
                _blob(vault, stages[1]) if 1 in stages else b"", _blob(vault, remote), _blob(vault, local))):
            _write(vault, path, merged)
            _git(vault, "add", "--", path)
            done.append(Conflict(path, "both-inserted"))
        elif remote and local:
            copy = conflict_copy_path(vault, path, who, when, blob=local)
            remote_text = _blob(vault, remote)
            _write(vault, copy, _blob(vault, local))
            if path.lower().endswith(".md"):
                remote_text = remote_text.rstrip(b"\n") + callout(copy, who, when).encode("utf-8")
            _write(vault, path, remote_text)
            _git(vault, "add", "--", path, copy)
            done.append(Conflict(path, "both-kept", copy))
        elif local:  # the remote deleted (or renamed away) what was changed here: keep the change
            _write(vault, path, _blob(vault, local))
            _git(vault, "add", "--", path)
            done.append(Conflict(path, "kept-local"))
        elif remote:  # deleted here, changed there: keep the remote's change
            _write(vault, path, _blob(vault, remote))
            _git(vault, "add", "--", path)
            done.append(Conflict(path, "kept-remote"))
        else:  # deleted on both sides
            _git(vault, "rm", "-q", "--cached", "--ignore-unmatch", "--", path)
    return done


def unresolved(vault: Path) -> list[dict[str, str]]:
    """Conflict copies still in the vault: [{copy, note}] (the note is the path the copy belongs to)."""
    vault = Path(vault)
    if is_repo(vault):
        names = _git(vault, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                     check=False).stdout.split("\0")
    else:
        names = [p.relative_to(vault).as_posix() for p in vault.rglob("*.conflict-*") if p.is_file()]
    out = []
    for rel in names:
        name = rel.rsplit("/", 1)[-1]
        m = CONFLICT_RE.search(name)
        if not m or not (vault / rel).is_file():
            continue
        note = rel[: len(rel) - len(name)] + name[: m.start()] + (m.group(5) or "")
        out.append({"copy": rel, "note": note, "when": m.group(1), "who": m.group(2)})
    return sorted(out, key=lambda c: c["copy"])


# -- the exchange ---------------------------------------------------------------------------------

def _fetch(vault: Path, remote: str, branch: str) -> str | None:
    """Fetch the remote branch; its commit, or None when the remote has no such branch yet."""
    tracking = f"refs/remotes/{remote}/{branch}"
    proc = _git(vault, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote,
                f"+refs/heads/{branch}:{tracking}", check=False)
    if proc.returncode != 0:
        text = proc.stderr.strip()
        if "couldn't find remote ref" in text or "could not find remote ref" in text:
            return None
        raise RemoteError(f"git fetch {remote} failed: {text}")
    return _rev(vault, tracking)


def remote_branch(vault: Path, remote: str, local: str) -> str:
    """The remote branch the local one exchanges with: its configured upstream on ``remote``, else the
    same name; for a clone with no commit yet whose remote lacks that name, the remote's default branch."""
    cfg = _git(vault, "config", "--get", f"branch.{local}.remote", check=False).stdout.strip()
    merge = _git(vault, "config", "--get", f"branch.{local}.merge", check=False).stdout.strip()
    configured = merge.removeprefix("refs/heads/") if cfg == remote and merge.startswith("refs/heads/") else None
    if _rev(vault, "HEAD") is not None:
        return configured or local
    heads = _git(vault, "ls-remote", "--symref", remote, "HEAD", "refs/heads/*", check=False).stdout.splitlines()
    names = [ln.split("\t")[1].removeprefix("refs/heads/") for ln in heads if "\trefs/heads/" in ln
             and not ln.startswith("ref:")]
    default = next((ln.split()[1].removeprefix("refs/heads/") for ln in heads if ln.startswith("ref:")), None)
    for choice in (configured, local, default):
        if choice and choice in names:
            return choice
    return names[0] if len(names) == 1 else (configured or local)


def start_from_remote(vault: Path, remote: str) -> str | None:
    """A clone with no commit yet takes the remote's branch first (before anything is committed on a
    branch the remote does not have, e.g. a bare remote whose HEAD names no branch). Returns the
    branch checked out, or None when there was nothing to do."""
    local = current_branch(vault)
    if local is None or _rev(vault, "HEAD") is not None:
        return None
    branch = remote_branch(vault, remote, local)
    upstream = _fetch(vault, remote, branch)
    if upstream is None:
        return None
    if branch != local:
        _git(vault, "symbolic-ref", "HEAD", f"refs/heads/{branch}")
    _git(vault, "merge", "--ff-only", "--quiet", upstream)
    return branch


def _dirty(vault: Path) -> list[str]:
    out = _git(vault, "status", "--porcelain", "-z", "--untracked-files=no").stdout.split("\0")
    return [e[3:] for e in out if e]


def _rebase(vault: Path, upstream: str, who: str, report: ExchangeReport) -> None:
    """Rebase HEAD onto ``upstream``, resolving each stop so both texts survive; abort on anything else."""
    steps = _count(vault, f"{upstream}..HEAD") + 2
    proc = _git(vault, "rebase", "--no-autosquash", upstream, check=False)
    while proc.returncode != 0:
        stages = _stages(vault)
        if not stages or steps <= 0:
            _git(vault, "rebase", "--abort", check=False)
            raise RemoteError(f"git rebase onto {upstream} stopped and was undone (your branch is as it was): "
                              f"{proc.stderr.strip() or proc.stdout.strip()}")
        steps -= 1
        try:
            report.conflicts += resolve_conflicts(vault, who)
        except Exception:
            _git(vault, "rebase", "--abort", check=False)
            raise
        proc = _git(vault, "rebase", "--continue", check=False)
        if proc.returncode != 0 and not _stages(vault) and "nothing to commit" in (proc.stdout + proc.stderr):
            proc = _git(vault, "rebase", "--skip", check=False)
    _clear_stale_rebase_head(vault)


def _clear_stale_rebase_head(vault: Path) -> None:
    """git 2.39 leaves ``REBASE_HEAD`` behind after a rebase that stopped and was continued; with no
    rebase folder it means nothing, and removing it keeps every reader from seeing a rebase."""
    gdir = Path(_git(vault, "rev-parse", "--absolute-git-dir").stdout.strip())
    if not (gdir / "rebase-merge").exists() and not (gdir / "rebase-apply").exists():
        _git(vault, "update-ref", "-d", "REBASE_HEAD", check=False)


def _paths_between(vault: Path, old: str | None, new: str | None) -> list[str]:
    """Paths that differ between two commits (both sides of a rename)."""
    if not new or old == new:
        return []
    if old is None:
        return [p for p in _git(vault, "ls-tree", "-r", "-z", "--name-only", new).stdout.split("\0") if p]
    fields = _git(vault, "diff", "--name-status", "-z", "--no-renames", old, new).stdout.split("\0")
    return sorted({f for i, f in enumerate(fields) if f and i % 2 == 1})


def outgoing_caches(vault: Path, upstream: str | None) -> list[str]:
    """Index cache paths any commit the push would send touches (there must be none)."""
    spec = f"{upstream}..HEAD" if upstream else "HEAD"
    out = _git(vault, "log", "--format=", "--name-only", "-z", spec, "--", INDEX_DIRNAME, check=False).stdout
    return sorted({p.strip() for p in out.split("\0") if p.strip()})


PushCheck = Callable[[Path, str | None, str], str | None]


def exchange(vault: Path, remote: str = "origin", branch: str | None = None, *, push: bool = True,
             check_push: PushCheck | None = None, attempts: int = PUSH_ATTEMPTS) -> ExchangeReport:
    """Fetch ``remote``, rebase the local commits onto its branch, and push them.

    ``check_push(vault, remote_commit, local_commit)`` may refuse a push by returning why (the
    pulled commits stay; the local ones wait for the next run). The working tree must be clean
    (commit first; ``team/sync.py`` runs autocommit).
    """
    vault = Path(vault)
    if not is_repo(vault):
        raise RemoteError(f"{vault} is not a git repository")
    report = ExchangeReport(remote, branch or current_branch(vault) or "")
    blocker = commit_blocker(vault)
    if blocker:
        report.skipped = blocker
        return report
    branch = report.branch
    remote_url(vault, remote)
    dirty = _dirty(vault)
    if dirty:
        report.skipped = (f"{len(dirty)} tracked file(s) have uncommitted changes ({', '.join(dirty[:3])}); "
                          "commit them first (memory-hub autocommit)")
        return report
    who = _who(vault)
    report.before = _rev(vault, "HEAD")
    local = branch
    branch = remote_branch(vault, remote, local)
    for attempt in range(1, max(1, attempts) + 1):
        report.attempts = attempt
        upstream = _fetch(vault, remote, branch)
        head = _rev(vault, "HEAD")
        if upstream is not None and head is None:
            report.fetched += _count(vault, upstream)
            _git(vault, "merge", "--ff-only", "--quiet", upstream)
        elif upstream is not None and head != upstream:
            report.fetched += _count(vault, f"{head}..{upstream}")
            if _git(vault, "merge-base", "--is-ancestor", head, upstream, check=False).returncode == 0:
                _git(vault, "merge", "--ff-only", "--quiet", upstream)
            elif _git(vault, "merge-base", "--is-ancestor", upstream, head, check=False).returncode != 0:
                _rebase(vault, upstream, who, report)
        head = _rev(vault, "HEAD")
        ahead = _count(vault, f"{upstream}..HEAD" if upstream else "HEAD") if head else 0
        if not push or not ahead:
            break
        caches = outgoing_caches(vault, upstream)
        if caches:
            report.blocked = (f"{len(caches)} outgoing commit(s) hold index cache files under {INDEX_DIRNAME}/ "
                              f"(e.g. {caches[0]}), which are never pushed. Make the local commits again "
                              f"without them: `git reset --soft {upstream[:12] if upstream else '<first commit>'}`"
                              " then `memory-hub autocommit` (it untracks the caches), then sync again")
            break
        if check_push is not None:
            why = check_push(vault, upstream, head or "HEAD")
            if why:
                report.blocked = why
                break
        args = ["push", "--quiet", "--porcelain", remote, f"HEAD:refs/heads/{branch}"]
        if _git(vault, "config", f"branch.{local}.remote", check=False).returncode != 0:
            args.insert(1, "--set-upstream")
        proc = _git(vault, *args, check=False)
        if proc.returncode == 0:
            report.pushed = ahead
            report.created_branch = upstream is None
            break
        text = (proc.stderr + proc.stdout).strip()
        if not any(w in text for w in ("[rejected]", "non-fast-forward", "fetch first", "stale info",
                                       "cannot lock ref", "failed to update ref")):
            raise RemoteError(f"git push {remote} failed: {text}")
        if attempt == attempts:
            report.blocked = f"the remote kept moving: push rejected {attempts} times; run sync again"
            break
        time.sleep(random.uniform(0.02, 0.15) * attempt)  # another clone pushed first: pull it, try again
    report.after = _rev(vault, "HEAD")
    report.changed = _paths_between(vault, report.before, report.after)
    return report
