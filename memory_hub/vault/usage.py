"""Usage events (a note read, a note judged useful): append-only logs, one per machine, never a note.

Reading must never change a note (issue 11): counting a read in the note's frontmatter made every
read a git change, an autocommit, a sync conflict and a reason for dream to skip the note. So each
event is one JSON line appended to a log:

    {"ts": 1764583200.123, "event": "read", "path": "runbooks/db-failover.md", "id": "9f2c01ab"}
    {"ts": 1764583201.0, "event": "useful", "path": "runbooks/db-failover.md", "id": "03d4e5f6"}
    {"ts": 1764583202.0, "event": "baseline", "path": "auth-flow.md", "reads": 4, "useful": 1}

``baseline`` carries counts a note's frontmatter held before (``access_count``/``useful_count``);
once a note has one, its frontmatter counters are only a mirror (see ``capture/usage_mirror.py``).

Where events go:

* ``<vault>/.memory-hub/usage/<machine-id>.jsonl`` is the **log**, tracked by git. Each machine
  appends only to its own file, so two machines never conflict, and a clone brings every
  machine's history. The index folds all logs into SQLite (``index/usage.py``).
* In a git vault an event is first appended to this clone's **journal**,
  ``<git dir>/memory-hub/usage/<machine-id>.jsonl``: inside the git folder, so a read leaves
  ``git status`` clean, and outside ``.memory_hub/``, so deleting the cache loses nothing.
  ``publish`` moves the journal into the log right before a commit (autocommit, ``memory-hub
  usage publish``, the mirror), so reads reach git in batches, never one commit per read.
  A vault that is not a git repository has no status to keep clean: events go to the log directly.

Appends are one ``write()`` with ``O_APPEND`` under ``flock`` through ``safe_io``; publishing
renames the journal first, so an event is in exactly one place (journal, ``.publishing`` or log)
whatever moment a crash picks, and the next publish finishes a half-done one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import STATE_DIRNAME, config_home
from ..locks import file_lock
from . import safe_io

USAGE_DIR = f"{STATE_DIRNAME}/usage"
JOURNAL_DIR = "memory-hub/usage"  # under the git folder
MACHINE_ENV = "MEMORY_HUB_MACHINE_ID"
READ, USEFUL, BASELINE = "read", "useful", "baseline"
EVENTS = (READ, USEFUL, BASELINE)
MAX_LINE = 4096  # longer lines are not ours: skipped when folded
_MACHINE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class UsageError(ValueError):
    """An event that cannot be recorded (not a note of this vault, a bad machine id)."""


# -- which machine ---------------------------------------------------------------------------------

def machine_id() -> str:
    """This machine's stable id: ``$MEMORY_HUB_MACHINE_ID``, else one generated once per user and
    kept in ``~/.config/memory-hub/machine-id`` (random: it names a log file, it says nothing)."""
    env = os.environ.get(MACHINE_ENV, "").strip()
    if env:
        if not _MACHINE.match(env):
            raise UsageError(f"{MACHINE_ENV}={env!r} is not a usable id (letters, digits, . _ -; 64 at most)")
        return env
    path = config_home() / "machine-id"
    with contextlib.suppress(OSError):
        found = path.read_text(encoding="utf-8").strip()
        if _MACHINE.match(found):
            return found
    new = "m-" + secrets.token_hex(6)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # another process made it a moment ago
        found = path.read_text(encoding="utf-8").strip()
        if _MACHINE.match(found):
            return found
        raise UsageError(f"{path} holds no usable machine id; delete it to get a new one") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(new + "\n")
    return new


# -- where the files are ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Place:
    """A usage file: ``rel`` inside ``root`` (the vault, or the git folder for journals)."""

    key: str  # stable name in the index: "log/<file>" or "journal/<file>"
    root: Path
    rel: str
    hidden: bool
    generation: int = 0  # journals: how many publishes so far (a new journal may reuse an inode)


def git_dir(vault: Path) -> Path | None:
    """The vault's git folder (``.git``, or where a ``.git`` file of a worktree points), or None."""
    dot = Path(vault) / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            head = dot.read_text(encoding="utf-8").strip()
            if head.startswith("gitdir:"):
                target = Path(head.split(":", 1)[1].strip())
                target = target if target.is_absolute() else (Path(vault) / target)
                if target.is_dir():
                    return target
    return None


def log_place(vault: Path, machine: str | None = None) -> Place:
    name = f"{machine or machine_id()}.jsonl"
    return Place(f"log/{name}", Path(vault), f"{USAGE_DIR}/{name}", True)


def journal_place(vault: Path, machine: str | None = None, suffix: str = ".jsonl") -> Place | None:
    gdir = git_dir(vault)
    if gdir is None:
        return None
    name = f"{machine or machine_id()}{suffix}"
    return Place(f"journal/{name}", gdir, f"{JOURNAL_DIR}/{name}", False)


def places(vault: Path) -> list[Place]:
    """Every usage file to fold: all machines' logs, and this clone's journal files."""
    vault = Path(vault)
    out = [Place(f"log/{n}", vault, f"{USAGE_DIR}/{n}", True)
           for n in safe_io.list_folder(vault, USAGE_DIR, hidden=True) if n.endswith(".jsonl")]
    gdir = git_dir(vault)
    if gdir is not None:
        gen = generation(gdir)
        out += [Place(f"journal/{n}", gdir, f"{JOURNAL_DIR}/{n}", False, gen)
                for n in safe_io.list_folder(gdir, JOURNAL_DIR) if n.endswith((".jsonl", ".publishing"))]
    return out


GENERATION = f"{JOURNAL_DIR}/generation"


def generation(gdir: Path) -> int:
    """Publishes so far in this clone (0 when none): part of a journal's identity for the fold."""
    try:
        return int(safe_io.read_bytes(gdir, GENERATION, 64).strip() or 0)
    except (OSError, ValueError, safe_io.OutsideVault, safe_io.UnreadableNote):
        return 0


@contextlib.contextmanager
def journal_lock(vault: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Publishing and folding take turns on it, so an event is never counted in two files at once."""
    gdir = git_dir(vault)
    if gdir is None:
        yield True
        return
    lock = gdir / "memory-hub" / "usage.lock"
    with file_lock(lock, blocking=blocking) as held:
        yield held


# -- recording -------------------------------------------------------------------------------------

def _line(event: str, path: str, when: float | None, extra: dict[str, Any]) -> bytes:
    data = {"ts": round(when if when is not None else time.time(), 3), "event": event, "path": path, **extra}
    return (json.dumps(data, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode("utf-8")


def _check_note(vault: Path, path: str) -> str:
    if not isinstance(path, str) or not path.lower().endswith(".md"):
        raise UsageError(f"not a note: {path!r}")
    path = path.replace("\\", "/")
    try:
        safe_io.stat_file(vault, path)
    except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote) as exc:
        raise UsageError(f"{path}: {exc}") from None
    return path


def record(vault: Path, event: str, path: str, *, when: float | None = None, **extra: Any) -> None:
    """Append one event about note ``path`` (vault-relative; it must be a note of this vault)."""
    vault = Path(vault)
    if event not in EVENTS:
        raise UsageError(f"unknown usage event {event!r}")
    path = _check_note(vault, path)
    # a short random id makes every line unique: git's union merge keeps a line once when both
    # sides added the same text, so two clones sharing a machine id that record the same read in
    # the same millisecond would otherwise lose one of the two events
    line = _line(event, path, when, {"id": secrets.token_hex(4), **extra})
    place = journal_place(vault) or log_place(vault)
    safe_io.append_bytes(place.root, place.rel, line, hidden=place.hidden)


def record_read(vault: Path, path: str, when: float | None = None) -> None:
    """One read of note ``path``: its body was opened (``read_note``, an agent's Read tool)."""
    record(vault, READ, path, when=when)


def record_useful(vault: Path, paths: Iterable[str]) -> list[str]:
    """One ``useful`` event per note the usefulness judge kept; returns those recorded (notes that
    are gone or outside the vault are skipped, never created)."""
    done = []
    for rel in dict.fromkeys(paths):
        try:
            record(vault, USEFUL, rel)
        except (UsageError, OSError, safe_io.OutsideVault):
            continue
        done.append(rel)
    return done


def record_baselines(vault: Path, counts: dict[str, tuple[int, int]]) -> int:
    """``baseline`` events for notes whose frontmatter counters predate the logs ({path: (reads,
    useful)}), written to the log itself (they go into git with the commit that needs them)."""
    place = log_place(vault)
    lines = b"".join(_line(BASELINE, p, None, {"reads": r, "useful": u}) for p, (r, u) in sorted(counts.items()))
    if lines:
        safe_io.append_bytes(place.root, place.rel, lines, hidden=True)
    return len(counts)


# -- publishing ------------------------------------------------------------------------------------

def unpublished(vault: Path) -> tuple[int, float | None]:
    """(events in this clone's journal, unix time of the oldest) — (0, None) when there are none."""
    place = journal_place(vault)
    if place is None:
        return 0, None
    total, oldest = 0, None
    for suffix in (".publishing", ".jsonl"):
        p = journal_place(vault, suffix=suffix)
        try:
            data = safe_io.read_bytes(p.root, p.rel, 64 * 1024 * 1024)
        except (OSError, safe_io.OutsideVault, safe_io.UnreadableNote):
            continue
        for event in parse_lines(data):
            total += 1
            oldest = event["ts"] if oldest is None else min(oldest, event["ts"])
    return total, oldest


def publish(vault: Path) -> int:
    """Move this clone's journal into its git-tracked log; returns the number of events moved.

    Rename first (new events start a fresh journal), lock the renamed file (writers that opened it
    before the rename finish first), append it to the log, fsync, delete it. A crash between the
    append and the delete is finished by the next call, which sees the log already ends with it.
    """
    vault = Path(vault)
    live = journal_place(vault)
    if live is None:
        return 0
    taken = journal_place(vault, suffix=".publishing")
    log = log_place(vault)
    with journal_lock(vault):
        moved = 0
        if safe_io.is_file(taken.root, taken.rel):  # left by a publish that was cut short
            moved += _append_taken(taken, log, maybe_done=True)
        if safe_io.is_file(live.root, live.rel):
            safe_io.rename_file(live.root, live.rel, taken.rel)
            moved += _append_taken(taken, log, maybe_done=False)
        if moved:
            safe_io.replace_file(live.root, GENERATION, b"%d\n" % (generation(live.root) + 1), create=True)
        return moved


def _append_taken(taken: Place, log: Place, maybe_done: bool) -> int:
    """Append a renamed journal to the log and delete it. ``maybe_done``: it was found left over, so
    the crash may have come after the append; then a log already ending with it is not appended to."""
    data = _drain(taken)
    if data:
        try:
            size = safe_io.stat_file(log.root, log.rel, hidden=True).st_size
        except FileNotFoundError:
            size = 0
        already = False
        if maybe_done and size >= len(data):
            end, _ = safe_io.read_range(log.root, log.rel, size - len(data), len(data), hidden=True)
            already = end == data  # a publish that crashed after its append
        if not already:
            if size and not safe_io.read_range(log.root, log.rel, size - 1, 1, hidden=True)[0].endswith(b"\n"):
                data = b"\n" + data  # a log someone left without a final newline
            safe_io.append_bytes(log.root, log.rel, data, hidden=True)
    safe_io.unlink_file(taken.root, taken.rel)
    return sum(1 for _ in parse_lines(data))


def _drain(taken: Place) -> bytes:
    """The renamed journal's bytes, after any writer that opened it before the rename is done."""
    full = safe_io.safe_path(taken.root, taken.rel)
    fd = safe_io.open_regular(full)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # appenders hold it while they write
        st = os.fstat(fd)
        return os.pread(fd, st.st_size, 0)
    finally:
        os.close(fd)


# -- reading ---------------------------------------------------------------------------------------

def parse_lines(data: bytes) -> Iterator[dict[str, Any]]:
    """The valid events in ``data`` (complete lines only); anything else is skipped."""
    for raw in data.split(b"\n"):
        event = parse_line(raw)
        if event is not None:
            yield event


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """One event, or None for a blank, broken, oversized or foreign line."""
    if not raw.strip() or len(raw) > MAX_LINE:
        return None
    try:
        item = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(item, dict) or item.get("event") not in EVENTS:
        return None
    path, ts = item.get("path"), item.get("ts")
    if not isinstance(path, str) or not path.lower().endswith(".md") or path.startswith("/") or "\x00" in path:
        return None
    if ".." in path.split("/") or not isinstance(ts, (int, float)) or isinstance(ts, bool) or ts != ts:
        return None
    if item["event"] == BASELINE:
        reads, useful = item.get("reads", 0), item.get("useful", 0)
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 10**9 for v in (reads, useful)):
            return None
    return item
