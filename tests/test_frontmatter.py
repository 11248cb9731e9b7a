"""Frontmatter: lenient reading (broken, non-mapping, BOM, CRLF, dates) and in-place field edits."""

from __future__ import annotations

import pytest
import yaml

from memory_hub.vault import frontmatter as fm


def test_plain_block_and_body_line() -> None:
    block = fm.parse("---\ntitle: A\ntags: [x, y]\n---\n# Body\n")
    assert block.data == {"title": "A", "tags": ["x", "y"]}
    assert block.body == "# Body\n" and block.body_line == 5 and block.problem is None


@pytest.mark.parametrize("text", ["no frontmatter\n", "---\n---\nbody\n", "---\n\n---\nbody\n"])
def test_absent_or_empty(text: str) -> None:
    block = fm.parse(text)
    assert block.data == {} and block.problem is None
    assert block.body == text.split("---\n")[-1]


def test_broken_yaml_reports_problem_and_keeps_body() -> None:
    block = fm.parse("---\ntitle: [unclosed\ntags: x\n---\nstill the body\n")
    assert block.data == {}
    assert block.problem and "broken YAML" in block.problem and "line" in block.problem
    assert block.body == "still the body\n"


@pytest.mark.parametrize("yaml_text,kind", [("- a\n- b", "list"), ("just a string", "str"), ("42", "int")])
def test_non_mapping_yaml_is_ignored_with_a_problem(yaml_text: str, kind: str) -> None:
    block = fm.parse(f"---\n{yaml_text}\n---\nbody\n")
    assert block.data == {} and kind in (block.problem or "") and block.body == "body\n"


def test_impossible_date_is_a_problem_not_a_crash() -> None:
    block = fm.parse("---\ncreated: 2026-02-30\n---\nx\n")
    assert block.data == {} and block.problem


def test_bom_and_crlf() -> None:
    block = fm.parse("\ufeff---\r\ntitle: Windows\r\ntags: [a]\r\n---\r\nbody line\r\n")
    assert block.data == {"title": "Windows", "tags": ["a"]}
    assert block.body == "body line\r\n" and block.body_line == 5


def test_unclosed_fence_is_body() -> None:
    block = fm.parse("---\ntitle: nope\nno closing fence\n")
    assert block.raw is None and block.data == {} and block.body.startswith("---")


def test_dates_become_iso_strings() -> None:
    block = fm.parse("---\ncreated: 2026-05-01\nupdated: 2026-05-02 10:30:00\nnested: {d: 2026-01-01}\n---\n")
    assert block.data["created"] == "2026-05-01"
    assert block.data["updated"].startswith("2026-05-02T10:30")
    assert block.data["nested"] == {"d": "2026-01-01"}


ORIGINAL = """---
# a comment the person wrote
title: Keep me
tags:
  - one
  - two
access_count: 3  # inline comment
zeta: last
---
# Heading

Body with --- dashes and [[links]].
"""


def test_set_fields_round_trip_keeps_order_comments_and_body() -> None:
    out = fm.set_fields(ORIGINAL, {"access_count": 4, "tags": ["one", "two", "three"], "new_key": "v: colon"})
    raw, body, _ = fm.split(out)
    assert body == fm.split(ORIGINAL)[1]
    lines = raw.splitlines()
    assert lines[0] == "# a comment the person wrote"
    keys = [ln.split(":")[0] for ln in lines if ln and not ln.startswith((" ", "#"))]
    assert keys == ["title", "tags", "access_count", "zeta", "new_key"]
    data = yaml.safe_load(raw)
    assert data == {"title": "Keep me", "tags": ["one", "two", "three"], "access_count": 4, "zeta": "last",
                    "new_key": "v: colon"}
    # setting the same values again changes nothing
    assert fm.set_fields(out, {"access_count": 4}) == out


def test_set_fields_adds_block_and_keeps_crlf_and_bom() -> None:
    assert fm.set_fields("body\n", {"a": 1}) == "---\na: 1\n---\nbody\n"
    text = "\ufeff---\r\ntitle: T\r\n---\r\nbody\r\n"
    out = fm.set_fields(text, {"useful_count": 2})
    assert out.startswith("\ufeff---\r\n") and "useful_count: 2\r\n" in out and out.endswith("---\r\nbody\r\n")
    assert fm.parse(out).data == {"title": "T", "useful_count": 2}


def test_set_fields_refuses_broken_yaml() -> None:
    with pytest.raises(ValueError):
        fm.set_fields("---\ntitle: [x\n---\nbody\n", {"a": 1})


def test_set_fields_quotes_values_that_need_it() -> None:
    out = fm.set_fields("---\ntitle: x\n---\n", {"title": "a: b # not comment", "date": "2026-05-01", "n": None})
    data = fm.parse(out).data
    assert data["title"] == "a: b # not comment" and data["date"] == "2026-05-01" and data["n"] is None


def test_yaml_is_imported_only_when_a_note_is_parsed() -> None:
    """A no-change sync, status and every command's start import the vault and index modules but
    parse no frontmatter, so PyYAML (~30 ms of regex compiling) must wait for the first parse."""
    import subprocess
    import sys

    code = ("import sys, memory_hub.index.sync, memory_hub.config, memory_hub.vault.frontmatter as fm\n"
            "before = 'yaml' in sys.modules\n"
            "fm.parse('---\\ntitle: x\\n---\\nbody')\n"
            "print(before, 'yaml' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
