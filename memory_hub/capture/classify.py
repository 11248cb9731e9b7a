"""Sorting a capture with small transparent rules: scope, action items, themes, a title.

No model is involved: the rules are short word lists a person can read and extend, and every
decision can be explained by the words that triggered it (``Classification.reasons``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..vault.markdown import plain_text

# Scope cues. A capture's scope is the one with the most cue hits; ties go work > project > personal,
# because work is the default a coding agent's captures mostly have.
SCOPE_CUES: dict[str, tuple[str, ...]] = {
    "personal": (
        "family", "kid", "kids", "doctor", "dentist", "birthday", "gym", "groceries", "grocery",
        "vacation", "holiday", "my wife", "my husband", "personal", "hobby", "rent", "mortgage",
        "家族", "子ども", "子供", "病院", "歯医者", "誕生日", "ジム", "買い物", "旅行", "趣味", "個人的", "家賃", "妻", "夫",
    ),
    "work": (
        "meeting", "customer", "client", "manager", "team", "incident", "on-call", "oncall", "deploy",
        "release", "production", "prod", "ticket", "jira", "sprint", "standup", "review", "pr ", "pull request",
        "会議", "打ち合わせ", "顧客", "お客様", "上司", "チーム", "障害", "本番", "リリース", "デプロイ", "チケット",
        "レビュー", "スプリント", "朝会", "サポート",
    ),
    "project": (
        "project", "side project", "prototype", "roadmap", "milestone", "repo", "library", "open source",
        "oss", "hackathon", "mvp", "feature idea",
        "プロジェクト", "試作", "ロードマップ", "マイルストーン", "個人開発", "ハッカソン", "アイデア",
    ),
}
_SCOPE_ORDER = ("work", "project", "personal")

_CHECKBOX = re.compile(r"^\s*[-*+]\s+\[( |x|X)\]\s+(.+)$")
_TODO = re.compile(r"(?i)^(?:\s*[-*+]\s+)?\s*(?:todo|to-do|action(?: item)?|fixme|next step)\s*[:：-]\s*(.+)$")
_EN_ACTION = re.compile(
    r"(?i)\b(?:i|we)\s+(?:need to|have to|must|should|will|'ll)\s+(.+)|^\s*(?:[-*+]\s+)?(?:need to|must|remember to|don't forget to)\s+(.+)"
)
_JA_ACTION = re.compile(
    r"(?:する|やる|作る|書く|送る|直す|調べる|聞く|決める|しておく|しなきゃ|しないと|しなければ|すること|やること|"
    r"対応|確認|修正|連絡|提出|予約|要対応|要確認|要検討)(?:こと|予定)?\s*[。!！]?\s*$"
)

_STOP_EN = frozenset(
    "a an the and or but if then so to of in on at by for with from about into over after before this that these those "
    "it its is are was were be been being have has had do does did will would can could should must may might i we you he "
    "she they me us them my our your their not no yes just also very really more most some any all each other than too "
    "here there what which who whom when where why how get got need needs todo up out one two new like make made use used "
    "using via per etc maybe still again now today tomorrow http https www com".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{2,}|[\u30a0-\u30ff\u4e00-\u9fff]{2,}")
_URL = re.compile(r"https?://[^\s<>()\[\]\"']+")


@dataclass
class Classification:
    scope: str
    actions: list[str] = field(default_factory=list)
    themes: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


def classify_scope(text: str) -> tuple[str, list[str]]:
    """The scope with the most cue hits (work when none), and the cues that decided it."""
    lower = text.lower()
    hits: dict[str, list[str]] = {}
    for scope, cues in SCOPE_CUES.items():
        for cue in cues:
            if re.search(r"(?<![a-z])" + re.escape(cue) + r"(?![a-z])", lower) if cue.isascii() else cue in text:
                hits.setdefault(scope, []).append(cue.strip())
    if not hits:
        return "work", ["no scope cue; default work"]
    best = max(_SCOPE_ORDER, key=lambda s: (len(hits.get(s, [])), -_SCOPE_ORDER.index(s)))
    return best, [f"{best}: {', '.join(hits[best])}"]


# Sentence ends inside a line: ". " before a capital, digit, quote or bracket (so "e.g. x" and "v1.2"
# stay whole), and Japanese full stops.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`*])|(?<=[。！？])")


def sentences(line: str) -> list[str]:
    """The sentences of one line of prose."""
    return [p.strip() for p in _SENTENCE_END.split(line) if p and p.strip()]


def extract_actions(text: str) -> list[str]:
    """Action items: open checkboxes, TODO lines, "need to …", 「〜する」「やる」 lines with a cue.

    An item is the actionable sentence, not the paragraph around it: "We looked at it. We need to
    rotate the keys. Also …" gives "We need to rotate the keys."; a checkbox is kept as written.
    """
    actions: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        m = _CHECKBOX.match(raw)
        if m:
            if m.group(1) == " ":
                actions.append(m.group(2).strip())
            continue
        m = _TODO.match(line)
        if m:
            actions.append(sentences(m.group(1))[0])
            continue
        if _EN_ACTION.search(line):
            found = [s.lstrip("-*+ ").strip() for s in sentences(line.lstrip("-*+ ")) if _EN_ACTION.search(s)]
            actions.extend(found or [line.lstrip("-*+ ").strip()])
            continue
        for sentence in re.split(r"(?<=[。！!？?])", line):
            sentence = sentence.strip().lstrip("-*+ ・").strip()
            if len(sentence) >= 4 and not sentence.isascii() and _JA_ACTION.search(sentence):
                actions.append(sentence)
    seen: set[str] = set()
    return [a for a in actions if not (a in seen or seen.add(a))]


def content_terms(text: str) -> list[str]:
    """Content words of a text (lower-cased English words, Katakana/Kanji runs), stop words removed."""
    text = _URL.sub(" ", text)
    out = []
    for w in _WORD.findall(text):
        lw = w.lower()
        if lw in _STOP_EN or lw.isdigit():
            continue
        out.append(lw)
    return out


def extract_themes(text: str, known_tags: Iterable[str] = (), limit: int = 5) -> list[str]:
    """Themes: existing vault tags the text mentions first, then its most frequent content terms (≥ 2 uses)."""
    lower = text.lower()
    themes: list[str] = []
    for tag in sorted({t.lower() for t in known_tags if t}, key=len, reverse=True):
        if len(tag) < 2 or tag in ("daily", "todo", "learning"):
            continue
        pattern = r"(?<![\w-])" + re.escape(tag) + r"(?![\w-])" if tag.isascii() else re.escape(tag)
        if re.search(pattern, lower):
            themes.append(tag)
        if len(themes) >= limit:
            return themes
    counts = Counter(content_terms(plain_text(text)))
    for term, n in counts.most_common():
        if n < 2 or len(themes) >= limit:
            break
        tag = re.sub(r"[^\w-]", "-", term).strip("-")
        if tag and tag not in themes:
            themes.append(tag)
    return themes


def make_title(text: str, max_len: int = 70) -> str:
    """A title from the first meaningful line: a heading, else the first sentence, trimmed at a word."""
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").strip()
        line = re.sub(r"^[-*+]\s+(\[[ xX]\]\s+)?", "", line)
        line = _URL.sub("", line).strip(" -:：")
        if not line:
            continue
        sentence = re.split(r"(?<=[.!?。！？])\s*", line, maxsplit=1)[0].strip()
        if len(sentence) > max_len:
            cut = sentence[:max_len]
            sentence = (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(",;:、") + "…"
        return sentence
    urls = _URL.findall(text)
    return f"Link: {urls[0]}"[:max_len] if urls else "Capture"


def find_urls(text: str) -> list[str]:
    seen: set[str] = set()
    out = []
    for url in _URL.findall(text):
        url = url.rstrip(".,;:!?、。）)")
        if url not in seen:
            seen.add(url)
            out.append(url)
    return out


def classify(text: str, known_tags: Iterable[str] = ()) -> Classification:
    scope, reasons = classify_scope(text)
    return Classification(scope=scope, actions=extract_actions(text), themes=extract_themes(text, known_tags),
                          reasons=reasons)
