"""What a Memory Hub MCP server says about itself, shared by both front ends (``app.py``, ``stdio.py``)
and free of FastMCP, so a stdio server can answer ``initialize`` without importing it."""

from __future__ import annotations

INSTRUCTIONS = """\
Memory Hub is the user's long-term memory: a vault of Markdown notes (decisions, runbooks,
learnings, trackers), in English and Japanese. Before answering from general knowledge about the
user's projects, conventions, past incidents or decisions, call `search` (or `recall` for a compact
list). Open a note with `read_note` only when its description is not enough. Use `related` to
follow links. When you learn something worth keeping (a decision, a fix, a gotcha), call `capture`.
When a note is wrong or outdated, fix it: `update_note` (with the hash `read_note` gave you),
`move_note` to rename it (links follow), `delete_note` to retire it (recoverable, `restore_note`).
"""


def server_version() -> str:
    """The package's version (pyproject reads it from ``memory_hub.__version__`` too): importing
    ``importlib.metadata`` to look it up cost ~0.1 s of a stdio server's start-up, under load."""
    from .. import __version__

    return __version__
