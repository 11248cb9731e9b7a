"""Dream's parts on their own: no chaining, grab-bags, the LLM partition, bridges, the embedding gate."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
from llm_stub import LLMStub
from test_dream_fixtures import FILES, build, know

from memory_hub.dream import run_dream
from memory_hub.dream.cluster import cluster, partition_vectors, split_grab_bags
from memory_hub.dream.edits import append_to_section, rewrite_links
from memory_hub.dream.prune import bridges


def chain(n: int, step: float = 0.5) -> np.ndarray:
    """Unit vectors on an arc: neighbours are close, the ends are far apart."""
    angles = np.arange(n) * step
    return np.stack([np.cos(angles), np.sin(angles)], axis=1)


def test_a_chain_is_not_merged_transitively():
    vecs = chain(12)  # consecutive cos(0.5)=0.88; ends point the opposite way
    groups = partition_vectors(vecs, threshold=0.8)
    assert sorted(i for g in groups for i in g) == list(range(12))  # a partition
    assert max(len(g) for g in groups) <= 3  # each member within the threshold of its medoid
    for g in groups:  # some member (the medoid) is within the threshold of every other member
        assert any(((vecs[g] @ vecs[m]) >= 0.8 - 1e-6).all() for m in g)


def test_grab_bags_are_split_into_singles():
    groups = split_grab_bags([list(range(9)), [9, 10]])
    assert groups == [[i] for i in range(9)] + [[9, 10]]
    same = np.tile([[1.0, 0.0]], (10, 1))
    assert all(len(g) == 1 for g in cluster(["t"] * 10, same, "lexical")[0])


def test_llm_partition_one_call_validated(monkeypatch):
    titles = ["CDN purge", "pgx pool", "CloudFront purge", "failover pool", "bread"]
    reply = {"groups": [[1, 3], [2, 4, 4, 99], ["x"]]}  # duplicates, out-of-range and junk are dropped
    with LLMStub(lambda p: json.dumps(reply)) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        groups, method, warnings = cluster(titles, None, "lexical", use_llm=True)
    assert len(stub.requests) == 1 and method == "llm" and warnings == []
    assert "1. CDN purge" in stub.requests[0]["payload"]["messages"][-1]["content"]
    assert groups == [[0, 2], [1, 3], [4]]


def test_llm_clustering_in_a_pass_and_fallback_on_failure(tmp_path, monkeypatch):
    vault = build(tmp_path)

    def reply(payload):
        lines = payload["messages"][-1]["content"].splitlines()
        cdn = [int(ln.split(".")[0]) for ln in lines if "CDN" in ln or "CloudFront" in ln]
        return json.dumps({"groups": [cdn]})

    with LLMStub(reply) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        report = run_dream(vault, dry_run=True, backend="lexical", today=dt.date(2026, 5, 20),
                           steps=("promote",))
    assert report.cluster_method == "llm" and len(stub.requests) == 1
    assert [sorted(p["cluster"]) for p in report.steps[0].proposals] == [
        ["inbox/cdn-purge-1.md", "inbox/cdn-purge-2.md", "inbox/cdn-purge-3.md"]]
    with LLMStub(lambda p: "nope", status=503) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        report = run_dream(vault, dry_run=True, backend="lexical", today=dt.date(2026, 5, 20),
                           steps=("promote",))
    assert report.cluster_method == "medoid-lexical" and "503" in report.warnings[0]


def test_bridges():
    adj = {"a": {"b", "c"}, "b": {"a", "c"}, "c": {"a", "b", "d"}, "d": {"c", "e"}, "e": {"d"}}
    assert bridges(adj) == {frozenset("cd"), frozenset("de")}


def test_text_helpers_only_add_or_retarget():
    text = "# T\n\nSee [[old]] and [[old#h|alias]] but `[[old]]` in code.\n\n## Related\n\n- [[x]]\n\n## Log\n\nz\n"
    new, n = rewrite_links(text, lambda t: t == "old", "new")
    assert n == 2 and "[[new|old]]" in new and "[[new#h|alias]]" in new and "`[[old]]`" in new
    added = append_to_section(text, "Related", ["- [[y]]"])
    assert "- [[x]]\n- [[y]]\n\n## Log" in added
    assert append_to_section(added, "Related", ["- [[y]]"]) == added  # idempotent


def test_atomicity_gate_with_embeddings(tmp_path):
    files = {".gitignore": ".memory_hub/\n", "mixed.md": FILES["mixed.md"],
             "cohesive.md": know("Autoscaling", "Kubernetes horizontal pod autoscaler scales deployment replicas "
                                 "on CPU utilisation.\n\nThe HPA reads metrics from the metrics server every fifteen "
                                 "seconds and computes desired replicas.\n\nSet CPU resource requests on every "
                                 "container, otherwise the autoscaler cannot compute utilisation.\n\nScale-down is "
                                 "delayed by a stabilisation window of five minutes to avoid flapping replicas."),
             "tea.md": know("Tea", "Matcha tea ceremony in the tea room with wagashi sweets and a chawan bowl.")}
    vault = build(tmp_path, files)
    report = run_dream(vault, dry_run=True, backend="embed", today=dt.date(2026, 5, 20), use_llm=False,
                       steps=("atomicity",))
    proposals = report.steps[0].proposals
    assert [p["path"] for p in proposals] == ["mixed.md"]
    assert proposals[0]["cohesion"] < 0.5 and proposals[0]["split_before"].startswith("Japanese tea ceremony")


def test_captures_fold_into_the_note_they_link_to(tmp_path):
    from test_dream_fixtures import cap

    files = {".gitignore": ".memory_hub/\n",
             "キャッシュ無効化.md": know("デプロイ時のキャッシュ無効化", "CloudFront の無効化はトラフィック切り替えの後に行う。"),
             "blue-green.md": know("Blue green deploys", "Blue green deploys switch traffic between two colors."),
             "inbox/a.md": cap("Purge order bug", "CDN purge ran before the traffic switch again, old bundle served "
                               "to users for minutes. See [[キャッシュ無効化]]."),
             "inbox/b.md": cap("Purge order again", "CDN purge ran before the traffic switch, old bundle served to "
                               "users; move the job. Related: [[キャッシュ無効化]].")}
    vault = build(tmp_path, files)
    report = run_dream(vault, backend="lexical", today=dt.date(2026, 5, 20), use_llm=False, steps=("promote",))
    assert report.steps[0].actions and "folded 2 captures into キャッシュ無効化.md" in report.steps[0].actions[0]
    assert "Source: [[a]]" in (vault / "キャッシュ無効化.md").read_text(encoding="utf-8")
