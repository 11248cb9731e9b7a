"""Lexical search on the starter vault: short terms, Japanese, identifiers, FTS syntax, fallbacks."""

from __future__ import annotations

import pytest

from memory_hub.index import lexical
from memory_hub.index.lexical import Filters
from memory_hub.index.terms import analyze_query, is_identifier, match_expression, words_text
from memory_hub.retrieval.search import QueryError, search


@pytest.fixture(scope="module")
def tvault(tmp_path_factory: pytest.TempPathFactory):
    import shutil

    from memory_hub.config import template_dir
    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync

    vault = tmp_path_factory.mktemp("lexical") / "vault"
    shutil.copytree(template_dir(), vault)
    store = Store(vault)
    sync(vault, store=store)
    return vault, store


def paths(store, query: str, k: int = 10, **kw) -> list[str]:
    return [h.path for h in search(store, query, k=k, mode="lexical", **kw).hits]


@pytest.mark.parametrize("query,expected", [
    ("S3", "incident-2026-05-s3-bucket-policy.md"),
    ("Go", "go-service-conventions.md"),
    ("認証", "認証エラーの切り分け.md"),
    ("手順", "オンボーディング手順.md"),
])
def test_short_ascii_and_japanese_terms(tvault, query: str, expected: str) -> None:
    _, store = tvault
    got = paths(store, query)
    assert expected in got[:3], got


@pytest.mark.parametrize("ident,expected", [
    ("ERR_CERT_AUTHORITY_INVALID", "incident-2026-03-expired-intermediate.md"),
    ("DEC-0054", "decisions/dec-0054-use-lancedb-for-vectors.md"),
    ("apply_secrets", "deploy-step-apply-secrets.md"),
    ("2026.4.10", "release-2026-4-10.md"),
])
def test_exact_identifiers_rank_first(tvault, ident: str, expected: str) -> None:
    _, store = tvault
    # alone, and surrounded by words that other notes share more of
    for query in (ident, f"certificate deploy secrets vectors {ident}", f"{ident} どうやって 認証"):
        result = search(store, query, mode="lexical")
        assert result.hits and result.hits[0].path == expected, (query, [h.path for h in result.hits])
        assert result.hits[0].exact


def test_identifier_shapes() -> None:
    for tok in ("ERR_CERT_AUTHORITY_INVALID", "DEC-0054", "apply_secrets", "2026.4.10", "S3", "getUser"):
        assert is_identifier(tok), tok
    for tok in ("Go", "blue-green", "deploy", "long-term", "the"):
        assert not is_identifier(tok), tok


NASTY = ['"', '""', "'", "*", "-", ":", "^", "(", ")", "()", "AND", "OR", "NOT", "NEAR", "NEAR(a b)",
         'say "hello', "a AND (b OR", "title:tls", "-deploy", "deploy*", "^start", "a NOT b", "col:val*",
         "c++", "x' OR 1=1 --", "{title body}: tls", "\\", "%", "_", "🔥", "認証 AND エラー", "S3 OR Go"]


# NASTY queries holding a word the starter vault has: they must still find notes.
WORDS_INSIDE = {"title:tls", "-deploy", "deploy*", "{title body}: tls", "認証 AND エラー", "S3 OR Go"}


@pytest.mark.parametrize("query", NASTY)
def test_fts_syntax_in_queries_never_raises(tvault, query: str) -> None:
    vault, store = tvault
    result = search(store, query, mode="lexical")  # must not raise: FTS5 syntax in a query is only text
    assert all((vault / hit.path).is_file() for hit in result.hits)
    if query in WORDS_INSIDE:  # the words around the syntax are still searched
        assert result.hits, query
    assert paths(store, "deploy")  # and the index still answers



def test_operator_words_are_data(tvault) -> None:
    _, store = tvault
    # "NOT" is a word here, not an operator: the TLS note still comes back
    assert "tls-certificates.md" in paths(store, "TLS NOT certificates")
    assert paths(store, '"tls-certificates"')  # quotes are text


def test_empty_and_too_long_queries(tvault) -> None:
    _, store = tvault
    for bad in ("", "   "):
        with pytest.raises(QueryError):
            search(store, bad, mode="lexical")
    with pytest.raises(QueryError):
        search(store, "x" * 5000, mode="lexical")
    result = search(store, "the of and", mode="lexical")  # only stopwords: searched as they are
    assert isinstance(result.hits, list)


def test_and_then_or_fallback(tvault) -> None:
    _, store = tvault
    conn = store.conn
    terms = analyze_query("passkey zzzqqqnonexistent")
    assert lexical._run(conn, "fts_words", lexical._BM25_WORDS, match_expression(terms.words, "AND"),
                        lexical.NO_FILTERS, 10) == []
    hits = lexical.search_words(conn, terms)
    assert hits, "OR fallback found nothing"
    # notes with every term come before notes with some
    both = lexical.search_words(conn, analyze_query("passkey region"))
    full = {i for i, _ in lexical._run(conn, "fts_words", lexical._BM25_WORDS,
                                        match_expression(["passkey", "region"], "AND"), lexical.NO_FILTERS, 100)}
    ranks = [i in full for i, _ in both]
    assert ranks == sorted(ranks, reverse=True) and any(ranks) and not all(ranks)


def test_unranked_kinds_stay_out_of_lexical_results_but_join_the_graph(tvault) -> None:
    _, store = tvault
    conn = store.conn
    unranked = conn.execute("SELECT path, title FROM notes WHERE kind IN ('daily', 'template', 'attachment')").fetchall()
    assert {r["path"].split("/")[0] for r in unranked} >= {"daily", "templates", "attachments"}
    for row in unranked:
        assert row["path"] not in paths(store, row["title"], k=50)
    n = conn.execute("SELECT count(*) FROM fts_trigram WHERE rowid IN (SELECT id FROM notes WHERE ranked = 0)").fetchone()[0]
    assert n == 0
    linked = conn.execute(
        "SELECT count(*) FROM links l JOIN notes n ON n.id = l.source_id WHERE n.kind = 'daily'").fetchone()[0]
    assert linked > 0


def test_filters(tvault) -> None:
    _, store = tvault
    got = paths(store, "certificate", k=50, filters=Filters(kinds=["runbook"]))
    assert got and all(p.startswith("runbooks/") for p in got)
    got = paths(store, "certificate", k=50, filters=Filters(path_prefix="inbox/"))
    assert got and all(p.startswith("inbox/") for p in got)
    assert paths(store, "certificate", filters=Filters(since="2999-01-01")) == []


def test_full_width_and_case_normalisation(tvault) -> None:
    _, store = tvault
    assert paths(store, "ＴＬＳ")[:1] == paths(store, "tls")[:1] != []


def test_words_text_splits_cjk_into_bigrams() -> None:
    assert words_text("認証エラー") .split() == ["認証", "証エ", "エラ", "ラー", "ー"]
    assert words_text("S3 bucket").split() == ["S3", "bucket"]


def test_japanese_sentence_query(tvault) -> None:
    _, store = tvault
    assert "認証エラーの切り分け.md" in paths(store, "認証エラーはどう切り分けるのか？")[:3]


def test_prose_queries_pin_only_identifiers_no_word_looks_like() -> None:
    from memory_hub.index.terms import analyze_query
    from memory_hub.retrieval.search import pinned_identifiers

    # short queries pin any identifier; in prose only the unmistakable ones are pinned
    assert pinned_identifiers(analyze_query("IL-6 levels")) == ["IL-6"]
    prose = "IL-6 levels rise after exercise in older adults with ERR_CERT_AUTHORITY_INVALID and v2026.4.10"
    assert pinned_identifiers(analyze_query(prose)) == ["ERR_CERT_AUTHORITY_INVALID", "v2026.4.10"]
    assert pinned_identifiers(analyze_query("why did deploy fail with DEC-0054 again today")) == ["DEC-0054"]
    assert pinned_identifiers(analyze_query("user sessions expire in S3 buckets after deploys")) == []


def test_japanese_interrogatives_are_not_search_terms() -> None:
    terms = analyze_query("2012年に世界遺産に登録されたのは何川流域か？")
    assert not any("何" in t for t in terms.words + terms.prefixes + terms.trigram)
    assert "川流" in terms.words and "流域" in terms.words
    assert analyze_query("誰が設計した？").words == ["設計"]
    assert "幾何" in analyze_query("幾何学の定理").words  # 何 inside a word stays
    assert analyze_query("何").prefixes == ["何"]  # a query of nothing else is searched as it is


def _chat_vault(make_vault, sessions: int = 10, others: int = 10, nameless: int = 0,
                footer: str = ""):  # noqa: ANN202
    topics = ["painted a sunset over the lake", "started a new job at the bakery", "went hiking in the hills",
              "adopted a grey cat", "learned to play the violin", "ran a charity race", "moved to a new flat",
              "planted tomatoes", "visited her grandmother", "fixed an old bicycle", "cooked a curry"]
    files = {f"chat/session-{i:02}.md": f"Caroline: Hi Mel!\nMelanie: Hey Caroline, what's new?\n"
                                        f"Caroline: I {topics[i % len(topics)]}.\n{footer}" for i in range(sessions)}
    files.update({f"misc/note-{i}.md": f"# Note {i}\nNothing about anyone, just notes on topic {i}.\n{footer}"
                  for i in range(others)})
    for i in range(nameless):
        files[f"chat/session-{i:02}.md"] = "Melanie: I went to the market alone today.\n"
    return make_vault(files)


def test_ubiquitous_terms_are_measured_within_the_scope(make_vault) -> None:
    _, store = _chat_vault(make_vault, sessions=10, others=30)
    chat = Filters(path_prefix="chat/")
    assert lexical.ubiquitous_terms(store.conn, ["Caroline", "Melanie", "sunset", "Mel"], chat) == ["Caroline", "Melanie", "Mel"]
    # a search without filters has no scope that could already say what its notes are about
    assert lexical.ubiquitous_terms(store.conn, ["Caroline", "nothing"]) == []


def test_terms_common_in_the_whole_vault_are_boilerplate_and_stay(make_vault) -> None:
    _, store = _chat_vault(make_vault, sessions=10, others=20, footer="\nCopy this note | Edit in GitHub\n")
    chat = Filters(path_prefix="chat/")
    # in every note of the scope, but also in every other note: a template's footer, not the topic
    assert lexical.ubiquitous_terms(store.conn, ["Copy", "Caroline"], chat) == ["Caroline"]
    # "nothing" is in all 20 misc notes but only two thirds of the vault: misc's own word
    assert lexical.ubiquitous_terms(store.conn, ["nothing", "Copy"], Filters(path_prefix="misc/")) == ["nothing"]


def test_ubiquitous_is_a_share_of_the_scope(make_vault) -> None:
    _, store = _chat_vault(make_vault, sessions=20, others=30, nameless=2)  # Caroline in 18 of 20
    chat = Filters(path_prefix="chat/")
    assert lexical.ubiquitous_terms(store.conn, ["Caroline", "Melanie"], chat) == ["Melanie"]
    assert lexical.ubiquitous_terms(store.conn, ["Caroline", "Melanie"], chat, share=0.9) == ["Caroline", "Melanie"]


def test_ubiquitous_terms_in_a_scope_that_is_no_folder(make_vault) -> None:
    """A tag's notes sit in no one folder: the scope is every note id (``ALL_IDS``), narrowed by the
    tag alone, and gives what the same notes give as a folder."""
    files = {f"{'ab'[i % 2]}/session-{i:02}.md": f"---\ntags: [chat]\n---\nCaroline: Hi Mel!\nMelanie: Hey!\n"
                                                f"Caroline: I planted tomatoes {i}.\n" for i in range(10)}
    files.update({f"chat/session-{i:02}.md": f"Caroline: Hi Mel!\nMelanie: Hey!\nCaroline: I ran {i}.\n"
                  for i in range(10)})
    files.update({f"misc/note-{i}.md": f"# Note {i}\nNothing about anyone, topic {i}.\n" for i in range(30)})
    _, store = make_vault(files)
    terms = ["Caroline", "Melanie", "tomatoes", "ran"]
    assert lexical.ubiquitous_terms(store.conn, terms, Filters(tags=["chat"])) == ["Caroline", "Melanie", "tomatoes"]
    assert lexical.ubiquitous_terms(store.conn, terms, Filters(path_prefix="chat/")) == ["Caroline", "Melanie", "ran"]
    ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM notes")]
    assert lexical.ALL_IDS[0] <= min(ids) and max(ids) <= lexical.ALL_IDS[1]
    assert lexical.id_span(store.conn, "nowhere/") == lexical.NO_IDS


def test_ubiquitous_terms_need_a_scope_large_enough_to_say_so(make_vault) -> None:
    _, store = _chat_vault(make_vault, sessions=lexical.UBIQUITOUS_MIN_NOTES - 1)
    assert lexical.ubiquitous_terms(store.conn, ["Caroline"], Filters(path_prefix="chat/")) == []


def test_ubiquitous_terms_in_japanese(make_vault) -> None:
    files = {f"日報/{i:02}.md": f"田中さんの日報。今日は項目{i}を進めた。\n" for i in range(10)}
    files["日報/09.md"] = "田中さんの日報。認証エラーを直した。\n"
    files.update({f"設計/{i:02}.md": f"設計メモ{i}。キャッシュの方針。\n" for i in range(15)})
    _, store = make_vault(files)
    found = lexical.ubiquitous_terms(store.conn, ["田中", "日報", "認証エラー", "中"], Filters(path_prefix="日報/"))
    assert found == ["田中", "日報"]


@pytest.mark.parametrize("query,drop,expected", [
    ("What did Caroline paint?", ["Caroline"], "What did paint?"),
    ("When did Caroline's sister visit Melanie?", ["Caroline", "Melanie"], "When did sister visit?"),
    ("caroline and CAROLINE", ["Caroline"], "and"),
    ("Carolines and Caroline", ["Caroline"], "Carolines and"),  # whole words only
    ("Caroline", ["Caroline"], "Caroline"),  # nothing would be left: keep the query
    ("田中さんの認証エラー", ["田中"], "さんの認証エラー"),
    ("unchanged query", [], "unchanged query"),
])
def test_without_terms(query: str, drop: list[str], expected: str) -> None:
    from memory_hub.index.terms import without_terms

    assert without_terms(query, drop) == expected


def test_bare_terms_drop_possessives_once() -> None:
    from memory_hub.index.terms import analyze_query, bare_terms

    assert bare_terms(analyze_query("Caroline's dog and Caroline’s cat, Caroline").all_terms) == ["Caroline", "dog", "cat"]
    # both apostrophes search as the bare word, in both lexical tables
    for query in ("Caroline's cat", "Caroline’s cat"):
        terms = analyze_query(query)
        assert (terms.words, terms.trigram) == (["caroline", "cat"], ["Caroline", "cat"])


def test_a_curly_possessive_finds_a_straight_one(tvault) -> None:
    _, store = tvault
    assert paths(store, "Go’s conventions")[:1] == paths(store, "Go's conventions")[:1] == ["go-service-conventions.md"]


def test_capitalised_names_are_not_identifiers_but_paths_and_code_are() -> None:
    for tok in ("iPhone", "macOS", "GitHub", "YouTube", "JavaScript", "iOS", "and/or", "mg/kg", "e.g"):
        assert not is_identifier(tok), tok
    for tok in ("runbooks/db-failover.md", "vault-conventions.md", "app.py", "os.path", "~/notes", "useState"):
        assert is_identifier(tok), tok


def test_names_in_prose_pin_nothing_quotes_pin_always() -> None:
    from memory_hub.retrieval.search import pinned_identifiers

    assert pinned_identifiers(analyze_query("how do I sync my vault between iPhone and desktop?")) == []
    assert pinned_identifiers(analyze_query("GitHub YouTube")) == []
    long = 'where did we write down "blue-green rollback" for the partner api deploys last spring'
    assert pinned_identifiers(analyze_query(long)) == ["blue-green rollback"]
    assert pinned_identifiers(analyze_query("see `apply_secrets` step")) == ["apply_secrets"]


def test_stop_words_never_score(tvault) -> None:
    """Stop-words leave the lexical query (my, me, it, …); a query of nothing else has no lexical terms."""
    q = analyze_query("publish my notes as a free website")
    assert q.words == ["publish", "notes", "free", "website"] and "my" not in q.trigram
    assert analyze_query("what is it").empty and analyze_query("Is it mine?").empty
    _, store = tvault
    result = search(store, "what is it", mode="lexical")
    assert result.hits == [] and result.warnings


def test_a_quoted_phrase_pins_the_notes_that_hold_it(tvault) -> None:
    _, store = tvault
    result = search(store, 'the "expired intermediate" story again', mode="lexical")
    top = result.hits[0].note_id
    assert result.hits[0].exact and "expired intermediate" in (
        result.hits[0].title + lexical.bodies_of(store.conn, [top])[top]).lower()


def _common_word_vault(make_vault, notes: int = 400):
    """Every note says "note" (often); a few hundred say rarer words, some several times."""
    import random

    rng = random.Random(5)
    rare = ["kanban", "zotero", "latex", "vim", "canvas", "mermaid"]
    files = {}
    for i in range(notes):
        words = ["note"] * rng.randint(1, 6) + ["filler"] * rng.randint(0, 40)
        words += [w for w in rare if rng.random() < 0.25] * rng.randint(1, 3)
        rng.shuffle(words)
        title = " ".join(rng.sample(rare, 1)) if i % 7 == 0 else f"page {i}"
        files[f"n{i:04d}.md"] = f"# {title}\n\n" + " ".join(words) + "\n"
    return make_vault(files)


@pytest.mark.parametrize("query", ["kanban note", "zotero latex note filler", "vim note", "note filler",
                                   "mermaid canvas kanban zotero latex vim note", "kanban kanban note"])
def test_pruned_or_ranking_is_the_full_one(make_vault, query: str) -> None:
    """The OR ranking that leaves rows holding only common words unscored returns exactly the
    rows, scores and order of the plain OR query, whether the pruning applied or fell back."""
    _, store = _common_word_vault(make_vault)
    conn = store.conn
    terms = analyze_query(query)
    for limit in (5, 20, 100):
        full = lexical._run(conn, "fts_words", lexical._BM25_WORDS, match_expression(terms.words, "OR"),
                            lexical.NO_FILTERS, limit)
        got = lexical._run_or(conn, "fts_words", lexical._BM25_WORDS, terms.words, [], lexical.NO_FILTERS, limit)
        assert got == full, (query, limit)
        # and through the AND-then-OR ranking, which hands the AND hits' floor on
        and_hits = lexical._run(conn, "fts_words", lexical._BM25_WORDS, match_expression(terms.words, "AND"),
                                lexical.NO_FILTERS, limit)
        floor = and_hits[limit - 1][1] if len(and_hits) >= limit else None
        assert lexical._run_or(conn, "fts_words", lexical._BM25_WORDS, terms.words, [], lexical.NO_FILTERS,
                               limit, floor) == full


def test_pruned_or_ranking_applies_on_common_words(make_vault) -> None:
    """The pruning really runs (the check is not vacuous): "note" is in every row, so an OR with a
    rarer word leaves it out of the row set and still passes the bound check."""
    _, store = _common_word_vault(make_vault)
    conn = store.conn
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        got = lexical._run_or(conn, "fts_words", lexical._BM25_WORDS, ["kanban", "note"], [],
                              lexical.NO_FILTERS, 20)
    finally:
        conn.set_trace_callback(None)
    assert len(got) == 20
    assert any("+rowid IN" in s for s in statements)
    # the full OR query (no row restriction) never ran; only the rarer word's own ranking did, for a floor
    full = match_expression(["kanban", "note"], "OR").replace("'", "''")
    assert not any(f"MATCH '{full}'" in s and "+rowid" not in s for s in statements), statements
    assert any("MATCH '\"kanban\"' ORDER BY score" in s for s in statements), statements


def test_first_term_in_a_long_note_is_where_lower_casing_all_of_it_finds_it() -> None:
    """``first_term_at`` lower-cases a long note a block at a time: the position must be the
    one the whole-note ``lower().find`` gives, for terms across block edges, in any case, absent,
    empty, or not ASCII (Kelvin sign K lower-cases to an ASCII k; ſ never matches an s), in ASCII
    and other text (İ and Σ, whose lower case is not one character alone, included)."""
    import random

    from memory_hub.retrieval.search import SCAN_BLOCK, _first_hit, first_term_at

    rng = random.Random(3)
    edge = "x" * (SCAN_BLOCK - 3) + "KanBan" + "y" * 50
    cases = [(edge, ["kanban"]), (edge, ["zzz", "BAN"]), (edge, ["\u212aanban"]), (edge, ["ſy"]), (edge, [""]),
             (edge, ["日本"]), ("日本語" + edge, ["kanban"]), (edge * 3, ["nothere"])]
    for _ in range(300):
        text = "".join(rng.choice("abAB _-") for _ in range(rng.choice([100, SCAN_BLOCK + 7, 3 * SCAN_BLOCK])))
        cases.append((text, ["".join(rng.choice("abAB") for _ in range(rng.randint(1, 5)))
                             for _ in range(rng.randint(0, 3))]))
    # not ASCII: curly quotes, Japanese, the two characters whose lower case is not one character
    # alone (İ becomes two, Σ depends on its neighbours), the terms across block edges too
    for _ in range(300):
        text = "".join(rng.choice(["a", "B", " ", "’", "日本", "ß", "\u0130", "\u03a3", "σ", "ς", "K"])
                       for _ in range(rng.choice([100, SCAN_BLOCK + 7, 3 * SCAN_BLOCK])))
        if rng.random() < 0.5:
            text = text.replace("\u0130", "i").replace("\u03a3", "s")
        cases.append((text, ["".join(rng.choice(["a", "b", "日", "本", "i\u0307", "σ", "ς", "ss", "k"])
                                     for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(0, 3))]))
    for text, terms in cases:
        assert first_term_at(text, terms) == _first_hit(text, terms), (text[:40], terms)
    assert first_term_at(edge, ["kanban"]) == SCAN_BLOCK - 3


def test_a_folder_filter_reads_only_its_id_range_and_answers_the_same(tmp_path) -> None:
    """A folder filter narrows the FTS5 query to the lowest..highest id of that folder's notes (its
    posting lists are never read outside it), found through the case-insensitive path index. The
    answer must be what the filter alone gives: the folder's notes gain later ids out of order, other
    folders' notes sit in between, the prefix is typed in another case, and one folder is empty."""
    from conftest import write_files

    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync

    vault = tmp_path / "vault"
    write_files(vault, {f"proj/n{i:02}.md": f"# Proj {i}\n\nshared word{' shared' * (i % 4)} alpha\n"
                        for i in range(12)})
    store = Store(vault)
    sync(vault, store=store, progress=False)
    write_files(vault, {f"other/o{i:02}.md": f"# Other {i}\n\nshared word alpha\n" for i in range(30)})
    sync(vault, store=store, progress=False)
    write_files(vault, {"proj/late.md": "# Late\n\nshared shared shared alpha\n",
                        "projects-old/x.md": "# Old\n\nshared alpha\n"})
    sync(vault, store=store, progress=False)
    conn = store.conn
    plan = " ".join(r[3] for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT min(n.id), max(n.id) FROM notes n WHERE n.path LIKE 'proj/%' ESCAPE '\\'"))
    assert "notes_path_nocase" in plan  # the prefix is an index range, not a scan of every path
    lo, hi = lexical.id_span(conn, "PROJ/")
    ids = {int(r[0]) for r in conn.execute("SELECT id FROM notes WHERE path LIKE 'proj/%'")}
    assert (lo, hi) == (min(ids), max(ids)) and hi - lo + 1 > len(ids)  # other notes' ids in between
    assert lexical.id_span(conn, "nowhere/") == (1, 0)

    def reference(expr: str, prefix: str) -> list[tuple[int, float]]:  # the filter alone, no range
        where, params = Filters(path_prefix=prefix).sql("n")
        return [(int(r[0]), -float(r[1])) for r in conn.execute(
            f"SELECT f.rowid, {lexical._BM25_WORDS} AS s FROM fts_words f JOIN notes n ON n.id = f.rowid "
            f"WHERE fts_words MATCH ? AND {where} ORDER BY s LIMIT 100", (expr, *params))]

    for prefix in ("proj/", "PROJ/", "proj", "other/", "nowhere/"):
        for expr in ('"shared"', '"shared" OR "alpha"', '"late"'):
            got = lexical._run(conn, "fts_words", lexical._BM25_WORDS, expr, Filters(path_prefix=prefix), 100)
            assert got == reference(expr, prefix), (prefix, expr)
    got = lexical._run(conn, "fts_words", lexical._BM25_WORDS, '"shared"', Filters(path_prefix="proj/"), 100)
    assert len(got) == 13  # every note of the folder, the late one too; none of projects-old/ or other/
    assert lexical._run(conn, "fts_words", lexical._BM25_WORDS, '"shared"', Filters(path_prefix="proj"), 100) != got


def test_a_read_only_open_of_an_index_without_the_path_index_writes_nothing(tmp_path) -> None:
    """An index made before the NOCASE path index existed is upgraded by the first writer, not by an
    open that only searches: the file's bytes and mtime stay as they were, no WAL frame is written,
    and folder filters answer as they do with the index (LIKE without it is a scan, same rows)."""
    import shutil

    from memory_hub.config import db_path, template_dir
    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync

    vault = tmp_path / "vault"
    shutil.copytree(template_dir(), vault)
    store = Store(vault)
    sync(vault, store=store, progress=False)
    queries = [("certificate", "inbox/"), ("failover", "runbooks/"), ("vectors", "DECISIONS/"), ("deploy", "")]

    def answers(s: Store) -> list[list[tuple[str, float]]]:
        return [[(h.path, h.score) for h in search(s, q, k=20, mode="lexical",
                                                    filters=Filters(path_prefix=p or None)).hits]
                for q, p in queries]

    expected = answers(store)
    assert all(expected)  # every query, filtered or not, finds something
    with store.writer() as conn:  # the index as versions before the path index made it
        conn.execute("DROP INDEX notes_path_nocase")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    path = db_path(vault)
    before = (path.read_bytes(), path.stat().st_mtime_ns)

    reader = Store(vault)
    assert answers(reader) == expected
    assert lexical.id_span(reader.conn, "RUNBOOKS/") != (1, 0)
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # nothing written, not even to the WAL
    reader.close()
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    reader = Store(vault)
    assert reader.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'notes_path_nocase'").fetchone()[0] == 0

    with reader.writer():  # the first writer adds it
        pass
    assert reader.conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'notes_path_nocase'").fetchone()[0] == 1
    assert answers(reader) == expected


def test_counts_survive_writes_that_change_no_note_and_follow_every_one_that_does(tmp_path, monkeypatch) -> None:
    """Document counts are cached per notes stamp: a write of the meta table alone (the watcher's
    rescan records ``last_sync`` once a minute) keeps them, and every write that changes what FTS
    holds moves the stamp: a note written, and staged rows moved into FTS by the sync after one
    stopped before its flush."""
    from conftest import write_files

    from memory_hub.index.store import Store
    from memory_hub.index.sync import sync

    vault = tmp_path / "vault"
    write_files(vault, {f"a{i}.md": f"# A {i}\n\nalpha words\n" for i in range(3)})
    store = Store(vault)
    sync(vault, store=store, progress=False)
    conn = store.conn
    assert lexical.document_frequency(conn, "alpha") == 3
    db = lexical._generation(conn)
    with store.transaction() as c:
        store.set_meta(c, "last_sync", "1")
    lexical._generation(conn)
    assert (db, "alpha") in lexical._df_cache  # the meta write alone left the count cached

    write_files(vault, {"a9.md": "# A 9\n\nalpha again\n"})
    sync(vault, store=store, progress=False)
    assert lexical.document_frequency(conn, "alpha") == 4

    # a bulk sync (more than 32 new notes) stopped after writing its notes, before moving their rows
    write_files(vault, {f"b{i:02}.md": f"# B {i}\n\nbeta words\n" for i in range(40)})
    real_flush = lexical.flush_pending

    def stop(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise KeyboardInterrupt

    monkeypatch.setattr(lexical, "flush_pending", stop)
    with pytest.raises(KeyboardInterrupt):
        sync(vault, store=store, progress=False)
    assert lexical.has_pending(conn)
    assert lexical.document_frequency(conn, "beta") == 0  # staged rows are not searchable yet
    monkeypatch.setattr(lexical, "flush_pending", real_flush)
    report = sync(vault, store=store, progress=False)
    assert not report.added and not lexical.has_pending(conn)  # no note written: only the rows moved
    assert lexical.document_frequency(conn, "beta") == 40


def _reader_vault(make_vault):
    badges = "".join(f"![downloads](https://img.shields.io/github/downloads/acme/quokkatool/{i})\n" for i in range(4))
    files = {
        "plugins/timer.md": f"# Timer\n\n{badges}\n%% Please do not edit: quokkatool badges %%\n\n"
                            "<span class=\"quokkatool\">A countdown timer for focused work.</span>\n",
        "notes/tools.md": "# Tools I use\n\nI use quokkatool every day, and a countdown timer.\n",
        "notes/other.md": "# Other\n\nNothing about it here.\n",
    }
    vault, store = make_vault(files)
    ids = {p: i for i, p in store.conn.execute("SELECT id, path FROM notes")}
    return store, ids


def test_the_word_table_ranks_what_a_reader_reads(make_vault) -> None:
    store, ids = _reader_vault(make_vault)
    # the word only in image addresses, a comment and an HTML attribute of the timer note: not its word
    hits = [i for i, _ in lexical.search_words(store.conn, analyze_query("quokkatool"))]
    assert hits == [ids["notes/tools.md"]]
    # the text the reader sees still counts, tags stripped
    assert ids["plugins/timer.md"] in [i for i, _ in lexical.search_words(store.conn, analyze_query("countdown focused"))]


def test_addresses_stay_findable_as_substrings(make_vault) -> None:
    store, ids = _reader_vault(make_vault)
    # the trigram table keeps every character: an exact identifier still finds the badge note
    assert set(lexical.exact_matches(store.conn, ["quokkatool"])) == {ids["notes/tools.md"], ids["plugins/timer.md"]}
    paths = [h.path for h in search(store, "quokkatool", k=5, mode="lexical").hits]
    assert paths[0] == "notes/tools.md" and "plugins/timer.md" in paths


def test_reaching_expression_holds_every_row_that_can_reach_the_floor() -> None:
    """``_reaching``: phrases that can reach the floor alone stay single, weaker ones are combined
    into the smallest AND groups whose bounds add up to it (no group holding a smaller one)."""
    bound = {'"a"': 0.1, '"b"': 0.5, '"c"': 0.6, '"d"': 2.0}
    ordered = sorted(bound, key=lambda p: (bound[p], p))
    assert lexical._reaching(ordered, bound, 1.0) == '"d" OR ("b" AND "c")'
    # a floor none of the weak ones can reach together: only the strong phrase is left
    assert lexical._reaching(ordered, bound, 1.5) == '"d"'
    # every phrase strong: the expression is the full OR (the caller then runs the plain query)
    assert lexical._reaching(ordered, bound, 0.05) == " OR ".join(ordered)
    assert lexical._reaching(ordered, bound, 5.0) is None  # nothing can reach it
    many = {f'"w{i}"': 0.1 for i in range(lexical.REACHING_MAX_WEAK + 1)}
    assert lexical._reaching(sorted(many), many, 1.0) is None  # too many to combine


def test_pruned_or_ranking_scores_only_rows_that_can_reach_the_floor(make_vault) -> None:
    """When the rarest phrases' rows leave a floor that the commonest ones together could still
    reach, the second pass scores the rows holding such a combination (an AND group), never the
    full OR, and the answer is the full OR's row for row."""
    files = {}
    for i in range(300):
        words = ["alpha"] * (i % 3 + 1) + (["gamma"] if i % 5 == 0 else []) + (["delta"] if i % 6 == 0 else [])
        words += (["zeta"] if i % 29 == 0 else []) + ["filler"] * (i % 17)
        files[f"n{i:04d}.md"] = f"# page {i}\n\n" + " ".join(words) + "\n"
    _, store = make_vault(files)
    conn = store.conn
    terms = ["zeta", "gamma", "delta", "alpha"]
    statements: list[str] = []
    for limit in (5, 20, 60):
        full = lexical._run(conn, "fts_words", lexical._BM25_WORDS, match_expression(terms, "OR"),
                            lexical.NO_FILTERS, limit)
        conn.set_trace_callback(statements.append)
        try:
            got = lexical._run_or(conn, "fts_words", lexical._BM25_WORDS, terms, [], lexical.NO_FILTERS, limit)
        finally:
            conn.set_trace_callback(None)
        assert got == full, limit
    assert any("+rowid IN" in s and " AND " in s.split("+rowid IN")[1] for s in statements), statements


def test_snippets_show_what_a_reader_reads(make_vault) -> None:
    """A plugin note as obsidian-hub writes them: the query word is first in a badge's address, the
    body sits behind a comment and an HTML button. The snippet shows the sentence, not the markup."""
    body = ("%% ----- Do not edit this section ----- %%\n"
            "![GitHub downloads](https://img.shields.io/github/downloads/someone/obsidian-granola-sync/total)\n"
            "# Granola Sync\n\nLinks: [GitHub repository](https://github.com/someone/obsidian-granola-sync)"
            " or <button id=HH>Open in Obsidian</button>\n\n"
            "Sync your meeting notes from Granola into the vault every hour.\n")
    _, store = make_vault({"granola-sync.md": body, "other.md": "# Other\n\nNothing to see here.\n"})
    hit = search(store, "granola sync", k=3, mode="lexical").hits[0]
    assert hit.path == "granola-sync.md"
    # the heading repeats the title and the Links field is markup: the snippet is the sentence
    assert hit.snippet.startswith("…Sync your meeting notes from Granola"), hit.snippet
    for markup in ("://", "shields", "%%", "<button", "Do not edit", "](", "#"):
        assert markup not in hit.snippet, (markup, hit.snippet)
    # a term that only ever occurs inside an address still gets a snippet
    from memory_hub.retrieval.search import first_term_at, readable_term_at, snippet
    text = "see https://example.com/zyx-docs for it"
    at = first_term_at(text, ["zyx"])
    assert readable_term_at(text, ["zyx"], at) == at
    assert snippet(text, ["zyx"], at=at) == "see example.com for it"  # the place's sentence, the URL as a reader sees it
    # a comment the window's end leaves open is cut off, and a heading loses its marks
    assert snippet("Sync vault to GitHub. %% kevinmkchin's sponsor block, hidden from readers", ["sync"]) == (
        "Sync vault to GitHub.")
    assert snippet("## Setting up sync\n\nEnable it.", ["sync"]) == "Setting up sync Enable it."
    # a field line holding the term is passed over for the sentence, a heading too
    fields = "# Note Sync\n\nPlugin ID: note-sync\nDeveloped by: zig\n\nSync notes between vaults.\n"
    assert fields[readable_term_at(fields, ["sync"], first_term_at(fields, ["sync"])):].startswith("Sync notes")


def test_a_query_that_is_a_notes_name_finds_that_note_first(make_vault) -> None:
    """Obsidian's quick switcher opens the note you name: a query that is a note's title or alias
    (case, width and a trailing '?' aside) pins it, even when other notes say the word more often.
    A name several notes share (``Untitled``) names none of them."""
    crowd = " ".join(["外観"] * 12)
    files = {
        "UI/外観.md": "# 外観\n\nテーマとカラースキームを選びます。\n",
        "UI/外観と設定.md": f"# 外観と設定\n\n{crowd} 外観の設定、外観のテーマ、外観のフォント。\n",
        "Publish/SEO.md": "# SEO\n\nSearch engines read the site's description.\n",
        "Publish/Site options.md": "# Site options and SEO\n\n" + "SEO settings, SEO titles, SEO images. " * 8,
        "Tools/Quick switcher.md": "---\naliases: [Jump]\n---\n# Quick switcher\n\nOpen any file by name.\n",
        "Tools/Jump lists.md": "# Jump lists\n\n" + "jump to a heading, jump back, jump forward. " * 8,
        **{f"Inbox {n}/Untitled.md": f"untitled draft {n}\n" for n in range(4)},
    }
    _, store = make_vault(files)
    for query, want in (("外観", "UI/外観.md"), ("seo?", "Publish/SEO.md"), ("ＳＥＯ", "Publish/SEO.md"),
                        ("jump", "Tools/Quick switcher.md")):
        for mode in ("lexical", "hybrid"):
            hits = search(store, query, mode=mode).hits
            assert hits[0].path == want and hits[0].exact, (query, mode, [h.path for h in hits])
            assert not any(h.exact for h in hits[1:]), (query, mode)
    hits = search(store, "Untitled", mode="lexical").hits
    assert len(hits) >= 4 and not any(h.exact for h in hits)
    assert lexical.as_name("  What   is a MOC？ ") == "what is a moc"
