"""Look-ahead reads due/deadline fields; --lint catches deadlines that sit only in prose."""

from __future__ import annotations

import datetime as dt
import json

from memory_hub.capture.lookahead import lint, lookahead
from memory_hub.cli import main

TODAY = dt.date(2026, 6, 1)

FILES = {
    "inbox/a.md": "---\ntitle: A\nkind: capture\ndue: 2026-05-28\n---\nfix the purge order\n",
    "inbox/b.md": "---\ntitle: B\ndue: 2026-06-03\n---\nsoon\n",
    "trackers/t.md": "---\ntitle: T\nkind: tracker\ndeadline: 2026-06-01\n---\ntoday\n",
    "inbox/far.md": "---\ntitle: Far\ndue: 2026-09-01\n---\nlater\n",
    "inbox/done.md": "---\ntitle: Done\ndue: 2026-05-01\nstatus: done\n---\nfinished\n",
    "templates/capture.md": "---\ntitle: tpl\nkind: template\ndue: 2020-01-01\n---\n",
    # the seed's silent miss: the deadline lives only in prose
    "prose.md": "---\ntitle: Prose only\ncreated: 2026-05-20\n---\nThe vendor contract must be renewed by 6/15.\n",
    "prose-ja.md": "---\ntitle: 提出\ncreated: 2026-05-20\n---\n# 提出\n\n報告書は2026年6月10日までに提出する。\n",
    "held.md": "---\ntitle: Held\ncreated: 2026-05-20\ndue: 2026-06-15\n---\nRenew by 2026-06-15.\n",
    "history.md": "---\ntitle: History\n---\nOn 2026-03-18 the intermediate expired.\n",
    "ticked.md": "---\ntitle: Ticked\n---\n- [x] ship by 2026-06-20\n",
}


def test_due_and_overdue_from_fields(make_vault):
    vault, _ = make_vault(FILES, index=False)
    items = lookahead(vault, days=7, today=TODAY)
    assert [(i.path, i.field, i.state) for i in items] == [
        ("inbox/a.md", "due", "overdue"),
        ("trackers/t.md", "deadline", "today"),
        ("inbox/b.md", "due", "upcoming"),
    ]
    assert items[0].days_left == -4
    assert "inbox/far.md" in [i.path for i in lookahead(vault, days=120, today=TODAY)]


def test_lint_reports_prose_deadlines_no_field_holds(make_vault):
    vault, _ = make_vault(dict(FILES, **{
        "inbox/2021-05-29-roundup.md": "---\ntitle: Old\n---\nSubmit your entry by Friday.\n"}), index=False)
    found = {(f.path, f.date) for f in lint(vault, today=TODAY)}
    assert found == {("prose.md", "2026-06-15"), ("prose-ja.md", "2026-06-10")}
    old = {(f.path, f.date) for f in lint(vault, today=TODAY, include_past=True)} - found
    assert old == {("inbox/2021-05-29-roundup.md", "2021-06-04")}  # anchored on the file-name date
    line = next(f for f in lint(vault, today=TODAY) if f.path == "prose-ja.md").line
    text = (vault / "prose-ja.md").read_text(encoding="utf-8").splitlines()
    assert "2026年6月10日" in text[line - 1]


def test_cli_lookahead_json_and_lint_strict(make_vault, capsys):
    vault, _ = make_vault(FILES, index=False)
    assert main(["--vault", str(vault), "lookahead", "--days", "100000", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)["items"]
    assert {i["path"] for i in items} >= {"inbox/a.md", "inbox/far.md", "held.md"}
    assert "inbox/done.md" not in {i["path"] for i in items}
    assert main(["--vault", str(vault), "lookahead", "--lint", "--strict", "--all"]) == 1
    assert "prose.md" in capsys.readouterr().out


def test_template_vault_has_no_silent_deadlines(template_vault):
    vault, _ = template_vault
    assert lint(vault) == []
