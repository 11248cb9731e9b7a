"""A note's Markdown as safe HTML: markdown-it-py (CommonMark, tables, strikethrough), raw HTML off.

Note text is untrusted (a clipped page, a pulled branch, a shared vault), so:

* raw HTML is never passed through: ``<script>``, ``<img onerror=…>`` and ``<iframe>`` come out as
  escaped text (markdown-it's ``html`` option is off);
* a link or image is kept only when its address is relative or ``http``/``https``/``mailto``;
  ``javascript:``, ``data:``, ``vbscript:``, ``file:`` and every other scheme leave plain text;
* remote images are shown as links, never fetched (the page works offline, and a tracking pixel in
  a note must not report that it was opened); images inside the vault are served by ``/file/…``;
* wikilinks (``[[note]]``, ``[[note#heading|alias]]``, ``![[embed]]``) become links to ``/note/…``
  through the index's own resolution of this note's links; one that dangles links to a search.

The page's Content-Security-Policy (``pages.py``) is the second wall: no inline script runs even if
something slipped through here.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote, unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markupsafe import Markup, escape

SAFE_SCHEMES = ("http", "https", "mailto")
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".avif", ".bmp", ".svg")
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*):")
_WIKI_INNER = re.compile(r"[^\[\]\n]+?")


def safe_url(url: str) -> bool:
    """True for relative addresses and http(s)/mailto; control characters and other schemes are out."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return False
    # Browsers drop tabs/newlines and ignore leading spaces before a scheme: check what they would see.
    squeezed = re.sub(r"\s+", "", unquote(url)).lower()
    m = _SCHEME.match(squeezed)
    if m is None:
        return not squeezed.startswith("//")  # protocol-relative: another host
    return m.group(1) in SAFE_SCHEMES


def note_href(path: str, heading: str | None = None) -> str:
    return "/note/" + quote(path) + (f"#{slug(heading)}" if heading else "")


def search_href(query: str) -> str:
    return "/?q=" + quote(query)


def slug(text: str) -> str:
    """A heading's anchor: lower case, words joined by '-', letters of any script kept."""
    text = unicodedata.normalize("NFKC", text).strip().lower()
    text = re.sub(r"[^\w\s-]", "", text)
    return "h-" + (re.sub(r"[\s_]+", "-", text).strip("-") or "section")


@dataclass
class Links:
    """How this note's links resolve: written target (lower case) → vault path, from the index."""

    targets: dict[str, str] = field(default_factory=dict)
    attachments: set[str] = field(default_factory=set)  # resolved paths that are attachments

    def resolve(self, target: str) -> str | None:
        target = target.strip().replace("\\", "/")
        return self.targets.get(target.lower()) or self.targets.get(target.lower().removesuffix(".md"))


def _split_wiki(inner: str) -> tuple[str, str | None, str | None]:
    inner = inner.replace("\\|", "|")
    target, _, alias = inner.partition("|")
    target, _, anchor = target.partition("#")
    return target.strip(), (anchor.strip() or None), (alias.strip() or None)


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    src, pos = state.src, state.pos
    embed = src.startswith("![[", pos)
    start = pos + (3 if embed else 2)
    if not (embed or src.startswith("[[", pos)):
        return False
    end = src.find("]]", start)
    if end < 0 or not _WIKI_INNER.fullmatch(src[start:end]):
        return False
    if not silent:
        target, anchor, alias = _split_wiki(src[start:end])
        token = state.push("wikilink", "", 0)
        token.meta = {"target": target, "anchor": anchor, "alias": alias, "embed": embed}
        token.content = src[pos:end + 2]
    state.pos = end + 2
    return True


def _render_wikilink(self, tokens, idx, options, env) -> str:  # noqa: ANN001 - markdown-it's renderer signature
    meta = tokens[idx].meta
    links: Links = env["links"]
    target, anchor, alias, embed = meta["target"], meta["anchor"], meta["alias"], meta["embed"]
    label = alias or (f"{target}#{anchor}" if target and anchor else target or (anchor or ""))
    heading = anchor if anchor and not anchor.startswith("^") else None
    if not target:  # [[#heading]]: inside this note
        return f'<a class="wikilink" href="#{escape(slug(anchor or ""))}">{escape(label)}</a>'
    path = links.resolve(target)
    if path is None:
        return (f'<a class="wikilink dangling" href="{escape(search_href(target))}" '
                f'title="no note called this yet: search for it">{escape(label)}</a>')
    if embed and path in links.attachments and path.lower().endswith(IMAGE_EXTENSIONS):
        return f'<img class="embed" src="{escape("/file/" + quote(path))}" alt="{escape(alias or target)}">'
    cls = "wikilink embed-link" if embed else "wikilink"
    return f'<a class="{cls}" href="{escape(note_href(path, heading))}">{escape(label)}</a>'


def _render_link_open(self, tokens, idx, options, env) -> str:  # noqa: ANN001
    token = tokens[idx]
    href = token.attrGet("href") or ""
    if _SCHEME.match(href):
        token.attrSet("rel", "noopener noreferrer nofollow")
        token.attrSet("class", "external")
    elif not href.startswith("#"):
        path_part, _, anchor = href.partition("#")
        resolved = env["links"].resolve(unquote(path_part)) if path_part else None
        if resolved:
            token.attrSet("href", note_href(resolved, unquote(anchor) if anchor else None))
        else:
            token.attrSet("class", "dangling")
            token.attrSet("href", search_href(unquote(path_part)))
    return self.renderToken(tokens, idx, options, env)


def _render_image(self, tokens, idx, options, env) -> str:  # noqa: ANN001
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env)
    if _SCHEME.match(src) or src.startswith("//"):  # never fetched: shown as a link to it
        return (f'<a class="external remote-image" rel="noopener noreferrer nofollow" href="{escape(src)}">'
                f'image: {escape(alt or src)}</a>')
    path = env["links"].resolve(unquote(src.partition("#")[0]))
    if path and path in env["links"].attachments and path.lower().endswith(IMAGE_EXTENSIONS):
        return f'<img class="embed" src="{escape("/file/" + quote(path))}" alt="{escape(alt)}">'
    return f'<span class="missing-image">image: {escape(alt or src)}</span>'


def _heading_ids(state) -> None:  # noqa: ANN001 - markdown-it core state
    seen: dict[str, int] = {}
    tokens = state.tokens
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and i + 1 < len(tokens):
            base = slug(tokens[i + 1].content)
            n = seen.get(base, 0)
            seen[base] = n + 1
            token.attrSet("id", base if n == 0 else f"{base}-{n + 1}")


def _make() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = safe_url
    md.inline.ruler.before("link", "wikilink", _wikilink_rule)
    md.core.ruler.push("heading_ids", _heading_ids)
    md.add_render_rule("wikilink", _render_wikilink)
    md.add_render_rule("link_open", _render_link_open)
    md.add_render_rule("image", _render_image)
    return md


_MD = _make()


def render(body: str, links: Links) -> str:
    """The note body as HTML (a string safe to insert into the page)."""
    return _MD.render(body, {"links": links})


_INLINE_WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")


def render_value(text: str, links: Links, linker: Callable[[str, str], str] | None = None) -> str:
    """A frontmatter string as HTML: escaped, with its wikilinks as links (Obsidian links them too)."""
    out, last = [], 0
    for m in _INLINE_WIKI.finditer(text):
        out.append(str(escape(text[last:m.start()])))
        target, anchor, alias = _split_wiki(m.group(2))
        path = links.resolve(target) if target else None
        label = alias or target
        if path:
            out.append(f'<a class="wikilink" href="{escape(note_href(path, anchor))}">{escape(label)}</a>')
        else:
            out.append(f'<a class="wikilink dangling" href="{escape(search_href(target))}">{escape(label)}</a>')
        last = m.end()
    out.append(str(escape(text[last:])))
    return "".join(out)


def is_safe_external(url: str) -> bool:
    """For property values that are URLs: shown as links only when http(s)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc) and safe_url(url)

__all__ = ["Links", "Markup", "is_safe_external", "note_href", "render", "render_value", "safe_url", "search_href", "slug"]
