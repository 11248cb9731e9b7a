"""Is the vector index current? Answered from the SQLite meta table and one ``stat``.

A complete vector sync records what it saw (``vectors.VectorIndex._mark_current``): the notes'
change stamp, the embedder, the passage layout and the table's version folder. While all still hold, nothing is
due, so a no-change ``memory-hub sync``, ``status`` and ``vectors --coverage`` can answer without
numpy, LanceDB or a model (each costs from a tenth of a second to seconds per process). This module
imports none of them; ``vectors.py`` writes the stamp and re-exports these names.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..config import index_dir
from .cache import NOTES_CHANGED
from .embed.base import EmbedderError
from .store import Store

META_VERSION = "vectors_version"  # per table: bumped by every vector write (searchers reload on it)
META_CURRENT = "vectors_current"  # what the last complete vector sync saw
# The passage layout (``vectors.note_key``); a mark made under another layout is not current, so
# an upgrade that changes what is embedded re-embeds instead of calling the old vectors fresh.
# 2: a note passage plus chunks of long notes. 3: and sentence windows of short notes (every span;
# never shipped on). 4: and sentence windows of the prose of short notes (``chunks.sentence_windows``).
PASSAGES_VERSION = "4"


def lancedb_dir(vault: Path) -> Path:
    return index_dir(vault) / "lancedb"


def ever_embedded(store: Store) -> bool:
    """Whether any vector sync ever ran for this vault (one look at the meta table)."""
    return store.conn.execute(f"SELECT 1 FROM meta WHERE key LIKE '{META_VERSION}:%' LIMIT 1").fetchone() is not None


def table_stamp(folder: Path, name: str) -> str:
    """Changes whenever LanceDB commits a version of the table (or the table is deleted)."""
    try:
        return str((folder / f"{name}.lance" / "_versions").stat().st_mtime_ns)
    except OSError:
        return ""


def table_names(folder: Path) -> list[str]:
    """The vector tables in ``folder``, sorted: one ``listdir``. A mark records them, so a table
    that appeared since (another embedder's sync, interrupted) makes the next sync look, and drop
    it once this embedder's vectors are complete."""
    try:
        return sorted(entry.name[: -len(".lance")] for entry in os.scandir(folder) if entry.name.endswith(".lance"))
    except OSError:
        return []


def hub_file(folder: Path, name: str) -> Path:
    """Where the table's note hubness lives (``hubness.py``)."""
    return folder / f"hub-{name}.npz"


def ann_mark_file(folder: Path, name: str) -> Path:
    """Where the table's ANN upkeep records which index it trained (``VectorIndex._ann_marked``)."""
    return folder / f"ann-{name}.json"


def hub_stamp(folder: Path, name: str) -> str:
    """Changes whenever the table's hubness file is rewritten or removed."""
    try:
        return str(hub_file(folder, name).stat().st_mtime_ns)
    except OSError:
        return ""


def hub_built_key(name: str) -> str:
    """The meta key under which a hubness rebuild records what it wrote (``hub_built``)."""
    return f"vectors_hub_built:{name}"


def hub_built(store: Store, name: str) -> dict | None:
    """What the last hubness rebuild recorded (``{"embedder", "rows", "notes", "stamp"}``) while
    the file it wrote is still in place, else None: one meta read and one ``stat``."""
    try:
        built = json.loads(store.get_meta(hub_built_key(name)) or "{}")
    except ValueError:
        return None
    if not isinstance(built, dict) or not built.get("stamp") or \
            built.get("stamp") != hub_stamp(lancedb_dir(store.vault), name):
        return None
    return built


def hub_state(store: Store, name: str) -> dict:
    """What the table's hubness file holds: ``{"built": True, "notes": n, "rows": n}`` while the
    last rebuild's file is in place, else ``{"built": False}`` (search then ranks the vector
    channel by plain cosine)."""
    built = hub_built(store, name)
    if built is None:
        return {"built": False}
    return {"built": True, "notes": int(built.get("notes") or 0), "rows": int(built.get("rows") or 0)}


def holding_mark(store: Store, fingerprint: str | None, notes: str) -> dict | None:
    """The last complete vector sync's mark if it still holds for vectors of ``fingerprint`` with
    the notes at change stamp ``notes``: same passage layout, and its table and its hubness file
    unchanged since (a mark from before the hubness file holds no ``hub``: the next sync builds it),
    and no other table beside it that was not there (``table_names``)."""
    raw = store.get_meta(META_CURRENT)
    if not raw:
        return None
    try:
        mark = json.loads(raw)
    except ValueError:
        return None
    if (not isinstance(mark, dict) or mark.get("fingerprint") != fingerprint
            or mark.get("passages") != PASSAGES_VERSION or mark.get("notes") != notes or not mark.get("lance")
            or mark.get("lance") != table_stamp(lancedb_dir(store.vault), str(mark.get("table")))
            or mark.get("hub") != hub_stamp(lancedb_dir(store.vault), str(mark.get("table")))
            or ("tables" in mark and mark["tables"] != table_names(lancedb_dir(store.vault)))):
        return None
    return mark


def current_embedder(store: Store, fingerprint: str) -> str | None:
    """The embedder key whose vectors are known current with every note, without opening LanceDB
    or loading a model; None when a sync has to look (a note changed, another model, the table
    changed or vanished). ``fingerprint``: ``embed.loader.embedder_fingerprint`` of the spec."""
    mark = holding_mark(store, fingerprint, store.get_meta(NOTES_CHANGED, ""))
    return None if mark is None else str(mark.get("embedder"))


def current_for(store: Store, spec: str | None = None) -> str | None:
    """``current_embedder`` for the embedder ``spec`` names (None: the default), or None."""
    from .embed.loader import embedder_fingerprint

    try:
        fingerprint = embedder_fingerprint(spec)
    except EmbedderError:
        return None
    return current_embedder(store, fingerprint)
