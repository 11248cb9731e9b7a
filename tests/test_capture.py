"""Braindump / write_capture: classification, deadline fields, daily link, URL fetch, refusals."""

from __future__ import annotations

import datetime as dt
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memory_hub.capture import CaptureError, braindump, write_capture
from memory_hub.capture.classify import classify_scope, extract_actions
from memory_hub.capture.dates import find_deadline
from memory_hub.cli import main
from memory_hub.vault.frontmatter import parse

TODAY = dt.date(2026, 5, 20)  # a Wednesday


def fm(vault: Path, rel: str) -> dict:
    return parse((vault / rel).read_text(encoding="utf-8")).data


def test_write_capture_full_frontmatter_and_daily_link(template_vault):
    vault, _ = template_vault
    rel = write_capture(vault, "Deploy pipeline: CDN purge runs before the switch.\n"
                               "- [ ] move cdn-invalidate after switch-traffic by Friday\n", today=TODAY)
    assert rel.startswith("inbox/2026-05-20-") and rel.endswith(".md") and rel == rel.lower()
    data = fm(vault, rel)
    for key in ("title", "description", "kind", "scope", "tags", "created"):
        assert key in data, key
    assert data["kind"] == "capture" and data["scope"] == "work"
    assert data["due"] == "2026-05-22"  # "by Friday" from a Wednesday
    assert "cdn" in data["tags"] or "deploy" in data["tags"]  # existing vault tags matched
    daily = (vault / "daily/2026-05-20.md").read_text(encoding="utf-8")
    assert f"[[{Path(rel).stem}]]" in daily
    assert parse(daily).data["kind"] == "daily"  # made from the template, but not a template


def test_daily_note_keeps_the_persons_text(template_vault):
    vault, _ = template_vault
    daily = vault / "daily/2026-05-08.md"
    before = daily.read_text(encoding="utf-8")
    rel = write_capture(vault, "パスキー移行の件、山田さんに連絡する", today=dt.date(2026, 5, 8))
    after = daily.read_text(encoding="utf-8")
    added = [ln for ln in after.splitlines() if ln not in before.splitlines()]
    assert added == [f"- [[{Path(rel).stem}]]: パスキー移行の件、山田さんに連絡する"]
    assert len(after.splitlines()) == len(before.splitlines()) + 1
    # under the 今日のキャプチャ section, before the next heading
    assert after.index(Path(rel).stem) < after.index("## ログ")


def test_same_title_twice_gets_two_notes(template_vault):
    vault, _ = template_vault
    a = write_capture(vault, "same words", today=TODAY, link_daily=False)
    b = write_capture(vault, "same words", today=TODAY, link_daily=False)
    assert a != b and (vault / a).exists() and (vault / b).exists()


@pytest.mark.parametrize("text,kwargs,message", [
    ("", {}, "empty"),
    ("   \n", {}, "empty"),
    ("x" * 300_000, {}, "too large"),
    ("ok", {"scope": "galaxy"}, "scope"),
    ("ok", {"kind": "template"}, "kind"),
    ("ok", {"links": ["a]]b"]}, "link"),
])
def test_bad_input_is_refused_and_writes_nothing(template_vault, text, kwargs, message):
    vault, _ = template_vault
    before = sorted(p for p in vault.rglob("*") if ".memory_hub" not in p.parts)
    with pytest.raises(CaptureError, match=message):
        write_capture(vault, text, **kwargs)
    assert sorted(p for p in vault.rglob("*") if ".memory_hub" not in p.parts) == before


def test_tracker_deadline_goes_to_deadline_field(template_vault):
    vault, _ = template_vault
    r = braindump(vault, "Migrate legacy-sftp to cert-manager. 2026年6月30日まで", kind="tracker", today=TODAY)
    assert r.path.startswith("inbox/")
    data = fm(vault, r.path)
    assert data["deadline"] == "2026-06-30" and "due" not in data


@pytest.mark.parametrize("text,expected", [
    ("資料を 6/15締切 で出す", "2026-06-15"),
    ("レビューは2026年6月1日までに", "2026-06-01"),
    ("ship it by 2026-07-01", "2026-07-01"),
    ("Due 15 May", "2026-05-15"),  # just passed: overdue this year, not next year
    ("Due 15 Jan", "2027-01-15"),  # long past this year: next year
    ("金曜までに返事する", "2026-05-22"),
    ("on 2026-03-04 the cert expired", None),  # a date, but no deadline cue
])
def test_deadline_forms(text, expected):
    got = find_deadline(text, TODAY)
    assert (got.isoformat() if got else None) == expected


def test_scope_and_actions_rules():
    assert classify_scope("dentist appointment for the kids")[0] == "personal"
    assert classify_scope("side project roadmap for my OSS library")[0] == "project"
    assert classify_scope("incident review with the team")[0] == "work"
    acts = extract_actions("- [ ] write the ADR\n- [x] done already\nTODO: ping ops\n"
                           "I need to check the TTL\nいい天気だった。\n山田さんに連絡する")
    assert acts == ["write the ADR", "ping ops", "I need to check the TTL", "山田さんに連絡する"]


class _Page(BaseHTTPRequestHandler):
    def log_message(self, *a):
        return

    def do_GET(self):
        if self.path == "/missing":
            self.send_response(404)
            self.end_headers()
            return
        body = (b"<html><head><title>Purge order</title><script>var x=1;</script></head><body>"
                b"<nav>menu menu</nav><article><h1>Purge after switching</h1>"
                b"<p>Invalidate the CDN only after the traffic switch.</p></article></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_url_fetched_when_reachable_and_failure_said_plainly(template_vault):
    vault, _ = template_vault
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        r = braindump(vault, f"read this {base}/article and {base}/missing", today=TODAY, link_daily=False,
                      fetch_urls=True)
    finally:
        server.shutdown()
        server.server_close()
    text = (vault / r.path).read_text(encoding="utf-8")
    assert "Invalidate the CDN only after the traffic switch." in text
    assert "var x=1" not in text and "menu menu" not in text
    assert f"{base}/missing" in text and "Fetching this URL failed (HTTP 404)" in text
    assert any("could not fetch" in w for w in r.warnings)


def test_cli_braindump_from_stdin(template_vault, monkeypatch, capsys):
    import io

    vault, _ = template_vault
    monkeypatch.setattr("sys.stdin", io.StringIO("Need to renew the partner-api cert by 2099-01-05"))
    assert main(["--vault", str(vault), "braindump", "-", "--no-fetch", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["due"] == "2099-01-05" and (vault / out["path"]).exists()
    assert main(["--vault", str(vault), "braindump", ""]) == 1
