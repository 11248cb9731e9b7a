"""Settings: layers and their order, errors with file and line, Obsidian's own settings, and the
places that obey them (ignore globs in the walk and watcher, capture folders, URL fetching)."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from memory_hub import config
from memory_hub.capture import braindump
from memory_hub.index.sync import sync
from memory_hub.server.watcher import relevant_path

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A private HOME and XDG folders, in this process and for subprocesses."""
    dirs = {"HOME": tmp_path / "home", "XDG_CONFIG_HOME": tmp_path / "home/.config",
            "XDG_STATE_HOME": tmp_path / "home/.local/state"}
    for var, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(path))
    for var in [v for v in os.environ if v.startswith("MEMORY_HUB_") and v != "MEMORY_HUB_SHARED_DATA"]:
        monkeypatch.delenv(var)
    return dirs


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memory_hub", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd or REPO, env={**os.environ, **(env or {})})


def test_layers_in_order_with_sources(homes, tmp_path, monkeypatch) -> None:
    vault = tmp_path / "v"
    user = write(config.user_config_path(), "[search]\nk = 7\nmode = \"lexical\"\n\n[hooks]\nbudget = 900\n")
    write(vault / ".obsidian" / "daily-notes.json", json.dumps({"folder": "Journal", "format": "YYYY/MM/YYYY-MM-DD"}))
    vfile = write(config.vault_config_path(vault), "# tracked with the notes\n[search]\nk = 3\n\n[folders]\n"
                  "daily = \"days\"\n")
    s = config.load_settings(vault)
    assert s["search.k"] == 3 and s.source("search.k") == f"{vfile}:3"  # vault file beats user file
    assert s["search.mode"] == "lexical" and s.source("search.mode") == f"{user}:3"
    assert s["hooks.budget"] == 900 and s["search.reranker"] == "none" and s.source("search.reranker") == "default"
    assert s["folders.daily"] == "days"  # the vault file beats Obsidian's daily-notes.json …
    assert s["daily.format"] == "YYYY/MM/YYYY-MM-DD" and s.source("daily.format").startswith(".obsidian/daily-notes")
    monkeypatch.setenv("MEMORY_HUB_HOOK_DEADLINE", "1.5")
    s = config.load_settings(vault, cli={"search.k": 12})
    assert s["hooks.deadline"] == 1.5 and s.source("hooks.deadline") == "MEMORY_HUB_HOOK_DEADLINE"  # env beats files
    assert s["search.k"] == 12 and s.values["search.k"].layer == "cli"  # a flag beats everything
    # … and Obsidian's folder beats the user file when the vault file says nothing
    write(config.vault_config_path(vault), "")
    write(user, "[folders]\ndaily = \"mine\"\n")
    assert config.load_settings(vault)["folders.daily"] == "Journal"


@pytest.mark.parametrize(("text", "line", "words"), [
    ("[search]\nk = 5\nkk = 6\n", 3, "unknown setting 'search.kk' (did you mean search.k?)"),
    ("[search]\n\nk = \"ten\"\n", 3, "search.k must be a whole number"),
    ("[hooks]\nbudget = 10\n", 2, "hooks.budget must be between 50 and 8000"),
    ("[capture]\nfetch_urls = \"sometimes\"\n", 2, "must be one of url-only, all, never"),
    ("[search]\nmode = \"fuzzy\"\n", 2, "search.mode must be one of lexical"),
    ("[folders]\ninbox = \"../outside\"\n", 2, "must be a folder inside the vault"),
    ("[daily]\nformat = \"gggg-[W]ww\"\n", 2, "cannot render"),
    ("[llm]\nkey = \"sk-secret\"\n", 2, "secrets do not belong in a file tracked in git"),
    ("vault = \"/elsewhere\"\n", 1, "vault can be set only in the user file"),
    ("[server]\ntoken = \"t\"\n", 2, "only from the environment (MEMORY_HUB_TOKEN)"),
    ("[nonsense]\nx = 1\n", 2, "unknown setting 'nonsense.x'"),
    ("[search\nk = 1\n", 1, "not valid TOML"),
])
def test_bad_vault_file_is_an_error_naming_file_and_line(homes, tmp_path, text, line, words) -> None:
    vault = tmp_path / "v"
    path = write(config.vault_config_path(vault), text)
    with pytest.raises(config.ConfigError) as err:
        config.load_settings(vault)
    assert str(err.value).startswith(f"{path}:{line}: ") and words in str(err.value)


def test_cli_refuses_a_bad_file_and_config_shows_sources(homes, tmp_path) -> None:
    vault = tmp_path / "v"
    assert cli("init", str(vault)).returncode == 0
    path = write(config.vault_config_path(vault), "[search]\nk = 4\nmode = \"lexical\"\n")
    proc = cli("config", "--vault", str(vault), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["settings"]["search.k"] == {"value": 4, "source": f"{path}:2", "layer": "vault"}
    assert data["settings"]["vault"]["source"] == "--vault" and data["files"]["vault"]["exists"] is True
    assert data["precedence"] == ["default", "user", "obsidian", "vault", "env", "cli"]
    text = cli("config", "--vault", str(vault)).stdout
    assert "search.k" in text and f"{path}:2" in text and "later wins: default < user" in text
    assert cli("config", "search.k", "--vault", str(vault)).stdout.strip() == "4"
    # the settings reach the command: search.k = 4 results at most, lexical mode without asking
    out = json.loads(cli("--vault", str(vault), "search", "deploy", "--json").stdout)
    assert 0 < len(out["results"]) <= 4 and not any("vectors" in w for w in out["warnings"])
    write(path, "[search]\nk = 4\nbogus = 1\n")
    for args in (["search", "deploy"], ["status"], ["config"]):
        proc = cli("--vault", str(vault), *args)
        assert proc.returncode == 1 and f"{path}:3: unknown setting 'search.bogus'" in proc.stderr, args
        assert "Traceback" not in proc.stderr


def test_user_file_chooses_the_vault(homes, tmp_path) -> None:
    vault = tmp_path / "notes"
    write(config.user_config_path(), f"vault = \"{vault}\"\n")
    assert cli("init").returncode == 0 and (vault / "home.md").is_file()
    data = json.loads(cli("config", "--json").stdout)
    assert data["vault"] == str(vault) and data["settings"]["vault"]["source"] == f"{config.user_config_path()}:1"
    assert config.vault_choice(None) == (vault, f"{config.user_config_path()}:1")


def test_env_settings_from_files_reach_readers_of_the_environment(homes, tmp_path) -> None:
    """A file's limits.max_note_bytes reaches the walk, which reads MEMORY_HUB_MAX_NOTE_BYTES."""
    vault = tmp_path / "v"
    write(vault / "small.md", "# Small\n\nfine\n")
    write(vault / "big.md", "# Big\n\n" + "x" * 5000 + "\n")
    write(config.vault_config_path(vault), "[limits]\nmax_note_bytes = 2048\n")
    proc = cli("--vault", str(vault), "index", "--no-vectors", "--json")
    data = json.loads(proc.stdout)
    assert [p["path"] for p in data["skipped"]] == ["big.md"] and "2,048" in data["skipped"][0]["reason"]
    # the environment still wins over the file
    proc = cli("--vault", str(vault), "index", "--no-vectors", "--rebuild", "--json",
               env={"MEMORY_HUB_MAX_NOTE_BYTES": "100000"})
    assert json.loads(proc.stdout)["skipped"] == [] and "big.md" in json.loads(proc.stdout)["added"]


def test_ignore_globs_and_obsidian_excluded_files_stay_out_of_the_index(homes, make_vault) -> None:
    vault, store = make_vault({
        "keep.md": "# Keep\n\nfindme keep\n", "drafts/wip.md": "# WIP\n\nfindme draft\n",
        "notes/drafts/deep.md": "# Deep\n\nfindme deep\n", "a.excalidraw.md": "# Drawing\n\nfindme drawing\n",
        "Archive/old.md": "# Old\n\nfindme archive\n", "private/secret.md": "# Secret\n\nfindme private\n",
        "logs/2026-01.md": "# Log\n\nfindme log\n", "notes/kept.md": "# Kept\n\nfindme kept\n",
    }, index=False)
    write(vault / ".obsidian" / "app.json", json.dumps({"userIgnoreFilters": ["Archive/", "/^logs/\\d{4}/"]}))
    write(config.vault_config_path(vault), '[ignore]\nglobs = ["drafts/", "*.excalidraw.md", "/private"]\n')
    report = sync(vault, store=store)
    indexed = {r[0] for r in store.conn.execute("SELECT path FROM notes")}
    assert indexed == {"keep.md", "notes/kept.md"}, report.as_dict()
    assert relevant_path(vault, str(vault / "drafts" / "x.md")) is None  # the watcher agrees
    assert relevant_path(vault, str(vault / "Archive" / "y.md")) is None
    assert relevant_path(vault, str(vault / "notes" / "z.md")) == "notes/z.md"
    # turning Obsidian's filters off brings Archive and logs back; deleted globs bring the rest back
    write(config.vault_config_path(vault), "[ignore]\nobsidian = false\n")
    sync(vault, store=store)
    indexed = {r[0] for r in store.conn.execute("SELECT path FROM notes")}
    assert len(indexed) == 8


class _Page(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *a):  # noqa: ANN002
        return

    def do_GET(self) -> None:  # noqa: N802
        _Page.hits.append(self.path)
        body = b"<html><head><title>Rotation guide</title></head><body><p>Rotate certificates yearly.</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_url_fetching_follows_the_policy(homes, template_vault) -> None:
    vault, _ = template_vault
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/guide"
    today = dt.date(2026, 5, 9)
    try:
        _Page.hits.clear()
        inside = braindump(vault, f"remember to read {url} before the rotation", today=today, link_daily=False)
        assert _Page.hits == [] and inside.urls[0]["skipped"]  # a URL in a text is not fetched by default
        note = (vault / inside.path).read_text(encoding="utf-8")
        assert url in note and "## Source" not in note and "failed" not in note
        alone = braindump(vault, f"  {url}\n", today=today, link_daily=False)  # the whole capture is a URL
        assert _Page.hits == ["/guide"] and "Rotate certificates yearly." in (vault / alone.path).read_text()
        write(config.vault_config_path(vault), '[capture]\nfetch_urls = "all"\n')
        braindump(vault, f"remember to read {url} before the rotation", today=today, link_daily=False)
        assert _Page.hits == ["/guide", "/guide"]
        write(config.vault_config_path(vault), '[capture]\nfetch_urls = "never"\n')
        braindump(vault, url, today=today, link_daily=False)
        assert len(_Page.hits) == 2
        braindump(vault, f"read {url}", today=today, link_daily=False, fetch_urls=True)  # --fetch asks explicitly
        assert len(_Page.hits) == 3
    finally:
        server.shutdown()
        server.server_close()


def test_capture_folders_and_obsidian_daily_notes(homes, template_vault) -> None:
    vault, _ = template_vault
    write(vault / ".obsidian" / "daily-notes.json",
          json.dumps({"folder": "Journal", "format": "YYYY/MM/[Day] YYYY-MM-DD", "template": "templates/daily"}))
    write(config.vault_config_path(vault), '[folders]\ninbox = "00 Inbox"\n')
    r = braindump(vault, "Need to renew the partner-api cert soon", today=dt.date(2026, 5, 9))
    assert r.path.startswith("00 Inbox/") and (vault / r.path).is_file()
    assert r.daily == "Journal/2026/05/Day 2026-05-09.md"
    daily = (vault / r.daily).read_text(encoding="utf-8")
    assert "kind: daily" in daily and f"[[{Path(r.path).stem}]]" in daily


def test_moment_formats() -> None:
    day = dt.date(2026, 3, 7)
    assert config.moment_to_strftime("YYYY-MM-DD")(day) == "2026-03-07"
    assert config.moment_to_strftime("D.M.YY")(day) == "7.3.26"
    assert config.moment_to_strftime("[Week of] YYYY-MM-DD dddd")(day) == "Week of 2026-03-07 Saturday"
    for bad in ("YYYY-[W]ww", "HH:mm", "[open", "no date"):
        with pytest.raises(ValueError):
            config.moment_to_strftime(bad)


def test_key_lines_follow_tables_and_dotted_keys() -> None:
    text = 'vault = "x"\nsearch.k = 3\n[hooks]\n# c\nbudget = 5\n[ "folders" ]\n"inbox" = "i"\n'
    assert config.key_lines(text) == {"vault": 1, "search.k": 2, "hooks": 3, "hooks.budget": 5, "folders": 6,
                                      "folders.inbox": 7}


def test_reading_settings_writes_nothing(homes, template_vault) -> None:
    vault, _ = template_vault
    before = sorted(str(p) for p in vault.rglob("*"))
    config.load_settings(vault)
    config.settings(vault)
    assert sorted(str(p) for p in vault.rglob("*")) == before
    assert not config.user_config_path().exists()
