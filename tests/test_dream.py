"""The dream pass on a small real git vault with known clusters, duplicates, a bridge and a mixed note."""

from __future__ import annotations

import datetime as dt
import json
import os
import time

import pytest
from test_dream_fixtures import FILES, build, git, know, snapshot

from memory_hub.cli import main
from memory_hub.dream import DreamError, run_dream
from memory_hub.vault.frontmatter import parse
from memory_hub.vault.notes import parse_note

TODAY = dt.date(2026, 5, 20)


def run(vault, **kw):
    kw.setdefault("backend", "lexical")
    kw.setdefault("use_llm", False)
    return run_dream(vault, today=TODAY, **kw)


def fm(vault, rel):
    return parse((vault / rel).read_text(encoding="utf-8")).data


def test_full_pass_outcomes_then_git_revert_restores_exactly(tmp_path):
    vault = build(tmp_path)
    before = snapshot(vault)
    report = run(vault, split=True)
    steps = {s.name: s for s in report.steps}
    # every step that changed something is its own commit, and the tree is clean afterwards
    assert len(report.commits) == 6 == len(set(report.commits))
    assert git(vault, "status", "--porcelain") == ""
    subjects = git(vault, "log", "--format=%s", f"-{len(report.commits)}").splitlines()
    assert all(s.startswith("dream: ") for s in subjects)

    # gate: the young, link-only and lone captures are untouched
    for rel in ("inbox/young.md", "inbox/link-only.md", "inbox/sourdough.md"):
        assert (vault / rel).read_text(encoding="utf-8") == before[rel]
    assert report.gate == {"ready": 6, "too_young": 1, "no_substance": 1, "protected": 0}

    # promote: CDN cluster → a new root knowledge note citing all three; pool cluster folded
    new = [p for p in snapshot(vault) if p not in before and "/" not in p and "part-2" not in p]
    assert len(new) == 1
    note = parse_note(new[0], (vault / new[0]).read_text(encoding="utf-8"))
    assert note.kind == "knowledge" and "## Sources" in note.body
    assert {ln.target for ln in note.links} >= {"cdn-purge-1", "cdn-purge-2", "cdn-purge-3"}
    for i in (1, 2, 3):
        data = fm(vault, f"inbox/cdn-purge-{i}.md")
        assert data["status"] == "processed" and data["processed_into"] == f"[[{new[0][:-3]}]]"
    failover = (vault / "postgres-failover.md").read_text(encoding="utf-8")
    assert "[[pool-1]]" in failover and "[[pool-2]]" in failover and before["postgres-failover.md"].split("---\n", 2)[2].strip() in failover
    assert fm(vault, "inbox/pool-2.md")["processed_into"] == "[[postgres-failover]]"

    # provenance: the earlier processed capture is now cited under ## Sources
    assert "## Sources\n\n- [[old-processed]]" in failover

    # link discovery: the Go pair (shared words AND shared neighbours) got linked; hubs never
    linked = (vault / "go-error-handling.md").read_text(encoding="utf-8")
    assert "## Related\n\n- [[go-error-wrapping]]" in linked
    assert all("home.md" not in (p["a"], p["b"]) for p in steps["links"].proposals)

    # dedupe: the copy merged into the original, its link rewritten, its title kept as an alias
    assert not (vault / "tls-rotation-copy.md").exists()
    assert "[[tls-rotation|the rotation steps]]" in (vault / "certs-overview.md").read_text(encoding="utf-8")
    assert "TLS certificate rotation steps" in fm(vault, "tls-rotation.md")["aliases"]

    # atomicity: the two-topic note was split (asked for), the part keeps a back link
    part = vault / "mixed-notes-part-2.md"
    assert part.exists() and "matcha" in part.read_text(encoding="utf-8")
    mixed = (vault / "mixed.md").read_text(encoding="utf-8")
    assert "matcha" not in mixed and "autoscaler" in mixed and "[[mixed-notes-part-2]]" in mixed

    # pruning: the weak non-bridge links went, the bridge to the island stayed
    assert "[[sourdough-notes]]" not in (vault / "go-testing.md").read_text(encoding="utf-8")
    assert "[[island]]" in (vault / "go-style.md").read_text(encoding="utf-8")
    assert any("island" in s and "bridge" in s for s in steps["prune"].skipped)

    # never touched: templates, daily notes
    for rel in ("templates/daily.md", "daily/2026-04-01.md"):
        assert (vault / rel).read_text(encoding="utf-8") == before[rel]

    # the pass is revertible: reverting its commits (newest first) restores the vault exactly
    for commit in reversed(report.commits):
        git(vault, "revert", "--no-edit", commit)
    assert snapshot(vault) == before
    assert git(vault, "diff", "HEAD", f"{report.commits[0]}~1", "--stat") == ""


def test_dry_run_writes_nothing_and_second_pass_reports_nothing(tmp_path):
    vault = build(tmp_path)
    before = snapshot(vault)
    head = git(vault, "rev-parse", "HEAD")
    dry = run(vault, dry_run=True)
    assert snapshot(vault) == before and git(vault, "rev-parse", "HEAD") == head
    assert not dry.nothing and dry.commits == []
    assert any(p.get("path") == "mixed.md" for s in dry.steps for p in s.proposals)  # split proposed only
    run(vault)
    assert not (vault / "mixed-notes-part-2.md").exists()  # a split is only proposed unless asked
    again = run(vault, now=time.time() + 3600)  # an hour later
    assert again.nothing and again.commits == [] and "nothing" in again.summary()


def test_notes_being_edited_and_links_from_daily_notes_are_respected(tmp_path):
    files = dict(FILES)
    files["daily/2026-04-02.md"] = "---\nkind: daily\n---\n# 2026-04-02\n\n- [[tls-rotation-copy]]\n"
    vault = build(tmp_path, files)
    now = time.time()
    for rel in ("go-error-handling.md", "go-error-wrapping.md"):  # someone is editing these right now
        os.utime(vault / rel, (now, now))
    before = snapshot(vault)
    report = run(vault, now=now)
    for rel in ("go-error-handling.md", "go-error-wrapping.md", "daily/2026-04-02.md"):
        assert (vault / rel).read_text(encoding="utf-8") == before[rel]
    # the merge would leave the daily note's link dangling: skipped, both notes kept
    assert (vault / "tls-rotation-copy.md").exists()
    dedupe = next(s for s in report.steps if s.name == "dedupe")
    assert dedupe.actions == [] and any(p.startswith("daily/") for p in dedupe.proposals[0]["blocked_by"])


def test_refuses_without_git_and_during_a_merge(tmp_path, make_vault):
    plain, _ = make_vault({"a.md": know("A", "alpha")}, index=False)
    with pytest.raises(DreamError, match="not a git repository"):
        run(plain)
    assert run(plain, dry_run=True).commits == []
    vault = build(tmp_path)
    (vault / ".git" / "MERGE_HEAD").write_text(git(vault, "rev-parse", "HEAD"))
    report = run(vault)
    assert report.skipped and "merge" in report.skipped and report.commits == []


def test_cli_dream_json(tmp_path, capsys):
    vault = build(tmp_path)
    assert main(["--vault", str(vault), "dream", "--dry-run", "--vectors", "lexical", "--no-llm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dry_run"] is True and out["commits"] == []
    assert [s["name"] for s in out["steps"]] == ["promote", "provenance", "links", "dedupe", "atomicity", "prune"]
