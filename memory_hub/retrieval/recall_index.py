"""Recall's own index of the vault: cheap to query, persisted, updated by mtime + size per file.

Built by walking the vault directly (not from the SQLite index), saved under
``<vault>/.memory_hub/recall/`` as one file, so a warm restart reads that file and re-parses only
the notes that changed. Per note it keeps what recall needs on the prompt path: how a prompt or a
link may name the note (title, aliases, file stem), its outgoing links (backlinks for the
graph-overview mode) and its terms weighted by field (title > aliases > file name >
tags > description > body, body repetitions capped at 4). Scoring over it is ``recall_score.py``.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from ..config import index_dir
from ..index.terms import HAN, HANGUL, HIRAGANA, KATAKANA, STOPWORDS, is_identifier, normalize
from ..vault.notes import UNRANKED_KINDS, Note, parse_note
from ..vault.walk import FileStat, OutsideVault, UnreadableNote, read_note_text, safe_path, walk

INDEX_VERSION = 6  # 5: usage counters left the notes (and this index); 6: titles and templates as parse_note reads them now

# Field weights: a term in the title says the note is *about* it; in the body, only that it is mentioned.
W_TITLE, W_ALIAS, W_STEM, W_TAG, W_DESC, W_BODY = 10.0, 8.0, 6.0, 5.0, 3.0, 1.0
BODY_CAP = 4  # body repetitions beyond this add nothing
BODY_CHARS = 60_000
SAVE_EVERY = 60.0  # seconds between saves of recall's index for incremental (watcher) updates

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


@lru_cache(maxsize=1 << 17)
def _word_terms(compound: str) -> tuple[str, ...]:
    """The terms one ASCII word or compound gives (a pure function of it, so cached: a vault's words
    repeat, and building recall's index of every note spent most of its time here)."""
    out: list[str] = []
    if any(c in compound for c in ".-/:") and is_identifier(compound):
        out.append(compound)
    for w in _ASCII_WORD.findall(compound):
        if w in STOPWORDS or (len(w) < 2 and not w.isdigit()):
            continue
        out.append(_stem(w) if "_" not in w else w)
    return tuple(out)


def tokens(text: str, *, hiragana: bool = False) -> list[str]:
    """Terms of ``text`` as recall matches them (repeats kept): stemmed words, whole identifiers,
    CJK bigrams (single characters for one-character runs)."""
    text = normalize(text).lower()
    out: list[str] = []
    for compound in _WORD.findall(text):
        out.extend(_word_terms(compound))
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
    raw_transcript: bool = False  # a hook's saved transcript tail: uncurated, echoes past sessions


@dataclass
class _Data:
    version: int = INDEX_VERSION
    files: dict[str, tuple[int, int]] = field(default_factory=dict)
    notes: dict[str, NoteInfo] = field(default_factory=dict)
    postings: dict[str, dict[str, float]] = field(default_factory=dict)


def note_info(path: str, text: str) -> tuple[NoteInfo, dict[str, float]]:
    """Everything recall needs from one note (names, links) and its weighted terms."""
    return info_of_note(path, parse_note(path, text))


def info_of_note(path: str, note: Note) -> tuple[NoteInfo, dict[str, float]]:
    """``note_info`` of a note already parsed (by the sync: ``sync.NoteHook``, so a cold index
    reads and parses each file once for both indexes)."""
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
        raw_transcript=str(note.frontmatter.get("source", "")).endswith("-hook") and "transcript" in note.tags,
    ), weights


def _info_of(item: tuple[Path, str]) -> tuple[NoteInfo, dict[str, float]] | None:
    """``note_info`` of one file, read here (runs in ``worker_map``'s processes); None: unreadable."""
    vault, path = item
    try:
        return note_info(path, read_note_text(vault, path))
    except (UnreadableNote, OSError):
        return None


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

    def _put(self, path: str, found: tuple[NoteInfo, dict[str, float]]) -> None:
        """A note parsed in a worker (``info_of_note``), its terms interned (one object per term)."""
        info, weights = found
        weights = {sys.intern(t): w for t, w in weights.items()}
        info.terms = tuple(weights)
        self._add(path, info, weights)

    def take(self, stat: FileStat, found: tuple[NoteInfo, dict[str, float]]) -> None:
        """One note the sync parsed (``info_of_note`` in its worker), as ``refresh`` would add it."""
        with self._lock:
            self._remove(stat.path)
            self._put(stat.path, found)
            self.data.files[stat.path] = (stat.mtime_ns, stat.size)
            self._invalidate()
            self._unsaved = True

    def note_hook(self) -> tuple[Any, Any]:
        """A ``sync.NoteHook`` that fills this index from the notes a sync parses."""
        return info_of_note, self.take

    def refresh(self, deadline: float | None = None, only: Iterable[str] | None = None,
                walked: Mapping[str, tuple[int, int]] | None = None) -> dict[str, int]:
        """Stat the vault (or just ``only``) and re-parse what changed; save when anything did.

        With ``deadline`` (a ``time.monotonic()`` value) the work stops there and what was done is
        saved, so a large vault's first build spreads over several runs instead of never finishing.
        ``walked``: a whole walk already made (``SyncReport.walked``, {path: (mtime_ns, size)}),
        used instead of walking the vault again.
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
        elif walked is not None:
            stats = [FileStat(p, mtime_ns, size) for p, (mtime_ns, size) in walked.items()]
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
            due = [st for st in stats if st.is_note and known.get(st.path) != (st.mtime_ns, st.size)]
            if deadline is None and len(due) > 64:  # a first build: in worker processes (sync.PARALLEL_FROM on)
                from ..index.sync import worker_map  # not at the top: a cold hook process never needs it

                for st, found in zip(due, worker_map(_info_of, [(self.vault, st.path) for st in due]), strict=True):
                    self._remove(st.path)
                    if found is not None:
                        self._put(st.path, found)
                        changed += 1
                    known[st.path] = (st.mtime_ns, st.size)
                due = []
            for st in due:
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
