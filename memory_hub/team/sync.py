"""``memory-hub sync --remote``: commit what is pending, exchange commits with the remote, re-index
exactly what changed.

1. Settle and commit pending changes as ``autocommit`` does (same rules: only on a branch, never
   during a merge/rebase/dream pass, never ``.memory_hub/``), after making sure ``.gitattributes``
   merges the per-machine usage logs by union.
2. Holding the dream lock (no pass may start mid-rebase), ``vault.remote.exchange``: fetch, rebase
   the local commits onto the remote branch, keep both texts of every conflict, push. A push is
   refused when the outgoing lines look like secrets (``team.secret_check``), when the vault is
   personal and the remote is a team's, or when a cache is tracked.
3. Re-index the paths the pull changed and the paths just committed: when a server serves the
   vault its watcher sees the pulled files like any edit (and embeds them warm); otherwise this
   process syncs just those paths (lexical, links), recall's index, and the vectors.

Two runs in one clone never overlap (a lock file; the second says so and does nothing).
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..capture.autocommit import AutocommitError, autocommit, dream_running
from ..config import index_dir, settings
from ..locks import file_lock
from ..vault import remote as git_remote
from ..vault.git import GitError
from ..vaults import is_personal, team_refs

LOCK_NAME = "remote-sync.lock"


class SyncError(RuntimeError):
    """``sync --remote`` could not run; the message says why and what to do. Nothing was lost."""


@dataclass
class RemoteSyncReport:
    vault: str
    remote: str
    committed: str | None = None  # the autocommit made first, if any
    exchange: git_remote.ExchangeReport | None = None
    indexed: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def conflicts(self) -> list[git_remote.Conflict]:
        return self.exchange.conflicts if self.exchange else []

    def as_dict(self) -> dict[str, Any]:
        return {"vault": self.vault, "remote": self.remote, "committed": self.committed,
                "exchange": self.exchange.as_dict() if self.exchange else None, "indexed": self.indexed,
                "skipped": self.skipped, "notes": self.notes, "seconds": round(self.seconds, 3),
                "unresolved_conflicts": git_remote.unresolved(Path(self.vault))}

    def summary(self) -> str:
        if self.skipped:
            return f"sync --remote {self.remote}: nothing done: {self.skipped}"
        ex = self.exchange
        assert ex is not None
        parts = [f"pulled {ex.fetched} commit(s)", f"pushed {ex.pushed}"]
        if ex.conflicts:
            kept = sum(1 for c in ex.conflicts if c.copy)
            parts.append(f"{len(ex.conflicts)} conflict(s) resolved without loss"
                         + (f", {kept} local text(s) kept beside the note" if kept else ""))
        if ex.blocked:
            parts.append(f"push refused: {ex.blocked}")
        how = self.indexed.get("by")
        parts.append(f"{len(ex.changed)} path(s) changed" + (f", indexed by {how}" if how else ""))
        return f"sync --remote {self.remote} ({ex.branch}): " + "; ".join(parts) + f" in {self.seconds:.2f}s"


# -- what may be pushed ---------------------------------------------------------------------------

def _same_remote(a: str, b: str) -> bool:
    def norm(url: str) -> str:
        url = url.strip().rstrip("/")
        url = url[:-4] if url.endswith(".git") else url
        return str(Path(url).resolve()) if "://" not in url and ":" not in url.split("/")[0] else url.lower()

    return norm(a) == norm(b)


def team_remote_urls() -> dict[str, str]:
    """{url: team vault name} of every configured team vault's remote (what a personal vault never pushes to)."""
    out: dict[str, str] = {}
    for ref in team_refs(settings(None)):
        if not ref.exists:
            continue
        name = ref.remote or settings(ref.path)["team.remote"]
        proc = subprocess.run(["git", "remote", "get-url", name], cwd=ref.path, capture_output=True, text=True)
        if proc.returncode == 0 and proc.stdout.strip():
            out[proc.stdout.strip()] = ref.name
    return out


def _remote_is_team(vault: Path, upstream: str | None) -> str | None:
    """The ``team.name`` the remote branch's own vault settings carry, if any."""
    if not upstream:
        return None
    proc = subprocess.run(["git", "show", f"{upstream}:.memory-hub/config.toml"], cwd=vault,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    import tomllib

    try:
        data = tomllib.loads(proc.stdout)
    except tomllib.TOMLDecodeError:
        return None
    name = (data.get("team") or {}).get("name") if isinstance(data.get("team"), dict) else None
    return str(name) if name else None


def secrets_in_outgoing(vault: Path, upstream: str | None, head: str) -> list[tuple[str, str, int]]:
    """(path, kind, count) of what looks like a secret in the lines the push would add."""
    from ..vault.redact import find_secrets

    base = upstream or subprocess.run(["git", "hash-object", "-t", "tree", "/dev/null"], cwd=vault,
                                      capture_output=True, text=True).stdout.strip()
    proc = subprocess.run(["git", "-c", "core.quotePath=false", "diff", "-U0", "--no-color", "--no-ext-diff",
                           "--text", "--diff-filter=AM", base, head, "--", ".",
                           f":(exclude){git_remote.UNION_PATTERNS[0]}"],
                          cwd=vault, capture_output=True, text=True, errors="replace")
    added: dict[str, list[str]] = {}
    path = None
    for line in proc.stdout.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("+") and path:
            added.setdefault(path, []).append(line[1:])
    found = []
    for rel, lines in added.items():
        counts: dict[str, int] = {}
        for f in find_secrets("\n".join(lines)):
            counts[f.kind] = counts.get(f.kind, 0) + 1
        found += [(rel, kind, n) for kind, n in sorted(counts.items())]
    return found


def _push_check(vault: Path, personal: bool, secret_check: bool):  # noqa: ANN202 - a PushCheck
    def check(v: Path, upstream: str | None, head: str) -> str | None:
        if personal:
            team = _remote_is_team(v, upstream)
            if team:
                return (f"this is a personal vault and the remote holds the team vault {team!r}; a personal "
                        "vault is never pushed to a team remote (clone the team remote into its own folder "
                        "and add it as [vaults.NAME] in the user settings)")
        if secret_check:
            found = secrets_in_outgoing(v, upstream, head)
            if found:
                shown = "; ".join(f"{p} ({k}{'' if n == 1 else f' ×{n}'})" for p, k, n in found[:5])
                more = f" and {len(found) - 5} more" if len(found) > 5 else ""
                return (f"the commits to push add what looks like secrets: {shown}{more}. Remove them and "
                        "commit (they stay local until then), or push anyway with --allow-secrets")
        return None

    return check


# -- re-indexing ----------------------------------------------------------------------------------

def reindex(vault: Path, paths: list[str], *, vectors: str = "auto") -> dict[str, Any]:
    """Bring the indexes up to date for ``paths`` (lexical, links, recall, vectors). ``vectors``:
    auto (embed when the vault has vectors), skip."""
    from ..index.sync import sync
    from ..retrieval.recall import RecallIndex

    out: dict[str, Any] = {"by": "this process", "paths": len(paths)}
    report = sync(vault, only=paths, progress=False)
    out["lexical"] = report.summary()
    out["changed"] = report.changed
    recall = RecallIndex(vault)
    recall.load()
    recall.refresh(only=paths)
    if not recall.try_save():  # another process writing it: the next refresh saves these notes
        out["recall"] = f"not saved: {recall.save_error}"
    if vectors == "skip" or not report.changed:
        out["vectors"] = "not needed" if not report.changed else "skipped"
        return out
    from ..retrieval.search import has_vectors
    from ..retrieval.searcher import Searcher

    searcher = Searcher(vault)
    try:
        if not has_vectors(searcher.store):
            out["vectors"] = "none yet (run `memory-hub index` to embed the vault)"
        else:
            vr = searcher.sync_vectors(progress=False)
            out["vectors"] = vr.summary() if hasattr(vr, "summary") else str(vr)
    except Exception as exc:  # noqa: BLE001 - the lexical index is current; say what failed
        out["vectors"] = f"not updated: {type(exc).__name__}: {exc}"
    finally:
        searcher.close()
    return out


# -- the whole run --------------------------------------------------------------------------------

def sync_remote(vault: Path, remote: str | None = None, *, push: bool = True, secret_check: bool | None = None,
                vectors: str = "auto", index: str = "here") -> RemoteSyncReport:
    """Commit, exchange with ``remote`` (default ``team.remote``, "origin"), re-index. ``index``:
    here (this process), server (a running server's watcher will: ``memory-hub sync`` asks the
    hooks socket whether one serves the vault), skip."""
    started = time.monotonic()
    vault = Path(vault).resolve()
    conf = settings(vault)
    remote = remote or conf["team.remote"]
    secret_check = conf["team.secret_check"] if secret_check is None else secret_check
    report = RemoteSyncReport(str(vault), remote)
    personal = is_personal(vault)
    try:
        url = git_remote.remote_url(vault, remote)
    except git_remote.RemoteError as exc:
        raise SyncError(str(exc)) from None
    if personal and push:
        team = next((name for u, name in team_remote_urls().items() if _same_remote(u, url)), None)
        if team:
            raise SyncError(f"{vault} is a personal vault and {remote} ({url}) is the remote of the team vault "
                            f"{team!r}; a personal vault is never pushed to a team remote")
    with file_lock(index_dir(vault) / LOCK_NAME, blocking=False) as held:
        if not held:
            report.skipped = "another `sync --remote` is running in this clone"
            return report
        _run(vault, remote, report, push=push, personal=personal, secret_check=secret_check,
             vectors=vectors, index=index)
    report.seconds = time.monotonic() - started
    return report


def _run(vault: Path, remote: str, report: RemoteSyncReport, *, push: bool, personal: bool,
         secret_check: bool, vectors: str, index: str) -> None:
    try:
        fresh = git_remote.start_from_remote(vault, remote)
        if fresh:
            report.notes.append(f"started from {remote}/{fresh} (this clone had no commit yet)")
        if git_remote.ensure_gitattributes(vault):
            report.notes.append(f".gitattributes: {', '.join(git_remote.ATTRIBUTE_LINES)}")
        commit = autocommit(vault)
    except (AutocommitError, GitError, git_remote.RemoteError) as exc:
        raise SyncError(str(exc)) from None
    report.notes += commit.notes
    if commit.blocked or commit.skipped:
        report.skipped = commit.blocked or commit.skipped
        return
    report.committed = commit.commit
    committed = [*commit.added, *commit.modified, *commit.deleted, *(p for pair in commit.renamed for p in pair)]
    if dream_running(vault):
        report.skipped = "a dream pass is running; sync again when it has finished"
        return
    with file_lock(index_dir(vault) / "dream.lock", blocking=False) as held:
        if not held:
            report.skipped = "a dream pass is running; sync again when it has finished"
            return
        try:
            report.exchange = git_remote.exchange(vault, remote, push=push,
                                                  check_push=_push_check(vault, personal, secret_check))
        except (git_remote.RemoteError, GitError) as exc:
            raise SyncError(str(exc)) from None
    ex = report.exchange
    if ex.skipped:
        report.skipped = ex.skipped
        return
    paths = sorted(set(ex.changed) | set(committed))
    if index == "skip" or not paths:
        report.indexed = {"by": None, "paths": 0} if not paths else {"by": None, "skipped": True}
    elif index == "server":
        report.indexed = {"by": "the running server's watcher", "paths": len(paths)}
    else:
        report.indexed = reindex(vault, paths, vectors=vectors)

