"""Golden queries: a user's own retrieval test, run against their own vault.

A cases file lists fixed queries and the notes each should find::

    k: 5                  # optional, default 5
    threshold: 0.8        # optional, share of evaluable cases that must pass
    cases:
      - query: "how do I roll back a bad release"
        expect: [runbooks/blue-green-rollback.md, blue-green-deploys.md]
        k: 3              # optional, per case
        category: paraphrase   # optional: pass rates and MRR are also reported per category
      - query: "rotate the TLS cert, then purge the CDN"
        expect: [runbooks/tls-certificate-rotation.md, cache-invalidation-on-deploy.md]
        expect_all: true  # the answer needs every listed note
      - query: "zyxquorble"
        expect: []        # no good answer exists in this vault

A case passes when any expected note is in the top k; with ``expect_all: true`` only when every
expected note is (its rank, for MRR, is still the best expected note's). A case with ``expect: []``
is a no-answer case: it passes only when the search returns nothing or says its results are
low-confidence (``Ranked.low_confidence``, read from the search result's ``low_confidence`` field;
a result without that field counts as confident). No-answer cases count in the pass rate, not in
MRR (they have no rank). A case whose expected notes no longer exist in the vault is skipped, not
failed (vaults change; a renamed note is not a retrieval bug), and every skip is reported so the
file can be fixed. The suite passes when at least ``threshold`` of the evaluable cases pass.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..vault.safe_io import is_file

DEFAULT_K = 5
DEFAULT_THRESHOLD = 0.8

# the search result attribute (or JSON key) a no-answer case reads; absent means "confident"
LOW_CONFIDENCE_FIELD = "low_confidence"
UNCATEGORIZED = "uncategorized"


@dataclass(frozen=True)
class Ranked:
    """What one search returned: vault-relative paths, best first, and whether it flagged them as weak."""

    paths: list[str]
    low_confidence: bool = False

    @classmethod
    def of(cls, result: Any, paths: list[str]) -> Ranked:
        """Read the low-confidence flag from a search result object or its JSON dict."""
        flag = result.get(LOW_CONFIDENCE_FIELD) if isinstance(result, dict) else getattr(result, LOW_CONFIDENCE_FIELD, None)
        return cls(paths, bool(flag))


# (query, k) → vault-relative paths, best first (or a Ranked carrying the low-confidence flag)
SearchFn = Callable[[str, int], list[str] | Ranked]


class GoldenError(ValueError):
    """A cases file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Case:
    query: str
    expect: list[str]
    k: int | None = None
    line: int = 0  # position in the file (1-based case number), for messages
    category: str | None = None
    expect_all: bool = False  # every expected note must be in the top k

    @property
    def no_answer(self) -> bool:
        return not self.expect


@dataclass
class CaseResult:
    query: str
    expect: list[str]
    k: int
    status: str  # pass | fail | skip
    rank: int | None = None  # rank of the best expected note, if found in the top k
    top: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # expected notes not in the vault
    ms: float = 0.0
    category: str | None = None
    expect_all: bool = False
    ranks: dict[str, int | None] = field(default_factory=dict)  # each present expected note → rank in top k
    low_confidence: bool = False  # the search flagged its results as weak

    @property
    def no_answer(self) -> bool:
        return not self.expect

    @property
    def all_found(self) -> bool:
        """Every expected note still in the vault is in the top k (False for no-answer cases)."""
        return bool(self.ranks) and all(r is not None for r in self.ranks.values())

    def as_dict(self) -> dict[str, Any]:
        data = {"query": self.query, "expect": self.expect, "k": self.k, "status": self.status, "rank": self.rank,
                "top": self.top, "missing": self.missing, "ms": round(self.ms, 1)}
        if self.category is not None:
            data["category"] = self.category
        if self.expect_all:
            data["expect_all"] = True
            data["ranks"] = self.ranks
        if self.no_answer:
            data["low_confidence"] = self.low_confidence
        return data


def _mrr(cases: list[CaseResult]) -> float:
    """Mean reciprocal rank over evaluable cases that have an answer (no-answer cases have no rank)."""
    ranked = [c for c in cases if c.status != "skip" and not c.no_answer]
    return sum(1.0 / c.rank if c.rank else 0.0 for c in ranked) / len(ranked) if ranked else 0.0


@dataclass
class EvalReport:
    cases: list[CaseResult]
    threshold: float
    mode: str | None = None

    @property
    def passed(self) -> int:
        return sum(c.status == "pass" for c in self.cases)

    @property
    def failed(self) -> int:
        return sum(c.status == "fail" for c in self.cases)

    @property
    def skipped(self) -> int:
        return sum(c.status == "skip" for c in self.cases)

    @property
    def evaluable(self) -> int:
        return self.passed + self.failed

    @property
    def pass_rate(self) -> float:
        return self.passed / self.evaluable if self.evaluable else 0.0

    @property
    def mrr(self) -> float:
        return _mrr(self.cases)

    def by_category(self) -> dict[str, dict[str, Any]]:
        """Pass rate and MRR per category (cases without one under ``uncategorized``), in file order."""
        groups: dict[str, list[CaseResult]] = {}
        for c in self.cases:
            groups.setdefault(c.category or UNCATEGORIZED, []).append(c)
        out = {}
        for name, cases in groups.items():
            passed = sum(c.status == "pass" for c in cases)
            evaluable = sum(c.status != "skip" for c in cases)
            out[name] = {"passed": passed, "evaluable": evaluable, "skipped": len(cases) - evaluable,
                         "pass_rate": round(passed / evaluable, 4) if evaluable else 0.0,
                         "mrr": None if all(c.no_answer for c in cases) else round(_mrr(cases), 4)}
        return out

    @property
    def ok(self) -> bool:
        """Passes at ``threshold`` of evaluable cases; a suite with nothing evaluable fails."""
        return self.evaluable > 0 and self.pass_rate >= self.threshold - 1e-9

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "mode": self.mode, "passed": self.passed, "failed": self.failed,
                "skipped": self.skipped, "evaluable": self.evaluable, "pass_rate": round(self.pass_rate, 4),
                "threshold": self.threshold, "mrr": round(self.mrr, 4), "categories": self.by_category(),
                "cases": [c.as_dict() for c in self.cases]}


def load_cases(path: Path) -> tuple[list[Case], int, float]:
    """Read a cases file: (cases, default k, threshold). Raises GoldenError with what is wrong."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GoldenError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise GoldenError(f"{path} is not valid YAML: {exc}") from None
    if isinstance(data, list):
        data = {"cases": data}
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise GoldenError(f"{path}: expected a mapping with a 'cases' list")
    k = data.get("k", DEFAULT_K)
    threshold = data.get("threshold", DEFAULT_THRESHOLD)
    if not isinstance(k, int) or k < 1:
        raise GoldenError(f"{path}: k must be a positive integer, not {k!r}")
    if not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise GoldenError(f"{path}: threshold must be a number in (0, 1], not {threshold!r}")
    cases = []
    for n, raw in enumerate(data["cases"], start=1):
        if not isinstance(raw, dict):
            raise GoldenError(f"{path}: case {n} must be a mapping with 'query' and 'expect'")
        query = raw.get("query")
        expect = raw.get("expect")
        if isinstance(expect, str):
            expect = [expect]
        if not isinstance(query, str) or not query.strip():
            raise GoldenError(f"{path}: case {n} has no query")
        if not isinstance(expect, list) or not all(isinstance(e, str) and e.strip() for e in expect):
            raise GoldenError(f"{path}: case {n} ({query!r}) needs 'expect': a note path or a list of them "
                              "(an empty list [] for a question the vault has no answer to)")
        case_k = raw.get("k")
        if case_k is not None and (not isinstance(case_k, int) or case_k < 1):
            raise GoldenError(f"{path}: case {n} ({query!r}) has k={case_k!r}; use a positive integer")
        category = raw.get("category")
        if category is not None and (not isinstance(category, str) or not category.strip()):
            raise GoldenError(f"{path}: case {n} ({query!r}) has category={category!r}; use a short name")
        expect_all = raw.get("expect_all", False)
        if not isinstance(expect_all, bool):
            raise GoldenError(f"{path}: case {n} ({query!r}) has expect_all={expect_all!r}; use true or false")
        if expect_all and len(expect) < 2:
            raise GoldenError(f"{path}: case {n} ({query!r}) has expect_all but fewer than two expected notes")
        unknown = set(raw) - {"query", "expect", "k", "category", "expect_all"}
        if unknown:
            raise GoldenError(f"{path}: case {n} ({query!r}) has unknown keys: {', '.join(sorted(map(str, unknown)))}")
        cases.append(Case(query.strip(), [e.strip().lstrip("/") for e in expect], case_k, n,
                          category.strip() if category else None, expect_all))
    if not cases:
        raise GoldenError(f"{path}: no cases")
    return cases, k, float(threshold)


def run_eval(vault: Path, cases: list[Case], search: SearchFn, k: int = DEFAULT_K,
             threshold: float = DEFAULT_THRESHOLD, mode: str | None = None) -> EvalReport:
    """Run every case through ``search``; expected notes that no longer exist are set aside."""
    vault = Path(vault)
    results = []
    for case in cases:
        case_k = case.k or k
        present = [e for e in case.expect if is_file(vault, e)]  # inside the vault only (safe_io)
        missing = [e for e in case.expect if e not in present]
        base = {"category": case.category, "expect_all": case.expect_all}
        if case.expect and not present:
            results.append(CaseResult(case.query, case.expect, case_k, "skip", missing=missing, **base))
            continue
        t0 = time.perf_counter()
        answer = search(case.query, case_k)
        ms = (time.perf_counter() - t0) * 1000
        ranked = answer if isinstance(answer, Ranked) else Ranked(list(answer))
        top = ranked.paths[:case_k]
        if case.no_answer:
            ok = not top or ranked.low_confidence
            results.append(CaseResult(case.query, case.expect, case_k, "pass" if ok else "fail", None, top,
                                      ms=ms, low_confidence=ranked.low_confidence, **base))
            continue
        ranks = {e: (top.index(e) + 1 if e in top else None) for e in present}
        found = [r for r in ranks.values() if r is not None]
        rank = min(found) if found else None
        ok = all(r is not None for r in ranks.values()) if case.expect_all else rank is not None
        results.append(CaseResult(case.query, case.expect, case_k, "pass" if ok else "fail", rank, top, missing, ms,
                                  ranks=ranks, low_confidence=ranked.low_confidence, **base))
    return EvalReport(results, threshold, mode)


# -- history: every run of a suite, so health can show the trend -----------------------------------

HISTORY_FILE = "eval.jsonl"  # under the vault's telemetry folder (a cache: deleting it loses the trend)
MAX_FAILED_SHOWN = 20


def record_run(vault: Path, report: EvalReport, cases_file: Path | str, source: str = "cli") -> dict[str, Any]:
    """Append one line about this run to the vault's eval history; returns the line (never raises)."""
    from . import telemetry

    failed = [c.query for c in report.cases if c.status == "fail"]
    line = {"event": "eval", "source": source, "cases": Path(cases_file).name, "mode": report.mode,
            "ok": report.ok, "passed": report.passed, "failed": report.failed, "skipped": report.skipped,
            "evaluable": report.evaluable, "pass_rate": round(report.pass_rate, 4), "mrr": round(report.mrr, 4),
            "threshold": report.threshold, "failed_queries": failed[:MAX_FAILED_SHOWN]}
    telemetry.record(vault, line, name=HISTORY_FILE)
    return line


def history(vault: Path) -> list[dict[str, Any]]:
    """Every recorded run, oldest first."""
    from . import telemetry

    return [e for e in telemetry.events(vault, HISTORY_FILE) if e.get("event") == "eval"]
