"""Who may talk to the HTTP/SSE server: a Host/Origin check always, a bearer token when not on loopback.

A server on 127.0.0.1 is reachable by any web page the user opens, through DNS rebinding (a hostile
name that resolves to 127.0.0.1). Checking the ``Host`` header against the names we actually serve,
and a browser's ``Origin`` against the same list, stops that. Binding to any other address exposes
the vault to the network, so it also requires ``Authorization: Bearer <token>`` with the token from
``$MEMORY_HUB_TOKEN``, or one of the named tokens of a tokens file (``tokens.py``: each with a scope
and a rate limit; the request's principal goes into the scope's state for ``app.ScopeGate``).
A plain ASGI middleware, so streaming (SSE) responses pass through untouched.

Headers are parsed strictly, since a lenient parser is how such checks are bypassed: exactly one
``Host`` of the form ``name[:port]`` or ``[ipv6][:port]`` (no userinfo such as
``localhost:8765@evil.com``, no lists such as ``a, b``, no spaces), at most one ``Origin`` that is a
bare ``scheme://host[:port]``, at most one ``Authorization``. Anything else is ``400``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import math
import os
import re
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .tokens import LOCAL, Principal, TokenTable, digest

TOKEN_ENV = "MEMORY_HUB_TOKEN"
# The web pages (server/web/) cannot make a browser send a bearer header on a plain link, so after a
# person types the token into /login they carry this cookie instead: a keyed hash of the token, never
# the token itself. /login and the pages' static files are reachable without it.
SESSION_COOKIE = "memory_hub_session"
OPEN_PATHS = ("/login", "/static/app.css", "/static/app.js")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
PRINCIPAL_KEY = "memory_hub.principal"  # in the request scope's state: who sent it (tokens.Principal)
ENV_PRINCIPAL = Principal("token", "write")  # the single $MEMORY_HUB_TOKEN

Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[..., Awaitable[Any]], Callable[..., Awaitable[Any]]], Awaitable[None]]


class GuardError(Exception):
    """A server configuration that would be unsafe; the message says how to fix it."""


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def allowed_hosts_for(bind_host: str, extra: Iterable[str] = ()) -> list[str]:
    """Host names a client may put in ``Host``: loopback names, the bound address, and ``extra``."""
    hosts = list(LOOPBACK_NAMES)
    if bind_host not in ("0.0.0.0", "::", ""):
        hosts.append(bind_host)
    hosts.extend(h for h in extra if h)
    return list(dict.fromkeys(h.lower() for h in hosts))


def require_token(bind_host: str, token: str | None, tokens: TokenTable | None = None) -> str | None:
    """The token the server must check, or GuardError when a non-loopback bind has none (named
    ``tokens`` count)."""
    if not token and tokens:
        return None
    if token:
        if len(token) < 16:
            raise GuardError(f"${TOKEN_ENV} is too short; use at least 16 random characters "
                             "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
        return token
    if not is_loopback(bind_host):
        raise GuardError(
            f"binding to {bind_host} exposes the vault beyond this machine; set ${TOKEN_ENV} to a secret "
            "token (clients then send `Authorization: Bearer <token>`), or bind to 127.0.0.1"
        )
    return None


_HOST = re.compile(
    r"(?P<host>\[[0-9a-f:.]+\]"                  # [::1], [fe80::1]
    r"|[a-z0-9_-]+(?:\.[a-z0-9_-]+)*\.?)"         # localhost, 127.0.0.1, memory.lan (no nested repeats)
    r"(?::(?P<port>[0-9]{1,5}))?"
)


def parse_host(value: str) -> str | None:
    """``example.com:8765`` → ``example.com``; ``[::1]:8765`` → ``[::1]``; None unless the value is
    exactly one host with an optional port (no userinfo, no list, no path, no spaces)."""
    value = value.strip(" \t").lower()
    match = _HOST.fullmatch(value) if len(value) <= 300 else None
    if match is None:
        return None
    port = match.group("port")
    if port is not None and not 0 < int(port) < 65536:
        return None
    host = match.group("host").rstrip(".")
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return None
    return host or None


def parse_origin(value: str) -> str | None:
    """The host of an ``Origin`` (``http://localhost:8765`` → ``localhost``), None when malformed."""
    scheme, sep, rest = value.strip().partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest:
        return None
    return parse_host(rest)


def _headers(scope: Scope) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in scope.get("headers", []):
        out.setdefault(k.decode("latin-1").lower(), []).append(v.decode("latin-1"))
    return out


class Guard:
    """ASGI middleware: rejects requests with a foreign Host/Origin, or without the bearer token."""

    def __init__(self, app: ASGIApp, allowed_hosts: Iterable[str], token: str | None = None,
                 tokens: TokenTable | None = None) -> None:
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts}
        self.token = token
        self.tokens = tokens if tokens else None  # named tokens with scopes and rate limits (tokens.py)

    async def __call__(self, scope: Scope, receive: Callable[..., Awaitable[Any]],
                       send: Callable[..., Awaitable[Any]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        hosts = headers.get("host", [])
        host = parse_host(hosts[0]) if len(hosts) == 1 else None
        if host is None:
            shown = ", ".join(hosts) if hosts else "(none)"
            await _reject(send, 400, f"malformed Host header {shown!r}: send exactly one host[:port]")
            return
        if host not in self.allowed:
            await _reject(send, 421, f"host {host!r} is not served here")
            return
        origins = headers.get("origin", [])
        if len(origins) > 1 or len(headers.get("authorization", [])) > 1:
            await _reject(send, 400, "repeated Origin or Authorization header")
            return
        if origins and origins[0] != "null":
            origin_host = parse_origin(origins[0])
            if origin_host is None:
                await _reject(send, 400, f"malformed Origin header {origins[0]!r}")
                return
            if origin_host not in self.allowed:
                await _reject(send, 403, f"origin {origins[0]!r} is not allowed")
                return
        principal = LOCAL
        if (self.token is not None or self.tokens is not None) and scope.get("path") not in OPEN_PATHS:
            auth = (headers.get("authorization") or [""])[0]
            scheme, _, given = auth.partition(" ")
            found = None
            if scheme.lower() == "bearer":
                given = given.strip()
                if self.tokens is not None:
                    found = self.tokens.authenticate(given)
                if self.token is not None and hmac.compare_digest(digest(given), digest(self.token)):
                    found = found or ENV_PRINCIPAL
            cookies = "; ".join(headers.get("cookie", []))
            if found is None and self.token is not None and _has_session(cookies, self.token):
                found = ENV_PRINCIPAL  # a browser signed in at /login with $MEMORY_HUB_TOKEN
            if found is None and self.tokens is not None:
                found = session_principal(cookies, self.tokens)  # ... or with a named token
            if found is None:
                await _reject(send, 401, "missing or wrong bearer token (a browser: sign in at /login)",
                              {"www-authenticate": "Bearer"})
                return
            principal = found
            wait = self.tokens.throttle(principal) if self.tokens is not None else 0.0
            if wait:
                await _reject(send, 429, f"token {principal.name!r} is over its rate limit; retry in {wait:.1f}s",
                              {"retry-after": str(max(1, math.ceil(wait)))})
                return
        scope.setdefault("state", {})[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)


async def _reject(send: Callable[..., Awaitable[Any]], status: int, message: str,
                  extra: dict[str, str] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def session_value(token: str) -> str:
    """What the web session cookie holds for ``token``: an HMAC of it, so the cookie is not the token."""
    return hmac.new(token.encode(), b"memory-hub web session v1", "sha256").hexdigest()


def _has_session(cookie_header: str, token: str) -> bool:
    expected = session_value(token).encode()
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and hmac.compare_digest(value.strip().encode(), expected):
            return True
    return False


def session_cookie(cookie_header: str) -> str | None:
    """The web session cookie's value in a ``Cookie`` header (the last one wins), or None."""
    found = None
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE:
            found = value.strip()
    return found


def session_principal(cookie_header: str, tokens: TokenTable) -> Principal | None:
    """The named token a browser signed in with (``tokens.TokenTable.session_value``), or None."""
    value = session_cookie(cookie_header)
    return tokens.session_principal(value) if value else None


def token_from_env() -> str | None:
    return os.environ.get(TOKEN_ENV) or None
