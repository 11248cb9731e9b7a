"""What training the ANN index again costs, and what leaves it narrow (LanceDB, synthetic rows).

    python benchmarks/ann_upkeep_cost.py [--rows 150000] [--rounds 3] [--out ann-upkeep-cost]

A table is written as a sync writes it (groups of 512 rows, 384-dim unit vectors drawn around 200
centres), merged and indexed (IvfSq, rows/1024 partitions, as ``VectorIndex.build_ann``). Then,
each round, an edit cycle as watcher edits leave it (20 notes' rows deleted and written again, 20
small files), and one way of bringing the index up to date:

* ``train over deletions``: ``create_index`` straight away, the table's files still carrying the
  deleted rows;
* ``optimize + train`` (the sixth session's upkeep): LanceDB's default ``optimize()`` (merge files,
  fold new rows into the index) then ``create_index``;
* ``clear deletions + train`` (``VectorIndex._train_ann``): ``optimize`` with deletions
  materialised into files of ``ANN_FILE_ROWS`` rows, then ``create_index``;
* ``optimize only``: what the version prune used to run on an indexed table.

For each: seconds (median, max over rounds) and the share of the table a one-partition query reads
(a narrow index reads ~1/partitions; 1.0 means every query scans every row whatever its probes).
Vectors are synthetic: this measures LanceDB's work, not recall (``ann_shares.py``, real e5).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.common import print_table, write_result  # noqa: E402
from memory_hub.index.vectors import ANN_FILE_ROWS, ANN_ROWS_PER_PARTITION, import_lancedb  # noqa: E402

DIM = 384
GROUP = 512
WAYS = ("train over deletions", "optimize + train", "clear deletions + train", "optimize only")


class Table:
    """A LanceDB table of synthetic passage rows, written and edited the way a sync does."""

    def __init__(self, folder: Path, rows: int, seed: int = 0) -> None:
        import numpy as np

        self.np = np
        self.rng = np.random.default_rng(seed)
        self.centres = self.rng.normal(size=(200, DIM)).astype(np.float32)
        self.next = 0
        self.db = import_lancedb().connect(str(folder))
        self.table = self.db.create_table("v", self.batch(GROUP))
        while self.next < rows:
            self.table.add(self.batch(min(GROUP, rows - self.next)))
        self.table.optimize()
        self.train()

    def batch(self, n: int) -> Any:
        import pyarrow as pa

        np = self.np
        v = self.centres[self.rng.integers(0, len(self.centres), n)] + 0.5 * self.rng.normal(size=(n, DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        ids = [f"r{self.next + i}" for i in range(n)]
        self.next += n
        return pa.table({"id": ids, "vector": pa.FixedSizeListArray.from_arrays(pa.array(v.ravel()), DIM)})

    def train(self) -> None:
        from lancedb import index as lance_index

        parts = max(1, self.table.count_rows() // ANN_ROWS_PER_PARTITION)
        self.table.create_index("vector", config=lance_index.IvfSq(distance_type="cosine", num_partitions=parts),
                                replace=True)

    def edit_cycle(self, notes: int = 20, rows_per_note: int = 4) -> None:
        """``notes`` edits: each deletes a note's rows (spread over the table) and writes them again."""
        total = self.table.count_rows()
        for _ in range(notes):
            start = int(self.rng.integers(0, max(1, total - rows_per_note)))
            self.table.delete(f"id IN ({', '.join(repr(f'r{start + i}') for i in range(rows_per_note))})")
            self.table.add(self.batch(rows_per_note))

    def narrow_share(self, probes: int = 3) -> float:
        """The largest share of the table a one-partition query reads, over a few query vectors."""
        worst = 0
        for _ in range(probes):
            q = self.batch(1).column("vector")[0].values.to_numpy()
            n = (self.table.search(q, vector_column_name="vector").distance_type("cosine").nprobes(1)
                 .select(["id"]).limit(10**8).to_arrow().num_rows)
            worst = max(worst, n)
        return worst / self.table.count_rows()


def bring_up_to_date(t: Table, way: str) -> None:
    if way == "train over deletions":
        t.train()
    elif way == "optimize + train":
        t.table.optimize()
        t.train()
    elif way == "clear deletions + train":
        t.table.optimize(compaction_options={"target_rows_per_fragment": ANN_FILE_ROWS,
                                             "materialize_deletions_threshold": 0.0})
        t.train()
    elif way == "optimize only":
        t.table.optimize()
    else:
        raise ValueError(way)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=150_000, help="rows in the table (100k notes: ~417k)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="ann-upkeep-cost")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ann-upkeep-"))
    try:
        t0 = time.monotonic()
        t = Table(folder, args.rows)
        setup = time.monotonic() - t0
        runs: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
        for _ in range(args.rounds):
            for way in WAYS:  # interleaved: each way sees the same kind of edit cycle before it
                t.edit_cycle()
                started = time.monotonic()
                bring_up_to_date(t, way)
                runs[way].append((time.monotonic() - started, t.narrow_share()))
                t.train()  # every way starts from a freshly trained index
        rows = []
        for way in WAYS:
            secs = [s for s, _ in runs[way]]
            rows.append({"way": way, "median_s": round(statistics.median(secs), 2), "max_s": round(max(secs), 2),
                         "one_probe_share": round(max(share for _, share in runs[way]), 4)})
        print_table(rows, ["way", "median_s", "max_s", "one_probe_share"])
        print(f"table: {args.rows} rows, {max(1, args.rows // ANN_ROWS_PER_PARTITION)} partitions; "
              f"written and indexed in {setup:.1f}s; {args.rounds} rounds")
        write_result(args.out, {"rows": args.rows, "rounds": args.rounds, "ann_file_rows": ANN_FILE_ROWS,
                                "partitions": max(1, args.rows // ANN_ROWS_PER_PARTITION), "ways": rows})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
