"""What a note is: its title, description, tags, aliases, kind, scope, dates and links.

Everything is read from the file alone, so the same file always gives the same note, and an index
rebuilt from files gives the same answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from . import frontmatter as fm
from .links import Link, extract_links
from .markdown import inline_tags, mask_code, mask_comments, plain_text, prose_paragraphs, top_heading, trim

# Bumped whenever the same file would parse to a different note (title, description, kind rules):
# the index re-reads every note once on its next sync, so an upgrade never leaves old titles behind.
# 3: the word table indexes the reader's text of the body (``index/lexical.py``).
# 4: a block of "Label: value" fields describes a note only when it has no prose (``markdown.field_block``);
# 5: also a field whose values are the links listed under it, and a paragraph of links only.
# 6: a description's lines lose their list marker only ("**Bold**:" kept its "**" as "Bold**:").
# 7: one heading rule everywhere (``markdown.HEADING``: "# C#" is "C#", an H1 may be indented 1-3 spaces).
PARSE_VERSION = "7"

KNOWLEDGE = "knowledge"
CAPTURE = "capture"
DECISION = "decision"
RUNBOOK = "runbook"
TRACKER = "tracker"
DAILY = "daily"
TEMPLATE = "template"
ATTACHMENT = "attachment"
KINDS = (KNOWLEDGE, CAPTURE, DECISION, RUNBOOK, TRACKER, DAILY, TEMPLATE)

# Kinds that stay out of lexical ranking: plentiful, low-signal text pollutes relevance.
UNRANKED_KINDS = frozenset({DAILY, TEMPLATE, ATTACHMENT})

# Folder (any level, first match from the top wins) → kind, when frontmatter does not say.
FOLDER_KINDS: dict[str, str] = {
    "inbox": CAPTURE, "captures": CAPTURE, "capture": CAPTURE, "braindumps": CAPTURE,
    "learnings": CAPTURE, "clippings": CAPTURE,
    "decisions": DECISION, "adr": DECISION, "adrs": DECISION,
    "runbooks": RUNBOOK, "playbooks": RUNBOOK,
    "trackers": TRACKER, "projects": TRACKER,
    "daily": DAILY, "journal": DAILY, "dailies": DAILY, "daily notes": DAILY,
    "templates": TEMPLATE, "_templates": TEMPLATE, "templater": TEMPLATE,
}
_KIND_SYNONYMS = {"note": KNOWLEDGE, "learning": CAPTURE, "braindump": CAPTURE, "adr": DECISION,
                  "playbook": RUNBOOK, "journal": DAILY, "project": TRACKER}
_DAILY_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# Numbering and icons people put before a folder's name: "01 Templates", "00 - Inbox", "🗂️ Daily".
_FOLDER_DECORATION = re.compile(r"^[\W\d_]+")
# A template's unfilled fields: Obsidian core / Handlebars ``{{title}}``, ``{{date:YYYY-MM-DD}}``,
# and Templater ``<% tp.file.title %>`` / ``<%* … %>``.
PLACEHOLDER = re.compile(r"\{\{[^{}\n]{1,80}\}\}|<%[*_-]?.{0,2000}?[-_]?%>", re.DOTALL)
# Link texts are where prose *names* a placeholder ("[Add {{date}} to the placeholders](…)").
_LINK_SPANS = re.compile(r"\[\[[^\]\n]*\]\]|\[[^\]\n]*\]\([^)\n]*\)")
LEADS = 4  # prose paragraphs kept as description candidates (index.describe picks the first distinctive one)
DATE_FIELDS = ("created", "updated", "date", "due", "deadline")


@dataclass
class Note:
    """A parsed note. ``path`` is vault-relative with forward slashes."""

    path: str
    title: str
    description: str
    kind: str
    scope: str | None = None
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    dates: dict[str, str] = field(default_factory=dict)
    frontmatter: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    links: list[Link] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # Description candidates in order (frontmatter description first, then prose paragraphs): a
    # description that repeats across many notes is boilerplate, and the index shows the next one.
    leads: list[str] = field(default_factory=list)

    @property
    def ranked(self) -> bool:
        """Whether this note takes part in lexical ranking."""
        return self.kind not in UNRANKED_KINDS

    @property
    def date(self) -> str | None:
        """The most meaningful single date: updated, else created, else date."""
        return self.dates.get("updated") or self.dates.get("created") or self.dates.get("date")


def _as_list(value: Any) -> list[str]:
    """Frontmatter lists may be written as a YAML list or a comma/space separated string."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = re.split(r"[,\s]+", value) if "," in value or " " in value.strip() else [value]
        return [p for p in (s.strip() for s in parts) if p]
    if isinstance(value, (list, tuple)):
        out: list[str] = []
        for item in value:
            if isinstance(item, (str, int, float)) and str(item).strip():
                out.append(str(item).strip())
        return out
    return [str(value)]


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = item.lower()
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def infer_kind(path: str, declared: Any = None) -> str:
    """The note's kind: frontmatter ``kind`` if known, else from its folder, else knowledge."""
    if isinstance(declared, str) and declared.strip():
        value = declared.strip().lower()
        if value in KINDS:
            return value
        if value in _KIND_SYNONYMS:
            return _KIND_SYNONYMS[value]
    parts = PurePosixPath(path).parts
    stem = folder_name(PurePosixPath(path).stem)
    for depth, folder in enumerate(parts[:-1]):
        name = folder_name(folder)
        kind = FOLDER_KINDS.get(folder.lower()) or FOLDER_KINDS.get(name)
        # a folder note ("01 Templates/🗂️ 01 Templates.md") is the folder's index, not one of its items
        if kind and not (depth == len(parts) - 2 and stem == name):
            return kind
    if not path.lower().endswith(".md"):
        return ATTACHMENT
    if _DAILY_NAME.match(PurePosixPath(path).stem):
        return DAILY
    return KNOWLEDGE


def folder_name(name: str) -> str:
    """A folder's name without the numbering and icons in front: ``01 Templates`` → ``templates``."""
    return _FOLDER_DECORATION.sub("", name.lower()).strip()


def has_placeholders(text: str) -> bool:
    """Whether ``text`` (code and comments already masked) holds unfilled template fields outside
    link texts."""
    if "{{" not in text and "<%" not in text:
        return False
    return bool(PLACEHOLDER.search(_LINK_SPANS.sub(" ", text)))


def _frontmatter_placeholders(data: dict[str, Any]) -> bool:
    return any(isinstance(v, str) and PLACEHOLDER.search(v) for v in data.values())


def _clean_line(value: Any) -> str:
    return plain_text(str(value)) if value is not None else ""


def parse_note(path: str, text: str) -> Note:
    """Parse one Markdown file's text. Never raises for content problems; they go in ``problems``."""
    block = fm.parse(text)
    data = block.data
    problems = [block.problem] if block.problem else []
    code_masked = mask_code(block.body, comments=False)
    masked = mask_comments(code_masked)

    # The title as Obsidian shows it: frontmatter title, else the H1 the note opens with, else
    # the file name. Never a later H1 (a footer), never an unfilled placeholder.
    stem = PurePosixPath(path).stem
    title = _clean_line(data.get("title")) if data.get("title") else ""
    if not title or PLACEHOLDER.search(title):
        heading = top_heading(masked)
        title = heading if heading and not PLACEHOLDER.search(heading) else stem
    declared = _clean_line(data.get("description") or data.get("summary") or "")
    leads = [trim(declared, 300)] if declared and not PLACEHOLDER.search(declared) else []
    leads += prose_paragraphs(masked, block.body, count=LEADS - len(leads), code_masked=code_masked)
    leads = [x for x in leads if not PLACEHOLDER.search(x)]
    description = leads[0] if leads else ""
    kind = infer_kind(path, data.get("kind"))
    if kind not in UNRANKED_KINDS and (has_placeholders(masked) or _frontmatter_placeholders(data)):
        kind = TEMPLATE  # a template wherever it lives: its text is fields to fill, not knowledge

    tags = [t.lstrip("#") for t in _as_list(data.get("tags") or data.get("tag"))]
    tags = _dedupe([t for t in tags + inline_tags(masked) if t])
    aliases = _dedupe(_as_list(data.get("aliases") or data.get("alias")))
    scope_value = data.get("scope")
    scope = str(scope_value).strip().lower() if isinstance(scope_value, str) and scope_value.strip() else None
    dates = {key: str(data[key]) for key in DATE_FIELDS if data.get(key) not in (None, "")}

    return Note(
        path=path,
        title=title,
        description=description,
        kind=kind,
        scope=scope,
        tags=tags,
        aliases=aliases,
        dates=dates,
        frontmatter=data,
        body=block.body,
        links=extract_links(block.body, data, body_line=block.body_line, masked_body=masked),
        problems=problems,
        leads=leads,
    )
