"""The atomicity gate: find notes that hold two topics, and split them only when asked.

Each paragraph of a note is embedded; cohesion is the mean pairwise similarity of its paragraphs.
A note below ``COHESION`` (0.50) whose paragraphs fall into two *clear* clusters — the best split
point in reading order leaves each side with two or more paragraphs that are much closer to each
other than to the other side — is flagged with the proposed split. With ``split=True`` the second
part becomes its own note and the first keeps a link to it; otherwise nothing is written.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

from ..vault.frontmatter import set_fields
from ..vault.notes import KNOWLEDGE
from ..vault.writer import unique_note_path
from .corpus import Corpus
from .edits import Edit, StepResult, body_paragraphs
from .rejected import Rejections
from .vectors import Vectorizer

COHESION = 0.50
MIN_PARAGRAPHS = 4
MIN_PARAGRAPH_CHARS = 40
# within-side similarity must beat cross-side similarity by this much. Lexical paragraph vectors
# rarely overlap at all, so their cohesion is low for every note; they need a wider margin.
CLEAR_MARGIN = {"embed": 0.15, "lexical": 0.30}


def _mean_offdiag(sims: np.ndarray) -> float:
    n = len(sims)
    if n < 2:
        return 1.0
    return float((sims.sum() - np.trace(sims)) / (n * (n - 1)))


def best_split(sims: np.ndarray) -> tuple[int, float, float] | None:
    """(split index, within, between) of the clearest two-part split in reading order, or None."""
    n = len(sims)
    best = None
    for cut in range(2, n - 1):
        within = (_mean_offdiag(sims[:cut, :cut]) + _mean_offdiag(sims[cut:, cut:])) / 2
        between = float(sims[:cut, cut:].mean())
        if best is None or within - between > best[1] - best[2]:
            best = (cut, within, between)
    return best


def atomicity(corpus: Corpus, vectorizer: Vectorizer, split: bool = False,
              today: _dt.date | None = None, rejected: Rejections | None = None) -> StepResult:
    step = StepResult("atomicity")
    today = today or _dt.date.today()
    rejected = rejected or Rejections()
    for path, doc in sorted(corpus.docs.items()):
        if doc.note.kind != KNOWLEDGE or corpus.is_hub(path):
            continue
        paras = [p for p in body_paragraphs(doc.note.body)
                 if len(p) >= MIN_PARAGRAPH_CHARS and not p.lstrip().startswith("|")]  # prose, not tables
        if len(paras) < MIN_PARAGRAPHS:
            continue
        vecs = vectorizer.vectors(paras)
        sims = vecs @ vecs.T
        cohesion = _mean_offdiag(sims)
        if cohesion >= COHESION:
            continue
        found = best_split(sims)
        if found is None:
            continue
        cut, within, between = found
        if within - between < CLEAR_MARGIN[vectorizer.backend]:
            continue
        why = rejected.blocks(f"atomicity:{path}")
        if why:
            step.skipped.append(f"split {path}: rejected earlier ({why})")
            continue
        proposal = {"path": path, "cohesion": round(cohesion, 3), "within": round(within, 3),
                    "between": round(between, 3), "split_before": paras[cut][:80]}
        step.proposals.append(proposal)
        if not split:
            continue  # proposed only: the report lists it, nothing is written
        if not corpus.writable(path):
            step.skipped.append(f"{path}: {doc.protected}")
            continue
        second = paras[cut:]
        title = f"{doc.note.title} (part 2)"
        rel = unique_note_path(corpus.vault, path.rsplit("/", 1)[0] if "/" in path else "", title)
        new_body = f"# {title}\n\nSplit from [[{doc.link}]] by the dream pass.\n\n" + "\n\n".join(second) + "\n"
        new_text = set_fields(new_body, {"title": title, "kind": KNOWLEDGE, "tags": doc.note.tags,
                                         "created": today, "updated": today})
        kept = doc.text
        for para in second:
            kept = kept.replace(para, "", 1)
        kept = kept.rstrip("\n") + f"\n\nSplit out: [[{rel.removesuffix('.md')}]]\n"
        import re

        kept = re.sub(r"\n{3,}", "\n\n", kept)
        step.edits.append(Edit(rel, new_text, create=True))
        step.edits.append(Edit(path, kept, expected_mtime_ns=doc.mtime_ns))
        step.actions.append(f"split {path} into {rel}")
        step.keys.append(f"atomicity:{path}")
    return step
