"""Every file Memory Hub opens inside a vault goes through here: resolve, read, write, append, delete.

A path is vault-relative and must stay inside the vault (``..``, absolute paths and symlinks whose
target leaves the vault are refused with ``OutsideVault``; a symlink *within* the vault is followed).
The check and the open cannot be raced apart: the resolved path is opened one folder at a time from
the vault's root with ``O_NOFOLLOW``, so a folder swapped for a symlink after the check makes the open
fail instead of leading outside. Reads open with ``O_NONBLOCK`` and refuse anything that is not a
regular file (a FIFO named ``x.md`` can never block a hook). Writes are atomic (a temporary file in
the same folder, fsync, then rename, or an exclusive link for new files, so a new note can never
replace an existing one); appends are one ``write()`` under an advisory lock.

Dot-folders (``.git``, ``.obsidian``, the ``.memory_hub`` cache) are outside the vault's *content*:
only callers that name such a file on purpose (``.gitignore``, the ``.memory-hub/`` state folder)
pass ``hidden=True``. The same functions work for any trusted root folder (the git folder of a
worktree, for example): ``vault`` is simply the root the path is confined to.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat as stat_module
from collections.abc import Iterator
from pathlib import Path

from ..config import MAX_NOTE_BYTES, SKIP_DIRS


class OutsideVault(ValueError):
    """A path that would leave the vault (``../``, absolute paths, symlinks out)."""


class UnreadableNote(Exception):
    """A file that is not a readable Markdown note; the message says why."""


class NoteExists(FileExistsError):
    """The target already exists; Memory Hub never overwrites a note it did not mean to."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def safe_path(vault: Path, rel: str, *, hidden: bool = False) -> Path:
    """Resolve ``rel`` inside the vault or raise OutsideVault. Dot and index folders count as
    outside unless ``hidden`` (for the few files the product keeps there on purpose)."""
    if not isinstance(rel, str) or not rel.strip() or "\x00" in rel:
        raise OutsideVault("empty or invalid path")
    candidate = Path(rel)
    if candidate.is_absolute():
        raise OutsideVault(f"absolute paths are not allowed: {rel}")
    root = Path(os.path.realpath(vault))
    try:
        full = Path(os.path.realpath(root / candidate, strict=False))
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise OutsideVault(f"path cannot be resolved ({exc}): {rel}") from None
    if full != root and root not in full.parents:
        raise OutsideVault(f"path leaves the vault: {rel}")
    parts = full.relative_to(root).parts
    if not parts:
        raise OutsideVault(f"not a file: {rel}")
    if not hidden and any(p in SKIP_DIRS or p.startswith(".") for p in parts):
        raise OutsideVault(f"path is inside a hidden or index folder: {rel}")
    if _is_loop(full):
        raise OutsideVault(f"path is a symlink loop: {rel}")
    return full


def _is_loop(full: Path) -> bool:
    """realpath() leaves a looping symlink unresolved; the walk below would then meet a symlink."""
    try:
        return stat_module.S_ISLNK(os.lstat(full).st_mode)
    except OSError:
        return False


def _parts(vault: Path, rel: str, hidden: bool) -> tuple[str, list[str], str]:
    """(real root, folders below it, file name) of ``rel``, checked by ``safe_path``."""
    full = safe_path(vault, rel, hidden=hidden)
    root = os.path.realpath(vault)
    parts = list(full.relative_to(root).parts)
    return root, parts[:-1], parts[-1]


@contextlib.contextmanager
def _folder(root: str, folders: list[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of ``root/folders…``, opened one level at a time without following symlinks."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in folders:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise OutsideVault(f"{name}/ is a symlink that cannot be followed safely (a loop, or it "
                                       "changed while being opened)") from None
                raise
            # Rebind before closing: a signal between the two must never leave ``fd`` naming a closed
            # descriptor, which the ``finally`` would close again (EBADF in place of the
            # KeyboardInterrupt, or another thread's file closed under it).
            prev, fd = fd, nxt
            os.close(prev)
        yield fd
    finally:
        os.close(fd)


def _open_leaf(name: str, flags: int, dir_fd: int, mode: int = 0o644) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutsideVault(f"{name} is a symlink that cannot be followed safely (a loop, or it changed "
                               "while being opened)") from None
        raise


def _check_regular(fd: int, name: str) -> os.stat_result:
    st = os.fstat(fd)
    if not stat_module.S_ISREG(st.st_mode):
        what = "a folder" if stat_module.S_ISDIR(st.st_mode) else "not a regular file (a pipe, socket or device)"
        raise UnreadableNote(f"{name} is {what}; skipped")
    return st


# -- reading --------------------------------------------------------------------------------------

def stat_file(vault: Path, rel: str, *, hidden: bool = False) -> os.stat_result:
    """The stat of a regular file inside the vault (FileNotFoundError, OutsideVault, UnreadableNote)."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders) as dfd:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if not stat_module.S_ISREG(st.st_mode):
        raise UnreadableNote(f"{rel} is not a regular file; skipped")
    return st


def is_file(vault: Path, rel: str, *, hidden: bool = False) -> bool:
    """Whether ``rel`` is a regular file inside the vault (never raises)."""
    try:
        stat_file(vault, rel, hidden=hidden)
    except (OSError, OutsideVault, UnreadableNote):
        return False
    return True


def read_bytes(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES, *, hidden: bool = False) -> bytes:
    """A regular file's bytes, refusing paths outside the vault, non-regular files and files over
    ``max_bytes`` (UnreadableNote); FileNotFoundError when it is gone."""
    data, _st = read_bytes_and_stat(vault, rel, max_bytes, hidden=hidden)
    return data


def read_bytes_and_stat(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES, *,
                        hidden: bool = False) -> tuple[bytes, os.stat_result]:
    """``read_bytes`` plus the stat of the very file that was read (same descriptor)."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders) as dfd:
        fd = _open_leaf(name, os.O_RDONLY | os.O_NONBLOCK, dfd)
    try:
        st = _check_regular(fd, rel)
        if st.st_size > max_bytes:
            raise UnreadableNote(f"too large ({st.st_size:,} bytes > {max_bytes:,}); skipped")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, max(65536, st.st_size - total + 1))
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise UnreadableNote(f"too large (grew past {max_bytes:,} bytes while read); skipped")
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def read_range(vault: Path, rel: str, offset: int, max_bytes: int, *,
               hidden: bool = False) -> tuple[bytes, os.stat_result]:
    """Up to ``max_bytes`` from ``offset`` of a regular file, and its stat (for append-only logs
    read incrementally)."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders) as dfd:
        fd = _open_leaf(name, os.O_RDONLY | os.O_NONBLOCK, dfd)
    try:
        st = _check_regular(fd, rel)
        return os.pread(fd, max(0, min(max_bytes, st.st_size - offset)), offset), st
    finally:
        os.close(fd)


def read_text(vault: Path, rel: str, max_bytes: int = MAX_NOTE_BYTES, *, hidden: bool = False) -> str:
    """A text file's content as UTF-8 (UnreadableNote for binary or non-UTF-8 content)."""
    return decode_note(read_bytes(vault, rel, max_bytes, hidden=hidden))


def decode_note(data: bytes) -> str:
    """Decode a note's bytes as UTF-8, refusing binary content (a NUL anywhere) with a clear reason."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise UnreadableNote(f"binary content (a NUL byte at offset {nul:,}); skipped")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnreadableNote(f"not valid UTF-8 at byte {exc.start}; skipped") from None
    return text.lstrip("\ufeff")


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read descriptor for a file *outside* any vault (an agent's transcript): never blocks on a
    FIFO or device, refuses anything that is not a regular file (UnreadableNote)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _check_regular(fd, str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


# -- writing --------------------------------------------------------------------------------------

def _fsync(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.fsync(fd)


def _write_temp(dfd: int, name: str, data: bytes, mode: int | None = None) -> str:
    for n in range(100):
        tmp = f".mh-{name[:40]}.{os.getpid()}.{n}.tmp"
        try:
            fd = _open_leaf(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, dfd)
        except FileExistsError:
            continue
        try:
            if mode is not None:
                os.fchmod(fd, mode)  # a replaced file keeps its permissions
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
        return tmp
    raise OSError(errno.EEXIST, "no free temporary file name")


def create_file(vault: Path, rel: str, data: bytes, *, hidden: bool = False) -> Path:
    """Create a new file atomically (folders as needed); NoteExists instead of overwriting anything."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders, create=True) as dfd:
        tmp = _write_temp(dfd, name, data)
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            raise NoteExists(f"a note already exists at {rel}") from None
        finally:
            os.unlink(tmp, dir_fd=dfd)
        _fsync(dfd)
    return Path(root, *folders, name)


def replace_file(vault: Path, rel: str, data: bytes, expected_mtime_ns: int | None = None, *,
                 hidden: bool = False, create: bool = False) -> Path:
    """Atomically replace a file's content (with ``create``, also when it does not exist yet).

    With ``expected_mtime_ns``, refuse (NoteExists) when the file changed since it was read, so an
    edit a person made in the meantime is never lost.
    """
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders, create=create) as dfd:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            if not create:
                raise
            st = None
        if st is not None and not stat_module.S_ISREG(st.st_mode):
            raise UnreadableNote(f"{rel} is not a regular file; not overwritten")
        if expected_mtime_ns is not None and (st is None or st.st_mtime_ns != expected_mtime_ns):
            raise NoteExists(f"{rel} changed on disk since it was read; not overwritten")
        tmp = _write_temp(dfd, name, data, stat_module.S_IMODE(st.st_mode) if st is not None else None)
        try:
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
        _fsync(dfd)
    return Path(root, *folders, name)


def append_bytes(vault: Path, rel: str, data: bytes, *, hidden: bool = False) -> int:
    """Append ``data`` to a file (created if missing) in one ``write()`` under an exclusive ``flock``;
    returns the offset it was written at. A file renamed away meanwhile is reopened, so a record
    never lands in a file a reader has already taken (see vault/usage.py's publish)."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders, create=True) as dfd:
        for _ in range(20):
            fd = _open_leaf(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, dfd)
            try:
                st = _check_regular(fd, rel)
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    now = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                    continue  # renamed away between open and lock: write to the new file
                offset = os.lseek(fd, 0, os.SEEK_END)
                os.write(fd, data)
                return offset
            finally:
                os.close(fd)
    raise OSError(errno.EAGAIN, f"{rel} kept being replaced; nothing appended")


def unlink_file(vault: Path, rel: str, *, hidden: bool = False) -> None:
    """Delete a regular file inside the vault (FileNotFoundError when it is already gone)."""
    root, folders, name = _parts(vault, rel, hidden)
    with _folder(root, folders) as dfd:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat_module.S_ISREG(st.st_mode):
            raise UnreadableNote(f"{rel} is not a regular file; not deleted")
        os.unlink(name, dir_fd=dfd)


def rename_file(vault: Path, src: str, dst: str, *, hidden: bool = False) -> None:
    """Rename a regular file within one folder of the vault (atomic; replaces ``dst``)."""
    root, folders, name = _parts(vault, src, hidden)
    root2, folders2, name2 = _parts(vault, dst, hidden)
    if (root, folders) != (root2, folders2):
        raise OutsideVault("rename_file only renames within one folder")
    with _folder(root, folders) as dfd:
        os.rename(name, name2, src_dir_fd=dfd, dst_dir_fd=dfd)


def move_file(vault: Path, src: str, dst: str, *, replace: bool, src_hidden: bool = False,
              dst_hidden: bool = False) -> None:
    """Give a regular file another name anywhere in the vault, the same inode (never a copy), so an
    edit saved in the meantime moves with it instead of being lost.

    ``replace=True`` is one atomic ``rename`` over ``dst`` (for a name the caller reserved);
    ``replace=False`` links then unlinks, and raises NoteExists rather than overwrite ``dst``."""
    root, folders, name = _parts(vault, src, src_hidden)
    root2, folders2, name2 = _parts(vault, dst, dst_hidden)
    with _folder(root, folders) as sfd, _folder(root2, folders2, create=True) as dfd:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
        if not stat_module.S_ISREG(st.st_mode):
            raise UnreadableNote(f"{src} is not a regular file; not moved")
        if replace:
            os.rename(name, name2, src_dir_fd=sfd, dst_dir_fd=dfd)
        else:
            try:
                os.link(name, name2, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            except FileExistsError:
                raise NoteExists(f"a note already exists at {dst}") from None
            if os.stat(name, dir_fd=sfd, follow_symlinks=False).st_ino == os.stat(
                    name2, dir_fd=dfd, follow_symlinks=False).st_ino:
                os.unlink(name, dir_fd=sfd)
        _fsync(dfd)
        _fsync(sfd)


def list_folder(vault: Path, rel: str, *, hidden: bool = False) -> list[str]:
    """Names of the regular files in a vault folder ([] when it does not exist)."""
    try:
        full = safe_path(vault, rel, hidden=hidden)
        root = os.path.realpath(vault)
        folders = list(full.relative_to(root).parts)
        with _folder(root, folders) as dfd:
            out = []
            for n in sorted(os.listdir(dfd)):
                with contextlib.suppress(OSError):
                    if stat_module.S_ISREG(os.stat(n, dir_fd=dfd, follow_symlinks=False).st_mode):
                        out.append(n)
            return out
    except (OSError, OutsideVault):
        return []
