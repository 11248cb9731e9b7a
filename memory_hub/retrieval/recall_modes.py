"""Recall's modes: what kind of prompt this is, decided by rules in microseconds.

A prompt is ``light`` (an ordinary turn), ``targeted`` (it names its subject: a note title or
alias, a vault path, a quoted identifier, an error code) or ``graph-overview`` (it asks how things
connect: "how do X and Y relate", 「〜の関係」). Trivial prompts ("ok", "続けて") get no block.
A warm server may add the prompt's embedding against a few exemplars of each mode, only to break
a tie; notes are never scored with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..index.terms import STOPWORDS, is_identifier
from .recall_index import _CONTENT_RUN, RecallIndex, _key

LIGHT, TARGETED, GRAPH = "light", "targeted", "graph-overview"
MODES = (LIGHT, TARGETED, GRAPH)
MIN_PROMPT_CHARS = 8

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
