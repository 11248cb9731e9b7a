"""Recall warm (the server, over its unix socket) and cold (in-process) give the same block.

The starter vault is embedded once (real e5 vectors in LanceDB), so the warm server's searcher has
its models and vectors loaded, the situation in which the two paths used to disagree.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from memory_hub.config import template_dir
from memory_hub.hooks.prompt import answer
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.retrieval.recall import Recaller, recaller_for_state
from memory_hub.server import local_socket
from memory_hub.server.state import ServerState

PROMPTS = [
    "the partner portal shows ERR_CERT_AUTHORITY_INVALID again, what did we do last time?",
    "how do I roll back a bad release",
    "what should I check when login with a passkey fails?",
    "how do blue-green deploys and cache invalidation relate to each other?",
    "データベースのフェイルオーバー手順を教えて",
    "make the parser a bit faster and add a test",
]


@pytest.fixture(scope="module")
def embedded_starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from memory_hub.retrieval.searcher import Searcher

    vault = tmp_path_factory.mktemp("paths") / "starter"
    shutil.copytree(template_dir(), vault)
    store = Store(vault)
    sync(vault, store=store)
    Searcher(vault, store=store).sync_vectors(progress=False)
    store.close()
    return vault


@pytest.fixture
def starter(embedded_starter: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "starter"
    shutil.copytree(embedded_starter, dst)
    return dst


def _prompts(vault: Path) -> list[str]:
    spec = yaml.safe_load((vault / "memory-hub-eval.yaml").read_text(encoding="utf-8"))
    return PROMPTS + [c["query"] for c in spec["cases"]]


def test_warm_and_cold_give_the_same_block(starter: Path) -> None:
    state = ServerState.open(starter)
    state.searcher.warm()  # models and vectors loaded, as in a server that has been up a while
    state.models_ready.set()
    handle = local_socket.start(state)
    try:
        cold = Recaller(starter)
        differ = []
        blocks = 0
        for prompt in _prompts(starter):
            warm = local_socket.request(starter, {"op": "recall", "prompt": prompt}, timeout=30)
            assert warm and warm["ok"], warm
            here = answer(cold, prompt)
            blocks += bool(here["block"])
            if warm["block"] != here["block"]:
                differ.append((prompt, warm["injected"], here["injected"]))
            assert warm["telemetry"]["served_by"] == "warm" and here["telemetry"]["served_by"] == "cold"
        assert not differ, differ
        assert blocks >= 10  # most prompts get a block: the comparison is not between two empty answers
    finally:
        handle.close()
        state.store.close()


def test_warm_recaller_is_the_same_code_path(starter: Path) -> None:
    """The server's Recaller and a cold one rank through the same search function and mode."""
    state = ServerState.open(starter)
    try:
        warm = recaller_for_state(state)
        cold = Recaller(starter)
        assert warm.search_mode == cold.search_mode
    finally:
        state.store.close()


def test_a_never_indexed_vault_is_indexed_when_small_and_named_when_large(tmp_path, monkeypatch) -> None:
    """Recall ranks with the search index: a small vault nobody indexed gets indexed on the first
    prompt; a large one is not (it would take longer than a hook may), and recall says so instead of
    answering "nothing relevant"."""
    import shutil
    import subprocess
    import sys

    from memory_hub.config import template_dir
    from memory_hub.retrieval import recall as recall_mod
    from memory_hub.retrieval.recall import Recaller

    small = tmp_path / "small"
    shutil.copytree(template_dir(), small)
    result = Recaller(small).recall("how do we rotate the TLS certificate on the legacy nginx VMs?")
    assert result.skipped is None and "runbooks/tls-certificate-rotation.md" in [n.path for n in result.notes]

    large = tmp_path / "large"
    shutil.copytree(template_dir(), large)
    monkeypatch.setattr(recall_mod, "FIRST_INDEX_MAX_FILES", 5)
    result = Recaller(large).recall("how do we rotate the TLS certificate on the legacy nginx VMs?")
    assert result.skipped == "no-index" and result.block is None
    assert result.warnings and "memory-hub index" in result.warnings[0]
    assert result.telemetry()["warnings"] == result.warnings

    # the CLI says it too (stderr in text, a key in --json)
    monkeypatch.undo()
    proc = subprocess.run([sys.executable, "-c", "import sys; from memory_hub.retrieval import recall as r; "
                           "r.FIRST_INDEX_MAX_FILES = 5; from memory_hub.cli import main; "
                           "sys.exit(main(['recall', '--vault', sys.argv[1], '--in-process', "
                           "'how do we rotate the TLS certificate?']))", str(large)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "no search index yet" in proc.stderr and "no block: no-index" in proc.stdout
