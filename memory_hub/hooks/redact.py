"""Redaction of secrets from transcript text before anything reaches the vault (a git repository).

A secret committed to git lives in its history forever, so this errs on the side of removing too
much: API keys of the common providers, bearer/authorization headers, JWTs, private key blocks,
passwords in URLs, ``password=``/``token:`` style assignments, and long high-entropy strings that
sit next to a secret-sounding name. Each is replaced by ``[REDACTED:<kind>]`` so the reader still
sees that something was there.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("private-key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        re.DOTALL)),
    ("url-password", re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.\-]{0,20}://[^\s:/@]+):([^\s@/]+)@")),
    ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}")),
    ("openai-key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}")),
    ("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})")),
    ("gitlab-token", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("slack-token", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b")),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("stripe-key", re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("huggingface-token", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{30,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("bearer", re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/\-]{16,}=*")),
]

# name = value / name: value / "name": "value" where the name sounds like a secret.
_ASSIGNMENT = re.compile(
    r"""(?ix)
    (?P<name>\b[\w.\-]*(?:password|passwd|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key|
        private[_\-]?key|client[_\-]?secret|authorization|credential|session[_\-]?key)[\w.\-]*)
    (?P<sep>["']?\s*(?:=|:|=>)\s*)
    (?:(?P<quote>["'])(?P<qvalue>[^"'\n]{4,200}?)(?P=quote)|(?P<value>[^\s"',;}{]{6,}))
    """
)
_PLACEHOLDER = re.compile(r"^(?:\[REDACTED[^\]]*\]|<[^>]+>|\$\{?[A-Z_][A-Z0-9_]*\}?|x{4,}|\*{4,}|\.{3,}|null|none|true|false|"
                          r"changeme|example|your[_\-]?\w+|process\.env\.\w+|os\.environ.*)$", re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every secret-looking value replaced by ``[REDACTED:<kind>]``."""
    if not text:
        return text
    for kind, pattern in _PATTERNS:
        if kind == "url-password":
            text = pattern.sub(lambda m: f"{m.group(1)}:[REDACTED:password]@", text)
        elif kind == "bearer":
            text = pattern.sub(lambda m: f"{m.group(1)} [REDACTED:token]", text)
        else:
            text = pattern.sub(f"[REDACTED:{kind}]", text)

    def assignment(m: re.Match[str]) -> str:
        value = m.group("qvalue") or m.group("value") or ""
        if _PLACEHOLDER.match(value.rstrip(".)]")) or "REDACTED" in value or value.lower().startswith(("bearer", "basic")):
            return m.group(0)
        quote = m.group("quote") or ""
        return f"{m.group('name')}{m.group('sep')}{quote}[REDACTED:secret]{quote}"

    return _ASSIGNMENT.sub(assignment, text)
