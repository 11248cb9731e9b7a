"""Promotion: each surviving cluster of captures becomes a knowledge note, or is folded into one.

The fold target is the knowledge note the captures themselves link to most (a person's own pointer
beats any similarity), else the most similar knowledge note above ``FOLD``; else a new note.

The captures are never deleted: each is marked ``status: processed`` with ``processed_into:
"[[target]]"``, so the raw material stays findable and a later pass skips it. A new note lands at
the vault root (where knowledge notes live) and cites every capture under ``## Sources``. What is
carried over is the capture's own words made right for the new place (``excerpt``); dates are
written as YAML dates, and a field keeps the type it had (a quoted date stays a string).

A promotion a person rejected (reverted, or ``dream --reject``) is not planned again: two or more
of its captures going to the same place again are left where they are.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import Counter

import numpy as np
import yaml

from ..vault.frontmatter import set_fields, split
from ..vault.notes import KNOWLEDGE
from ..vault.writer import unique_note_path
from .corpus import Corpus, Doc, note_date
from .edits import Edit, StepResult, append_to_section
from .excerpt import carry, target_terms
from .rejected import Rejections, promote_key

FOLD = {"lexical": 0.35, "embed": 0.55}  # a cluster this close to a knowledge note is folded into it
EXCERPT = 1500

_TITLE_NOISE = re.compile(r"\((?:braindump|capture|メモ)\)|^(?:学び|learning|braindump|capture|メモ)\s*[:：]\s*", re.I)


def _clean_title(title: str) -> str:
    title = _TITLE_NOISE.sub("", title).strip(" -:：")
    return re.sub(r"^\d{4}-\d{2}-\d{2}[ -]*", "", title).strip() or title


def dated(text: str, key: str, day: _dt.date) -> _dt.date | str:
    """``day`` as the field ``key`` of ``text`` holds dates: a YAML date, or a string when it was quoted."""
    raw, _, _ = split(text)
    if raw:
        for line in raw.splitlines():
            if line.startswith(f"{key}:"):
                try:
                    value = yaml.safe_load(line.split(":", 1)[1])
                except yaml.YAMLError:
                    break
                if isinstance(value, str):
                    return day.isoformat()
                break
    return day


def _processed(doc: Doc, target_stem: str, today: _dt.date) -> Edit:
    text = set_fields(doc.text, {"status": "processed", "processed_into": f"[[{target_stem}]]",
                                 "updated": dated(doc.text, "updated", today)})
    return Edit(doc.path, text, expected_mtime_ns=doc.mtime_ns)


def new_note_text(corpus: Corpus, rel: str, title: str, members: list[Doc], today: _dt.date) -> str:
    scope = Counter(d.note.scope or "work" for d in members).most_common(1)[0][0]
    tags = [t for t, _ in Counter(t for d in members for t in d.note.tags
                                  if t.lower() not in ("todo", "learning", "daily")).most_common(6)]
    stems = [d.link for d in members]
    description = f"{title}: consolidated from {len(members)} captures — " + "; ".join(
        _clean_title(d.note.title) for d in members[:4])
    lines = [f"# {title}", "", f"Consolidated by the dream pass on {today.isoformat()} from {len(members)} captures.", ""]
    have: list[set[str]] = []
    for d in members:
        words = carry(corpus, d, rel, have, limit=EXCERPT)
        if words:
            lines += [f"## {_clean_title(d.note.title)}", "", words, "", f"Source: [[{d.link}]]", ""]
    lines += ["## Sources", ""] + [f"- [[{s}]] ({note_date(d).isoformat()})" for s, d in zip(stems, members, strict=True)]
    body = "\n".join(lines) + "\n"
    return set_fields(body, {"title": title, "description": description[:300], "kind": KNOWLEDGE, "scope": scope,
                             "tags": tags, "created": today, "updated": today,
                             "consolidated_from": [f"[[{s}]]" for s in stems]})


def fold_text(corpus: Corpus, target: Doc, members: list[Doc], today: _dt.date) -> str:
    """``target`` with what each capture adds under ``## From captures``; a capture that adds nothing
    new is only cited under ``## Sources``."""
    have = target_terms(target)
    blocks, cited = [], []
    for d in members:
        words = carry(corpus, d, target.path, have, limit=EXCERPT)
        if words:
            blocks.append(f"### {_clean_title(d.note.title)} ({note_date(d).isoformat()})\n\n{words}\n\n"
                          f"Source: [[{d.link}]]\n")
        else:
            cited.append(f"- [[{d.link}]]")
    text = target.text
    if blocks:
        text = append_to_section(text, "From captures", ["\n".join(blocks)])
    if cited:
        text = append_to_section(text, "Sources", cited)
    try:
        return set_fields(text, {"updated": dated(target.text, "updated", today)})
    except ValueError:
        return text


def promote(corpus: Corpus, groups: list[list[str]], vectors: dict[str, np.ndarray], backend: str,
            today: _dt.date, rejected: Rejections | None = None) -> StepResult:
    """Plan one new note or one fold per group of two or more ready captures."""
    step = StepResult("promote")
    rejected = rejected or Rejections()
    knowledge = [p for p, d in corpus.docs.items()
                 if d.note.kind == KNOWLEDGE and not corpus.is_hub(p) and p in vectors]
    kmat = np.stack([vectors[p] for p in knowledge]) if knowledge else None
    knowledge_set = set(knowledge)
    planned: set[str] = set()
    for group in groups:
        if len(group) < 2:
            continue
        members = [corpus.docs[p] for p in group]
        centroid = np.mean([vectors[p] for p in group if p in vectors], axis=0)
        norm = float(np.linalg.norm(centroid)) or 1.0
        target = None
        # the captures' own links are the strongest evidence: fold into the knowledge note most of them point at
        linked = Counter(t for p in group for t in corpus.out_edges.get(p, ())
                         if t in knowledge_set and corpus.writable(t) and t not in planned)
        if linked:
            target = max(linked, key=lambda t: (linked[t], float(np.dot(vectors[t], centroid / norm)), t))
        if target is None and kmat is not None:
            sims = kmat @ (centroid / norm)
            order = np.argsort(-sims)
            for idx in order[:3]:
                cand = knowledge[int(idx)]
                if sims[idx] < FOLD[backend]:
                    break
                if corpus.writable(cand) and cand not in planned:
                    target = cand
                    break
        why = rejected.blocks_promotion(target or "new", group)
        if why:
            step.skipped.append(f"{'fold into ' + target if target else 'new note'} from "
                                f"{', '.join(d.stem for d in members)}: rejected earlier ({why})")
            continue
        step.keys.append(promote_key(target or "new", group))
        if target is not None:
            tdoc = corpus.docs[target]
            step.edits.append(Edit(target, fold_text(corpus, tdoc, members, today), expected_mtime_ns=tdoc.mtime_ns))
            stem = tdoc.link
            step.actions.append(f"folded {len(members)} captures into {target}: " + ", ".join(d.stem for d in members))
        else:
            medoid = max(members, key=lambda d: float(np.dot(vectors.get(d.path, centroid), centroid)))
            title = _clean_title(medoid.note.title)
            rel = unique_note_path(corpus.vault, "", title)
            while rel in planned:
                rel = rel.removesuffix(".md") + "-x.md"
            stem = rel.removesuffix(".md")
            step.edits.append(Edit(rel, new_note_text(corpus, rel, title, members, today), create=True))
            step.actions.append(f"new note {rel} from {len(members)} captures: " + ", ".join(d.stem for d in members))
            target = rel
        planned.add(target)
        step.edits.extend(_processed(d, stem, today) for d in members)
    return step
