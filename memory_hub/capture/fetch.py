"""Fetching a URL's main text for a capture, with a short timeout and an honest failure.

Memory Hub runs offline, so a failed fetch is normal: the URL is kept in the capture and the
failure is written next to it in plain words, never silently dropped. Main-text extraction is a
small standard-library HTML pass (drop script/style/nav/header/footer/aside, keep paragraphs and
headings, prefer ``<article>``/``<main>`` when present) — enough for a capture, not a reader mode.
"""

from __future__ import annotations

import html
import os
import re
from dataclasses import dataclass
from html.parser import HTMLParser

TIMEOUT_S = float(os.environ.get("MEMORY_HUB_FETCH_TIMEOUT", "5"))
MAX_BYTES = 2_000_000
MAX_TEXT = 6000


@dataclass
class Fetched:
    url: str
    ok: bool
    title: str = ""
    text: str = ""
    error: str = ""


_SKIP = {"script", "style", "noscript", "nav", "header", "footer", "aside", "form", "svg", "template"}
_BLOCK = {"p", "h1", "h2", "h3", "h4", "li", "pre", "blockquote", "td", "div", "section", "article", "br"}


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.title = ""
        self.in_title = False
        self.parts: list[str] = []
        self.main_parts: list[str] = []
        self.main_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag == "title":
            self.in_title = True
        elif tag in ("article", "main"):
            self.main_depth += 1
        if tag in _BLOCK:
            self._push("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self.skip:
            self.skip -= 1
        elif tag == "title":
            self.in_title = False
        elif tag in ("article", "main") and self.main_depth:
            self.main_depth -= 1
        if tag in _BLOCK:
            self._push("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        elif not self.skip:
            self._push(data)

    def _push(self, text: str) -> None:
        self.parts.append(text)
        if self.main_depth:
            self.main_parts.append(text)


def extract_main_text(page: str) -> tuple[str, str]:
    """(title, main text) of an HTML page; plain text is returned as is."""
    if "<" not in page[:2000]:
        return "", page.strip()[:MAX_TEXT]
    parser = _Extractor()
    parser.feed(page)
    parser.close()
    raw = "".join(parser.main_parts) if "".join(parser.main_parts).strip() else "".join(parser.parts)
    lines = [re.sub(r"[ \t\u00a0]+", " ", ln).strip() for ln in html.unescape(raw).splitlines()]
    paragraphs = [ln for ln in lines if len(ln) >= 3]
    text = "\n\n".join(paragraphs)
    return re.sub(r"\s+", " ", parser.title).strip(), text[:MAX_TEXT]


def fetch(url: str, timeout: float = TIMEOUT_S) -> Fetched:
    """GET ``url`` and extract its main text; never raises — a failure comes back as ``ok=False``."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx is a dependency
        return Fetched(url, False, error="httpx is not installed")
    try:
        with httpx.Client(timeout=timeout, follow_redirects=True, headers={"User-Agent": "memory-hub/0.1"}) as client:
            resp = client.get(url)
            resp.raise_for_status()
            ctype = resp.headers.get("content-type", "")
            if ctype and not any(t in ctype for t in ("text/", "html", "xml", "json")):
                return Fetched(url, False, error=f"not a text page ({ctype})")
            body = resp.content[:MAX_BYTES].decode(resp.encoding or "utf-8", "replace")
    except httpx.HTTPStatusError as exc:
        return Fetched(url, False, error=f"HTTP {exc.response.status_code}")
    except httpx.HTTPError as exc:
        return Fetched(url, False, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    except Exception as exc:  # noqa: BLE001 - a capture must never fail because a page was odd
        return Fetched(url, False, error=f"{type(exc).__name__}: {exc}")
    title, text = extract_main_text(body)
    if not text:
        return Fetched(url, False, title=title, error="page has no extractable text")
    return Fetched(url, True, title=title, text=text)
