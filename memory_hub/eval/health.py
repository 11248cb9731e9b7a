"""Health: is the index there, fresh, and complete? Liveness checks cannot see silent staleness."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..index.store import Store
from ..index.sync import skipped_as_seen
from ..vault.walk import OutsideVault, UnreadableNote, content_hash, read_note_bytes, walk


def pending_changes(store: Store) -> int:
    """Files whose mtime/size differ from the index, plus indexed files that are gone (a stat walk).

    A note stored with mtime 0 was indexed while it was still "racy" (modified within the mtime
    tick, see sync.py); its stat proves nothing, so its content hash decides. A file the last sync
    skipped with a recorded problem (binary, too large, not UTF-8) is pending only once it changes.
    """
    known = {r[0]: (r[1], r[2], r[3]) for r in store.conn.execute("SELECT path, mtime_ns, size, hash FROM notes")}
    skipped = skipped_as_seen(store.conn)  # skipped with a recorded problem, unchanged since
    pending = 0
    seen = set()
    for st in walk(store.vault):
        seen.add(st.path)
        if skipped.get(st.path) == (st.mtime_ns, st.size):
            continue
        old = known.get(st.path)
        if old is None or old[1] != st.size:
            pending += 1
        elif old[0] != st.mtime_ns and not (old[0] == 0 and _same_content(store.vault, st.path, old[2])):
            pending += 1
    return pending + sum(1 for p in known if p not in seen)


def _same_content(vault: Path, rel: str, digest: str) -> bool:
    if digest.startswith("stat:"):  # attachments are tracked by stat only
        return False
    try:
        return content_hash(read_note_bytes(vault, rel)) == digest
    except (OSError, UnreadableNote, OutsideVault):
        return False


def vector_coverage(vault: Path, store: Store | None = None) -> dict[str, Any] | None:
    """How many notes have fresh vectors (``Coverage.as_dict``); None when the vault was never embedded.

    Answered from the last complete vector sync's stamp when nothing changed since; otherwise it
    loads the embedder (the vector table is named by it) and reads the table's note columns."""
    from ..retrieval.search import has_vectors
    from ..retrieval.searcher import Searcher

    store = store or Store(vault)
    if not has_vectors(store):
        return None
    try:
        return Searcher(vault, store=store).coverage().as_dict()
    except Exception as exc:  # noqa: BLE001 - a broken model must not hide the rest of the status
        return {"error": f"{type(exc).__name__}: {exc}"}


def status(vault: Path, vectors: bool = False) -> dict[str, Any]:
    """Counts, freshness and problems of a vault's index, as plain data (with ``vectors``: coverage too)."""
    store = Store(vault)
    conn = store.conn
    kinds = {r[0]: r[1] for r in conn.execute("SELECT kind, count(*) FROM notes GROUP BY kind ORDER BY kind")}
    last = store.get_meta("last_sync")
    links = conn.execute("SELECT count(*), sum(target_id IS NULL) FROM links").fetchone()
    return {
        "vault": str(vault),
        "index": str(store.path),
        "notes": sum(v for k, v in kinds.items() if k != "attachment"),
        "attachments": kinds.get("attachment", 0),
        "kinds": kinds,
        "ranked_notes": conn.execute("SELECT count(*) FROM notes WHERE ranked = 1").fetchone()[0],
        "links": links[0] or 0,
        "dangling_links": links[1] or 0,
        "last_sync": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(last))) if last else None,
        "pending_changes": pending_changes(store),
        "problems": [f"{r[0]}: {r[1]}" for r in conn.execute("SELECT path, problem FROM problems ORDER BY path")],
        "usage": _usage(store, vault),
        "conflicts": _conflicts(vault),
        **({"vectors": vector_coverage(vault, store)} if vectors else {}),
    }


def _conflicts(vault: Path) -> list[dict[str, str]]:
    """Sync conflict copies still waiting for a person (``vault/remote.py``)."""
    from ..vault.remote import unresolved

    try:
        return unresolved(vault)
    except Exception:  # noqa: BLE001 - status must answer; git missing or broken shows in doctor
        return []


def _usage(store: Store, vault: Path) -> dict[str, Any]:
    """Usage logs folded so far, and this clone's events not yet published to git."""
    from ..index import usage

    usage.fold(store, vault, wait=False)
    return usage.summary(store, vault)
