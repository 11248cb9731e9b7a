"""Split a note into passages the embedder can take whole: heading-aware, title in every chunk.

A vector for a whole long note is a blur; a vector for a lone paragraph has lost what it is about.
So a note is cut at its Markdown headings, small neighbouring sections are packed together, big
ones are cut at paragraphs (then lines, then characters), and every chunk's text starts with the
note's title and its heading trail. Every chunk fits the model's window (512 tokens for e5, counted
by the embedder's own tokenizer, prefix included), so nothing is silently truncated.

Spans are character offsets into ``Note.body``; they are part of a chunk's identity. A chunk's text
is what a reader sees of its span (``reader_text``: link addresses, URLs, HTML tags and comments
left out), so a markup-heavy vault costs fewer tokens and its vectors carry less noise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..vault.markdown import HEADING, HEADING_MARK, mask_code, mask_comments, plain_text, reader_text
from .terms import HAN, HANGUL, HIRAGANA, KATAKANA

TokenCounter = Callable[[str], int]

# A section that fits the window stays whole (e5 was trained on passages of that size). A longer one
# is cut into pieces of about this many tokens: on LoCoMo sessions (long dialogues) vector-only
# session recall@5 went 0.774 (cut at the window) → 0.789 (320) → 0.809 (96).
TARGET_TOKENS = 96


@dataclass(frozen=True)
class Chunk:
    """One passage of a note. ``text`` is what gets embedded (title and headings included).

    ``level``: ``"note"`` for the passage that stands for the whole note (all of it when it fits
    the model's window, else its title, description and opening), ``"chunk"`` for a part of a
    note too long for one window, ``"part"`` for a window of a few sentences of a short note
    (``sentence_windows``)."""

    ordinal: int
    start: int
    end: int
    heading: str
    text: str
    level: str = "chunk"


@dataclass
class _Piece:
    start: int
    end: int
    trail: tuple[str, ...]


def _sections(body: str) -> list[_Piece]:
    """Cut the body at headings that are not inside code: [(start, end, heading trail)]."""
    masked = mask_code(body)
    cuts: list[tuple[int, int, str]] = [(m.start(), len(m.group(1)), m.group(2).strip()) for m in HEADING.finditer(masked)]
    pieces: list[_Piece] = []
    trail: list[tuple[int, str]] = []
    prev = 0
    for pos, level, title in cuts:
        if pos > prev:
            pieces.append(_Piece(prev, pos, tuple(t for _, t in trail)))
        trail = [(lv, t) for lv, t in trail if lv < level] + [(level, title)]
        prev = pos
    if len(body) > prev:
        pieces.append(_Piece(prev, len(body), tuple(t for _, t in trail)))
    return [p for p in pieces if body[p.start:p.end].strip()]


def _split_at(body: str, start: int, end: int, pattern: str) -> list[tuple[int, int]]:
    """Spans of ``body[start:end]`` cut after each match of ``pattern`` (separators kept)."""
    spans = []
    pos = start
    for m in re.finditer(pattern, body[start:end]):
        cut = start + m.end()
        if cut > pos:
            spans.append((pos, cut))
            pos = cut
    if end > pos:
        spans.append((pos, end))
    return spans


def _header(title: str, trail: tuple[str, ...]) -> str:
    heads = [h for h in trail if h.strip().lower() != title.strip().lower()]
    return title + ("\n" + " › ".join(heads) if heads else "")


def _repeats_body(description: str, body: str) -> bool:
    """Whether ``description`` is the body's own prose (a description derived from the first
    paragraph, as a note without one in its frontmatter gets)."""
    want = re.sub(r"\s+", " ", description.rstrip("…")).strip()[:120]
    if not want:
        return True
    head = plain_text(reader_text(body[: len(description) * 3 + 400]))
    return want in re.sub(r"\s+", " ", head)


def chunk_note(title: str, body: str, count_tokens: TokenCounter, max_tokens: int = 512,
               description: str = "", target_tokens: int = TARGET_TOKENS) -> list[Chunk]:
    """The chunks of one note, in order. A note with no body still gets one chunk (title, description)."""
    limit = max(32, max_tokens - 8)  # room for the model's prefix and special tokens
    target = min(target_tokens, limit)
    title = title.strip()
    lead = description.strip()
    if lead and _repeats_body(lead, body):
        lead = ""  # a description taken from the first paragraph would be embedded twice

    def render(trail: tuple[str, ...], start: int, end: int, first: bool) -> str:
        content = reader_text(body[start:end]).strip()  # no URLs, tags, comments: tokens that say little
        head = _header(title, trail)
        parts = [head]
        if first and lead:
            parts.append(lead)
        if content:
            parts.append(content)
        return "\n\n".join(parts)

    def fits(text: str, budget: int) -> bool:
        return count_tokens(text) <= budget

    # 1. Sections, each cut down until its rendered text fits the hard limit.
    units: list[_Piece] = []
    for sec in _sections(body):
        stack = [(sec.start, sec.end)]
        levels = [r"\n[ \t]*\n", r"\n", r"(?<=[.!?。！？])\s*", r"\s+"]
        queue: list[tuple[int, int, int]] = [(s, e, 0) for s, e in stack]
        while queue:
            s, e, lvl = queue.pop(0)
            if fits(render(sec.trail, s, e, not units), limit) or e - s <= 1:
                units.append(_Piece(s, e, sec.trail))
                continue
            parts = _split_at(body, s, e, levels[lvl]) if lvl < len(levels) else []
            if len(parts) <= 1:
                if lvl + 1 < len(levels):
                    queue.insert(0, (s, e, lvl + 1))
                    continue
                mid = (s + e) // 2  # no separator left at all: halve by characters
                parts = [(s, mid), (mid, e)]
            # group consecutive parts greedily up to the target, recurse on any that alone overflow the limit
            grouped: list[tuple[int, int, int]] = []
            gs, ge = parts[0]
            for ps, pe in parts[1:]:
                if fits(render(sec.trail, gs, pe, not units and not grouped), target):
                    ge = pe
                else:
                    grouped.append((gs, ge, lvl + 1))
                    gs, ge = ps, pe
            grouped.append((gs, ge, lvl + 1))
            queue[0:0] = grouped
    # A unit that is only a heading line says nothing its successor's header does not already say.
    units = [u for i, u in enumerate(units)
             if not (i + 1 < len(units) and units[i + 1].trail == u.trail
                     and not HEADING.sub("", body[u.start:u.end]).strip())]
    if not units:
        return [Chunk(0, 0, len(body), "", render((), 0, 0, True))]

    # 2. Pack neighbouring small units up to the target (same top-level section keeps headings honest).
    chunks: list[Chunk] = []
    cur = units[0]
    for unit in units[1:]:
        same = unit.trail[:1] == cur.trail[:1]
        trail = cur.trail if unit.trail == cur.trail else cur.trail[:1]
        if same and fits(render(trail, cur.start, unit.end, not chunks), target):
            cur = _Piece(cur.start, unit.end, trail)
        else:
            chunks.append(Chunk(len(chunks), cur.start, cur.end, " › ".join(cur.trail),
                                render(cur.trail, cur.start, cur.end, not chunks)))
            cur = unit
    chunks.append(Chunk(len(chunks), cur.start, cur.end, " › ".join(cur.trail),
                        render(cur.trail, cur.start, cur.end, not chunks)))
    return chunks


# What the note-level passage of a long note keeps of its body before the model's own truncation:
# the opening, which is what the note says it is about (seed 000 embeds title + first 2,000 chars).
NOTE_HEAD_CHARS = 4000


def note_passages(title: str, body: str, count_tokens: TokenCounter, max_tokens: int = 512,
                  description: str = "", target_tokens: int = TARGET_TOKENS) -> list[Chunk]:
    """What a note is embedded as: one note-level passage, plus chunks when it is too long.

    A note that fits the model's window is one passage, whole: cutting a 450-token abstract into
    96-token pieces loses what the pieces are about, and scoring a note by its best of eight pieces
    rewards it for being cut (SciFact dev, vector channel: 0.648 chunked vs 0.658 for one vector
    per note). A longer note gets a note-level passage (title, description, its opening — cut by
    the model at its window) and chunks of about ``target_tokens`` over all of it, so a detail deep
    in a long dialogue or runbook can still be found; the note then scores by its note-level
    passage or its best chunk (``vectors.search_notes``). When ``SENTENCE_NOTE_TOKENS`` turns them
    on (off by default, see there), a short note also gets windows of a few sentences
    (``sentence_windows``).
    """
    lead = description.strip()
    if lead and _repeats_body(lead, body):
        lead = ""
    content = reader_text(body).strip()
    whole = "\n\n".join(x for x in (title.strip(), lead, content) if x)
    # (a token is rarely more than 6 characters: a longer text cannot fit, and is not counted)
    if len(whole) <= max_tokens * 6 and (tokens := count_tokens(whole)) <= max(32, max_tokens - 8):
        note = Chunk(0, 0, len(body), "", whole, "note")
        return [note] + (sentence_windows(title, body, count_tokens) if tokens <= SENTENCE_NOTE_TOKENS else [])
    head = "\n\n".join(x for x in (title.strip(), lead, reader_text(body[:NOTE_HEAD_CHARS]).strip()) if x)
    parts = chunk_note(title, body, count_tokens, max_tokens, description=description, target_tokens=target_tokens)
    return [Chunk(0, 0, len(body), "", head, "note")] + [
        Chunk(c.ordinal + 1, c.start, c.end, c.heading, c.text) for c in parts]


# A short note is also embedded as windows of a few sentences each, so a question about one
# sentence of a paragraph finds it (its vector is not averaged with the other sentences).
SENTENCE_TOKENS = 48
# Notes up to this many tokens also get sentence windows (a longer note that still fits the window,
# a 400-token abstract, would cost 6-9 of them; not measured). A question about one sentence of a
# paragraph then finds it: JSQuAD dev vector 0.892 -> 0.923 (the one-vector baseline 0.890).
# Every span counted until 2026-12-03 cost the natural questions on obsidian-hub (MRR 0.785 ->
# 0.772) and 3.8x its vector rows: most of them were lines of links, tags, headings, badges and
# template placeholders, each a window that scores for anything. Only prose makes a window now
# (``_is_prose``): obsidian-hub 14.8k rows instead of 54k, its questions unchanged (README).
SENTENCE_NOTE_TOKENS = 256
_SENTENCE_END = r"(?<=[.!?])\s+|(?<=[。！？])|\n+"
# What a span holds that is not words in a sentence: wikilinks and embeds, Markdown links and
# images (their text too: a link list is navigation), bare [refs], #tags, a trailing ^block-id.
_NOT_PROSE = re.compile(r"!?\[\[[^\]]*\]\]|!?\[[^\]]*\]\([^)]*\)|!?\[[^\]]*\]|(?<!\w)#[\w/-]+|\^[\w-]+$")
_LETTER_WORD = re.compile(r"[^\W\d_]{2,}")
_CJK_CHAR = re.compile(f"[{HAN}{KATAKANA}{HIRAGANA}{HANGUL}]")
# A span is prose from this many words (two CJK characters count as one).
PROSE_WORDS = 4


def _is_prose(masked_span: str) -> bool:
    """Whether a span (code and comments already blanked) says something in words: not a heading,
    and, links, tags and block ids left out, at least ``PROSE_WORDS`` words."""
    text = reader_text(masked_span)
    if HEADING_MARK.match(text.lstrip()):
        return False
    rest = _NOT_PROSE.sub(" ", text)
    cjk = len(_CJK_CHAR.findall(rest))
    words = len(_LETTER_WORD.findall(_CJK_CHAR.sub(" ", rest)))
    return words + cjk / 2 >= PROSE_WORDS


def sentence_windows(title: str, body: str, count_tokens: TokenCounter,
                     target_tokens: int = SENTENCE_TOKENS) -> list[Chunk]:
    """Consecutive prose sentences of ``body`` grouped up to ``target_tokens`` each (a longer
    sentence stands alone), each headed by the title like every chunk; none when the prose is one
    window. A window's text is its prose sentences only (the links, tags and headings between them
    are in the note passage). Ordinals start at 1: the note passage is 0."""
    # Comments go first, over the whole body: a %% comment %% of several sentences would otherwise
    # be cut into spans that each look like prose.
    body = mask_comments(body)
    masked = mask_code(body)
    spans = [(s, e, reader_text(body[s:e]).strip())
             for s, e in _split_at(body, 0, len(body), _SENTENCE_END) if _is_prose(masked[s:e])]
    if len(spans) < 2:
        return []
    groups: list[list[tuple[int, int, str]]] = []
    size = 0
    for span in spans:
        n = count_tokens(span[2])
        if groups and size + n <= target_tokens:
            groups[-1].append(span)
            size += n
        else:
            groups.append([span])
            size = n
    if len(groups) < 2:
        return []
    head = title.strip()
    return [Chunk(1 + i, g[0][0], g[-1][1], "", "\n\n".join(x for x in (head, " ".join(t for _, _, t in g)) if x),
                  "part") for i, g in enumerate(groups)]
