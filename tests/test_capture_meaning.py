"""Captures say what they mean: the deadline named, the actionable sentence, a description cut where a
sentence ends, and learnings from an agent's transcript file wherever it lives, titled in words."""

from __future__ import annotations

import datetime as dt
import json
import os
import re

import pytest
import yaml

from memory_hub.capture.braindump import braindump
from memory_hub.cli import main
from memory_hub.vault.frontmatter import split

TODAY = dt.date(2026, 12, 1)
RAMBLE = ("We looked at the cache incident yesterday and the pool drained twice while the nightly batch ran, "
          "which is odd. We need to rotate the signing keys before the audit. Also the dashboards were slow and "
          "nobody knew why, so someone should look at the panel queries at some point.")


def fields(vault, rel):
    return yaml.safe_load(split((vault / rel).read_text(encoding="utf-8"))[0])


@pytest.mark.parametrize("text, due", [
    ("Deadline for the runbook: 2026-12-20.", dt.date(2026, 12, 20)),
    ("The deadline for the failover runbook is 2026-12-20.", dt.date(2026, 12, 20)),
    ("Due date for the migration: Dec 20", dt.date(2026, 12, 20)),
    ("ランブックの締切は12月20日", dt.date(2026, 12, 20)),
    ("Met on 2026-12-20 for the runbook review.", None),  # a date, but no deadline
])
def test_a_named_deadline_sets_due(make_vault, text, due):
    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    result = braindump(vault, text, fetch_urls=False, today=TODAY)
    assert result.due == (due.isoformat() if due else None)
    assert fields(vault, result.path).get("due") == due  # a YAML date, as the look-ahead reads it


def test_the_action_item_is_the_actionable_sentence(make_vault):
    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    result = braindump(vault, RAMBLE, fetch_urls=False, today=TODAY)
    assert result.actions == ["We need to rotate the signing keys before the audit."]
    note = (vault / result.path).read_text(encoding="utf-8")
    assert "- [ ] We need to rotate the signing keys before the audit.\n" in note


def test_the_description_is_never_spliced_mid_sentence(make_vault):
    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    result = braindump(vault, RAMBLE, fetch_urls=False, today=TODAY)
    desc = fields(vault, result.path)["description"]
    assert result.title.endswith("…")  # the title is a cut first sentence …
    # … and the description reads on from the same sentence, whole sentences only
    assert desc.startswith("We looked at the cache incident yesterday and the pool drained twice while the nightly")
    assert ". while" not in desc and "twice. " not in desc
    assert re.search(r"[.!?]( \(\d action items?\))?$", desc), desc
    assert len(desc) <= 240
    long = braindump(vault, "word " * 120, fetch_urls=False, today=TODAY)  # one endless sentence
    ldesc = fields(vault, long.path)["description"]
    assert ldesc.endswith("word…") and len(ldesc) <= 240


def claude_transcript(path):
    lines = [
        {"type": "user", "message": {"role": "user", "content": "Why do inserts fail after the failover?"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "The root cause was that `pgxpool` keeps connections to the demoted writer "
                                     "until `MaxConnLifetime` expires, so INSERTs fail with SQLSTATE 25006."},
            {"type": "tool_use", "name": "Bash", "input": {"command": "psql -c 'select pg_is_in_recovery()'"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "content": '{"error": "read-only transaction", "config": "pool_max_conns=4"}'}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "Turns out SQLite FTS5 trigram cannot match terms shorter than 3 characters, "
                                     "so `S3` needs the word table instead."}]}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return path


def test_learnings_read_a_transcript_outside_the_vault_and_title_it_in_words(make_vault, tmp_path, capsys):
    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    transcript = claude_transcript(tmp_path / "home" / ".claude" / "projects" / "-work-app" / "5f1c.jsonl")
    before = sorted(p.name for p in transcript.parent.iterdir())
    assert main(["--vault", str(vault), "learnings", str(transcript), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["written"]) == 2 and all(p.startswith("learnings/") for p in report["written"])
    titles = [c["title"] for c in report["candidates"]]
    assert not [t for t in titles if "{" in t or '"' in t], titles  # words, never raw JSON
    assert any(t.startswith("The root cause was that pgxpool") for t in titles)
    for rel in report["written"]:
        note = (vault / rel).read_text(encoding="utf-8")
        assert "5f1c.jsonl" in note and str(transcript.parent) not in note  # named, the folder not leaked
        assert (vault / rel).resolve().is_relative_to(vault.resolve())  # writes stay inside the vault
    assert sorted(p.name for p in transcript.parent.iterdir()) == before  # the transcript folder untouched


def test_learnings_from_json_lines_on_stdin_are_titled_in_words(make_vault, tmp_path, monkeypatch, capsys):
    import io

    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    data = claude_transcript(tmp_path / "t.jsonl").read_text(encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(data))
    assert main(["--vault", str(vault), "learnings", "-", "--dry-run", "--json"]) == 0
    titles = [c["title"] for c in json.loads(capsys.readouterr().out)["candidates"]]
    assert titles and not [t for t in titles if "{" in t or '"type"' in t], titles


def test_learnings_refuse_what_is_not_a_transcript(make_vault, tmp_path, capsys):
    vault, _ = make_vault({"home.md": "# Home\n"}, index=False)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\x00\x01\x02" * 100)
    for path, why in ((fifo, "not a regular file"), (binary, "binary"), (tmp_path / "missing.jsonl", "No such file"),
                      (tmp_path, "not a transcript file")):
        assert main(["--vault", str(vault), "learnings", str(path)]) == 1
        assert why in capsys.readouterr().err
    assert not (vault / "learnings").exists()
