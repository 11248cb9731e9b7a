"""Golden-query evaluation: `memory-hub eval CASES.yaml` on a real vault with the real search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_hub.cli import main
from memory_hub.config import template_dir
from memory_hub.eval.golden import Case, GoldenError, Ranked, load_cases, run_eval

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


# -- categories, expect_all (two-notes) and no-answer cases ---------------------------------------

NQ_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "natural_questions"


def _notes(root: Path, *names: str) -> None:
    for name in names:
        (root / name).write_text("x", encoding="utf-8")


def test_load_cases_reads_category_expect_all_and_empty_expect(tmp_path) -> None:
    cases, _, _ = load_cases(_write(tmp_path, """
cases:
  - {query: one, expect: a.md, category: paraphrase}
  - {query: two, expect: [a.md, b.md], expect_all: true, category: two-notes}
  - {query: zyxquorble, expect: [], category: no-answer}
  - {query: plain, expect: [a.md]}
"""))
    assert [(c.category, c.expect_all, c.no_answer) for c in cases] == [
        ("paraphrase", False, False), ("two-notes", True, False), ("no-answer", False, True), (None, False, False)]


@pytest.mark.parametrize("case, message", [
    ("{query: x, expect: [a.md], expect_all: true}", "fewer than two"),
    ("{query: x, expect: [a.md, b.md], expect_all: 'yes'}", "expect_all='yes'"),
    ("{query: x, expect: [a.md], category: 3}", "category=3"),
    ("{query: x, expect: [a.md], expected: [b.md]}", "unknown keys: expected"),
    ("{query: x, expect: ['']}", "needs 'expect'"),
])
def test_bad_new_fields_get_clear_errors(tmp_path, case, message) -> None:
    with pytest.raises(GoldenError, match=message):
        load_cases(_write(tmp_path, f"cases:\n  - {case}\n"))


def test_expect_all_passes_only_with_every_note_in_the_top_k(tmp_path) -> None:
    _notes(tmp_path, "a.md", "b.md")
    answers = {"both": ["x.md", "b.md", "a.md"], "one": ["a.md", "x.md", "y.md"]}
    cases = [Case("both", ["a.md", "b.md"], expect_all=True), Case("one", ["a.md", "b.md"], expect_all=True),
             Case("one", ["a.md", "b.md"])]
    report = run_eval(tmp_path, cases, lambda q, k: answers[q], k=3)
    both, one_all, one_any = report.cases
    assert (both.status, both.rank, both.ranks, both.all_found) == ("pass", 2, {"a.md": 3, "b.md": 2}, True)
    assert (one_all.status, one_all.rank, one_all.all_found) == ("fail", 1, False)
    assert one_any.status == "pass"  # without expect_all either note is enough
    assert report.mrr == pytest.approx((0.5 + 1 + 1) / 3)  # MRR uses the best expected note's rank


def test_no_answer_passes_on_empty_results_or_a_low_confidence_flag(tmp_path) -> None:
    class Confident:  # a search result with no low_confidence field counts as confident
        pass

    class Unsure:
        low_confidence = True

    answers = {
        "empty": Ranked([]),
        "confident": Ranked.of(Confident(), ["a.md"]),
        "flagged": Ranked.of(Unsure(), ["a.md"]),
        "flagged-json": Ranked.of({"low_confidence": True, "hits": []}, ["a.md"]),
        "plain-list": ["a.md"],
    }
    cases = [Case(q, []) for q in answers]
    report = run_eval(tmp_path, cases, lambda q, k: answers[q])
    assert [c.status for c in report.cases] == ["pass", "fail", "pass", "pass", "fail"]
    assert [c.low_confidence for c in report.cases] == [False, False, True, True, False]
    assert report.mrr == 0.0 and report.evaluable == 5  # counted in the pass rate, never in MRR


def test_per_category_pass_rates_and_mrr(tmp_path) -> None:
    _notes(tmp_path, "a.md", "b.md")
    answers = {"q1": ["a.md"], "q2": ["x.md", "b.md"], "q3": ["x.md"], "q4": [], "q5": ["a.md"]}
    cases = [Case("q1", ["a.md"], category="p"), Case("q2", ["b.md"], category="p"),
             Case("q3", ["a.md"], category="p"), Case("q4", [], category="none"), Case("q5", ["gone.md"])]
    report = run_eval(tmp_path, cases, lambda q, k: answers[q], k=2)
    cats = report.by_category()
    assert cats["p"] == {"passed": 2, "evaluable": 3, "skipped": 0, "pass_rate": 0.6667,
                         "mrr": pytest.approx(0.5, abs=1e-4)}
    assert cats["none"]["pass_rate"] == 1.0 and cats["none"]["mrr"] is None
    assert cats["uncategorized"]["skipped"] == 1 and cats["uncategorized"]["evaluable"] == 0


def test_cli_prints_categories_and_reports_no_answer_honestly(template_vault, tmp_path, capsys) -> None:
    vault, _ = template_vault
    cases = _write(tmp_path, """
cases:
  - {query: "apply_secrets", expect: [deploy-step-apply-secrets.md], category: identifier}
  - {query: "DEC-0054", expect: [decisions/dec-0054-use-lancedb-for-vectors.md], category: identifier}
  - {query: "zyxquorble", expect: [], category: no-answer}
""")
    main(["--vault", str(vault), "eval", str(cases), "--mode", "lexical", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["categories"]["identifier"] == {"passed": 2, "evaluable": 2, "skipped": 0, "pass_rate": 1.0,
                                                "mrr": 1.0}
    nonsense = data["cases"][2]
    assert nonsense["status"] == ("pass" if not nonsense["top"] or nonsense["low_confidence"] else "fail")
    main(["--vault", str(vault), "eval", str(cases), "--mode", "lexical"])
    out = capsys.readouterr().out
    assert "identifier  2/2 passed (100%), MRR 1.000" in out and "no-answer" in out


@pytest.mark.parametrize("name", ["obsidian-help-en", "obsidian-help-ja", "obsidian-hub"])
def test_natural_question_files_load_and_every_case_has_a_category(name) -> None:
    cases, k, _ = load_cases(NQ_DIR / f"{name}.yaml")
    assert k == 5 and len(cases) >= 50
    assert all(c.category for c in cases)
    assert all(c.expect_all == (c.category == "two-notes") for c in cases)
    assert all(c.no_answer == (c.category == "no-answer") for c in cases)
