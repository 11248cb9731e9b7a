"""Secrets never reach the vault: every secret form in the corpus is redacted, every look-alike kept.

The corpus (tests/data/secrets_corpus.yaml) holds fake values only. Both directions are asserted:
a secret's secret part is gone from the output, a look-alike comes out byte for byte unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memory_hub.vault.redact import find_secrets, redact, redact_report, ruleset_version

CORPUS = yaml.safe_load((Path(__file__).parent / "data" / "secrets_corpus.yaml").read_text(encoding="utf-8"))
SECRETS = CORPUS["secrets"]
LOOKALIKES = CORPUS["lookalikes"]


def _parts(case: dict) -> list[str]:
    secret = case["secret"]
    return [str(s) for s in (secret if isinstance(secret, list) else [secret])]


def test_the_corpus_is_big_enough_and_consistent() -> None:
    assert len({c["form"] for c in SECRETS}) == len(SECRETS) >= 60
    assert len({c["form"] for c in LOOKALIKES}) == len(LOOKALIKES) >= 60
    for case in SECRETS:
        for part in _parts(case):
            assert part in case["text"], case["form"]


@pytest.mark.parametrize("case", SECRETS, ids=[c["form"] for c in SECRETS])
def test_every_secret_form_is_redacted(case: dict) -> None:
    out = redact(case["text"])
    for part in _parts(case):
        assert part not in out, f"{case['form']}: {part!r} survived in {out!r}"
    assert "[REDACTED:" in out


@pytest.mark.parametrize("case", LOOKALIKES, ids=[c["form"] for c in LOOKALIKES])
def test_every_lookalike_survives_unchanged(case: dict) -> None:
    assert redact(case["text"]) == case["text"]
    assert find_secrets(case["text"]) == []


def test_secrets_inside_a_long_text_are_all_found_and_the_rest_is_kept() -> None:
    """All forms at once, between look-alikes: nothing leaks, no look-alike is touched."""
    blocks = []
    for secret, lookalike in zip(SECRETS, LOOKALIKES * 2, strict=False):
        blocks += [lookalike["text"], secret["text"]]
    text = "\n\n".join(blocks)
    out = redact(text)
    kept = "\n".join(c["text"] for c in LOOKALIKES)
    for case in SECRETS:
        for part in _parts(case):
            if part not in kept:  # a few values double as look-alikes (a commit hash): those stay there
                assert part not in out, case["form"]
    for case in LOOKALIKES:
        assert case["text"] in out, case["form"]


def test_redaction_is_idempotent_and_counts_what_it_removed() -> None:
    text = "\n".join(c["text"] for c in SECRETS[:20])
    first = redact_report(text)
    assert first.total >= 20 and "secrets redacted" in first.summary()
    again = redact_report(first.text)
    assert again.text == first.text and again.total == 0 and again.summary() == ""


def test_a_cut_off_private_key_is_removed_to_the_end_of_its_body() -> None:
    out = redact("before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nQyNTUxOQAAACDj5Bf7KZW7\n\nafter the key")
    assert out.startswith("before\n") and "b3BlbnNzaC1rZXk" not in out and "QyNTUxOQ" not in out
    assert out.endswith("after the key")


def test_the_ruleset_is_detect_secrets() -> None:
    assert ruleset_version().startswith("detect-secrets 1.")


def test_plugin_rules_are_cached_per_version_so_a_new_process_skips_the_import(tmp_path):
    """Each hook event is a new process: the second one reads the cached patterns instead of
    importing detect-secrets (~1 s), and finds the same secrets."""
    import json
    import os
    import subprocess
    import sys

    probe = ("import sys, json; from memory_hub.vault import redact as r; "
             "out = r.redact('key AKIAIOSFODNN7EXAMPLE and xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx'); "
             "print(json.dumps([out, 'detect_secrets' in sys.modules, len(r._ruleset())]))")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    first = json.loads(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                      check=True).stdout)
    cached = list((tmp_path / "memory-hub").glob("redact-rules-detect-secrets-*.json"))
    assert len(cached) == 1
    second = json.loads(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                       check=True).stdout)
    assert first[1] is True and second[1] is False
    assert first[0] == second[0] and first[2] == second[2] > 20
    assert "AKIA" not in second[0] and "xoxb-" not in second[0]

    cached[0].write_text("{not json", encoding="utf-8")  # a damaged cache falls back to the package
    third = json.loads(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                      check=True).stdout)
    assert third[0] == first[0] and third[1] is True
