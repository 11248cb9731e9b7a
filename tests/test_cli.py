"""The core CLI: init, index, search, links, status — JSON shapes, errors, progress on a terminal only."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory_hub.cli import main
from memory_hub.progress import Progress

REPO = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def vault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "v"
    code, out, _ = run(capsys, "init", str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["outcome"] == "created" and data["vault"] == str(path.resolve())
    assert data["index"]["added"] and (path / ".git").is_dir()
    return path


def test_init_adopts_existing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "note.md").write_text("# Mine\n", encoding="utf-8")
    code, out, _ = run(capsys, "init", str(folder))
    assert code == 0 and "adopted" in out
    assert (folder / "note.md").read_text(encoding="utf-8") == "# Mine\n"
    assert ".memory_hub/" in (folder / ".gitignore").read_text(encoding="utf-8")


def test_index_and_rebuild(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--vault", str(vault), "index", "--no-vectors", "--json")
    data = json.loads(out)
    assert code == 0 and data["added"] == [] and data["unchanged"] > 20
    code, out, _ = run(capsys, "--vault", str(vault), "index", "--rebuild", "--no-vectors", "--json")
    assert code == 0 and len(json.loads(out)["added"]) == data["unchanged"]
    code, out, _ = run(capsys, "--vault", str(vault), "index", "--no-vectors")
    assert code == 0 and out.startswith("indexed ") and "unchanged" in out


def test_search_json_shape(vault: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_HUB_VAULT", str(vault))  # the vault from the environment
    code, out, _ = run(capsys, "search", "ERR_CERT_AUTHORITY_INVALID", "-k", "3", "--mode", "lexical", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) >= {"query", "results", "timings_ms", "warnings"}
    first = data["results"][0]
    assert first["path"] == "incident-2026-03-expired-intermediate.md" and first["exact"] is True
    assert set(first) >= {"path", "title", "description", "kind", "date", "score", "snippet", "tags", "exact"}
    assert "channels" not in first and len(data["results"]) <= 3
    code, out, _ = run(capsys, "search", "認証", "--kind", "knowledge", "--explain", "--mode", "lexical", "--json")
    hits = json.loads(out)["results"]
    assert hits and all(h["kind"] == "knowledge" for h in hits) and "channels" in hits[0]
    code, out, _ = run(capsys, "search", "S3 bucket", "--mode", "lexical")
    assert code == 0 and "incident-2026-05-s3-bucket-policy.md" in out.splitlines()[0]


def test_links_json_shape(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--vault", str(vault), "links", "db-failover", "--hops", "2", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["note"] == "runbooks/db-failover.md" and isinstance(data["backlinks"], int) and data["backlinks"] > 0
    dangling = [x for x in data["links"] if x["target_path"] is None]
    assert [x["target"] for x in dangling] == ["postgres-vacuum-tuning"]
    assert set(data["links"][0]) == {"target", "kind", "heading", "block", "alias", "line", "target_path"}
    assert {n["hops"] for n in data["neighbours"]} == {1, 2}
    assert set(data["neighbours"][0]) == {"path", "title", "hops", "direction", "via"}
    code, out, _ = run(capsys, "--vault", str(vault), "links", "runbooks/db-failover.md")
    assert code == 0 and "(dangling)" in out


def test_status_json_shape(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (vault / "broken.md").write_text("---\ntitle: [x\n---\nbody\n", encoding="utf-8")
    code, out, _ = run(capsys, "--vault", str(vault), "status", "--json")
    data = json.loads(out)
    assert code == 0 and data["pending_changes"] == 1 and data["dangling_links"] == 1
    assert set(data) >= {"vault", "index", "notes", "attachments", "kinds", "ranked_notes", "links",
                         "dangling_links", "last_sync", "pending_changes", "problems"}
    run(capsys, "--vault", str(vault), "index", "--no-vectors")
    data = json.loads(run(capsys, "--vault", str(vault), "status", "--json")[1])
    assert data["pending_changes"] == 0 and any(p.startswith("broken.md:") for p in data["problems"])


@pytest.mark.parametrize("argv,message", [
    (["search", "x"], "vault not found"),
    (["status"], "vault not found"),
])
def test_missing_vault_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv, message) -> None:
    code, out, err = run(capsys, "--vault", str(tmp_path / "nope"), *argv)
    assert code == 1 and out == "" and err.startswith("error: ") and message in err


def test_user_errors_go_to_stderr(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--vault", str(vault), "links", "no-such-note")
    assert code == 1 and out == "" and "no note matches" in err
    code, out, err = run(capsys, "--vault", str(vault), "search", "   ", "--mode", "lexical", "--json")
    assert code == 1 and out == "" and "empty" in err


def test_installed_command_piped_is_quiet(vault: Path) -> None:
    """The real entry point, output piped: no progress bar, JSON parses, errors exit non-zero."""
    exe = Path(sys.executable).with_name("memory-hub")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "memory_hub.cli"]
    done = subprocess.run([*cmd, "--vault", str(vault), "index", "--rebuild", "--no-vectors", "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0 and "\r" not in done.stderr and "[#" not in done.stderr
    assert json.loads(done.stdout)["added"]
    bad = subprocess.run([*cmd, "--vault", str(vault), "links", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and bad.stdout == "" and "error:" in bad.stderr


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_only() -> None:
    tty = _Tty()
    with Progress(300, "indexing", stream=tty) as bar:
        for _ in range(300):
            bar.advance()
    assert "indexing [" in tty.getvalue() and "300/300" in tty.getvalue()
    piped = io.StringIO()
    with Progress(300, "indexing", stream=piped) as bar:
        for _ in range(300):
            bar.advance()
    assert piped.getvalue() == ""
    small = _Tty()
    with Progress(5, "indexing", stream=small) as bar:  # short runs do not flicker a bar
        bar.advance(5)
    assert small.getvalue() == ""


def test_search_says_when_nothing_really_matches(vault: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A query of words the vault never saw is flagged low_confidence, in text and --json."""
    code, out, _ = run(capsys, "--vault", str(vault), "search", "zyxquorble", "--mode", "lexical", "--json")
    data = json.loads(out)
    assert code == 0 and data["low_confidence"] is True and data["results"] == []
    code, out, _ = run(capsys, "--vault", str(vault), "search", "ERR_CERT_AUTHORITY_INVALID", "--mode", "lexical",
                       "--json")
    assert json.loads(out)["low_confidence"] is False
    code, out, _ = run(capsys, "--vault", str(vault), "search", "how do I refinance my mortgage with zyxquorble",
                       "--mode", "lexical", "--explain")
    assert "low confidence" in out or "no results" in out


def test_search_prints_a_snippet_only_when_it_adds_to_the_description(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "note-sync.md").write_text("# Note Sync\n\nPlugin ID: note-sync\nDeveloped by: zig\n\n"
                                          "Sync notes or plugins between vaults.\n", encoding="utf-8")
    (folder / "git-sync.md").write_text("# Git\n\nCommits the vault every hour.\n\nIt can sync a remote too.\n",
                                         encoding="utf-8")
    assert run(capsys, "init", str(folder))[0] == 0
    code, out, _ = run(capsys, "--vault", str(folder), "search", "sync", "--mode", "lexical", "--in-process")
    assert code == 0 and "Sync notes or plugins between vaults." in out
    assert "› …Sync notes" not in out and "› Sync notes" not in out  # the description already says it
    assert "› " in out and "sync a remote too" in out  # the other note's snippet says more
    data = json.loads(run(capsys, "--vault", str(folder), "--json", "search", "sync", "--mode", "lexical",
                          "--in-process")[1])
    assert all(hit["snippet"] for hit in data["results"])  # --json keeps every snippet
