"""What the dream pass reads: every note parsed from disk, its link graph, and what it must not touch.

Dream works on the files, not the index, so a stale index can never make it edit the wrong thing.
A note is *protected* — read, never written — when it is a template or a daily note, when its file
changed in the last few minutes (a person is editing it right now), or when it has uncommitted
changes in git (a person's work in progress must not ride along in a dream commit).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..vault.git import uncommitted_paths
from ..vault.links import Resolver
from ..vault.notes import DAILY, TEMPLATE, Note, parse_note
from ..vault.walk import UnreadableNote, read_note_text, walk

_TEMPLATE_MARK = re.compile(r"\{\{\s*(?:title|date|time|name)\b|<%\s*tp\.")
RECENT_EDIT_S = float(os.environ.get("MEMORY_HUB_DREAM_RECENT_S", 15 * 60))
HUB_TITLES = re.compile(r"(?i)^(?:home|index|start here|readme|moc|maps? of content|dashboard|contents|"
                        r"table of contents|目次|ホーム|索引)\b|\bMOC\b|(?i:\bmap of content)")


# Why a note is protected (``Doc.protected``); ``protection_kind`` names each for reports.
TEMPLATE_NOTE = "template"
DAILY_NOTE = "daily note"
EDITED_RECENTLY = "edited in the last minutes"
UNCOMMITTED = "has uncommitted changes"
FRONTMATTER_PROBLEM = "frontmatter problem: "


def protection_kind(reason: str) -> str:
    """A short stable name for a protection reason: uncommitted, edited_recently, template …"""
    return {TEMPLATE_NOTE: "template", DAILY_NOTE: "daily", EDITED_RECENTLY: "edited_recently",
            UNCOMMITTED: "uncommitted"}.get(reason, "frontmatter_problem" if reason.startswith(FRONTMATTER_PROBLEM)
                                            else "other")


@dataclass
class Doc:
    """One note as dream sees it."""

    note: Note
    text: str  # the whole file as read
    mtime_ns: int
    protected: str | None = None  # why it must not be written, or None
    link: str = ""  # the wikilink target that resolves to this note

    @property
    def path(self) -> str:
        return self.note.path

    @property
    def stem(self) -> str:
        return self.note.path.rsplit("/", 1)[-1].removesuffix(".md")


@dataclass
class Corpus:
    vault: Path
    docs: dict[str, Doc] = field(default_factory=dict)
    resolver: Resolver | None = None
    out_edges: dict[str, set[str]] = field(default_factory=dict)
    in_edges: dict[str, set[str]] = field(default_factory=dict)

    def neighbours(self, path: str) -> set[str]:
        return self.out_edges.get(path, set()) | self.in_edges.get(path, set())

    def is_hub(self, path: str) -> bool:
        doc = self.docs[path]
        return bool(HUB_TITLES.search(doc.note.title) or HUB_TITLES.search(doc.stem))

    def writable(self, path: str) -> bool:
        doc = self.docs.get(path)
        return doc is not None and doc.protected is None

    def link_to(self, path: str) -> str:
        """The shortest wikilink target that resolves to ``path`` (its name, else its path)."""
        stem = path.rsplit("/", 1)[-1].removesuffix(".md")
        if self.resolver is not None and self.resolver.resolve(stem) == path:
            return stem
        return path.removesuffix(".md")

    def resolve(self, target: str, source: str | None = None, kind: str = "wikilink") -> str | None:
        assert self.resolver is not None
        return self.resolver.resolve(target, source, kind)


def dirty_paths(vault: Path) -> set[str]:
    """Notes with uncommitted changes (modified, added, untracked) in git."""
    return uncommitted_paths(vault)


def load(vault: Path, now: float | None = None, recent_s: float = RECENT_EDIT_S,
         own: set[str] | frozenset[str] = frozenset()) -> Corpus:
    """Parse every note, build the resolved link graph and mark protected notes.

    ``own`` are the paths this pass itself just wrote and committed: recent, but not a person's edit.
    """
    now = now or time.time()
    corpus = Corpus(vault=vault)
    dirty = dirty_paths(vault)
    aliases: dict[str, list[str]] = {}
    all_paths: list[str] = []
    for stat in walk(vault):
        all_paths.append(stat.path)
        if not stat.is_note:
            continue
        try:
            text = read_note_text(vault, stat.path)
        except (UnreadableNote, OSError):
            continue
        note = parse_note(stat.path, text)
        if note.kind != TEMPLATE and _TEMPLATE_MARK.search(note.title + "\n" + note.body[:2000]):
            note.kind = TEMPLATE  # a template kept outside templates/ ("01 Templates/"): treat it as one
        protected = None
        if note.kind == TEMPLATE or stat.path.startswith("templates/"):
            protected = TEMPLATE_NOTE
        elif note.kind == DAILY:
            protected = DAILY_NOTE
        elif now - stat.mtime_ns / 1e9 < recent_s and stat.path not in own:
            protected = EDITED_RECENTLY
        elif stat.path in dirty:
            protected = UNCOMMITTED
        elif note.problems:
            protected = FRONTMATTER_PROBLEM + note.problems[0]
        corpus.docs[stat.path] = Doc(note, text, stat.mtime_ns, protected)
        if note.aliases:
            aliases[stat.path] = note.aliases
    corpus.resolver = Resolver(all_paths, aliases)
    for path, doc in corpus.docs.items():
        doc.link = corpus.link_to(path)
    out_edges: dict[str, set[str]] = defaultdict(set)
    in_edges: dict[str, set[str]] = defaultdict(set)
    for path, doc in corpus.docs.items():
        for link in doc.note.links:
            target = corpus.resolver.resolve(link.target, path, link.kind)
            if target and target != path and target in corpus.docs:
                out_edges[path].add(target)
                in_edges[target].add(path)
    corpus.out_edges = dict(out_edges)
    corpus.in_edges = dict(in_edges)
    return corpus


def note_date(doc: Doc) -> _dt.date:
    """A note's creation date: ``created``/``date`` field, else the file's mtime."""
    from ..capture.dates import parse_field_date

    for key in ("created", "date"):
        d = parse_field_date(doc.note.frontmatter.get(key))
        if d:
            return d
    return _dt.date.fromtimestamp(doc.mtime_ns / 1e9)
