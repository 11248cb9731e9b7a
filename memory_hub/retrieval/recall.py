"""Recall: which notes to put in front of the model for this prompt, decided in milliseconds.

Three steps, no LLM on the hot path:

1. **Mode.** A prompt is ``light`` (an ordinary turn), ``targeted`` (it names its subject: a note
   title or alias, a vault path, a quoted identifier, an error code) or ``graph-overview`` (it asks
   how things connect: "how do X and Y relate", 「〜の関係」). Rules decide; a warm server may add
   the prompt's embedding against a few exemplars of each mode. Only ``graph-overview`` counts
   backlinks.
2. **Recall's own scoring**, over its own index (``RecallIndex``), persisted under
   ``<vault>/.memory_hub/recall/`` and kept current by mtime + size per file: a warm restart reads
   one file and re-parses only the notes that changed. A term weighs most in the title, least in
   the body, and body repetitions stop counting after 4; each candidate is then scaled by how much
   of the prompt it covers, so a note matching six different terms beats one that repeats a hub
   word everywhere; notes read recently and notes judged useful before get a boost.
3. **Fusion** with the hybrid search (RRF), notes the prompt names pinned first.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import index_dir
from ..index.terms import HAN, HANGUL, HIRAGANA, KATAKANA, STOPWORDS, is_identifier, normalize
from ..index.usage import NONE as NO_USAGE
from ..index.usage import Usage, snapshot
from ..vault.notes import UNRANKED_KINDS, parse_note
from ..vault.walk import FileStat, OutsideVault, UnreadableNote, read_note_text, safe_path, walk
from .block import DEFAULT_BUDGET, Block, Entry, render

LIGHT, TARGETED, GRAPH = "light", "targeted", "graph-overview"
MODES = (LIGHT, TARGETED, GRAPH)
INDEX_VERSION = 4

# Field weights: a term in the title says the note is *about* it; in the body, only that it is mentioned.
W_TITLE, W_ALIAS, W_STEM, W_TAG, W_DESC, W_BODY = 10.0, 8.0, 6.0, 5.0, 3.0, 1.0
BODY_CAP = 4  # body repetitions beyond this add nothing
BODY_CHARS = 60_000
MAX_QUERY_TERMS = 48
COMMON_SHARE = 0.2
SAVE_EVERY = 60.0  # seconds between saves of recall's index for incremental (watcher) updates
HYBRID_K = 10  # hybrid hits fused; beyond the top few they only add cost (snippets)
HYBRID_QUERY_TERMS = 12  # a long prompt is searched by its rarest terms, not all of its words
PER_MODE_K = {LIGHT: 6, TARGETED: 8, GRAPH: 10}
MIN_PROMPT_CHARS = 8
RELATIVE_FLOOR = 0.08  # recall candidates below this share of the best score are dropped
HYBRID_ONLY_TOP = 5  # a note only the hybrid search found must rank this high there
RAW_TRANSCRIPT_FACTOR = 0.5  # saved transcript tails mention everything; curated notes should win

# -- terms ----------------------------------------------------------------------------------------

_CONTENT_RUN = re.compile(f"[{HAN}{KATAKANA}{HANGUL}]+")
_HIRA_RUN = re.compile(f"[{HIRAGANA}]{{2,}}")
_WORD = re.compile(r"[0-9a-z_]+(?:[.\-/:][0-9a-z_]+)*")
_ASCII_WORD = re.compile(r"[0-9a-z_]+")


def _stem(word: str) -> str:
    """A deliberately tiny English stemmer: plurals and -ing/-ed, so 'deploys' meets 'deploy'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if len(word) > 6 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2]
    return word


def tokens(text: str, *, hiragana: bool = False) -> list[str]:
    """Terms of ``text`` as recall matches them (repeats kept): stemmed words, whole identifiers,
    CJK bigrams (single characters for one-character runs)."""
    text = normalize(text).lower()
    out: list[str] = []
    for m in _WORD.finditer(text):
        compound = m.group(0)
        if any(c in compound for c in ".-/:") and is_identifier(compound):
            out.append(compound)
        for w in _ASCII_WORD.findall(compound):
            if w in STOPWORDS or (len(w) < 2 and not w.isdigit()):
                continue
            out.append(_stem(w) if "_" not in w else w)
    runs = [m.group(0) for m in _CONTENT_RUN.finditer(text)]
    if hiragana:
        runs += [m.group(0) for m in _HIRA_RUN.finditer(text)]
    for run in runs:
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
    return out


def query_terms(prompt: str) -> list[str]:
    """Distinct terms of a prompt, in order (hiragana only when there is nothing else)."""
    found = list(dict.fromkeys(tokens(prompt)))
    return found or list(dict.fromkeys(tokens(prompt, hiragana=True)))


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", normalize(text).lower().replace("-", " ").replace("_", " ")).strip()


# -- the index ------------------------------------------------------------------------------------

@dataclass
class NoteInfo:
    title: str
    description: str
    kind: str
    terms: tuple[str, ...]  # the note's terms; their weights live in the postings
    names: list[str]  # normalised title, aliases and file stem: how a prompt or a link names it
    links: list[str]  # normalised link targets (file stems)
    useful: int = 0
    access: int = 0
    raw_transcript: bool = False  # a hook's saved transcript tail: uncurated, echoes past sessions


@dataclass
class _Data:
    version: int = INDEX_VERSION
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: dict[str, NoteInfo] = field(default_factory=dict)
    postings: dict[str, dict[str, float]] = field(default_factory=dict)


def _count(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def note_info(path: str, text: str) -> tuple[NoteInfo, dict[str, float]]:
    """Everything recall needs from one note (names, links, counters) and its weighted terms."""
    note = parse_note(path, text)
    weights: dict[str, float] = {}

    def add(terms: Iterable[str], w: float) -> None:
        for t in set(terms):
            t = sys.intern(t)  # one string object per term: the saved index stores it once
            weights[t] = weights.get(t, 0.0) + w

    stem = PurePosixPath(path).stem
    add(tokens(note.title, hiragana=True), W_TITLE)
    add((t for a in note.aliases for t in tokens(a, hiragana=True)), W_ALIAS)
    add(tokens(stem.replace("-", " ").replace("_", " ")), W_STEM)
    add((t for tag in note.tags for t in tokens(tag.replace("/", " "))), W_TAG)
    add(tokens(note.description), W_DESC)
    counts: dict[str, int] = {}
    for t in tokens(note.body[:BODY_CHARS]):
        counts[t] = counts.get(t, 0) + 1
    for t, n in counts.items():
        t = sys.intern(t)
        weights[t] = weights.get(t, 0.0) + W_BODY * min(n, BODY_CAP)
    names = [_key(n) for n in (note.title, *note.aliases, stem) if n and _key(n)]
    links = [_key(PurePosixPath(link.target).stem) for link in note.links if link.target]
    return NoteInfo(
        title=note.title, description=note.description, kind=note.kind, terms=tuple(weights),
        names=list(dict.fromkeys(names)), links=list(dict.fromkeys(links)),
        useful=_count(note.frontmatter.get("useful_count")), access=_count(note.frontmatter.get("access_count")),
        raw_transcript=str(note.frontmatter.get("source", "")).endswith("-hook") and "transcript" in note.tags,
    ), weights


class RecallIndex:
    """Recall's own inverted index of the vault, persisted across runs and updated incrementally."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault).resolve()
        self.path = index_dir(self.vault) / "recall" / "index.pkl"
        self.data = _Data()
        self.complete = False  # every file of the last walk is indexed
        self.loaded_from_disk = False
        self._lock = threading.RLock()
        self._names: dict[str, set[str]] | None = None
        self._heads: dict[str, list[str]] = {}
        self._backlinks: dict[str, int] | None = None
        self.last_refresh = 0.0
        self._unsaved = False
        self._saved_at = time.monotonic()

    # persistence -------------------------------------------------------------------------------
    def load(self) -> bool:
        """Read the saved copy (one file). Returns False when there is none or it is unusable."""
        try:
            with open(self.path, "rb") as fh:
                raw = pickle.load(fh)  # our own cache file (plain dicts and tuples) in the index folder
            if not isinstance(raw, dict) or raw.get("version") != INDEX_VERSION:
                return False
            data = _Data(INDEX_VERSION, raw["files"], {p: NoteInfo(*t) for p, t in raw["notes"].items()},
                         raw["postings"])
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError,
                KeyError, TypeError):
            return False
        self.data = data
        self.loaded_from_disk = True
        self._invalidate()
        return True

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".index.{os.getpid()}.{threading.get_ident()}.tmp")
        d = self.data
        plain = {"version": d.version, "files": d.files, "postings": d.postings,
                 "notes": {p: tuple(vars(n).values()) for p, n in d.notes.items()}}
        with open(tmp, "wb") as fh:
            pickle.dump(plain, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.path)

    def _invalidate(self) -> None:
        self._names = None
        self._backlinks = None

    # updating ----------------------------------------------------------------------------------
    def _remove(self, path: str) -> None:
        info = self.data.notes.pop(path, None)
        self.data.files.pop(path, None)
        if info is None:
            return
        for t in info.terms:
            posting = self.data.postings.get(t)
            if posting is not None:
                posting.pop(path, None)
                if not posting:
                    del self.data.postings[t]

    def _add(self, path: str, info: NoteInfo, weights: dict[str, float]) -> None:
        self.data.notes[path] = info
        for t, w in weights.items():
            self.data.postings.setdefault(t, {})[path] = w

    def refresh(self, deadline: float | None = None, only: Iterable[str] | None = None) -> dict[str, int]:
        """Stat the vault (or just ``only``) and re-parse what changed; save when anything did.

        With ``deadline`` (a ``time.monotonic()`` value) the work stops there and what was done is
        saved, so a large vault's first build spreads over several runs instead of never finishing.
        """
        # The stat walk runs outside the lock: prompts keep being answered meanwhile.
        if only is not None:
            wanted = set(only)
            stats = []
            for rel in sorted(wanted):
                try:
                    st = safe_path(self.vault, rel).stat()
                except (OSError, OutsideVault):
                    continue
                stats.append(FileStat(rel, st.st_mtime_ns, st.st_size))
        else:
            stats = list(walk(self.vault))
        with self._lock:
            changed = removed = 0
            known = self.data.files
            seen = {s.path for s in stats}
            if only is not None:
                gone = [p for p in wanted if p in known and p not in seen]
            else:
                gone = [p for p in known if p not in seen]
            for p in gone:
                self._remove(p)
                removed += 1
            complete = True
            for st in stats:
                if not st.is_note:
                    continue
                if known.get(st.path) == (st.mtime_ns, st.size):
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    complete = False
                    break
                self._remove(st.path)
                try:
                    text = read_note_text(self.vault, st.path)
                except (UnreadableNote, OSError):
                    known[st.path] = (st.mtime_ns, st.size)  # remember, so it is not retried each prompt
                    continue
                self._add(st.path, *note_info(st.path, text))
                known[st.path] = (st.mtime_ns, st.size)
                changed += 1
            if only is None:
                self.complete = complete
            if changed or removed:
                self._invalidate()
                self._unsaved = True
            # The saved copy only speeds up the next cold start, and it stays consistent however old
            # it is (files and their terms are saved together): a watcher's small updates save at
            # most once a minute, a full refresh saves at once.
            if self._unsaved and (only is None or time.monotonic() - self._saved_at > SAVE_EVERY):
                try:
                    self.save()
                    self._unsaved, self._saved_at = False, time.monotonic()
                except OSError:
                    pass
            self.last_refresh = time.monotonic()
            return {"changed": changed, "removed": removed, "notes": len(self.data.notes)}

    # lookups -----------------------------------------------------------------------------------
    def names(self) -> dict[str, set[str]]:
        """{normalised title/alias/stem: paths}, for spotting a note named in a prompt."""
        if self._names is None:
            names: dict[str, set[str]] = {}
            for path, info in self.data.notes.items():
                if info.kind in UNRANKED_KINDS:
                    continue
                for n in info.names:
                    names.setdefault(n, set()).add(path)
            self._names = names
            heads: dict[str, list[str]] = {}
            for n in names:
                if _CONTENT_RUN.search(n):
                    compact = n.replace(" ", "")
                    if len(compact) >= 3:
                        heads.setdefault(compact[:2], []).append(n)
                elif len(n) >= 4 and (len(n) >= 10 or " " in n or is_identifier(n.replace(" ", "_"))):
                    heads.setdefault(n.split(" ", 1)[0], []).append(n)
            self._heads = heads
        return self._names

    def name_heads(self) -> dict[str, list[str]]:
        """Names a prompt may mention, keyed by their first word (or first two CJK characters)."""
        self.names()
        return self._heads

    def backlinks(self) -> dict[str, int]:
        """{path: number of notes linking to it}, resolved by file stem, title or alias."""
        if self._backlinks is None:
            by_name: dict[str, int] = {}
            for info in self.data.notes.values():
                for target in info.links:
                    by_name[target] = by_name.get(target, 0) + 1
            self._backlinks = {}
            for path, info in self.data.notes.items():
                stem = _key(PurePosixPath(path).stem)
                count = by_name.get(stem, 0) + sum(by_name.get(n, 0) for n in info.names if n != stem)
                if count:
                    self._backlinks[path] = count
        return self._backlinks

    def score(self, terms: Sequence[str], prefix: str | None = None) -> dict[str, tuple[float, float]]:
        """{path: (score, coverage)} before boosts. Coverage is the idf-weighted share of the
        prompt's terms a note contains; the score is multiplied by its square."""
        postings = self.data.postings
        n_docs = max(1, len(self.data.notes))
        weighted = []
        for t in dict.fromkeys(terms):
            posting = postings.get(t)
            if not posting:
                continue
            df = len(posting)
            weighted.append((math.log(1 + (n_docs - df + 0.5) / (df + 0.5)), t))
        weighted.sort(reverse=True)
        weighted = weighted[:MAX_QUERY_TERMS]
        # Terms in a fifth of the vault or more say little and cost the most; drop them while
        # enough rarer terms remain to rank by.
        rare = [(w, t) for w, t in weighted if len(postings[t]) <= COMMON_SHARE * n_docs]
        if len(rare) >= 3:
            weighted = rare
        total = sum(w for w, _ in weighted) or 1.0
        # a term the vault does not contain still counts against coverage (it is part of the ask)
        missing = sum(1 for t in dict.fromkeys(terms) if t not in postings)
        total += missing * (max((w for w, _ in weighted), default=1.0) * 0.5)
        acc: dict[str, float] = {}
        cov: dict[str, float] = {}
        notes = self.data.notes
        for idf, t in weighted:
            for path, w in postings[t].items():
                if prefix and not path.startswith(prefix):
                    continue
                acc[path] = acc.get(path, 0.0) + idf * w
                cov[path] = cov.get(path, 0.0) + idf
        out = {}
        for path, s in acc.items():
            if notes[path].kind in UNRANKED_KINDS:
                continue
            c = cov[path] / total
            out[path] = (s * c * c, c)
        return out


# -- modes ----------------------------------------------------------------------------------------

_TRIVIAL = re.compile(
    r"^(?:ok(?:ay)?|k|yes|yep|yeah|no|nope|sure|thanks?(?: you)?|thx|ty|great|nice|cool|good|done|"
    r"continue|go on|go ahead|proceed|next|lgtm|sounds good|do it|please do|hi|hello|hey|"
    r"はい|いいえ|うん|ok です|了解|了解です|ありがとう|ありがとうございます|続けて|お願いします|どうぞ|次)"
    r"[\s.!?。！？、,]*$",
    re.IGNORECASE,
)
_GRAPH_EN = re.compile(
    r"\bhow (?:do|does|are|is)\b.{1,120}\b(?:relate|related|connect|connected|link|linked|fit together|interact)\b"
    r"|\b(?:relationship|relation|connection|connections|links?) (?:between|among)\b"
    r"|\bwhat (?:connects|links|ties)\b|\b(?:big picture|overview of|map of|landscape of)\b"
    r"|\bhow .{1,60} fits? (?:in|into|with)\b",
    re.IGNORECASE,
)
_GRAPH_JA = re.compile(r"の関係|関係性|との関連|関連性|つながり|繋がり|結びつき|全体像|俯瞰|相関|位置づけ|位置付け")
_PATH = re.compile(r"(?:[\w.\-]+/)*[\w.\-\u3040-\u30ff\u3400-\u9fff]+\.md\b|\b[\w\-]+/[\w\-]+(?:/[\w\-.]+)*", re.UNICODE)
_QUOTED = re.compile(r"`([^`\n]{2,80})`|\"([^\"\n]{2,80})\"|「([^」\n]{2,80})」|'([^'\n]{3,80})'")
_ERROR_CODE = re.compile(r"\b(?:[A-Z][A-Z0-9]*_[A-Z0-9_]+|[A-Z]{1,5}-?\d{2,6}|0x[0-9a-fA-F]{4,}|HTTP \d{3}|\d{3} error)\b")

# Terms of the question "how are they connected" itself, left out of graph-overview scoring.
_GRAPH_WORDS = frozenset(
    "relate relat relationship relation connect connection link between overview fit together interact tie "
    "big picture map landscape 関係 係性 関連 連性 つな なが がり 繋が 結び びつ つき 全体 体像 俯瞰 相関 位置".split())

EXEMPLARS = {
    GRAPH: ["how do these two things relate to each other", "what is the relationship between A and B",
            "give me an overview of how the pieces connect", "AとBの関係を教えて", "全体像とつながりを説明して"],
    LIGHT: ["fix the failing test in this file", "add a flag to the command", "refactor this function",
            "このバグを直して", "テストを追加して"],
}


@dataclass
class ModeDecision:
    mode: str
    confidence: str  # high | medium | low
    reason: str
    subjects: list[str] = field(default_factory=list)  # paths the prompt names
    identifiers: list[str] = field(default_factory=list)


def is_trivial(prompt: str) -> bool:
    """Acknowledgements and very short prompts get no block: nothing to look up."""
    text = prompt.strip()
    if len(text) < MIN_PROMPT_CHARS and not _CONTENT_RUN.search(text):
        return True
    if len(text) < 3:
        return True
    return bool(_TRIVIAL.match(text))


def _subjects(prompt: str, index: RecallIndex, relaxed: bool = False) -> tuple[list[str], list[str]]:
    """Notes the prompt names (title, alias, stem, path) and the identifiers it quotes.

    One-word names ("Deploy") are too common to mean a note in an ordinary prompt; ``relaxed``
    (a prompt asking how X and Y relate) accepts them when they name at most three notes.
    """
    found: list[str] = []
    notes = index.data.notes
    for m in _PATH.finditer(prompt):
        cand = m.group(0).strip("./")
        if cand in notes:
            found.append(cand)
        elif not cand.endswith(".md") and cand + ".md" in notes:
            found.append(cand + ".md")
        elif cand.endswith(".md"):
            found.extend(p for p in notes if p.endswith("/" + cand))
    key = " " + _key(re.sub(r"[^\w\s\-\u3040-\u30ff\u3400-\u9fff]", " ", prompt)) + " "
    cjk_key = key.replace(" ", "")
    names = index.names()
    heads = index.name_heads()
    candidates = {w for w in key.split() if w in heads}
    candidates |= {cjk_key[i : i + 2] for i in range(len(cjk_key) - 1) if cjk_key[i : i + 2] in heads}
    named = []
    for head in candidates:
        for name in heads[head]:
            if _CONTENT_RUN.search(name):
                hit = name.replace(" ", "") in cjk_key
            else:
                hit = f" {name} " in key
            if hit:
                named.append(name)
    if relaxed:
        named += [w for w in key.split() if len(w) >= 5 and w not in STOPWORDS and 0 < len(names.get(w, ())) <= 3]
    for name in sorted(set(named), key=lambda n: (-len(n), n)):  # the most specific name first
        found.extend(sorted(names[name]))
    idents = []
    for m in _QUOTED.finditer(prompt):
        q = next(g for g in m.groups() if g)
        if is_identifier(q.strip()) or len(q.split()) <= 4:
            idents.append(q.strip())
    idents += [m.group(0) for m in _ERROR_CODE.finditer(prompt)]
    return list(dict.fromkeys(found))[:10], list(dict.fromkeys(idents))


class _Prototypes:
    """Mean exemplar embeddings per mode (built once per embedder)."""

    def __init__(self, embedder: Any) -> None:
        import numpy as np

        self.embedder = embedder
        self.protos = {m: np.asarray(embedder.embed_queries(ex)).mean(axis=0) for m, ex in EXEMPLARS.items()}

    def nearest(self, prompt: str) -> tuple[str, float]:
        import numpy as np

        vec = np.asarray(self.embedder.embed_queries([prompt[:500]]))[0]
        sims = {m: float(vec @ p / (np.linalg.norm(p) or 1.0)) for m, p in self.protos.items()}
        best = max(sims, key=sims.get)
        other = min(sims.values())
        return best, sims[best] - other


def classify(prompt: str, index: RecallIndex, prototypes: _Prototypes | None = None) -> ModeDecision:
    """Pick the retrieval mode: rules first, the prompt's embedding only to break a tie."""
    if _GRAPH_EN.search(prompt) or _GRAPH_JA.search(prompt):
        subjects, idents = _subjects(prompt, index, relaxed=True)
        return ModeDecision(GRAPH, "high", "asks how things connect", subjects, idents)
    subjects, idents = _subjects(prompt, index)
    if subjects:
        return ModeDecision(TARGETED, "high", "names a note", subjects, idents)
    if idents:
        return ModeDecision(TARGETED, "medium", "quotes an identifier", subjects, idents)
    if prototypes is not None:
        try:
            best, margin = prototypes.nearest(prompt)
        except Exception:  # noqa: BLE001 - the embedding is a hint, never a requirement
            best, margin = LIGHT, 0.0
        if best == GRAPH and margin > 0.03:
            return ModeDecision(GRAPH, "medium", f"embedding near graph exemplars (+{margin:.3f})", subjects, idents)
    return ModeDecision(LIGHT, "medium", "ordinary turn", subjects, idents)


# -- recall ---------------------------------------------------------------------------------------

# A hybrid-search callable: (query, k, path_prefix) → [(path, exact)] best first.
HybridSearch = Callable[[str, int, str | None], list[tuple[str, bool]]]


def store_search(vault: Path, mode: str = "lexical") -> HybridSearch:
    """The retrieval issue's search (``search.search``) over the SQLite index, in-process.

    ``lexical`` by default: a cold hook process cannot afford to load the embedding model on the
    prompt's critical path; the warm server fuses with its full hybrid searcher instead.
    """
    state: dict[str, Any] = {}

    def run(query: str, k: int, prefix: str | None) -> list[tuple[str, bool]]:
        from ..index.lexical import Filters
        from ..index.store import Store
        from .search import search

        if "store" not in state:
            state["store"] = Store(vault)
        result = search(state["store"], query[:1000], k=k, filters=Filters(path_prefix=prefix), mode=mode)
        return [(h.path, h.exact) for h in result.hits]

    return run


@dataclass
class Recalled:
    path: str
    title: str
    description: str
    score: float
    coverage: float = 0.0
    pinned: bool = False


@dataclass
class RecallResult:
    prompt_chars: int
    mode_chosen: str | None
    mode: str | None
    confidence: str | None
    reason: str = ""
    candidates: int = 0
    notes: list[Recalled] = field(default_factory=list)
    block: Block | None = None
    skipped: str | None = None  # why no block: trivial, no-match, all-seen
    fallback: str | None = None  # why the final mode or path differs from the first choice
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.block.text if self.block else ""

    def telemetry(self) -> dict[str, Any]:
        return {
            "mode_chosen": self.mode_chosen, "mode": self.mode, "confidence": self.confidence,
            "reason": self.reason, "candidates": self.candidates,
            "injected": [e.path for e in self.block.included] if self.block else [],
            "tokens": self.block.tokens if self.block else 0, "skipped": self.skipped,
            "fallback": self.fallback, "timings_ms": self.timings_ms, "prompt_chars": self.prompt_chars,
        }


def rrf(rankings: dict[str, list[str]], k: int = 60, weights: dict[str, float] | None = None) -> dict[str, float]:
    scores: dict[str, float] = {}
    for name, ranked in rankings.items():
        w = (weights or {}).get(name, 1.0)
        for rank, item in enumerate(ranked, start=1):
            scores[item] = scores.get(item, 0.0) + w / (k + rank)
    return scores


class Recaller:
    """Recall for one vault; hold one per process (the warm server keeps it for every prompt)."""

    def __init__(self, vault: Path, *, hybrid: HybridSearch | None | bool = True, embedder: Any = None,
                 refresh_interval: float | None = 0.0) -> None:
        self.vault = Path(vault).resolve()
        self.index = RecallIndex(self.vault)
        self.index.load()
        self.hybrid: HybridSearch | None = store_search(self.vault) if hybrid is True else (hybrid or None)
        self.prototypes = _Prototypes(embedder) if embedder is not None else None
        self.refresh_interval = refresh_interval
        self._recent: tuple[float, dict[str, Usage]] = (0.0, {})
        self._refreshing = threading.Event()

    def refresh(self, deadline: float | None = None) -> dict[str, int]:
        return self.index.refresh(deadline=deadline)

    def _maybe_refresh(self, deadline: float | None) -> None:
        """A stat walk per prompt in a cold process; in a warm one only every ``refresh_interval``
        seconds (``None``: never on the prompt path, because a watcher feeds ``index.refresh(only=…)``)."""
        if not self.index.data.files or not self.index.last_refresh or self.refresh_interval == 0:
            self.index.refresh(deadline=deadline)
        elif self.refresh_interval is not None and not self._refreshing.is_set() and (
                time.monotonic() - self.index.last_refresh >= self.refresh_interval):
            # warm: answer from the current index and catch up in the background
            self._refreshing.set()

            def catch_up() -> None:
                try:
                    self.index.refresh()
                finally:
                    self._refreshing.clear()

            threading.Thread(target=catch_up, name="memory-hub-recall-refresh", daemon=True).start()

    def _recent_reads(self) -> dict[str, Usage]:
        """Every note's usage (reads, useful, last read) from the index's usage API, refreshed every 2 s."""
        at, data = self._recent
        if time.monotonic() - at > 2.0:
            try:
                data = snapshot(self.vault)
            except Exception:  # noqa: BLE001 - recall answers without its usage boost rather than not at all
                data = {}
            self._recent = (time.monotonic(), data)
        return data

    def hybrid_query(self, prompt: str) -> str:
        """What the hybrid search is asked: a short prompt as is; a long one by its rarest terms
        (FTS over every word of a 300-word prompt costs more than the rest of recall)."""
        if len(prompt) <= 200:
            return prompt
        postings = self.index.data.postings
        terms = [t for t in query_terms(prompt) if t in postings]
        terms.sort(key=lambda t: len(postings[t]))
        return " ".join(terms[:HYBRID_QUERY_TERMS]) or prompt[:200]

    def rank(self, prompt: str, decision: ModeDecision, prefix: str | None = None,
             limit: int = 30) -> list[Recalled]:
        """Recall's own ranking with boosts (no fusion)."""
        terms = query_terms(prompt)
        if decision.mode == GRAPH:  # "how do X and Y relate": the ask is X and Y, not "relate"
            terms = [t for t in terms if t not in _GRAPH_WORDS] or terms
        scored = self.index.score(terms, prefix)
        notes = self.index.data.notes
        recent = self._recent_reads()
        now = time.time()
        backlinks = self.index.backlinks() if decision.mode == GRAPH else {}
        out = []
        for path, (s, c) in scored.items():
            info = notes[path]
            used = recent.get(path, NO_USAGE)
            boost = 1.0 + 0.25 * math.log1p(used.useful) + 0.05 * math.log1p(used.reads)
            if info.raw_transcript:
                boost *= RAW_TRANSCRIPT_FACTOR
            read_at = used.last_read
            if read_at and now - read_at < 7 * 86400:
                boost *= 1.0 + 0.2 * (1 - (now - read_at) / (7 * 86400))
            if backlinks:
                boost *= 1.0 + 0.3 * math.log1p(backlinks.get(path, 0))
            out.append(Recalled(path, info.title, info.description, s * boost, c))
        out.sort(key=lambda r: (-r.score, r.path))
        return out[:limit]

    def recall(self, prompt: str, *, exclude: Iterable[str] = (), budget: int = DEFAULT_BUDGET,
               k: int | None = None, fuse: bool = True, prefix: str | None = None,
               deadline: float | None = None) -> RecallResult:
        """The notes worth showing for ``prompt`` and their block; ``exclude`` is what this session
        has already seen. Thread-safe (one prompt at a time per Recaller)."""
        with self.index._lock:
            return self._recall(prompt, exclude, budget, k, fuse, prefix, deadline)

    def _recall(self, prompt: str, exclude: Iterable[str], budget: int, k: int | None, fuse: bool,
                prefix: str | None, deadline: float | None) -> RecallResult:
        t0 = time.perf_counter()
        prompt = prompt if isinstance(prompt, str) else ""
        result = RecallResult(len(prompt), None, None, None)
        if is_trivial(prompt):
            result.skipped = "trivial"
            result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
            return result
        self._maybe_refresh(deadline)
        if not self.index.complete:
            result.fallback = "recall-index-partial"
        result.timings_ms["refresh"] = round((time.perf_counter() - t0) * 1000, 2)
        decision = classify(prompt, self.index, self.prototypes)
        result.mode_chosen, result.mode, result.confidence, result.reason = (
            decision.mode, decision.mode, decision.confidence, decision.reason)
        t1 = time.perf_counter()
        ranked = self.rank(prompt, decision, prefix)
        result.timings_ms["recall"] = round((time.perf_counter() - t1) * 1000, 2)
        notes = self.index.data.notes
        hybrid: list[tuple[str, bool]] = []
        if fuse and self.hybrid is not None:
            t2 = time.perf_counter()
            try:
                hybrid = [(p, ex) for p, ex in self.hybrid(self.hybrid_query(prompt), HYBRID_K, prefix)
                          if p in notes and notes[p].kind not in UNRANKED_KINDS]
            except Exception as exc:  # noqa: BLE001 - recall must answer even if the search index is absent
                result.fallback = result.fallback or f"hybrid-search-failed: {type(exc).__name__}"
            result.timings_ms["hybrid"] = round((time.perf_counter() - t2) * 1000, 2)
        by_path = {r.path: r for r in ranked}
        if hybrid:
            fused = rrf({"recall": [r.path for r in ranked], "hybrid": [p for p, _ in hybrid]})
            order = sorted(fused, key=lambda p: (-fused[p], p))
        else:
            order = [r.path for r in ranked]
            fused = {r.path: r.score for r in ranked}
        pins = [p for p in decision.subjects if p in notes and (not prefix or p.startswith(prefix))]
        exact = [p for p, ex in hybrid if ex]
        if decision.mode == TARGETED and not pins and not exact:
            result.mode = LIGHT
            result.fallback = result.fallback or "targeted-subject-not-found"
        pinned = list(dict.fromkeys(pins + exact))
        # The tail of either list is mostly noise: keep a recall candidate only when it scores a
        # fair share of the best one, and a search-only candidate only near the top of the search.
        floor = (ranked[0].score * RELATIVE_FLOOR) if ranked else 0.0
        hybrid_rank = {p: i for i, (p, _) in enumerate(hybrid, start=1)}
        order = pinned + [p for p in order if p not in set(pinned) and (
            (p in by_path and by_path[p].score >= floor) or hybrid_rank.get(p, 99) <= HYBRID_ONLY_TOP)]
        result.candidates = len(order)
        top = by_path.get(order[0]) if order else None
        if not pinned:
            coverage = top.coverage if top else 0.0
            result.confidence = "high" if coverage >= 0.6 else ("medium" if coverage >= 0.3 else "low")
        seen = set(exclude)
        limit = k or PER_MODE_K[result.mode or LIGHT]
        if result.confidence == "low" and not k:
            limit = min(limit, 3)
        chosen: list[Recalled] = []
        for p in order:
            if p in seen:
                continue
            info = notes.get(p)
            if info is None:
                continue
            r = by_path.get(p) or Recalled(p, info.title, info.description, 0.0)
            r.score = round(fused.get(p, r.score), 6)
            r.pinned = p in pinned
            chosen.append(r)
            if len(chosen) >= limit:
                break
        result.notes = chosen
        if not order:
            result.skipped = "no-match"
        elif not chosen:
            result.skipped = "all-seen"
        else:
            result.block = render(result.mode or LIGHT, [Entry(r.path, r.title, r.description) for r in chosen],
                                  budget=budget)
        result.timings_ms["total"] = round((time.perf_counter() - t0) * 1000, 2)
        return result


# -- the warm server ------------------------------------------------------------------------------

def _state_search(state: Any) -> HybridSearch:
    def run(query: str, k: int, prefix: str | None) -> list[tuple[str, bool]]:
        from ..index.lexical import Filters

        result = state.search(query[:1000], k=k, filters=Filters(path_prefix=prefix) if prefix else None)
        return [(h.path, bool(getattr(h, "exact", False))) for h in result.hits]

    return run


def recaller_for_state(state: Any) -> Recaller:
    """The server's long-lived Recaller (parked in ``state.extras``), fused with its searcher."""
    with _state_lock:
        recaller = state.extras.get("recaller")
        if recaller is None:
            # With a watcher, every sync it runs tells recall which files changed, so prompts never
            # pay for a stat walk; without one, a walk at most every few seconds.
            watched = getattr(state, "watcher", None) is not None
            recaller = Recaller(state.vault, hybrid=_state_search(state),
                                refresh_interval=None if watched else 5.0)
            if watched:
                from ..index.sync import on_change

                on_change(_listener(recaller))
            state.extras["recaller"] = recaller
    if recaller.prototypes is None and state.models_ready.is_set() and os.environ.get("MEMORY_HUB_RECALL_EMBED"):
        embedder = getattr(state.searcher, "embedder", None)
        if embedder is not None:
            try:
                recaller.prototypes = _Prototypes(embedder)
            except Exception:  # noqa: BLE001 - the embedding only breaks ties
                pass
    return recaller


_state_lock = threading.Lock()


def _listener(recaller: Recaller) -> Callable[[Any, Any], None]:
    def changed(store: Any, report: Any) -> None:
        if Path(store.vault).resolve() != recaller.vault:
            return
        paths = [*report.added, *report.updated, *report.deleted, *(p for pair in report.renamed for p in pair)]
        try:
            recaller.index.refresh(only=paths)
        except Exception:  # noqa: BLE001 - a failed update is caught by the next full refresh
            recaller.index.last_refresh = 0.0

    return changed


def recall_for_server(state: Any, prompt: str, budget_tokens: int = DEFAULT_BUDGET) -> dict[str, Any]:
    """The MCP ``recall`` tool: the block for ``prompt`` (no session de-duplication)."""
    result = recaller_for_state(state).recall(prompt, budget=budget_tokens)
    return {
        "block": result.text, "mode": result.mode, "confidence": result.confidence,
        "notes": len(result.block.included) if result.block else 0,
        "tokens": result.block.tokens if result.block else 0, "skipped": result.skipped,
    }
