"""Near-duplicate merge: two notes saying the same thing become one; links to the loser follow.

The winner is the note more of the vault points at (then the longer, then the older). The loser's
paragraphs the winner lacks are appended under ``## Merged from <loser>``, the loser's title joins
the winner's aliases, every wikilink to the loser is rewritten to the winner (alias kept, so the
sentence still reads the same) and the loser's file is removed — git keeps it, and reverting the
commit brings it back. A merge is skipped when any note that links to the loser may not be written
(a daily note, a template, a note being edited): its link would dangle.
"""

from __future__ import annotations

import re

import numpy as np

from ..vault.frontmatter import set_fields
from ..vault.notes import CAPTURE, KNOWLEDGE
from .corpus import Corpus, Doc
from .edits import Edit, StepResult, append_to_section, body_paragraphs, rewrite_links
from .rejected import Rejections, pair_key
from .vectors import top_pairs

THRESHOLD = {"lexical": 0.85, "embed": 0.90}
MIN_OWN_TERMS = 12  # distinct words beyond the title (template lines removed) a note needs to be merged
MERGEABLE = frozenset({KNOWLEDGE, CAPTURE})


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def _title_words(title: str) -> set[str]:
    return {w for w in re.findall(r"\w+", title.lower()) if not w.isdigit()}


def same_subject(a: str, b: str) -> bool:
    """Titles that name the same thing: one contains the other, or most of their words are shared.

    Text alone is not enough: stubs made from one template (people, plugins) differ only in a name
    and look identical to any vector.
    """
    na, nb = " ".join(sorted(_title_words(a))), " ".join(sorted(_title_words(b)))
    if not na or not nb:
        return False
    wa, wb = set(na.split()), set(nb.split())
    if wa <= wb or wb <= wa:
        return True
    return len(wa & wb) / len(wa | wb) >= 0.6


def _rank(corpus: Corpus, doc: Doc) -> tuple[int, int, float]:
    return (len(corpus.in_edges.get(doc.path, ())), len(doc.note.body), -doc.mtime_ns)


def merge_text(winner: Doc, loser: Doc) -> str:
    have = {_norm(p) for p in body_paragraphs(winner.note.body)}
    extra = [p for p in body_paragraphs(loser.note.body) if _norm(p) and _norm(p) not in have]
    text = winner.text
    if extra:
        text = append_to_section(text, f"Merged from {loser.note.title}", ["\n\n".join(extra)])
    aliases = list(dict.fromkeys(winner.note.aliases + [loser.note.title] + loser.note.aliases))
    aliases = [a for a in aliases if a != winner.note.title]
    tags = list(dict.fromkeys(winner.note.tags + loser.note.tags))
    try:
        return set_fields(text, {"aliases": aliases, "tags": tags})
    except ValueError:
        return text


_URL = re.compile(r"https?://[^\s)<>\]\"']+")


def conflicting_sources(a: Doc, b: Doc) -> bool:
    """Each note cites a URL the other lacks: two things (two repositories, two people), not one."""
    ua, ub = set(_URL.findall(a.note.body)), set(_URL.findall(b.note.body))
    return bool(ua - ub) and bool(ub - ua)


def own_terms(title: str, text: str) -> int:
    """Distinct content words of ``text`` that are not in the title: what a note says of its own."""
    from ..capture.classify import content_terms

    return len(set(content_terms(text)) - set(content_terms(title)))


def dedupe(corpus: Corpus, vectors: dict[str, np.ndarray], backend: str,
           texts_for: dict[str, str] | None = None, rejected: Rejections | None = None) -> StepResult:
    """Plan merges of near-duplicate pairs.

    Besides similar text, a pair must be in the same folder, have titles naming the same thing,
    each note must say something of its own (``MIN_OWN_TERMS`` words beyond its title once template
    lines are removed) — stubs made from one template are similar to each other *because* they are
    empty — and the two must not cite different sources (each a URL the other lacks).
    """
    step = StepResult("dedupe")
    texts_for = texts_for or {}
    rejected = rejected or Rejections()
    paths = [p for p, d in corpus.docs.items()
             if d.note.kind in MERGEABLE and not corpus.is_hub(p) and p in vectors
             and str(d.note.frontmatter.get("status") or "") != "processed"]
    if len(paths) < 2:
        return step
    mat = np.stack([vectors[p] for p in paths])
    pairs = sorted(top_pairs(mat, k=3, min_sim=THRESHOLD[backend]), key=lambda t: -t[2])
    texts: dict[str, str] = {}
    used: set[str] = set()
    for a, b, sim in pairs:
        da, db = corpus.docs[paths[a]], corpus.docs[paths[b]]
        if da.note.kind != db.note.kind or used & {da.path, db.path}:
            continue
        if not same_subject(da.note.title, db.note.title):
            continue
        if da.path.rsplit("/", 1)[0:-1] != db.path.rsplit("/", 1)[0:-1]:
            continue
        if min(own_terms(d.note.title, texts_for.get(d.path, d.note.body)) for d in (da, db)) < MIN_OWN_TERMS:
            continue
        if conflicting_sources(da, db):
            continue
        winner, loser = (da, db) if _rank(corpus, da) >= _rank(corpus, db) else (db, da)
        key = pair_key("dedupe", da.path, db.path)
        why = rejected.blocks(key)
        if why:
            step.skipped.append(f"merge {loser.path} → {winner.path}: rejected earlier ({why})")
            continue
        linkers = sorted(corpus.in_edges.get(loser.path, set()) - {winner.path})
        blocked = [p for p in [winner.path, loser.path, *linkers] if not corpus.writable(p)]
        step.proposals.append({"winner": winner.path, "loser": loser.path, "similarity": round(sim, 3),
                               "blocked_by": blocked})
        if blocked:
            step.skipped.append(f"merge {loser.path} → {winner.path}: {blocked[0]} may not be written")
            continue
        used |= {winner.path, loser.path, *linkers}
        step.keys.append(key)

        def is_loser(target: str, _src: str = "", _loser: str = loser.path) -> bool:
            return corpus.resolve(target) == _loser

        texts[winner.path] = merge_text(winner, loser)
        texts[winner.path], _ = rewrite_links(texts[winner.path], is_loser, winner.link)
        rewritten = 0
        for p in linkers:
            new, n = rewrite_links(texts.get(p, corpus.docs[p].text), is_loser, winner.link)
            texts[p] = new
            rewritten += n
        step.edits.append(Edit(loser.path, None, expected_mtime_ns=loser.mtime_ns))
        step.actions.append(f"merged {loser.path} into {winner.path} (similarity {sim:.2f}; "
                            f"{rewritten} link(s) rewritten in {len(linkers)} note(s))")
    for path, text in texts.items():
        step.edits.append(Edit(path, text, expected_mtime_ns=corpus.docs[path].mtime_ns))
    return step
