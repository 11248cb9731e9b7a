"""Markdown facts the rest of the vault layer needs: where code is, and what counts as prose.

Links and tags inside fenced code blocks or inline code are not links or tags (Obsidian agrees), so
every extractor works on a *masked* copy of the body where code is blanked out with spaces. Masking
keeps offsets and line numbers identical to the original text.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable

_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
# Inline code: a run of backticks closed by a run of the same length. A span never crosses a
# block boundary (a blank line, or a new list item, heading or quote line), and a backslash-escaped
# backtick opens nothing — otherwise one stray backtick would hide every link after it.
_BLOCK_START = r"\n[ \t]*(?:\n|(?:[-*+]|\d+[.)])[ \t]|#|>)"
_INLINE_CODE = re.compile(r"(?<![`\\])(`+)(?!`)((?:(?!" + _BLOCK_START + r").)+?)(?<!`)\1(?!`)", re.DOTALL)
_COMMENT = re.compile(r"%%.*?%%|<!--.*?-->", re.DOTALL)


def _blank(s: str) -> str:
    if "\n" not in s:
        return " " * len(s)
    return "\n".join(" " * len(line) for line in s.split("\n"))


def mask_comments(code_masked: str) -> str:
    """``mask_code(text, comments=False)``'s result with comments blanked too (= ``mask_code(text)``)."""
    return _COMMENT.sub(lambda m: _blank(m.group(0)), code_masked)


def mask_code(text: str, comments: bool = True) -> str:
    """Blank out fenced code blocks, inline code and (unless ``comments=False``) comments, keeping
    length and newlines."""
    # Most notes have no code and no comments: the scans below run only for what is there
    # (they were a third of indexing time).
    if "`" not in text and "~~~" not in text:
        return _COMMENT.sub(lambda m: _blank(m.group(0)), text) if comments and _has_comment(text) else text
    lines = text.split("\n")
    out: list[str] = []
    fence: str | None = None
    for line in lines:
        if fence is None:
            m = _FENCE.match(line)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                fence = m.group(2)
                out.append(_blank(line))
                continue
            out.append(line)
        else:
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and set(stripped) == {fence[0]}:
                fence = None
            out.append(_blank(line))
    masked = "\n".join(out)
    if "`" in masked:
        masked = _INLINE_CODE.sub(lambda m: _blank(m.group(0)), masked)
    if comments and _has_comment(masked):
        masked = _COMMENT.sub(lambda m: _blank(m.group(0)), masked)
    return masked


def _has_comment(text: str) -> bool:
    return "%%" in text or "<!--" in text


# What a reader of the rendered note never sees, or sees only as a link's text: addresses of
# Markdown links and images, bare URLs (kept as their host), HTML tags, %%comments%%. Found on the
# code-masked text, so code blocks and inline code keep every character.
_LINK_TARGET = re.compile(r"(?<=\])\(\s*<?[^()\s<>]*(?:\([^()\s]*\)[^()\s<>]*)*>?(?:\s+\"[^\"\n]*\")?\s*\)")
_BARE_URL = re.compile(r"\b(?:https?|ftp)://([^/\s)>\]|]+)[^\s)>\]|]*")
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>\n]{0,300})?/?>")


_LONGEST_SCHEME = "https://"  # of _BARE_URL's schemes


def url_end_at(text: str, pos: int, reach: int = 2048) -> int | None:
    """The end of the bare URL (Markdown link addresses included) that ``pos`` lies in, or None.

    A URL holds no whitespace, so one that holds ``pos`` begins after the last whitespace before it
    (looked for at most ``reach`` characters back) and its ``://`` comes before ``pos`` or within
    the scheme's few characters after it: only that stretch is matched, not a window of kilobytes
    around every place a snippet considers (which cost ~2 ms a search on obsidian-hub)."""
    floor = max(0, pos - reach)
    start = max(text.rfind(" ", floor, pos), text.rfind("\n", floor, pos), text.rfind("\t", floor, pos)) + 1
    start = max(start, floor)
    if text.find("://", start, pos + len(_LONGEST_SCHEME)) < 0:  # pos may be the scheme's first letter
        return None
    for m in _BARE_URL.finditer(text, start, pos + reach):
        if m.start() > pos:
            break
        if pos < m.end():
            return m.end()
    return None


def reader_text(markdown: str, hosts: bool = True) -> str:
    """``markdown`` without what a reader does not read: link addresses, URLs (host kept unless
    ``hosts=False``), HTML tags, comments — for embedding, and for the words search feeds back
    (which borrows no link target, so no host either).

    On obsidian-hub these were 60 % of the tokens an embedder was fed (179 → 78 per chunk on
    average): URLs cost many tokens and say little about meaning. The word table indexes this text
    too (``index/lexical.py``); the trigram table keeps the full text, so a URL remains findable.
    """
    masked = mask_code(markdown, comments=False)
    cuts: list[tuple[int, int, str]] = []
    for m in _COMMENT.finditer(masked):
        cuts.append((m.start(), m.end(), " "))
    for m in _LINK_TARGET.finditer(masked):
        cuts.append((m.start(), m.end(), ""))
    for m in _BARE_URL.finditer(masked):
        cuts.append((m.start(), m.end(), m.group(1) if hosts else " "))
    for m in _HTML_TAG.finditer(masked):
        cuts.append((m.start(), m.end(), " "))
    if not cuts:
        return markdown
    cuts.sort()
    out: list[str] = []
    pos = 0
    for start, end, repl in cuts:
        if start < pos:  # inside a span already cut (a URL inside a comment, a tag inside a link)
            continue
        out.append(markdown[pos:start])
        out.append(repl)
        pos = end
    out.append(markdown[pos:])
    return re.sub(r"[ \t]{2,}", " ", "".join(out))


_WIKILINK_TEXT = re.compile(r"!?\[\[([^\]\|]*?)(?:\\?\|([^\]]*))?\]\]")
_MD_LINK_TEXT = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
# `*` may emphasise inside a word; `_` may not (CommonMark), so snake_case identifiers survive.
_EMPHASIS = re.compile(r"(\*\*|\*|~~|==)(?=\S)(.+?)(?<=\S)\1|(?<!\w)(__|_)(?=\S)(.+?)(?<=\S)\3(?!\w)")


def plain_text(markdown: str) -> str:
    """Markdown inline markup reduced to what a reader sees (for descriptions and snippets)."""
    text = _WIKILINK_TEXT.sub(lambda m: (m.group(2) or m.group(1).split("#")[0]).strip(), markdown)
    text = _MD_LINK_TEXT.sub(lambda m: m.group(1), text)
    text = text.replace("`", "")
    text = _EMPHASIS.sub(lambda m: m.group(2) if m.group(1) else m.group(4), text)
    return re.sub(r"\s+", " ", text).strip()


_LEAD_SCAN_CHARS = 20_000
_PARAGRAPH_BREAK = re.compile(r"(\n[ \t]*\n)")
_BLOCK_ID = re.compile(r"\s\^[\w-]+$")  # a block reference id ending a line (`… ^github`)
_TAG_ONLY = re.compile(r"(?<![\w#])#[^\s#]+")
_SKIP_PARAGRAPH = re.compile(
    r"^\s*(#|>|\||[-*_]{3,}\s*$|!\[|\^[\w-]+\s*$|\[\^|<|\{\{|```|~~~|- \[[ xX]\] $)"
)


# A "Label: short value" line (``Developed by: [[someone]]``, ``Status:: done``): a field, not prose.
_FIELD_LINE = re.compile(r"^(?P<label>[^\s:：.!?,;()\[\]、。]{1,40}?(?:[ \t][^\s:：.!?,;()\[\]、。]{1,40}?){0,3})"
                         r"[ \t]*(?:::?|：)(?:[ \t]+(?P<value>\S.*))?$")
_BULLET = re.compile(r"^\s*(?:[-*+][ \t]+)+")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])[ \t]+")
_LINKS_ONLY = re.compile(r"^(?:(?:\[\[[^\]\n]*\]\]|!?\[[^\]\n]*\]\([^)\n]*\)|<https?://[^>\s]*>)[\s,|·•-]*)+$")
FIELD_VALUE_WORDS = 8


def field_block(lines: list[str]) -> bool:
    """Whether a paragraph is a block of fields: every line ``Label: value`` with a short value
    (or ``Label:`` with its values as the list items under it), and no label twice (a dialogue
    repeats its speakers). A plugin page's "Plugin ID: … Links: … Developed by: … Mobile
    compatible: …" opens 1,500 obsidian-hub notes; shown as their description it says nothing
    the title does not, where the sentence after it says what the plugin does. A paragraph of
    links only is the same kind of block. So such a block is a description only when a note has
    no prose."""
    if all(_LINKS_ONLY.match(_LIST_ITEM.sub("", line).strip()) for line in lines):
        return True  # a list of links ("[Documentation](…) [FAQ](…)") points elsewhere; it says nothing
    labels: set[str] = set()
    listing = False  # the last field had no value on its line: list items below are its values
    bare = False  # a "Label:" line was seen; alone it is as likely a sentence ("To set it up:")
    linked = True  # every value under a bare label is a link ("Official website:" + links)
    for line in lines:
        item = _LIST_ITEM.match(line)
        body = line[item.end():].strip() if item else line.strip()
        m = _FIELD_LINE.match(body)
        if not m:
            if not (item and listing):
                return False
            value = body
            linked = linked and bool(_LINKS_ONLY.match(body))
        else:
            label = m.group("label").lower()
            if label in labels:
                return False
            labels.add(label)
            value = m.group("value") or ""
            listing = not value
            bare = bare or listing
        value = plain_text(_HTML_TAG.sub(" ", value))
        if len(value) > 80 or len(value.split()) > FIELD_VALUE_WORDS:
            return False
    return len(labels) >= (2 if bare and not linked else 1)


def prose_paragraphs(masked_body: str, original_body: str, limit: int = 240, count: int = 1,
                     code_masked: str | None = None) -> list[str]:
    """The first ``count`` paragraphs of real prose, each trimmed to ``limit`` characters.

    Not prose: headings, quotes, tables, rules, images, code, footnotes, HTML blocks, template
    placeholders, a paragraph of tags alone (``#placeholder/description``). Comments
    (``%% … %%``, ``<!-- … -->``) and inline HTML tags never reach the text: a reader does not
    see them, so a description must not show them. ``code_masked``: the body with only code
    masked, when the caller has it (saves a pass). A block of fields (``field_block``) comes
    after every prose paragraph found, so it describes only a note with no prose.
    """
    head = masked_body[:_LEAD_SCAN_CHARS]  # leads are near the top; a long body is not scanned whole
    readable = original_body[: len(head)]
    if "%%" in readable or "<!--" in readable:
        if code_masked is None:
            code_masked = mask_code(readable, comments=False)
        pieces, pos = [], 0
        for m in _COMMENT.finditer(code_masked[: len(head)]):  # comments outside code
            pieces += [readable[pos : m.start()], _blank(m.group(0))]
            pos = m.end()
        readable = "".join(pieces) + readable[pos:]
    found: list[str] = []
    fields: list[str] = []
    offset = 0
    for block in _PARAGRAPH_BREAK.split(head):
        start, offset = offset, offset + len(block)
        if not block.strip() or block.startswith("\n"):
            continue
        lines = [ln for ln in readable[start : start + len(block)].split("\n") if ln.strip()]
        masked_lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines or not masked_lines or _SKIP_PARAGRAPH.match(lines[0]):
            continue
        if all(not ln.strip() for ln in masked_lines):  # code only
            continue
        # a bullet is "- " / "* " / "+ ": "**Features**:" keeps its bold for plain_text to unwrap
        text = " ".join(_BLOCK_ID.sub("", _BULLET.sub("", ln).strip()) for ln in lines)
        text = plain_text(_HTML_TAG.sub(" ", text))
        if len(_TAG_ONLY.sub("", text).strip(" ,;:.-")) < 3:
            continue
        (fields if field_block(lines) else found).append(trim(text, limit))
        if len(found) >= count:
            break
    return (found + fields)[:count]


def first_paragraph(masked_body: str, original_body: str, limit: int = 240) -> str:
    """The first paragraph of real prose, trimmed to ``limit`` characters on a word boundary."""
    found = prose_paragraphs(masked_body, original_body, limit, 1)
    return found[0] if found else ""


def trim(text: str, limit: int) -> str:
    """Cut ``text`` at a word boundary near ``limit`` and mark the cut with an ellipsis."""
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


# An ATX heading as CommonMark reads one: up to three spaces, 1–6 marks, a space or tab, the text,
# and an optional closing run of marks after a space (``## Setup ##`` is "Setup"; ``## C#`` keeps
# its "#"). group(1) the marks, group(2) the text. Titles, chunk trails, section edits, snippets,
# dream's excerpts and named sections (``named_section``: the daily note's captures, dream's
# "## Related") ask this pattern; dream's excerpt still matches its "## Action items" name itself.
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)
# A heading's marks at a line start, the text not required: ``match(text, line)`` asks whether a
# line opens as a heading, ``sub`` takes the marks out of a line a reader sees rendered.
HEADING_MARK = re.compile(r"^ {0,3}#{1,6}[ \t]+", re.MULTILINE)


def next_heading(text: str, start: int = 0, max_level: int = 6) -> int | None:
    """Offset of the first heading line at or after ``start`` whose level is at most ``max_level``
    (where a section that began above it ends); None when there is none."""
    for m in HEADING.finditer(text, start):
        if len(m.group(1)) <= max_level:
            return m.start()
    return None


def named_section(text: str, names: Iterable[str], levels: Container[int] = (2,),
                  ends_at: int = 6) -> tuple[int, int] | None:
    """(start of its content, end) of the first section whose heading, at one of ``levels``,
    reads one of ``names`` (case-insensitive); it ends at the next heading of level ≤ ``ends_at``.

    Headings are read outside code and comments, as a reader sees them: a ``## Captures`` quoted
    in a fenced block is not the section, and a ``# comment`` line of a bash block inside the
    section does not end it (a write there would land inside the code)."""
    masked = mask_code(text)
    wanted = {n.casefold() for n in names}
    for m in HEADING.finditer(masked):
        if len(m.group(1)) in levels and m.group(2).strip().casefold() in wanted:
            start = m.end() + 1 if m.end() < len(text) else m.end()
            nxt = next_heading(masked, start, ends_at)
            return start, (len(text) if nxt is None else nxt)
    return None


# Lines that may stand above a note's title heading without being its text: images and embeds,
# badges, tags, HTML, rules, and (already blanked in the masked body) comments and code.
_ABOVE_TITLE = re.compile(r"^\s*(?:!\[[^\n]*|<[^\n]*|[-*_]{3,}\s*|(?:#[^\s#][^\s]*\s*)+)$")


def first_heading(masked_body: str) -> str | None:
    """The first H1 anywhere in the body (outside code)."""
    return next((plain_text(m.group(2)) for m in HEADING.finditer(masked_body) if len(m.group(1)) == 1), None)


def top_heading(masked_body: str) -> str | None:
    """The H1 a note opens with, as Obsidian shows a note's title heading: the first line of
    text is ``# …`` (blank lines, comments, images, badges, tags and HTML may come before it).
    An H1 further down is a section, not the title — obsidian-hub ends six notes with a footer
    ``# This note in GitHub``."""
    for line in masked_body.split("\n"):
        if not line.strip() or _ABOVE_TITLE.match(line):
            continue
        m = HEADING.fullmatch(line)
        return plain_text(m.group(2)) if m and len(m.group(1)) == 1 else None
    return None


# Obsidian tags: '#' then letters/digits/_/-// (not only digits), not preceded by a word char or '#'.
_TAG = re.compile(r"(?<![\w#&/\\\]\)])#([^\s#!-/:-@\[-\^`{-~\u3000-\u303f\uff01-\uff0f]+(?:[/_-][^\s#!-/:-@\[-\^`{-~]+)*)")


def inline_tags(masked_body: str) -> list[str]:
    """Inline ``#tags`` outside code and headings."""
    tags = []
    pos = masked_body.find("#")
    while pos >= 0:  # the pattern starts with '#': try it only there (a full scan was slow)
        m = _TAG.match(masked_body, pos)
        pos = masked_body.find("#", pos + 1)
        if m is None:
            continue
        tag = m.group(1)  # holds no '#': the next match starts at the next '#'

        if tag.isdigit():
            continue
        tags.append(tag)
    return tags
