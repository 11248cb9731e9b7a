"""Secrets never reach the vault: transcript text is redacted before it is written."""

from __future__ import annotations

import pytest

from memory_hub.hooks.redact import redact

SECRETS = [
    ("OPENAI_API_KEY=sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789", "sk-proj-Abcdefghij"),
    ("key sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "sk-ant-api03"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "ghp_abcdefghij"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    ("xoxb-123456789012-abcdefghijkl", "xoxb-1234"),
    ("git clone https://alice:hunter2pass@github.com/org/repo.git", "hunter2pass"),
    ("DATABASE_URL=postgres://app:S3cretPw@db.internal:5432/app", "S3cretPw"),
    ('password = "correct horse battery staple"', "correct horse"),
    ('{"client_secret": "9f8e7d6c5b4a"}', "9f8e7d6c5b4a"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk", "eyJhbGciOi"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nabc\n-----END RSA PRIVATE KEY-----", "MIIEpAIBAAKCAQEA7"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secret_is_removed(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert "[REDACTED" in out


def test_ordinary_text_is_kept() -> None:
    text = ("The author: Jane wrote the runbook. Use `${GITHUB_TOKEN}` from the environment; "
            "see https://example.com/docs and token: <your-token>. 認証エラーの切り分け手順。")
    assert redact(text) == text


def test_private_key_without_end_marker_is_removed_to_the_end() -> None:
    out = redact("before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nmore")
    assert out.startswith("before") and "b3BlbnNzaC1rZXk" not in out
