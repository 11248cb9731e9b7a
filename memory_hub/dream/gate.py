"""The gate: which captures are ready to be promoted, and which have substance worth promoting.

A capture younger than seven days waits: a single capture means little until two or three land
near it. An older one is scored on substance — its own words, with links, URLs, headings,
template boilerplate and frontmatter removed. Link-only and empty captures go no further.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass

from ..capture.classify import content_terms
from ..vault.markdown import mask_code
from ..vault.notes import CAPTURE
from .corpus import Corpus, Doc, note_date

MIN_AGE_DAYS = 7
MIN_TERMS = 6  # distinct content words (or CJK runs) a capture needs to be worth promoting
DONE = frozenset({"processed", "done", "archived", "promoted"})

_LINKS = re.compile(r"!?\[\[[^\]]*\]\]|!?\[[^\]]*\]\([^)]*\)|https?://\S+")
_BOILER = re.compile(r"(?im)^(?:#.*|Dump it here.*|Action item.*|Process into:.*|[-*]\s*(?:\[[ xX]\])?\s*)$")


@dataclass
class Verdict:
    path: str
    ok: bool
    reason: str
    substance: int = 0


def substance(doc: Doc) -> int:
    """Distinct content terms in the capture's own words (links and boilerplate removed)."""
    body = _BOILER.sub("", _LINKS.sub(" ", mask_code(doc.note.body)))
    terms = set(content_terms(body))
    cjk = sum(len(t) for t in terms if not t.isascii())
    return len({t for t in terms if t.isascii()}) + cjk // 3


def gate(corpus: Corpus, today: _dt.date | None = None, min_age_days: int = MIN_AGE_DAYS) -> list[Verdict]:
    """A verdict for every capture not yet processed: ready, too young, or without substance."""
    today = today or _dt.date.today()
    out = []
    for path, doc in sorted(corpus.docs.items()):
        if doc.note.kind != CAPTURE:
            continue
        status = str(doc.note.frontmatter.get("status") or "").strip().lower()
        if status in DONE or doc.note.frontmatter.get("processed_into"):
            continue
        age = (today - note_date(doc)).days
        if age < min_age_days:
            out.append(Verdict(path, False, f"younger than {min_age_days} days ({age}d)"))
            continue
        if doc.protected:
            out.append(Verdict(path, False, f"protected: {doc.protected}"))
            continue
        score = substance(doc)
        if score < MIN_TERMS:
            reason = "link-only" if _LINKS.search(doc.note.body) else "empty or too thin"
            out.append(Verdict(path, False, f"{reason} (substance {score})", score))
            continue
        out.append(Verdict(path, True, "ready", score))
    return out
