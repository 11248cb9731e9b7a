"""Text from notes made safe to show: on a terminal, and inside the ``<vault-memory>`` block.

A note's file name, title, description or tags come from anyone who could write into the vault (a
clipped web page, a shared team vault, a pulled branch). Shown raw they can lie: U+202E reverses the
rest of a line (``evil‮dm.txt`` reads as ``evil.md``), U+200B and U+2066–U+2069 hide or reorder
characters, C0/C1 controls and newlines move the cursor or start a line of their own. In the recall
block, a look-alike closer (``＜/vault-memory＞``, ``‹/vault-memory›``, one with a zero-width space
inside) could make the model believe the block ended and what follows is the user speaking.

Two functions, one list of what is dangerous:

* :func:`visible` for people (CLI output): every invisible or control character is *shown*, as a
  ``\\u202e`` escape (``\\n`` and ``\\t`` for newline and tab), so a hostile name is recognisable.
* :func:`inert` for the model (block fields): invisibles are dropped, controls and line breaks
  become spaces, every angle-bracket look-alike becomes a plain parenthesis and ``vault-memory`` in
  any spelling (case, full-width letters, any separator) loses its separator, so no field can
  open, close or forge a block. Other characters are kept as they are (a path still opens).
"""

from __future__ import annotations

import re
import unicodedata

# Characters that change how text is laid out without being seen: bidi embeddings, overrides and
# isolates, marks, zero-width characters, the word joiner family, the BOM, and interlinear
# annotations; plus every C0 and C1 control and the Unicode line and paragraph separators.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_ZERO_WIDTH = "\u00ad\u180e\u200b-\u200d\u2060-\u2064\ufeff\ufff9-\ufffb"
_CONTROLS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_INVISIBLE = re.compile(f"[{_BIDI}{_ZERO_WIDTH}]")
_UNSAFE = re.compile(f"[{_BIDI}{_ZERO_WIDTH}{_CONTROLS}]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}

# Angle brackets and what a reader (or a model) could take for them, full-width and small forms too.
_ANGLES = str.maketrans({c: "(" for c in "<‹«〈《⟨❮❬⧼ᐸ˂⟪⦑⦓＜﹤〈"} | {c: ")" for c in ">›»〉》⟩❯❭⧽ᐳ˃⟫⦒⦔＞﹥〉"})


def _letter(ch: str) -> str:
    """A character class for an ASCII letter and its full-width forms, any case."""
    return f"[{ch}{ch.upper()}{chr(ord(ch) + 0xFEE0)}{chr(ord(ch.upper()) + 0xFEE0)}]"


# "vault-memory" spelt with any case, full-width letters, and any separator (or none) in between.
_TAG_WORD = re.compile("(" + "".join(map(_letter, "vault")) + r")[\W_]*(" + "".join(map(_letter, "memory")) + ")")


def visible(text: object) -> str:
    """``text`` for a terminal: every invisible or control character shown as an escape."""
    s = str(text if text is not None else "")
    if not _UNSAFE.search(s):
        return s
    return _UNSAFE.sub(lambda m: _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"), s)


def inert(text: object) -> str:
    """``text`` for a field inside the recall block: one line that cannot open, close or fake it."""
    s = unicodedata.normalize("NFC", str(text if text is not None else ""))
    s = _INVISIBLE.sub("", s)
    s = _UNSAFE.sub(" ", s)
    s = s.translate(_ANGLES)
    return _TAG_WORD.sub(r"\1 \2", s)


def visible_lines(text: str) -> str:
    """Like :func:`visible` for a whole block of output: its own newlines and tabs are kept."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(lambda m: m.group() if m.group() in "\n\t" else _NAMED.get(m.group(), f"\\u{ord(m.group()):04x}"),
                       text)


class VisibleStream:
    """A text stream that shows invisible and control characters written to it (CLI stdout/stderr).

    A safety net under the per-field :func:`visible` calls: whatever a command prints (a file name in
    a warning, a title in a list), no byte of it can move the cursor, recolour the terminal or
    reverse a line. ``\\uXXXX`` escapes keep ``--json`` output valid JSON.
    """

    def __init__(self, stream) -> None:  # noqa: ANN001 - any text stream
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(visible_lines(text))
        return len(text)

    def __getattr__(self, name: str):  # noqa: ANN204 - flush, fileno, isatty, encoding … pass through
        return getattr(self._stream, name)
