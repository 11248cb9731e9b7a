"""Redaction of secrets from text that comes from outside, before it is written into the vault.

The vault is a git repository: a secret that reaches a note lives on in history after the next
autocommit, so every path that writes outside text (hook transcripts, captures and the pages they
fetch, learnings, the MCP ``capture`` tool) passes it through :func:`redact` first. Each secret is
replaced by ``[REDACTED:<kind>]`` so a reader still sees that something was there.

Three layers find the secrets; their spans are merged before anything is replaced:

1. **The detect-secrets ruleset** (Yelp, PyPI): the regular expressions of its provider plugins
   (AWS, Azure storage, Slack, Twilio, SendGrid, Stripe, GitHub, GitLab, npm, PyPI, OpenAI,
   Discord, Telegram, Mailchimp, JWT, private-key headers, basic-auth URLs …). They are taken from
   the installed plugin classes, so upgrading the package upgrades the rules. Its scanning engine is
   not used: it reports values per line rather than positions and costs ~24 ms per KB.
2. **Context rules** written here, for what a transcript holds and a code scanner does not look
   for: ``name=value`` assignments (``DB_PASS=``, ``"password": …``, ``X-Api-Key:``), command-line
   flags (``--password x``, ``-p'x'`` for the MySQL tools, ``sshpass -p``, ``-u user -p x``,
   ``-storepass``, ``pass:x``), prose ("the password is …", パスワードは …), connection strings,
   ``Authorization`` headers and short bearer tokens, docker ``"auth"``, cookies, ``.netrc``,
   PuTTY key files, whole private-key blocks, and more provider prefixes.
3. **High-entropy tokens**: long runs of base64 characters that mix upper case, lower case and
   digits, change character class often and have high Shannon entropy, unless the context says
   what they are (a ``data:`` URI, an integrity hash, an SSH public key, a lockfile checksum).
   Pure hex strings (commit hashes, checksums) are only secret next to a secret-sounding word.

``docs/security.md`` has the evaluation behind these choices (detection rate and false positives on
the corpus in ``tests/data/secrets_corpus.yaml``, cost per KB).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

MARK = "[REDACTED:{kind}]"


@dataclass(frozen=True)
class Finding:
    """One secret found in a text: its kind and where it is (``text[start:end]``)."""

    kind: str
    start: int
    end: int


@dataclass
class Redaction:
    """The redacted text and how many secrets of each kind were removed."""

    text: str
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """``3 secrets redacted (password ×2, aws-secret-key)``, or '' when nothing was removed."""
        if not self.counts:
            return ""
        kinds = ", ".join(k if n == 1 else f"{k} ×{n}" for k, n in self.counts.most_common())
        return f"{self.total} secret{'s' if self.total != 1 else ''} redacted ({kinds})"

    def add(self, text: str) -> str:
        """``text`` redacted, its counts added to these (one tally over several fields of one write)."""
        if not text:
            return text
        done = redact_report(text)
        self.counts.update(done.counts)
        return done.text


_Gate = tuple[str, ...] | re.Pattern[str]


def _gate(spec: str) -> _Gate:
    return re.compile(spec[3:]) if spec.startswith("re:") else tuple(spec.split(","))


def _opens(gate: _Gate, lower: str) -> bool:
    if isinstance(gate, re.Pattern):
        return gate.search(lower) is not None
    return any(n in lower for n in gate)


@lru_cache(maxsize=4)
def _lower(text: str) -> str:
    return text.lower()


def ruleset_version() -> str:
    """The detect-secrets release whose rules are in use (for status output and the docs)."""
    from importlib.metadata import version

    return f"detect-secrets {version('detect-secrets')}"


# --- layer 1: the detect-secrets ruleset ------------------------------------------------------------

# Plugin classes whose regular expressions are used, and the kind each reports. IPPublicDetector is
# left out (an IP address is not a secret) and so is ArtifactoryDetector, whose ``AP[0-9A-F]…``
# pattern matches ordinary capitalised words in prose.
# The gate of each plugin: lower-case substrings one of which must be in the (lower-cased) text before
# its patterns run, or ``re:`` and a pattern that must match there (most texts hold none, and a
# substring test or a literal-led pattern is 10-100× cheaper than the plugin's own patterns).
_DS_PLUGINS = {
    "aws": ("AWSKeyDetector", "aws-key", "a3t,abia,acca,akia,asia,aws"),
    "azure_storage_key": ("AzureStorageKeyDetector", "azure-storage-key", "accountkey"),
    "basic_auth": ("BasicAuthDetector", "password", "://"),
    "cloudant": ("CloudantDetector", "cloudant-key", "cloudant"),
    "discord": ("DiscordBotTokenDetector", "discord-token", r"re:\.[a-zA-Z\d_-]{6}\."),
    "github_token": ("GitHubTokenDetector", "github-token", "ghp_,gho_,ghu_,ghs_,ghr_"),
    "gitlab_token": ("GitLabTokenDetector", "gitlab-token",
                     "glpat-,gldt-,glft-,glsoat-,glrt-,gr1348941,glcbt-,glimt-,glptt-,glagent-,gloas-"),
    "jwt": ("JwtTokenDetector", "jwt", "eyj"),
    "mailchimp": ("MailchimpDetector", "mailchimp-key", r"re:-us\d"),
    "npm": ("NpmDetector", "npm-token", "_authtoken"),
    "openai": ("OpenAIDetector", "openai-key", "t3blbkfj"),
    "private_key": ("PrivateKeyDetector", "private-key", "private key,putty-user-key"),
    "pypi_token": ("PypiTokenDetector", "pypi-token", "pypi-"),
    "sendgrid": ("SendGridDetector", "sendgrid-key", "sg."),
    "slack": ("SlackDetector", "slack-token", "xox,hooks.slack.com"),
    "softlayer": ("SoftlayerDetector", "softlayer-key", "softlayer"),
    "square_oauth": ("SquareOAuthDetector", "square-key", "sq0csp-"),
    "stripe": ("StripeDetector", "stripe-key", "k_live_"),
    "telegram_token": ("TelegramBotTokenDetector", "telegram-token", r"re::[0-9A-Za-z_-]{35}"),
    "twilio": ("TwilioKeyDetector", "twilio-key", r"re:(?:ac|sk)[a-z0-9]{32}"),
}


# The plugins' "name = value" patterns (Cloudant, IBM, SoftLayer) start like this. They are left out:
# the assignment rule below covers those names, and these cost ~0.6 ms per KB between them.
_KEYWORD_SHAPED = "(?:(?<=\\W)|(?<=^))"


def _rules_cache() -> Path | None:
    """Where the extracted plugin patterns are kept, per detect-secrets version (None: not installed)."""
    import importlib.util

    # find_spec and the version file, not importlib.metadata: that alone costs ~0.3 s per process.
    spec = importlib.util.find_spec("detect_secrets")
    if spec is None or not spec.origin:
        return None
    try:
        version_text = (Path(spec.origin).parent / "__version__.py").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"VERSION\s*=\s*['\"]([^'\"]+)", version_text)
    if found is None:
        return None
    version = found.group(1)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-hub" / f"redact-rules-detect-secrets-{version}.json"


def _extract_rules() -> list[list[Any]]:
    """[module, pattern, flags] for the plugins' patterns: importing detect-secrets costs ~0.6-1.2 s."""
    import importlib

    rules: list[list[Any]] = []
    for module, (cls_name, _kind, _gate_spec) in _DS_PLUGINS.items():
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls_name)()
        rules.extend([module, pattern.pattern, pattern.flags] for pattern in plugin.denylist
                     if not pattern.pattern.startswith(_KEYWORD_SHAPED))
    return rules


def _load_rules() -> list[list[Any]]:
    """The plugins' patterns, from the per-version cache when it is there, else from the package.

    Each hook event is a new process, so the patterns are written once to the user's cache and read
    back (~1 ms) instead of importing the package every time. Upgrading detect-secrets changes the
    version in the file name, so the rules follow the installed package.
    """
    cache = _rules_cache()
    if cache is not None:
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
            if isinstance(data, list) and all(isinstance(r, list) and len(r) == 3 for r in data):
                return data
        except (OSError, ValueError):
            pass
    rules = _extract_rules()
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(rules), encoding="utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass  # a read-only cache only costs the import next time
    return rules


@lru_cache(maxsize=1)
def _ruleset() -> tuple[tuple[str, _Gate, re.Pattern[str]], ...]:
    """(kind, gate, pattern) for every regular expression of the detect-secrets plugins used."""
    gates = {module: (kind, _gate(spec)) for module, (_cls, kind, spec) in _DS_PLUGINS.items()}
    return tuple((gates[module][0], gates[module][1], re.compile(pattern, flags))
                 for module, pattern, flags in _load_rules() if module in gates)


def _ruleset_findings(text: str) -> Iterator[Finding]:
    lower = _lower(text)
    opened: dict[int, bool] = {}  # a plugin's patterns share one gate: test it once
    for kind, gate, pattern in _ruleset():
        if not opened.setdefault(id(gate), _opens(gate, lower)):
            continue
        for m in pattern.finditer(text):
            # Some plugins capture the secret part (a URL's password), some only the prefix (ghp):
            # a group that starts where the match starts is a prefix, so the whole match goes.
            spans = [m.span(g) for g in range(1, pattern.groups + 1) if m.group(g) and m.start(g) > m.start()]
            spans = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)] \
                or [m.span()]
            for start, end in spans:
                if kind == "private-key":
                    yield Finding(kind, start, end)
                elif not _is_placeholder(text[start:end].strip("\"' ")) and not _fragment(text, start, end):
                    yield Finding(kind, start, end)


_BLOB_CHAR = re.compile(r"[A-Za-z0-9+/]")


def _fragment(text: str, start: int, end: int) -> bool:
    """The match is a piece of a longer base64 run (an image, a key blob), not a token of its own."""
    before = start > 0 and _BLOB_CHAR.match(text, start - 1) is not None and text[start].isalnum()
    after = end < len(text) and _BLOB_CHAR.match(text, end) is not None and text[end - 1].isalnum()
    return before or after


# --- value checks shared by the context rules --------------------------------------------------------

_PLACEHOLDER_WORDS = frozenset("""
    null none nil true false yes no on off undefined empty required optional string str bytes int
    integer bool boolean number float object any dict list array secret secrets password passwords
    token tokens redacted hidden masked omitted changeme example sample dummy test testing foo bar
    baz value values here env environment stdin stdout file path default unset unknown n/a na tbd
    todo xxx placeholder
""".split())
_PLACEHOLDER = re.compile(
    r"""^(?:
        \$\{[^}]*\}? | \$\(?[A-Za-z_][A-Za-z0-9_]*\)? | %\(?[A-Za-z_]*\)?s | %[A-Z_]+% | \{\{.*\}\}? | \{[^{}]*\}
        | <[^<>]*>? | \[[^\[\]]*\] | [xX*#.•…_-]{3,} | (?:your|my|the|some|a|an)[_\-]?[\w\-]* | REDACTED.*
        | (?:process\.env|os\.environ|os\.getenv|env|ENV|getenv|environ|settings|config|secrets|vars|params|self|this|args|opts|options|request|req|ctx|context)\b.*
    )$""",
    re.X,
)
_CODE_REF = re.compile(r"^[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)+$|^[A-Za-z_][\w.]*\s*[(\[]|^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$")


def _is_placeholder(value: str) -> bool:
    """A template, variable, type name or code reference, not a literal secret."""
    v = value.strip().rstrip(".,;:)!?")
    if not v or v.lower() in _PLACEHOLDER_WORDS or "REDACTED" in v or "://" in v or not re.search(r"[^\W_]", v):
        return True
    return bool(_PLACEHOLDER.match(v) or _CODE_REF.match(v))


def _looks_secret(value: str) -> bool:
    """A value that is not an ordinary word or name: letters with digits, or symbols in mixed case."""
    v = value.rstrip(".,;:)!?")
    if len(v) < 4 or _is_placeholder(v) or v.isdigit():
        return False
    letters, digits = re.search(r"[A-Za-z]", v), re.search(r"\d", v)
    if letters and digits:
        return True
    return bool(re.search(r"[^\w\s]", v) and re.search(r"[a-z]", v) and re.search(r"[A-Z]", v))


# --- layer 2: context rules ----------------------------------------------------------------------------

# Names that hold a secret, by their last word(s): DB_PASS, SLACK_SIGNING_SECRET, "password",
# X-Api-Key, apiKey, AccountKey. "pass"/"pw" must be a whole word, so bypass=1 and compass=north stay.
_SECRET_LAST = frozenset({"password", "passwd", "passphrase", "passcode", "pass", "pwd", "pw", "secret", "token",
                          "apikey", "sessionid", "authtoken", "accesstoken", "sig"})
_SECRET_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "apikey")
_KEY_FIRST = frozenset({"api", "access", "secret", "private", "signing", "hmac", "encryption", "master", "client",
                        "account", "app", "license", "webhook", "session", "auth", "consumer", "subscription",
                        "service", "shared", "storage", "x"})


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)  # apiKey -> api Key, AccountKey -> Account Key
    return [w for w in re.split(r"[\s_.\-]+", spaced.lower()) if w]


def _secret_name(name: str) -> bool:
    """Whether ``name`` (the left side of an assignment) names a secret."""
    words = _name_words(name)
    if not words:
        return False
    last = words[-1]
    if last in _SECRET_LAST:
        return last != "sig" or len(words) == 1
    if last.endswith(_SECRET_SUFFIXES):  # PGPASSWORD, MYSQLPASSWORD, clientsecret, authtoken
        return True
    if last == "key" and len(words) >= 2:
        return words[-2] in _KEY_FIRST or (len(words) >= 3 and words[-2] == "access" and words[-3] == "shared")
    return len(words) >= 3 and words[-1] == "id" and words[-2] == "key" and words[-3] == "private"


_ASSIGN = re.compile(
    r"""(?xm)
    (?<![^\s"'`{(\[,;&?/|:])
    (?P<qn>["']?)(?P<name>[A-Za-z_][\w.-]{0,63})(?P=qn)
    (?P<sep>[ \t]*(?:=>|:=|=(?!=)|:(?![:/])|：)[ \t]*)
    (?:(?P<q>["'`])(?P<qv>[^"'`\n]{1,500}?)(?P=q)|(?P<v>[^\s"'`,;{}()<>\[\]]+))
    """
)
_QUERY_STOP = re.compile(r"[&#]")
_QUERY_SECRETS = frozenset({"key", "code", "signature", "x-amz-signature", "x-goog-signature", "sig", "auth"})


def _assignment_findings(text: str) -> Iterator[Finding]:
    pos = 0
    while (m := _ASSIGN.search(text, pos)) is not None:
        pos = m.end("sep")  # values may hold further assignments (a=b&password=c): look inside them
        name = m.group("name")
        lead = text[m.start() - 1] if m.start() else ""
        in_query = lead in ("?", "&")
        if not (_secret_name(name) or in_query and name.lower() in _QUERY_SECRETS):
            continue
        if m.group("qv") is not None:
            start, value = m.start("qv"), m.group("qv")
        else:
            start, value = m.start("v"), m.group("v")
            if lead in ("?", "&", ";"):  # a query string or connection string: stop at & #
                cut = _QUERY_STOP.search(value)
                value = value[: cut.start()] if cut else value
            value = value.rstrip(".,:!?")
        last = _name_words(name)[-1]
        if last in ("pass", "pw", "pwd") and value.isdigit() and len(value) < 6:
            continue  # a test summary (pass=42), not a password
        if len(value) < 4 or _is_placeholder(value):
            continue
        if m.group("sep").strip() in (":", "：") and m.group("qv") is None and not _looks_secret(value) \
                and last not in ("password", "passwd", "passphrase", "passcode"):
            continue  # "token: expired", "the dream pass: gate" are prose; a password field is taken literally
        yield Finding(_kind_of(name), start, start + len(value))
        pos = start + len(value)


def _kind_of(name: str) -> str:
    name = name.lower()
    if "pass" in name or name.endswith(("pw", "pwd")):
        return "password"
    if "token" in name or "session" in name:
        return "token"
    if "key" in name:
        return "key"
    return "secret"


_FLAG = re.compile(
    r"""(?ix)(?<!\S)--?(?P<name>[\w-]*?(?:password|passwd|passphrase|pass|secret|token|api-?key|access-key
        |secret-key|storepass|keypass|passin|passout))(?:=|[ \t]+)(?P<q>["']?)(?P<v>[^\s"']+)(?P=q)"""
)
_PASS_ARG = re.compile(r"^(?:pass|stdin|env|file|fd):", re.I)


def _flag_findings(text: str) -> Iterator[Finding]:
    for m in _FLAG.finditer(text):
        value, start = m.group("v"), m.start("v")
        if value.startswith("-") or _is_placeholder(value):
            continue
        if _PASS_ARG.match(value):  # openssl -passout pass:x (env:/file:/fd: name where it is, not what)
            if not value.lower().startswith("pass:"):
                continue
            start, value = start + 5, value[5:]
        if len(value) >= 3:
            yield Finding("password" if "pass" in m.group("name").lower() else "token", start, start + len(value))


_MYSQL_P = re.compile(
    r"""\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlshow|mysqlpump|mariadb(?:-dump|-admin)?)\b"""
    r"""[^\n|;&]*?(?<!\S)-p(?P<q>["']?)(?P<v>[^\s"']+)(?P=q)"""
)
_SSHPASS = re.compile(r"""\bsshpass\s+-p\s*(?P<q>["']?)(?P<v>[^\s"']+)(?P=q)""")
_USER_P = re.compile(r"""(?<!\S)(?:-u|--username|--user)[ \t=]+\S+[ \t]+-p[ \t]+(?P<q>["']?)(?P<v>[^\s"']+)(?P=q)""")
_LOGIN_P = re.compile(
    r"""\b(?:docker|podman|buildah|nerdctl|oras|skopeo|helm(?:\s+registry)?|crane)\s+login\b[^\n|;&]*?(?<!\S)-p[ \t]+"""
    r"""(?P<q>["']?)(?P<v>[^\s"']+)(?P=q)"""
)
_CURL_USER = re.compile(r"""(?<!\S)(?:-u|--user|--proxy-user)[ \t=]+(?P<q>["']?)[^\s:"']+:(?P<v>[^\s"']+)(?P=q)""")
_AWS_SET = re.compile(r"\baws\s+configure\s+set\s+(?:[\w.]*\.)?(?:aws_secret_access_key|aws_session_token|aws_access_key_id)\s+(?P<v>\S+)")
_NETRC = re.compile(r"\bmachine\s+\S+\s+(?:login\s+\S+\s+)?password\s+(?P<v>\S+)")


def _command_findings(text: str) -> Iterator[Finding]:
    for kind, pattern in (("password", _MYSQL_P), ("password", _SSHPASS), ("password", _LOGIN_P),
                          ("password", _CURL_USER), ("aws-key", _AWS_SET), ("password", _NETRC)):
        for m in pattern.finditer(text):
            if not _is_placeholder(m.group("v")):
                yield Finding(kind, m.start("v"), m.end("v"))
    for m in _USER_P.finditer(text):
        line_start = text.rfind("\n", 0, m.start()) + 1
        if re.search(r"\b(?:mysql\w*|mariadb\S*)\b", text[line_start:m.start()]):
            continue  # mysql -u root -p shop: a prompt for the password, then the database name
        if not _is_placeholder(m.group("v")):
            yield Finding("password", m.start("v"), m.end("v"))


# "the password is X", "secret was X", パスワードは X: X must not be an ordinary word.
_PROSE = re.compile(
    r"""(?ix)\b(?:password|passphrase|passcode|pass\s?word|pin|secret|token|api\s?key|key)s?
        [ \t]+(?:is|was|will\s+be|would\s+be|is\s+now|is\s+still)[ \t]*[:：]?[ \t]*
        (?P<q>["'`「]?)(?P<v>[^\s"'`」()\[\]{}<>]{4,200})"""
)
_PROSE_JA = re.compile(
    r"""(?:パスワード|暗証番号|パスフレーズ|トークン|シークレット|秘密鍵|APIキー|アクセスキー)[ \t]*(?:は|が|[:：=＝])[ \t　]*"""
    r"""(?P<q>["'`「]?)(?P<v>[!-~]{4,200})"""
)


def _prose_findings(text: str) -> Iterator[Finding]:
    for pattern in (_PROSE, _PROSE_JA):
        for m in pattern.finditer(text):
            value = m.group("v").rstrip(".,;:!?)」")
            if m.group("q") == "" and value.endswith(("。", "、")):
                value = value.rstrip("。、")
            if _looks_secret(value):
                yield Finding("password", m.start("v"), m.start("v") + len(value))


_AUTH_HEADER = re.compile(
    r"""(?i)\b(?:proxy-)?authorization["']?[ \t]*[:=][ \t]*["']?[ \t]*(?:(?P<scheme>bearer|basic|token|digest|negotiate|apikey|sharedaccesssignature)[ \t]+)?"""
    r"""(?P<v>[A-Za-z0-9._~+/=:%-]{6,})"""
)
_BEARER = re.compile(r"""(?<![\w-])(?:[Bb]earer|BEARER)[ \t]+(?P<v>[A-Za-z0-9._~+/-]{8,}=*)""")
_COOKIE = re.compile(r"(?im)^[ \t]*(?:set-)?cookie[ \t]*:[ \t]*(?P<rest>[^\n]+)")
_COOKIE_PAIR = re.compile(r"(?:^|;)[ \t]*(?P<name>[\w.-]+)=(?P<v>[^;\s]{12,})")
_DOCKER_AUTH = re.compile(r""""(?:auth|identitytoken|registrytoken)"\s*:\s*"(?P<v>[^"\s]{8,})\"""")


def _header_findings(text: str) -> Iterator[Finding]:
    for m in _AUTH_HEADER.finditer(text):
        value = m.group("v")
        if not _is_placeholder(value) and (m.group("scheme") or _looks_secret(value)):
            yield Finding("token", m.start("v"), m.end("v"))
    for m in _BEARER.finditer(text):
        value = m.group("v")
        if not _is_placeholder(value) and re.search(r"\d", value) and re.search(r"[A-Za-z]", value):
            yield Finding("token", m.start("v"), m.end("v"))
    for m in _COOKIE.finditer(text):
        for pair in _COOKIE_PAIR.finditer(m.group("rest")):
            if pair.group("name").lower() not in ("path", "domain", "expires", "max-age", "samesite"):
                off = m.start("rest")
                yield Finding("token", off + pair.start("v"), off + pair.end("v"))
    for m in _DOCKER_AUTH.finditer(text):
        yield Finding("docker-auth", m.start("v"), m.end("v"))


# A URL's userinfo password: scheme://user:PASSWORD@host, redis://:PASSWORD@host.
_URL_PASSWORD = re.compile(r"://[^\s:/@?#\"'<>]*:(?P<v>[^\s@/?#\"'<>]+)@[\w\[]")

# Well-known token formats the detect-secrets plugins do not cover (or cover only partly), each with
# the lower-case substrings one of which must be in the text for the pattern to be worth running.
_PROVIDERS: tuple[tuple[str, _Gate, re.Pattern[str]], ...] = tuple(
    (kind, _gate(gate), re.compile(pattern)) for kind, gate, pattern in (
    ("anthropic-key", "sk-ant-", r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai-key", "sk-", r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"),
    ("github-token", "ghp_,gho_,ghu_,ghs_,ghr_,github_pat_", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"),
    ("gitlab-token", "glpat-,gldt-,glft-,glsoat-,glrt-,glcbt-,glimt-,glptt-,glagent-,gloas-",
     r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas)-[A-Za-z0-9_\-]{20,}"),
    ("slack-token", "xox,xapp-", r"xox[abposre]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,}"),
    ("slack-webhook", "hooks.slack.com", r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"),
    ("discord-webhook", "/api/webhooks/", r"https://(?:\w+\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{20,}"),
    ("teams-webhook", "webhook.office.com", r"https://[\w.-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_\-]{20,}"),
    ("stripe-key", "_live_,_test_,whsec_", r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{20,}"),
    ("google-api-key", "aiza", r"AIza[0-9A-Za-z_\-]{35}"),
    ("google-oauth-token", "ya29.,1//0", r"ya29\.[0-9A-Za-z_\-]{20,}|1//0[0-9A-Za-z_\-]{30,}"),
    ("huggingface-token", "hf_", r"hf_[A-Za-z0-9]{30,}"),
    ("npm-token", "npm_", r"npm_[A-Za-z0-9]{30,}"),
    ("pypi-token", "pypi-", r"pypi-AgE[A-Za-z0-9_\-]{50,}"),
    ("aws-key", "akia,asia,agpa,aida,aroa,anpa,anva,apka,abia,acca",
     r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|APKA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])"),
    ("azure-key", "q~", r"(?<![\w~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![\w~.\-])"),
    ("azure-sas", "sig=", r"(?<=[?&])sig=[A-Za-z0-9%+/=]{20,}"),
    ("digitalocean-token", "_v1_", r"do[opr]_v1_[0-9a-f]{64}(?![A-Za-z0-9])"),
    ("databricks-token", "dapi", r"dapi[0-9a-f]{32}(?:-\d)?(?![A-Za-z0-9])"),
    ("vault-token", "hvs.,hvb.,hvr.", r"hv[sbr]\.[A-Za-z0-9_\-]{20,}"),
    ("age-key", "age-secret-key-", r"AGE-SECRET-KEY-1[0-9A-Z]{58}(?![A-Za-z0-9])"),
    ("shopify-token", "shpat_,shpss_,shpca_,shppa_", r"shp(?:at|ss|ca|pa)_[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    ("linear-key", "lin_", r"lin_(?:api|oauth)_[A-Za-z0-9]{32,}"),
    ("postman-key", "pmak-", r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}(?![A-Za-z0-9])"),
    ("grafana-token", "glsa_,glc_", r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}(?![A-Za-z0-9])|glc_[A-Za-z0-9+/]{32,}={0,2}"),
    ("newrelic-key", "nrak-,nrii-,nrjs-", r"NR(?:AK|II|JS)-[A-Z0-9]{19,32}(?![A-Za-z0-9])"),
    ("sendgrid-key", "sg.", r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"),
    ("telegram-token", r"re::aa[0-9a-z_\-]{33}", r"\d{8,10}:AA[0-9A-Za-z_\-]{33}(?![A-Za-z0-9_\-])"),
    ("doppler-token", "dp.", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    ("jwt", "eyj", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
))

_KEY_BLOCK = re.compile(r"-{4,5}[ ]?BEGIN (?P<label>(?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)[ ]?-{4,5}")
_KEY_LINE = re.compile(r"[ \t]*(?:[A-Z][\w-]*: [^\n\\]*|[A-Za-z0-9+/=]{4,}|=[A-Za-z0-9+/]{4})[ \t]*")
_LINE_BREAK = re.compile(r"\r?\n|(?:\\r)?\\n")


def _key_body_end(text: str, pos: int) -> int:
    """Where the body of a private key without its END line stops: the first line (real or a JSON
    ``\\n``) that is neither base64 nor a ``Header: value`` line; one blank line is allowed."""
    end = pos
    blank = False
    while True:
        brk = _LINE_BREAK.match(text, pos)
        if brk is None:
            break
        pos = brk.end()
        line = _KEY_LINE.match(text, pos)
        if line is None or not _LINE_BREAK.match(text, line.end()) and line.end() != len(text):
            if blank or _LINE_BREAK.match(text, pos) is None:
                break
            blank = True  # PGP armour: headers, a blank line, then the body
            continue
        pos = end = line.end()
        blank = False
    return end
_PUTTY_PRIVATE = re.compile(r"(?m)^Private-Lines:[ \t]*(?P<n>\d{1,3})[ \t]*\r?\n")
_PUTTY_MAC = re.compile(r"(?m)^Private-(?:MAC|Hash):[ \t]*(?P<v>\S+)")


def _block_findings(text: str) -> Iterator[Finding]:
    lower = _lower(text)
    for m in _KEY_BLOCK.finditer(text) if "private key" in lower else ():
        # Its own END line, before any other BEGIN and within 64 KiB.
        limit = text.find("BEGIN ", m.end(), m.end() + 64 * 1024)
        end = text.find(f"END {m.group('label')}", m.end(), limit if limit >= 0 else m.end() + 64 * 1024)
        if end >= 0:
            close = re.compile(r"[ ]?-{4,5}").match(text, end + 4 + len(m.group("label")))
            yield Finding("private-key", m.start(), close.end() if close else end + 4 + len(m.group("label")))
        else:  # cut off (a transcript tail, a paste): everything that still looks like the key body
            yield Finding("private-key", m.start(), _key_body_end(text, m.end()))
    if "private-lines" not in lower and "private-mac" not in lower and "private-hash" not in lower:
        return
    for m in _PUTTY_PRIVATE.finditer(text):
        pos = m.end()
        for _ in range(int(m.group("n"))):
            nl = text.find("\n", pos)
            pos = len(text) if nl < 0 else nl + 1
        if pos > m.end():
            yield Finding("private-key", m.end(), pos)
    for m in _PUTTY_MAC.finditer(text):
        yield Finding("private-key", m.start("v"), m.end("v"))


def _pattern_findings(text: str) -> Iterator[Finding]:
    for m in _URL_PASSWORD.finditer(text) if "://" in text else ():
        if not _is_placeholder(m.group("v")):
            yield Finding("password", m.start("v"), m.end("v"))
    lower = _lower(text)
    for kind, gate, pattern in _PROVIDERS:
        if not _opens(gate, lower):
            continue
        for m in pattern.finditer(text):
            start = m.start()
            if start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_") and text[start].isalnum():
                continue  # inside a longer word (the patterns start without \b: literal-led is 30× faster)
            yield Finding(kind, start + (4 if m.group().startswith("sig=") else 0), m.end())


# A secret-sounding word shortly before a long hex or base64 value: "signing key 9f86…", "token: …".
_NEAR_WORD = re.compile(
    r"""(?ix)\b(?:secret|token|password|passwd|signing|hmac|api[_ -]?key|private[_ -]?key|access[_ -]?key|credential)s?\b
        [^\n]{0,40}?(?<![\w/+=.-])(?P<v>[0-9a-f]{32,}|[A-Za-z0-9+/_-]{20,}={0,2})(?![\w/+=-])"""
)

_NOT_A_KEY = re.compile(r"(?i)\b(?:commit|sha\d*|hash|checksum|digest|fingerprint|revision|rev|uuid|id)\b")


def _near_word_findings(text: str) -> Iterator[Finding]:
    for m in _NEAR_WORD.finditer(text):
        value = m.group("v")
        if _NOT_A_KEY.search(text, m.start(), m.start("v")):
            continue  # "token fix, commit 85a4…", "password hash sha256 …": says what the value is
        if _is_hexlike(value) or _high_entropy(value):
            if not _exempt_token(text, m.start("v"), m.end("v")):
                yield Finding("secret", m.start("v"), m.end("v"))


# --- layer 3: high-entropy tokens ------------------------------------------------------------------------

_TOKEN = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/=_\-]{20,}")
_EXEMPT_BEFORE = re.compile(
    r"(?:base64,|sha(?:1|224|256|384|512)[-:]|SHA(?:1|256|384|512):|h1:|md5-|sha1-|integrity[=:]\s*\"?|"
    r"(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com|sk-ecdsa-sha2-nistp256@openssh\.com)\s+)$"
)
_HASH_PREFIX = re.compile(r"(?:sha(?:1|224|256|384|512)|md5|blake2b?)[-:_]", re.I)
_SSH_BLOB = re.compile(r"^AAAA(?:B3NzaC1|C3NzaC1|E2VjZHNh|B3NzaC1kc3)")
_URL_PATH = re.compile(r"https?://[^\s\"'<>()\[\]]*$")


def _entropy(value: str) -> float:
    counts = Counter(value)
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _class_changes(value: str) -> float:
    def cls(ch: str) -> int:
        return 0 if ch.islower() else 1 if ch.isupper() else 2 if ch.isdigit() else 3

    changes = sum(1 for a, b in zip(value, value[1:], strict=False) if cls(a) != cls(b))
    return changes / max(1, len(value) - 1)


def _is_hexlike(value: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-fA-F]{32,}", value)) and bool(re.search(r"\d", value)) \
        and bool(re.search(r"[a-fA-F]", value))


def _high_entropy(value: str) -> bool:
    """Random-looking: upper, lower and digits mixed, frequent class changes, entropy near random."""
    core = value.rstrip("=")
    if len(core) < 20 or not (re.search(r"[a-z]", core) and re.search(r"[A-Z]", core) and re.search(r"\d", core)):
        return False
    if re.fullmatch(r"[0-9a-fA-F-]+", core):
        return False  # hex with or without dashes: hashes and UUIDs, judged by context elsewhere
    if _class_changes(core) < 0.35:
        return False  # identifiers and words (CamelCaseNames2, snake_case_v2)
    return _entropy(core) >= 0.86 * math.log2(min(len(core), 64))


def _exempt_token(text: str, start: int, end: int) -> bool:
    """Context says what the token is: a data URI, an integrity hash, an SSH public key, a URL path."""
    before = text[max(0, start - 48):start]
    value = text[start:end]
    if _EXEMPT_BEFORE.search(before) or _SSH_BLOB.match(value) or _HASH_PREFIX.match(value):
        return True
    # Inside a URL: ids and tracking parameters (a secret there sits in userinfo or in a named
    # parameter such as access_token=, which the context rules judge).
    return _URL_PATH.search(text[max(0, start - 300):start]) is not None


def _entropy_findings(text: str) -> Iterator[Finding]:
    for m in _TOKEN.finditer(text):
        value = m.group()
        for part in _split_token(value):
            s = m.start() + part[0]
            e = m.start() + part[1]
            if _high_entropy(text[s:e]) and not _exempt_token(text, s, e):
                yield Finding("high-entropy", s, e)


def _split_token(value: str) -> list[tuple[int, int]]:
    """A token, or its parts when it reads like a path or a hyphenated compound (words, not noise):
    ``docs/Setup/Linux2`` and ``IL-12Rbeta1-deficient`` are judged part by part."""
    parts = re.split(r"[/_-]", value)
    if len(parts) == 1:
        return [(0, len(value))]
    wordy = sum(1 for p in parts if len(p) <= 6 or re.fullmatch(r"[A-Za-z]?[a-z]{2,}\d*|\d+", p))
    if wordy * 2 < len(parts):
        return [(0, len(value))]
    out, pos = [], 0
    for p in parts:
        out.append((pos, pos + len(p)))
        pos += len(p) + 1
    return out


# --- putting it together ---------------------------------------------------------------------------------

# Rules anchored on a word (password, token, -p, パスワード …) run only on the lines that hold one of
# these; in ordinary text that is a small share of the lines, found with plain substring search.
_CANDIDATE_WORDS = ("pass", "pw", "secret", "token", "key", "auth", "sig", "session", "bearer", "cookie",
                    "credential", "signing", "hmac", "pin", "login", "-p", "-u", "パスワード", "暗証番号",
                    "パスフレーズ", "トークン", "シークレット", "秘密鍵", "キー")
_WHOLE_TEXT = (_block_findings, _ruleset_findings, _pattern_findings, _entropy_findings)
_PER_LINE = (_assignment_findings, _flag_findings, _command_findings, _prose_findings, _header_findings,
             _near_word_findings)


def _candidate_chunks(text: str) -> list[tuple[int, int]]:
    """(start, end) of runs of whole lines that hold a candidate word, merged, in order."""
    low = _lower(text)
    if len(low) != len(text):  # lower() changed the length (rare scripts): offsets would not line up
        return [(0, len(text))]
    spans = []
    for word in _CANDIDATE_WORDS:
        i = low.find(word)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            spans.append((start, end))
            i = low.find(word, end)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _all_findings(text: str) -> Iterator[Finding]:
    for detect in _WHOLE_TEXT:
        yield from detect(text)
    for start, end in _candidate_chunks(text):
        chunk = text[start:end]
        for detect in _PER_LINE:
            for f in detect(chunk):
                yield Finding(f.kind, f.start + start, f.end + start)


def find_secrets(text: str) -> list[Finding]:
    """Every secret span in ``text``, overlapping spans merged, in order."""
    if not text:
        return []
    found = sorted((f for f in _all_findings(text) if f.end > f.start), key=lambda f: (f.start, -f.end))
    merged: list[Finding] = []
    for f in found:
        if merged and f.start <= merged[-1].end:
            last = merged[-1]
            if f.end > last.end:
                merged[-1] = Finding(last.kind, last.start, f.end)
            continue
        merged.append(f)
    return merged


def redact_report(text: str) -> Redaction:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, and the count of each kind."""
    findings = find_secrets(text)
    if not findings:
        return Redaction(text)
    parts: list[str] = []
    pos = 0
    counts: Counter[str] = Counter()
    for f in findings:
        parts.append(text[pos:f.start])
        parts.append(MARK.format(kind=f.kind))
        counts[f.kind] += 1
        pos = f.end
    parts.append(text[pos:])
    return Redaction("".join(parts), counts)


def redact(text: str) -> str:
    """``text`` with every secret-looking value replaced by ``[REDACTED:<kind>]``."""
    return redact_report(text).text if text else text
