"""Same-turn hints against a real loopback HTTP server speaking the OpenAI chat API (llm_stub).

Every path the seed describes: the hint wins the race and adds what its terms find; it loses and
the session's previous hint serves; it loses with no previous hint; the endpoint answers garbage;
no endpoint at all. The prompt is never held past its deadline, and a lost hint is kept (by the
server's thread, or the cold hook's detached worker) for the session's next prompt.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from llm_stub import LLMStub

from memory_hub.eval import telemetry
from memory_hub.hooks.prompt import answer
from memory_hub.retrieval import hints, session
from memory_hub.retrieval.recall import Recaller

ZEBRA = ("---\ntitle: Pedestrian crossing survey\ndescription: Where the striped crossings are.\n---\n\n"
         "The zebra crossing by the academy was repainted in May.\n")
PROMPT = "where do the kids get over the road near the school on Elm?"
HINT = '{"terms": ["zebra crossing", "pedestrian"]}'


def note(title: str, body: str) -> str:
    return f"---\ntitle: {title}\n---\n\n{body}\n"


@pytest.fixture
def vault(make_vault) -> Path:
    files = {"crossing.md": ZEBRA, "bikes.md": note("Bike lanes", "Bike lanes on Main Street and the road plan.")}
    for i in range(4):
        files[f"misc{i}.md"] = note(f"Meeting {i}", f"notes about budgets and staffing {i}")
    root, _ = make_vault(files)
    return root


def _wait_for(predicate, seconds: float = 20.0) -> bool:  # noqa: ANN001
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_no_llm_is_recorded(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMORY_HUB_LLM_URL", raising=False)
    out = answer(Recaller(vault), PROMPT, "s0")
    assert out["telemetry"]["hint_path"] == hints.NO_LLM


def test_a_hint_that_wins_adds_what_its_terms_find(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recaller = Recaller(vault)
    monkeypatch.delenv("MEMORY_HUB_LLM_URL", raising=False)
    plain = answer(recaller, PROMPT, "s-plain")
    assert "crossing.md" not in plain["injected"]  # the prompt shares no word with the note that answers it
    with LLMStub(lambda payload: HINT) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        out = answer(recaller, PROMPT, "s1", hint_until=time.monotonic() + 10)
    event = out["telemetry"]
    assert event["hint_path"] == hints.WON and event["hint"]["terms"] == ["zebra crossing", "pedestrian"]
    assert "crossing.md" in out["injected"] and "crossing.md" in event["hint"]["added"]
    asked = stub.requests[0]["payload"]
    assert asked["max_tokens"] <= 64 and asked["temperature"] == 0 and PROMPT in asked["messages"][-1]["content"]
    assert session.load(vault, "s1")["hint"]["terms"] == ["zebra crossing", "pedestrian"]  # kept for the next prompt
    logged = [e for e in telemetry.events(vault) if e.get("session") == "s1"][-1]
    assert logged["hint_path"] == hints.WON
    assert telemetry.summarize(vault)["hint_path"] == {hints.NO_LLM: 1, hints.WON: 1}  # memory-hub stats


def test_a_slow_hint_loses_then_serves_the_next_prompt(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(payload: dict) -> str:
        time.sleep(1.5)
        return HINT

    recaller = Recaller(vault)
    with LLMStub(slow) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        t0 = time.monotonic()
        first = answer(recaller, PROMPT, "s2", served_by="warm", hint_until=time.monotonic() + 0.2)
        took = time.monotonic() - t0
        assert first["telemetry"]["hint_path"] == hints.TIMEOUT
        assert took < 1.4  # answered without waiting for the model (which takes 1.5 s)
        assert "crossing.md" not in first["injected"]
        # the server's thread finishes the call and keeps its terms for the session's next prompt
        assert _wait_for(lambda: "hint" in session.load(vault, "s2"))
        second = answer(recaller, "and what else is near the school on Elm?", "s2", served_by="warm",
                        hint_until=time.monotonic() + 0.2)
    event = second["telemetry"]
    assert event["hint_path"] == hints.PREVIOUS and event["hint"]["terms"] == ["zebra crossing", "pedestrian"]
    assert "crossing.md" in second["injected"]


@pytest.mark.parametrize("reply", ["this is not json at all", '{"plan": "first look at the notes"}',
                                   '{"terms": [42, "", null]}'])
def test_garbage_from_the_model_falls_back_to_the_sync_ranking(vault: Path, monkeypatch: pytest.MonkeyPatch,
                                                               reply: str) -> None:
    recaller = Recaller(vault)
    with LLMStub(lambda payload: reply) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        out = answer(recaller, PROMPT, "s3", hint_until=time.monotonic() + 10)
        assert out["telemetry"]["hint_path"] == hints.SYNC_ONLY
        assert out["telemetry"]["hint"]["error"]
        session.update(vault, "s3", hint={"terms": ["zebra crossing"], "at": time.time()})
        again = answer(recaller, "which street has the repainted crossing by the school?", "s3",
                       hint_until=time.monotonic() + 10)
    assert again["telemetry"]["hint_path"] == hints.PREVIOUS  # a bad reply never erases a good earlier hint
    assert session.load(vault, "s3")["hint"]["terms"] == ["zebra crossing"]


def test_an_unreachable_endpoint_is_a_recorded_fallback(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_HUB_LLM_URL", "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    # A prompt the vault has words for (PROMPT's are mostly unknown to it: a low-confidence search).
    out = answer(Recaller(vault), "which bike lanes are planned for the road on Main Street?", "s4",
                 hint_until=time.monotonic() + 5)
    assert out["telemetry"]["hint_path"] == hints.SYNC_ONLY and "unreachable" in out["telemetry"]["hint"]["error"]
    assert "bikes.md" in out["block"]  # the synchronous ranking still answered


def test_a_cold_hook_hands_a_lost_hint_to_the_worker(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold process exits with the hook; the detached worker asks again and stores the hint."""
    calls: list[float] = []

    def first_slow(payload: dict) -> str:
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(1.0)
        return HINT

    with LLMStub(first_slow) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        out = answer(Recaller(vault), PROMPT, "s5", served_by="cold", hint_until=time.monotonic() + 0.1)
        assert out["telemetry"]["hint_path"] == hints.TIMEOUT
        assert _wait_for(lambda: "hint" in session.load(vault, "s5"), 30), (vault / ".memory_hub" / "logs")
    record = session.load(vault, "s5")
    assert record["hint"]["terms"] == ["zebra crossing", "pedestrian"] and not record.get("hint_pending")
    assert len(calls) >= 2


def test_the_socket_passes_the_hooks_hint_budget(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: a real hook process asks the warm server, which races the hint within its budget."""
    import subprocess
    import sys

    from memory_hub.server import local_socket
    from memory_hub.server.state import ServerState

    repo = Path(__file__).resolve().parent.parent
    with LLMStub(lambda payload: HINT) as stub:
        monkeypatch.setenv("MEMORY_HUB_LLM_URL", stub.url)
        state = ServerState.open(vault)
        handle = local_socket.start(state)
        try:
            event = {"hook_event_name": "UserPromptSubmit", "session_id": "s6", "prompt": PROMPT}
            proc = subprocess.run([sys.executable, "-m", "memory_hub.cli", "--vault", str(vault), "hook", "claude-code"],
                                  input=json.dumps(event), capture_output=True, text=True, timeout=60, cwd=repo)
        finally:
            handle.close()
            state.store.close()
    assert proc.returncode == 0, proc.stderr
    assert "crossing.md" in json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    last = [e for e in telemetry.events(vault) if e.get("session") == "s6"][-1]
    assert last["served_by"] == "warm" and last["hint_path"] == hints.WON


def test_parse_terms_is_strict_about_shape() -> None:
    assert hints.parse_terms({"terms": [" S3 ", "s3", "認証", "x" * 80, "ok"]}) == ["S3", "認証", "ok"]
    assert hints.parse_terms(["a b", "c"]) == ["a b", "c"]
    for bad in ({"terms": []}, {"answer": "x"}, 5, None, {"terms": [1, 2]}):
        with pytest.raises(hints.LLMError):
            hints.parse_terms(bad)
