"""Pending dream proposals kept for review (dream/proposals.py): the dry run's plan with diffs, stale
detection, and apply/reject from the plan (what the web page's /health offers with a write token)."""

from __future__ import annotations

import json

import pytest
from test_dream_fixtures import build, git, snapshot

from memory_hub.cli import main
from memory_hub.dream import proposals


def test_dry_run_keeps_a_plan_with_diffs_and_writes_nothing(tmp_path, capsys) -> None:
    vault = build(tmp_path)
    before, head = snapshot(vault), git(vault, "rev-parse", "HEAD").strip()
    assert main(["--vault", str(vault), "dream", "--dry-run", "--vectors", "lexical", "--no-llm", "--json"]) == 0
    capsys.readouterr()
    assert snapshot(vault) == before and git(vault, "rev-parse", "HEAD").strip() == head
    plan = proposals.load(vault)
    assert plan is not None and plan.pending and plan.head == head and not plan.moved
    diffs = [d for s in plan.steps for d in s.diffs]
    assert diffs and all(d["diff"].startswith(("--- a/", "--- /dev/null")) for d in diffs)
    assert all(d["added"] + d["removed"] > 0 for d in diffs)
    # the plan is a cache file, not a vault file
    assert proposals.plan_path(vault).is_relative_to(vault / ".memory_hub")
    json.loads(proposals.plan_path(vault).read_text(encoding="utf-8"))


def test_a_step_goes_stale_when_its_file_changes_and_another_applies(tmp_path) -> None:
    vault = build(tmp_path)
    plan = proposals.plan(vault, backend="lexical", use_llm=False)
    editable = [s for s in plan.steps if s.actions and any(not d["create"] for d in s.diffs)]
    assert len(editable) >= 2, [s.name for s in plan.steps]
    stale, other = editable[0], editable[1]
    target = next(d["path"] for d in stale.diffs if not d["create"])
    assert target not in {d["path"] for d in other.diffs}
    (vault / target).write_text((vault / target).read_text(encoding="utf-8") + "\nedited by a person\n",
                                encoding="utf-8")
    steps = {s.name: s for s in proposals.load(vault).steps}
    assert steps[stale.name].stale and target in steps[stale.name].changed
    assert not steps[other.name].stale
    git(vault, "commit", "-qam", "person edit")
    with pytest.raises(proposals.ProposalError, match="no planned step"):
        proposals.apply_step(vault, "no-such-step")
    done = proposals.apply_step(vault, other.name)
    assert done["commit"] and git(vault, "rev-parse", "HEAD").strip() == done["commit"], done
    assert next(s for s in proposals.load(vault).steps if s.name == other.name).applied == done["commit"]
    with pytest.raises(proposals.ProposalError, match="already applied"):
        proposals.apply_step(vault, other.name)


def test_reject_a_planned_key(tmp_path) -> None:
    vault = build(tmp_path)
    plan = proposals.plan(vault, backend="lexical", use_llm=False)
    key = next(k for s in plan.steps for k in s.keys)
    with pytest.raises(proposals.ProposalError, match="not a proposal"):
        proposals.reject_key(vault, "dedupe:nothing-like-this")
    out = proposals.reject_key(vault, key)
    assert key in out["keys"] and out["new"]
    assert key in next(s for s in proposals.load(vault).steps if key in s.keys).rejected
    assert "rejected" in git(vault, "log", "-1", "--name-only", "--format=")
