"""Dream: the hourly consolidation pass that turns a pile of captures and notes into a graph.

One module per step — ``gate`` (what is ready), ``cluster`` (partition without chaining),
``promote`` (clusters → knowledge notes), ``provenance`` (cite raw material), ``discover`` (new
links), ``dedupe`` (merge near-duplicates), ``atomicity`` (flag/split multi-topic notes), ``prune``
(weak links, never bridges) — run by ``run.run_dream``, which commits each step separately.
"""

from __future__ import annotations

from .run import DreamError, DreamReport, run_dream

__all__ = ["DreamError", "DreamReport", "run_dream"]
