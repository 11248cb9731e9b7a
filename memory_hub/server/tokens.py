"""Named bearer tokens with a scope and a rate limit, for a server several people share.

The tokens file (``server.tokens_file``, default ``~/.config/memory-hub/tokens.toml``)::

    [tokens.alice]
    sha256 = "9f86d081…"        # hex SHA-256 of the token (or: secret = "…", file mode 0600)
    scope = "write"             # read | write
    rate_per_minute = 600       # requests per minute, bursts up to a tenth of it (default 600)

    [tokens.ci-bot]
    sha256 = "…"
    scope = "read"

``memory-hub token add NAME --scope read`` makes a token, prints it once and stores its hash.

* **Constant time.** A presented token is hashed and compared with every entry's hash by
  ``hmac.compare_digest``, with no early exit, so neither which entry matched nor how much of a
  token was right shows in the timing.
* **Scope in one place.** :func:`tool_writes` decides whether a tool writes: every tool that is
  not annotated ``readOnlyHint=True`` counts as writing (fail-closed: a new tool that forgets its
  annotation needs a write token). ``app.ScopeGate`` refuses such a call from a read token, and
  hides such tools from a read token's tool list.
* **Who wrote it.** The principal of the request is a context variable (:func:`current`) that the
  tools read; a write by a named token is committed with that name as the author.
* **Rate limits** per token (a token bucket); a request over the limit gets ``429`` and
  ``Retry-After``.
* **Web pages.** A browser signs in at ``/login`` with a named token as with ``$MEMORY_HUB_TOKEN``;
  its cookie holds the token's name and a keyed hash (:meth:`TokenTable.session_value`), and the
  pages allow what the token's scope allows (a read token views, a write token also applies or
  rejects dream proposals, committed with its name as author).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import os
import stat
import threading
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCOPES = ("read", "write")
DEFAULT_RATE = 600
_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")


class TokensError(ValueError):
    """The tokens file is unusable; the message names the entry and the fix."""


@dataclass(frozen=True)
class Principal:
    """Who sent a request: a token's name and scope (``local``: stdio or a loopback server without tokens)."""

    name: str
    scope: str  # read | write

    @property
    def can_write(self) -> bool:
        return self.scope == "write"


LOCAL = Principal("local", "write")
_current: contextvars.ContextVar[Principal] = contextvars.ContextVar("memory_hub_principal", default=LOCAL)


def current() -> Principal:
    """The principal of the tool call being served (LOCAL outside a request)."""
    return _current.get()


def bind(principal: Principal) -> contextvars.Token[Principal]:
    return _current.set(principal)


def unbind(token: contextvars.Token[Principal]) -> None:
    _current.reset(token)


def tool_writes(tool: Any) -> bool:
    """Whether calling ``tool`` may change the vault: anything not annotated read-only.

    The single rule every write tool joins (capture and any later update/move/delete/restore):
    give a tool ``readOnlyHint=True`` only when it never writes. ``tool``: a registered FastMCP
    tool, or an entry of a recorded tools/list answer (a dict, as ``direct_http`` reads them)."""
    if isinstance(tool, Mapping):
        hint = (tool.get("annotations") or {}).get("readOnlyHint")
        return hint is not True
    annotations = getattr(tool, "annotations", None)
    if annotations is None:
        return True
    hint = getattr(annotations, "read_only_hint", None) if hasattr(annotations, "read_only_hint") else None
    if hint is None:
        hint = (annotations.model_dump(by_alias=True).get("readOnlyHint") if hasattr(annotations, "model_dump")
                else getattr(annotations, "readOnlyHint", None))
    return hint is not True


SESSION_CONTEXT = b"memory-hub web session of a named token v1 "


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


@dataclass
class _Bucket:
    rate: float  # tokens per second
    burst: float
    level: float
    stamp: float

    def take(self, now: float) -> float:
        """0 when the request may go, else the seconds until it could."""
        self.level = min(self.burst, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.rate


@dataclass
class Entry:
    principal: Principal
    hashed: bytes
    rate_per_minute: int = DEFAULT_RATE


@dataclass
class TokenTable:
    """The tokens a server accepts."""

    entries: list[Entry] = field(default_factory=list)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __len__(self) -> int:
        return len(self.entries)

    def authenticate(self, given: str) -> Principal | None:
        """The principal whose token is ``given``, compared in constant time against every entry."""
        probe = digest(given)
        found = None
        for entry in self.entries:  # no early exit: the time does not depend on which entry matches
            if hmac.compare_digest(probe, entry.hashed):
                found = entry.principal
        return found

    def throttle(self, principal: Principal, now: float | None = None) -> float:
        """0 when ``principal`` may send a request now, else the seconds to wait (per-token limit)."""
        entry = next((e for e in self.entries if e.principal.name == principal.name), None)
        if entry is None or entry.rate_per_minute <= 0:
            return 0.0
        now = time.monotonic() if now is None else now
        with self._lock:
            bucket = self._buckets.get(principal.name)
            if bucket is None:
                rate = entry.rate_per_minute / 60.0
                burst = max(1.0, entry.rate_per_minute / 10.0)
                bucket = self._buckets[principal.name] = _Bucket(rate, burst, burst, now)
            return bucket.take(now)

    def session_value(self, principal: Principal) -> str | None:
        """The web session cookie for a browser signed in with ``principal``'s token: its name and a
        keyed hash (the key is the token's stored SHA-256, which the browser never sees), never the
        token. None for a principal not in this table."""
        entry = next((e for e in self.entries if e.principal == principal), None)
        if entry is None:
            return None
        mac = hmac.new(entry.hashed, SESSION_CONTEXT + principal.name.encode(), "sha256").hexdigest()
        return f"{principal.name}.{mac}"

    def session_principal(self, cookie: str) -> Principal | None:
        """The principal a session cookie value stands for, compared in constant time; None when forged."""
        name, _, mac = cookie.rpartition(".")
        found = None
        for entry in self.entries:
            expected = hmac.new(entry.hashed, SESSION_CONTEXT + entry.principal.name.encode(), "sha256").hexdigest()
            if hmac.compare_digest(f"{name}.{mac}".encode(), f"{entry.principal.name}.{expected}".encode()):
                found = entry.principal
        return found

    def add(self, name: str, secret: str, scope: str, rate_per_minute: int = DEFAULT_RATE) -> None:
        self.entries.append(Entry(Principal(name, scope), digest(secret), rate_per_minute))


def _check_name(name: str) -> str:
    if not name or len(name) > 40 or not set(name) <= _NAME_OK:
        raise TokensError(f"token name {name!r}: use 1-40 lowercase letters, digits, '-', '_' or '.'")
    return name


def parse(data: dict[str, Any], where: str = "the tokens file") -> TokenTable:
    """A TokenTable from the parsed TOML of a tokens file (``[tokens.NAME]`` tables)."""
    tokens = data.get("tokens", {})
    unknown_top = set(data) - {"tokens"}
    if unknown_top or not isinstance(tokens, dict):
        raise TokensError(f"{where}: only [tokens.NAME] tables belong here (found {', '.join(sorted(unknown_top))})")
    table = TokenTable()
    seen: set[bytes] = set()
    for name, spec in tokens.items():
        _check_name(name)
        if not isinstance(spec, dict):
            raise TokensError(f"{where}: [tokens.{name}] must be a table")
        unknown = set(spec) - {"sha256", "secret", "scope", "rate_per_minute"}
        if unknown:
            raise TokensError(f"{where}: [tokens.{name}] has unknown key(s) {', '.join(sorted(unknown))}")
        scope = spec.get("scope", "read")
        if scope not in SCOPES:
            raise TokensError(f"{where}: [tokens.{name}] scope must be read or write, not {scope!r}")
        rate = spec.get("rate_per_minute", DEFAULT_RATE)
        if not isinstance(rate, int) or isinstance(rate, bool) or rate < 0:
            raise TokensError(f"{where}: [tokens.{name}] rate_per_minute must be a whole number >= 0 (0: no limit)")
        if ("sha256" in spec) == ("secret" in spec):
            raise TokensError(f"{where}: [tokens.{name}] needs exactly one of sha256 = \"<hex>\" or secret = \"…\"")
        if "secret" in spec:
            secret = spec["secret"]
            if not isinstance(secret, str) or len(secret) < 16:
                raise TokensError(f"{where}: [tokens.{name}] secret must be at least 16 characters")
            hashed = digest(secret)
        else:
            try:
                hashed = bytes.fromhex(str(spec["sha256"]))
            except ValueError:
                hashed = b""
            if len(hashed) != 32:
                raise TokensError(f"{where}: [tokens.{name}] sha256 must be 64 hex digits")
        if hashed in seen:
            raise TokensError(f"{where}: [tokens.{name}] reuses another entry's token; give each its own")
        seen.add(hashed)
        table.entries.append(Entry(Principal(name, scope), hashed, rate))
    return table


def load(path: Path) -> TokenTable:
    """Read a tokens file. A file holding plain ``secret`` values must not be readable by others."""
    try:
        raw = path.read_bytes()
        mode = path.stat().st_mode
    except OSError as exc:
        raise TokensError(f"cannot read the tokens file {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TokensError(f"{path} is not valid TOML: {exc}") from None
    table = parse(data, str(path))
    has_secrets = any("secret" in (spec or {}) for spec in (data.get("tokens") or {}).values()
                      if isinstance(spec, dict))
    if has_secrets and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokensError(f"{path} holds plain secrets and others can read it; `chmod 600 {path}` "
                          "(or store sha256 = … instead: `memory-hub token add`)")
    return table


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "memory-hub" / "tokens.toml"
