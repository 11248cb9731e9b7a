"""A real MCP client drives the write tools of a real `memory-hub serve` over stdio, on a git vault.

update_note (hash conflict, sections, redaction), move_note (every link form, a note being edited,
the index following the rename), delete_note and restore_note (trash, then git history), and the
one-line errors for arguments the schema refuses.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from test_server_stdio import MEMORY_HUB, _call  # the same real client, same helpers

from memory_hub.config import template_dir
from memory_hub.index.store import Store
from memory_hub.index.sync import sync
from memory_hub.vault.editing import note_hash

TARGET = """---
title: Target note
description: The note the tests move around.
aliases: [the target]
updated: 2026-01-01
---
# Target note

## Steps

- one

## Notes

A block line. ^b1

Back [home](../home.md).
"""

LINKER = """---
title: Linker
related: "[[target]]"
---
# Linker

plain [[target]] alias [[target|the alias]] heading [[target#Steps]] block [[target#^b1]]
embed ![[target]] path [[folder/target]] with ext [[target.md]] by alias [[the target]]
md [t](folder/target.md) anchor [t](folder/target.md#steps) angle [t](<folder/target.md>)

| table | [[target\\|T]] |

```
[[target]] in a fence
```

inline `[[target]]` and %%[[target]]%% stay.
"""

LINKER_AFTER = """---
title: Linker
related: "[[renamed]]"
---
# Linker

plain [[renamed]] alias [[renamed|the alias]] heading [[renamed#Steps]] block [[renamed#^b1]]
embed ![[renamed]] path [[archive/2026/renamed]] with ext [[renamed.md]] by alias [[the target]]
md [t](archive/2026/renamed.md) anchor [t](archive/2026/renamed.md#steps) angle [t](<archive/2026/renamed.md>)

| table | [[renamed\\|T]] |

```
[[target]] in a fence
```

inline `[[target]]` and %%[[target]]%% stay.
"""


def git(vault: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=vault, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    v = tmp_path / "vault"
    shutil.copytree(template_dir(), v)
    (v / "folder").mkdir()
    (v / "folder/target.md").write_text(TARGET, encoding="utf-8")
    (v / "linker.md").write_text(LINKER, encoding="utf-8")
    (v / "sub").mkdir()
    (v / "sub/deep.md").write_text("# Deep\n\nUp [there](../folder/target.md#notes).\n", encoding="utf-8")
    (v / "editing.md").write_text("# Editing\n\nSee [[target]].\n", encoding="utf-8")
    git(v, "init", "-q", "-b", "main")
    git(v, "add", "-A")
    git(v, "commit", "-q", "-m", "init")
    old = time.time() - 3600
    for p in v.rglob("*.md"):
        os.utime(p, (old, old))
    # A person is editing this one right now: saved a moment ago, not committed.
    (v / "editing.md").write_text("# Editing\n\nSee [[target]]. And a new thought\n", encoding="utf-8")
    sync(v)
    return v


def _serve(vault: Path) -> StdioTransport:
    return StdioTransport(command=MEMORY_HUB, args=["--vault", str(vault), "serve", "--no-warm", "--no-watch"],
                          env={**os.environ, "MEMORY_HUB_VAULT": ""})


def test_update_and_move_over_stdio(vault: Path) -> None:
    store = Store(vault)
    old_id = store.note_row("folder/target.md")["id"]
    store.close()

    async def scenario() -> dict:
        out: dict = {}
        async with Client(_serve(vault)) as client:
            out["tools"] = {t.name: t for t in await client.list_tools()}
            _, read = await _call(client, "read_note", {"path": "folder/target.md"})
            out["read"] = read
            h = read["hash"]
            out["append"] = await _call(client, "update_note", {
                "path": "folder/target.md", "heading": "Steps", "text": "- two", "expected_hash": h})
            out["stale"] = await _call(client, "update_note", {
                "path": "folder/target.md", "text": "lost?", "expected_hash": h})
            h2 = out["append"][1]["hash"]
            out["replace"] = await _call(client, "update_note", {
                "path": "folder/target.md", "heading": "Notes", "mode": "replace", "expected_hash": h2,
                "text": "Rewritten. ^b1\n\ntoken ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8 found\n\nBack [home](../home.md)."})
            out["no_heading"] = await _call(client, "update_note", {
                "path": "folder/target.md", "heading": "Nope", "mode": "replace",
                "expected_hash": out["replace"][1]["hash"], "text": "x"})
            out["move"] = await _call(client, "move_note", {"path": "folder/target.md",
                                                            "new_path": "archive/2026/renamed"})
            out["read_after"] = await _call(client, "read_note", {"path": "archive/2026/renamed.md"})
            out["search"] = await _call(client, "search", {"query": "Target note", "k": 3})
            out["related"] = await _call(client, "related", {"path": "archive/2026/renamed.md"})
            out["taken"] = await _call(client, "move_note", {"path": "linker.md", "new_path": "home.md"})
        return out

    before_head = git(vault, "rev-parse", "HEAD").strip()
    out = asyncio.run(scenario())
    tools = out["tools"]
    for name in ("update_note", "move_note", "delete_note"):
        ann = tools[name].annotations
        assert ann.read_only_hint is False and ann.destructive_hint is True and ann.idempotent_hint is True, name
    assert tools["restore_note"].annotations.destructive_hint is False
    assert tools["restore_note"].annotations.read_only_hint is False
    assert "expected_hash" in tools["update_note"].input_schema["required"]

    assert len(out["read"]["hash"]) == 32
    err, appended = out["append"]
    assert not err, appended
    assert appended["commit"] and appended["previous_hash"] == out["read"]["hash"]
    err, stale = out["stale"]
    assert err and "changed since it was read" in stale and f"current hash {appended['hash']}" in stale
    assert "\n" not in stale
    err, replaced = out["replace"]
    assert not err and replaced["redacted"], replaced
    err, missing = out["no_heading"]
    assert err and "no heading 'Nope'" in missing and "## Steps" in missing

    # Each change is one commit on the branch, named after the tool and the note.
    log = git(vault, "log", "--format=%s", f"{before_head}..HEAD").splitlines()
    assert log == ["mcp move_note: folder/target.md → archive/2026/renamed.md",
                   "mcp update_note: folder/target.md (replaced section 'Notes')",
                   "mcp update_note: folder/target.md (appended to section 'Steps')"]
    assert git(vault, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"

    err, moved = out["move"]
    assert not err, moved
    text = (vault / "archive/2026/renamed.md").read_text(encoding="utf-8")
    assert not (vault / "folder/target.md").exists()
    assert "## Steps\n\n- one\n- two\n\n## Notes\n\nRewritten. ^b1\n\n" in text
    assert "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8" not in text
    assert "updated: 20" in text and "updated: 2026-01-01" not in text
    assert "Back [home](../../home.md)." in text  # its own relative link follows it
    assert (vault / "linker.md").read_text(encoding="utf-8") == LINKER_AFTER
    assert "Up [there](../archive/2026/renamed.md#notes)." in (vault / "sub/deep.md").read_text(encoding="utf-8")
    # The note being edited is left alone and reported.
    assert "See [[target]]. And a new thought" in (vault / "editing.md").read_text(encoding="utf-8")
    assert [s["path"] for s in moved["skipped"]] == ["editing.md"]
    assert "being editing" not in str(moved) and "editing it" in moved["skipped"][0]["reason"]
    assert {r["path"] for r in moved["relinked"]} >= {"linker.md", "sub/deep.md"}
    assert "editing.md" not in git(vault, "show", "--name-only", "--format=", "HEAD")
    assert "1 renamed" in moved["index"]

    err, read_after = out["read_after"]
    assert not err and read_after["usage"]["reads"] == 2, read_after  # the read before the move followed it
    err, search = out["search"]
    assert not err and search["results"][0]["path"] == "archive/2026/renamed.md"
    err, related = out["related"]
    assert not err and {"linker.md", "sub/deep.md"} <= {n["path"] for n in related["related"]}
    err, taken = out["taken"]
    assert err and "already exists" in taken and (vault / "linker.md").exists()

    store = Store(vault)
    assert store.note_row("archive/2026/renamed.md")["id"] == old_id  # renamed in the index, not re-added
    assert store.note_row("folder/target.md") is None
    store.close()


def test_delete_restore_and_argument_errors_over_stdio(vault: Path) -> None:
    async def scenario() -> dict:
        out: dict = {}
        async with Client(_serve(vault)) as client:
            out["busy"] = await _call(client, "delete_note", {"path": "editing.md"})
            out["delete"] = await _call(client, "delete_note", {"path": "folder/target.md"})
            out["gone"] = await _call(client, "search", {"query": "Target note", "k": 5})
            out["again"] = await _call(client, "delete_note", {"path": "folder/target.md"})
            out["restore"] = await _call(client, "restore_note", {"path": "folder/target.md"})
            out["back"] = await _call(client, "search", {"query": "Target note", "k": 5})
            out["delete2"] = await _call(client, "delete_note", {"path": "folder/target.md"})
            shutil.rmtree(vault / ".trash")  # emptied by hand: git still has it
            out["from_git"] = await _call(client, "restore_note", {"path": "folder/target.md",
                                                                   "new_path": "restored/"})
            out["errors"] = [await _call(client, tool, args) for tool, args in (
                ("update_note", {"path": "linker.md", "text": "x"}),
                ("update_note", {"path": "linker.md", "text": "x", "expected_hash": "0" * 32, "mode": "wipe"}),
                ("update_note", {"path": "linker.md", "text": "x", "expected_hash": "abc"}),
                ("update_note", {"path": "../outside.md", "text": "x", "expected_hash": "0" * 32}),
                ("move_note", {"path": "linker.md", "new_path": "../../escape.md"}),
                ("move_note", {"path": "linker.md", "new_path": ".obsidian/x.md"}),
                ("delete_note", {"path": "linker.md", "force": True}),
                ("restore_note", {"path": "never-existed.md"}),
                ("search", {"query": 3}),
            )]
        return out

    before = {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*.md")
              if ".git" not in p.parts and ".memory_hub" not in p.parts}
    out = asyncio.run(scenario())
    err, busy = out["busy"]
    assert err and "editing it" in busy and "expected_hash" in busy
    assert (vault / "editing.md").exists()

    err, deleted = out["delete"]
    assert not err, deleted
    assert deleted["trash_path"] == ".trash/folder/target.md" and "linker.md" in deleted["backlinks"]
    assert "restore_note" in deleted["restore"]
    err, gone = out["gone"]
    assert not err and "folder/target.md" not in [r["path"] for r in gone["results"]]
    err, again = out["again"]
    assert err and "no note" in again
    err, restored = out["restore"]
    assert not err and restored["source"] == ".trash/folder/target.md" and restored["path"] == "folder/target.md"
    assert restored["hash"] == note_hash(before["folder/target.md"])  # the very bytes (deleted again below)
    err, back = out["back"]
    assert not err and back["results"][0]["path"] == "folder/target.md"
    err, deleted2 = out["delete2"]
    assert not err and deleted2["trash_path"] == ".trash/folder/target.md"
    err, from_git = out["from_git"]
    assert not err and from_git["source"].startswith("git:") and from_git["path"] == "restored/target.md"
    assert (vault / "restored/target.md").read_bytes() == before["folder/target.md"]

    log = git(vault, "log", "--format=%s", "-5").splitlines()
    assert log[:4] == ["mcp restore_note: restored/target.md ← git:" + from_git["source"][4:],
                       "mcp delete_note: folder/target.md → .trash/folder/target.md",
                       "mcp restore_note: folder/target.md ← .trash/folder/target.md",
                       "mcp delete_note: folder/target.md → .trash/folder/target.md"]
    assert "R100\tfolder/target.md\t.trash/folder/target.md" in git(vault, "show", "-M", "--name-status",
                                                                   "--format=", "HEAD~3")

    messages = [str(payload) for _err, payload in out["errors"]]
    assert all(err for err, _ in out["errors"]), out["errors"]
    for message in messages:
        assert "\n" not in message and "pydantic" not in message and "Traceback" not in message, message
    assert "expected_hash: required, missing" in messages[0]
    assert "mode:" in messages[1] and "'wipe'" in messages[1]
    assert "32-character hash" in messages[2]
    assert "leaves the vault" in messages[3]
    assert "leaves the vault" in messages[4] and "hidden" in messages[5]
    assert "force: unknown argument" in messages[6] and "path, expected_hash" in messages[6]
    assert "neither in .trash/ nor deleted" in messages[7]
    assert "query: input should be a valid string (got 3)" in messages[8]
    assert not (vault.parent / "escape.md").exists() and not (vault / ".obsidian/x.md").exists()
    assert (vault / "linker.md").read_bytes() == before["linker.md"]


def test_hostile_input_over_stdio(vault: Path, tmp_path: Path) -> None:
    """Symlinks out of the vault, ../ paths, stale hashes, a person's edit, secrets, a merge in progress:
    every call is refused in one line, and nothing inside or outside the vault changes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Outside\n\nnot the vault's\n", encoding="utf-8")
    (vault / "link.md").symlink_to(outside / "secret.md")
    (vault / "linkdir").symlink_to(outside, target_is_directory=True)
    outside_hash = note_hash((outside / "secret.md").read_bytes())
    token = "ghp_1A2b3C4d5E6f7G8h9I0jK1l2M3n4O5p6Q7r8"

    async def scenario() -> dict:
        out: dict = {}
        async with Client(_serve(vault)) as client:
            _, read = await _call(client, "read_note", {"path": "linker.md"})
            h = read["hash"]
            calls = {
                "update_symlink": ("update_note", {"path": "link.md", "text": "x", "expected_hash": outside_hash}),
                "update_in_linkdir": ("update_note", {"path": "linkdir/secret.md", "text": "x",
                                                      "expected_hash": outside_hash}),
                "move_symlink": ("move_note", {"path": "link.md", "new_path": "moved.md"}),
                "delete_symlink": ("delete_note", {"path": "link.md"}),
                "move_into_linkdir": ("move_note", {"path": "linker.md", "new_path": "linkdir/linker.md"}),
                "move_into_git": ("move_note", {"path": "linker.md", "new_path": ".git/linker.md"}),
                "move_secret_path": ("move_note", {"path": "linker.md", "new_path": f"keys/{token}.md"}),
                "restore_dotdot": ("restore_note", {"path": ".trash/../../outside/secret.md"}),
                "restore_up": ("restore_note", {"path": "../outside/secret.md"}),
                "restore_new_up": ("restore_note", {"path": "folder/target.md", "new_path": "../x.md"}),
                "move_stale": ("move_note", {"path": "linker.md", "new_path": "l2.md", "expected_hash": "0" * 32}),
                "delete_stale": ("delete_note", {"path": "linker.md", "expected_hash": "0" * 32}),
            }
            for key, (tool, args) in calls.items():
                out[key] = await _call(client, tool, args)
            # A person saves the note after the agent read it: the agent's edit is refused.
            (vault / "linker.md").write_text(LINKER + "\nA person's line.\n", encoding="utf-8")
            out["update_after_person"] = await _call(client, "update_note", {
                "path": "linker.md", "text": "agent text", "expected_hash": h})
            # Read again: the hash is right now, but the person may still be typing (saved, not committed).
            _, fresh = await _call(client, "read_note", {"path": "linker.md"})
            out["update_while_editing"] = await _call(client, "update_note", {
                "path": "linker.md", "text": "agent text", "expected_hash": fresh["hash"]})
            # The trash folder leads out of the vault: nothing is written there, the note stays.
            (vault / ".trash").symlink_to(outside, target_is_directory=True)
            out["delete_into_symlinked_trash"] = await _call(client, "delete_note", {"path": "home.md"})
            (vault / ".trash").unlink()
            # A merge, then a rebase, in progress: no write commits into it.
            _, read2 = await _call(client, "read_note", {"path": "home.md"})
            (vault / ".git/MERGE_HEAD").write_text(git(vault, "rev-parse", "HEAD"))
            out["mid_merge"] = await _call(client, "update_note", {"path": "home.md", "text": "x",
                                                                   "expected_hash": read2["hash"]})
            (vault / ".git/MERGE_HEAD").unlink()
            (vault / ".git/rebase-merge").mkdir()
            out["mid_rebase"] = await _call(client, "move_note", {"path": "home.md", "new_path": "home2.md"})
            (vault / ".git/rebase-merge").rmdir()
            # A secret in a heading is redacted like one in the text.
            out["heading_secret"] = await _call(client, "update_note", {
                "path": "home.md", "heading": f"Key {token}", "text": f"value {token}",
                "expected_hash": read2["hash"]})
            # The agent's own capture (saved a moment ago, not committed) is not a person's edit.
            _, captured = out["captured"] = await _call(client, "capture", {"text": "Deploys need the canary flag.",
                                                                           "title": "Canary"})
            out["own_capture"] = await _call(client, "update_note", {
                "path": captured["path"], "text": "And a rollback plan.", "expected_hash": captured["hash"]})
        return out

    head = git(vault, "rev-parse", "HEAD").strip()
    before = {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*.md")
              if ".git" not in p.parts and ".memory_hub" not in p.parts and not p.is_symlink()
              and "linkdir" not in p.parts}
    out = asyncio.run(scenario())
    refused = {k: v for k, v in out.items() if k not in ("heading_secret", "own_capture", "captured")}
    for key, (err, message) in refused.items():
        assert err, (key, message)
        assert isinstance(message, str) and "\n" not in message and "Traceback" not in message, (key, message)
    leaves = ("update_symlink", "update_in_linkdir", "move_symlink", "delete_symlink", "move_into_linkdir",
              "restore_dotdot", "restore_up", "restore_new_up")
    for key in leaves:
        assert "leaves the vault" in out[key][1], (key, out[key][1])
    assert "hidden" in out["move_into_git"][1]
    assert "looks like a secret" in out["move_secret_path"][1] and token not in out["move_secret_path"][1]
    for key in ("move_stale", "delete_stale", "update_after_person"):
        assert "changed since it was read" in out[key][1], (key, out[key][1])
    assert "editing it" in out["update_while_editing"][1] and "nothing was written" in out["update_while_editing"][1]
    assert "cannot write to .trash/" in out["delete_into_symlinked_trash"][1]
    assert "a merge is in progress" in out["mid_merge"][1]
    assert "a rebase is in progress" in out["mid_rebase"][1]

    err, edited = out["heading_secret"]
    assert not err and edited["redacted"], edited
    home = (vault / "home.md").read_text(encoding="utf-8")
    assert token not in home and "value " in home
    err, own = out["own_capture"]
    assert not err and own["commit"], own
    captured_path = own["path"]
    # Only the two accepted calls committed; everything refused left every file as it was, outside too.
    assert git(vault, "log", "--format=%s", f"{head}..HEAD").splitlines() == [
        f"mcp update_note: {captured_path} (appended to the end)",
        "mcp update_note: home.md (appended to section 'Key [REDACTED:github-token]')"]
    assert sorted(os.listdir(outside)) == ["secret.md"]
    assert (outside / "secret.md").read_text(encoding="utf-8") == "# Outside\n\nnot the vault's\n"
    after = {p.relative_to(vault).as_posix(): p.read_bytes() for p in vault.rglob("*.md")
             if ".git" not in p.parts and ".memory_hub" not in p.parts and not p.is_symlink()
             and "linkdir" not in p.parts}
    daily = out["captured"][1].get("daily")
    added = {captured_path, *([daily] if daily else [])}
    assert set(after) - added == set(before)
    assert after["linker.md"] == (LINKER + "\nA person's line.\n").encode()  # the person's save stands
    assert {k for k in before if after[k] != before[k]} == {"linker.md", "home.md"}
