"""The usefulness judge: only real use counts, and a path the judge invents is never written."""

from __future__ import annotations

import json
from pathlib import Path

from llm_stub import LLMStub

from memory_hub.eval.usefulness import heuristic, judge, judge_session
from memory_hub.retrieval import session

INJECTED = [
    {"path": "runbooks/db-failover.md", "title": "DB failover runbook",
     "description": "Manual failover of the Aurora writer and checks afterwards"},
    {"path": "cache-invalidation-on-deploy.md", "title": "Cache invalidation on deploy",
     "description": "Purge the CloudFront cache after the blue-green traffic switch, never before"},
    {"path": "tls-certificates.md", "title": "TLS certificates overview",
     "description": "Where certificates come from and what a served chain must contain"},
    {"path": "go-service-conventions.md", "title": "Go service conventions",
     "description": "Layout, logging and graceful shutdown rules for Go services"},
]


def test_heuristic_counts_opened_quoted_and_paraphrased_only() -> None:
    said = ("I followed the Go service conventions for logging. Per the notes, we should purge the "
            "CloudFront cache after the blue-green traffic switch rather than before it.")
    verdicts = {v.path: v for v in heuristic(INJECTED, said, opened=["runbooks/db-failover.md"])}
    assert verdicts["runbooks/db-failover.md"].how == "opened"
    assert verdicts["go-service-conventions.md"].how == "quoted"
    assert verdicts["cache-invalidation-on-deploy.md"].how == "paraphrased"
    assert not verdicts["tls-certificates.md"].used  # only shown, never used


def test_no_assistant_words_means_nothing_used() -> None:
    assert not any(v.used for v in heuristic(INJECTED, "", opened=[]))


def _useful(vault: Path, path: str) -> int:
    from memory_hub.index import usage
    from memory_hub.index.store import Store

    store = Store(vault)
    usage.fold(store, vault)
    return usage.for_note(store, path).useful


def _transcript(path: Path, assistant: str, read: str | None = None) -> Path:
    lines = [{"type": "user", "message": {"role": "user", "content": "how do I fail over the database?"}}]
    content: list[dict] = [{"type": "text", "text": assistant}]
    if read:
        content.append({"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": read}})
    lines.append({"type": "assistant", "message": {"role": "assistant", "content": content}})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_llm_judge_on_loopback_server_ignores_invented_paths(template_vault, tmp_path, monkeypatch) -> None:
    vault, _ = template_vault
    session.update(vault, "s-llm", injected=INJECTED[:3])
    tls_before = (vault / "tls-certificates.md").read_text(encoding="utf-8")
    failover_before = (vault / "runbooks/db-failover.md").read_bytes()
    useful_before = _useful(vault, "runbooks/db-failover.md")
    reply = json.dumps({"verdicts": [
        {"path": "runbooks/db-failover.md", "used": True, "how": "applied"},
        {"path": "tls-certificates.md", "used": False, "how": "none"},
        {"path": "secrets/invented-by-model.md", "used": True, "how": "quoted"},
        {"path": "../outside.md", "used": True, "how": "quoted"},
    ]})
    with LLMStub(lambda payload: reply) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        monkeypatch.setenv("MEMORY_HUB_LLM_MODEL", "judge-test")
        transcript = _transcript(tmp_path / "t.jsonl", "I used the failover steps.")
        summary = judge_session(vault, "s-llm", str(transcript))
    assert stub.requests and stub.requests[0]["payload"]["temperature"] == 0
    assert stub.requests[0]["payload"]["model"] == "judge-test"
    assert summary["judge"] == "llm" and summary["used"] == ["runbooks/db-failover.md"]
    assert summary["written"] == ["runbooks/db-failover.md"]
    assert _useful(vault, "runbooks/db-failover.md") == useful_before + 1
    assert (vault / "runbooks/db-failover.md").read_bytes() == failover_before  # counted in the log, not the note
    assert not (vault / "secrets").exists() and not (vault.parent / "outside.md").exists()
    assert (vault / "tls-certificates.md").read_text(encoding="utf-8") == tls_before
    # judged once: a second run does not count the same injection again
    assert judge_session(vault, "s-llm", str(transcript))["injected"] == 0


def test_llm_failure_falls_back_to_heuristic(monkeypatch) -> None:
    with LLMStub(lambda payload: "{}", status=500) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        verdicts, why = judge(INJECTED, "Following the Go service conventions here.", [])
    assert why and "LLM failed" in why
    assert [v.path for v in verdicts if v.used] == ["go-service-conventions.md"]
    assert all(v.judge == "heuristic" for v in verdicts)


def test_session_judging_with_heuristic_counts_opened_file(template_vault, tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("MEMORY_HUB_LLM_URL", raising=False)
    vault, _ = template_vault
    session.update(vault, "s-h", injected=INJECTED)
    transcript = _transcript(tmp_path / "t.jsonl", "Done.", read=str(vault / "tls-certificates.md"))
    summary = judge_session(vault, "s-h", str(transcript))
    assert summary["judge"] == "heuristic" and summary["used"] == ["tls-certificates.md"]
