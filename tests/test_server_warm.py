"""``server.warm_at_start``: the warm-up (models, vector index, one whole search) starts right after
start in the background instead of at the first search; by default an idle server loads nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memory_hub.index.store import Store
from memory_hub.retrieval.searcher import Searcher
from memory_hub.server import run
from memory_hub.server.run import close_state, open_state


def _wait(predicate, seconds: float = 30.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.mark.parametrize("at_start", [True, False])
def test_warm_at_start_searches_once_before_any_query(template_vault: tuple[Path, Store], monkeypatch,
                                                      at_start: bool) -> None:
    vault, _ = template_vault
    monkeypatch.setattr(run, "BACKGROUND_DELAY", 0.05)
    if at_start:
        monkeypatch.setenv("MEMORY_HUB_WARM_AT_START", "1")
    else:
        monkeypatch.delenv("MEMORY_HUB_WARM_AT_START", raising=False)
    searched: list[str] = []
    real = Searcher.search

    def recording(self, query, *args, **kwargs):
        searched.append(query)
        return real(self, query, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", recording)
    state = open_state(vault, watch=False, hooks_socket=False)
    try:
        if at_start:
            assert _wait(lambda: state.models_ready.is_set() and searched)
            assert searched == ["warm up"]  # one whole search, by the warm-up, before anyone asked
            state._warm_thread.join(30)
            assert state.models_error is None
        else:
            time.sleep(0.5)  # well past the start delay: nothing started
            assert state._warm_thread is None and not state.models_ready.is_set() and searched == []
            assert state._searcher is None  # not even the searcher: an idle server stays small
    finally:
        close_state(state)
