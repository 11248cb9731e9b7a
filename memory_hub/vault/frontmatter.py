"""YAML frontmatter: split it from the body, read it leniently, and update single fields in place.

Reading never raises: a note with broken YAML is still a note (indexed from its body), and the
problem is returned so it can be reported. Its cost is bounded by the block's size: YAML aliases
are followed only within a budget (see ``_Budget``), so an alias bomb or a self-referencing anchor
is a reported problem, never a MemoryError or RecursionError. Writing edits only the lines of the fields it sets, so a
person's key order, comments and formatting survive.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType


def _yaml() -> ModuleType:
    """PyYAML, imported when a note is first parsed or written: it costs ~30 ms (its loaders compile
    their regular expressions), which a process that never reads frontmatter (a no-change ``sync``,
    ``status``, every CLI command's start) should not pay."""
    import yaml

    return yaml


def _loader() -> Any:
    """libyaml's safe loader when PyYAML was built with it: the same documents, parsed several times
    faster (YAML parsing was a sixth of cold-index time on obsidian-hub with the pure-Python loader)."""
    yaml = _yaml()
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_OPEN = re.compile(r"\A(?:\ufeff)?---[ \t]*\r?\n")
_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$", re.MULTILINE)


@dataclass
class Frontmatter:
    """The parsed block. ``data`` is empty when there is none or it is broken."""

    data: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None  # the YAML text between the fences, None when absent
    body: str = ""  # everything after the closing fence
    body_line: int = 1  # 1-based line number where ``body`` starts in the file
    problem: str | None = None


def split(text: str) -> tuple[str | None, str, int]:
    """Return (yaml_text or None, body, body_start_line)."""
    m = _OPEN.match(text)
    if not m:
        return None, text.lstrip("\ufeff"), 1
    close = _CLOSE.search(text, m.end())
    if not close:
        # An opening fence with no closing one is not frontmatter; Obsidian shows it as text.
        return None, text.lstrip("\ufeff"), 1
    raw = text[m.end() : close.start()]
    end = close.end()
    if text.startswith("\r\n", end):
        end += 2
    elif text.startswith("\n", end):
        end += 1
    body_line = text.count("\n", 0, end) + 1
    return raw, text[end:], body_line


class TooComplex(ValueError):
    """Frontmatter whose values, once YAML aliases are followed, would be too large or deep."""


# YAML aliases (``*a``) reuse an anchored value; a chain of them ("billion laughs") or a value that
# contains itself (``x: &x [*x]``) would expand without bound. PyYAML builds such documents cheaply
# as shared references, so the cost is in copying them out: ``_plain`` counts every value it copies
# and every character of every string, and refuses past a budget no real frontmatter comes near.
MAX_DEPTH = 40
MIN_NODE_BUDGET = 20_000
MIN_CHAR_BUDGET = 256 * 1024


class _Budget:
    def __init__(self, raw: str) -> None:
        self.nodes = max(MIN_NODE_BUDGET, len(raw))
        self.chars = max(MIN_CHAR_BUDGET, 2 * len(raw))

    def spend(self, chars: int = 0) -> None:
        self.nodes -= 1
        self.chars -= chars
        if self.nodes < 0 or self.chars < 0:
            raise TooComplex("frontmatter expands to far more values than it has text (YAML aliases?); ignored")


def _plain(value: Any, budget: _Budget | None = None, depth: int = 0, active: frozenset[int] = frozenset()) -> Any:
    """Turn YAML values into JSON-able ones (dates become ISO strings), within ``budget``."""
    budget = budget or _Budget("")
    if depth > MAX_DEPTH:
        raise TooComplex(f"frontmatter nests deeper than {MAX_DEPTH} levels; ignored")
    if isinstance(value, str):
        budget.spend(len(value))
        return value
    budget.spend()
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, bytes):
        budget.spend(len(value))
        return value.decode("utf-8", "replace")
    if isinstance(value, (dict, list, tuple, set)):
        if id(value) in active:
            raise TooComplex("frontmatter holds a value that contains itself (a YAML alias loop); ignored")
        inner = active | {id(value)}
        if isinstance(value, dict):
            return {_plain_key(k, budget): _plain(v, budget, depth + 1, inner) for k, v in value.items()}
        return [_plain(v, budget, depth + 1, inner) for v in value]
    return value


def _plain_key(key: Any, budget: _Budget) -> str:
    text = key.isoformat() if isinstance(key, (_dt.date, _dt.datetime)) else str(key)
    budget.spend(len(text))
    return text


def parse(text: str) -> Frontmatter:
    """Parse a note's text into frontmatter data and body, leniently."""
    raw, body, body_line = split(text)
    fm = Frontmatter(raw=raw, body=body, body_line=body_line)
    if raw is None or not raw.strip():
        return fm
    yaml = _yaml()
    try:
        loaded = yaml.load(raw, Loader=_loader())  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        fm.problem = f"broken YAML frontmatter{where}: {getattr(exc, 'problem', None) or exc}"
        return fm
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:  # e.g. an impossible date
        fm.problem = f"unreadable YAML frontmatter: {type(exc).__name__}: {str(exc)[:200]}"
        return fm
    if loaded is None:
        return fm
    if not isinstance(loaded, dict):
        fm.problem = f"frontmatter is a {type(loaded).__name__}, not a mapping; ignored"
        return fm
    try:
        fm.data = _plain(loaded, _Budget(raw))
    except TooComplex as exc:
        fm.problem = str(exc)
    return fm


_KEY_LINE = re.compile(r"^([A-Za-z0-9_\-]+)[ \t]*:(.*)$")


def _yaml_scalar(value: Any) -> str:
    dumped = _yaml().safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000)
    dumped = dumped.strip()
    if dumped.endswith("\n..."):
        dumped = dumped[: -len("\n...")]
    return dumped.removesuffix("...").strip()


def set_fields(text: str, updates: dict[str, Any]) -> str:
    """Return ``text`` with top-level frontmatter ``updates`` applied, touching nothing else.

    Existing keys keep their position (their value line, and any indented continuation lines, are
    replaced); new keys are appended at the end of the block; a note without frontmatter gets one.
    The body is never changed. Raises ValueError when the existing block is not valid YAML, because
    editing a broken block line by line could make it worse.
    """
    raw, body, _ = split(text)
    newline = "\r\n" if "\r\n" in text[:2000] else "\n"
    if raw is None:
        lines = [f"{k}: {_yaml_scalar(v)}" for k, v in updates.items()]
        return "---" + newline + newline.join(lines) + newline + "---" + newline + text.lstrip("\ufeff")
    if parse(text).problem:
        raise ValueError("frontmatter is not valid YAML; refusing to edit it")
    lines = raw.splitlines()
    remaining = dict(updates)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _KEY_LINE.match(line)
        if m and m.group(1) in remaining:
            key = m.group(1)
            out.append(f"{key}: {_yaml_scalar(remaining.pop(key))}")
            i += 1
            # Drop the old value's continuation lines (indented or list items).
            while i < len(lines) and (lines[i].startswith((" ", "\t", "- ")) or not lines[i].strip()):
                if not lines[i].strip() and (i + 1 >= len(lines) or _KEY_LINE.match(lines[i + 1])):
                    break
                i += 1
            continue
        out.append(line)
        i += 1
    for key, value in remaining.items():
        out.append(f"{key}: {_yaml_scalar(value)}")
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom + "---" + newline + newline.join(out) + newline + "---" + newline + body
