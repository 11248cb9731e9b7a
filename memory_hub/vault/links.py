"""Wikilinks and Markdown links: find them in a note, and resolve them the way Obsidian does.

Forms: ``[[note]]``, ``[[note|alias]]``, ``[[note#heading]]``, ``[[note#^block]]``, ``![[embed]]``,
path-qualified ``[[folder/note]]``, ``[[a\\|b]]`` inside tables, links inside frontmatter values, and
relative Markdown links ``[text](../x.md)``. Nothing inside code counts. Resolution: exact path, then
path suffix, then basename (case-insensitive; ambiguous basenames go to the shortest path), then
aliases. An unresolved target is kept as a dangling link, never dropped.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .markdown import mask_code

WIKILINK = "wikilink"
EMBED = "embed"
MARKDOWN = "markdown"
FRONTMATTER = "frontmatter"


@dataclass(frozen=True)
class Link:
    """One link as written. ``target`` has no heading, block or alias part."""

    target: str
    kind: str
    heading: str | None = None
    block: str | None = None
    alias: str | None = None
    line: int = 0


_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
_MD = re.compile(r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^>\n]+>|[^)\s]+)(?:\s+[\"'(][^)\n]*)?\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


def _split_wiki(inner: str) -> tuple[str, str | None, str | None, str | None]:
    """``target#heading|alias`` → (target, heading, block, alias). Handles ``\\|`` in tables."""
    inner = inner.replace("\\|", "|")
    target, _, alias = inner.partition("|")
    target, _, anchor = target.partition("#")
    heading = block = None
    if anchor:
        if anchor.startswith("^"):
            block = anchor[1:].strip() or None
        else:
            heading = anchor.strip() or None
    return target.strip().rstrip("\\").strip(), heading, block, (alias.strip() or None)


class _LineCounter:
    """Line numbers of increasing offsets in one text, counting each newline once (counting from
    the start for every link was quadratic in a long note's link list)."""

    def __init__(self, text: str, first: int) -> None:
        self.text, self.pos, self.line = text, 0, first

    def at(self, offset: int) -> int:
        if offset < self.pos:
            self.pos, self.line = 0, self.line - self.text.count("\n", 0, self.pos)
        self.line += self.text.count("\n", self.pos, offset)
        self.pos = offset
        return self.line


def _wikilinks(text: str, kind_default: str, line_offset: int) -> Iterator[Link]:
    if "[[" not in text:
        return
    lines = _LineCounter(text, line_offset)
    for m in _WIKI.finditer(text):
        target, heading, block, alias = _split_wiki(m.group(2))
        if not target:  # [[#heading]] points inside the same note
            continue
        kind = EMBED if m.group(1) else kind_default
        line = lines.at(m.start())
        yield Link(target=target, kind=kind, heading=heading, block=block, alias=alias, line=line)


_MD_TARGET = re.compile(r"\]\(\s*(<[^>\n]*>?|[^)\s]*)")


def _may_link_a_note(text: str) -> bool:
    """Whether any ``](target)`` in ``text`` could be a link to a note: not a URL or an anchor, and
    naming a ``.md`` file (or %-escaped). Nearly every obsidian-hub note ends in a link to a URL,
    and the full pattern below was a fifth of the time to parse a note."""
    for m in _MD_TARGET.finditer(text):
        raw = m.group(1).lstrip("<")
        if _SCHEME.match(raw) or raw.startswith(("#", "//")):
            continue
        if ".md" in raw.lower() or "%" in raw:
            return True
    return False


def _markdown_links(text: str, line_offset: int) -> Iterator[Link]:
    if "](" not in text or not _may_link_a_note(text):
        return
    lines = _LineCounter(text, line_offset)
    for m in _MD.finditer(text):
        raw = m.group(3).strip()
        if raw.startswith("<") and raw.endswith(">"):
            raw = raw[1:-1]
        if _SCHEME.match(raw) or raw.startswith(("#", "//")):
            continue  # URLs, mailto:, obsidian://, in-page anchors
        path, _, anchor = raw.partition("#")
        path = unquote(path)
        if not path.lower().endswith(".md"):
            continue
        heading = block = None
        if anchor:
            anchor = unquote(anchor)
            if anchor.startswith("^"):
                block = anchor[1:]
            else:
                heading = anchor
        line = lines.at(m.start())
        yield Link(target=path, kind=MARKDOWN, heading=heading, block=block,
                   alias=m.group(2).strip() or None, line=line)


@dataclass(frozen=True)
class LinkSpan:
    """Where one link's *target* is written in a note's text, for rewriting it in place.

    ``start``/``end`` bound the target as written (``folder/x`` in ``[[folder/x#h|a]]``, ``../x%20y.md``
    or ``<../x y.md>`` in ``[t](../x%20y.md#h)``); heading, block, alias and brackets lie outside it,
    so replacing ``text[start:end]`` keeps them. ``target`` is the decoded target, as in ``Link``.
    """

    kind: str
    target: str
    start: int
    end: int
    raw: str


def _wiki_target_end(inner: str) -> int:
    """Length of the target part of a wikilink's inner text (before ``#``, ``|`` or a table's ``\\|``)."""
    cut = len(inner)
    for mark in ("#", "|"):
        i = inner.find(mark)
        if i != -1:
            cut = min(cut, i)
    if cut > 0 and inner[cut - 1] == "\\" and inner[cut:cut + 1] == "|":
        cut -= 1
    return cut


def link_spans(text: str) -> list[LinkSpan]:
    """Every link of a whole note file (frontmatter included) with the span of its target.

    The same forms ``extract_links`` finds, in file order: wikilinks and embeds (``[[x]]``,
    ``[[x|a]]``, ``[[x#h]]``, ``[[x#^b]]``, ``![[x]]``, ``[[f/x]]``, ``[[x\\|a]]`` in tables) and
    relative Markdown links to ``.md`` files in the body, never inside code or comments; wikilinks
    in frontmatter values. Same-note links (``[[#h]]``) and URLs are not targets and are skipped.
    """
    from .frontmatter import split

    raw_fm, body, _ = split(text)
    body_start = len(text) - len(body)
    found: list[LinkSpan] = []
    if raw_fm is not None:
        for m in _WIKI.finditer(text, 0, body_start):
            found.extend(_wiki_span(m, FRONTMATTER, text))
    masked = " " * body_start + mask_code(body)
    for m in _WIKI.finditer(masked, body_start):
        found.extend(_wiki_span(m, EMBED if m.group(1) else WIKILINK, text))
    for m in _MD.finditer(masked, body_start):
        span = _markdown_span(m, text)
        if span is not None:
            found.append(span)
    found.sort(key=lambda s: s.start)
    return found


def _wiki_span(m: re.Match[str], kind: str, text: str) -> list[LinkSpan]:
    start = m.start(2)
    inner = text[start:m.end(2)]  # ``m`` may have matched the masked copy: same offsets
    cut = _wiki_target_end(inner)
    raw = inner[:cut]
    lead = len(raw) - len(raw.lstrip())
    raw_target = raw.strip()
    target, _, _, _ = _split_wiki(inner)
    if not target or not raw_target:
        return []
    return [LinkSpan(kind, target, start + lead, start + lead + len(raw_target), raw_target)]


def _markdown_span(m: re.Match[str], text: str) -> LinkSpan | None:
    start, end = m.start(3), m.end(3)
    raw = text[start:end]
    inner, off = (raw[1:-1], 1) if raw.startswith("<") and raw.endswith(">") else (raw, 0)
    if _SCHEME.match(inner) or inner.startswith(("#", "//")):
        return None
    path = inner.partition("#")[0]
    if not unquote(path).lower().endswith(".md"):
        return None
    # The span covers the path only; the brackets and ``#anchor`` stay as written.
    return LinkSpan(MARKDOWN, unquote(path), start + off, start + off + len(path), path)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def extract_links(body: str, frontmatter: dict[str, Any] | None = None, *, body_line: int = 1,
                  masked_body: str | None = None) -> list[Link]:
    """Every link in a note: body wikilinks/embeds/Markdown links outside code, then frontmatter."""
    masked = masked_body if masked_body is not None else mask_code(body)
    found = list(_wikilinks(masked, WIKILINK, body_line))
    found.extend(_markdown_links(masked, body_line))
    found.sort(key=lambda link: link.line)
    for value in _strings(frontmatter or {}):
        for link in _wikilinks(value, FRONTMATTER, 0):
            found.append(Link(link.target, FRONTMATTER, link.heading, link.block, link.alias, 0))
    return found


def _norm(path: str) -> str:
    path = path.replace("\\", "/").strip()
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def _stem(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


class Resolver:
    """Resolves link targets against the set of files in a vault.

    Built once from all paths (notes and attachments) and each note's aliases; resolution is a few
    dictionary look-ups, so re-resolving every link after a sync is cheap.
    """

    def __init__(self, paths: Iterable[str], aliases: dict[str, Iterable[str]] | None = None) -> None:
        self._by_path: dict[str, str] = {}
        self._by_name: dict[str, list[str]] = {}
        self._by_alias: dict[str, list[str]] = {}
        for path in paths:
            self._by_path.setdefault(path.lower(), path)
            self._by_name.setdefault(_stem(path).lower(), []).append(path)
            if path.lower().endswith(".md"):
                # "note.md" written with its extension resolves like "note"
                self._by_name.setdefault(path.rsplit("/", 1)[-1].lower(), []).append(path)
        for bucket in self._by_name.values():
            bucket.sort(key=_shortest_first)
        for path, names in (aliases or {}).items():
            for alias in names:
                if isinstance(alias, str) and alias.strip():
                    self._by_alias.setdefault(alias.strip().lower(), []).append(path)
        for bucket in self._by_alias.values():
            bucket.sort(key=_shortest_first)

    def resolve(self, target: str, source: str | None = None, kind: str = WIKILINK) -> str | None:
        """The vault path ``target`` points to, or None when it dangles."""
        target = _norm(target)
        if not target:
            return None
        lower = target.lower()
        if kind == MARKDOWN and source is not None:
            # Markdown links are relative to the linking note's folder first.
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
            if not rel.startswith("../") and rel.lower() in self._by_path:
                return self._by_path[rel.lower()]
        for candidate in (lower, lower + ".md"):
            if candidate in self._by_path:
                return self._by_path[candidate]
        if "/" in lower:
            hit = self._suffix(lower)
            if hit:
                return hit
            lower = lower.rsplit("/", 1)[-1]
        bucket = self._by_name.get(lower)
        if bucket:
            return bucket[0]
        bucket = self._by_alias.get(lower)
        if bucket:
            return bucket[0]
        return None

    def _suffix(self, lower: str) -> str | None:
        names = [lower] if lower.endswith(".md") or "." in lower.rsplit("/", 1)[-1] else [lower, lower + ".md"]
        best: str | None = None
        for name in names:
            stem = name.rsplit("/", 1)[-1]
            for path in self._by_name.get(stem[:-3] if stem.endswith(".md") else stem, []):
                if path.lower().endswith("/" + name) and (best is None or _shortest_first(path) < _shortest_first(best)):
                    best = path
        return best


def _shortest_first(path: str) -> tuple[int, int, str]:
    return (path.count("/"), len(path), path)
