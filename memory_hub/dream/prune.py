"""Weak-link pruning: remove the weakest edges, but never a bridge.

Pruning by score alone cuts off regions that hang on a single link, so every candidate removal is
checked against the bridges of the current graph (Tarjan, recomputed after each removal). Only
links listed on their own line in a ``Related`` / ``See also`` / 関連 section are candidates —
links inside prose are part of a sentence and are never removed.
"""

from __future__ import annotations

import re
from collections import defaultdict

import numpy as np

from .corpus import Corpus
from .edits import Edit, StepResult
from .rejected import Rejections

WEAK = {"lexical": 0.03, "embed": 0.0}
MAX_PRUNE = 20
_LIST_SECTION = re.compile(r"(?im)^##[ \t]+(related|see also|関連|関連ノート|links)[ \t]*$")
_LIST_LINK = re.compile(r"^[ \t]*[-*][ \t]+\[\[([^\]|#]+)[^\]]*\]\][ \t]*$")


def bridges(adjacency: dict[str, set[str]]) -> set[frozenset[str]]:
    """Edges whose removal disconnects the graph (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    out: set[frozenset[str]] = set()
    counter = 0
    for root in adjacency:
        if root in index:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack = [(root, None, iter(sorted(adjacency[root])))]
        while stack:
            node, parent, it = stack[-1]
            advanced = False
            for nxt in it:
                if nxt == parent:
                    continue
                if nxt in index:
                    low[node] = min(low[node], index[nxt])
                else:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append((nxt, node, iter(sorted(adjacency[nxt]))))
                    advanced = True
                    break
            if advanced:
                continue
            stack.pop()
            if parent is not None:
                low[parent] = min(low[parent], low[node])
                if low[node] > index[parent]:
                    out.add(frozenset((parent, node)))
    return out


def _list_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of links standing alone on a line inside a list-of-links section."""
    found = []
    in_section = False
    for i, line in enumerate(text.splitlines()):
        if line.startswith("#"):
            in_section = bool(_LIST_SECTION.match(line))
            continue
        if in_section:
            m = _LIST_LINK.match(line)
            if m:
                found.append((i, m.group(1).strip()))
    return found


def prune(corpus: Corpus, vectors: dict[str, np.ndarray], backend: str, max_prune: int = MAX_PRUNE,
          rejected: Rejections | None = None) -> StepResult:
    step = StepResult("prune")
    rejected = rejected or Rejections()
    adjacency: dict[str, set[str]] = defaultdict(set)
    for src, targets in corpus.out_edges.items():
        for dst in targets:
            adjacency[src].add(dst)
            adjacency[dst].add(src)
    candidates = []
    for path, doc in corpus.docs.items():
        if not corpus.writable(path) or path not in vectors:
            continue
        for lineno, target in _list_links(doc.text):
            dst = corpus.resolve(target, path)
            if not dst or dst not in vectors or corpus.is_hub(dst) or corpus.is_hub(path):
                continue
            if path in corpus.out_edges.get(dst, set()):
                continue  # linked both ways: not weak, whatever the text says
            if sum(1 for ln in doc.note.links if corpus.resolve(ln.target, path, ln.kind) == dst) != 1:
                continue  # also linked from prose: removing the list line would not remove the edge
            sim = float(vectors[path] @ vectors[dst])
            if sim < WEAK[backend]:
                candidates.append((sim, path, dst, lineno))
    candidates.sort()
    removed_lines: dict[str, set[int]] = defaultdict(set)
    current = bridges(adjacency) if candidates else set()
    for sim, src, dst, lineno in candidates:
        if len(step.actions) >= max_prune:
            break
        if frozenset((src, dst)) in current:
            step.skipped.append(f"kept {src} → {dst} (similarity {sim:.2f}): a bridge")
            continue
        why = rejected.blocks(f"prune:{src}>{dst}")
        if why:
            step.skipped.append(f"kept {src} → {dst}: removing it was rejected earlier ({why})")
            continue
        adjacency[src].discard(dst)
        adjacency[dst].discard(src)
        removed_lines[src].add(lineno)
        current = bridges(adjacency)
        step.actions.append(f"removed weak link {src} → {dst} (similarity {sim:.2f})")
        step.keys.append(f"prune:{src}>{dst}")
    for path, lines in removed_lines.items():
        doc = corpus.docs[path]
        kept = [ln for i, ln in enumerate(doc.text.splitlines(keepends=True)) if i not in lines]
        step.edits.append(Edit(path, "".join(kept), expected_mtime_ns=doc.mtime_ns))
    return step
