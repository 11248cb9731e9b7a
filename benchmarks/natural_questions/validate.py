"""Check the natural-question cases against the vaults, without ranking anything.

    python benchmarks/natural_questions/validate.py [DATA_DIR]     (default ../shared/data)

Plain file checks only (no index, no search, no scores), so running it never shows what a
ranking would return:
- every expected path exists in its vault;
- `identifier` and `short-term` queries occur verbatim (case-insensitive) in every expected note,
  and the other notes holding the same string are listed so the case author can judge whether
  they answer too;
- `two-notes` cases name two notes and at least one wikilinks to the other;
- `no-answer` cases have no expectation and their query does not occur verbatim in any note.
Exits 1 when a check fails.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
VAULTS = {"obsidian-help-en", "obsidian-help-ja", "obsidian-hub"}
CATEGORIES = {"paraphrase-en", "paraphrase-ja", "en-to-ja", "ja-to-en", "identifier", "short-term",
              "two-notes", "no-answer", "hub-natural"}
LINK = re.compile(r"\[\[([^\]|#]+)")


def notes(vault: Path) -> dict[str, str]:
    """Vault-relative path → text, skipping dot folders (as the indexer does)."""
    out = {}
    for p in sorted(vault.rglob("*.md")):
        rel = p.relative_to(vault)
        if any(part.startswith(".") for part in rel.parts):
            continue
        out[rel.as_posix()] = p.read_text(encoding="utf-8", errors="replace")
    return out


def contains(text: str, term: str) -> bool:
    if term.isascii() and re.fullmatch(r"[A-Za-z0-9]+", term):
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(term)}(?![A-Za-z0-9])", text, re.I) is not None
    return term.lower() in text.lower()


def check_file(path: Path, vault: Path) -> tuple[list[str], dict[str, int]]:
    texts = notes(vault)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    counts: dict[str, int] = {}
    seen: set[str] = set()
    for n, case in enumerate(data["cases"], start=1):
        q, cat, expect = case["query"], case.get("category"), case.get("expect") or []
        where = f"{path.name} case {n} ({q!r})"
        counts[cat] = counts.get(cat, 0) + 1
        if q in seen:
            problems.append(f"{where}: duplicate query")
        seen.add(q)
        if cat not in CATEGORIES:
            problems.append(f"{where}: unknown category {cat!r}")
        for e in expect:
            if e not in texts:
                problems.append(f"{where}: expected note missing: {e}")
        if cat == "no-answer":
            if expect:
                problems.append(f"{where}: no-answer case lists notes")
            hits = [p for p, t in texts.items() if q.lower() in t.lower()]
            if hits:
                problems.append(f"{where}: query text occurs in {hits[:3]}")
            continue
        if not expect:
            problems.append(f"{where}: no expected notes")
        if cat in ("identifier", "short-term"):
            terms = [q] if cat == "identifier" else q.split()[:1]
            for term in terms:
                for e in expect:
                    if e in texts and not contains(texts[e], term):
                        problems.append(f"{where}: {term!r} not in {e}")
                others = [p for p, t in texts.items() if p not in expect and contains(t, term)]
                if others:
                    print(f"  note: {where}: {term!r} also in {len(others)} other notes, e.g. {others[:4]}")
        if cat == "two-notes":
            if not case.get("expect_all") or len(expect) != 2:
                problems.append(f"{where}: two-notes needs expect_all: true and exactly two notes")
            elif all(e in texts for e in expect):
                a, b = expect
                names = {x: Path(x).stem for x in expect}
                linked = any(names[y] in {t.strip() for t in LINK.findall(texts[x])} or
                             f"{names[y]}" in {Path(t.strip()).name for t in LINK.findall(texts[x])}
                             for x, y in ((a, b), (b, a)))
                if not linked:
                    problems.append(f"{where}: neither note links to the other")
    return problems, counts


def main() -> int:
    data_dir = Path(sys.argv[1] if len(sys.argv) > 1 else HERE.parents[1] / ".." / "shared" / "data")
    problems: list[str] = []
    total = 0
    for name in sorted(VAULTS):
        vault = data_dir / "vaults" / name
        path = HERE / f"{name}.yaml"
        if not vault.is_dir():
            print(f"skip {name}: {vault} not found")
            continue
        p, counts = check_file(path, vault)
        problems += p
        total += sum(counts.values())
        print(f"{name}: {sum(counts.values())} cases  " + "  ".join(f"{c}={k}" for c, k in sorted(counts.items())))
    print(f"total: {total} cases")
    for p in problems:
        print("PROBLEM", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
