"""Recall: modes, its own scoring and persisted incremental index, fusion, session de-duplication."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from memory_hub.eval import telemetry
from memory_hub.hooks.prompt import answer
from memory_hub.retrieval.recall import GRAPH, LIGHT, TARGETED, Recaller, RecallIndex, classify, is_trivial
from memory_hub.vault.usage import record_useful


def note(title: str, body: str, description: str = "", tags: str = "[]", extra: str = "") -> str:
    return f"---\ntitle: {title}\ndescription: {description}\ntags: {tags}\n{extra}---\n\n{body}\n"


def test_modes(template_vault: tuple[Path, object]) -> None:
    vault, _ = template_vault
    index = RecallIndex(vault)
    index.refresh()
    cases = {
        "how do blue-green deploys and cache invalidation relate to each other?": GRAPH,
        "認証フローとパスキーの関係を教えて": GRAPH,
        "What is the relationship between TLS certificates and the March incident?": GRAPH,
        "please update runbooks/db-failover.md with the new DNS TTL": TARGETED,
        "the build fails with ERR_CERT_AUTHORITY_INVALID again": TARGETED,
        "what does `apply_secrets` do before scale-up": TARGETED,
        "Walk me through the TLS certificate rotation for nginx": TARGETED,  # names a note title
        "make the parser a bit faster and add a test": LIGHT,
    }
    for prompt, mode in cases.items():
        assert classify(prompt, index).mode == mode, prompt
    assert "runbooks/db-failover.md" in classify("see runbooks/db-failover.md", index).subjects


def test_trivial_prompts_get_no_block(template_vault: tuple[Path, object]) -> None:
    vault, _ = template_vault
    recaller = Recaller(vault)
    for prompt in ("ok", "thanks!", "yes", "はい", "続けて", "  ", "go on"):
        assert is_trivial(prompt)
        result = recaller.recall(prompt)
        assert result.block is None and result.skipped == "trivial"
    assert not is_trivial("認証エラー")  # short, but it names something


def test_title_beats_body_and_body_repetition_is_capped(make_vault) -> None:
    vault, _ = make_vault({
        "about.md": note("Kafka consumer lag", "Short note about lag."),
        "mentions.md": note("Weekly sync", "kafka " * 60 + "lag " * 60 + "other words here."),
        "filler.md": note("Unrelated", "nothing to see"),
    })
    recaller = Recaller(vault, hybrid=False)
    recaller.refresh()
    ranked = recaller.rank("kafka consumer lag", classify("x", recaller.index))
    assert [r.path for r in ranked][:2] == ["about.md", "mentions.md"]
    index = RecallIndex(vault)
    index.refresh()
    assert index.data.postings["kafka"]["mentions.md"] == 4.0  # 60 repetitions count as 4


def test_coverage_beats_a_hub_word(make_vault) -> None:
    hub = note("Deploy deploy", "deploy " * 40, description="deploy deploy deploy", tags="[deploy]")
    six = note("Rollout notes", "The canary deploy needs a feature flag, a metrics dashboard, an alert and a rollback plan.")
    vault, _ = make_vault({"hub.md": hub, "six.md": six, "other.md": note("Other", "cooking pasta")})
    recaller = Recaller(vault, hybrid=False)
    recaller.refresh()
    decision = classify("deploy", recaller.index)
    ranked = recaller.rank(
        "canary deploy with feature flag, metrics dashboard, alert and rollback", decision)
    assert ranked[0].path == "six.md"
    assert ranked[0].coverage > ranked[1].coverage


def test_useful_and_recent_reads_boost(make_vault) -> None:
    body = "How to restart the payment worker safely."
    vault, _ = make_vault({"a.md": note("Payment worker A", body), "b.md": note("Payment worker B", body)})
    recaller = Recaller(vault, hybrid=False)
    decision = classify("restart the payment worker", recaller.index)
    recaller.refresh()
    first = [r.path for r in recaller.rank("restart the payment worker", decision)]
    loser = first[1]
    before = {n: (vault / n).read_bytes() for n in ("a.md", "b.md")}
    assert record_useful(vault, [loser]) == [loser]
    recaller = Recaller(vault, hybrid=False)  # a new process (a cold hook) sees the count at once
    recaller.refresh()
    assert [r.path for r in recaller.rank("restart the payment worker", decision)][0] == loser
    assert {n: (vault / n).read_bytes() for n in ("a.md", "b.md")} == before  # the count is not in the note


def test_graph_overview_alone_counts_backlinks(make_vault) -> None:
    files = {
        "hub-topic.md": note("Service mesh", "service mesh routing"),
        "plain.md": note("Service mesh notes", "service mesh routing"),
    }
    for i in range(5):
        files[f"n{i}.md"] = note(f"Linker {i}", f"see [[hub-topic]] for zzz{i}")
    vault, _ = make_vault(files)
    recaller = Recaller(vault, hybrid=False)
    recaller.refresh()
    light = recaller.rank("service mesh routing", classify("service mesh routing", recaller.index))
    graph = recaller.rank("how does the service mesh relate to routing",
                          classify("how does the service mesh relate to routing", recaller.index))
    assert recaller.index.backlinks()["hub-topic.md"] == 5
    light_scores = {r.path: r.score for r in light}
    graph_scores = {r.path: r.score for r in graph}
    assert light_scores["plain.md"] >= light_scores["hub-topic.md"]  # no backlinks in light mode
    assert graph_scores["hub-topic.md"] > graph_scores["plain.md"]


def test_index_persists_and_updates_incrementally(make_vault) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", f"body {i} alpha") for i in range(30)})
    first = RecallIndex(vault)
    assert first.refresh()["changed"] == 30
    assert first.path.exists()
    warm = RecallIndex(vault)
    assert warm.load()  # one file read
    assert warm.refresh() == {"changed": 0, "removed": 0, "notes": 30}
    p = vault / "n3.md"
    p.write_text(note("Note 3 renamed topic", "zebra crossing"), encoding="utf-8")
    os.utime(p, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    (vault / "n4.md").unlink()
    again = RecallIndex(vault)
    again.load()
    assert again.refresh() == {"changed": 1, "removed": 1, "notes": 29}
    assert "n3.md" in again.data.postings["zebra"]
    assert "n4.md" not in again.data.notes
    assert all("n4.md" not in posting for posting in again.data.postings.values())


def test_partial_build_continues_next_run(make_vault) -> None:
    vault, _ = make_vault({f"n{i}.md": note(f"Note {i}", "text") for i in range(20)}, index=False)
    index = RecallIndex(vault)
    index.refresh(deadline=time.monotonic() - 1)  # out of time at once
    assert not index.complete
    resumed = RecallIndex(vault)
    resumed.load()
    resumed.refresh()
    assert resumed.complete and len(resumed.data.notes) == 20


def test_session_never_repeats_a_note_and_telemetry_records(template_vault: tuple[Path, object]) -> None:
    vault, _ = template_vault
    recaller = Recaller(vault)
    one = answer(recaller, "how do we rotate TLS certificates on nginx", "sess-1", served_by="cold")
    assert one["injected"]
    two = answer(recaller, "TLS certificate rotation and the expired intermediate incident", "sess-1")
    assert not set(one["injected"]) & set(two["injected"])
    other = answer(recaller, "how do we rotate TLS certificates on nginx", "sess-2")
    assert set(other["injected"]) == set(one["injected"])
    events = [e for e in telemetry.events(vault) if e.get("event") == "recall"]
    assert len(events) == 3
    e = events[0]
    for key in ("ts", "mode_chosen", "mode", "confidence", "candidates", "injected", "latency_ms", "served_by"):
        assert key in e
    assert e["served_by"] == "cold" and e["injected"] == one["injected"]
    summary = telemetry.summarize(vault)
    assert summary["recalls"] == 3 and summary["served_by"] == {"cold": 3}


def test_targeted_without_subject_falls_back_to_light(template_vault: tuple[Path, object]) -> None:
    vault, _ = template_vault
    result = Recaller(vault).recall("what about `frobnicate_widget_v9` in the deploy pipeline")
    assert result.mode_chosen == TARGETED and result.mode == LIGHT
    assert result.fallback == "targeted-subject-not-found"


@pytest.mark.parametrize("fuse", [False, True])
def test_golden_cases_mostly_found(template_vault: tuple[Path, object], fuse: bool) -> None:
    """Recall (alone and fused) finds the starter vault's golden notes for most cases."""
    import yaml

    vault, _ = template_vault
    spec = yaml.safe_load((vault / "memory-hub-eval.yaml").read_text(encoding="utf-8"))
    recaller = Recaller(vault)
    hits = total = 0
    for case in spec["cases"]:
        result = recaller.recall(case["query"] + " ?", fuse=fuse, k=5)
        got = [n.path for n in result.notes[:5]]
        total += 1
        hits += any(e in got for e in case["expect"])
    assert hits / total >= 0.7, f"{hits}/{total}"


def test_saved_transcripts_rank_below_curated_notes(make_vault) -> None:
    body = "Rotate the signing key for the billing webhook every quarter."
    raw = ("---\ntitle: Billing webhook signing key\nsource: claude-code-hook\ntags: [transcript, claude-code]\n---\n\n"
           + body + "\n")
    vault, _ = make_vault({"inbox/raw.md": raw, "curated.md": note("Billing webhook signing key", body)})
    recaller = Recaller(vault, hybrid=False)
    recaller.refresh()
    ranked = recaller.rank("billing webhook signing key rotation", classify("x", recaller.index))
    assert [r.path for r in ranked] == ["curated.md", "inbox/raw.md"]
    assert ranked[0].score == pytest.approx(2 * ranked[1].score, rel=0.01)


def test_long_prompts_reach_the_hybrid_search_as_their_rarest_terms(template_vault) -> None:
    vault, _ = template_vault
    seen: list[str] = []

    def spy(query: str, k: int, prefix: str | None) -> list[tuple[str, bool]]:
        seen.append(query)
        return []

    recaller = Recaller(vault, hybrid=spy)
    long_prompt = ("Please look at the deploy pipeline again; " * 10) + "the apply_secrets step fails on passkey rollout"
    recaller.recall(long_prompt)
    recaller.recall("short prompt about the deploy pipeline")
    assert len(seen[0].split()) <= 12 and "apply_secret" in seen[0]
    assert seen[1] == "short prompt about the deploy pipeline"


def test_prompt_embedding_only_breaks_ties(template_vault) -> None:
    """With a real local embedder the rules still decide clear cases; the embedding is a hint."""
    from memory_hub.index.embed import load_embedder
    from memory_hub.retrieval.recall import _Prototypes

    vault, _ = template_vault
    index = RecallIndex(vault)
    index.refresh()
    protos = _Prototypes(load_embedder())
    best, margin = protos.nearest("fix the typo in the README and rerun the linter")
    assert best == LIGHT and margin > 0
    assert classify("fix the typo in the README and rerun the linter", index, protos).mode == LIGHT
    assert classify("認証フローとパスキーの関係を教えて", index, protos).reason == "asks how things connect"


def test_graph_question_pins_the_two_things_it_names(make_vault) -> None:
    roundup = note("Weekly roundup", "dataview templater " * 10 + "and twenty other plugins")
    vault, _ = make_vault({
        "dataview.md": note("Dataview", "Query your notes like a database."),
        "templater.md": note("Templater", "Templates with scripts."),
        "roundup.md": roundup,
    })
    recaller = Recaller(vault, hybrid=False)
    graph = recaller.recall("how do Dataview and Templater relate?")
    assert graph.mode == GRAPH and {n.path for n in graph.notes[:2]} == {"dataview.md", "templater.md"}
    light = recaller.recall("dataview templater plugins")
    assert light.mode == LIGHT and light.notes[0].path == "roundup.md"  # one-word titles are not subjects here
