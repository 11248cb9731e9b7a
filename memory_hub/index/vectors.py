"""The semantic index: passage vectors in LanceDB under ``<vault>/.memory_hub/lancedb/``.

Each note is embedded as one note-level passage — the whole note when it fits the model's window,
else its title, description and opening — plus, for a note too long for one window, chunks of it
(``chunks.note_passages``; sentence windows of short notes are built but off). A note scores by
its note-level vector or its best chunk
(``search_notes``), so a short note is never outvoted by a long one for having many pieces.

One table per embedder identity and layout (``vectors2_<hash of identity key>``) and every row
records that key, so vectors from two embedders are never mixed: switching embedder means
re-embedding into a new table (the old ones are dropped by the next sync). A passage's id derives
from its path, span, content hash and the embedder key, so a sync re-embeds only passages that
changed, reuses the rest, and sweeps the vectors of deleted notes. A table of the previous layout
(``chunks_<hash>``, chunks only) is migrated by the next sync: its vectors are reused where a
passage's id is unchanged, the rest is embedded, and the old table is dropped once every note is
done — the report says so (``VectorReport.migrated``).

Embedding is the slow step (seconds per hundred chunks), so a sync works in groups of notes: each
group is embedded in length-sorted batches and committed whole. Ctrl-C keeps every committed group;
the next sync carries on. Freshness is checked against the SQLite index (``notes.hash``), which
``index.sync`` keeps equal to the files.

Search, below ``ANN_FROM`` rows, loads the vectors into one numpy matrix (≈1.5 KB a passage) and
ranks by dot product: exact, and a few milliseconds for tens of thousands of passages. The matrix is
reloaded when a sync bumps the version recorded in the SQLite meta table. From ``ANN_FROM`` rows on
the table carries its own ANN index (IVF, built by the sync that crosses the size; new rows are
searched flat beside it until there are ``ANN_FLAT_ROWS`` of them, then the files are merged and the
index trained again: ``ANN upkeep`` below, which a server runs on a thread of its own) and search asks LanceDB for the nearest rows, with
the scope filters inside that query (a prefilter) and an exact refine step; the serving process then
holds no matrix. Both paths score a note the same way: its note-level vector or its best chunk, less
``hubness.WEIGHT`` times how near the note comes to every question (``hubness.py``: a file beside
the table that a vector sync rebuilds). ``benchmarks/bench_ann.py`` measures ANN against exact.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..locks import file_lock
from ..progress import Progress
from ..vault.safe_io import replace_file
from . import blas, cache, hubness, lexical
from .cache import NOTES_CHANGED
from .chunks import Chunk, note_passages
from .embed import Embedder
from .lexical import Filters
from .store import Store
from .vector_stamp import (
    META_CURRENT,
    META_VERSION,
    PASSAGES_VERSION,
    ann_mark_file,
    current_embedder,
    holding_mark,
    hub_stamp,
    hub_state,
    lancedb_dir,
    table_names,
    table_stamp,
)

TABLE_PREFIX = "vectors2_"
LEGACY_PREFIXES = ("chunks_",)  # layout 1: chunk vectors only
# Part of every note's freshness key: bump it when the passages a note is embedded as change, so
# the next sync re-embeds what changed (ids of unchanged passages still match: their vectors stay).
GROUP_CHUNKS = 512  # chunks per committed group: what Ctrl-C can lose at most (~10 s of embedding)
# chunks per embedder call (length-sorted), also the progress step; big enough that the embedder's
# workers rarely wait for each other at the end of a call
BATCH = 64
# META_CURRENT (vector_stamp.py): what the last complete vector sync saw, the notes' change stamp,
# the embedder and the table's version folder. While all three still hold, nothing is due and a
# sync need not open LanceDB, scan its rows or load a model (a no-change `memory-hub sync` spent
# 0.7-0.9 s doing that); ``vector_stamp`` reads it without importing numpy or LanceDB.
# A chunk speaks for its note only when it beats the note-level vector by more than this much
# cosine (chosen by cross-validation, benchmarks/cross_validate.py).
CHUNK_OFFSET = 0.0
# A long note's best chunk is the best of n draws, and the expected best of n draws from one
# distribution sits about sqrt(2 ln n) of its standard deviations above the mean: a reference page
# of 150 chunks (every command of the CLI, every translator in the credits) scores near the top for
# any question by chance. Each chunk's cosine is lowered by this much per unit of sqrt(2 ln n), n
# its note's chunk count (a note of one window has no chunks and is never lowered); e5's cosines
# over a vault spread by ~0.018 per query (median over the natural questions).
CHUNK_DRAWS_PENALTY = 0.0
# From this many rows on, search goes through the table's ANN index instead of a matrix in memory
# (300k rows would be ~450 MB of float32; the serving budget is 700 MB with the model).
ANN_FROM = 100_000
ANN_INDEX = "IvfSq"  # 8-bit codes (4x smaller than the vectors) + exact refine: bench_ann.py
ANN_ROWS_PER_PARTITION = 1024  # IVF partitions: rows / this (√rows-ish at 100k–1M rows)
# partitions searched per query. e5 vectors cluster poorly (they share one strong direction): on
# SciFact (real e5, note-level layout, 14 partitions) 7/14 probed gave recall@100 0.95, 10/14 gave
# 0.98 with hybrid nDCG@10 -0.0014 (benchmarks/bench_ann.py; the chunk-only layout, 18 partitions:
# 8/18 0.92, 14/18 0.99). So three quarters: the gain is memory, not speed. At the sizes the ANN
# path serves, fewer would do: on a 30k-note vault's product-built index (real e5, 110,789 rows, 108
# partitions, 845 queries) 11/108 already gave 0.9995, as did 81/108 — but the query cost the same
# (LanceDB's fixed work per query, not the codes scanned: benchmarks/ann_shares.py), so it stays.
ANN_PROBE_SHARE = 0.75
ANN_MIN_PROBES = 8
# candidates re-scored with their full vectors: limit × this. Each factor reads limit more full
# vectors by row id: on the 100k stand-in table (403k rows, limit 300 as the vector channel asks)
# x4 / x2 / x1 cost 26.3 / 21.6 / 19.6 ms wall a query at 295/393 probes, all with recall@100 1.0
# against exact; on SciFact with e5 forced onto the ANN path (10/14 probes) x1 and x2 hand fusion
# the same notes (note recall@100 0.986 both) and give the same hybrid nDCG@10 (0.7314; exact
# 0.7310), and the channel's 300-row query holds 0.9916 of the exact top-100 rows either way. Only
# a bare 100-row query differs (0.9915 -> 0.9771), which the channel never sends: it fetches
# ANN_ROWS_PER_NOTE rows per note wanted. (bench_ann.py --refines 1,2; README, Scale, eleventh round.)
ANN_REFINE = 1
ANN_ROWS_PER_NOTE = 3  # rows fetched per note wanted (a long note's chunks compete with its note vector)
ANN_IN_MAX = 20_000  # a scope of more notes than this is not sent as a path list: rows are over-fetched
# Each committed group of a sync is a data file of its own (~512 rows): a cold 30k-note build left
# 181. The ANN path's refine reads limit × ANN_REFINE full vectors by row id, one read per file it
# touches, so a fragmented table made a warm query's vector channel ~2.5× slower (37 → 15-25 ms at
# 30k). Past this many files the sync compacts the table (``optimize``) and trains the index again.
ANN_MAX_FRAGMENTS = 16
# New rows stay outside the ANN index (LanceDB scans them flat beside it, exactly) until there are
# more than this, or more than ANN_MAX_FRAGMENTS files; then the index is trained again over all of
# them (``_maintain_ann``). Doing that on every sync cost ~6 s per watcher edit at 100k notes, where
# 58 rows in 16 small files cost a query +1.7 / +0.6 ms and 2,058 rows +3.4 / +1.5 (README, Scale).
ANN_FLAT_ROWS = 2000
# An index trained by this code says so in a file beside the table (``ann-<table>.json``: the
# version of the upkeep and the index's uuid), so a rebuilt SQLite index does not retrain it. An
# index without the mark, or with another uuid, may have been rewritten by something else: "2"
# marked indexes that the version prune (``optimize``) could remap afterwards, which left them
# scanning every partition too; the next sync trains such an index again, once.
ANN_TRAINED = "3"
# Training an IVF index over a table whose files carry deleted rows (every edited note leaves some)
# took 8x as long as clearing them and then training: 54.1 s against 6.8 s over 150k synthetic rows
# (LanceDB 0.41, benchmarks/ann_upkeep_cost.py), likely the 112 s measured on the real 100k table
# (14.8 s there now). So the upkeep first rewrites the files that hold deleted rows
# (``materialize_deletions_threshold`` 0), into files of at most this many rows: a later upkeep
# rewrites the files an edit touched and merges the small ones, not the whole table.
ANN_FILE_ROWS = 131_072
# Every write is a new LanceDB version, and a version keeps the files it needs; nothing removes
# them unless asked (``optimize`` keeps 7 days of versions). At 100k notes the table grew 1,881 →
# 2,481 MB over ~10 watcher edits. So a sync that has written this many versions since the last
# prune removes the versions older than ``PRUNE_GRACE`` (the latest one is always kept). A reader
# in another process holds the version it opened only until the next bump it sees (``_bump``), so
# an hour's grace never pulls files from under a query.
PRUNE_EVERY_VERSIONS = 20
PRUNE_GRACE_SECONDS = 3600.0


def _tree_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (0 when it is not there)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


# ``import lancedb`` itself waits while another thread runs the module's ``__init__``; returning
# ``sys.modules["lancedb"]`` did not, and handed a half-imported module to the second caller.
_IMPORT_LOCK = threading.Lock()


def import_lancedb() -> Any:
    """``import lancedb``, minus the ~1.5-2 s of CPU it spends building the REST client of the Lance
    Namespace spec (``lance_namespace_urllib3_client``: 366 pydantic-validated API methods), which a
    local table never calls.

    The client package is registered as a shell first: its submodules (the models lancedb's
    namespace code imports) load as usual, and its own ``__init__`` (the API classes) runs only if
    something asks the package for an attribute. Measured with ``python -X importtime``: the API
    classes were half of lancedb's import; every process that opens the vector table paid it
    (``status``, ``vectors --coverage``, a sync with one edited note, an in-process search)."""
    with _IMPORT_LOCK:  # two threads (a server's first search and its warm-up) must not both install the shell
        return _import_lancedb()


LOG_ENV = "LANCEDB_LOG"  # LanceDB's Rust logger reads it once, when the module is first imported


def _import_lancedb() -> Any:
    # Folding new rows into the ANN index at 100k notes wrote ~40 "partition N is empty, skipping"
    # WARN lines to stderr per edit (a running server's stderr is its MCP client's log). Only
    # errors by default; a LANCEDB_LOG the user set (e.g. "debug") is left as it is.
    os.environ.setdefault(LOG_ENV, "error")
    if "lancedb" in sys.modules:
        import lancedb  # waits for an import another thread (or plain code) has under way

        return lancedb
    name = "lance_namespace_urllib3_client"
    spec = importlib.util.find_spec(name) if name not in sys.modules else None
    if spec is not None and spec.loader is not None and spec.submodule_search_locations is not None:
        shell = importlib.util.module_from_spec(spec)

        def load_rest(attr: str) -> Any:  # anything the package itself exports: run its real __init__
            if attr.startswith("__") or "__getattr__" not in shell.__dict__:
                raise AttributeError(attr)
            del shell.__dict__["__getattr__"]
            spec.loader.exec_module(shell)
            return getattr(shell, attr)

        shell.__getattr__ = load_rest  # type: ignore[attr-defined]
        sys.modules[name] = shell
    import lancedb

    return lancedb


def table_name(embedder_key: str, prefix: str = TABLE_PREFIX) -> str:
    """Table for one embedder identity; the key itself is stored in every row."""
    return prefix + hashlib.sha1(embedder_key.encode()).hexdigest()[:12]


def note_key(content_hash: str, title: str, description: str) -> str:
    """What a note's vectors were made from: its file, the title and description the index shows
    for it (both are embedded, and both can change without the file changing: a new parser, a
    description found to be boilerplate) and the passage layout."""
    digest = hashlib.sha1(f"{title}\0{description}\0{PASSAGES_VERSION}".encode()).hexdigest()[:10]
    return f"{content_hash}:{digest}"


def chunk_id(path: str, chunk: Chunk, embedder_key: str) -> str:
    """Stable id: same path, span, text and embedder → same id → no re-embedding."""
    text_hash = hashlib.sha1(chunk.text.encode("utf-8")).hexdigest()
    raw = f"{path}\0{chunk.start}\0{chunk.end}\0{text_hash}\0{embedder_key}"
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()[:24]


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class VectorSyncError(RuntimeError):
    """Something was due and nothing could be embedded: the index would silently go stale."""


def _ann_why(ann: dict[str, Any]) -> str:
    """Why the ANN index was (or is to be) trained, in words."""
    if ann.get("unmarked"):
        return "not trained by this version"
    if ann.get("retrained_for"):
        return f"{ann['retrained_for']} new rows"
    if ann.get("compacted_fragments"):
        return f"{ann['compacted_fragments']} data files"
    return "the table reached the ANN size"


def ann_summary(ann: dict[str, Any]) -> str:
    """One line for what an ANN upkeep did (``VectorReport.ann``, ``maintain_ann``)."""
    return (f"ANN index trained over {ann['rows']} rows ({_ann_why(ann)}) in {ann.get('seconds', 0.0):.1f}s"
            + (f", {ann['deleted_rows']} deleted rows cleared first" if ann.get("deleted_rows") else ""))


@dataclass
class VectorReport:
    """What a vector sync did."""

    embedder: str
    notes_due: int = 0
    notes_embedded: int = 0
    notes_deleted: int = 0
    chunks_embedded: int = 0
    chunks_reused: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    embed_seconds: float = 0.0
    interrupted: bool = False
    # set when this sync moved an index of the previous layout over: vectors carried over, and
    # whether the old table is gone (it stays until every note is done)
    migrated: dict[str, Any] | None = None
    ann: dict[str, Any] | None = None  # what this sync did to the ANN index (built, retrained, rows added)
    ann_flat_rows: int = 0  # rows outside the ANN index after this sync, searched flat (ANN_FLAT_ROWS)
    # why the ANN index is due to be trained again, when the sync left that to its caller
    # (``sync(defer_ann=True)``: a server's own thread runs ``maintain_ann``)
    ann_due: dict[str, Any] | None = None
    pruned: dict[str, Any] | None = None  # old table versions this sync removed (``_prune_versions``)
    hubness: dict[str, Any] | None = None  # the hubness values this sync rebuilt, or why it could not
    # other embedders' tables found beside this one: kept until this embedder's vectors cover every
    # note (an interrupted switch of model loses nothing), then dropped (``dropped``)
    others: dict[str, Any] | None = None

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.embed_seconds if self.embed_seconds > 0 else 0.0

    @property
    def stalled(self) -> bool:
        """Notes were due and not one got its vectors."""
        return self.notes_due > 0 and self.notes_embedded == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "embedder": self.embedder, "notes_due": self.notes_due, "notes_embedded": self.notes_embedded,
            "notes_deleted": self.notes_deleted, "chunks_embedded": self.chunks_embedded,
            "chunks_reused": self.chunks_reused, "chunks_per_second": round(self.chunks_per_second, 1),
            "failed": [{"path": p, "error": e} for p, e in self.failed], "seconds": round(self.seconds, 2),
            "interrupted": self.interrupted, **({"migrated": self.migrated} if self.migrated else {}),
            **({"ann": self.ann} if self.ann else {}),
            **({"ann_flat_rows": self.ann_flat_rows} if self.ann_flat_rows else {}),
            **({"ann_due": self.ann_due} if self.ann_due else {}), **({"pruned": self.pruned} if self.pruned else {}),
            **({"hubness": self.hubness} if self.hubness else {}),
            **({"other_embedders": self.others} if self.others else {}),
        }

    def summary(self) -> str:
        text = (f"vectors ({self.embedder}): {self.notes_embedded}/{self.notes_due} due notes embedded, "
                f"{self.chunks_embedded} chunks embedded ({self.chunks_per_second:.1f}/s), "
                f"{self.chunks_reused} reused, {self.notes_deleted} notes swept in {self.seconds:.1f}s")
        if self.failed:
            text += f", {len(self.failed)} failed"
        if self.interrupted:
            text += " (interrupted)"
        if self.hubness and "error" in self.hubness:
            text += f"; hubness not rebuilt ({self.hubness['error']}): the vector channel ranks by plain cosine"
        elif self.hubness:
            text += (f"; hubness of {self.hubness['notes']} notes rebuilt against {self.hubness['probes']} "
                     f"title probes in {self.hubness['seconds']:.1f}s")
        if self.ann:
            text += "; " + ann_summary(self.ann)
        elif self.ann_flat_rows:
            text += f"; {self.ann_flat_rows} new rows searched flat beside the ANN index"
        if self.ann_due:
            text += f"; ANN index due to be trained again ({_ann_why(self.ann_due)}): left to a background thread"
        if self.others:
            n = len(self.others["tables"])
            what = f"{n} table{'s' if n > 1 else ''} of another embedder"
            text += (f"; {what} dropped now that this one's vectors are complete" if self.others["dropped"] else
                     f"; {what} kept until this one's vectors are complete")
        if self.migrated:
            text += (f"; upgraded the vector index to note-level vectors: {self.migrated['reused']} vectors carried "
                     f"over, the rest embedded anew" + ("" if self.migrated["done"] else
                                                       " (not finished: the next sync continues)"))
        return text


@dataclass
class Coverage:
    """How many notes should have fresh vectors, and how many do."""

    embedder: str
    expected: int
    fresh: int
    stale: list[str]
    missing: list[str]
    orphaned: list[str]  # vectors for notes no longer in the index
    hubness: dict[str, Any] = field(default_factory=dict)  # ``vector_stamp.hub_state``

    @property
    def ok(self) -> bool:
        return self.fresh == self.expected and not self.orphaned

    def as_dict(self) -> dict[str, Any]:
        return {"embedder": self.embedder, "expected": self.expected, "fresh": self.fresh, "ok": self.ok,
                "stale": self.stale, "missing": self.missing, "orphaned": self.orphaned, "hubness": self.hubness}

    def summary(self) -> str:
        text = f"vectors ({self.embedder}): {self.fresh}/{self.expected} notes fresh"
        if self.stale:
            text += f", {len(self.stale)} stale"
        if self.missing:
            text += f", {len(self.missing)} missing"
        if self.orphaned:
            text += f", {len(self.orphaned)} orphaned"
        if self.hubness.get("built"):
            text += f"; hubness of {self.hubness['notes']} notes"
        elif self.hubness and self.fresh and hubness.WEIGHT > 0:
            text += "; hubness not built: the vector channel ranks by plain cosine until the next vector sync"
        return text


@dataclass(frozen=True)
class ChunkHit:
    path: str
    start: int
    end: int
    heading: str
    score: float


class _Matrix:
    """All vectors of one table in memory, for exact search. ``owner[i]`` numbers row i's note
    (an index into ``notes``); ``is_note[i]`` marks note-level rows."""

    def __init__(self, paths: list[str], starts: np.ndarray, ends: np.ndarray, headings: list[str],
                 levels: list[str], vectors: np.ndarray, version: str) -> None:
        self.paths = paths
        self.starts = starts
        self.ends = ends
        self.headings = headings
        self.vectors = vectors
        self.version = version
        self.notes: list[str] = list(dict.fromkeys(paths))
        index = {p: n for n, p in enumerate(self.notes)}
        self.owner = np.fromiter((index[p] for p in paths), dtype=np.int64, count=len(paths))
        self.is_note = np.fromiter((lv == "note" for lv in levels), dtype=bool, count=len(levels))
        # Rows grouped by note (their table order kept within a note), and where each note's group
        # starts: a note's best row is then one ``reduceat`` per query, not a scatter over all rows.
        self.grouped = np.argsort(self.owner, kind="stable")
        self.group_owner = self.owner[self.grouped]
        self.group_starts = np.r_[0, np.nonzero(np.diff(self.group_owner))[0] + 1] if len(paths) \
            else np.zeros(0, dtype=np.int64)
        self.positions = np.arange(len(paths), dtype=np.int64)

    @functools.cached_property
    def draws(self) -> np.ndarray:
        """Per row, sqrt(2 ln n) for its note's n chunks (0 for a note of one window), for
        ``CHUNK_DRAWS_PENALTY``: computed on first use, so a matrix loaded with the penalty off
        (the default) never holds it."""
        chunks = np.bincount(self.owner[~self.is_note], minlength=len(self.notes))
        return np.sqrt(2.0 * np.log(np.maximum(chunks, 1)))[self.owner].astype(np.float32)


class VectorIndex:
    """The chunk vectors of one vault for one embedder."""

    def __init__(self, vault: Path, embedder: Embedder, fingerprint: str | None = None) -> None:
        self.vault = Path(vault)
        self.embedder = embedder
        self.fingerprint = fingerprint  # loader.embedder_fingerprint of the spec that loaded ``embedder``
        self.key = embedder.identity.key
        self.dir = lancedb_dir(self.vault)
        self.name = table_name(self.key)
        self._db: Any = None
        self._matrix: _Matrix | None = None
        self._covered: tuple[tuple[str | None, str | None], int, int] | None = None
        self._lock = threading.Lock()
        self._legacy: Any = None  # a previous layout's table while a sync migrates it
        env = os.environ.get("MEMORY_HUB_ANN_FROM", "").strip()
        self.ann_from = int(env) if env.isdigit() else ANN_FROM  # rows from which search uses the ANN index
        self.ann_probes: int | None = None  # partitions per query; None: ANN_PROBE_SHARE of them
        # (version, rows, has ANN index, partitions, the table as search last opened it)
        self._shape: tuple[str, int, bool, int, Any] | None = None
        self._draws: tuple[str, dict[str, float]] | None = None  # (version, ANN path's sqrt(2 ln n) per note)
        # (hubness file's stamp, {path: hubness above the mean}) and, for the matrix, the same per note
        self._hub: tuple[Any, dict[str, float]] | None = None
        self._hub_notes: tuple[Any, str, np.ndarray] | None = None

    # -- storage -----------------------------------------------------------------------------------

    def _connect(self) -> Any:
        if self._db is None:
            lancedb = import_lancedb()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.dir))
        return self._db

    def _schema(self) -> Any:
        import pyarrow as pa

        return pa.schema([
            pa.field("id", pa.string()), pa.field("path", pa.string()), pa.field("note_hash", pa.string()),
            pa.field("ordinal", pa.int32()), pa.field("start", pa.int32()), pa.field("end", pa.int32()),
            pa.field("heading", pa.string()), pa.field("text", pa.string()), pa.field("embedder", pa.string()),
            pa.field("level", pa.string()), pa.field("vector", pa.list_(pa.float32(), int(self.embedder.dim))),
        ])

    def _table_names(self) -> list[str]:
        db = self._connect()
        names = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
        names = getattr(names, "tables", names)
        return [str(n) for n in names]

    def _table(self, create: bool = False) -> Any:
        db = self._connect()
        if self.name in self._table_names():
            return db.open_table(self.name)
        if not create:
            return None
        return db.create_table(self.name, schema=self._schema())

    def _read(self, table: Any, columns: list[str], where: str | None = None) -> Any:
        query = table.search()
        if where:
            query = query.where(where)
        return query.select(columns).limit(None).to_arrow()

    @contextlib.contextmanager
    def _write_lock(self) -> Iterator[None]:
        """One vector writer per vault at a time (separate from the SQLite lock: embedding is slow)."""
        with file_lock(self.dir / "write.lock"):
            yield

    # -- sync --------------------------------------------------------------------------------------

    def _state(self, table: Any, paths: list[str] | None = None) -> dict[str, set[str]]:
        """{path: {note hashes its rows were made from}} (of ``paths`` only, when given)."""
        if table is None or paths == []:
            return {}
        where = None
        if paths is not None:
            where = "path IN (" + ", ".join(_quote(p) for p in paths) + ")"
        data = self._read(table, ["path", "note_hash"], where)
        if data.num_rows:  # one (path, hash) pair per note, not per row, reaches Python
            data = data.group_by(["path", "note_hash"]).aggregate([])
        state: dict[str, set[str]] = {}
        for path, digest in zip(data.column("path").to_pylist(), data.column("note_hash").to_pylist(), strict=True):
            state.setdefault(path, set()).add(digest)
        return state

    @staticmethod
    def _expected(store: Store, paths: list[str] | None = None) -> dict[str, tuple[int, str]]:
        """Notes that should have vectors: {path: (note id, note_key)} — the lexically ranked notes
        (among ``paths``, when given)."""
        cur = store.conn.cursor()
        cur.row_factory = None  # plain tuples: this runs over every note on every vector sync
        sql = "SELECT id, path, hash, title, description FROM notes WHERE ranked = 1"
        if paths is None:
            rows = cur.execute(sql).fetchall()
        else:
            rows = cur.execute(sql + " AND path IN (SELECT value FROM json_each(?))", (json.dumps(paths),)).fetchall()
        return {path: (note_id, note_key(digest, title, description)) for note_id, path, digest, title, description
                in rows}

    def coverage(self, store: Store) -> Coverage:
        """Compare what the SQLite index says each note is with what has vectors."""
        expected = self._expected(store)
        state = self._state(self._table())
        stale = sorted(p for p, (_, h) in expected.items() if p in state and state[p] != {h})
        missing = sorted(p for p in expected if p not in state)
        orphaned = sorted(p for p in state if p not in expected)
        fresh = len(expected) - len(stale) - len(missing)
        return Coverage(self.key, len(expected), fresh, stale, missing, orphaned, hub_state(store, self.name))

    def chunks_for(self, store: Store, note_id: int) -> list[Chunk]:
        """The passages a note is embedded as (``chunks.note_passages``)."""
        row = store.conn.execute(
            "SELECT n.title, n.description, f.body FROM notes n JOIN fts_trigram f ON f.rowid = n.id WHERE n.id = ?",
            (note_id,),
        ).fetchone()
        if row is None:
            return []
        return note_passages(row["title"], row["body"] or "", self.embedder.count_tokens, self.embedder.max_tokens,
                             description=row["description"] or "")

    def sync(self, store: Store, progress: bool | None = None, changes: Any = None,
             defer_ann: bool = False) -> VectorReport:
        """Embed the notes whose vectors are missing or stale, sweep the rest. Ctrl-C keeps finished groups.

        ``defer_ann``: an ANN index due to be trained again is not trained here but reported
        (``report.ann_due``), for the caller to run ``maintain_ann`` on a thread of its own: at 100k
        notes the upkeep takes seconds, and a server's watcher must not wait for it.

        ``changes``: the ``SyncReport`` of the lexical sync just run. When the vectors were current
        right before it (``_only_paths``), only its notes are compared, not every note of the vault
        (a watcher's edit at 100k notes diffed 100k keys against the table's every row)."""
        started = time.monotonic()
        report = VectorReport(self.key)
        with self._write_lock():
            paths = self._only_paths(store, changes)
            notes_stamp = changes.notes_after if paths is not None else store.get_meta(NOTES_CHANGED, "")
            # a note whose lexical rows a bulk sync holds staged has no text to embed yet
            # (``chunks_for`` reads the FTS rows), whether they were staged before or during this run
            staged = lexical.has_pending(store.conn)
            try:
                self._sync_locked(store, report, progress, paths)
            except KeyboardInterrupt:
                report.interrupted = True
            finally:
                report.seconds = time.monotonic() - started
                self._bump(store)
            if not report.interrupted and not report.failed:
                self._maintain_ann(store, report, defer=defer_ann)
                self._maintain_hubness(store, report)
                self._prune_versions(store, report)
                # else the next sync compares all (and a failed hubness rebuild is tried again)
                hub_failed = report.hubness is not None and "error" in report.hubness
                complete = not (staged or lexical.has_pending(store.conn))
                if complete:
                    self._drop_others(report)
                if complete and not hub_failed:
                    self._mark_current(store, notes_stamp)
        return report

    # -- the ANN index -----------------------------------------------------------------------------

    def _ann_index(self, table: Any) -> Any:
        for index in table.list_indices():
            if list(getattr(index, "columns", [])) == ["vector"]:
                return index
        return None

    def _ann_mark_file(self) -> Path:
        return ann_mark_file(self.dir, self.name)

    def _ann_marked(self, index: Any) -> bool:
        """Whether this version's upkeep trained ``index`` (the mark beside the table names its uuid)."""
        try:
            mark = json.loads(self._ann_mark_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(mark, dict) and mark.get("trained") == ANN_TRAINED and \
            mark.get("index_uuid") == str(getattr(index, "index_uuid", "") or "")

    def _ann_due(self, table: Any) -> tuple[dict[str, Any] | None, int, bool]:
        """(why the ANN index must be trained now, or None; rows searched flat beside it; whether
        the table has an index yet)."""
        rows = table.count_rows()
        index = self._ann_index(table)
        if index is None:
            return ({"rows": rows} if rows >= max(self.ann_from, 1) else None), 0, False
        unindexed = int(getattr(table.index_stats(index.name), "num_unindexed_rows", 0) or 0)
        fragments = _fragments(table)
        due: dict[str, Any] = {"rows": rows}
        if not self._ann_marked(index):
            due["unmarked"] = True
        if unindexed > ANN_FLAT_ROWS:
            due["retrained_for"] = unindexed
        if fragments > ANN_MAX_FRAGMENTS + rows // ANN_FILE_ROWS:  # files of ANN_FILE_ROWS are kept
            due["compacted_fragments"] = fragments
        return (due if len(due) > 1 else None), unindexed, True

    def _maintain_ann(self, store: Store, report: VectorReport, defer: bool = False) -> None:
        """Build the ANN index once the table reaches ``ann_from`` rows; afterwards, once more than
        ``ANN_FLAT_ROWS`` rows are new or the files are too many, train it again (``_train_ann``),
        or with ``defer`` only say it is due. Rows not yet in the index are still searched (LanceDB
        scans them flat), so no answer is ever missing. The caller holds the write lock."""
        table = self._table()
        if table is None:
            return
        due, flat, indexed = self._ann_due(table)
        report.ann_flat_rows = flat
        if due is None:
            return
        if defer and indexed:
            report.ann_due = due  # the first build is never deferred: search waits for it
            return
        report.ann = self._train_ann(store, table, due)
        report.ann_flat_rows = 0

    def maintain_ann(self, store: Store) -> dict[str, Any] | None:
        """Train the ANN index again if it is due (what ``sync(defer_ann=True)`` left): the server's
        upkeep thread calls this. Takes the write lock, so a vector sync waits for it (the watcher's
        lexical syncs do not). Returns what it did (``VectorReport.ann``), or None."""
        with self._write_lock():
            table = self._table()
            if table is None:
                return None
            due = self._ann_due(table)[0]
            if due is None:
                return None
            raw, before = store.get_meta(META_CURRENT), table_stamp(self.dir, self.name)
            done = self._train_ann(store, table, due)
            # the last sync's mark held for the table as it was: the upkeep changed its files, not its
            # rows, so the mark holds for the new version too (else the next sync compares every note)
            try:
                mark = json.loads(raw) if raw else None
            except ValueError:
                mark = None
            if isinstance(mark, dict) and mark.get("lance") == before and mark.get("table") == self.name:
                mark["lance"] = table_stamp(self.dir, self.name)
                with store.transaction() as conn:
                    store.set_meta(conn, META_CURRENT, json.dumps(mark))
            return done

    def _train_ann(self, store: Store, table: Any, due: dict[str, Any]) -> dict[str, Any]:
        """Rewrite the files that hold deleted rows or are small, drop versions past the grace, then
        train the index over every row.

        Never LanceDB's own upkeep of an index (``optimize`` on an indexed table) without training
        after it: folding rows in, or remapping the index over rewritten files, leaves an index that
        no longer narrows the search to the partitions probed (a one-partition query returned every
        row, or half of them, tests/test_vectors_ann.py): at 100k notes 41 of 407 probes cost what
        407 do (26-27 ms a query against 10-11 ms freshly trained; README, Scale). The rewrite comes
        first because training over files with deleted rows took 8x as long (``ANN_FILE_ROWS``)."""
        from datetime import timedelta

        t0 = time.monotonic()
        done = dict(due, built=True)
        stats = _table_stats(table)
        deleted = int(stats.get("num_deleted_rows", 0) or 0)
        if deleted:
            done["deleted_rows"] = deleted
        folder = self.dir / f"{self.name}.lance"
        before_bytes = _tree_bytes(folder)
        table.optimize(cleanup_older_than=timedelta(seconds=PRUNE_GRACE_SECONDS),
                       compaction_options={"target_rows_per_fragment": ANN_FILE_ROWS,
                                           "materialize_deletions_threshold": 0.0})
        done["rows"] = table.count_rows()
        self.build_ann(table, done["rows"])
        index = self._ann_index(table)
        mark = {"trained": ANN_TRAINED, "index_uuid": str(getattr(index, "index_uuid", "") or "")}
        replace_file(self.vault, self._ann_mark_file().relative_to(self.vault).as_posix(),
                     json.dumps(mark).encode("utf-8"), hidden=True, create=True)
        with store.transaction() as conn:  # the upkeep pruned versions: the prune counts from here
            store.set_meta(conn, f"vectors_pruned_at:{self.name}", str(int(table.version)))
        done["freed_mb"] = round(max(0, before_bytes - _tree_bytes(folder)) / 1e6, 1)
        done["seconds"] = round(time.monotonic() - t0, 2)
        self._bump(store)  # searchers look at the table's shape again
        self._shape = None
        return done

    def _maintain_hubness(self, store: Store, report: VectorReport) -> None:
        """Rebuild the notes' hubness when it is due (``hubness.maintain``). A failure is reported,
        never raised: search then ranks by plain cosine, and ``status`` / ``vectors --coverage`` say
        the hubness is not built (``Coverage.hubness``)."""
        if hubness.WEIGHT <= 0:
            return
        written = report.chunks_embedded + report.chunks_reused + report.notes_deleted
        try:
            report.hubness = hubness.maintain(store, self.dir, self.name, self.key, self.embedder, written,
                                              self._table)
        except Exception as exc:  # noqa: BLE001 - reported in the sync's summary and --json
            report.hubness = {"error": f"{type(exc).__name__}: {exc}"}
            return
        if report.hubness is not None:
            self._hub = self._hub_notes = None

    def _hub_values(self) -> dict[str, float]:
        """``{path: hubness above the mean}`` as the last rebuild left it ({} without one), read
        again only when the file changes (one stat per query)."""
        path = hubness.file_for(self.dir, self.name)
        try:
            st = path.stat()
            stamp: Any = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        cached = self._hub
        if cached is not None and cached[0] == stamp:
            return cached[1]
        loaded = hubness.load(path, with_probes=False) if stamp is not None else None
        values = loaded[0].values if loaded is not None and loaded[0].embedder == self.key else {}
        self._hub = (stamp, values)
        return values

    def _hub_per_note(self, m: _Matrix) -> np.ndarray | None:
        """The matrix's notes' hubness in its ``notes`` order (0 for a note without one), or None."""
        values = self._hub_values()
        if not values:
            return None
        stamp = self._hub[0] if self._hub is not None else None
        cached = self._hub_notes
        if cached is not None and cached[0] == stamp and cached[1] == m.version:
            return cached[2]
        per_note = np.fromiter((values.get(p, 0.0) for p in m.notes), dtype=np.float32, count=len(m.notes))
        self._hub_notes = (stamp, m.version, per_note)
        return per_note

    def _prune_versions(self, store: Store, report: VectorReport) -> None:
        """Remove old table versions once ``PRUNE_EVERY_VERSIONS`` were written since the last prune."""
        if not (report.notes_embedded or report.notes_deleted or report.ann or report.migrated):
            return  # this sync wrote no version: nothing to count, and no table to open
        table = self._table()
        if table is None or self._ann_index(table) is not None:
            return  # an indexed table is pruned by the ANN upkeep, which trains the index after it
        key = f"vectors_pruned_at:{self.name}"
        try:
            last = int(store.get_meta(key) or 0)
        except ValueError:
            last = 0
        version = int(table.version)
        if version - last < PRUNE_EVERY_VERSIONS:
            return
        from datetime import timedelta

        folder = self.dir / f"{self.name}.lance"
        before, kept = _tree_bytes(folder), {int(v["version"]) for v in table.list_versions()}
        # optimize also merges small files (there is no ANN index to fold rows into, see _train_ann)
        table.optimize(cleanup_older_than=timedelta(seconds=PRUNE_GRACE_SECONDS))
        # versions removed (the optimize writes one of its own: a count of the list said -1 when
        # every version was younger than the grace period and none could go)
        report.pruned = {"versions": len(kept - {int(v["version"]) for v in table.list_versions()}),
                         "mb": round(max(0, before - _tree_bytes(folder)) / 1e6, 1)}
        with store.transaction() as conn:
            store.set_meta(conn, key, str(version))

    def build_ann(self, table: Any = None, rows: int | None = None) -> None:
        """(Re)train the table's ANN index (cosine; vectors are unit length, so cosine ranks as dot)."""
        table = table if table is not None else self._table()
        rows = rows if rows is not None else table.count_rows()
        parts = max(1, min(rows // ANN_ROWS_PER_PARTITION, 4096))
        import_lancedb()
        from lancedb import index as lance_index

        config = getattr(lance_index, ANN_INDEX)(distance_type="cosine", num_partitions=parts)
        table.create_index("vector", config=config, replace=True)

    def _table_shape(self, store: Store) -> tuple[int, bool, int]:
        """(rows, whether search goes through the ANN index, its partitions), cached per version."""
        return self._serving(store)[1:4]

    def _serving(self, store: Store) -> tuple[str, int, bool, int, Any]:
        """(version, rows, ANN?, partitions, the table), read and opened once per vector version (a
        sync bumps it after every committed group): opening the table lists the folder's tables and
        reads its manifest, ~10 ms a query at 30k notes; one look at the version per call."""
        version = store.get_meta(f"{META_VERSION}:{self.name}") or ""
        shape = self._shape
        if shape is not None and shape[0] == version:
            return shape
        table = self._table()
        rows, ann, parts = 0, False, 0
        if table is not None:
            rows = table.count_rows()
            index = self._ann_index(table) if rows >= max(self.ann_from, 1) else None
            if index is not None:
                ann = True
                parts = max(1, min(rows // ANN_ROWS_PER_PARTITION, 4096))
        self._shape = (version, rows, ann, parts, table)
        return self._shape

    def uses_ann(self, store: Store) -> bool:
        """Whether search goes through the ANN index (the table is large and has one)."""
        return self._table_shape(store)[1]

    def _mark_current(self, store: Store, notes_stamp: str) -> None:
        mark = {"notes": notes_stamp, "embedder": self.key, "table": self.name, "passages": PASSAGES_VERSION,
                "lance": table_stamp(self.dir, self.name), "fingerprint": self.fingerprint,
                "hub": hub_stamp(self.dir, self.name), "tables": table_names(self.dir)}
        with store.transaction() as conn:
            store.set_meta(conn, META_CURRENT, json.dumps(mark))

    def _only_paths(self, store: Store, changes: Any) -> list[str] | None:
        """The paths a vector sync after ``changes`` must look at, or None (look at every note): the
        last complete vector sync's mark says the vectors were current at ``changes.notes_before``,
        with this embedder and this table as it still is, and ``changes`` rewrote no description
        outside its own notes."""
        if changes is None or not getattr(changes, "notes_before", "") or not changes.descriptions_local:
            return None
        mark = holding_mark(store, self.fingerprint, changes.notes_before)
        if mark is None or mark.get("table") != self.name:
            return None
        return changes.paths()

    def _sync_locked(self, store: Store, report: VectorReport, progress: bool | None,
                     paths: list[str] | None = None) -> None:
        db = self._connect()
        names = self._table_names()
        legacy_names = [table_name(self.key, prefix) for prefix in LEGACY_PREFIXES]
        # other embedders' vectors are never mixed in, and never searched by this one; they are
        # dropped once this embedder's vectors are complete (``_drop_others``), not before: a
        # switch of model that is interrupted (or tried and undone) must not cost hours of embedding
        others = [name for name in names if (name.startswith(TABLE_PREFIX) and name != self.name) or (
            name.startswith(LEGACY_PREFIXES) and name not in legacy_names)]
        report.others = {"tables": others, "dropped": False} if others else None
        legacy = next((db.open_table(n) for n in legacy_names if n in names), None)
        if legacy is not None:
            report.migrated = {"from": "chunks (layout 1)", "reused": 0, "done": False}
        self._legacy = legacy
        table = self._table(create=True)
        expected = self._expected(store, paths)
        state = self._state(table, paths)
        gone = [p for p in state if p not in expected]
        if gone:
            for i in range(0, len(gone), 200):
                table.delete("path IN (" + ", ".join(_quote(p) for p in gone[i:i + 200]) + ")")
            report.notes_deleted = len(gone)
            self._bump(store)
        due = sorted(p for p, (_, h) in expected.items() if state.get(p) != {h})
        report.notes_due = len(due)
        if not due:
            self._drop_legacy(report)
            return
        # Chunk everything first (cheap), so the progress bar counts chunks and knows the total.
        planned: list[tuple[str, str, list[Chunk]]] = []
        for path in due:
            note_id, digest = expected[path]
            try:
                planned.append((path, digest, self.chunks_for(store, note_id)))
            except Exception as exc:  # a tokenizer failure on one note must not stop the rest
                report.failed.append((path, f"chunking failed: {exc}"))
        total = sum(len(c) for _, _, c in planned)
        with Progress(total, "embedding", enabled=progress, min_total=64) as bar:
            group: list[tuple[str, str, list[Chunk]]] = []
            size = 0
            for item in planned:
                group.append(item)
                size += len(item[2])
                if size >= GROUP_CHUNKS:
                    self._embed_group(store, table, group, report, bar, state)
                    group, size = [], 0
            if group:
                self._embed_group(store, table, group, report, bar, state)
        if not report.failed:
            self._drop_legacy(report)

    def _drop_others(self, report: VectorReport) -> None:
        """This embedder's vectors cover every note: other embedders' tables have nothing left to give."""
        if not report.others:
            return
        db = self._connect()
        for name in report.others["tables"]:
            db.drop_table(name)
            hubness.file_for(self.dir, name).unlink(missing_ok=True)
            ann_mark_file(self.dir, name).unlink(missing_ok=True)
        report.others["dropped"] = True

    def _drop_legacy(self, report: VectorReport) -> None:
        """Every note has its vectors in the current layout: the old table has nothing left to give."""
        legacy = getattr(self, "_legacy", None)
        if legacy is not None and report.migrated is not None:
            self._connect().drop_table(legacy.name)
            report.migrated["done"] = True
            self._legacy = None

    def _embed_group(self, store: Store, table: Any, group: list[tuple[str, str, list[Chunk]]], report: VectorReport,
                     bar: Progress, state: dict[str, set[str]]) -> None:
        import pyarrow as pa

        paths = [p for p, _, _ in group]
        # notes that had no rows when the sync began (a cold index: all of them) have nothing to reuse
        # or delete, so the table is not scanned for them
        had_rows = [p for p in paths if p in state]
        reuse: dict[str, Any] = {}
        if had_rows:
            old = self._read(table, ["id", "vector"], "path IN (" + ", ".join(_quote(p) for p in had_rows) + ")")
            if old.num_rows:
                reuse = dict(zip(old.column("id").to_pylist(), old.column("vector").to_numpy(zero_copy_only=False),
                                 strict=True))
        legacy = getattr(self, "_legacy", None)
        from_legacy: set[str] = set()
        if legacy is not None:  # the previous layout's vectors, where a passage is unchanged
            old = self._read(legacy, ["id", "vector"], "path IN (" + ", ".join(_quote(p) for p in paths) + ")")
            for cid, vec in zip(old.column("id").to_pylist(), old.column("vector").to_numpy(zero_copy_only=False),
                                strict=True):
                if cid not in reuse:
                    reuse[cid] = vec
                    from_legacy.add(cid)
        rows: list[dict[str, Any]] = []
        todo: list[int] = []
        for path, digest, chunks in group:
            for c in chunks:
                cid = chunk_id(path, c, self.key)
                rows.append({"id": cid, "path": path, "note_hash": digest, "ordinal": c.ordinal, "start": c.start,
                             "end": c.end, "heading": c.heading, "text": c.text, "embedder": self.key,
                             "level": c.level, "vector": reuse.get(cid)})
                if cid not in reuse:
                    todo.append(len(rows) - 1)
                else:
                    bar.advance()
        todo.sort(key=lambda i: len(rows[i]["text"]))  # similar lengths together: little padding
        t0 = time.perf_counter()
        failed_paths: set[str] = set()
        for s in range(0, len(todo), BATCH):
            batch = todo[s:s + BATCH]
            try:
                vecs = self.embedder.embed_passages([rows[i]["text"] for i in batch])
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                for i in batch:
                    if rows[i]["path"] not in failed_paths:
                        failed_paths.add(rows[i]["path"])
                        report.failed.append((rows[i]["path"], f"embedding failed: {exc}"))
                bar.advance(len(batch))
                continue
            for i, v in zip(batch, vecs, strict=True):
                rows[i]["vector"] = np.asarray(v, dtype=np.float32)
            bar.advance(len(batch))
        report.embed_seconds += time.perf_counter() - t0
        keep = [r for r in rows if r["path"] not in failed_paths and r["vector"] is not None]
        done_paths = {p for p in paths if p not in failed_paths}
        if not done_paths:
            return
        dim = int(self.embedder.dim)
        flat = np.concatenate([np.asarray(r["vector"], dtype=np.float32).reshape(dim) for r in keep]) if keep \
            else np.zeros(0, dtype=np.float32)
        columns = {name: [r[name] for r in keep] for name in
                   ("id", "path", "note_hash", "ordinal", "start", "end", "heading", "text", "embedder", "level")}
        columns["vector"] = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dim)
        data = pa.table(columns, schema=self._schema())
        stale = sorted(p for p in done_paths if p in state)
        if stale:
            table.delete("path IN (" + ", ".join(_quote(p) for p in stale) + ")")
        if data.num_rows:
            table.add(data)
        report.notes_embedded += len(done_paths)
        report.chunks_embedded += sum(1 for i in todo if rows[i]["path"] in done_paths)
        report.chunks_reused += sum(1 for r in keep if r["id"] in reuse)
        if report.migrated is not None:
            report.migrated["reused"] += sum(1 for r in keep if r["id"] in from_legacy)
        self._bump(store)  # readers see each committed group, even if this process is killed

    def _bump(self, store: Store) -> None:
        with store.transaction() as conn:
            store.set_meta(conn, f"{META_VERSION}:{self.name}", f"{time.time():.6f}")

    # -- search ------------------------------------------------------------------------------------

    def _load(self, store: Store, version: str | None = None) -> _Matrix | None:
        """The whole table as a matrix, read once per vector version (``version``: the one the
        caller has just read, so a query looks at it once)."""
        if version is None:
            version = store.get_meta(f"{META_VERSION}:{self.name}") or ""
        with self._lock:
            if self._matrix is not None and self._matrix.version == version:
                return self._matrix
            blas.limit_loaded()
            table = self._table()
            if table is None:
                self._matrix = None
                return None
            data = self._read(table, ["path", "start", "end", "heading", "level", "vector", "embedder"])
            if data.num_rows and set(data.column("embedder").unique().to_pylist()) != {self.key}:
                raise RuntimeError(f"vector table {self.name} holds vectors of another embedder")
            dim = int(self.embedder.dim)
            vecs = data.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim) \
                if data.num_rows else np.zeros((0, dim), dtype=np.float32)
            self._matrix = _Matrix(
                data.column("path").to_pylist(), data.column("start").to_numpy(), data.column("end").to_numpy(),
                data.column("heading").to_pylist(), data.column("level").to_pylist(),
                np.ascontiguousarray(vecs, dtype=np.float32), version,
            )
            return self._matrix

    def size(self, store: Store) -> int:
        """Rows (passages) in the table; answered without loading them."""
        return self._table_shape(store)[0]

    def notes_covered(self, store: Store) -> tuple[int, int]:
        """(ranked notes with vectors, ranked notes): how much of the vault the vector channel sees.

        Cached until the vectors or the notes change, so a search can afford to ask. (It was keyed
        on ``last_sync``, which the watcher's rescan writes once a minute: the next hybrid search
        then read every ranked path and the vector table's path column, ~0.15-0.3 s at 30k notes.)"""
        key = (store.get_meta(f"{META_VERSION}:{self.name}"), store.get_meta(NOTES_CHANGED))
        if self._covered is None or self._covered[0] != key:
            known = current_coverage(store, self.fingerprint) if self.fingerprint else None
            if known is not None:  # the last complete vector sync still holds: a count, no read of the table
                self._covered = (key, known.fresh, known.expected)
                return known.fresh, known.expected
            ranked = {r[0] for r in store.conn.execute("SELECT path FROM notes WHERE ranked = 1")}
            if self.uses_ann(store):  # only the path column, never the vectors
                table = self._table()
                paths = set(self._read(table, ["path"]).column("path").to_pylist()) if table is not None else set()
            else:
                m = self._load(store)
                paths = set(m.paths) if m is not None else set()
            self._covered = (key, len(ranked & paths), len(ranked))
        return self._covered[1], self._covered[2]

    def search_chunks(self, store: Store, query_vector: np.ndarray, limit: int = 100,
                      paths: set[str] | None = None) -> list[ChunkHit]:
        """The ``limit`` passages closest to the query vector (cosine), optionally only within ``paths``."""
        m = self._load(store)
        if m is None or not len(m.paths):
            return []
        scores = m.vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if paths is not None:
            scores = np.where(self._row_mask(m, paths), scores, -np.inf)
        n = min(limit, len(scores))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ChunkHit(m.paths[i], int(m.starts[i]), int(m.ends[i]), m.headings[i], float(scores[i]))
                for i in top if np.isfinite(scores[i])]

    @staticmethod
    def _row_mask(m: _Matrix, paths: set[str] | dict[str, int]) -> np.ndarray:
        allowed = np.fromiter((p in paths for p in m.notes), dtype=bool, count=len(m.notes))
        return allowed[m.owner]

    def note_scores(self, store: Store, query_vector: np.ndarray, chunk_offset: float | None = None,
                    version: str | None = None) -> tuple[_Matrix, np.ndarray, np.ndarray] | None:
        """Every note's score and the row that gave it: (matrix, score per note, best row per note).

        A note scores by its note-level vector, or by its best chunk when that is higher by more
        than ``-chunk_offset`` (``CHUNK_OFFSET``): the best of many chunks is the best of many
        draws, so a chunk must beat the whole note's vector by a margin to speak for it."""
        m = self._load(store, version)
        if m is None or not len(m.paths):
            return None
        offset = CHUNK_OFFSET if chunk_offset is None else chunk_offset
        rows = m.vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)
        chunk_rows = rows + offset - CHUNK_DRAWS_PENALTY * m.draws if CHUNK_DRAWS_PENALTY else rows + offset
        adjusted = np.where(m.is_note, rows, chunk_rows).astype(np.float32, copy=False)[m.grouped]  # by note
        best = np.maximum.reduceat(adjusted, m.group_starts)
        # the row that gave each note its score: the last of its rows (in table order) at its best
        at_best = np.where(adjusted == best[m.group_owner], m.positions, -1)
        best_row = m.grouped[np.maximum.reduceat(at_best, m.group_starts)]
        hub = self._hub_per_note(m) if hubness.WEIGHT > 0 else None
        if hub is not None:  # read against how near each note comes to every question (hubness.py)
            best = best - np.float32(hubness.WEIGHT) * hub
        return m, best, best_row

    def search_notes(self, store: Store, query: str | np.ndarray, filters: Filters | None = None,
                     limit: int = 100, chunk_offset: float | None = None) -> list[tuple[int, float, ChunkHit]]:
        """Notes ranked by their note-level vector or best chunk (``note_scores``):
        [(note id, score, the passage that scored)] best first.

        (Adding a share of the second-best chunk looked reasonable and was a bug: e5 cosines sit
        in a narrow band, so any bonus for having a second chunk lifted every long note above every
        short one; SciFact nDCG@10 fell to 0.40.)
        """
        qvec = self.embedder.embed_queries([query])[0] if isinstance(query, str) else query
        serving = self._serving(store)
        if serving[2]:
            return self._search_notes_ann(store, qvec, filters, limit, chunk_offset, serving)
        scored = self.note_scores(store, qvec, chunk_offset, version=serving[0])
        if scored is None:
            return []
        m, best, best_row = scored
        ids = _allowed_paths(store, filters) if filters is not None and filters != Filters() else None
        if ids is not None:
            best = np.where(np.fromiter((p in ids for p in m.notes), dtype=bool, count=len(m.notes)), best, -np.inf)
        n = min(len(best), limit * 2 if ids is None else limit)
        top = np.argpartition(-best, n - 1)[:n]
        top = top[np.argsort(-best[top], kind="stable")]
        top = top[np.isfinite(best[top])]
        if ids is None:  # only ranked notes still in the index (the table may lag a sync by a moment)
            ids = cache.ranked_ids(store.conn)
        # the candidates' numbers as Python values in one step each (numpy scalars one by one cost
        # ~1 ms a query); tolist() gives the same floats and ints as float()/int() of each element
        rows = best_row[top]
        scores, starts, ends = best[top].tolist(), m.starts[rows].tolist(), m.ends[rows].tolist()
        ranked = []
        for t, r, score, start, end in zip(top.tolist(), rows.tolist(), scores, starts, ends, strict=True):
            path = m.notes[t]
            if path in ids:
                ranked.append((ids[path], score, ChunkHit(path, start, end, m.headings[r], score)))
        ranked.sort(key=lambda t: (-t[1], t[0]))
        return ranked[:limit]

    def _chunk_draws(self, table: Any, version: str) -> dict[str, float]:
        """Each long note's sqrt(2 ln n) on the ANN path, read once per vector version: the rows a
        query gets back do not say how many chunks their note has. Two string columns, no vectors
        (~30 MB and a fraction of a second at 400k rows)."""
        cached = self._draws
        if cached is not None and cached[0] == version:
            return cached[1]
        data = self._read(table, ["path", "level"])
        draws = _draws_of(data.column("path").to_pylist(), data.column("level").to_pylist())
        self._draws = (version, draws)
        return draws

    def _search_notes_ann(self, store: Store, qvec: np.ndarray, filters: Filters | None, limit: int,
                          chunk_offset: float | None, serving: tuple[str, int, bool, int, Any]
                          ) -> list[tuple[int, float, ChunkHit]]:
        """``search_notes`` through the ANN index: LanceDB returns the nearest rows inside the scope
        (the filter is part of the vector query), exactly re-scored (refine); notes are then scored
        from those rows by the same rule as the exact path."""
        _version, _rows, _ann, parts, table = serving
        if table is None:
            return []
        scoped = filters is not None and filters != Filters()
        ids: dict[str, int] | None = None
        where = None
        if scoped:
            if filters == Filters(path_prefix=filters.path_prefix):  # a prefix goes into the query as it is
                where = f"starts_with(path, {_quote(filters.path_prefix.lstrip('/'))})"
            else:
                ids = _allowed_paths(store, filters)
                if not ids:
                    return []
                if len(ids) <= ANN_IN_MAX:
                    where = "path IN (" + ",".join(_quote(p) for p in ids) + ")"
                # else a broad scope (most notes pass): fetch more rows, keep those in scope (below)
        probes = self.ann_probes or max(ANN_MIN_PROBES, int(parts * ANN_PROBE_SHARE + 0.999))
        offset = CHUNK_OFFSET if chunk_offset is None else chunk_offset
        # every column is one more read per row returned (~1 ms per 300 rows at 100k): the level
        # only matters when chunks are offset against note vectors
        penalty = CHUNK_DRAWS_PENALTY
        columns = ["path", "start", "end", "heading", *(["level"] if offset or penalty else []), "_distance"]
        query = (table.search(np.asarray(qvec, dtype=np.float32).reshape(-1), vector_column_name="vector")
                 .distance_type("cosine").nprobes(min(probes, parts)).refine_factor(ANN_REFINE)
                 .select(columns)
                 .limit(max(limit * ANN_ROWS_PER_NOTE * (1 if where is not None or not scoped else 4), 50)))
        if where is not None:
            query = query.where(where, prefilter=True)
        data = query.to_arrow()
        paths = data.column("path").to_pylist()
        score = 1.0 - data.column("_distance").to_numpy().astype(np.float32)
        if offset or penalty:
            is_note = np.asarray([lv == "note" for lv in data.column("level").to_pylist()], dtype=bool)
            chunk_score = score + offset
            if penalty:
                draws = self._chunk_draws(table, _version)
                chunk_score = chunk_score - penalty * np.fromiter((draws.get(p, 0.0) for p in paths),
                                                                  dtype=np.float32, count=len(paths))
            adjusted = np.where(is_note, score, chunk_score)
        else:
            adjusted = score
        best: dict[str, int] = {}
        for i, path in enumerate(paths):
            if path not in best or adjusted[i] > adjusted[best[path]]:
                best[path] = i
        if ids is None:  # only ranked notes still in the index (the table may lag a sync by a moment)
            ids = cache.ranked_ids(store.conn)
        starts, ends = data.column("start").to_pylist(), data.column("end").to_pylist()
        headings = data.column("heading").to_pylist()
        # the hubness correction (as the matrix path applies it) on the rows nearest by plain cosine:
        # a note lifted by a low hubness from beyond them is not fetched, so only the far tail can differ
        hub = self._hub_values() if hubness.WEIGHT > 0 else {}
        weight = hubness.WEIGHT
        ranked = []
        for p, i in best.items():
            if p in ids:
                value = float(adjusted[i]) - weight * hub.get(p, 0.0) if hub else float(adjusted[i])
                ranked.append((ids[p], value, ChunkHit(p, int(starts[i]), int(ends[i]), headings[i], value)))
        ranked.sort(key=lambda t: (-t[1], t[0]))
        return ranked[:limit]


def _draws_of(paths: list[str], levels: list[str]) -> dict[str, float]:
    """``{path: sqrt(2 ln n)}`` for every note with n > 1 chunk rows (``CHUNK_DRAWS_PENALTY``)."""
    counts: dict[str, int] = {}
    for path, level in zip(paths, levels, strict=True):
        if level != "note":
            counts[path] = counts.get(path, 0) + 1
    return {p: math.sqrt(2.0 * math.log(n)) for p, n in counts.items() if n > 1}


def _table_stats(table: Any) -> dict[str, Any]:
    """LanceDB's statistics of the table ({} when this LanceDB cannot say)."""
    try:
        stats = table.stats()
    except AttributeError:  # an older LanceDB without stats(): compaction only speeds reads
        return {}
    return stats if isinstance(stats, dict) else {}


def _fragments(table: Any) -> int:
    """How many data files the table is made of (0 when LanceDB cannot say)."""
    try:
        return int(_table_stats(table)["fragment_stats"]["num_fragments"])
    except (KeyError, TypeError):
        return 0


def current_coverage(store: Store, fingerprint: str) -> Coverage | None:
    """``VectorIndex.coverage`` when the last complete vector sync is still current
    (``current_embedder``): that sync left every ranked note fresh and swept every orphan, and
    nothing changed since, so the answer is a count. ``status`` and ``vectors --coverage`` then open
    neither LanceDB nor a model (both cost seconds). None when the table has to be read."""
    key = current_embedder(store, fingerprint)
    if key is None:
        return None
    ranked = len(cache.ranked_note_ids(store.conn))  # a server has it cached: every search reads it
    return Coverage(key, ranked, ranked, [], [], [], hub_state(store, table_name(key)))


def _allowed_paths(store: Store, filters: Filters) -> dict[str, int]:
    where, params = filters.sql("n")
    rows = store.conn.execute(f"SELECT id, path FROM notes n WHERE n.ranked = 1 AND {where}", params)
    return {r[1]: int(r[0]) for r in rows}


def embedder_key_in_use(vault: Path) -> list[str]:
    """Embedder keys found in the vault's vector tables (for status displays)."""
    folder = lancedb_dir(vault)
    if not folder.is_dir():
        return []
    db = import_lancedb().connect(str(folder))
    names = db.list_tables() if hasattr(db, "list_tables") else db.table_names()
    keys = []
    for name in getattr(names, "tables", names):
        table = db.open_table(str(name))
        data = table.search().select(["embedder"]).limit(1).to_arrow()
        keys.extend(data.column("embedder").to_pylist())
    return keys


def note_texts(store: Store, note_ids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
    """{note id: (title, description, body)} for rerankers and snippets."""
    rows = store.conn.execute(
        "SELECT n.id, n.title, n.description, coalesce(f.body, '') AS body FROM notes n "
        "LEFT JOIN fts_trigram f ON f.rowid = n.id WHERE n.id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(note_ids)),),
    ).fetchall()
    return {int(r["id"]): (r["title"], r["description"], r["body"]) for r in rows}
