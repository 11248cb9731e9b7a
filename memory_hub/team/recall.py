"""Recall over several vaults: one block, one fused ranking, every line naming its vault.

Each vault recalls with its own ``Recaller`` (its own index, modes, weak-tail cut and usage boosts,
exactly as alone); the recalled notes are then fused by reciprocal rank (``team/search.py``'s
``fuse``, the fusion ``search`` uses across vaults), cut to the number of notes one vault's block
would hold, and rendered within the one token budget. With more than one vault every line's path
is ``vault:path`` (what ``read_note`` and ``VaultSet.split_ref`` take), so the model knows where a
note lives; with one vault nothing changes.

``VaultsRecaller`` looks like a ``Recaller`` to ``hooks/prompt.answer`` (``vault`` and ``recall``),
so the per-prompt path (sessions, hints, telemetry) is the same in the warm server, the cold hook
process and ``memory-hub recall``: only where the per-vault recallers come from differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..retrieval.block import DEFAULT_BUDGET, Entry, render
from ..retrieval.recall import LIGHT, PER_MODE_K, Recaller, RecallResult
from .search import fuse


class VaultsRecaller:
    """Recall for a run's vaults, the first being the primary (sessions and telemetry live there)."""

    def __init__(self, named: Sequence[tuple[str, Recaller]], warnings: Iterable[str] = ()) -> None:
        if not named:
            raise ValueError("at least one vault to recall from")
        self.named = list(named)
        self.warnings = list(warnings)

    @property
    def vault(self) -> Path:
        return self.named[0][1].vault

    def names(self) -> list[str]:
        return [name for name, _ in self.named]

    def recall(self, prompt: str, *, exclude: Iterable[str] = (), budget: int = DEFAULT_BUDGET,
               deadline: float | None = None, hint: Any = None, **kwargs: Any) -> RecallResult:
        """One vault: its own recall, untouched. Several: each vault's recall fused into one block.
        ``exclude`` holds what the session was shown (``vault:path``, or a plain path of the primary)."""
        if len(self.named) == 1:  # one vault (the others missing, at most): its own block, paths unprefixed
            name, recaller = self.named[0]
            mine = [p[len(name) + 1:] if name and p.startswith(name + ":") else p for p in exclude]
            alone = recaller.recall(prompt, exclude=mine, budget=budget, deadline=deadline, hint=hint, **kwargs)
            alone.warnings += [w for w in self.warnings if w not in alone.warnings]
            return alone
        seen = list(exclude)
        results: list[tuple[str, RecallResult]] = []
        warnings = list(self.warnings)
        for order, (name, recaller) in enumerate(self.named):
            mine = [p[len(name) + 1:] for p in seen if p.startswith(name + ":")]
            if order == 0:
                mine += [p for p in seen if ":" not in p]
            try:
                result = recaller.recall(prompt, exclude=mine, budget=budget, deadline=deadline, hint=hint,
                                         **kwargs)
            except Exception as exc:  # noqa: BLE001 - one unreadable vault must not cost the others' block
                warnings.append(not_recalled(name, exc))
                continue
            results.append((name, result))
        return fuse_results(results, budget, warnings, names=self.names())


def not_recalled(name: str, exc: BaseException) -> str:
    """The warning for a vault whose recall failed (the block goes on without it)."""
    return f"vault {name!r} was not recalled: {type(exc).__name__}: {exc}"[:300]


def fuse_results(results: Sequence[tuple[str, RecallResult]], budget: int, warnings: Iterable[str] = (),
                 names: Sequence[str] | None = None) -> RecallResult:
    """The primary's result (mode, confidence, hint, timings) holding the fused notes of every vault."""
    names = list(names or [name for name, _ in results])
    if not results:
        out = RecallResult(0, None, None, None, skipped="no-vault")
        out.warnings = list(warnings)
        out.vaults = {"asked": names}
        return out
    base = results[0][1]
    out = dataclasses.replace(base, notes=[], block=None, warnings=[*base.warnings], timings_ms=dict(base.timings_ms))
    out.warnings += [f"{name}: {w}" for name, r in results[1:] for w in r.warnings]
    out.warnings += [w for w in warnings if w not in out.warnings]
    per_vault = [(name, [{"path": n.path, "note": n} for n in r.notes]) for name, r in results]
    modes = [r.mode for _, r in results if r.notes and r.mode]
    limit = max((PER_MODE_K.get(m, PER_MODE_K[LIGHT]) for m in modes), default=PER_MODE_K[LIGHT])
    fused = fuse(per_vault, limit)
    out.notes = [dataclasses.replace(f["note"], path=f["ref"]) for f in fused]
    out.candidates = sum(r.candidates for _, r in results)
    out.dropped_tail = sum(r.dropped_tail for _, r in results)
    out.low_confidence = all(r.low_confidence for _, r in results)
    confidences = [r.confidence for _, r in results if r.confidence]
    for level in ("high", "medium", "low"):
        if level in confidences:
            out.confidence = level
            break
    for name, r in results[1:]:
        if r.fallback:
            out.fallback = f"{out.fallback}; {name}: {r.fallback}" if out.fallback else f"{name}: {r.fallback}"
        for stage, ms in r.timings_ms.items():
            out.timings_ms[f"{name}.{stage}"] = ms
    if out.notes:
        out.skipped = None
        out.mode = base.mode or next(iter(modes), LIGHT)
        out.block = render(out.mode or LIGHT, [Entry(n.path, n.title, n.description) for n in out.notes], budget)
        out.notes = out.notes[:len(out.block.included)]
    elif all(r.skipped == "trivial" for _, r in results):
        out.skipped = "trivial"
    else:
        out.skipped = next((r.skipped for _, r in results if r.skipped and r.skipped != "no-index"),
                           base.skipped or "no-match")
    out.vaults = {"asked": names, **{name: {"notes": len(r.notes), "mode": r.mode, "skipped": r.skipped}
                                     for name, r in results}}
    return out


def cold_recaller(primary: Path, cwd: Path | None = None) -> VaultsRecaller:
    """In-process recall over ``primary`` and the team vaults its hooks ask in ``cwd`` (``vaults.py``);
    a broken ``[vaults]`` table leaves the primary alone, and says so."""
    from ..config import ConfigError
    from ..vaults import vault_set

    try:
        vs = vault_set(primary, cwd=cwd)
    except ConfigError as exc:
        return VaultsRecaller([("", Recaller(primary))], [f"team vaults not recalled: {exc}"])
    if len(vs) == 1 and not vs.missing:
        return VaultsRecaller([(vs.primary.name, Recaller(vs.primary.path))])
    return VaultsRecaller([(ref.name, Recaller(ref.path)) for ref in vs.refs], vs.warnings())
