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

The transcript is a saved capture in the vault, or the agent's own file wherever it lives (Claude
Code keeps them in ``~/.claude/projects/…/<session>.jsonl``): a path outside the vault is *read*
— a regular file of a transcript type and sane size, never a FIFO or a device — while every write
stays inside the vault. JSON-lines transcripts are read as the conversation they hold, never as
raw JSON.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..config import settings
from ..services.llm import LLMError, chat_json, configured
from ..vault.markdown import plain_text, trim
from ..vault.notes import parse_note
from ..vault.redact import redact, redact_report
from ..vault.safe_io import UnreadableNote, open_regular
from ..vault.walk import read_note_text
from ..vault.writer import NoteExists, create_note, unique_note_path
from . import classify as cls
from .braindump import CaptureError, render_capture

DUPLICATE = 0.8  # share of a candidate's terms already in one note: nothing new, dropped
RELATED = 0.45  # partial overlap: kept, and linked to that note
MAX_LEARNINGS = 5
TAIL_CHARS = 12_000
TRANSCRIPT_SUFFIXES = (".jsonl", ".json", ".md", ".markdown", ".txt", ".log")
MAX_TRANSCRIPT_BYTES = int(os.environ.get("MEMORY_HUB_MAX_TRANSCRIPT_BYTES", 256 * 1024 * 1024))
TRANSCRIPT_TAIL_BYTES = 2 * 1024 * 1024  # read from the end: a week-long session costs what a short one does
_JSONISH = re.compile(r'^\s*[\[{]|"\w+"\s*:\s*["{\[\d]')

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
        if _JSONISH.search(plain):
            continue  # a line of raw JSON (tool output, a transcript record) is not a finding
        tech = len(_TECH.findall(sentence))
        cue = len(_CUE.findall(sentence))
        if not tech or not cue:
            continue
        key = plain.lower()[:80]
        if key in seen:
            continue
        seen.add(key)
        score = min(tech, 4) + 2 * min(cue, 2) + (1 if "`" in sentence else 0)
        scored.append(Candidate(title=learning_title(plain), text=sentence, score=float(score)))
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
        if not body:
            continue
        title = str(item.get("title") or "").strip()
        if not title or _JSONISH.search(title):
            title = learning_title(plain_text(body))
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


def learning_title(plain: str) -> str:
    """A note title from a finding's plain text: its first clause, without the lead-in words."""
    text = re.sub(r"(?i)^(?:so|ok|okay|also|and|note that|remember that|it turns out( that)?|turns out( that)?)[,:]?\s+",
                  "", plain.strip())
    title = cls.make_title(text[:1].upper() + text[1:], 80)
    return title.rstrip(".。:;,") if not title.endswith("…") else title


def write_learning(vault: Path, cand: Candidate, source: str | None, today: _dt.date,
                   source_file: str | None = None) -> str:
    cand.title, cand.text = redact(cand.title), redact(cand.text)  # a model's reply is outside text too
    links = [m["path"].removesuffix(".md") for m in cand.matches if isinstance(m.get("path"), str)][:3]
    if source:
        body = cand.text + "\n\nFrom the session transcript [[" + source.rsplit("/", 1)[-1].removesuffix(".md") + "]]."
    elif source_file:
        body = cand.text + f"\n\nFrom the session transcript `{source_file}`."
    else:
        body = cand.text
    tags = list(dict.fromkeys(["learning"] + cand.tags + cls.extract_themes(cand.text, limit=3)))
    text = render_capture(title=cand.title, description=trim(cand.text, 240), kind="capture", scope="work",
                          tags=tags, created=today.isoformat(), body=body, links=links)
    for _attempt in range(5):
        rel = unique_note_path(vault, settings(vault)["folders.learnings"], cand.title, today)
        try:
            create_note(vault, rel, text)
            return rel
        except NoteExists:
            continue
    raise CaptureError("could not find a free file name for a learning")


def learnings_from_text(vault: Path, text: str, source: str | None = None, *, today: _dt.date | None = None,
                        dry_run: bool = False, use_llm: bool | None = None,
                        source_file: str | None = None) -> LearningsReport:
    """Extract, check and write learnings from a transcript's text (JSON lines are read as the conversation).

    ``source`` is the transcript's vault path (the notes link to it); ``source_file`` the file name of a
    transcript read from outside the vault (named in the notes, never linked).
    """
    today = today or _dt.date.today()
    text = transcript_text(text)
    report = LearningsReport(source=source or source_file, judge="rules")
    # Redacted before anything else: nothing secret reaches the LLM endpoint or a learning note.
    done = redact_report(text)
    text = done.text
    if done.counts:
        report.warnings.append(f"{done.summary()} from the transcript before extracting learnings")
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
        cand.path = write_learning(vault, cand, source, today, source_file=source_file)
        report.written.append(cand.path)
    return report


def learnings_from_capture(vault: Path, rel: str, **kwargs: object) -> LearningsReport:
    """Learnings from a saved transcript capture (a vault-relative path)."""
    note = parse_note(rel, read_note_text(vault, rel))
    return learnings_from_text(vault, note.body, source=rel, **kwargs)  # type: ignore[arg-type]


class TranscriptError(ValueError):
    """A transcript path that cannot be read (missing, not a regular file, wrong type, too big, binary)."""


def transcript_text(text: str) -> str:
    """A transcript as prose: JSON lines (Claude Code, Codex) become the user and assistant messages."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return text
    from ..hooks.transcript import parse_line  # the one reader of agent transcript records

    out, records = [], 0
    for raw in text.splitlines():
        try:
            item = json.loads(raw)
        except ValueError:
            continue
        records += 1
        msg = parse_line(item)
        if msg is not None and msg.role in ("user", "assistant") and msg.text.strip():
            out.append(f"{msg.role.capitalize()}: {msg.text.strip()}")
    return "\n\n".join(out) if records else text


def read_transcript_file(path: str | os.PathLike[str], max_bytes: int = MAX_TRANSCRIPT_BYTES) -> str:
    """The tail of a transcript file anywhere on disk, for reading only; TranscriptError says why not."""
    p = Path(path).expanduser()
    if p.suffix.lower() not in TRANSCRIPT_SUFFIXES:
        raise TranscriptError(f"not a transcript file (expected {', '.join(TRANSCRIPT_SUFFIXES)})")
    try:
        fd = open_regular(p)  # safe_io: non-blocking, and only a regular file is ever read
    except UnreadableNote:
        raise TranscriptError("not a regular file (a FIFO, device or folder is never read)") from None
    except OSError as exc:
        raise TranscriptError(exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if st.st_size > max_bytes:
            raise TranscriptError(f"too large ({st.st_size:,} bytes > {max_bytes:,})")
        begin = max(0, st.st_size - TRANSCRIPT_TAIL_BYTES)
        os.lseek(fd, begin, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if begin:
        data = data.split(b"\n", 1)[-1]  # the first line is probably cut
    if b"\x00" in data:
        raise TranscriptError("binary content (NUL bytes), not a transcript")
    return data.decode("utf-8", "replace")


def learnings_from_transcript(vault: Path, source: str, **kwargs: object) -> LearningsReport:
    """Learnings from ``source``: a vault-relative capture, or a transcript file's path (inside or outside)."""
    p = Path(source).expanduser()
    if p.is_absolute():
        try:
            rel = p.resolve().relative_to(Path(vault).resolve()).as_posix()
        except ValueError:
            rel = None
        if rel is None or not rel.lower().endswith(".md"):
            text = read_transcript_file(p)
            return learnings_from_text(vault, text, source_file=p.name, **kwargs)  # type: ignore[arg-type]
        source = rel
    return learnings_from_capture(vault, source, **kwargs)
