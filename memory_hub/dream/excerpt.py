"""What of a capture is carried into a knowledge note: its own words, made right for their new place.

A capture is raw material with scaffolding around it. Copied as it is into another note, its
relative links point from the wrong folder, its link to the target becomes a link from the target
to itself, its open to-do and template lines turn up in the person's task lists and its headings
cut the target's sections in two. ``carry`` returns the capture's words with

* Markdown links and embeds re-pointed from the capture's folder to the target's (wikilinks too,
  when the target would resolve them to a different note),
* links to the target itself turned into their plain text (a line holding nothing but such a link
  is dropped),
* capture meta left out: the H1, the ``## Action items`` and ``## Source: <url>`` sections a capture
  gets when it is written, open to-do and ``TODO:`` lines, the capture template's prompts, a
  learning's "From the session transcript" line,
* paragraphs the target (or an earlier capture of the same fold) already says left out,
* headings demoted below the fold's own, so the target's sections stay whole.

The capture itself is never changed; everything left out stays there, one link away.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import quote, unquote

from ..capture.learnings import term_set
from ..vault.links import EMBED, MARKDOWN, WIKILINK
from ..vault.markdown import HEADING, mask_code, plain_text
from .corpus import Corpus, Doc
from .edits import _WIKI, body_paragraphs

DISTILLED = 0.8  # share of a paragraph's terms one paragraph of the target already holds: nothing new
MIN_TERMS = 3  # shorter paragraphs (a link, a word) are never judged distilled

_MD = re.compile(r"(!?)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\(\s*(<[^>\n]+>|[^)\s]+)((?:\s+[\"'(][^)\n]*)?)\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")
_META_SECTION = re.compile(r"(?i)^##[ \t]+(?:action items|source:.*)[ \t]*$")
_META_LINE = re.compile(
    r"(?i)^[ \t]*(?:[-*+][ \t]+\[[ ]\][ \t].*|[-*+][ \t]*|(?:[-*+][ \t]+)?(?:todo|to-do|fixme)[ \t]*[:：].*"
    r"|dump it here.*|action items?\b[^.!?]*[:：][ \t]*|process into:.*|from the session transcript \[\[.*)$")
_NOTHING_ELSE = re.compile(r"[\s\-*+,;:.、。()（）]*")  # what may stand beside a self-link on a line it alone fills


def _display(kind: str, target: str, alias: str | None) -> str:
    return alias or target.rsplit("/", 1)[-1].removesuffix(".md")


def _md_target(raw: str) -> tuple[str, str] | None:
    """(path, '#anchor' or '') of a Markdown link to a vault file; None for URLs and in-page anchors."""
    inner = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    if _SCHEME.match(inner) or inner.startswith(("#", "//")) or not inner:
        return None
    path, hash_, anchor = inner.partition("#")
    return unquote(path), (hash_ + anchor)


def _relative(path: str, from_folder: str) -> str:
    rel = posixpath.relpath(path, from_folder or ".")
    return quote(rel, safe="/._-~()") if " " not in rel else f"<{rel}>"


def _relink(corpus: Corpus, source: str, dest: str, text: str, dest_title: str = "") -> tuple[str, set[int]]:
    """Re-point links for ``dest``'s folder; a link to ``dest`` itself becomes its text (its alias, else
    ``dest_title``). Also returns the lines that held nothing but such a link."""
    masked = mask_code(text)
    out: list[str] = []
    last = 0
    self_lines: set[int] = set()
    edits: list[tuple[int, int, str, bool]] = []
    for m in _WIKI.finditer(masked):
        original = text[m.start():m.end()]
        om = _WIKI.fullmatch(original)
        if om is None:
            continue
        target = om.group(2).strip()
        kind = EMBED if om.group(1) else WIKILINK
        resolved = corpus.resolve(target, source, kind)
        alias = (om.group(4) or "").lstrip("\\|") or None
        if resolved == dest:
            edits.append((m.start(), m.end(), alias or dest_title or _display(kind, target, None), True))
        elif resolved and corpus.resolve(target, dest, kind) != resolved:
            edits.append((m.start(), m.end(), f"{om.group(1)}[[{corpus.link_to(resolved)}{om.group(3)}"
                                              f"{om.group(4) or ''}]]", False))
    for m in _MD.finditer(masked):
        parsed = _md_target(text[m.start(3):m.end(3)])
        if parsed is None:
            continue
        path, anchor = parsed
        resolved = corpus.resolve(path, source, MARKDOWN)
        if resolved is None:  # an attachment, or a dangling link: keep pointing at the same place
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        if resolved == dest:
            edits.append((m.start(), m.end(), m.group(2) or dest_title or _display(MARKDOWN, path, None), True))
            continue
        new_path = _relative(resolved, posixpath.dirname(dest))
        if new_path != text[m.start(3):m.end(3)] or anchor:
            edits.append((m.start(), m.end(), f"{m.group(1)}[{m.group(2)}]({new_path}{anchor}{m.group(4)})", False))
    for start, end, new, is_self in sorted(edits):
        if start < last:
            continue  # a wikilink inside a Markdown link's text: the outer edit wins
        out.append(text[last:start])
        out.append(new)
        last = end
        if is_self:
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line_end = len(text) if line_end < 0 else line_end
            if _NOTHING_ELSE.fullmatch(masked[line_start:start] + masked[end:line_end]):
                self_lines.add(text.count("\n", 0, start))
    out.append(text[last:])
    return "".join(out), self_lines


def _strip_meta(body: str) -> str:
    """The capture's body without its H1, meta sections, to-do and template lines; headings demoted."""
    masked = mask_code(body).split("\n")
    lines = body.split("\n")
    kept: list[str] = []
    in_meta = False
    seen_h1 = False
    for raw, mask in zip(lines, masked, strict=True):
        heading = HEADING.match(mask)
        if heading:
            level = len(heading.group(1))
            if level == 1 and not seen_h1:
                seen_h1 = True
                continue
            if level <= 2:
                in_meta = bool(_META_SECTION.match(mask))
                if in_meta:
                    continue
            if not in_meta:
                written = HEADING.match(raw)  # the heading as written (``mask`` blanks its code)
                kept.append("#### " + written.group(2) if written else raw)
            continue
        if in_meta:
            continue
        if mask.strip() and _META_LINE.match(mask):
            continue
        kept.append(raw)
    text = "\n".join(kept)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _blocks(text: str) -> list[str]:
    """Blank-line separated blocks; a fenced code block is kept whole."""
    masked = mask_code(text)
    out = []
    start = 0
    for m in re.finditer(r"\n[ \t]*\n", masked):
        chunk = text[start:m.start()]
        if chunk.strip():
            out.append(chunk.strip("\n"))
        start = m.end()
    if text[start:].strip():
        out.append(text[start:].strip("\n"))
    return out


def target_terms(doc: Doc) -> list[set[str]]:
    """The term sets of the target's paragraphs: what it already says."""
    return [term_set(plain_text(p)) for p in body_paragraphs(doc.note.body)]


def carry(corpus: Corpus, doc: Doc, dest: str, have: list[set[str]], limit: int = 1500, dest_title: str = "") -> str:
    """The part of capture ``doc`` worth carrying into note ``dest`` (see the module docstring).

    ``have`` holds the term sets of what ``dest`` already says; the carried paragraphs are added to it,
    so the next capture of the same fold does not repeat them. Returns "" when nothing is new.
    """
    text = _strip_meta(doc.note.body)
    if not dest_title and dest in corpus.docs:
        dest_title = corpus.docs[dest].note.title
    text, self_lines = _relink(corpus, doc.path, dest, text, dest_title)
    if self_lines:
        text = "\n".join(ln for i, ln in enumerate(text.split("\n")) if i not in self_lines)
    kept: list[str] = []
    for block in _blocks(text):
        masked = mask_code(block)
        if not masked.strip():
            kept.append(block)  # code only
            continue
        if HEADING.match(block) and "\n" not in block:
            kept.append(block)
            continue
        terms = term_set(plain_text(masked))
        if len(terms) >= MIN_TERMS and any(len(terms & h) >= DISTILLED * len(terms) for h in have):
            continue
        kept.append(block)
        if terms:
            have.append(terms)
    while kept and HEADING.match(kept[-1]) and "\n" not in kept[-1]:
        kept.pop()  # a heading whose section was all left out
    if not any(not (HEADING.match(b) and "\n" not in b) for b in kept):
        return ""
    out = "\n\n".join(kept)
    if len(out) > limit:
        cut = out[:limit]
        out = (cut[: cut.rfind("\n")] if "\n" in cut else cut).rstrip() + "\n\n…"
    return out.strip()
