"""Access and useful counts, kept in each note's frontmatter so they outlive every index.

``access_count`` rises when a note's body is actually read (an agent opened the file), never when
it merely appears in results; ``useful_count`` rises when the usefulness judge decides the
assistant used a note it was shown. Both are written with ``frontmatter.set_fields`` (only those
lines change: the body and the key order stay as the person wrote them) and
``writer.replace_note`` after checking that the file is exactly what was read (inode, mtime, size,
bytes), so an edit made in the meantime is never lost: the update is retried on the fresh text.
A note modified in the last few seconds may be mid-save in an editor, so its increment is parked
in ``.memory_hub/counters-pending.json`` and applied by the next update once the note is quiet.

When a note was last read is a cache, not a fact worth a git commit per read, so it goes to
``<vault>/.memory_hub/recent_reads.json`` (bounded); recall uses it for its recency boost.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..config import index_dir
from ..locks import file_lock
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
    with file_lock(index_dir(vault) / "counters.lock"):
        yield


# A note written this recently may be open in an editor that is writing it right now (in place,
# truncate-then-write). Rewriting it then could capture half a file, so the increment waits in a
# small journal under .memory_hub/ and is applied by a later call once the note is quiet.
QUIET_NS = 3_000_000_000
PENDING = "counters-pending.json"


def _stable_read(vault: Path, rel: str, full: Path) -> tuple[os.stat_result, bytes] | None:
    """The note's bytes and stat, or None when the file changed while it was being read."""
    before = full.stat()
    data = read_note_bytes(vault, rel)
    after = full.stat()
    same = (before.st_mtime_ns, before.st_size, before.st_ino) == (after.st_mtime_ns, after.st_size, after.st_ino)
    return (after, data) if same and len(data) == after.st_size else None


def _unchanged(vault: Path, rel: str, full: Path, st: os.stat_result, data: bytes) -> bool:
    """Re-check just before writing: same inode, mtime, size and bytes as what was read."""
    got = _stable_read(vault, rel, full)
    return got is not None and got[0].st_ino == st.st_ino and got[0].st_mtime_ns == st.st_mtime_ns and got[1] == data


def _restore_if_raced(vault: Path, rel: str, old_fd: int, st: os.stat_result) -> None:
    """If a save landed in the replaced file during the swap, put the person's version back."""
    after = os.fstat(old_fd)
    if (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns):
        return
    theirs = os.pread(old_fd, after.st_size, 0)
    replace_note(vault, rel, theirs.decode("utf-8", "surrogateescape"))
    raise NoteExists(rel)  # retry the count on top of their version


def _defer(vault: Path, rel: str, key: str, by: int) -> None:
    with _locked_json(index_dir(vault) / PENDING) as data:
        entry = data.setdefault(rel, {})
        entry[key] = int(entry.get(key, 0)) + by


_WRITTEN = "counters-written.json"


def _ours(vault: Path, rel: str, st: os.stat_result) -> bool:
    """Whether the note's current version is the one this module last wrote (not a person's edit)."""
    try:
        data = json.loads((index_dir(vault) / _WRITTEN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get(rel) == [st.st_ino, st.st_mtime_ns, st.st_size]


def _remember_write(vault: Path, rel: str, full: Path) -> None:
    st = full.stat()
    with _locked_json(index_dir(vault) / _WRITTEN) as data:
        data[rel] = [st.st_ino, st.st_mtime_ns, st.st_size]
        if len(data) > MAX_RECENT:
            for old in list(data)[: len(data) - MAX_RECENT]:
                del data[old]


def _take_pending(vault: Path, rel: str) -> dict[str, int]:
    path = index_dir(vault) / PENDING
    if not path.exists():
        return {}
    with _locked_json(path) as data:
        entry = data.pop(rel, None)
    return {k: int(v) for k, v in (entry or {}).items()}


def _bump_locked(vault: Path, rel: str, full: Path, key: str, by: int) -> int:
    for _ in range(_RETRIES):
        try:
            got = _stable_read(vault, rel, full)
            if got is None:
                time.sleep(0.02)
                continue  # being written right now: read again
            st, data = got
            text = decode_note(data)
        except (OSError, UnreadableNote) as exc:
            raise CounterError(f"{rel}: {exc}") from None
        block = frontmatter.parse(text)
        if block.problem:
            raise CounterError(f"{rel}: {block.problem}; its counters are left alone")
        fields = block.data
        if time.time_ns() - st.st_mtime_ns < QUIET_NS and not _ours(vault, rel, st):
            _defer(vault, rel, key, by)
            return _current(fields.get(key)) + by
        updates = {key: by}
        for pending_key, n in _take_pending(vault, rel).items():
            updates[pending_key] = updates.get(pending_key, 0) + n
        values = {k: _current(fields.get(k)) + n for k, n in updates.items()}
        try:
            new_text = frontmatter.set_fields(text, values)
        except ValueError as exc:
            raise CounterError(f"{rel}: {exc}") from None
        try:
            if not _unchanged(vault, rel, full, st, data):
                raise NoteExists(rel)
            old_fd = os.open(full, os.O_RDONLY)  # the version we replace, to check it after the swap
            try:
                replace_note(vault, rel, new_text, expected_mtime_ns=st.st_mtime_ns)
                _restore_if_raced(vault, rel, old_fd, st)
            finally:
                os.close(old_fd)
            _remember_write(vault, rel, full)
        except NoteExists:
            for pending_key, n in updates.items():
                if pending_key != key:
                    _defer(vault, rel, pending_key, n)
            time.sleep(0.01)
            continue  # changed under us: re-read and apply to the fresh text
        return values[key]
    _defer(vault, rel, key, by)
    raise CounterError(f"{rel} kept changing while its {key} was updated; the count was deferred")


@contextlib.contextmanager
def _locked_json(path: Path) -> Iterator[dict]:
    """A small JSON cache file, read and rewritten (atomically) under its own lock."""
    with file_lock(Path(str(path) + ".lock")):
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


def flush_pending(vault: Path) -> dict[str, int]:
    """Apply parked increments to notes that are quiet now; returns {path: increments applied}."""
    vault = Path(vault)
    try:
        pending = json.loads((index_dir(vault) / PENDING).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    applied: dict[str, int] = {}
    for rel, entry in pending.items() if isinstance(pending, dict) else ():
        if not isinstance(entry, dict) or not entry:
            continue
        try:
            st = safe_path(vault, rel).stat()
        except (OutsideVault, OSError):
            continue
        if time.time_ns() - st.st_mtime_ns < QUIET_NS and not _ours(vault, rel, st):
            continue  # still being edited: keep waiting
        try:
            bump(vault, rel, next(iter(entry)), 0)  # a zero bump applies everything parked
        except CounterError:
            continue
        applied[rel] = sum(int(v) for v in entry.values())
    return applied
