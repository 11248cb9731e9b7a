"""Session learnings: rule extractor, vault de-duplication, and the LLM judge over a loopback stub."""

from __future__ import annotations

import datetime as dt
import json

from llm_stub import LLMStub

from memory_hub.capture.learnings import extract_candidates, learnings_from_capture, learnings_from_text
from memory_hub.vault.frontmatter import parse

TRANSCRIPT = """---
title: Session transcript
kind: capture
---
User: thanks, that sounds good!
Assistant: Let me look at the failing test first.
Assistant: The root cause was that `pgxpool` keeps connections to the demoted writer until `MaxConnLifetime` expires, so INSERTs fail with SQLSTATE 25006.
User: ok great
Assistant: Turns out SQLite FTS5 trigram cannot match terms shorter than 3 characters, so `S3` needs the word table instead.
Assistant: Should I also update the README?
"""
TODAY = dt.date(2026, 5, 20)


def test_rule_extractor_keeps_findings_and_drops_chit_chat():
    cands = extract_candidates(TRANSCRIPT)
    texts = [c.text for c in cands]
    assert len(texts) == 2
    assert any("MaxConnLifetime" in t for t in texts) and any("trigram" in t for t in texts)
    assert not any("thanks" in t.lower() or "README" in t for t in texts)


def test_rules_path_writes_new_and_drops_duplicates(make_vault):
    vault, _ = make_vault({
        "inbox/2026-05-19-session.md": TRANSCRIPT,
        # the vault already knows the trigram fact: that candidate is a duplicate
        "fts-notes.md": "# FTS5 trigram limits\n\nSQLite FTS5 trigram cannot match terms shorter than "
                        "3 characters, so S3 needs the word table instead. Turns out this is documented.\n",
    })
    report = learnings_from_capture(vault, "inbox/2026-05-19-session.md", today=TODAY, use_llm=False)
    verdicts = {c.text[:20]: c.verdict for c in report.candidates}
    assert report.judge == "rules"
    assert sorted(verdicts.values()) == ["duplicate", "new"], verdicts
    assert len(report.written) == 1 and report.written[0].startswith("learnings/2026-05-20-")
    note = (vault / report.written[0]).read_text(encoding="utf-8")
    data = parse(note).data
    assert data["kind"] == "capture" and "learning" in data["tags"]
    assert "MaxConnLifetime" in note and "[[2026-05-19-session]]" in note


def test_llm_judge_over_loopback(make_vault, monkeypatch):
    vault, _ = make_vault({"inbox/t.md": TRANSCRIPT})
    reply = json.dumps({"learnings": [
        {"title": "pgxpool keeps demoted-writer connections", "tags": ["postgres"],
         "text": "After failover pgxpool keeps connections to the old writer until MaxConnLifetime; "
                 "drop the connection on SQLSTATE 25006."},
    ]})
    with LLMStub(lambda payload: "```json\n" + reply + "\n```") as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        monkeypatch.setenv("MEMORY_HUB_LLM_MODEL", "qwen-local")
        report = learnings_from_capture(vault, "inbox/t.md", today=TODAY)
    assert report.judge == "llm"
    sent = stub.requests[0]["payload"]
    assert sent["model"] == "qwen-local" and sent["temperature"] == 0
    assert "MaxConnLifetime" in sent["messages"][-1]["content"]
    assert len(report.written) == 1
    data = parse((vault / report.written[0]).read_text(encoding="utf-8")).data
    assert data["title"] == "pgxpool keeps demoted-writer connections" and "postgres" in data["tags"]


def test_llm_failure_falls_back_to_rules(make_vault, monkeypatch):
    vault, _ = make_vault({"inbox/t.md": TRANSCRIPT})
    with LLMStub(lambda p: "{}", status=500) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        report = learnings_from_text(vault, TRANSCRIPT, source="inbox/t.md", today=TODAY, dry_run=True)
    assert report.judge == "rules" and report.warnings and "HTTP 500" in report.warnings[0]
    assert len(report.candidates) == 2 and report.written == []
    assert not (vault / "learnings").exists()


def test_cli_learnings_dry_run_and_bad_path(make_vault, capsys):
    from memory_hub.cli import main

    vault, _ = make_vault({"inbox/t.md": TRANSCRIPT})
    assert main(["--vault", str(vault), "learnings", "inbox/t.md", "--dry-run", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["judge"] == "rules" and len(out["candidates"]) == 2 and out["written"] == []
    assert main(["--vault", str(vault), "learnings", "../outside.md"]) == 1
    assert "cannot read transcript" in capsys.readouterr().err
