"""Health: is the index there, fresh, and complete? Liveness checks cannot see silent staleness."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..index.store import Store
from ..vault.walk import walk


def pending_changes(store: Store) -> int:
    """Files whose mtime/size differ from the index, plus indexed files that are gone (a stat walk)."""
    known = {r[0]: (r[1], r[2]) for r in store.conn.execute("SELECT path, mtime_ns, size FROM notes")}
    pending = 0
    seen = set()
    for st in walk(store.vault):
        seen.add(st.path)
        if known.get(st.path) != (st.mtime_ns, st.size):
            pending += 1
    return pending + sum(1 for p in known if p not in seen)


def status(vault: Path) -> dict[str, Any]:
    """Counts, freshness and problems of a vault's index, as plain data."""
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
    }
