"""The lexical index: two FTS5 tables written per note, and the queries that rank them.

* ``fts_trigram`` — trigram BM25 for terms of three or more characters in any script.
* ``fts_words`` — word BM25 (porter-stemmed English, CJK bigrams) for everything trigram cannot
  match on SQLite 3.40: one- and two-character terms such as ``S3``, ``Go``, ``認証``, ``手順``.

Field weights for ``bm25()``, in column order (title, aliases, tags, description, body):
title 10 and body 1 make a note *about* a topic beat one that mentions it in paragraph forty;
tags 5 are curated topic labels. Aliases get 8: they are alternative titles, so nearly as strong
as the title, but a little below it because they are often abbreviations that occur elsewhere.
The description gets 3: one hand-written summary sentence is denser evidence than body text, but
it is not the note's name.

The two tables do not hold the same body. ``fts_trigram`` keeps every character (snippets and exact
identifiers read it, so a URL or a comment stays findable as a substring); ``fts_words``, the main
ranker, indexes what a reader of the rendered note reads (``markdown.reader_text``: no link
addresses, image badges, HTML tags or ``%%comments%%``; a bare URL keeps its host). On a community
vault such as obsidian-hub those are most of a plugin note's words — four badge URLs, the template's
comments, a footer of links to the note's own path — so they decided BM25's length normalisation
and matched the query's words in addresses (natural questions on obsidian-hub, hybrid+graph:
hit@1 0.67 → 0.79, MRR 0.73 → 0.83; all three vaults MRR 0.77 → 0.79).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final

from ..vault.markdown import reader_text
from ..vault.notes import Note
from . import cache
from .terms import QueryTerms, has_cjk, match_expression, normalize, quote, word_phrase, words_text

WEIGHTS = (10.0, 8.0, 5.0, 3.0, 1.0)
_BM25_TRIGRAM = "bm25(fts_trigram, {})".format(", ".join(str(w) for w in WEIGHTS))
_BM25_WORDS = "bm25(fts_words, {})".format(", ".join(str(w) for w in WEIGHTS))


def _columns(note: Note) -> tuple[str, str, str, str, str]:
    return (note.title, " ; ".join(note.aliases), " ; ".join(note.tags), note.description, note.body)


Rows = tuple[tuple[str, ...], tuple[str, ...]]


def note_rows(note: Note) -> Rows:
    """What ``write_note`` inserts (trigram columns, word columns): pure, so a big sync computes it
    in the worker processes that parse, and the writer only inserts."""
    cols = _columns(note)
    return cols, (*(words_text(c) for c in cols[:4]), words_text(reader_text(note.body)))


def write_note(conn: sqlite3.Connection, note_id: int, note: Note, rows: Rows | None = None) -> None:
    """(Re)write a note's rows in both lexical tables. Unranked kinds get no rows."""
    delete_note(conn, note_id)
    if not note.ranked:
        return
    cols, words = rows if rows is not None else note_rows(note)
    conn.execute(
        "INSERT INTO fts_trigram(rowid, title, aliases, tags, description, body) VALUES (?, ?, ?, ?, ?, ?)",
        (note_id, *cols),
    )
    conn.execute(
        "INSERT INTO fts_words(rowid, title, aliases, tags, description, body) VALUES (?, ?, ?, ?, ?, ?)",
        (note_id, *words),
    )


def delete_note(conn: sqlite3.Connection, note_id: int) -> None:
    conn.execute("DELETE FROM fts_trigram WHERE rowid = ?", (note_id,))
    conn.execute("DELETE FROM fts_words WHERE rowid = ?", (note_id,))
    conn.execute("DELETE FROM fts_pending WHERE rowid = ?", (note_id,))


# -- a bulk sync's rows, written once ---------------------------------------------------------------
#
# A note's description is chosen after a sync, from every note's leads (index/describe.py), and
# FTS5 cannot update one column: changing it deletes and re-inserts the whole row, body included.
# On the generated 100k vault 38% of the notes open with a shared passage, so a cold index wrote
# their rows twice. A bulk sync stages each note's rows in ``fts_pending`` (a plain table,
# committed with the note, so a stopped sync leaves them for the next one) and moves them into both
# FTS tables once the descriptions are chosen, with the description the notes table then holds.

def stage_note(conn: sqlite3.Connection, note_id: int, note: Note, rows: Rows | None = None) -> None:
    """``write_note`` for a bulk sync's *new* notes (``note_id`` has no rows yet: a deleted note's
    rows went with it, ``delete_note``): the rows wait in ``fts_pending`` for ``flush_pending``."""
    if not note.ranked:
        return
    cols, words = rows if rows is not None else note_rows(note)
    conn.execute("INSERT INTO fts_pending VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (note_id, *cols, *words))


def has_pending(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM fts_pending LIMIT 1").fetchone() is not None


_FLUSH = """INSERT INTO {table}(rowid, title, aliases, tags, description, body)
SELECT p.rowid, p.{c}title, p.{c}aliases, p.{c}tags, {description}, p.{c}body
  FROM fts_pending p JOIN notes n ON n.id = p.rowid WHERE p.rowid <= ? ORDER BY p.rowid"""


def flush_pending(conn: sqlite3.Connection, rows: int = 5000) -> int:
    """Move up to ``rows`` staged rows (lowest ids first) into both FTS tables, each with its note's
    current description; returns how many were moved. Call inside a write transaction, after the
    descriptions are chosen."""
    last = conn.execute("SELECT max(rowid), count(*) FROM (SELECT rowid FROM fts_pending ORDER BY rowid LIMIT ?)",
                        (rows,)).fetchone()
    if not last or last[0] is None:
        return 0
    conn.create_function("mh_words_text", 1, words_text, deterministic=True)
    conn.execute(_FLUSH.format(table="fts_trigram", c="t_", description="n.description"), (last[0],))
    # the words form of a description that changed since it was staged is made again
    words_description = "CASE WHEN n.description = p.t_description THEN p.w_description" \
                        " ELSE mh_words_text(n.description) END"
    conn.execute(_FLUSH.format(table="fts_words", c="w_", description=words_description), (last[0],))
    conn.execute("DELETE FROM fts_pending WHERE rowid <= ?", (last[0],))
    return int(last[1])


@dataclass(frozen=True)
class Filters:
    """Restrictions on which notes may be returned (all optional)."""

    kinds: Sequence[str] | None = None
    tags: Sequence[str] | None = None
    path_prefix: str | None = None
    since: str | None = None  # ISO date; compares with updated, else created, else file mtime
    note_ids: Sequence[int] | None = None

    def sql(self, alias: str = "n") -> tuple[str, list[object]]:
        """A WHERE fragment over the notes table (``alias``) and its parameters."""
        clauses: list[str] = []
        params: list[object] = []
        if self.kinds:
            clauses.append(f"{alias}.kind IN ({','.join('?' * len(self.kinds))})")
            params.extend(k.lower() for k in self.kinds)
        for tag in self.tags or ():
            clauses.append(
                f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE lower(json_each.value) = ?)"
            )
            params.append(tag.lower().lstrip("#"))
        if self.path_prefix:
            escaped = self.path_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            clauses.append(f"{alias}.path LIKE ? ESCAPE '\\'")
            params.append(escaped.lstrip("/") + "%")
        if self.since:
            clauses.append(
                f"coalesce(json_extract({alias}.dates, '$.updated'), json_extract({alias}.dates, '$.created'),"
                f" strftime('%Y-%m-%d', {alias}.mtime_ns / 1000000000, 'unixepoch')) >= ?"
            )
            params.append(self.since)
        if self.note_ids is not None:
            clauses.append(f"{alias}.id IN (SELECT value FROM json_each(?))")
            params.append(json.dumps(list(self.note_ids)))
        return (" AND ".join(clauses) or "1"), params


NO_FILTERS = Filters()


IdSpan = tuple[int, int]  # (lowest, highest) note id, both inclusive: ``rowid BETWEEN ? AND ?``
NO_IDS: Final[IdSpan] = (1, 0)  # empty (lowest above highest): no note in that folder
ALL_IDS: Final[IdSpan] = (-2**63, 2**63 - 1)  # SQLite's whole rowid range: nothing narrowed


def id_span(conn: sqlite3.Connection, path_prefix: str) -> IdSpan:
    """(lowest, highest) id of the notes under ``path_prefix``, from the NOCASE path index;
    ``NO_IDS`` when there are none.

    A filtered FTS5 query is driven by the posting lists, so a folder filter used to test every
    note holding a common word against the notes table (26k rows for "notes" at 30k notes, for a
    folder of 245). FTS5 narrows a posting list to a rowid range itself, and a folder's notes are
    mostly one run of ids (a sync writes a folder's new notes together), so the range goes into the
    MATCH query beside the filter: the rows and scores are the same (bm25's statistics are the
    whole table's either way), only the rows outside the range are never read."""
    seen = cache.pinned(conn)  # one search asks it per channel: within its one_look, once
    slot = "id_span:" + path_prefix
    if seen is not None and slot in seen:
        return seen[slot]  # type: ignore[no-any-return]
    where, params = Filters(path_prefix=path_prefix).sql("n")
    lo, hi = conn.execute(f"SELECT min(n.id), max(n.id) FROM notes n WHERE {where}", params).fetchone()
    span = NO_IDS if lo is None else (int(lo), int(hi))
    if seen is not None:
        seen[slot] = span
    return span


def _run(conn: sqlite3.Connection, table: str, bm25: str, expr: str, filters: Filters,
         limit: int) -> list[tuple[int, float]]:
    where, params = filters.sql("n")
    span: IdSpan | None = None  # a folder's ids, when the filters name a folder
    if where == "1":  # no filters: no join, a common term matches thousands of rows
        sql = f"SELECT rowid AS id, {bm25} AS score FROM {table} WHERE {table} MATCH ? ORDER BY score LIMIT ?"
    else:
        if filters.path_prefix:
            span = id_span(conn, filters.path_prefix)
            if span == NO_IDS:  # no note in that folder
                return []
        sql = (
            f"SELECT f.rowid AS id, {bm25} AS score FROM {table} f JOIN notes n ON n.id = f.rowid "
            f"WHERE {table} MATCH ? {'AND f.rowid BETWEEN ? AND ? ' if span is not None else ''}AND {where} "
            "ORDER BY score LIMIT ?"
        )
    try:
        rows = conn.execute(sql, (expr, *(span or ()), *params, limit)).fetchall()
    except sqlite3.OperationalError as exc:  # should not happen: every term is quoted
        raise ValueError(f"lexical query failed for {expr!r}: {exc}") from exc
    return [(int(r[0]), -float(r[1])) for r in rows]


# -- the OR ranking without scoring every note that holds a common word ---------------------------
#
# An OR over prose ("combine two notes and keep the links") matches nearly every note through its
# commonest words, and FTS5 computes bm25() for every matching row: on obsidian-hub that is ~6,500
# rows for 100 wanted, and the cost grows with the vault (a third of a warm hybrid query at 30k).
# A word's share of any row's score is below (k1 + 1) × its IDF (bm25's saturation: f (k1+1) /
# (f + k1 (1 - b + b·len/avg)) < k1 + 1), and FTS5 floors a word in half the rows or more at IDF
# 1e-6. So with the words sorted by that bound, the commonest few ("notes", "links") can be left
# out of the row set (max-score pruning): the rows holding one of the others are scored by the
# full OR (same phrases, so the same bm25 values), and when the limit-th best of them scores above
# the sum of the left-out words' bounds, no row holding only left-out words can reach the list, and
# the answer is the full query's, row for row (ties keep FTS5's rowid order in both). When that
# check fails the full query runs.
_BM25_K1 = 1.2  # FTS5's bm25 constants (fts5_aux.c)
PRUNE_MARGIN = 1e-9  # relative slack on the bound check, for the last bits of float rounding


def _phrase_rows(conn: sqlite3.Connection, table: str, phrase: str, db: str) -> int:
    """Rows of ``table`` holding ``phrase`` (an FTS5 phrase, as in the query), cached per index stamp."""
    sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH ?"
    return _cached_count(conn, f"\0rows:{table}:{phrase}", sql, (phrase,), db)


def _table_rows(conn: sqlite3.Connection, table: str, db: str) -> int | None:
    """Rows of an FTS5 table (its docsize table's count: bm25's N), cached; None without that table."""
    try:
        return _cached_count(conn, f"\0rows:{table}", f"SELECT count(*) FROM {table}_docsize", (), db)
    except sqlite3.OperationalError:
        return None


def _run_or(conn: sqlite3.Connection, table: str, bm25: str, terms: list[str], prefixes: list[str],
            filters: Filters, limit: int, floor: float | None = None) -> list[tuple[int, float]]:
    """``_run`` of the OR of ``terms`` and ``prefixes``: the same rows and scores, with the rows that
    hold only the commonest words left unscored when that provably cannot change the answer.
    ``floor``: a score the answer's limit-th row is known to reach (the AND query's limit-th)."""
    expr = match_expression(terms, "OR", prefixes)
    phrases = [quote(t) for t in terms] + [quote(p) + "*" for p in prefixes]
    if len(phrases) < 2 or filters != NO_FILTERS:
        return _run(conn, table, bm25, expr, filters, limit)
    db = _generation(conn)
    total = _table_rows(conn, table, db)
    if total is None:
        return _run(conn, table, bm25, expr, filters, limit)
    bound: dict[str, float] = {}
    for phrase in phrases:  # a phrase twice in the query counts twice in bm25
        n = _phrase_rows(conn, table, phrase, db)
        idf = max(math.log((total - n + 0.5) / (n + 0.5)), 1e-6)
        bound[phrase] = bound.get(phrase, 0.0) + (_BM25_K1 + 1.0) * idf
    ordered = sorted(bound, key=lambda p: (bound[p], p))
    sql = (f"SELECT rowid AS id, {bm25} AS score FROM {table} WHERE {table} MATCH ? "
           f"AND +rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?) ORDER BY score LIMIT ?")
    if floor is not None:  # every row of the AND holds every phrase and scores at least floor
        reaching = _reaching(ordered, bound, floor)
        if reaching is None or reaching == " OR ".join(ordered):
            return _run(conn, table, bm25, expr, filters, limit)
        return [(int(r[0]), -float(r[1])) for r in conn.execute(sql, (expr, reaching, limit)).fetchall()]
    ceilings = [sum(bound[p] for p in ordered[:k]) for k in range(len(ordered))]
    left_out = 0  # the longest run of commonest phrases whose rarer rest still holds ``limit`` rows
    for start in range(len(ordered) - 1, 0, -1):  # (from the rarest end, each count stops at limit)
        if _count_rows(conn, table, " OR ".join(ordered[start:]), limit, db) >= limit:
            left_out = start
            break
    if left_out > 0:
        rest = " OR ".join(ordered[left_out:])
        # A floor first, cheaply: the rarer rest's own BM25 of its best rows (its phrases' shares of
        # a row's score are the full OR's, and the left-out phrases' shares are >= 0, so the full
        # answer's limit-th row scores at least this). Only the rest's posting lists are read; the
        # full OR below reads every phrase's, the commonest word's included, whatever it scores.
        partial = conn.execute(f"SELECT {bm25} AS score FROM {table} WHERE {table} MATCH ? ORDER BY score LIMIT ?",
                               (rest, limit)).fetchall()
        if len(partial) >= limit:
            floor = -float(partial[limit - 1][0])
            # rows holding only left-out phrases cannot reach floor: the rest's rows are enough;
            # else also the rows holding a combination of left-out phrases whose bounds add up to it
            reaching = rest if _below(ceilings[left_out], floor) else _reaching(ordered, bound, floor)
            if reaching is not None and reaching != " OR ".join(ordered):
                return [(int(r[0]), -float(r[1])) for r in conn.execute(sql, (expr, reaching, limit)).fetchall()]
    return _run(conn, table, bm25, expr, filters, limit)


REACHING_MAX_WEAK = 6  # phrases below the floor alone combined into AND groups (at most C(6, 3) = 20 groups)


def _reaching(ordered: list[str], bound: dict[str, float], floor: float) -> str | None:
    """An FTS5 expression matching every row whose OR score could reach ``floor``: each phrase whose
    bound alone could, and, of the weaker phrases, the AND of each smallest combination whose bounds
    add up to ``floor`` (a row's score is at most the sum of its phrases' bounds, so a row holding
    no such combination scores below floor). None when there are too many weak phrases to combine.

    With floor a score the answer's limit-th row is known to reach, the full OR's best ``limit`` rows
    all match this expression, with the same scores (the outer MATCH is the full OR): scoring only
    these rows gives the full answer, row for row."""
    strong = [p for p in ordered if not _below(bound[p], floor)]
    weak = [p for p in ordered if _below(bound[p], floor)]
    if len(weak) > REACHING_MAX_WEAK:
        return None
    groups: list[tuple[str, ...]] = []
    for size in range(2, len(weak) + 1):
        for group in combinations(weak, size):
            if any(set(g) <= set(group) for g in groups):
                continue  # a smaller group already matches every row this one would
            if not _below(sum(bound[p] for p in group), floor):
                groups.append(group)
    parts = strong + ["(" + " AND ".join(g) + ")" for g in groups]
    return " OR ".join(parts) if parts else None


def _below(ceiling: float, floor: float) -> bool:
    """Whether a score bounded by ``ceiling`` is surely below ``floor`` (with slack for rounding)."""
    return floor > ceiling * (1 + PRUNE_MARGIN) + 1e-12


def _count_rows(conn: sqlite3.Connection, table: str, expr: str, cap: int, db: str | None = None) -> int:
    """Rows matching ``expr``, counted up to ``cap``, cached per index stamp like the other counts
    (``db``: ``_generation(conn)``)."""
    sql = f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    return _cached_count(conn, f"\0or:{table}:{cap}:{expr}", sql, (expr, cap), db)


def _and_then_or(conn: sqlite3.Connection, table: str, bm25: str, terms: list[str], prefixes: list[str],
                 filters: Filters, limit: int, want_raw: bool = False
                 ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """AND of all terms first; notes matching only some terms follow (OR), so nothing is lost.

    Returns (that ranking, the plain OR ranking with its raw BM25 scores). The first is what RRF
    fuses; the second keeps the score *gaps* the first flattens, for score calibration. The OR
    query runs only when the AND hits do not fill ``limit`` or ``want_raw`` asks for it; otherwise
    the second list is empty.
    """
    if not terms and not prefixes:
        return [], []
    hits = _run(conn, table, bm25, match_expression(terms, "AND", prefixes), filters, limit)
    if len(terms) + len(prefixes) == 1:
        return hits, hits
    if len(hits) >= limit and not want_raw:
        return hits, []
    # the AND hits hold every term, so the OR query scores them the same: its limit-th is no lower
    floor = hits[limit - 1][1] if len(hits) >= limit else None
    raw = _run_or(conn, table, bm25, terms, prefixes, filters, limit, floor)
    if len(hits) < limit:
        seen = {i for i, _ in hits}
        floor = min((s for _, s in hits), default=0.0)
        for note_id, score in raw:
            if note_id not in seen:
                # OR-only hits stay below every AND hit
                hits.append((note_id, min(score, floor - 1e-6) if hits else score))
                seen.add(note_id)
                if len(hits) >= limit:
                    break
    return hits, raw


def search_trigram(conn: sqlite3.Connection, terms: QueryTerms, filters: Filters = NO_FILTERS,
                   limit: int = 100) -> list[tuple[int, float]]:
    """Trigram BM25 over terms of 3+ characters, all of them required: (note id, score) best first.

    No OR fallback here: the word channel already has one, and an OR over common trigrams
    (``https``, ``obsidian``) ranks thousands of notes for nothing — dropping it took obsidian-hub
    query p95 down by a third and *raised* SciFact nDCG@10 (0.689 → 0.700) and JSQuAD (0.934 → 0.938).
    """
    wanted = [t for t in terms.trigram if not _common_word(conn, t)]
    if not wanted:
        return []
    return _run(conn, "fts_trigram", _BM25_TRIGRAM, match_expression(wanted, "AND"), filters, limit)


COMMON_WORD_NOTES = 100


def _common_word(conn: sqlite3.Connection, term: str) -> bool:
    """Whether the word channel already matches ``term`` in at least COMMON_WORD_NOTES notes.

    Such a term gains nothing from trigram matching (the word channel alone fills its candidate
    list) and is the expensive kind: a phrase of common trigrams. Rare and partial terms (``auth``
    inside ``authentication``), and CJK runs, still go to the trigram table. The count is the
    term's cached document frequency, which coverage and the evidence read for the same terms.
    """
    return not has_cjk(term) and document_frequency(conn, term) >= COMMON_WORD_NOTES




def search_words(conn: sqlite3.Connection, terms: QueryTerms, filters: Filters = NO_FILTERS,
                 limit: int = 100) -> list[tuple[int, float]]:
    """Word/bigram BM25, including one- and two-character terms: (note id, score) best first."""
    return word_rankings(conn, terms, filters, limit, want_raw=False)[0]


def word_rankings(conn: sqlite3.Connection, terms: QueryTerms, filters: Filters = NO_FILTERS,
                  limit: int = 100, want_raw: bool = True) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The word channel's ranking (AND, then OR) and the plain OR ranking with raw BM25 scores
    (always when ``want_raw``; else only if the OR query had to run anyway)."""
    return _and_then_or(conn, "fts_words", _BM25_WORDS, terms.words, terms.prefixes, filters, limit, want_raw)


# A search narrowed to a scope (a folder, a tag, a kind) has already said what that scope is about,
# so a query term found in nearly every note of the scope adds nothing there:
# the speakers' names in a folder of transcripts, a project's name in its own folder. BM25's IDF
# already shrinks such a term, but an embedding does not: "What did Caroline paint?" lands near
# every note that talks about Caroline. Asked without those names, e5 over LoCoMo's conversations
# put the evidence session in its top 5 for 0.876 of questions instead of 0.814.
# A term that is just as ubiquitous in the whole vault is left alone: that is a template's or a
# footer's text (nearly every obsidian-hub note ends in "Copy this note"), not what the scope is
# about, and cutting "Copy" out of "Copy Path" would lose the name. (Requiring it to be *rare* in
# the rest of the vault instead cost LoCoMo 0.015: three of its six conversations have a John.)
UBIQUITOUS_SHARE = 0.95
UBIQUITOUS_MIN_NOTES = 8  # in a handful of notes "nearly every note" is one or two


def ubiquitous_terms(conn: sqlite3.Connection, terms: Sequence[str], filters: Filters = NO_FILTERS,
                     share: float | None = None, min_notes: int = UBIQUITOUS_MIN_NOTES) -> list[str]:
    """The ``terms`` (surface forms, as ``QueryTerms.all_terms``) found in at least ``share``
    (default UBIQUITOUS_SHARE) of the notes the filters allow but not of the whole vault. Without
    filters there is no scope, so there are none.
    Each check reads at most that many row ids of one posting list, so a rare term costs next to
    nothing."""
    where, params = filters.sql("n")
    if not terms or where == "1":
        return []
    scope = conn.execute(f"SELECT count(*) FROM notes n WHERE {where}", params).fetchone()[0]
    if scope < min_notes:
        return []
    total = conn.execute("SELECT count(*) FROM notes").fetchone()[0]
    share = UBIQUITOUS_SHARE if share is None else share
    need = max(1, math.ceil(share * scope))
    too_common = max(1, math.ceil(share * total))
    span = id_span(conn, filters.path_prefix) if filters.path_prefix else ALL_IDS  # a tag or kind scope
    in_scope = (f"SELECT count(*) FROM (SELECT f.rowid FROM fts_words f JOIN notes n ON n.id = f.rowid "
                f"WHERE fts_words MATCH ? AND f.rowid BETWEEN ? AND ? AND {where} LIMIT ?)")
    in_vault = "SELECT count(*) FROM (SELECT rowid FROM fts_words WHERE fts_words MATCH ? LIMIT ?)"
    found = []
    for term in terms:
        phrase = word_phrase(term)
        if (phrase and conn.execute(in_scope, (phrase, *span, *params, need)).fetchone()[0] >= need
                and conn.execute(in_vault, (phrase, too_common)).fetchone()[0] < too_common):
            found.append(term)
    return found


def _token_pattern(identifier: str, flags: int) -> re.Pattern[str]:
    """``identifier`` as a whole token: not glued to letters/digits, nor to a longer identifier
    (``dec-0054`` inside ``dec-0054-use-lancedb`` is a file name, not a mention of DEC-0054)."""
    return re.compile(r"(?<!\w)(?<!\w[-.:/])" + re.escape(identifier) + r"(?!\w)(?![-.:/]\w)", flags)


def exact_matches(conn: sqlite3.Connection, identifiers: Sequence[str], filters: Filters = NO_FILTERS,
                  limit: int = 20) -> list[int]:
    """Notes that contain every identifier, best first.

    Candidates come from the FTS tables (case-insensitive substrings for 3+ characters, tokens for
    shorter ones); then the text is checked. Notes where each identifier stands as a whole token
    win, those with the exact letter case first; when no note has whole tokens, substring matches
    are returned as they are, so ``apply_secret`` still finds ``apply_secrets``.
    """
    named = _named_by_path(conn, identifiers, filters)
    found = _containing(conn, identifiers, filters, limit)
    return (named + [i for i in found if i not in set(named)])[:limit]


# A name that this many notes or more share (``Untitled``, ``README`` in every folder) names none of them.
TITLE_NAMES_AT_MOST = 3
_NAME_END = re.compile(r"[\s?？!！。.、,]+$")


def as_name(text: str) -> str:
    """``text`` as a note's name compares: NFKC, case folded, spaces collapsed, end punctuation off."""
    return _NAME_END.sub("", " ".join(normalize(text).casefold().split()))


def named_by_title(conn: sqlite3.Connection, query: str, candidates: Sequence[int]) -> list[int]:
    """Of ``candidates`` (the word channels' notes), those whose title or an alias *is* the query,
    as Obsidian's quick switcher would match a typed name: ``外観`` names the note 外観, ``SEO`` the
    note SEO. Not when more than ``TITLE_NAMES_AT_MOST`` notes share that name."""
    name = as_name(query)
    if not name or not candidates or len(name) > 200:
        return []
    rows = conn.execute("SELECT id, title, aliases FROM notes WHERE id IN (SELECT value FROM json_each(?))",
                        (json.dumps(list(candidates)),)).fetchall()
    named = [int(note_id) for note_id, title, aliases in rows  # aliases: a JSON list of strings (sync)
             if any(as_name(n) == name for n in [title, *json.loads(aliases)])]
    if len(named) > TITLE_NAMES_AT_MOST:
        return []
    order = {nid: pos for pos, nid in enumerate(candidates)}
    return sorted(named, key=lambda i: order.get(i, len(order)))


def _named_by_path(conn: sqlite3.Connection, identifiers: Sequence[str], filters: Filters) -> list[int]:
    """Notes a path-shaped identifier names (``runbooks/db-failover.md``, with or without ``.md``):
    the note at that path is the exact match, before the notes that merely mention it."""
    paths = [i.strip("/") for i in identifiers if "/" in i or i.lower().endswith(".md")]
    if not paths:
        return []
    wanted = [p for i in paths for p in (i, i + ".md")]
    where, params = filters.sql("n")
    rows = conn.execute(f"SELECT n.id FROM notes n WHERE n.path IN (SELECT value FROM json_each(?)) AND {where}",
                        (json.dumps(wanted), *params)).fetchall()
    return [int(r[0]) for r in rows]


def _containing(conn: sqlite3.Connection, identifiers: Sequence[str], filters: Filters, limit: int) -> list[int]:
    """Notes whose text contains every identifier (whole tokens and exact case first)."""
    long_ids = [i for i in identifiers if len(i) >= 3]
    short_ids = [i.lower() for i in identifiers if len(i) < 3]
    pool = limit  # each candidate's text is read and checked below: keep the pool small
    results: list[int] | None = None
    if long_ids:
        expr = " AND ".join(quote(t) for t in long_ids)
        results = [i for i, _ in _run(conn, "fts_trigram", _BM25_TRIGRAM, expr, filters, pool)]
    if short_ids:
        expr = " AND ".join(quote(t) for t in short_ids)
        short = [i for i, _ in _run(conn, "fts_words", _BM25_WORDS, expr, filters, pool)]
        results = short if results is None else [i for i in results if i in set(short)]
    if not results:
        return []
    texts = {
        int(r[0]): " \n ".join(r[1:])
        for r in conn.execute(
            "SELECT rowid, title, aliases, tags, description, body FROM fts_trigram "
            "WHERE rowid IN (SELECT value FROM json_each(?))", (json.dumps(results),))
    }
    exact_case = [_token_pattern(normalize(i), 0) for i in identifiers]
    any_case = [_token_pattern(normalize(i), re.IGNORECASE) for i in identifiers]
    tiers: dict[int, int] = {}
    for note_id in results:
        text = normalize(texts.get(note_id, ""))
        if all(p.search(text) for p in exact_case):
            tiers[note_id] = 0
        elif all(p.search(text) for p in any_case):
            tiers[note_id] = 1
    if not tiers:
        return results[:limit]
    return sorted(tiers, key=lambda i: (tiers[i], results.index(i)))[:limit]


def bodies_of(conn: sqlite3.Connection, note_ids: Sequence[int]) -> dict[int, str]:
    """{note id: body} for the notes that have lexical rows, in one query."""
    if not note_ids:
        return {}
    rows = conn.execute("SELECT rowid, body FROM fts_trigram WHERE rowid IN (SELECT value FROM json_each(?))",
                        (json.dumps([int(i) for i in note_ids]),))
    return {int(r[0]): r[1] or "" for r in rows}


# -- how much of the query a lexical match covers --------------------------------------------------

DF_CAP = 2000  # document frequencies are counted up to this many notes (a common term's IDF is ~0 anyway)
_df_cache: dict[tuple[str, str], int] = {}
_df_generation: dict[str, str] = {}


def _generation(conn: sqlite3.Connection) -> str:
    """The database file this connection reads, after dropping its cached counts if the notes
    changed since they were counted: document counts are cached per notes stamp (``cache.stamp``:
    every transaction that writes note or FTS rows moves it, index/sync.py). It used to be the
    file's and its WAL's modification times, which every write moves: the watcher's rescan writes
    ``last_sync`` once a minute, and a vector sync its version, so a server's next query counted
    every term again (the vault's CJK share alone is ~0.1 s at 30k notes).
    Looked at once per ``cache.one_look`` block (a search)."""
    seen = cache.pinned(conn)
    if seen is not None and "generation" in seen:
        return seen["generation"]  # type: ignore[no-any-return]
    db, stamp = cache.stamp(conn)
    if _df_generation.get(db) != stamp:  # the index changed: every count of this file is stale
        # list(): the vector channel's thread may add a count meanwhile (a dict changing size mid-loop)
        for key in [k for k in list(_df_cache) if k[0] == db]:
            _df_cache.pop(key, None)
        _df_generation[db] = stamp
    if seen is not None:
        seen["generation"] = db
    return db


def _cached_count(conn: sqlite3.Connection, term: str, sql: str, params: tuple[object, ...],
                  db: str | None = None) -> int:
    """``sql``'s count, cached under ``term`` per index stamp; ``db``: ``_generation(conn)``, when
    the caller has just asked for it (several counts in a row need only one look at the stamp)."""
    db = _generation(conn) if db is None else db
    key = (db, term)
    value = _df_cache.get(key)
    if value is None:  # a local: the vector channel's thread may drop the key before we return
        value = int(conn.execute(sql, params).fetchone()[0])
        if len(_df_cache) > 50_000:
            _df_cache.clear()
        _df_cache[key] = value
    return value


# notes of the word table matching a term, counted up to a limit (a capped document frequency)
_COUNT_UP_TO = "SELECT count(*) FROM (SELECT rowid FROM fts_words WHERE fts_words MATCH ? LIMIT ?)"


def document_frequency(conn: sqlite3.Connection, term: str) -> int:
    """Notes of the word table holding ``term`` (a word or a CJK bigram), counted up to DF_CAP."""
    return _cached_count(conn, term, _COUNT_UP_TO, (quote(term), DF_CAP))


def document_frequencies(conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
    """``document_frequency`` of each of ``terms``, looking at the index stamp once for all."""
    db = _generation(conn)
    return {t: _cached_count(conn, t, _COUNT_UP_TO, (quote(t), DF_CAP), db) for t in dict.fromkeys(terms)}


def idf(df: int, total: int) -> float:
    """The IDF the evidence measures weigh a term by (BM25's, kept positive): coverage, the
    unknown share and the feedback words' ranking all use this one."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def ranked_notes(conn: sqlite3.Connection) -> int:
    """Notes in lexical ranking (cached like document frequencies: counting reads the whole table)."""
    return _cached_count(conn, "\0ranked", "SELECT count(*) FROM notes WHERE ranked = 1", ())


def uninformative(conn: sqlite3.Connection, term: str) -> bool:
    """Whether ``term`` is in half the ranked notes or more: FTS5's BM25 gives such a term an IDF
    of 1e-6, so matching it says nothing (on obsidian-hub every note's footer holds "note",
    "vault", "GitHub" and "hub"). Counted exactly only past the capped document frequency."""
    return is_uninformative(conn, term, document_frequency(conn, term), ranked_notes(conn))


def is_uninformative(conn: sqlite3.Connection, term: str, df: int, total: int) -> bool:
    """``uninformative`` for a term whose capped document frequency ``df`` in ``total`` ranked
    notes the caller has already counted (an exact count runs only past the cap)."""
    if df >= DF_CAP:
        df = _phrase_rows(conn, "fts_words", quote(term), _generation(conn))
    return total > 0 and 2 * df >= total


def coverages(conn: sqlite3.Connection, terms: QueryTerms, note_ids: Sequence[int],
              informative: bool = True) -> tuple[float, float | None]:
    """The largest share of the query that one of ``note_ids`` contains, each term weighted by its
    IDF: 1.0 when a note holds every term, near 0 when the notes match only its commonest words;
    and (``informative``; else None) the same share counting only the query's informative terms
    (those not ``uninformative``): 0.0 when every term the notes match is in half the vault.

    This is what "the lexical channel has real evidence" means in fusion (``retrieval/search.py``):
    an English question over Japanese notes matches one loan word, a paraphrase matches "notes"
    and "obsidian" — BM25 still ranks those notes, but they are not evidence. One indexed lookup
    per term for the few notes asked about, plus a capped document-frequency count per term
    (cached); the informative share also asks whether each term is in half the vault.
    """
    words = list(dict.fromkeys(terms.words))
    if not words or not note_ids:
        return 0.0, (0.0 if informative else None)
    rare = {w for w in words if not uninformative(conn, w)} if informative else set(words)
    ids = ",".join(str(int(i)) for i in note_ids)
    every = f"SELECT 1 FROM fts_words WHERE fts_words MATCH ? AND rowid IN ({ids}) LIMIT 1"
    if conn.execute(every, (match_expression(words, "AND"),)).fetchone():
        # one note holds every term: no need to weigh them
        return 1.0, ((1.0 if rare else 0.0) if informative else None)
    total = max(1, ranked_notes(conn))
    weights = {w: idf(min(document_frequency(conn, w), total), total) for w in words}
    whole = sum(weights.values())
    if whole <= 0:
        return 0.0, (0.0 if informative else None)
    whole_rare = sum(weights[w] for w in rare)
    got: dict[int, float] = {int(i): 0.0 for i in note_ids}
    got_rare: dict[int, float] = {int(i): 0.0 for i in note_ids}
    for w in words:
        for (rowid,) in conn.execute(f"SELECT rowid FROM fts_words WHERE fts_words MATCH ? AND rowid IN ({ids})",
                                     (quote(w),)):
            got[int(rowid)] = got.get(int(rowid), 0.0) + weights[w]
            if informative and w in rare:
                got_rare[int(rowid)] = got_rare.get(int(rowid), 0.0) + weights[w]
    share = max(got.values()) / whole
    if not informative:
        return share, None
    return share, (max(got_rare.values()) / whole_rare if whole_rare > 0 else 0.0)


def search_words_any(conn: sqlite3.Connection, words: Sequence[str], filters: Filters = NO_FILTERS,
                     limit: int = 100) -> list[tuple[int, float]]:
    """Word-table BM25 of the OR of ``words`` (already word-table terms): (note id, score) best first."""
    words = list(dict.fromkeys(w for w in words if w))
    if not words:
        return []
    return _run_or(conn, "fts_words", _BM25_WORDS, words, [], filters, limit)


CJK_VAULT_SHARE = 0.05  # a vault with CJK text in at least this share of its notes writes in CJK
CJK_DOMINANT_SHARE = 0.5  # … and in more than this share, mostly in CJK: English words are loans there


def cjk_share(conn: sqlite3.Connection, at_least: float) -> bool:
    """Whether at least ``at_least`` of the vault's notes have CJK text (the commonest particles,
    counted up to that many notes)."""
    total = ranked_notes(conn)
    need = max(1, int(total * at_least))
    return any(_cached_count(conn, f"\0cjk:{mark}:{need}", _COUNT_UP_TO, (quote(mark) + "*", need)) >= need
               for mark in ("の", "的", "이"))


def unknown_share(conn: sqlite3.Connection, terms: QueryTerms) -> float | None:
    """The share of the query (IDF-weighted) made of words no note contains — in a script the
    vault writes in: a Japanese question over English notes is not unknown, it is cross-lingual.

    Near 1.0 for ``zyxquorble`` or "how do I refinance my mortgage?" over notes about a note-taking
    app: the vault has never seen what the query is about, so whatever the channels rank is noise.
    In a vault written mostly in Japanese an English question shares few words with the notes by
    nature, so there its words count as unknown only when not one of them occurs anywhere.
    None when no term is in the vault's scripts (nothing to judge by)."""
    words = list(dict.fromkeys(terms.words))
    if not words:
        return None
    total = max(1, ranked_notes(conn))
    flags: dict[str, bool] = {}

    def vault(kind: str) -> bool:
        if kind not in flags:
            flags[kind] = cjk_share(conn, CJK_VAULT_SHARE if kind == "cjk" else CJK_DOMINANT_SHARE)
        return flags[kind]

    native = [0.0, 0.0]  # [IDF mass, unknown IDF mass]
    loaned = [0.0, 0.0]
    for w in words:
        if has_cjk(w):
            if not vault("cjk"):
                continue
            bucket = native
        else:
            bucket = loaned if vault("dominant") else native
        df = min(document_frequency(conn, w), total)
        # An unseen word weighs as much as the rarest seen one (df 1): in a small vault df 0's IDF
        # would let one unknown word outweigh several that match ("mesh routing setup").
        weight = idf(max(df, 1), total)
        bucket[0] += weight
        bucket[1] += weight if df == 0 else 0.0
    if native[0] > 0:
        return native[1] / native[0]
    if loaned[0] > 0:
        return 1.0 if loaned[1] >= loaned[0] else 0.0
    return None
