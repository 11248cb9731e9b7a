"""Files a vault's owner keeps out of the index: ``ignore.globs`` and Obsidian's "Excluded files".

``ignore.globs`` (settings, see ``config.py``) are gitignore-style: ``drafts/`` (a folder anywhere),
``*.excalidraw.md`` (a name anywhere), ``archive/**`` or ``/private`` (anchored at the vault root),
``**/old/*.md``. Obsidian's filters (``userIgnoreFilters`` in ``.obsidian/app.json``) are what
Obsidian itself does with them: a plain entry is a path prefix (``Archive/``), one written as
``/regex/`` is a regular expression searched in the path. An ignored folder is not descended into.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config import settings


def glob_regex(pattern: str) -> tuple[re.Pattern[str], bool, bool]:
    """(regex, anchored at the root, folders only) for one gitignore-style glob."""
    dir_only = pattern.endswith("/")
    pat = pattern.rstrip("/")
    anchored = pat.startswith("/") or "/" in pat
    pat = pat.lstrip("/")
    out, i = [], 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        elif pat[i] == "[" and "]" in pat[i + 1:]:
            j = pat.index("]", i + 1)
            body = pat[i + 1:j].replace("\\", "\\\\")
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = j + 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    return re.compile("".join(out) + r"\Z"), anchored, dir_only


class IgnoreRules:
    """``rules.matches("archive/old.md")``; falsy when there is nothing to ignore."""

    def __init__(self, globs: list[str], obsidian: list[str]) -> None:
        self.globs = [glob_regex(g) for g in globs]
        self.prefixes = [f for f in obsidian if not (len(f) > 2 and f.startswith("/") and f.endswith("/"))]
        self.regexes = []
        for f in obsidian:
            if len(f) > 2 and f.startswith("/") and f.endswith("/"):
                try:
                    self.regexes.append(re.compile(f[1:-1]))
                except re.error:
                    continue  # Obsidian skips a broken pattern too

    def __bool__(self) -> bool:
        return bool(self.globs or self.prefixes or self.regexes)

    def _glob_hit(self, rel: str, is_dir: bool) -> bool:
        name = rel.rsplit("/", 1)[-1]
        for regex, anchored, dir_only in self.globs:
            if dir_only and not is_dir:
                continue
            if regex.match(rel if anchored else name):
                return True
        return False

    def entry_matches(self, rel: str, is_dir: bool) -> bool:
        """Whether a walk should skip this entry (its folders above were already checked)."""
        if self._glob_hit(rel, is_dir):
            return True
        probe = rel + "/" if is_dir else rel
        if any(probe.startswith(p) or rel == p.rstrip("/") for p in self.prefixes):
            return True
        return any(r.search(probe) for r in self.regexes)

    def matches(self, rel: str, is_dir: bool = False) -> bool:
        """Whether this vault-relative path, or a folder above it, is ignored."""
        if not self:
            return False
        parts = rel.split("/")
        return any(self.entry_matches("/".join(parts[:i]), is_dir or i < len(parts))
                   for i in range(1, len(parts) + 1))


def ignore_rules(vault: Path) -> IgnoreRules:
    """The rules of this vault's settings (cached with them)."""
    globs, obsidian = settings(vault).ignore_patterns()
    return IgnoreRules(globs, obsidian)


def is_ignored(vault: Path, rel: str) -> bool:
    """One path, checked with every folder above it (for paths that do not come from a walk)."""
    return ignore_rules(vault).matches(rel)
