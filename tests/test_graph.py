"""The link graph: neighbours in both directions by recursive CTE, hop distances, backlinks."""

from __future__ import annotations

import os
import time

from memory_hub.index import graph


def _ids(store) -> dict[str, int]:
    return {r[0]: r[1] for r in store.conn.execute("SELECT path, id FROM notes")}


def test_neighbourhood_hops_and_directions(make_vault) -> None:
    # a → b → c → d, e → a (backlink), f isolated, a → missing (dangling), a ↔ g (both ways)
    vault, store = make_vault({
        "a.md": "[[b]] [[missing]] [[g]]\n",
        "b.md": "[[c]]\n",
        "c.md": "[[d]]\n",
        "d.md": "end\n",
        "e.md": "[[a]] [[a|again]]\n",
        "f.md": "alone\n",
        "g.md": "[[a]]\n",
    })
    ids = _ids(store)
    conn = store.conn
    name = {v: k for k, v in ids.items()}
    one = {name[i]: h for i, h in graph.neighbourhood(conn, [ids["a.md"]], 1).items()}
    assert one == {"b.md": 1, "e.md": 1, "g.md": 1}
    two = {name[i]: h for i, h in graph.neighbourhood(conn, [ids["a.md"]], 2).items()}
    assert two == {"b.md": 1, "e.md": 1, "g.md": 1, "c.md": 2}
    three = {name[i]: h for i, h in graph.neighbourhood(conn, [ids["a.md"]], 3).items()}
    assert three["d.md"] == 3 and "f.md" not in three
    # several seeds: seeds excluded, distance to the nearest seed
    multi = {name[i]: h for i, h in graph.neighbourhood(conn, [ids["a.md"], ids["d.md"]], 1).items()}
    assert multi == {"b.md": 1, "e.md": 1, "g.md": 1, "c.md": 1}
    assert graph.neighbourhood(conn, [], 2) == {}
    assert graph.neighbourhood(conn, [ids["f.md"]], 2) == {}

    near = {n.path: n for n in graph.neighbours(conn, ids["a.md"], hops=2)}
    assert near["b.md"].direction == "out" and near["e.md"].direction == "in" and near["g.md"].direction == "both"
    assert near["c.md"].hops == 2 and near["c.md"].direction == "out>out" and near["c.md"].via == "b.md"
    assert [n.hops for n in graph.neighbours(conn, ids["a.md"], hops=2)] == sorted(n.hops for n in near.values())

    counts = graph.backlink_counts(conn)
    assert counts[ids["a.md"]] == 2  # e (twice, counted once) and g
    assert graph.backlink_counts(conn, [ids["b.md"], ids["f.md"]]) == {ids["b.md"]: 1}
    out = [(r["target"], r["target_path"]) for r in graph.outgoing(conn, ids["a.md"])]
    assert out == [("b", "b.md"), ("missing", None), ("g", "g.md")]


def test_template_vault_graph(template_vault) -> None:
    vault, store = template_vault
    conn = store.conn
    ids = _ids(store)
    # the one dangling link of the starter vault is kept, not dropped
    dangling = conn.execute(
        "SELECT n.path, l.target FROM links l JOIN notes n ON n.id = l.source_id WHERE l.target_id IS NULL"
    ).fetchall()
    assert [tuple(r) for r in dangling] == [("runbooks/db-failover.md", "postgres-vacuum-tuning")]
    # daily notes and templates take part in the graph
    daily = [p for p in ids if p.startswith("daily/")]
    assert any(graph.neighbourhood(conn, [ids[p]], 1) for p in daily)
    home = {n.path for n in graph.neighbours(conn, ids["home.md"], 1)}
    assert {"tls-certificates.md", "runbooks/db-failover.md", "オンボーディング手順.md",
            "decisions/dec-0054-use-lancedb-for-vectors.md"} <= home
    # every body link in home.md resolved
    assert all(r["target_path"] for r in graph.outgoing(conn, ids["home.md"]))


def test_adjacency_matches_one_hop_neighbourhoods(template_vault) -> None:
    _, store = template_vault
    ids = [r[0] for r in store.conn.execute("SELECT id FROM notes")]
    adj = graph.adjacency(store.conn, ids)
    assert sum(len(v) for v in adj.values()) > 50
    for i in ids:
        assert adj[i] == set(graph.neighbourhood(store.conn, [i], 1)), i


def test_hubs_are_counted_by_distinct_neighbours(make_vault) -> None:
    """A hub has more distinct neighbours than the limit; duplicate links and self-links do not count."""
    files = {f"n{i}.md": "[[hub]] [[hub]]\n" for i in range(5)}  # duplicates count once
    files["hub.md"] = "[[hub]] [[n0]]\n"  # a self-link never counts
    files["pair.md"] = "[[n0]] [[n1]] [[n1]]\n"
    vault, store = make_vault(files)
    ids = _ids(store)
    conn = store.conn
    everyone = [ids[p] for p in ("hub.md", "pair.md", "n0.md", "n1.md")]
    plain = graph.adjacency(conn, everyone)
    assert len(plain[ids["hub.md"]]) == 5 and len(plain[ids["pair.md"]]) == 2

    links = graph.LinkGraph(conn)
    assert links.hubs(everyone, 4) == {ids["hub.md"]}
    assert links.hubs(everyone, 5) == set()  # five neighbours is not more than five
    assert links.hubs([], 1) == set()


def test_in_memory_graph_answers_as_sql_and_follows_syncs(make_vault) -> None:
    """``graph.cached`` (what search expands through) gives the SQL functions' answers, and a sync
    that adds, removes or re-resolves links is seen by the next call in the same process."""
    from memory_hub.index import cache
    from memory_hub.index.sync import sync

    files = {f"n{i}.md": "[[hub]] [[hub]]\n" for i in range(5)}
    files["hub.md"] = "[[hub]] [[n0]] [[later]]\n"  # a self-link, and a link that dangles for now
    files["pair.md"] = "[[n0]] [[n1]] [[n1]]\n"
    vault, store = make_vault(files)
    conn = store.conn
    ids = _ids(store)
    everyone = list(ids.values())
    links = graph.cached(conn)
    plain = graph.adjacency(conn, everyone)
    assert links.adjacency(everyone) == plain
    for limit in (1, 2, 4, 5):
        assert links.hubs(everyone, limit) == {i for i, near in plain.items() if len(near) > limit}
    assert {i: links.degree(i) for i in everyone} == {i: len(near) for i, near in plain.items()}
    assert graph.cached(conn) is links  # nothing changed: the same object, no rescan
    assert cache.ranked_ids(conn) == ids
    # A sync that finds nothing to do keeps the copies too (files older than the last sync: a file
    # written in the same moment as a sync is read again by the next one, as git does).
    past = time.time() - 100
    for path in vault.glob("*.md"):
        os.utime(path, (past, past))
    sync(vault, store=store)
    settled = graph.cached(conn)
    sync(vault, store=store)
    assert graph.cached(conn) is settled

    (vault / "later.md").write_text("[[pair]]\n", encoding="utf-8")  # the dangling link comes alive
    (vault / "n4.md").write_text("no links now\n", encoding="utf-8")
    sync(vault, store=store)
    ids = _ids(store)
    everyone = list(ids.values())
    fresh = graph.cached(conn)
    assert fresh is not links
    assert fresh.adjacency(everyone) == graph.adjacency(conn, everyone)
    assert ids["later.md"] in fresh.neighbours(ids["hub.md"]) and ids["pair.md"] in fresh.neighbours(ids["later.md"])
    assert ids["n4.md"] not in fresh.neighbours(ids["hub.md"])
    assert cache.ranked_ids(conn) == ids

    (vault / "pair.md").unlink()
    sync(vault, store=store)
    assert "pair.md" not in cache.ranked_ids(conn)
    assert graph.cached(conn).adjacency(list(_ids(store).values())) == graph.adjacency(conn, list(_ids(store).values()))


def test_one_look_reads_the_stamps_once_per_search_and_the_next_search_sees_a_sync(make_vault) -> None:
    """``cache.one_look`` (around every search) reads the cache stamp and the lexical counts' stamp
    once per block instead of at every cached lookup; a sync between two searches is seen by the
    second, lexically and in the cached path -> id map."""
    from memory_hub.index import cache, lexical
    from memory_hub.index.sync import sync
    from memory_hub.retrieval.search import search

    vault, store = make_vault({f"n{i}.md": f"# Note {i}\nkanban board number {i} [[n0]]\n" for i in range(4)})
    conn = store.conn
    statements: list[str] = []
    search(store, "kanban board", mode="lexical")  # warm the cached copies
    conn.set_trace_callback(statements.append)
    try:
        first = search(store, "kanban board", mode="hybrid+graph")
    finally:
        conn.set_trace_callback(None)
    assert first.hits
    assert sum("pragma_database_list" in s for s in statements) <= 1  # cache.stamp's statement
    assert sum(s.strip().upper().startswith("PRAGMA DATABASE_LIST") for s in statements) <= 1  # lexical's
    with cache.one_look(conn):  # inside a block, repeated lookups reuse what was read
        assert cache.stamp(conn) is cache.stamp(conn)
        looked: list[str] = []
        conn.set_trace_callback(looked.append)
        try:
            lexical._generation(conn)
            lexical._generation(conn)
        finally:
            conn.set_trace_callback(None)
        assert looked == []  # the stamp was read by the first cache.stamp above: nothing is read again
        assert cache.pinned(conn) is not None
    assert cache.pinned(conn) is None  # and the block leaves nothing behind

    (vault / "fresh.md").write_text("# Fresh\nkanban board kanban board kanban board\n", encoding="utf-8")
    sync(vault, store=store)
    second = search(store, "kanban board", mode="lexical")
    assert "fresh.md" in [h.path for h in second.hits]
    assert "fresh.md" in cache.ranked_ids(conn)


def test_a_cached_value_missed_by_two_threads_at_once_is_built_once(tmp_path) -> None:  # noqa: ANN001
    """A fresh server's first search and its start-up catch-up miss the link graph together; each
    built it (~1 s of CPU at 100k notes, both under one GIL). The second must wait for the first's."""
    import threading
    import time

    from memory_hub.index import cache
    from memory_hub.index.store import Store

    (tmp_path / "a.md").write_text("# A\n", encoding="utf-8")
    store = Store(tmp_path)
    builds: list[int] = []

    def slow(conn) -> int:  # noqa: ANN001
        builds.append(1)
        time.sleep(0.3)
        return 42

    start = threading.Barrier(2)
    got: list[int] = []

    def ask() -> None:
        conn = store.conn  # each thread's own connection to the same index file
        start.wait()
        got.append(cache.cached(conn, "single-flight-test", slow))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [42, 42] and len(builds) == 1


def test_in_memory_graph_of_a_vault_without_links(make_vault) -> None:
    """No resolved link at all (every target dangles): every note has no neighbour, none is a hub,
    and asking for an id the index never had answers empty rather than failing."""
    vault, store = make_vault({"a.md": "[[nowhere]]\n", "b.md": "plain text\n"})
    ids = _ids(store)
    links = graph.LinkGraph(store.conn)
    assert links.adjacency(ids.values()) == {i: frozenset() for i in ids.values()}
    assert links.hubs(ids.values(), 0) == set()
    assert links.neighbours(10**9) == frozenset() and 10**9 not in links and links.degree(-1) == 0


def test_the_in_memory_graph_is_rebuilt_only_when_links_change(make_vault) -> None:
    """At 100k notes rebuilding the graph is 0.7 s of CPU, and the server's watcher did it after
    every edit before re-embedding the note. An edit of a note's text that leaves its resolved links
    as they were keeps the graph; adding a link, removing one, deleting a linked note or making a
    dangling link resolve rebuilds it — and after every step it answers as the SQL adjacency."""
    from memory_hub.index.sync import sync

    files = {"a.md": "see [[b]]\n", "b.md": "plain\n", "c.md": "see [[missing]] and [[a]] [[a]]\n"}
    vault, store = make_vault(files)
    conn = store.conn

    def same_as_sql(links: graph.LinkGraph) -> None:
        ids = list(_ids(store).values())
        assert links.adjacency(ids) == graph.adjacency(conn, ids)

    def step(path: str, text: str | None) -> tuple[graph.LinkGraph, graph.LinkGraph]:
        before = graph.cached(conn)
        if text is None:
            (vault / path).unlink()
        else:
            (vault / path).write_text(text, encoding="utf-8")
        sync(vault, store=store, progress=False)
        after = graph.cached(conn)
        same_as_sql(after)
        return before, after

    same_as_sql(graph.cached(conn))
    before, after = step("a.md", "see [[b]]\n\nmore words, same link\n")
    assert after is before  # the text changed, the links did not
    before, after = step("c.md", "see [[missing]] and [[a]]\n")  # a duplicate link dropped: same edges
    assert after is before
    before, after = step("b.md", "now [[c]]\n")
    assert after is not before  # a new edge
    before, after = step("missing.md", "here now\n")
    assert after is not before  # c's dangling link resolved
    before, after = step("b.md", "no links\n")
    assert after is not before  # an edge gone
    before, after = step("a.md", None)
    assert after is not before  # a linked note deleted
