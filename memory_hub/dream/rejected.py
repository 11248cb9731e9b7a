"""Rejected proposals: what a person undid is never proposed again.

Every change a dream step commits carries one ``Dream-Proposal: <key>`` line per planned unit (a
link ``links:a.md|b.md``, a merge ``dedupe:a.md|b.md``, a promotion ``promote:<target>:<captures>``,
a split, a pruned link, a cited source). A proposal is *rejected* when

* the commit that made it was reverted (``git revert`` — found in the history of the current branch,
  unless that revert was itself reverted), or
* a person said so: ``memory-hub dream --reject <commit or key>``.

Rejections are kept as small JSON files under ``<vault>/.memory-hub/dream/rejected/`` — the tracked
state folder, so the memory is committed, survives any index rebuild and travels with the vault.
One file per rejection (named by the reverted commit, or by a hash of the key), so two machines that
reject different things never produce a merge conflict.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..vault.git import commit_blocker, current_author, run_git

STATE_DIRNAME = ".memory-hub"  # the vault's tracked state folder (``.memory_hub/`` is the disposable cache)
TRAILER = "Dream-Proposal"
_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{40})")
_TRAILER = re.compile(rf"^{TRAILER}:[ \t]*(\S.*?)[ \t]*$", re.M)
_KEY = re.compile(r"^(promote|provenance|links|dedupe|atomicity|prune):\S")


def rejected_dir(vault: Path) -> Path:
    return vault / STATE_DIRNAME / "dream" / "rejected"


def trailer_lines(keys: list[str]) -> str:
    return "\n".join(f"{TRAILER}: {k}" for k in dict.fromkeys(keys))


def promote_key(dest: str, members: list[str]) -> str:
    return f"promote:{dest}:" + "|".join(sorted(members))


def pair_key(step: str, a: str, b: str) -> str:
    return f"{step}:" + "|".join(sorted((a, b)))


@dataclass
class Rejections:
    """Every rejected key, and where each rejection came from (for the report)."""

    why: dict[str, str] = field(default_factory=dict)

    def blocks(self, key: str) -> str | None:
        """Why ``key`` may not be proposed (it was rejected), or None."""
        return self.why.get(key)

    def blocks_promotion(self, dest: str, members: list[str]) -> str | None:
        """A promotion into the same place of two or more captures a rejected promotion held."""
        wanted = set(members)
        for key, why in self.why.items():
            if not key.startswith("promote:"):
                continue
            kdest, _, kmembers = key[len("promote:"):].rpartition(":")
            if kdest == dest and len(wanted & set(kmembers.split("|"))) >= min(2, len(wanted)):
                return why
        return None


def _inside_vault(vault: Path, path: Path) -> bool:
    root = os.path.realpath(vault)
    return os.path.realpath(path).startswith(root + os.sep)


def load(vault: Path) -> Rejections:
    """The rejections on disk (an unreadable file is skipped: a rejection is advice, not data)."""
    out = Rejections()
    folder = rejected_dir(vault)
    if not folder.is_dir() or not _inside_vault(vault, folder):
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            keys = [str(k) for k in record.get("keys", [])]
        except (OSError, ValueError, AttributeError):
            continue
        why = str(record.get("why") or "rejected")
        for key in keys:
            out.why.setdefault(key, why)
    return out


def _save(vault: Path, name: str, record: dict[str, object]) -> Path | None:
    """Create one rejection file (never overwrite one); None when it exists already."""
    folder = rejected_dir(vault)
    folder.mkdir(parents=True, exist_ok=True)
    if not _inside_vault(vault, folder):
        raise OSError(f"{folder} leads outside the vault; not writing there")
    path = folder / f"{name}.json"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except FileExistsError:
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False, indent=1) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return path


def _bodies(vault: Path, commits: list[str]) -> dict[str, str]:
    if not commits:
        return {}
    proc = run_git(vault, "show", "-s", "--format=%H%x1f%B%x1e", *commits, check=False)
    out = {}
    for chunk in proc.stdout.split("\x1e"):
        sha, _, body = chunk.strip("\n").partition("\x1f")
        if sha:
            out[sha] = body
    return out


def keys_of(vault: Path, commit: str) -> list[str]:
    """The proposal keys a dream commit made (none for any other commit)."""
    return _TRAILER.findall(_bodies(vault, [commit]).get(commit, ""))


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def from_history(vault: Path) -> dict[str, dict[str, object]]:
    """A rejection record per reverted dream commit on the current branch, by the reverted commit.

    A revert that was itself reverted (the change re-applied) rejects nothing.
    """
    proc = run_git(vault, "log", "--format=%H%x1f%B%x1e", "--fixed-strings", "--grep=This reverts commit", "HEAD",
                   check=False)
    if proc.returncode != 0:
        return {}  # no commits yet
    reverts: dict[str, str] = {}  # revert commit -> the commit it reverts
    for chunk in proc.stdout.split("\x1e"):
        sha, _, body = chunk.strip("\n").partition("\x1f")
        m = _REVERTS.search(body)
        if sha and m:
            reverts[sha] = m.group(1)
    undone = set(reverts.values())
    live = {r: orig for r, orig in reverts.items() if r not in undone}
    bodies = _bodies(vault, sorted(set(live.values())))
    out: dict[str, dict[str, object]] = {}
    for revert, orig in live.items():
        keys = _TRAILER.findall(bodies.get(orig, ""))
        if keys:
            out[orig] = {"why": f"reverted in {revert[:10]}", "commit": orig, "revert": revert,
                         "subject": bodies[orig].splitlines()[0], "keys": keys}
    return out


def sync_from_history(vault: Path, found: dict[str, dict[str, object]] | None = None) -> list[Path]:
    """Write a rejection file for every reverted dream commit not yet remembered; the files written."""
    found = from_history(vault) if found is None else found
    written = []
    for orig, record in found.items():
        if (rejected_dir(vault) / f"{orig}.json").exists():
            continue
        path = _save(vault, orig, record | {"at": _now()})
        if path:
            written.append(path)
    return written


def load_all(vault: Path, write: bool) -> tuple[Rejections, list[Path]]:
    """Rejections on disk plus those the history shows; with ``write``, the new ones are saved too."""
    found = from_history(vault)
    written = sync_from_history(vault, found) if write else []
    out = load(vault)
    for record in found.values():
        for key in record["keys"]:  # type: ignore[union-attr]
            out.why.setdefault(str(key), str(record["why"]))
    return out, written


class RejectError(ValueError):
    """``--reject`` got something that is neither a dream commit nor a proposal key."""


def reject(vault: Path, ref: str) -> tuple[list[str], Path | None]:
    """Remember a dream commit's proposals (or one proposal key) as rejected: (keys, file written)."""
    proc = run_git(vault, "rev-parse", "-q", "--verify", f"{ref}^{{commit}}", check=False)
    if proc.returncode == 0 and not _KEY.match(ref):
        sha = proc.stdout.strip()
        keys = keys_of(vault, sha)
        if not keys:
            raise RejectError(f"{ref} is not a dream commit with proposals (no {TRAILER} lines in its message)")
        return keys, _save(vault, sha, {"why": f"rejected by a person ({sha[:10]})", "commit": sha,
                                        "keys": keys, "at": _now()})
    if not _KEY.match(ref):
        raise RejectError(f"{ref!r} is neither a commit nor a proposal key (like 'links:a.md|b.md'; "
                          "see the keys in `memory-hub dream --dry-run --json`)")
    name = "key-" + hashlib.sha1(ref.encode("utf-8")).hexdigest()[:16]
    return [ref], _save(vault, name, {"why": "rejected by a person", "keys": [ref], "at": _now()})


def commit_rejections(vault: Path) -> str | None:
    """Commit new rejection files (only those, only on a branch); the commit id or None."""
    folder = rejected_dir(vault)
    if not folder.is_dir() or commit_blocker(vault):
        return None
    rel = folder.relative_to(vault).as_posix()
    if not run_git(vault, "status", "--porcelain", "--untracked-files=all", "--", rel).stdout.strip():
        return None
    run_git(vault, "add", "-A", "--", rel)
    who = current_author()  # a named token's rejection from the web pages is committed as that token
    run_git(vault, "commit", "-q", "-m", "dream: remember rejected proposals\n\nSo later passes never propose "
            "them again.", *([f"--author={who}"] if who else []), "--", rel, identity=True)
    return run_git(vault, "rev-parse", "HEAD").stdout.strip()
