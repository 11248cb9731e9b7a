"""Session learnings: from a saved transcript, keep the durable technical findings as notes.

The seed calls this the write path's safety net: the person rarely stops to record what just
became obvious, so at session end the transcript tail is read back and the technical discoveries
(not the conversation) are kept. Steps:

1. candidates — with an LLM endpoint configured (``services/llm.py``) one call judges the tail and
   returns learnings as JSON; otherwise a deterministic extractor keeps sentences that carry both a
   technical signal (code, paths, error names, flags, versions) and a finding cue ("root cause",
   "the fix", "turns out", 原因, 対処 …) and drops chit-chat.
2. check against the vault — each candidate is searched lexically; a hit whose text already holds
   nearly all of the candidate's terms makes it a duplicate (dropped), a partial overlap makes it
   related (linked from the new note).
3. write the survivors into ``learnings/`` as capture notes pointing back at the transcript.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..services.llm import LLMError, chat_json, configured
from ..vault.markdown import plain_text, trim
from ..vault.notes import parse_note
from ..vault.walk import read_note_text
from ..vault.writer import NoteExists, create_note, unique_note_path
from . import classify as cls
from .braindump import CaptureError, render_capture

DUPLICATE = 0.8  # share of a candidate's terms already in one note: nothing new, dropped
RELATED = 0.45  # partial overlap: kept, and linked to that note
MAX_LEARNINGS = 5
TAIL_CHARS = 12_000

_TECH = re.compile(
    r"`[^`]+`|\b[\w.-]+/[\w./-]+\b|\b[a-z]+_[a-z_]+\b|\b[a-z]+[A-Z]\w+\b|\b[A-Z][a-z]+[A-Z]\w+\b|--[a-z][\w-]+|"
    r"\b[A-Z]{2,}\d*\b|\b\d+(?:\.\d+)+\b|\b\d+\s?(?:ms|s|MB|GB|KB|%|分|秒)|\b(?:error|exception|timeout|config|"
    r"api|sql|http|tls|dns|cache|query|index|thread|lock|schema|deploy|build|test)\w*\b",
)
_CUE = re.compile(
    r"(?i)\b(?:root cause|the fix|fixed by|fix was|turns out|turned out|caused by|because|the reason|"
    r"instead of|works by|doesn't|does not|must|never|always|only when|unless|so that|which means|"
    r"learned|lesson|gotcha|workaround|note that|remember that|the trick)\b|"
    r"原因|対処|解決|回避|ため|ので|必要|してはいけない|しないと|注意|わかった|判明|ポイント|落とし穴|仕様"
)
_CHAT = re.compile(
    r"(?i)^(?:thanks|thank you|great|sounds good|ok(?:ay)?|sure|got it|perfect|nice|cool|hi|hello|hey|"
    r"let me|i'll|i will|now i|next,? i|shall i|should i|do you want|would you like|here is|here's|"
    r"ありがとう|了解|承知|いいですね|お願いします|では|それでは|次に)\b"
)
_SPEAKER = re.compile(r"^\s*(?:\*\*)?(?:#+\s*)?(user|human|assistant|claude|agent|ai|system|tool)(?:\*\*)?\s*[:：>]\s*", re.I)


@dataclass
class Candidate:
    title: str
    text: str
    tags: list[str] = field(default_factory=list)
    score: float = 0.0
    verdict: str = "new"  # new | duplicate | related
    matches: list[dict[str, object]] = field(default_factory=list)
    path: str | None = None

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class LearningsReport:
    source: str | None
    judge: str  # llm | rules
    written: list[str] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        data = dict(self.__dict__)
        data["candidates"] = [c.as_dict() for c in self.candidates]
        return data


def term_set(text: str) -> set[str]:
    """Content words plus CJK bigrams: the unit of overlap between a candidate and a note."""
    terms = set(cls.content_terms(text))
    for run in re.findall(r"[\u3040-\u30ff\u4e00-\u9fff]{2,}", text):
        terms.update(run[i:i + 2] for i in range(len(run) - 1))
    return terms


def _sentences(text: str) -> list[str]:
    out = []
    in_fence = False
    for raw in text.splitlines():
        if raw.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = _SPEAKER.sub("", raw).strip().lstrip("-*+ ").strip()
        if not line or line.startswith(("```", "|", ">")):
            continue
        for part in re.split(r"(?<=[.!?。！？])\s+|(?<=[。！？])", line):
            part = part.strip()
            if part:
                out.append(part)
    return out


def extract_candidates(text: str, limit: int = MAX_LEARNINGS) -> list[Candidate]:
    """Deterministic extractor: sentences with a technical signal and a finding cue, chit-chat dropped."""
    scored: list[Candidate] = []
    seen: set[str] = set()
    for sentence in _sentences(text):
        plain = plain_text(sentence).strip()
        if not 25 <= len(plain) <= 400 or plain.endswith(("?", "？")) or _CHAT.match(plain):
            continue
        tech = len(_TECH.findall(sentence))
        cue = len(_CUE.findall(sentence))
        if not tech or not cue:
            continue
        key = plain.lower()[:80]
        if key in seen:
            continue
        seen.add(key)
        score = min(tech, 4) + 2 * min(cue, 2) + (1 if "`" in sentence else 0)
        scored.append(Candidate(title=cls.make_title(plain, 80), text=sentence, score=float(score)))
    scored.sort(key=lambda c: -c.score)
    return scored[:limit]


_SYSTEM = (
    "You extract durable technical learnings from a coding-session transcript. A learning is a fact, "
    "root cause, fix, gotcha or convention that will help in a future session; chit-chat, plans, "
    "status updates and questions are not learnings. Reply with JSON only: "
    '{"learnings": [{"title": "...", "text": "one to three sentences", "tags": ["..."]}]}. '
    "Return an empty list when there is nothing worth keeping. Keep the transcript's language."
)


def llm_candidates(text: str, limit: int = MAX_LEARNINGS) -> list[Candidate]:
    """Ask the configured model to judge the transcript tail; raises LLMError on failure."""
    reply = chat_json(_SYSTEM, text[-TAIL_CHARS:])
    items = reply.get("learnings") if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise LLMError("model reply has no 'learnings' list")
    out = []
    for item in items[:limit]:
        if not isinstance(item, dict):
            continue
        body = str(item.get("text") or "").strip()
        title = str(item.get("title") or "").strip() or cls.make_title(body, 80)
        if not body:
            continue
        tags = [str(t) for t in item.get("tags") or [] if isinstance(t, (str, int))]
        out.append(Candidate(title=trim(title, 100), text=body, tags=tags, score=1.0))
    return out


def check_against_vault(vault: Path, candidates: list[Candidate], k: int = 5, exclude: str | None = None) -> None:
    """Mark each candidate new / duplicate / related by lexical search over the (synced) index.

    ``exclude`` is the transcript itself, which of course holds every candidate's words.
    """
    if not candidates:
        return
    from ..index.store import Store
    from ..index.sync import sync
    from ..retrieval.search import QueryError, search

    store = Store(vault)
    sync(vault, store=store)
    for cand in candidates:
        terms = term_set(cand.title + " " + cand.text)
        if not terms:
            continue
        words = sorted(cls.content_terms(cand.text), key=len, reverse=True)[:8]
        query = " ".join(dict.fromkeys(words)) or cand.title
        try:
            hits = search(store, query[:200], k=k).hits
        except QueryError:
            continue
        best = 0.0
        for hit in hits:
            row = store.conn.execute("SELECT path FROM notes WHERE id = ?", (hit.note_id,)).fetchone()
            if row is None or row[0] == exclude:
                continue
            try:
                note = parse_note(row[0], read_note_text(vault, row[0]))
            except Exception:  # noqa: BLE001 - a vanished or unreadable note is simply not a match
                continue
            overlap = len(terms & term_set(note.title + " " + note.body)) / len(terms)
            if overlap >= RELATED:
                cand.matches.append({"path": row[0], "title": note.title, "overlap": round(overlap, 2)})
            best = max(best, overlap)
        cand.verdict = "duplicate" if best >= DUPLICATE else "related" if best >= RELATED else "new"


def write_learning(vault: Path, cand: Candidate, source: str | None, today: _dt.date) -> str:
    links = [m["path"].removesuffix(".md") for m in cand.matches if isinstance(m.get("path"), str)][:3]
    body = cand.text + ("\n\nFrom the session transcript [[" + source.rsplit("/", 1)[-1].removesuffix(".md") + "]]."
                        if source else "")
    tags = list(dict.fromkeys(["learning"] + cand.tags + cls.extract_themes(cand.text, limit=3)))
    text = render_capture(title=cand.title, description=trim(cand.text, 240), kind="capture", scope="work",
                          tags=tags, created=today.isoformat(), body=body, links=links)
    for _attempt in range(5):
        rel = unique_note_path(vault, "learnings", cand.title, today)
        try:
            create_note(vault, rel, text)
            return rel
        except NoteExists:
            continue
    raise CaptureError("could not find a free file name for a learning")


def learnings_from_text(vault: Path, text: str, source: str | None = None, *, today: _dt.date | None = None,
                        dry_run: bool = False, use_llm: bool | None = None) -> LearningsReport:
    """Extract, check and write learnings from a transcript's text."""
    today = today or _dt.date.today()
    report = LearningsReport(source=source, judge="rules")
    if use_llm is None:
        use_llm = configured() is not None
    candidates: list[Candidate] = []
    if use_llm:
        try:
            candidates = llm_candidates(text)
            report.judge = "llm"
        except LLMError as exc:
            report.warnings.append(f"LLM judge failed ({exc}); used the rule-based extractor instead")
    if report.judge == "rules":
        candidates = extract_candidates(text[-TAIL_CHARS:])
    check_against_vault(vault, candidates, exclude=source)
    report.candidates = candidates
    for cand in candidates:
        if cand.verdict == "duplicate" or dry_run:
            continue
        cand.path = write_learning(vault, cand, source, today)
        report.written.append(cand.path)
    return report


def learnings_from_capture(vault: Path, rel: str, **kwargs: object) -> LearningsReport:
    """Learnings from a saved transcript capture (a vault-relative path)."""
    note = parse_note(rel, read_note_text(vault, rel))
    return learnings_from_text(vault, note.body, source=rel, **kwargs)  # type: ignore[arg-type]
