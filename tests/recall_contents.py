"""What recall's index holds, for tests: each term's notes, saved and pending. The product never
needs a term's notes (a prompt reads document counts, ``RecallIndex.df``), so this scan lives here."""

from __future__ import annotations

from memory_hub.retrieval.recall_index import RecallIndex, _unpack_ids


def postings(index: RecallIndex) -> dict[str, set[str]]:
    """{term: the paths of the notes that have it}, as the index answers now (the file plus what is
    pending: a pending note's saved terms are replaced by its new ones, a deleted note's dropped)."""
    with index._lock:
        out: dict[str, set[str]] = {}
        con = index._readable()
        if con is not None:
            names = dict(con.execute("SELECT id, term FROM terms"))
            for path, blob in con.execute("SELECT n.path, p.terms FROM postings p JOIN notes n ON n.id = p.note"):
                for tid in _unpack_ids(blob):
                    out.setdefault(names[tid], set()).add(path)
        for path, entry in index._pending.items():
            for paths in out.values():
                paths.discard(path)
            if entry is not None and entry[3]:
                for term in entry[3]:
                    out.setdefault(term, set()).add(path)
        return {term: paths for term, paths in out.items() if paths}


def contents(index: RecallIndex) -> tuple:
    """Everything the index holds: stamps, records and postings."""
    return index.data.files, {p: vars(n) for p, n in index.data.notes.items()}, postings(index)
