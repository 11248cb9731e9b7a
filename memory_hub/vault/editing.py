"""What every change an agent asks for checks first: did the note change since it was read, is a
person editing it, and may the vault be written and committed right now.

An agent's edit of an existing note (``edit``, ``move``, ``trash``) must never land over a person's
work. Three guards, in this order:

* **The content hash.** ``read_note`` returns a hash of the note's bytes; an edit names the hash it
  was made against, and a note whose bytes differ (a person saved it meanwhile) is refused with the
  current hash, so the agent reads again and redoes its change on the new text.
* **A person mid-edit.** A note saved in the last ``write.editing_seconds`` (5 minutes by default,
  ``MEMORY_HUB_EDITING_S``) whose changes are not committed is being edited. Links in it are not
  rewritten (``move`` reports it instead), and moving or trashing it needs the hash of what the
  agent saw.
* **The vault's write turn.** Changes are committed, one commit per request, so every one can be
  undone with git: the vault must be a git repository on a branch with no merge, rebase,
  cherry-pick, revert or bisect in progress (``git.commit_blocker``). The writer holds the lock a
  dream pass and ``autocommit`` hold (``.memory_hub/dream.lock``), so their commits never
  interleave, and first settles any multi-file change a killed writer left half-done
  (``journal.recover``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

from ..config import index_dir, max_note_bytes, settings
from ..locks import file_lock
from . import safe_io
from .git import commit_blocker, is_repo, uncommitted_paths
from .journal import pending, recover
from .redact import redact_report
from .safe_io import OutsideVault, UnreadableNote, decode_note
from .walk import content_hash

LOCK_WAIT_S = 10.0


class WriteRefused(ValueError):
    """The change was not made; the message (one line) says why and what to do."""


class HashMismatch(WriteRefused):
    """The note changed since the hash the change was made against; ``current`` is its hash now."""

    def __init__(self, rel: str, expected: str, current: str) -> None:
        super().__init__(f"{rel} changed since it was read (expected hash {expected}, current hash {current}); "
                         "nothing was written: read it again and redo the change on the new text")
        self.current = current


def note_hash(data: bytes) -> str:
    """The hash ``read_note`` returns and edits are checked against (of the file's exact bytes)."""
    return content_hash(data)


def check_hash(rel: str, data: bytes, expected: str | None) -> str:
    """The note's hash; HashMismatch when ``expected`` is given and differs."""
    current = note_hash(data)
    if expected is not None and expected.strip().lower() != current:
        raise HashMismatch(rel, expected.strip(), current)
    return current


def editing_window(vault: Path) -> float:
    """Seconds an uncommitted save counts as an edit in progress (setting ``write.editing_seconds``)."""
    return float(settings(vault)["write.editing_seconds"])


def being_edited(rel: str, mtime_ns: int, uncommitted: set[str], now: float | None = None,
                 window_s: float = 300.0) -> str | None:
    """Why ``rel`` looks like a person's edit in progress (saved recently, not committed), or None."""
    age = (now if now is not None else time.time()) - mtime_ns / 1e9
    if rel in uncommitted and age < window_s:
        return f"saved {max(age, 0):.0f} s ago and not committed: a person may be editing it"
    return None


def person_editing(vault: Path, rel: str, mtime_ns: int, now: float | None = None) -> str | None:
    """``being_edited`` with the vault's window and git status (asked only when the save is recent)."""
    now = time.time() if now is None else now
    window = editing_window(vault)
    if now - mtime_ns / 1e9 >= window:
        return None
    return being_edited(rel, mtime_ns, uncommitted_paths(vault), now, window)


@contextlib.contextmanager
def write_turn(vault: Path, wait_s: float | None = None) -> Iterator[list[str]]:
    """Hold the vault's write turn for one change; yields notes on interrupted changes settled first.

    Raises WriteRefused when no commit may be made (not a repository, detached HEAD, a merge or
    rebase in progress) or when a dream pass keeps the turn longer than ``wait_s``.
    """
    vault = Path(vault)
    if not is_repo(vault):
        raise WriteRefused(f"{vault} is not a git repository; changes to existing notes are committed so they can "
                           "be undone: run `git init` there (or `memory-hub init`)")
    blocker = commit_blocker(vault)
    if blocker:
        fix = "check out a branch" if "detached" in blocker else "finish it (or abort it)"
        raise WriteRefused(f"not now: {blocker.split(';')[0]}; {fix} and try again")
    turn = contextlib.ExitStack()
    try:
        turn.enter_context(file_lock(index_dir(vault) / "dream.lock", timeout=LOCK_WAIT_S if wait_s is None else wait_s))
    except TimeoutError:
        raise WriteRefused("a dream pass (or another change) is writing the vault; try again in a minute") from None
    with turn:
        yield [o.describe() for o in recover(vault)] if pending(vault) else []


def check_new_path(new: str) -> str:
    """``new`` (a path an agent chose) unless it holds what looks like a secret: a path is written
    into a file name, a commit message and every index, where redaction cannot reach it later."""
    found = redact_report(new)
    if found.counts:
        kinds = ", ".join(sorted(found.counts))
        raise WriteRefused(f"new_path holds what looks like a secret ({kinds}); pick a path without it")
    return new


def read_for_change(vault: Path, rel: str) -> tuple[bytes, int]:
    """A Markdown note's bytes and the mtime they were read at, for a change to be made against.

    WriteRefused when there is no such note or it is not a readable one (binary, too large,
    outside the vault). The mtime is the very file's that was read (one descriptor), so the write
    after it is refused if anyone saved in between.
    """
    if not rel.lower().endswith(".md"):
        raise WriteRefused(f"{rel} is not a Markdown note")
    try:
        data, st = safe_io.read_bytes_and_stat(vault, rel, max_note_bytes())
        decode_note(data)
    except FileNotFoundError:
        raise WriteRefused(f"no note at {rel}") from None
    except (OutsideVault, UnreadableNote) as exc:
        raise WriteRefused(f"cannot change {rel}: {exc}") from None
    return data, st.st_mtime_ns
