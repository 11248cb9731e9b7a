"""Golden queries: a user's own retrieval test, run against their own vault.

A cases file lists fixed queries and the notes each should find::

    k: 5                  # optional, default 5
    threshold: 0.8        # optional, share of evaluable cases that must pass
    cases:
      - query: "how do I roll back a bad release"
        expect: [runbooks/blue-green-rollback.md, blue-green-deploys.md]
        k: 3              # optional, per case

A case passes when any expected note is in the top k. A case whose expected notes no longer exist
in the vault is skipped, not failed (vaults change; a renamed note is not a retrieval bug), and every
skip is reported so the file can be fixed. The suite passes when at least ``threshold`` of the
evaluable cases pass.
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

# (query, k) → vault-relative paths, best first
SearchFn = Callable[[str, int], list[str]]


class GoldenError(ValueError):
    """A cases file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Case:
    query: str
    expect: list[str]
    k: int | None = None
    line: int = 0  # position in the file (1-based case number), for messages


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

    def as_dict(self) -> dict[str, Any]:
        return {"query": self.query, "expect": self.expect, "k": self.k, "status": self.status, "rank": self.rank,
                "top": self.top, "missing": self.missing, "ms": round(self.ms, 1)}


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
        ranks = [1.0 / c.rank if c.rank else 0.0 for c in self.cases if c.status != "skip"]
        return sum(ranks) / len(ranks) if ranks else 0.0

    @property
    def ok(self) -> bool:
        """Passes at ``threshold`` of evaluable cases; a suite with nothing evaluable fails."""
        return self.evaluable > 0 and self.pass_rate >= self.threshold - 1e-9

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "mode": self.mode, "passed": self.passed, "failed": self.failed,
                "skipped": self.skipped, "evaluable": self.evaluable, "pass_rate": round(self.pass_rate, 4),
                "threshold": self.threshold, "mrr": round(self.mrr, 4), "cases": [c.as_dict() for c in self.cases]}


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
        if not isinstance(expect, list) or not expect or not all(isinstance(e, str) and e for e in expect):
            raise GoldenError(f"{path}: case {n} ({query!r}) needs 'expect': a note path or a list of them")
        case_k = raw.get("k")
        if case_k is not None and (not isinstance(case_k, int) or case_k < 1):
            raise GoldenError(f"{path}: case {n} ({query!r}) has k={case_k!r}; use a positive integer")
        cases.append(Case(query.strip(), [e.strip().lstrip("/") for e in expect], case_k, n))
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
        if not present:
            results.append(CaseResult(case.query, case.expect, case_k, "skip", missing=missing))
            continue
        t0 = time.perf_counter()
        top = search(case.query, case_k)[:case_k]
        ms = (time.perf_counter() - t0) * 1000
        rank = next((r for r, p in enumerate(top, start=1) if p in present), None)
        results.append(CaseResult(case.query, case.expect, case_k, "pass" if rank else "fail", rank, top, missing, ms))
    return EvalReport(results, threshold, mode)
