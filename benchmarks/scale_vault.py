#!/usr/bin/env python3
"""Deterministic scale vaults (1k … 100k notes, 300k with ``--big``) made from real material.

obsidian-hub (6,571 notes) gives the *shape*: folders and their depth, file-name duplicates,
frontmatter, headings, link lines and the link graph itself. JSQuAD and SciFact passages give the
*words*. A vault of N notes is built from replicas of the hub's notes:

* replica 0 is obsidian-hub itself, verbatim (below 6,571 notes a fixed random subset of it, its
  links to notes left out re-pointed to notes kept, so links stay links);
* replica r ≥ 1 repeats every hub note r-th time in folders renamed ``<name> (r)`` (same depth),
  named after its main passage (a SciFact title, a JSQuAD article + paragraph), its prose lines
  replaced by passage sentences of about the same length, its headings, list and link lines kept,
  and each ``[[link]]`` re-pointed to the renamed copy of its target — in the same replica nine
  times in ten, else in another one, so the replicas form one graph, not islands. Hub notes that
  share a basename share one in every replica, so the duplicate-name rate stays the hub's.

Every choice comes from a hash of (seed, replica, note), so the same arguments give byte-identical
vaults. Vaults go under /tmp (or any folder you name); never commit one.

    .venv/bin/python benchmarks/scale_vault.py ../shared/data /tmp/scale-vaults            # 1k 10k 30k 100k
    .venv/bin/python benchmarks/scale_vault.py ../shared/data /tmp/scale-vaults --sizes 10k
    .venv/bin/python benchmarks/scale_vault.py ../shared/data /tmp/scale-vaults --big      # also 300k

Each vault folder gets ``scale-manifest.json`` (outside the notes: it is a dot-file) with the
arguments and the statistics the benchmark compares with the hub's: notes, folders, depth
histogram, links per note, resolved share, duplicate basenames, languages.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from memory_hub.vault.links import Resolver  # noqa: E402

SIZES = {"1k": 1_000, "10k": 10_000, "30k": 30_000, "100k": 100_000}
BIG = {"300k": 300_000}
HUB = "vaults/obsidian-hub"
MANIFEST = ".scale-manifest.json"
SAME_REPLICA = 0.9  # share of a copy's links that stay inside its replica
WIKI = re.compile(r"(!?)\[\[([^\[\]\n]+?)\]\]")
FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
BAD_NAME = re.compile(r'[\\/:*?"<>|#^\[\]\n\r\t]+')
SENTENCE_EN = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")
SENTENCE_JA = re.compile(r"(?<=。)")
PROSE_MIN = 40  # lines shorter than this (labels, "---", comments) are kept as they are


def h(*parts: object) -> int:
    """A stable 64-bit hash (``hash()`` changes with PYTHONHASHSEED)."""
    raw = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")


def permutation(n: int, *seed: object) -> list[int]:
    return sorted(range(n), key=lambda i: h(*seed, i))


@dataclass
class Template:
    """One obsidian-hub note: where it lives, its text, and which hub note each link resolves to."""

    path: str
    text: str
    targets: dict[str, int | None]  # link target as written → template index (None: dangling)


@dataclass
class Passage:
    title: str
    sentences: list[str]
    lang: str


def load_hub(data: Path) -> list[Template]:
    root = data / HUB
    if not root.is_dir():
        sys.exit(f"no obsidian-hub vault at {root}")
    paths = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for f in sorted(files):
            if f.endswith(".md") and not f.startswith("."):
                paths.append(os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/"))
    paths.sort()
    texts = [(root / p).read_text(encoding="utf-8", errors="replace").replace("\r\n", "\n") for p in paths]
    resolver = Resolver(paths, {})
    index = {p: i for i, p in enumerate(paths)}
    out = []
    for p, text in zip(paths, texts, strict=True):
        targets: dict[str, int | None] = {}
        for m in WIKI.finditer(text):
            target = _target(m.group(2))
            if target and target not in targets:
                hit = resolver.resolve(target, p)
                targets[target] = index.get(hit) if hit else None
        out.append(Template(p, text, targets))
    return out


def _target(inner: str) -> str:
    return inner.replace("\\|", "|").split("|", 1)[0].split("#", 1)[0].strip()


def _sentences(text: str, lang: str) -> list[str]:
    parts = SENTENCE_JA.split(text) if lang == "ja" else SENTENCE_EN.split(text)
    return [s.strip() for s in parts if s.strip()]


def load_passages(data: Path) -> list[Passage]:
    """SciFact abstracts (English) and JSQuAD paragraphs (Japanese), in file order."""
    out: list[Passage] = []
    for name, lang in (("scifact", "en"), ("jsquad-ja", "ja")):
        path = data / name / "corpus.jsonl"
        if not path.exists():
            print(f"warning: {path} missing; its passages are left out", file=sys.stderr)
            continue
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                sentences = _sentences(row.get("text", ""), lang)
                if not sentences:
                    continue
                title = row.get("title") or sentences[0][:60]
                if lang == "ja":  # paragraphs of one article share its title: number them
                    doc = str(row.get("_id", ""))
                    title = f"{title} {doc.rsplit('p', 1)[-1]}" if "p" in doc else title
                out.append(Passage(title.strip(), sentences, lang))
    if not out:
        sys.exit(f"no passages under {data} (scifact/corpus.jsonl, jsquad-ja/corpus.jsonl)")
    return out


def _short_title(title: str, limit: int = 60) -> str:
    title = BAD_NAME.sub(" ", title).strip().rstrip(".")
    if len(title) <= limit:
        return title
    cut = title[:limit].rsplit(" ", 1)[0]
    return cut if len(cut) > limit // 2 else title[:limit]


class Plan:
    """Which notes exist and what each copy is called: (replica, hub index) → vault path."""

    def __init__(self, hub: list[Template], passages: list[Passage], notes: int, seed: str) -> None:
        self.hub = hub
        self.passages = passages
        self.seed = seed
        n_hub = len(hub)
        self.replicas = -(-notes // n_hub)
        order = permutation(n_hub, seed, "order")
        # the last (or only) replica holds the first ``notes - full`` hub notes of a fixed order
        self.exists: list[set[int]] = []
        for r in range(self.replicas):
            count = min(n_hub, notes - r * n_hub)
            self.exists.append(set(order[:count]))
        self.kept0 = sorted(self.exists[0])
        groups: dict[str, list[int]] = {}
        for i, t in enumerate(hub):
            groups.setdefault(t.path.rsplit("/", 1)[-1].lower(), []).append(i)
        self.group_head = {i: g[0] for g in groups.values() for i in g}  # shared basename → one name
        self.shared_names = {i for g in groups.values() if len(g) > 1 for i in g}  # linked by path
        self.main: dict[tuple[int, int], int] = {}
        self.paths: dict[tuple[int, int], str] = {}
        for r in range(1, self.replicas):
            pool = permutation(len(passages), seed, "passages", r)
            for slot, i in enumerate(sorted(self.exists[r])):
                self.main[(r, i)] = pool[slot % len(pool)]
        taken: set[str] = set()
        for r in range(self.replicas):
            for i in sorted(self.exists[r]):
                self.paths[(r, i)] = self._name(r, i, taken)

    def _name(self, r: int, i: int, taken: set[str]) -> str:
        path = self.hub[i].path
        if r == 0:
            return path
        folder, _, _ = path.rpartition("/")
        folder = "/".join(f"{part} ({r})" for part in folder.split("/")) if folder else ""
        head = self.group_head[i]
        passage = self.passages[self.main.get((r, head), self.main[(r, i)])]
        stem = f"{_short_title(passage.title)} ({r})"
        if head == i or (r, head) not in self.main:
            base, n = stem, 2
            while base.lower() in taken:  # two passages with the same short title
                base, n = f"{stem} {n}", n + 1
            taken.add(base.lower())
            stem = base
        else:
            stem = self.paths.get((r, head), f"/{stem}.md").rsplit("/", 1)[-1][:-3]
        return f"{folder}/{stem}.md" if folder else f"{stem}.md"

    def link_to(self, r: int, i: int, target: int | None, written: str) -> str | None:
        """The new target text for a link of copy (r, i) whose hub target is ``target``."""
        if target is None:
            return None  # dangling in the hub: stays dangling
        rr = r
        if self.replicas > 1 and h(self.seed, "cross", r, i, written) % 100 >= SAME_REPLICA * 100:
            rr = h(self.seed, "replica", r, i, written) % self.replicas
        if target not in self.exists[rr]:
            rr = 0 if target in self.exists[0] else rr
        if target not in self.exists[rr]:  # a note this size left out: a kept one stands in
            pool = sorted(self.exists[rr])
            target = pool[h(self.seed, "stand-in", target) % len(pool)]
        path = self.paths[(rr, target)][:-3]
        return path if target in self.shared_names else path.rsplit("/", 1)[-1]  # as people write them


def _rewrite_links(text: str, fix) -> str:  # noqa: ANN001 - fix(target as written) -> new or None
    def repl(m: re.Match[str]) -> str:
        inner = m.group(2)
        target = _target(inner)
        new = fix(target)
        if new is None:
            return m.group(0)
        rest = inner.replace("\\|", "|")[len(inner.replace("\\|", "|").split("|", 1)[0]):]
        anchor = inner.split("|", 1)[0].strip()
        anchor = anchor[len(target):] if anchor.startswith(target) else ""
        sep = "\\|" if "\\|" in inner else "|"
        alias = rest[1:] if rest.startswith("|") else ""
        return f"{m.group(1)}[[{new}{anchor}{sep + alias if alias else ''}]]"

    return WIKI.sub(repl, text)


class Words:
    """An endless supply of sentences in one language, starting at a note's main passage."""

    def __init__(self, passages: list[Passage], start: int, lang: str, seed: str, key: object) -> None:
        self.passages = passages
        self.lang = lang
        self.current = start
        self.pos = 0
        self.seed = seed
        self.key = key
        self.hops = 0

    def take(self, chars: int) -> str:
        out: list[str] = []
        size = 0
        while size < chars:
            p = self.passages[self.current]
            if self.pos >= len(p.sentences):
                self.hops += 1
                nxt = h(self.seed, "next", self.key, self.hops) % len(self.passages)
                for k in range(len(self.passages)):  # the next passage in the same language
                    cand = (nxt + k) % len(self.passages)
                    if self.passages[cand].lang == self.lang:
                        break
                self.current, self.pos = cand, 0
                continue
            s = p.sentences[self.pos]
            self.pos += 1
            out.append(s)
            size += len(s)
        return ("" if self.lang == "ja" else " ").join(out)


def render_copy(plan: Plan, r: int, i: int) -> str:
    """Hub note i as it appears in replica r ≥ 1: its shape, a passage's words, re-pointed links."""
    t = plan.hub[i]
    main = plan.main[(r, i)]
    passage = plan.passages[main]
    words = Words(plan.passages, main, passage.lang, plan.seed, (r, i))
    text = t.text
    m = FRONTMATTER.match(text)
    front, body = (m.group(1), text[m.end():]) if m else ("", text)
    fm_lines = []
    for line in front.split("\n") if front else []:
        if re.match(r"^(updated|created|date):", line):
            continue
        if re.match(r"^\s*-\s+\S", line) and fm_lines and fm_lines[-1].startswith("aliases"):
            line = f"{line.rstrip()} ({r})"  # an alias names this copy, not the hub note
        fm_lines.append(line)
    day = h(plan.seed, "date", r, i) % 2600
    year, rest = 2019 + day // 365, day % 365
    fm_lines.append(f"updated: {year}-{1 + rest // 31 % 12:02d}-{1 + rest % 28:02d}")
    title = plan.paths[(r, i)].rsplit("/", 1)[-1][:-3]

    def fix(target: str) -> str | None:
        return plan.link_to(r, i, t.targets.get(target), target)

    lines = []
    in_code = in_comment = False
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_code = not in_code
            lines.append(line)
            continue
        if "<!--" in stripped and "-->" not in stripped:
            in_comment = True
        if in_code or in_comment or stripped.startswith(("%%", "<!--", "|", "![", ">")):
            if "-->" in stripped:
                in_comment = False
            lines.append(_rewrite_links(line, fix))
            continue
        if stripped.startswith("# "):
            lines.append(f"# {title}")
        elif stripped.startswith("#") and re.match(r"^#{2,6} ", stripped):
            level = stripped.split(" ", 1)[0]
            lines.append(f"{level} {_short_title(words.take(20), 50)}")
        elif "[[" in line:
            lines.append(_rewrite_links(line, fix))
        elif len(stripped) >= PROSE_MIN:
            indent = line[: len(line) - len(line.lstrip())]
            bullet = re.match(r"^([-*+]|\d+\.)\s+", stripped)
            lead = bullet.group(0) if bullet else ""
            lines.append(indent + lead + words.take(len(stripped) - len(lead)))
        else:
            lines.append(line)
    return "---\n" + "\n".join(fm_lines) + "\n---\n" + "\n".join(lines)


def render_original(plan: Plan, i: int) -> str:
    """Hub note i in replica 0: verbatim, except links to hub notes this size left out."""
    t = plan.hub[i]
    kept = plan.exists[0]
    if all(v is None or v in kept for v in t.targets.values()):
        return t.text

    def fix(target: str) -> str | None:
        v = t.targets.get(target)
        if v is None or v in kept:
            return None
        return plan.link_to(0, i, v, target)

    return _rewrite_links(t.text, fix)


def generate(data: Path, out: Path, notes: int, seed: str = "scale-1", force: bool = False) -> dict:
    """Write a vault of ``notes`` notes into ``out`` (replaced if ``force``); return its manifest."""
    manifest_path = out / MANIFEST
    if out.exists():
        if manifest_path.exists() and not force:
            old = json.loads(manifest_path.read_text())
            if old.get("notes") == notes and old.get("seed") == seed and old.get("generator") == _digest():
                print(f"{out}: up to date ({notes} notes)", file=sys.stderr)
                return old
        if not force and any(out.iterdir()) and not manifest_path.exists():
            sys.exit(f"{out} exists and is not a scale vault; pass --force to replace it")
        shutil.rmtree(out)
    started = time.perf_counter()
    hub = load_hub(data)
    passages = load_passages(data)
    plan = Plan(hub, passages, notes, seed)
    out.mkdir(parents=True)
    langs: Counter[str] = Counter()
    for (r, i), path in sorted(plan.paths.items()):
        text = render_original(plan, i) if r == 0 else render_copy(plan, r, i)
        langs["hub" if r == 0 else plan.passages[plan.main[(r, i)]].lang] += 1
        full = out / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text, encoding="utf-8")
        os.utime(full, ns=(1_700_000_000_000_000_000 + h(seed, "mtime", r, i) % 10**16,) * 2)
    stats = vault_stats(out)
    manifest = {"notes": len(plan.paths), "requested": notes, "seed": seed, "replicas": plan.replicas,
                "generator": _digest(), "data": str(data), "languages": dict(langs), "stats": stats,
                "seconds": round(time.perf_counter() - started, 1)}
    manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return manifest


def _digest() -> str:
    return hashlib.sha1(Path(__file__).read_bytes()).hexdigest()[:12]


def vault_stats(root: Path) -> dict:
    """The statistics a scale vault should share with obsidian-hub (per note, so sizes compare)."""
    paths, folders = [], 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        folders += len(dirs)
        paths += [os.path.relpath(os.path.join(folder, f), root).replace(os.sep, "/")
                  for f in files if f.endswith(".md") and not f.startswith(".")]
    resolver = Resolver(paths, {})
    links = resolved = chars = 0
    for p in paths:
        text = (root / p).read_text(encoding="utf-8", errors="replace")
        chars += len(text)
        for m in WIKI.finditer(text):
            links += 1
            resolved += resolver.resolve(_target(m.group(2)), p) is not None
    names = Counter(p.rsplit("/", 1)[-1].lower() for p in paths)
    depth = Counter(p.count("/") for p in paths)
    n = max(1, len(paths))
    return {"notes": len(paths), "folders": folders, "notes_per_folder": round(n / max(1, folders), 1),
            "depth": {str(k): round(v / n, 4) for k, v in sorted(depth.items())},
            "links_per_note": round(links / n, 2), "resolved_share": round(resolved / max(1, links), 4),
            "duplicate_basename_share": round(sum(c for c in names.values() if c > 1) / n, 4),
            "mean_chars": round(chars / n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the shared data folder (holds vaults/obsidian-hub, scifact, jsquad-ja)")
    ap.add_argument("out", type=Path, help="where the vaults go, one folder per size (e.g. /tmp/scale-vaults)")
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma list of 1k,10k,30k,100k,300k or plain numbers")
    ap.add_argument("--big", action="store_true", help="also 300k notes")
    ap.add_argument("--seed", default="scale-1")
    ap.add_argument("--force", action="store_true", help="regenerate even when the manifest says up to date")
    ap.add_argument("--stats", action="store_true", help="print obsidian-hub's own statistics and exit")
    args = ap.parse_args()
    if args.stats:
        print(json.dumps(vault_stats(args.data / HUB), indent=1))
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()] + (list(BIG) if args.big else [])
    for label in sizes:
        notes = {**SIZES, **BIG}.get(label) or int(label.replace("k", "000"))
        target = args.out / f"notes-{notes}"
        m = generate(args.data, target, notes, args.seed, args.force)
        s = m["stats"]
        print(f"{target}: {s['notes']} notes, {s['folders']} folders, {s['links_per_note']} links/note "
              f"({s['resolved_share']:.1%} resolved), {s['duplicate_basename_share']:.2%} duplicate names, "
              f"in {m['seconds']}s")


if __name__ == "__main__":
    main()
