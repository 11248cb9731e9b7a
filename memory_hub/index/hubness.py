"""Hubness: how close a note's vectors sit to every question, whatever it asks.

In a high-dimensional embedding space some points are near almost everything ("hubs"): on the
Obsidian help vaults the CLI reference (every command) and the credits page (translators in forty
languages) were in the vector channel's top five for a quarter of the natural questions they do
not answer, in English and Japanese alike. A note's cosine to a query is therefore read against
how near that note comes to questions in general (the idea of CSLS, Conneau et al. 2018, and of
querybank normalisation): its hubness is the mean of its ``NEIGHBOURS`` best scores over a bank of
probe questions, and the vector channel ranks by ``cosine - WEIGHT * (hubness - mean hubness)``.

The probes are the vault's own note titles embedded as queries (at most ``PROBES``, a sample
fixed by a hash of each path, so a new note rarely changes it), a note's own title excluded; a
note's score for a probe is its best row (note vector or chunk), as search scores it. The values
live in one small file beside the vector table (``hub-<table>.npz``), rebuilt by a vector sync
when none matches the table or once ``RECOMPUTE_SHARE`` of the rows were written since; a note
embedded in between is not corrected until then (its value is missing, read as the mean).

Chosen by 5-fold cross-validation over SciFact, JSQuAD, LoCoMo and the natural questions (every
fold chose it; ``benchmarks/cross_validate.py --grid hubness``, README).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .embed import Embedder
from .store import Store
from .vector_stamp import hub_built, hub_built_key, hub_stamp
from .vector_stamp import hub_file as file_for  # noqa: F401 - where a table's file lives, one name for it

WEIGHT = 0.35  # cosine per unit of hubness above the vault's mean; 0 turns the correction off
NEIGHBOURS = 10  # a note's hubness: the mean of its this-many best probe scores
PROBES = 2000  # probe questions at most (the cost is probes x rows x dim, once per rebuild)
# ... and fewer on a big table, so a rebuild costs about the same at any size: probes x rows stays
# under this (obsidian-hub, 14.8k rows: 2,000 probes; 100k rows: 600; the 400k rows of a
# 100k-note vault: 256). Cross-validated with 2,000 on tables up to 15k rows; fewer is untested.
PROBE_ROW_BUDGET = 60_000_000
MIN_PROBES = 256
RECOMPUTE_SHARE = 0.2  # rebuild once this share of the table's rows were written since the last build
PROBE_BATCH_BYTES = 16 << 20  # one batch of probes' per-note scores stays under this
SCORE_BATCH_BYTES = 8 << 20  # and their scores against one slice of rows under this
# rows read at a time while the hubness is rebuilt: LanceDB's native buffers grow with the page
# (a 30k-note rebuild's peak over the process: +120 MB at 512 rows, +160 at 2,048, +300 at 8,192,
# +780 at 32,768; 3.1 / 1.8 / 1.5 / 1.6 s)
BATCH_ROWS = 2048
# From this many rows the computation runs in a child process (``python -m memory_hub.index.hubness``):
# at 100k notes (417k rows) it raised a serving process's peak by ~114 MB and left ~80 MB held after
# (LanceDB's and glibc's buffers), on top of ~630 MB with e5 loaded against a 700 MB budget. The
# parent still embeds the probes (it has the model); the child reads the table, computes, writes
# the file and exits, so its memory goes with it. Below this, the ~1 s start of a child costs more
# than the memory it saves.
CHILD_FROM_ROWS = 100_000


@dataclass(frozen=True)
class Hubness:
    """Each note's hubness above the mean (``{path: value}``), and what it was computed from."""

    values: dict[str, float]
    rows: int
    embedder: str
    probes: int


def probe_count(rows: int) -> int:
    """How many probes a rebuild over ``rows`` rows uses (``PROBE_ROW_BUDGET``)."""
    return max(MIN_PROBES, min(PROBES, PROBE_ROW_BUDGET // max(rows, 1)))


def probe_sample(titles: Sequence[tuple[str, str]], limit: int = PROBES) -> list[tuple[str, str]]:
    """The ``limit`` (path, title) pairs whose path hashes lowest: a sample that a new or deleted
    note changes only when it is itself in it."""
    def key(pair: tuple[str, str]) -> str:
        return hashlib.sha1(pair[0].encode("utf-8")).hexdigest()

    return sorted((p for p in titles if p[1].strip()), key=key)[:limit]


def compute(batches: Callable[[], Iterable[tuple[list[str], np.ndarray]]], probes: np.ndarray,
            probe_paths: Sequence[str], neighbours: int = NEIGHBOURS) -> dict[str, float]:
    """``{path: hubness - mean}`` from the table's rows.

    ``batches()`` yields (paths, unit vectors) of the rows, every row once per call; it is called
    once per batch of probes, so memory stays at one batch of probes' scores per note. A first
    pass numbers the notes (reading the path column alone instead held 417k strings and LanceDB's
    whole-column read at once: +120 MB at 100k notes for 1 s saved)."""
    if not len(probes):
        return {}
    notes: dict[str, int] = {}
    for paths, _ in batches():
        for p in paths:
            notes.setdefault(p, len(notes))
    if not notes:
        return {}
    own = np.asarray([notes.get(p, -1) for p in probe_paths], dtype=np.int64)
    k = max(1, min(neighbours, len(probes) - 1 if len(probes) > 1 else 1))
    step = max(1, min(len(probes), PROBE_BATCH_BYTES // (4 * len(notes))))
    best_k = np.full((0, len(notes)), -np.inf, dtype=np.float32)
    for lo in range(0, len(probes), step):
        block = np.asarray(probes[lo:lo + step], dtype=np.float32)
        per_note = np.full((len(block), len(notes)), -np.inf, dtype=np.float32)
        rows_at_once = max(1, SCORE_BATCH_BYTES // (4 * len(block)))
        for paths, vectors in batches():
            for at in range(0, len(paths), rows_at_once):
                part = paths[at:at + rows_at_once]
                owner = np.fromiter((notes[p] for p in part), dtype=np.int64, count=len(part))
                order = np.argsort(owner, kind="stable")
                grouped = owner[order]
                # probes x rows, the rows grouped by note: one reduceat gives each note's best row
                scores = block @ np.asarray(vectors[at:at + rows_at_once], dtype=np.float32)[order].T
                starts = np.r_[0, np.nonzero(np.diff(grouped))[0] + 1]
                maxima = np.maximum.reduceat(scores, starts, axis=1)
                cols = grouped[starts]
                per_note[:, cols] = np.maximum(per_note[:, cols], maxima)
        mine = own[lo:lo + step]
        hit = mine >= 0
        per_note[np.nonzero(hit)[0], mine[hit]] = -np.inf  # a note's own title is not a probe of it
        if len(per_note) > k:  # this batch's k best first, then merged with the running k best
            per_note.partition(len(per_note) - k, axis=0)
            per_note = per_note[len(per_note) - k:]
        both = np.concatenate([best_k, per_note], axis=0)
        if len(both) > k:
            both = np.partition(both, len(both) - k, axis=0)[len(both) - k:]
        best_k = both
    seen = np.isfinite(best_k)
    counts = seen.sum(axis=0)
    ok = counts > 0  # a note scored by no probe (its own title was the only one) has no value
    hub = np.where(seen, best_k, 0.0).sum(axis=0) / np.maximum(counts, 1)
    if not ok.any():
        return {}
    centre = float(hub[ok].mean())
    paths = list(notes)
    return {paths[i]: float(hub[i] - centre) for i in np.nonzero(ok)[0]}


def save(path: Path, hub: Hubness, probe_pairs: Sequence[tuple[str, str]], probe_vectors: np.ndarray) -> None:
    """Write atomically (a reader sees the old file or the new one, never half of one)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.npz")
    np.savez(tmp, paths=_pack(hub.values), values=np.asarray(list(hub.values.values()), dtype=np.float32),
             rows=np.int64(hub.rows), embedder=_pack([hub.embedder]), probes=np.int64(hub.probes),
             probe_paths=_pack(p for p, _ in probe_pairs), probe_titles=_pack(t for _, t in probe_pairs),
             probe_vectors=np.asarray(probe_vectors, dtype=np.float32))
    os.replace(tmp, path)


def _pack(texts: Iterable[str]) -> np.ndarray:
    """Strings as one NUL-separated UTF-8 byte array (no pickle in the file; a path never holds NUL)."""
    return np.frombuffer("\0".join(t.replace("\0", "") for t in texts).encode("utf-8"), dtype=np.uint8)


def _unpack(data: np.ndarray, count: int) -> list[str]:
    if count == 0:
        return []
    return bytes(data).decode("utf-8").split("\0")


def load(path: Path, with_probes: bool = True) -> tuple[Hubness, dict[tuple[str, str], np.ndarray]] | None:
    """The stored values and the probe vectors by (path, title) (reused by the next rebuild; {}
    when not ``with_probes``: search needs only the values), or None when there is no readable file."""
    try:
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as data:  # closed even when not a zip
            values = data["values"].tolist()
            hub = Hubness(dict(zip(_unpack(data["paths"], len(values)), values, strict=True)),
                          int(data["rows"]), _unpack(data["embedder"], 1)[0], int(data["probes"]))
            probes = {}
            if with_probes:
                vectors = data["probe_vectors"]
                probes = {(p, t): v for p, t, v in zip(_unpack(data["probe_paths"], len(vectors)),
                                                       _unpack(data["probe_titles"], len(vectors)), vectors,
                                                       strict=True)}
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError, zipfile.BadZipFile):
        return None
    return hub, probes


def changed_key(name: str) -> str:
    """The meta key counting the rows written to table ``name`` since its last rebuild."""
    return f"vectors_hub_changed:{name}"


def maintain(store: Store, folder: Path, name: str, key: str, embedder: Embedder, written: int,
             open_table: Callable[[], Any]) -> dict[str, Any] | None:
    """Rebuild table ``name``'s hubness when no file matches it (another embedder ``key``, or none)
    or once ``RECOMPUTE_SHARE`` of its rows were written since the last build; else only count
    this sync's ``written`` rows. Returns what a rebuild did (for the sync's report), None when
    none ran. Raises what the rebuild raised (the caller reports it; the count is then kept, so
    the next sync tries again)."""
    meta = changed_key(name)
    try:
        pending = int(store.get_meta(meta) or 0) + written
    except ValueError:
        pending = written
    built = hub_built(store, name)  # what the last rebuild wrote: the file need not be read
    current = built is not None and built.get("embedder") == key
    if current and (not pending or pending < RECOMPUTE_SHARE * max(int(built.get("rows") or 0), 1)):
        if written:
            with store.transaction() as conn:
                store.set_meta(conn, meta, str(pending))
        return None
    table = open_table()
    if table is None:
        return None
    t0 = time.monotonic()
    done = rebuild(store, table, folder, name, key, embedder)
    with store.transaction() as conn:
        store.set_meta(conn, meta, "0")
        record = {"embedder": key, "rows": done["rows"], "notes": done["notes"], "stamp": hub_stamp(folder, name)}
        store.set_meta(conn, hub_built_key(name), json.dumps(record))
    return {"notes": done["notes"], "probes": done["probes"], "probes_embedded": done["probes_embedded"],
            **({"child_process": True} if done["child"] else {}),
            "seconds": round(time.monotonic() - t0, 2)}


def rebuild(store: Store, table: Any, folder: Path, name: str, key: str, embedder: Embedder) -> dict[str, int]:
    """Compute every note's hubness over ``table`` (a LanceDB table of ``path``/``vector`` rows)
    against the vault's title probes and write the file. The probes' vectors stored by the last
    build are reused when the embedder is the same; only new titles are embedded."""
    rows = table.count_rows()
    path = file_for(folder, name)
    loaded = load(path)
    pairs = probe_sample(
        [(p, t or "") for p, t in store.conn.execute("SELECT path, title FROM notes WHERE ranked = 1")],
        probe_count(rows))
    known = loaded[1] if loaded is not None and loaded[0].embedder == key else {}
    missing = [pair for pair in pairs if pair not in known]
    fresh = iter(embedder.embed_queries([t for _, t in missing]) if missing else ())
    dim = int(embedder.dim)
    probes = np.asarray([known[pair] if pair in known else next(fresh) for pair in pairs],
                        dtype=np.float32).reshape(-1, dim)
    del loaded, known  # the old values and probes are not needed while the new ones are computed
    if rows >= CHILD_FROM_ROWS:
        notes = _rebuild_in_child(folder, name, key, rows, pairs, probes)
    else:
        values = compute(_pages(table, rows, dim), probes, [p for p, _ in pairs])
        save(path, Hubness(values, rows, key, len(pairs)), pairs, probes)
        notes = len(values)
    return {"rows": rows, "notes": notes, "probes": len(pairs), "probes_embedded": len(missing),
            "child": rows >= CHILD_FROM_ROWS}


def _pages(table: Any, rows: int, dim: int) -> Callable[[], Iterator[tuple[list[str], np.ndarray]]]:
    """``compute``'s ``batches``: the table's (paths, vectors) in pages by offset (the sync holds
    the write lock: the table cannot change between them); a streamed reader of the whole scan held
    every row at once (+380 MB at 115k rows)."""
    def batches() -> Iterator[tuple[list[str], np.ndarray]]:
        for lo in range(0, rows, BATCH_ROWS):
            page = table.search().select(["path", "vector"]).offset(lo).limit(BATCH_ROWS).to_arrow()
            if page.num_rows:
                yield (page.column("path").to_pylist(),
                       page.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim))
    return batches


def _rebuild_in_child(folder: Path, name: str, key: str, rows: int, pairs: Sequence[tuple[str, str]],
                      probes: np.ndarray) -> int:
    """Run ``compute`` and ``save`` in a child process over the table in ``folder`` and return how
    many notes got a value. The probes go to it in a file beside the table (removed after).
    Raises RuntimeError with the child's last words when it fails."""
    import subprocess
    import sys

    spec = file_for(folder, name).with_name(f"hub-{name}.{os.getpid()}.probes.npz")
    meta = json.dumps({"folder": str(folder), "name": name, "key": key, "rows": rows})
    np.savez(spec, meta=_pack([meta]), probe_paths=_pack(p for p, _ in pairs),
             probe_titles=_pack(t for _, t in pairs), probe_vectors=np.asarray(probes, dtype=np.float32))
    try:
        done = subprocess.run([sys.executable, "-m", "memory_hub.index.hubness", str(spec)],
                              capture_output=True, text=True, check=False)
    finally:
        spec.unlink(missing_ok=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RuntimeError(f"hubness rebuild in a child process failed: {last}")
    return int(json.loads(done.stdout.strip().splitlines()[-1])["notes"])


def _child(spec: Path) -> int:
    """The child's side of ``_rebuild_in_child``: read the probes, open the table, compute, save."""
    from .vectors import import_lancedb

    with np.load(spec, allow_pickle=False) as data:
        meta = json.loads(_unpack(data["meta"], 1)[0])
        vectors = np.asarray(data["probe_vectors"], dtype=np.float32)
        pairs = list(zip(_unpack(data["probe_paths"], len(vectors)), _unpack(data["probe_titles"], len(vectors)),
                         strict=True))
    folder, name = Path(meta["folder"]), meta["name"]
    table = import_lancedb().connect(str(folder)).open_table(name)
    dim = int(vectors.shape[1]) if vectors.ndim == 2 else 0
    values = compute(_pages(table, int(meta["rows"]), dim), vectors, [p for p, _ in pairs])
    save(file_for(folder, name), Hubness(values, int(meta["rows"]), meta["key"], len(pairs)), pairs, vectors)
    print(json.dumps({"notes": len(values)}))
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(_child(Path(sys.argv[1])))
