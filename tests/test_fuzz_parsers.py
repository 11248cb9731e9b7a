"""Property-based fuzzing of the parsers that see untrusted text: frontmatter, links, queries, chunks.

Whatever the input, each parser returns its documented shape or raises only its documented error,
and within a bounded time (Hypothesis' per-example deadline; generous, since the machine is shared).
Inputs are drawn from alphabets dense in the characters each parser treats specially, so a few
hundred examples reach the corners (fences, anchors, brackets, quotes, CJK runs, headings).
"""

from __future__ import annotations

import datetime as _dt
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_hub.index.chunks import chunk_note
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.index.terms import analyze_query, match_expression, words_text
from memory_hub.retrieval.search import QueryError, search
from memory_hub.vault import frontmatter
from memory_hub.vault.links import Resolver, extract_links
from memory_hub.vault.notes import parse_note

FUZZ = settings(max_examples=150, deadline=_dt.timedelta(seconds=2), derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

YAML_BITS = st.sampled_from([
    "---\n", "title: ", "tags: ", "- ", "[", "]", "{", "}", ": ", ", ", "&a ", "*a", "&b ", "*b", "<<: ",
    "!!binary ", "!!python/object ", "? ", "|\n", ">\n", "  ", "\t", "\n", "'", '"', "#", "...\n", "%YAML 1.1\n",
    "2026-13-45", "1e999", "~", "null", "yes", "x", "認証", "\ufeff", "\r\n", "\\", "@", "`", "\x85", "\u2028",
])
MD_BITS = st.sampled_from([
    "[[", "]]", "|", "\\|", "#", "#^", "^", "![[", "[", "]", "(", ")", "<", ">", "](", "http://x", "../", "./",
    "`", "```", "~~~", "%%", "<!--", "-->", "\n", " ", "\t", "*", "_", "- ", "# ", "## ", "a", "note", "x.md",
    "認証", "エラー", "😀", "\u202e", "\x00", "\\", "%20", "%zz", "'", '"',
])
QUERY_BITS = st.sampled_from([
    '"', "'", "*", "-", ":", "(", ")", "^", "+", "NEAR", "AND", "OR", "NOT", "NEAR/2", "{", "}", "[", "]",
    " ", "_", ".", "/", "#", "@", "’s", "S3", "Go", "DEC-0054", "2026.4.10", "認証", "何", "誰", "の", "は",
    "エラー", "ＡＰＩ", "ß", "İ", "\u0301", "\x00", "\u200b", "a", "deploy", "apply_secrets", "😀", "\t", "\n",
])


# YAML values built from a small grammar, anchors and aliases included, so self-references
# (``&a0 [*a0]``), alias chains and merges come up on their own.
ANCHOR = st.sampled_from(["a0", "a1", "a2"])
YAML_VALUE = st.recursive(
    st.sampled_from(["x", "1", "2026-12-01", "~", "'q'", "[]", "{}", "1e999", "2026-02-30"])
    | ANCHOR.map(lambda a: f"*{a}"),
    lambda inner: st.one_of(
        st.tuples(ANCHOR, inner).map(lambda t: f"&{t[0]} {t[1]}"),
        # an anchored list that refers to its own anchor somewhere inside
        st.tuples(ANCHOR, st.lists(inner, max_size=3)).map(lambda t: f"&{t[0]} [" + ", ".join([*t[1], f"*{t[0]}"]) + "]"),
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from(["k", "<<", "t"]), inner), max_size=3)
        .map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
    ),
    max_leaves=12,
)
YAML_DOC = st.lists(st.tuples(st.sampled_from(["title", "tags", "a", "b", "<<"]), YAML_VALUE), max_size=5).map(
    lambda kv: "---\n" + "".join(f"{k}: {v}\n" for k, v in kv) + "---\nbody\n")


def assembled(bits: st.SearchStrategy[str], max_size: int = 60) -> st.SearchStrategy[str]:
    return st.one_of(st.lists(bits, max_size=max_size).map("".join), st.text(max_size=200))


@FUZZ
@given(st.one_of(YAML_DOC, assembled(YAML_BITS)))
def test_frontmatter_parse_never_raises(text: str) -> None:
    block = frontmatter.parse(text)
    assert isinstance(block.data, dict)
    assert block.problem is None or block.data == {}
    assert isinstance(block.body, str) and block.body_line >= 1
    note = parse_note("fuzz.md", text)  # everything derived from the block, links included
    assert note.title and isinstance(note.tags, list)


@FUZZ
@given(assembled(YAML_BITS), st.dictionaries(st.sampled_from(["title", "access_count", "k-1", "tags"]),
                                             st.one_of(st.integers(), st.text(max_size=20),
                                                       st.lists(st.text(max_size=5), max_size=3)), max_size=3))
def test_frontmatter_set_fields_edits_only_or_refuses(text: str, updates: dict) -> None:
    try:
        out = frontmatter.set_fields(text, updates)
    except ValueError:
        assert frontmatter.parse(text).problem is not None  # refused only for a broken block
        return
    _raw, body, _line = frontmatter.split(text)
    assert out.endswith(body)  # the body is never changed


@FUZZ
@given(assembled(MD_BITS, 80), st.dictionaries(st.sampled_from(["related", "up", "x"]), assembled(MD_BITS, 10),
                                               max_size=2))
def test_links_never_raise_and_resolve(body: str, data: dict) -> None:
    links = extract_links(body, data)
    resolver = Resolver(["notes/a.md", "x.md", "認証.md"], {"x.md": ["alias"]})
    for link in links:
        assert isinstance(link.target, str) and link.line >= 0
        resolved = resolver.resolve(link.target, "notes/b.md", link.kind)
        assert resolved is None or resolved in {"notes/a.md", "x.md", "認証.md"}


@FUZZ
@given(assembled(QUERY_BITS, 40))
def test_query_analysis_never_raises_and_stays_data(query: str) -> None:
    terms = analyze_query(query)
    words_text(query)
    for op in ("AND", "OR"):
        expr = match_expression(terms.trigram, op) if terms.trigram else ""
        if expr:  # every term is a quoted FTS5 string: SQLite must accept the expression as is
            conn = sqlite3.connect(":memory:")
            conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='trigram')")
            conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchone()
            conn.close()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    vault = tmp_path_factory.mktemp("fuzz") / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("---\ntitle: Deploy S3\ntags: [go]\n---\n\napply_secrets DEC-0054 認証エラー\n", encoding="utf-8")
    (vault / "b.md").write_text("# 認証\n\nThe password rotation runbook.\n", encoding="utf-8")
    store = Store(vault)
    sync(vault, store=store)
    return store


@FUZZ
@given(assembled(QUERY_BITS, 40))
def test_lexical_search_takes_any_query(small_store: Store, query: str) -> None:
    try:
        result = search(small_store, query, k=5, mode="lexical")
    except QueryError:
        return  # the documented refusal (empty or oversized queries)
    assert all(h.path in {"a.md", "b.md"} for h in result.hits)


def _tokens(text: str) -> int:
    return len(text.split()) + len(text) // 40 + 1


@FUZZ
@given(st.text(max_size=30), assembled(MD_BITS, 120), st.integers(min_value=16, max_value=600))
def test_chunks_cover_the_body_and_fit_the_window(title: str, body: str, max_tokens: int) -> None:
    chunks = chunk_note(title, body, _tokens, max_tokens=max_tokens)
    assert chunks and [c.ordinal for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert 0 <= c.start <= c.end <= len(body)
    assert all(a.end <= b.start for a, b in zip(chunks, chunks[1:], strict=False))  # in order, no overlap


def test_fuzz_inputs_reach_the_corners() -> None:
    """The alphabets do produce the hostile shapes the properties are about (a guard on the strategies)."""
    assert frontmatter.parse("---\nx: &a [*a]\n---\n").problem
    assert extract_links("[[a|b]] ![[c#^d]] [x](../y.md)")
    assert analyze_query('"NEAR(" AND -x*').all_terms
    assert chunk_note("t", "# h\n\n" + "word " * 500, _tokens, max_tokens=64)
