"""Braindump: one line of effort for the person, no decision about where it goes.

``write_capture`` is the single code path behind ``memory-hub braindump``, the MCP ``capture`` tool
and the hooks' transcript saves. It classifies the scope, extracts action items and themes, puts
any deadline found in the text into a field (``due:`` for action items, ``deadline:`` for trackers)
so the look-ahead can see it, writes a dated note with full frontmatter into ``inbox/`` (atomic,
never over an existing file) and links it from the day's daily note.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..config import db_path, settings
from ..vault.frontmatter import set_fields
from ..vault.notes import CAPTURE, KINDS, TEMPLATE, TRACKER
from ..vault.redact import Redaction
from ..vault.safe_io import OutsideVault, UnreadableNote
from ..vault.writer import NoteExists, create_note, unique_note_path
from . import classify as cls
from .daily import link_from_daily
from .dates import find_deadline

MAX_CAPTURE_BYTES = int(os.environ.get("MEMORY_HUB_MAX_CAPTURE_BYTES", 256 * 1024))
SCOPES = ("personal", "work", "project")
DESCRIPTION_CHARS = 240
CAPTURE_FOLDER = "inbox"  # the default of folders.inbox: every capture lands there, whatever its kind


class CaptureError(ValueError):
    """A capture that cannot be written (empty, too large, bad field); nothing was written."""


@dataclass
class CaptureResult:
    """What a capture did, for the CLI and the MCP tool to report."""

    path: str
    title: str
    scope: str
    kind: str
    tags: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    due: str | None = None
    deadline: str | None = None
    daily: str | None = None
    urls: list[dict[str, object]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    redacted: dict[str, int] = field(default_factory=dict)  # secrets removed before writing, by kind

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def known_tags(vault: Path) -> list[str]:
    """Tags already used in the vault, read from the index when it exists (no index is built here)."""
    path = db_path(vault)
    if not path.exists():
        return []
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        try:
            rows = conn.execute("SELECT DISTINCT value FROM notes, json_each(notes.tags)").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [r[0] for r in rows if isinstance(r[0], str)]


def _clean_tags(tags: list[str] | None) -> list[str]:
    out: list[str] = []
    for tag in tags or []:
        if not isinstance(tag, str):
            raise CaptureError(f"tags must be strings, got {tag!r}")
        t = tag.strip().lstrip("#").strip()
        if t and " " not in t and t.lower() not in (x.lower() for x in out):
            out.append(t)
        elif " " in t:
            t = t.replace(" ", "-")
            if t.lower() not in (x.lower() for x in out):
                out.append(t)
    return out


def _description(text: str, title: str, actions: list[str]) -> str:
    """The capture's opening words, cut where a sentence ends (else at a word, marked with "…").

    The title is the first sentence (or heading) cut short; the description carries on from the same
    first sentence rather than splicing the rest of a cut sentence after it.
    """
    from ..vault.markdown import plain_text, trim

    lines = []
    for raw in text.splitlines():
        line = re.sub(r"^\s*(?:#{1,6}\s+|[-*+]\s+(?:\[[ xX]\]\s+)?|\d+[.)]\s+)", "", raw).strip()
        if line:
            lines.append(line)
    # a line break ends a sentence (a heading, a list item): say so, so the cut below can find it
    flat = plain_text(" ".join(ln if i == len(lines) - 1 or re.search(r"[.!?。！？:：]$", ln)
                               else ln + ("." if ln.isascii() else "。") for i, ln in enumerate(lines)))
    suffix = f" ({len(actions)} action item{'s' if len(actions) != 1 else ''})" if actions else ""
    limit = DESCRIPTION_CHARS - len(suffix)
    if not flat:
        return trim(title, limit) + suffix
    if len(flat) <= limit:
        return flat + suffix
    cut = flat[:limit + 1]
    ends = [m.end() for m in re.finditer(r"[.!?](?=\s)|[。！？]", cut)]
    if ends and ends[-1] >= limit * 0.4:
        return cut[:ends[-1]].strip() + suffix
    return trim(flat, limit) + suffix


def _yaml_date(value: str) -> _dt.date | str:
    """An ISO day as a YAML date (``created: 2026-05-20``, like the vault's notes), anything else as given."""
    try:
        return _dt.date.fromisoformat(value)
    except (TypeError, ValueError):
        return value


def render_capture(*, title: str, description: str, kind: str, scope: str, tags: list[str], created: str,
                   body: str, due: str | None = None, deadline: str | None = None,
                   links: list[str] | None = None, actions: list[str] | None = None,
                   sources: list[dict[str, object]] | None = None) -> str:
    """The Markdown text of a capture note: full frontmatter, the text as given, then what was found."""
    fields: dict[str, object] = {
        "title": title, "description": description, "kind": kind, "scope": scope, "tags": tags,
        "created": _yaml_date(created), "updated": _yaml_date(created),
    }
    if due:
        fields["due"] = _yaml_date(due)
    if deadline:
        fields["deadline"] = _yaml_date(deadline)
    if kind == CAPTURE:
        fields["status"] = "inbox"
    lines = [f"# {title}", ""]
    lines.append(body.strip())
    lines.append("")
    if actions:
        lines += ["## Action items", ""]
        lines += [f"- [ ] {a}" for a in actions]
        lines.append("")
    for src in sources or []:
        if src.get("skipped"):
            continue  # not fetched on purpose: the URL is in the text, nothing to report in the note
        lines += [f"## Source: {src['url']}", ""]
        if src.get("ok"):
            if src.get("title"):
                lines += [f"**{src['title']}**", ""]
            lines += [str(src.get("text", "")).strip(), ""]
        else:
            lines += [f"Fetching this URL failed ({src.get('error')}); the link is kept above, the page text is not.", ""]
    if links:
        lines += ["## Related", ""] + [f"- [[{target}]]" for target in links] + [""]
    return set_fields("\n".join(lines), fields)


def write_capture(vault: Path, text: str, title: str | None = None, kind: str | None = None,
                  tags: list[str] | None = None, links: list[str] | None = None, scope: str | None = None,
                  *, fetch_urls: bool | None = None, link_daily: bool = True, today: _dt.date | None = None,
                  folder: str | None = None) -> str:
    """Write a capture note into ``inbox/`` and return its vault-relative path. See :func:`braindump`."""
    return braindump(vault, text, title=title, kind=kind, tags=tags, links=links, scope=scope,
                     fetch_urls=fetch_urls, link_daily=link_daily, today=today, folder=folder).path


def braindump(vault: Path, text: str, title: str | None = None, kind: str | None = None,
              tags: list[str] | None = None, links: list[str] | None = None, scope: str | None = None,
              *, fetch_urls: bool | None = None, link_daily: bool = True, today: _dt.date | None = None,
              folder: str | None = None) -> CaptureResult:
    """Capture ``text``: classify, extract, structure dates, write atomically, link from the daily note.

    ``fetch_urls``: True fetches every URL in the text, False none, None follows
    ``capture.fetch_urls`` (see :func:`should_fetch`). ``folder`` defaults to ``folders.inbox``.
    Raises CaptureError for empty or oversized text and bad fields; nothing is written then.
    """
    vault = Path(vault)
    if not isinstance(text, str) or not text.strip():
        raise CaptureError("nothing to capture: the text is empty")
    size = len(text.encode("utf-8"))
    if size > MAX_CAPTURE_BYTES:
        raise CaptureError(f"capture too large ({size:,} bytes > {MAX_CAPTURE_BYTES:,}); save big material as an attachment")
    if "\x00" in text:
        raise CaptureError("capture text contains NUL bytes; binary content is not a note")
    kind = (kind or CAPTURE).strip().lower()
    if kind not in KINDS or kind == TEMPLATE:
        raise CaptureError(f"unknown kind {kind!r}: use one of {', '.join(k for k in KINDS if k != TEMPLATE)}")
    if scope is not None and scope.strip().lower() not in SCOPES:
        raise CaptureError(f"unknown scope {scope!r}: use personal, work or project")
    if title is not None and not title.strip():
        title = None
    for target in links or []:
        if not isinstance(target, str) or not target.strip() or "]]" in target or "\n" in target:
            raise CaptureError(f"bad link target {target!r}")
    if not vault.is_dir():
        raise CaptureError(f"vault not found: {vault}")

    today = today or _dt.date.today()
    # Secrets never reach the vault (a git repository): everything below, the title, description,
    # daily-note link and fetched pages included, is derived from redacted text.
    removed = Redaction("")
    text = _redacted(text.replace("\r\n", "\n"), removed)
    title = _redacted(title, removed) if title else title
    tags = [_redacted(t, removed) for t in tags] if tags else tags
    found = cls.classify(text, known_tags(vault))
    chosen_scope = scope.strip().lower() if scope else found.scope
    reasons = list(found.reasons) if not scope else [f"scope given: {chosen_scope}"]
    title = (title or cls.make_title(text)).strip().replace("\n", " ")
    tag_list = _clean_tags((tags or []) + found.themes)
    warnings: list[str] = []

    sources: list[dict[str, object]] = []
    urls = cls.find_urls(text)[:3]
    fetch_these = should_fetch(vault, text, urls, fetch_urls)
    for url in urls:
        if not fetch_these:
            reason = "fetching disabled" if fetch_urls is False else "not fetched: capture.fetch_urls is " + \
                settings(vault)["capture.fetch_urls"]
            sources.append({"url": url, "ok": False, "skipped": True, "error": reason})
            continue
        from .fetch import fetch

        got = fetch(url)
        sources.append({"url": url, "ok": got.ok, "title": _redacted(got.title, removed),
                        "text": _redacted(got.text, removed), "error": got.error})
        if not got.ok:
            warnings.append(f"could not fetch {url}: {got.error}; the URL is kept in the note")

    deadline_date = find_deadline(text, today)
    due = deadline = None
    if deadline_date is not None:
        if kind == TRACKER:
            deadline = deadline_date.isoformat()
        else:
            due = deadline_date.isoformat()
            if not found.actions:
                reasons.append("deadline found without an explicit action item")
    description = _description(text, title, found.actions)
    folder = settings(vault)["folders.inbox"] if folder is None else folder
    note_text = render_capture(title=title, description=description, kind=kind, scope=chosen_scope, tags=tag_list,
                               created=today.isoformat(), body=text, due=due, deadline=deadline, links=links,
                               actions=[a for a in found.actions if f"- [ ] {a}" not in text], sources=sources)
    try:
        for _attempt in range(5):
            rel = unique_note_path(vault, folder, title, today)
            try:
                create_note(vault, rel, note_text)
                break
            except NoteExists:
                continue  # taken between choosing the name and creating it
        else:
            raise CaptureError("could not find a free file name for the capture")
    except OutsideVault as exc:
        raise CaptureError(str(exc)) from None

    if removed.counts:
        warnings.append(f"{removed.summary()} before writing")
    daily = None
    if link_daily and kind != "daily":
        try:
            daily = link_from_daily(vault, rel, title, today)
        except (OSError, NoteExists, OutsideVault, UnreadableNote) as exc:
            warnings.append(f"capture saved, but the daily note was not updated: {exc}")
    return CaptureResult(path=rel, title=title, scope=chosen_scope, kind=kind, tags=tag_list, actions=found.actions,
                         due=due, deadline=deadline, daily=daily,
                         urls=[{k: v for k, v in s.items() if k != "text"} for s in sources],
                         warnings=warnings, reasons=reasons, redacted=dict(removed.counts))


def _redacted(text: str, into: Redaction) -> str:
    """``text`` redacted, its counts added to ``into``."""
    return into.add(text)


def should_fetch(vault: Path, text: str, urls: list[str], explicit: bool | None = None) -> bool:
    """Whether to fetch the URLs of a capture. A capture that is nothing but one URL asks for the
    page, so ``url-only`` (the default) fetches it; URLs mentioned in a text are fetched only with
    ``all`` (or an explicit request): a local memory does not reach the network on its own."""
    if explicit is not None:
        return explicit and bool(urls)
    policy = settings(vault)["capture.fetch_urls"]
    if policy == "all":
        return bool(urls)
    return policy == "url-only" and len(urls) == 1 and text.strip().strip("<>") == urls[0]


def result_json(result: CaptureResult) -> str:
    return json.dumps(result.as_dict(), ensure_ascii=False)
