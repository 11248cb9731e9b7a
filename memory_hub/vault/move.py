"""Renaming a note and every link that pointed to it, as one commit.

Which links change is decided by resolution, not by text: every link of every note is resolved
the way Obsidian does (``links.Resolver``) against the vault before the move and after it, and a
link is rewritten only when its answer would change — a link to the moved note that would dangle
or reach another note, and a link to another note that the new name would capture (moving a note
to ``y.md`` must not steal ``[[y]]`` from ``other/y.md``). ``[[name]]`` that still finds the note
(a move to another folder, an alias) is left exactly as written. A rewritten link keeps its form:
heading, block, alias, embed ``!``, a table's ``\\|``, a path-qualified target stays path-qualified,
and a relative Markdown link stays relative (its ``%20`` or ``<…>`` spelling too). Links inside
code and ``%%comments%%`` are not links and are never touched; wikilinks in frontmatter values are.
The moved note's own relative Markdown links are rewritten for its new folder.

A note a person is editing (``editing.being_edited``) is skipped and reported with the links left
pointing at the old name. Everything else — the rename and each rewritten note, each written
atomically — goes through ``journal.commit_atomically``: one commit, and a process killed half-way
leaves a journal the next writer completes or rolls back, so a vault never keeps half a move.
"""

from __future__ import annotations

import os
import posixpath
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from ..config import max_note_bytes
from . import frontmatter as fm
from .editing import (
    WriteRefused,
    being_edited,
    check_hash,
    check_new_path,
    editing_window,
    note_hash,
    read_for_change,
    write_turn,
)
from .git import GitError, uncommitted_paths
from .journal import Change, CommitBlocked, JournalConflict, commit_atomically
from .links import MARKDOWN, WIKILINK, LinkSpan, Resolver, link_spans
from .walk import OutsideVault, UnreadableNote, decode_note, read_note_bytes, safe_path, walk

MESSAGE_LIST = 50  # notes named in a commit message (git refuses a message argument over 128 KiB)


@dataclass
class MoveResult:
    old: str
    new: str
    hash: str  # of the note at its new path
    commit: str | None = None
    relinked: list[dict[str, object]] = field(default_factory=list)  # {path, links}
    skipped: list[dict[str, object]] = field(default_factory=list)  # {path, links, reason}
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, [])}

    @property
    def paths(self) -> list[str]:
        """Every file the move changed (for the index to follow)."""
        return [self.old, self.new, *(str(r["path"]) for r in self.relinked)]


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


def _key(target: str) -> str:
    """What a link target is looked up by, lower-cased: its last path component without ``.md``."""
    return _stem(target.replace("\\", "/").rstrip("/")).strip().lower()


def new_path_for(old: str, new: str) -> str:
    """``new`` as a note path: ``folder/`` keeps the name, a missing ``.md`` is added."""
    new = new.strip().replace("\\", "/")
    folder = new.endswith("/")
    new = posixpath.normpath(new) if new.strip("/") else ""
    if folder or not new or new == ".":
        new = posixpath.join(new if new not in ("", ".") else "", old.rsplit("/", 1)[-1])
    return new if new.lower().endswith(".md") else new + ".md"


def _escape_md(path: str, encoded: bool) -> str:
    if encoded:
        return quote(path, safe="/!$&'()*+,;=:@-._~")
    return path.replace("%", "%25").replace(" ", "%20").replace(")", "%29")


def _strict(source: str, target: str) -> str:
    """Where a Markdown link leads when followed literally (relative to its note, or from the root)."""
    target = target.replace("\\", "/").strip()
    if target.startswith("/"):
        return posixpath.normpath(target.lstrip("/"))
    return posixpath.normpath(posixpath.join(posixpath.dirname(source), target))


def _written(text: str, span: LinkSpan, want: str, source: str, after: Resolver) -> str | None:
    """The target text that makes this link, in its own form, resolve to ``want`` after the move."""
    if span.kind == MARKDOWN:
        if span.raw.startswith("/"):
            candidate = "/" + want
        else:
            candidate = posixpath.relpath(want, posixpath.dirname(source) or ".")
        angle = span.start > 0 and text[span.start - 1] == "<"
        written = candidate if angle else _escape_md(candidate, "%" in span.raw)
        return written if _strict(source, unquote(written)) == want else None
    with_ext = span.target.lower().endswith(".md")
    full = want if with_ext else want[:-3]
    candidates = [full] if "/" in span.target else [full.rsplit("/", 1)[-1], full]
    return next((c for c in candidates if after.resolve(c, source, WIKILINK) == want), None)


def relink(text: str, source_before: str, source_after: str, before: Resolver, after: Resolver,
           old: str, new: str, keys: set[str] | None = None) -> tuple[str, int]:
    """``text`` with every link whose resolution the move ``old`` → ``new`` changes rewritten.

    ``keys`` (lower-cased names) limits the work to links looked up by one of them; None checks
    every link (the moved note itself, whose relative links all change base).
    """
    out: list[str] = []
    last = count = 0
    for span in link_spans(text):
        if keys is not None and _key(span.target) not in keys:
            continue
        kind = MARKDOWN if span.kind == MARKDOWN else WIKILINK
        was = before.resolve(span.target, source_before, kind)
        if was is None:
            continue  # it dangled before; if the new name completes it, that is what it was waiting for
        want = new if was == old else was
        if kind == MARKDOWN and (was == old or _strict(source_before, span.target) == was):
            # A relative link must stay relative-correct (another tool follows it literally), not
            # merely resolvable by Obsidian's fallback to the file name.
            if _strict(source_after, span.target) == want:
                continue
        elif after.resolve(span.target, source_after, kind) == want:
            continue
        written = _written(text, span, want, source_after, after)
        if written is None or written == span.raw:
            continue
        out += [text[last:span.start], written]
        last = span.end
        count += 1
    out.append(text[last:])
    return "".join(out), count


@dataclass
class _Vault:
    paths: list[str]
    notes: dict[str, int]  # Markdown note → mtime_ns


def _scan(vault: Path) -> _Vault:
    paths, notes = [], {}
    for stat in walk(vault):
        paths.append(stat.path)
        if stat.is_note:
            notes[stat.path] = stat.mtime_ns
    return _Vault(paths, notes)


def _read_text(vault: Path, rel: str) -> tuple[bytes, str] | None:
    try:
        data = read_note_bytes(vault, rel)
        return data, decode_note(data)
    except (OSError, UnreadableNote, OutsideVault):
        return None  # not a readable note: it is not indexed, and its links cannot be rewritten


def _aliases(text: str) -> list[str]:
    block = fm.parse(text)
    value = block.data.get("aliases") or block.data.get("alias")
    if isinstance(value, str):
        value = [value]
    return [str(a).strip() for a in value or [] if str(a).strip()]


def _needles(keys: set[str]) -> tuple[str, ...]:
    """What a note's lower-cased text must contain to hold a link looked up by one of ``keys``."""
    return tuple({k for k in keys} | {quote(k).lower() for k in keys})


def _mentions(text: str, needles: tuple[str, ...]) -> bool:
    low = text.lower()
    return any(n in low for n in needles)


def move_note(vault: Path, old: str, new: str, expected_hash: str | None = None, *, who: str = "mcp",
              now: float | None = None) -> MoveResult:
    """Rename the note ``old`` to ``new`` and rewrite the links the rename affects; one commit.

    ``expected_hash`` (from ``read_note``) is checked when given, and required when the note itself
    is being edited. Raises WriteRefused (nothing written) for a bad or taken ``new``, a stale hash,
    a note being edited, or a vault that cannot commit.
    """
    vault = Path(vault)
    now = time.time() if now is None else now
    new = check_new_path(new_path_for(old, new))
    if not old.lower().endswith(".md"):
        raise WriteRefused(f"{old} is not a Markdown note; move attachments in Obsidian or with `git mv`")
    if new == old:
        raise WriteRefused(f"{old} is already at that path")
    try:
        safe_path(vault, new)
    except OutsideVault as exc:
        raise WriteRefused(f"refused new_path: {exc}") from None
    with write_turn(vault) as notes:
        scan = _scan(vault)
        if old not in scan.notes:
            read_for_change(vault, old)  # the precise reason: a symlink, outside the vault, binary …
            raise WriteRefused(f"no note at {old}")
        taken = next((p for p in scan.paths if p.lower() == new.lower() and p != old), None)
        if taken:
            raise WriteRefused(f"{taken} already exists; pick another new_path (nothing is ever overwritten)")
        got = _read_text(vault, old)
        if got is None:
            raise WriteRefused(f"cannot move {old}: not a readable note")
        data, text = got
        mtime = scan.notes[old]
        check_hash(old, data, expected_hash)
        dirty, window = uncommitted_paths(vault), editing_window(vault)
        if expected_hash is None:
            busy = being_edited(old, mtime, dirty, now, window)
            if busy:
                raise WriteRefused(f"{old} is {busy}; read it with read_note and pass its hash as expected_hash "
                                   "to move it anyway")

        moved_aliases = _aliases(text)
        keys = {_key(old), _key(new)} | {a.lower() for a in moved_aliases}
        texts, aliases = _linking(vault, scan, keys, old)
        aliases[old] = moved_aliases
        before = Resolver(scan.paths, aliases)
        after_aliases = {(new if p == old else p): a for p, a in aliases.items()}
        after = Resolver([new if p == old else p for p in scan.paths], after_aliases)

        moved_text, _ = relink(text, old, new, before, after, old, new)
        moved_bytes = moved_text.encode("utf-8") if moved_text != text else data
        changes = [Change(new, None, moved_bytes), Change(old, data, None, expected_mtime_ns=mtime)]
        result = MoveResult(old, new, note_hash(moved_bytes), notes=notes)
        for path, (raw, body) in sorted(texts.items()):
            rewritten, count = relink(body, path, path, before, after, old, new, keys)
            if not count:
                continue
            busy = being_edited(path, scan.notes[path], dirty, now, window)
            if busy:
                result.skipped.append({"path": path, "links": count,
                                       "reason": f"{busy}; its links still point to {old.removesuffix('.md')}"})
                continue
            changes.append(Change(path, raw, rewritten.encode("utf-8"), expected_mtime_ns=scan.notes[path]))
            result.relinked.append({"path": path, "links": count})
        try:
            result.commit = commit_atomically(vault, changes, _message(who, result), name="move_note")
        except (CommitBlocked, JournalConflict) as exc:
            raise WriteRefused(f"not moved (nothing was left changed): {exc}") from None
        except GitError as exc:
            raise WriteRefused(f"not moved (git refused the commit, nothing was left changed): {exc}") from None
    return result


def _message(who: str, result: MoveResult) -> str:
    lines = [f"{who} move_note: {result.old} → {result.new}", ""]
    for title, rows in (("Rewrote {links} link(s) in {notes} note(s):", result.relinked),
                        ("Left as they are (being edited), {links} link(s) in {notes} note(s):", result.skipped)):
        if rows:
            lines.append(title.format(links=sum(int(str(r["links"])) for r in rows), notes=len(rows)))
            lines += [f"- {r['path']} ({r['links']})" for r in rows[:MESSAGE_LIST]]
            if len(rows) > MESSAGE_LIST:
                lines.append(f"- and {len(rows) - MESSAGE_LIST} more (see the diff)")
    return "\n".join(lines).rstrip() + "\n"


def _linking(vault: Path, scan: _Vault, keys: set[str], skip: str) -> tuple[dict[str, tuple[bytes, str]],
                                                                         dict[str, list[str]]]:
    """The notes (but ``skip``) that could hold a link looked up by one of ``keys``, and their aliases.

    A plain substring test on each file's text first, on a quick read of the file the walk found
    (no per-file confinement check: that costs most of a move on a vault of thousands of notes,
    and a file read here only decides which notes are read again, through the safe-path layer,
    to be parsed); only a handful are.
    """
    texts: dict[str, tuple[bytes, str]] = {}
    aliases: dict[str, list[str]] = {}
    root = str(vault)
    needles = _needles(keys)
    for path in scan.notes:
        if path == skip or not _quick_mentions(os.path.join(root, path), needles):
            continue
        got = _read_text(vault, path)
        if got is None or not _mentions(got[1], needles):
            continue
        texts[path] = got
        found = _aliases(got[1])
        if found:
            aliases[path] = found
    return texts, aliases


def _quick_mentions(full: str, needles: tuple[str, ...]) -> bool:
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_note_bytes() + 1)
    except OSError:
        return False
    return _mentions(data.decode("utf-8", "replace"), needles)


def backlinks(vault: Path, rel: str) -> list[str]:
    """The notes whose links resolve to ``rel`` now (read from the files, not the index)."""
    scan = _scan(vault)
    got = _read_text(vault, rel)
    own = _aliases(got[1]) if got else []
    keys = {_key(rel)} | {a.lower() for a in own}
    texts, aliases = _linking(vault, scan, keys, rel)
    if own:
        aliases[rel] = own
    resolver = Resolver(scan.paths, aliases)
    return sorted(path for path, (_raw, text) in texts.items()
                  if any(_key(s.target) in keys
                         and resolver.resolve(s.target, path, MARKDOWN if s.kind == MARKDOWN else WIKILINK) == rel
                         for s in link_spans(text)))
