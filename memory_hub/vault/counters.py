"""Access and useful counts, kept in each note's frontmatter so they outlive every index.

``access_count`` rises when a note's body is actually read (an agent opened the file), never when
it merely appears in results; ``useful_count`` rises when the usefulness judge decides the
assistant used a note it was shown. Both are written with ``frontmatter.set_fields`` (only those
lines change: the body and the key order stay as the person wrote them) and
``writer.replace_note`` with an mtime check, so an edit made in the meantime is never lost: the
update is simply retried on the fresh text.

When a note was last read is a cache, not a fact worth a git commit per read, so it goes to
``<vault>/.memory_hub/recent_reads.json`` (bounded); recall uses it for its recency boost.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..config import index_dir
from . import frontmatter
from .walk import OutsideVault, UnreadableNote, decode_note, read_note_bytes, safe_path
from .writer import NoteExists, replace_note

ACCESS = "access_count"
USEFUL = "useful_count"
RECENT_READS = "recent_reads.json"
MAX_RECENT = 2000
_RETRIES = 5


class CounterError(ValueError):
    """A counter could not be written (not a note, outside the vault, broken frontmatter)."""


def _current(value: object) -> int:
    try:
        return max(0, int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


def bump(vault: Path, rel: str, key: str, by: int = 1) -> int:
    """Add ``by`` to integer field ``key`` of note ``rel``; return the new value.

    Raises CounterError for anything that is not a readable Markdown note inside the vault.
    """
    if not rel.lower().endswith(".md"):
        raise CounterError(f"not a note: {rel}")
    try:
        full = safe_path(vault, rel)
    except OutsideVault as exc:
        raise CounterError(str(exc)) from None
    with _writer_lock(vault):
        return _bump_locked(vault, rel, full, key, by)


@contextlib.contextmanager
def _writer_lock(vault: Path) -> Iterator[None]:
    """Counter writers from every process take turns: read-check-replace is not atomic by itself."""
    folder = index_dir(vault)
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "counters.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _bump_locked(vault: Path, rel: str, full: Path, key: str, by: int) -> int:
    for _ in range(_RETRIES):
        try:
            mtime = full.stat().st_mtime_ns
            text = decode_note(read_note_bytes(vault, rel))
        except (OSError, UnreadableNote) as exc:
            raise CounterError(f"{rel}: {exc}") from None
        value = _current(frontmatter.parse(text).data.get(key)) + by
        try:
            new_text = frontmatter.set_fields(text, {key: value})
        except ValueError as exc:
            raise CounterError(f"{rel}: {exc}") from None
        try:
            replace_note(vault, rel, new_text, expected_mtime_ns=mtime)
        except NoteExists:
            time.sleep(0.01)
            continue  # changed under us: re-read and apply to the fresh text
        return value
    raise CounterError(f"{rel} kept changing while its {key} was updated; skipped")


@contextlib.contextmanager
def _locked_json(path: Path) -> Iterator[dict]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError):
            data = {}
        yield data
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def recent_reads(vault: Path) -> dict[str, float]:
    """{note path: unix time it was last read} (a cache; empty when missing)."""
    try:
        data = json.loads((index_dir(vault) / RECENT_READS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


def _note_recent_read(vault: Path, rel: str, when: float) -> None:
    with _locked_json(index_dir(vault) / RECENT_READS) as data:
        data[rel] = when
        if len(data) > MAX_RECENT:
            for old in sorted(data, key=lambda p: data[p])[: len(data) - MAX_RECENT]:
                del data[old]


def record_access(vault: Path, path: str, when: float | None = None) -> int:
    """Count one read of note ``path`` (vault-relative); returns the new ``access_count``."""
    vault = Path(vault)
    value = bump(vault, path, ACCESS)
    try:
        _note_recent_read(vault, path, when or time.time())
    except OSError:
        pass  # the recency cache is optional; the count in the vault is what matters
    return value


def record_useful(vault: Path, paths: Iterable[str]) -> dict[str, int]:
    """Raise ``useful_count`` of each note in ``paths``; returns {path: new count} for those written.

    Notes that cannot be written (gone, outside the vault, broken frontmatter) are skipped, never
    created.
    """
    vault = Path(vault)
    done: dict[str, int] = {}
    for rel in dict.fromkeys(paths):
        try:
            done[rel] = bump(vault, rel, USEFUL)
        except CounterError:
            continue
    return done
