"""The tool functions in-process: mode list in step with retrieval, lazy models, staleness signals."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_hub.index.store import Store
from memory_hub.retrieval import search as pipeline
from memory_hub.server import app, tools
from memory_hub.server.state import ServerState


def test_tool_mode_list_matches_the_retrieval_layer() -> None:
    assert set(app.SEARCH_MODES) == set(pipeline.MODES)


def test_search_before_models_are_ready_is_lexical_and_says_so(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    assert state._searcher is None  # nothing retrieval-side is built at open
    out = tools.search(state, "blue-green rollback", k=3)
    assert out["results"][0]["path"] == "runbooks/blue-green-rollback.md"
    assert any("lexical" in w for w in out.get("warnings", [])), out
    assert "no watcher" in out["index"]["stale"]
    # That first search started loading the models in the background (an idle server loads none).
    assert state._warm_thread is not None
    state._warm_thread.join(60)
    assert state.models_ready.is_set()
    assert not any("lexical results only" in w for w in tools.search(state, "blue-green rollback", k=3).get("warnings", []))


def test_status_reports_pending_changes(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    state.models_ready.set()
    assert tools.status(state)["pending_changes"] == 0
    (vault / "new-note.md").write_text("# New\n\nnot indexed yet\n", encoding="utf-8")
    status = tools.status(state)
    assert status["pending_changes"] == 1 and status["fresh"] is False and "stale" in status


def test_argument_errors_are_tool_errors(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    state.models_ready.set()
    for call in (lambda: tools.search(state, "x", k=500),
                 lambda: tools.search(state, "deploy", mode="telepathy"),
                 lambda: tools.related(state, "home.md", hops=3),
                 lambda: tools.read_note(state, "home.md", from_line=0),
                 lambda: tools.capture(state, "ok", title="t" * 500)):
        with pytest.raises(tools.ToolError):
            call()


def test_search_tool_reports_low_confidence(template_vault: tuple[Path, Store]) -> None:
    vault, _ = template_vault
    state = ServerState.open(vault)
    state.models_ready.set()
    out = tools.search(state, "zyxquorble", k=3, mode="lexical")
    assert out["low_confidence"] is True and "hint" in out
    good = tools.search(state, "blue-green rollback", k=3, mode="lexical")
    assert good["low_confidence"] is False and good["results"]
