"""Provenance: a note that absorbed raw material must cite it, so no orphan loses its source.

A capture marked ``processed_into: "[[X]]"`` is raw material of X. When X does not link back to it
anywhere, a ``## Sources`` section listing the missing captures is added (or extended).
"""

from __future__ import annotations

from collections import defaultdict

from .corpus import Corpus
from .edits import Edit, StepResult, append_to_section
from .rejected import Rejections


def provenance(corpus: Corpus, rejected: Rejections | None = None) -> StepResult:
    step = StepResult("provenance")
    rejected = rejected or Rejections()
    raw: dict[str, list[str]] = defaultdict(list)
    for path, doc in corpus.docs.items():
        pointer = doc.note.frontmatter.get("processed_into")
        if not isinstance(pointer, str):
            continue
        target = pointer.strip().removeprefix("[[").removesuffix("]]").split("|")[0].split("#")[0]
        resolved = corpus.resolve(target, path) if target else None
        if resolved and resolved in corpus.docs and resolved != path:
            raw[resolved].append(path)
    for target, sources in sorted(raw.items()):
        cited = corpus.out_edges.get(target, set())
        missing = []
        for s in sorted(s for s in sources if s not in cited):
            why = rejected.blocks(f"provenance:{target}:{s}")
            if why:
                step.skipped.append(f"cite {s} in {target}: rejected earlier ({why})")
            else:
                missing.append(s)
        if not missing:
            continue
        if not corpus.writable(target):
            step.skipped.append(f"{target}: {corpus.docs[target].protected}")
            continue
        doc = corpus.docs[target]
        text = append_to_section(doc.text, "Sources", [f"- [[{corpus.docs[s].link}]]" for s in missing])
        step.edits.append(Edit(target, text, expected_mtime_ns=doc.mtime_ns))
        step.keys += [f"provenance:{target}:{s}" for s in missing]
        step.actions.append(f"{target}: cited {len(missing)} source(s): " + ", ".join(corpus.docs[s].stem for s in missing))
    return step
