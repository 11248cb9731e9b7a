"""Golden-query evaluation: `memory-hub eval CASES.yaml` on a real vault with the real search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_hub.cli import main
from memory_hub.config import template_dir
from memory_hub.eval.golden import Case, GoldenError, load_cases, run_eval

SHIPPED = template_dir() / "memory-hub-eval.yaml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_shipped_cases_pass_on_the_starter_vault(template_vault, capsys) -> None:
    vault, _ = template_vault
    code = main(["--vault", str(vault), "eval", str(SHIPPED), "--mode", "lexical", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0, data
    assert data["ok"] and data["skipped"] == 0 and data["evaluable"] == len(load_cases(SHIPPED)[0])
    assert data["pass_rate"] >= 0.8 and 0 < data["mrr"] <= 1


def test_missing_notes_are_skipped_and_reported_failures_exit_non_zero(template_vault, tmp_path, capsys) -> None:
    vault, _ = template_vault
    cases = _write(tmp_path, """
k: 3
cases:
  - query: "apply_secrets"
    expect: [deploy-step-apply-secrets.md]
  - query: "anything at all"
    expect: [this-note-was-deleted.md]
  - query: "パスキー タイムアウト"
    expect: [incident-2026-04-passkey-region-block.md, gone-too.md]
""")
    assert main(["--vault", str(vault), "eval", str(cases), "--mode", "lexical"]) == 0
    out = capsys.readouterr().out
    assert "SKIP" in out and "this-note-was-deleted.md" in out
    assert "2/2 evaluable cases passed" in out and "1 skipped" in out

    failing = _write(tmp_path, """
cases:
  - query: "apply_secrets"
    expect: [deploy-step-apply-secrets.md]
  - query: "apply_secrets"
    expect: [go-service-conventions.md]
""")
    assert main(["--vault", str(vault), "eval", str(failing), "--mode", "lexical", "-k", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "1/2 evaluable cases passed (50%, need 80%)" in out


def test_nothing_evaluable_is_a_failure(tmp_path) -> None:
    cases = [Case("q", ["missing.md"])]
    report = run_eval(tmp_path, cases, lambda q, k: [])
    assert report.skipped == 1 and report.evaluable == 0 and not report.ok


def test_run_eval_counts_ranks_and_threshold(tmp_path) -> None:
    for name in ("a.md", "b.md", "c.md"):
        (tmp_path / name).write_text("x", encoding="utf-8")
    answers = {"qa": ["a.md"], "qb": ["x.md", "b.md"], "qc": ["x.md", "y.md", "z.md", "c.md"]}
    cases = [Case("qa", ["a.md"]), Case("qb", ["b.md"]), Case("qc", ["c.md"])]
    report = run_eval(tmp_path, cases, lambda q, k: answers[q], k=3)
    assert [c.rank for c in report.cases] == [1, 2, None]
    assert report.passed == 2 and report.failed == 1
    assert not report.ok  # 67% < 80%
    assert report.mrr == pytest.approx((1 + 0.5 + 0) / 3)


@pytest.mark.parametrize("text, message", [
    ("cases: [", "not valid YAML"),
    ("k: 5\n", "'cases' list"),
    ("cases:\n  - query: x\n", "needs 'expect'"),
    ("cases:\n  - expect: [a.md]\n", "has no query"),
    ("k: 0\ncases:\n  - {query: x, expect: a.md}\n", "k must be a positive integer"),
    ("threshold: 2\ncases:\n  - {query: x, expect: a.md}\n", "threshold"),
])
def test_bad_cases_files_get_clear_errors(tmp_path, text, message) -> None:
    with pytest.raises(GoldenError, match=message):
        load_cases(_write(tmp_path, text))


def test_cli_reports_a_bad_file_without_a_traceback(template_vault, tmp_path, capsys) -> None:
    vault, _ = template_vault
    assert main(["--vault", str(vault), "eval", str(tmp_path / "nope.yaml")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read") and "Traceback" not in err
