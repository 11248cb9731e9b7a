"""Turning text into the terms both lexical tables understand, for documents and queries alike.

SQLite 3.40's trigram tokenizer cannot match anything shorter than three characters, and Japanese
has no spaces. So text is cut into *runs* by script (Latin/digits, kanji, katakana, hiragana), and:

* every run of 3+ characters is a trigram phrase;
* CJK runs are also written into the word table as overlapping bigrams (認証エラー → 認証 証エ エラ ラー),
  plus the run's last character alone so a one-character query can match by prefix;
* Latin words go to the word table as they are (the porter tokenizer stems them).

User text is always data: every term is quoted as an FTS5 string, so quotes, ``*``, ``-``, ``:``,
``NEAR``, ``AND`` and parentheses in a query can never become FTS syntax.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

# Character classes of the scripts without spaces between words (shared with recall).
HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005\u3006\u3007"
KATAKANA = r"\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f"
HIRAGANA = r"\u3040-\u309f"
HANGUL = r"\uac00-\ud7af"
_CJK_CLASS = f"[{HAN}{KATAKANA}{HIRAGANA}{HANGUL}]"
_CJK_RUN = re.compile(f"{_CJK_CLASS}+")
_SCRIPT_RUN = re.compile(f"[{HAN}]+|[{KATAKANA}]+|[{HIRAGANA}]+|[{HANGUL}]+")
# A Latin/digit token; inner `_ - . : / # + @` are kept so identifiers stay whole.
# ' and ’ both join a word (Caroline's, Caroline’s: phones and word processors type the second)
_WORD = re.compile(r"[^\W_]+(?:[_\-.:/#+@'’][^\W_]+)*_*|_+[^\W_]+(?:[_\-.:/#+@][^\W_]+)*", re.UNICODE)

_POSSESSIVE_S = r"['’]s"  # an English possessive's ending
_POSSESSIVE = re.compile(_POSSESSIVE_S + "$", re.IGNORECASE)

STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
    into is it its of on or our so than that the their them then there these they this those to
    was we were what when where which while who whom why will with would you your about after
    also any been before being between both each few more most no nor not only other over same
    should some such too under until very
    me my mine myself us ours ourselves yours yourself yourselves he him his himself she her hers
    herself itself theirs themselves am doing having because against through during above below
    up down out off again further once here all own just now s t don shall may might must
    i'm i've i'd it's isn't aren't don't doesn't didn't can't won't""".split()
)
# Hiragana runs that are grammar, not content (particles, copulas, question endings).
_FUNCTION_HIRAGANA = frozenset(
    """の は が を に で と も へ や か な ね よ から まで より など ので のに ても でも には では とは
    への での について による における ですか ますか でしょうか ですが ます です でした ました
    した して する された される いる ある いた あった なる なった という といった""".split()
)


def normalize(text: str) -> str:
    """NFKC (full-width → half-width, compatibility forms) so 'ＡＰＩ' finds 'API'."""
    return unicodedata.normalize("NFKC", text)


def is_cjk(text: str) -> bool:
    return bool(_CJK_RUN.fullmatch(text))


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains any character of a script written without spaces."""
    return bool(_CJK_RUN.search(text))


def cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def words_text(text: str) -> str:
    """Document text for the word table: CJK runs become bigrams (+ last char), the rest as is."""
    text = normalize(text)

    def expand(m: re.Match[str]) -> str:
        run = m.group(0)
        grams = cjk_bigrams(run)
        if len(run) > 1:
            grams.append(run[-1])
        return " " + " ".join(grams) + " "

    return _CJK_RUN.sub(expand, text)


@dataclass
class QueryTerms:
    """What a query asks for, per lexical table."""

    trigram: list[str] = field(default_factory=list)  # phrases of 3+ characters
    words: list[str] = field(default_factory=list)  # word-table terms (words, CJK bigrams)
    prefixes: list[str] = field(default_factory=list)  # single CJK characters, matched by prefix
    identifiers: list[str] = field(default_factory=list)  # exact identifiers that must rank first
    quoted: list[str] = field(default_factory=list)  # "quoted" / `code` strings: pinned whatever the query's length
    all_terms: list[str] = field(default_factory=list)  # distinct surface terms, for coverage

    @property
    def empty(self) -> bool:
        return not (self.trigram or self.words or self.prefixes)


_IDENT_SHAPE = re.compile(
    r"^(?=.*[A-Za-z])(?:"
    r".*_.*|"  # snake_case / SCREAMING_CASE
    r".*[A-Za-z].*\d.*|.*\d.*[A-Za-z].*|"  # letters with digits (S3, DEC-0054, e5)
    r"[A-Za-z0-9]+(?:[-.:/][A-Za-z0-9]+)+|"  # dotted / hyphenated / path-like
    r"[a-z]{2,}[A-Z][a-z].*"  # camelCase code names (getUser, useState)
    r")$"
)
_VERSION = re.compile(r"^\d+(?:\.\d+){1,3}$")
# A file or a path: rooted (/etc, ~/x, ./x), three or more segments, or a name with an extension
# (vault-conventions.md, runbooks/db-failover.md, app.py). Not "and/or" or "mg/kg": prose.
_PATH = re.compile(r"^(?:~|\.{1,2})?/[\w.-]+|^[\w.-]+(?:/[\w.-]+){2,}$"
                   r"|^(?:[\w.-]+/)*[\w-]{2,}\.[A-Za-z][A-Za-z0-9]{1,4}$")
_NUMBER_CODE = re.compile(r"^\d{6,}$")  # a timestamp, an order or ticket number: never a quantity in prose
_DOTTED = re.compile(r"^[A-Za-z0-9]{2,}(?:\.[A-Za-z0-9]+)+$")  # os.path, Node.js, obsidian.md

# A mark a word never has: an underscore, a digit, a code-style camelCase hump, or an upper-case
# part joined by -/./:/ (API-KEY). Capitals alone are not one: iPhone, macOS, GitHub, YouTube and
# JavaScript are names people type in prose, and pinning the notes that contain them put three
# unrelated notes above the Obsidian Sync note for "sync my vault between iPhone and desktop".
_IDENT_MARK = re.compile(r"_|\d|^[a-z]{2,}[A-Z][a-z]|[A-Z]{2,}[-.:/]|[-.:/][A-Z]{2,}")


def is_identifier(token: str) -> bool:
    """Tokens a person means literally: error codes, snake_case, versions, ticket ids, paths.

    Plain hyphenated words (``long-term``, ``blue-green``) are prose, not identifiers: pinning every
    note that contains them cost SciFact 0.01 nDCG. An identifier needs a mark a word never has
    (``_IDENT_MARK``), or the shape of a file, a path or a dotted name.
    """
    if len(token) < 3 and not re.search(r"\d", token):
        return False
    if _NUMBER_CODE.match(token):
        return True
    if _VERSION.match(token) or _PATH.match(token) or _DOTTED.match(token):
        return bool(re.search(r"[A-Za-z]", token)) or bool(_VERSION.match(token))
    return bool(_IDENT_SHAPE.match(token) and _IDENT_MARK.search(token))


def is_strong_identifier(token: str) -> bool:
    """Identifiers no prose word looks like: snake_case, versions, camelCase, 3+ digit runs, paths."""
    return bool("_" in token.strip("_") or _VERSION.match(token) or re.match(r"^[a-z]{2,}[A-Z][a-z]", token)
                or re.search(r"\d{3,}", token) or _PATH.match(token))


# Text a person quotes is meant literally: "exact phrase", “typographic”, `code`.
_QUOTED = re.compile(r'"([^"\n]{2,100})"|“([^”\n]{2,100})”|`([^`\n]{1,100})`')


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.lower()
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


# Interrogatives are the question, not its subject: 何 opening a kanji run (何, 何年, 何川流域 →
# 川流域) and 誰 anywhere. Left in, 何 becomes a prefix term or glues onto the next kanji as a bigram
# (何川) that no paragraph contains. On JSQuAD dev this took the word channel's nDCG@10 from
# 0.945 to 0.948. 何 inside a word (幾何, geometry) is kept.
_INTERROGATIVE = re.compile(r"(?<![\u3400-\u4dbf\u4e00-\u9fff])何|誰")


def analyze_query(query: str) -> QueryTerms:
    """Split a user query into the terms each lexical channel will search for."""
    text = _INTERROGATIVE.sub(" ", normalize(query))
    if not text.strip():
        text = normalize(query)
    terms = QueryTerms()
    for m in _QUOTED.finditer(text):
        quoted = next(g for g in m.groups() if g is not None).strip()
        if quoted and re.search(r"\w", quoted):
            terms.quoted.append(quoted)
    latin = _CJK_RUN.sub(" ", text)
    tokens = [t.strip("'.:/#+@-") for t in _WORD.findall(latin)]
    tokens = [t for t in tokens if t]
    # Stop-words never score: a query of nothing else ("what is it") has no lexical terms at all,
    # rather than ranking every title with "it" in it.
    content = [t for t in tokens if t.lower() not in STOPWORDS and _POSSESSIVE.sub("", t).lower() not in STOPWORDS]
    for tok in content:
        terms.all_terms.append(tok)
        if is_identifier(tok):
            terms.identifiers.append(tok)
        # a possessive searches as its word: "Caroline" matches Caroline's and Caroline’s alike, and
        # the word table's lone "s" is in nearly every English note (it would only narrow AND)
        bare = _POSSESSIVE.sub("", tok) or tok
        if len(bare) >= 3:
            terms.trigram.append(bare)
        # the word table splits on punctuation other than '_'; give it the parts
        for part in re.split(r"[^\w]+|_(?=\W)", bare):
            if part:
                terms.words.append(part.lower())
    runs = [m.group(0) for m in _SCRIPT_RUN.finditer(text)]
    content_runs = [r for r in runs if r not in _FUNCTION_HIRAGANA and not (len(r) == 1 and re.match(f"[{HIRAGANA}]", r))]
    if not content_runs and runs:
        content_runs = runs
    for run in content_runs:
        hiragana_only = bool(re.fullmatch(f"[{HIRAGANA}]+", run))
        terms.all_terms.append(run)
        if len(run) >= 3 and not hiragana_only:
            terms.trigram.append(run)
        if len(run) == 1:
            terms.prefixes.append(run)
        elif not hiragana_only or len(content_runs) == 1:
            terms.words.extend(cjk_bigrams(run))
    # kanji+katakana compounds between particles (認証エラー) are phrases worth matching whole
    for m in _CJK_RUN.finditer(text):
        for piece in re.split(f"[{HIRAGANA}]+", m.group(0)):
            if len(piece) >= 3 and len(_SCRIPT_RUN.findall(piece)) > 1:
                terms.trigram.append(piece)
    terms.trigram = _dedupe(terms.trigram)
    terms.words = _dedupe(terms.words)
    terms.prefixes = _dedupe(terms.prefixes)
    terms.identifiers = _dedupe(terms.identifiers)
    terms.quoted = _dedupe(terms.quoted)
    terms.all_terms = _dedupe(terms.all_terms)
    return terms


def bare_terms(terms: Sequence[str]) -> list[str]:
    """Surface terms without an English possessive (``Caroline's`` → ``Caroline``), deduplicated."""
    return list(dict.fromkeys(_POSSESSIVE.sub("", t) for t in terms))


def without_terms(query: str, drop: Sequence[str]) -> str:
    """``query`` with every occurrence of the ``drop`` terms taken out (an English possessive
    with it: ``Caroline's``), for the embedder. A query that would be left with no words is
    returned as it was."""
    text = normalize(query)
    for term in drop:
        if has_cjk(term):
            text = text.replace(term, " ")
        else:
            pattern = rf"(?<!\w){re.escape(term)}(?:{_POSSESSIVE_S})?(?!\w)"
            text = re.sub(pattern, " ", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s+([?!.,;:])", r"\1", text)
    return text if re.search(r"\w", text) else query


def quote(term: str) -> str:
    """An FTS5 string literal: the term can never be read as syntax."""
    return '"' + term.replace('"', '""') + '"'


def word_phrase(term: str) -> str:
    """``term`` as one FTS5 phrase over the word table: lower-cased words, or a CJK run's bigrams
    (they match inside longer runs). Empty for a lone CJK character, which says too little."""
    term = normalize(term).strip().lower()
    if has_cjk(term):
        grams = [g for run in re.findall(r"\S+", term) if len(run) > 1 for g in cjk_bigrams(run)]
        return quote(" ".join(grams)) if grams else ""
    return quote(term) if term else ""


def match_expression(terms: list[str], op: str, prefixes: list[str] = ()) -> str:
    """``"a" AND "b"`` (or OR), with single characters as prefix queries ``"x"*``."""
    parts = [quote(t) for t in terms] + [quote(p) + "*" for p in prefixes]
    return f" {op} ".join(parts)
