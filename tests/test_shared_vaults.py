"""Real vaults (Obsidian's help in English and Japanese, the Obsidian Hub): index them and check the
link table against an independent reading of the files.

The scanner here is deliberately written differently from ``memory_hub.vault``: fences are found
line by line, inline code by pairing backtick runs of equal length inside a paragraph (the
CommonMark rule; escaped backticks open nothing; a span stays in its block), comments removed afterwards, frontmatter links counted only when the YAML parses
to a mapping. Skipped when ``../shared/data/vaults`` is absent.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml
from conftest import shared_path

from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.retrieval.search import search

pytestmark = pytest.mark.shared

_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_TICKS = re.compile(r"`+")
_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_MDLINK = re.compile(r"\]\(\s*(<[^>\n]+>|[^)\s]+)")


def _drop_fences(text: str) -> str:
    out, fence = [], None
    for line in text.split("\n"):
        if fence is None:
            m = _FENCE_OPEN.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = m.group(1)
                out.append("")
                continue
            out.append(line)
        else:
            s = line.strip()
            if len(s) >= len(fence) and set(s) == {fence[0]}:
                fence = None
            out.append("")
    return "\n".join(out)


def _drop_inline_code(paragraph: str) -> str:
    runs = list(_TICKS.finditer(paragraph))
    keep, i, pos = [], 0, 0
    while i < len(runs):
        opener = runs[i]
        if opener.start() > 0 and paragraph[opener.start() - 1] == "\\":  # an escaped backtick opens nothing
            i += 1
            continue
        closer = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(opener.group())), None)
        if closer is None:
            i += 1
            continue
        keep.append(paragraph[pos:opener.start()])
        pos = runs[closer].end()
        i = closer + 1
    keep.append(paragraph[pos:])
    return " ".join(keep)


def _body_text(body: str) -> str:
    text = _drop_fences(body)
    # inline code stays inside its block: split at blank lines and at list item, heading, quote lines
    blocks = re.split(r"\n(?=[ \t]*(?:$|[-*+][ \t]|\d+[.)][ \t]|#|>))", text, flags=re.M)
    text = "\n".join(_drop_inline_code(b) for b in blocks)
    text = re.sub(r"%%.*?%%", " ", text, flags=re.S)
    return re.sub(r"<!--.*?-->", " ", text, flags=re.S)


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def scan(text: str) -> tuple[list[tuple[str, str]], list[str]]:
    """[(kind, target)] of one file, and its aliases, read without memory_hub."""
    text = text.lstrip("\ufeff")
    body, data = text, {}
    m = re.match(r"---[ \t]*\r?\n(.*?)^(?:---|\.\.\.)[ \t]*\r?$\n?", text, re.S | re.M)
    if m:
        body = text[m.end():]
        try:
            loaded = yaml.safe_load(m.group(1))
        except (yaml.YAMLError, ValueError):
            loaded = None
        data = loaded if isinstance(loaded, dict) else {}
    links: list[tuple[str, str]] = []
    clean = _body_text(body)
    for inner in _WIKI.findall(clean):
        target = inner.replace("\\|", "|").split("|")[0].split("#")[0].strip().rstrip("\\").strip()
        if target:
            links.append(("wiki", target))
    for raw in _MDLINK.findall(clean):
        raw = raw.strip("<>")
        path = unquote(raw.split("#")[0])
        if path.lower().endswith(".md") and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", raw) and not raw.startswith("#"):
            links.append(("markdown", path))
    for value in _strings(data):
        for inner in _WIKI.findall(value):
            target = inner.split("|")[0].split("#")[0].strip()
            if target:
                links.append(("wiki", target))
    aliases = data.get("aliases") or data.get("alias") or []
    aliases = [aliases] if isinstance(aliases, str) else [a for a in aliases if isinstance(a, str)]
    return links, aliases


class Expected:
    """Obsidian's resolution, written plainly: path, path suffix, basename (fewest folders), alias."""

    def __init__(self, files: dict[str, list[str]]) -> None:
        def order(p: str) -> tuple:
            return (p.count("/"), len(p), p)

        self.by_path = {p.lower(): p for p in files}
        self.by_stem: dict[str, list[str]] = {}
        self.by_alias: dict[str, list[str]] = {}
        for p, aliases in files.items():
            self.by_stem.setdefault(posixpath.basename(p)[:-3].lower(), []).append(p)
            for a in aliases:
                self.by_alias.setdefault(a.strip().lower(), []).append(p)
        for table in (self.by_stem, self.by_alias):
            for key in table:
                table[key].sort(key=order)
        self.order = order

    def resolve(self, kind: str, target: str, source: str) -> str | None:
        t = target.replace("\\", "/").strip().lstrip("./").lower()
        if kind == "markdown":
            rel = posixpath.normpath(posixpath.join(posixpath.dirname(source), target)).lower()
            if rel in self.by_path:
                return self.by_path[rel]
        for candidate in (t, t + ".md"):
            if candidate in self.by_path:
                return self.by_path[candidate]
        name = t[:-3] if t.endswith(".md") else t
        if "/" in name:
            suffix = [p for p in self.by_stem.get(name.rsplit("/", 1)[1], []) if p.lower()[:-3].endswith("/" + name)]
            if suffix:
                return min(suffix, key=self.order)
            name = name.rsplit("/", 1)[1]
        if name in self.by_stem:
            return self.by_stem[name][0]
        if name in self.by_alias:
            return self.by_alias[name][0]
        return None


def _index(shared_vault_copy, name: str) -> tuple[Path, Store]:
    shared_path("vaults", name)
    vault = shared_vault_copy(name)
    store = Store(vault)
    report = sync(vault, store=store, progress=False)
    assert not report.skipped, report.skipped[:5]
    return vault, store


def _check_against_files(vault: Path, store: Store) -> dict[str, int]:
    files: dict[str, list[str]] = {}
    written: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(vault.rglob("*.md")):
        rel = path.relative_to(vault).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        links, aliases = scan(path.read_text(encoding="utf-8"))
        files[rel] = aliases
        written[rel] = links
    conn = store.conn
    indexed_paths = {r[0] for r in conn.execute("SELECT path FROM notes WHERE kind != 'attachment'")}
    assert indexed_paths == set(files)

    rows = conn.execute(
        "SELECT s.path, l.target, l.kind, t.path FROM links l JOIN notes s ON s.id = l.source_id "
        "LEFT JOIN notes t ON t.id = l.target_id ORDER BY s.path, l.rowid").fetchall()
    per_file: dict[str, list] = {}
    for source, target, kind, target_path in rows:
        per_file.setdefault(source, []).append((kind, target, target_path))
    mismatched = [p for p in files if len(per_file.get(p, [])) != len(written[p])]
    assert not mismatched, [(p, len(per_file.get(p, [])), len(written[p])) for p in mismatched[:5]]
    # the same targets, file by file (the index may order body and frontmatter links differently)
    for p, links in written.items():
        assert sorted(t for _, t in links) == sorted(t for _, t, _ in per_file.get(p, [])), p

    expected = Expected(files)
    wrong = []
    for source, target, kind, target_path in rows:
        want = expected.resolve("markdown" if kind == "markdown" else "wiki", target, source)
        if want is None and target_path is not None and not target_path.lower().endswith(".md"):
            continue  # an attachment: the scanner only knows notes
        if want != target_path:
            wrong.append((source, target, target_path, want))
    assert not wrong, wrong[:5]
    # attachments (images) are not part of these copies, so only links to notes count as dangling
    dangling = sum(1 for r in rows if r[3] is None and not re.search(r"\.(?!md$)\w{2,4}$", r[1].lower()))
    return {"links": len(rows), "dangling_notes": dangling, "files": len(files)}


def test_obsidian_help_en(shared_vault_copy) -> None:
    vault, store = _index(shared_vault_copy, "obsidian-help-en")
    counts = _check_against_files(vault, store)
    assert counts["links"] > 1500 and counts["dangling_notes"] < counts["links"] * 0.01
    # duplicate basenames: path-qualified links pick the named folder; a bare name the shortest path
    conn = store.conn

    def resolved(target: str) -> set[str]:
        return {r[0] for r in conn.execute(
            "SELECT t.path FROM links l LEFT JOIN notes t ON t.id = l.target_id WHERE l.target = ?", (target,))}

    assert resolved("Plugins/Templates") == {"Plugins/Templates.md"}
    assert resolved("Obsidian Web Clipper/Templates") == {"Obsidian Web Clipper/Templates.md"}
    (vault / "dup-probe.md").write_text("[[templates]] [[Security and privacy]] [[obsidian PUBLISH/security and privacy]]\n",
                                        encoding="utf-8")
    sync(vault, store=store, progress=False)
    assert resolved("templates") == {"Plugins/Templates.md"}
    assert resolved("Security and privacy") == {"Obsidian Sync/Security and privacy.md"}
    assert resolved("obsidian PUBLISH/security and privacy") == {"Obsidian Publish/Security and privacy.md"}
    assert "Linking notes and files/Internal links.md" in [h.path for h in search(store, "internal links", mode="lexical").hits[:3]]


def test_obsidian_help_ja_and_permalink_pairs(shared_vault_copy) -> None:
    en_vault, en = _index(shared_vault_copy, "obsidian-help-en")
    ja_vault, ja = _index(shared_vault_copy, "obsidian-help-ja")
    counts = _check_against_files(ja_vault, ja)
    assert counts["links"] > 1500 and counts["dangling_notes"] < counts["links"] * 0.01
    non_ascii = ja.conn.execute(
        "SELECT count(*) FROM links l JOIN notes t ON t.id = l.target_id WHERE t.path GLOB '*[^ -~]*'").fetchone()[0]
    assert non_ascii > 1000  # links into Japanese paths resolve

    def pairs(store: Store) -> dict[str, tuple[int, str]]:
        return {r[2]: (r[0], r[1]) for r in store.conn.execute(
            "SELECT id, path, json_extract(frontmatter, '$.permalink') FROM notes WHERE json_extract(frontmatter, '$.permalink') IS NOT NULL")}

    en_p, ja_p = pairs(en), pairs(ja)
    common = set(en_p) & set(ja_p)
    assert len(common) >= 150

    def linked_permalinks(store: Store, note_id: int, by_id: dict[int, str]) -> set[str]:
        return {by_id[r[0]] for r in store.conn.execute(
            "SELECT DISTINCT target_id FROM links WHERE source_id = ? AND target_id IS NOT NULL", (note_id,)) if r[0] in by_id}

    en_by_id = {v[0]: k for k, v in en_p.items()}
    ja_by_id = {v[0]: k for k, v in ja_p.items()}
    agree = total = 0
    for permalink in common:
        a = linked_permalinks(en, en_p[permalink][0], en_by_id)
        b = linked_permalinks(ja, ja_p[permalink][0], ja_by_id)
        agree += len(a & b)
        total += len(a | b)
    # a translation links to the translations of the same notes: the two graphs line up
    assert total > 500 and agree / total > 0.85, (agree, total)


@pytest.mark.slow
def test_obsidian_hub(shared_vault_copy) -> None:
    vault, store = _index(shared_vault_copy, "obsidian-hub")
    counts = _check_against_files(vault, store)
    assert counts["files"] > 6000 and counts["links"] > 20000
    again = sync(vault, store=store, progress=False)
    assert not again.changed
    problems = store.conn.execute("SELECT count(*) FROM problems").fetchone()[0]
    assert problems == sum(1 for _ in again.problems) or problems > 0  # broken YAML reported, not fatal
