"""CLI: eval (golden queries) and vectors (embed what changed, or check coverage)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .shell import CliError, print_json, search_mode, vault_path


def update_vectors(vault: Path, as_json: bool = False, embedder: str | None = None) -> tuple[int, dict]:
    """Bring the vault's vectors up to date. Exit code 1 when notes were due and none got vectors."""
    from ..index.embed import EmbedderError
    from ..retrieval.searcher import Searcher

    searcher = Searcher(vault, embedder=embedder)
    try:
        report = searcher.sync_vectors(progress=None if not as_json else False)
    except EmbedderError as exc:
        raise CliError(f"cannot embed: {exc}") from None
    coverage = searcher.coverage()
    code = 0
    if report.interrupted:
        code = 130
    elif report.stalled:
        code = 1
    elif report.failed:
        code = 1
    if not as_json:
        print(report.summary())
        for path, error in report.failed[:20]:
            print(f"warning: {path}: {error}", file=sys.stderr)
        print(coverage.summary())
        if report.stalled:
            print(f"error: {report.notes_due} notes were due for vectors and none was embedded; "
                  "search stays stale", file=sys.stderr)
        if report.interrupted:
            print("interrupted: finished notes are kept; run `memory-hub vectors` again to finish", file=sys.stderr)
    return code, {"vectors": report.as_dict(), "coverage": coverage.as_dict()}


def cmd_vectors(args: argparse.Namespace) -> int:
    from ..retrieval.searcher import Searcher

    vault = vault_path(args)
    if args.coverage:
        coverage = Searcher(vault, embedder=args.embedder).coverage()
        if args.json:
            print_json(coverage.as_dict())
        else:
            print(coverage.summary())
            for label, paths in (("stale", coverage.stale), ("missing", coverage.missing),
                                 ("orphaned", coverage.orphaned)):
                for p in paths[:20]:
                    print(f"  {label}: {p}")
        return 0 if coverage.ok else 1
    code, data = update_vectors(vault, args.json, args.embedder)
    if args.json:
        print_json(data)
    return code


def cmd_eval(args: argparse.Namespace) -> int:
    from ..eval.golden import GoldenError, Ranked, load_cases, record_run, run_eval
    from ..retrieval.search import QueryError
    from ..retrieval.searcher import Searcher

    vault = vault_path(args)
    try:
        cases, k, threshold = load_cases(Path(args.cases))
    except GoldenError as exc:
        raise CliError(str(exc)) from None
    searcher = Searcher(vault, embedder=args.embedder, reranker=args.reranker)
    warnings: set[str] = set()

    def run(query: str, n: int) -> Ranked:
        try:
            result = searcher.search(query, k=n, mode=args.mode)
        except QueryError as exc:
            warnings.add(str(exc))
            return Ranked([])
        warnings.update(result.warnings)
        return Ranked.of(result, [h.path for h in result.hits])

    report = run_eval(vault, cases, run, k=args.k or k, threshold=threshold, mode=args.mode or searcher.mode)
    record_run(vault, report, args.cases)  # the trend on the web page's /health
    if args.json:
        data = report.as_dict()
        data["warnings"] = sorted(warnings)
        print_json(data)
        return 0 if report.ok else 1
    for warning in sorted(warnings):
        print(f"warning: {warning}", file=sys.stderr)
    for c in report.cases:
        if c.status == "pass":
            print(f"PASS  {'--' if c.no_answer else f'#{c.rank}'} {c.query}")
        elif c.status == "fail" and c.no_answer:
            print(f"FAIL     {c.query}  (expected no answer or a low-confidence flag; got {', '.join(c.top[:3])})")
        elif c.status == "fail":
            expected = ("all of " if c.expect_all else "") + ", ".join(c.expect)
            print(f"FAIL     {c.query}  (expected {expected}; got {', '.join(c.top[:3]) or 'nothing'})")
        else:
            print(f"SKIP     {c.query}  (expected notes no longer exist: {', '.join(c.missing)})")
    categories = report.by_category()
    if set(categories) != {"uncategorized"}:
        width = max(len(name) for name in categories)
        for name, row in categories.items():
            mrr = "-" if row["mrr"] is None else f"{row['mrr']:.3f}"
            print(f"  {name.ljust(width)}  {row['passed']}/{row['evaluable']} passed "
                  f"({row['pass_rate']:.0%}), MRR {mrr}" + (f", {row['skipped']} skipped" if row["skipped"] else ""))
    print(f"{report.passed}/{report.evaluable} evaluable cases passed ({report.pass_rate:.0%}, need "
          f"{report.threshold:.0%}), {report.skipped} skipped, MRR {report.mrr:.3f}, mode {report.mode}: "
          + ("OK" if report.ok else "FAILED"))
    return 0 if report.ok else 1


def register(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("eval", cmd_eval, "run golden queries (a cases YAML file) against the vault; exit 1 below the threshold")
    p.add_argument("cases", help="YAML file with k and cases: [{query, expect: [paths]}]")
    p.add_argument("-k", type=int, default=None, help="top k that counts as found (default: the file's k, else 5)")
    p.add_argument("--mode", type=search_mode, default=None, help="search mode (default: the searcher's default)")
    p.add_argument("--embedder", default=None, help="embedder spec (default: auto)")
    p.add_argument("--reranker", default=None, help="reranker spec (default: $MEMORY_HUB_RERANKER or none)")

    p = add("vectors", cmd_vectors, "embed notes whose vectors are missing or stale (or --coverage: check only)")
    p.add_argument("--coverage", action="store_true", help="only report how many notes have fresh vectors")
    p.add_argument("--embedder", default=None, help="embedder spec (default: auto)")
