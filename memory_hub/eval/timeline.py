"""The recall timeline: each recorded prompt, what was injected, and what the agent did with it next.

Telemetry (``telemetry.py``) has one line per recall: when, which session, the mode, the block and
the notes in it, warm or cold, latency. Usage logs (``index.usage.events``) have every read of a
note and every usefulness verdict; the usefulness judge writes one telemetry line per session with
its verdicts. This module joins the three, so a person can see, prompt by prompt, what the agent
was shown and which of those notes it then opened or was judged to have used.

"Then read" means a read of that note after this recall and before the next recall of the same
session (or within ``READ_WINDOW`` seconds for the last one or when no session is known). Reads are
not tagged with a session, so two agents working at once can be credited with each other's reads;
the page says "read after", not "read because".

Telemetry files are parsed once per process and then only what was appended (``Timeline``), so a
page that asks again costs a ``stat`` per file.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import json
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import telemetry

READ_WINDOW = 3600.0  # seconds after a recall in which a read counts as "then read" (no next recall)
MAX_EVENTS = 50_000  # recall events kept in memory (two rotated files hold far fewer)


@dataclass
class Shown:
    """One note of an injected block and what followed."""

    path: str
    read_after: float | None = None  # seconds from the recall to the first read in the window
    reads: int = 0
    useful: str | None = None  # how the judge saw it used (quoted, applied, opened …), None if not
    judged: bool = False  # the session was judged at all


@dataclass
class Recall:
    """One recall event as the timeline shows it."""

    ts: float
    session: str | None
    event: dict[str, Any]
    shown: list[Shown] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        return f"r{int(self.ts * 1000)}"

    @property
    def day(self) -> str:
        return _dt.datetime.fromtimestamp(self.ts).date().isoformat()

    def get(self, key: str, default: Any = None) -> Any:
        return self.event.get(key, default)


class _Tail:
    """One append-only JSONL file read incrementally: only bytes after the last complete line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None  # (device, inode)
        self.offset = 0

    def read_new(self) -> tuple[bool, list[dict[str, Any]]]:
        """(start over, new events). ``start over`` when the file was replaced or truncated."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            reset = self.identity is not None
            self.identity, self.offset = None, 0
            return reset, []
        identity = (st.st_dev, st.st_ino)
        reset = identity != self.identity or st.st_size < self.offset
        if reset:
            self.identity, self.offset = identity, 0
        if st.st_size == self.offset:
            return reset, []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n") + 1
        self.offset += end
        out = []
        for raw in data[:end].split(b"\n"):
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                continue
            if isinstance(item, dict) and isinstance(item.get("ts"), (int, float)):
                out.append(item)
        return reset, out


class Timeline:
    """Recall and usefulness events of one vault, kept in memory and refreshed from the files."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault)
        base = telemetry.folder(self.vault)
        self._files = [_Tail(base / (Path(telemetry.FILENAME).stem + ".1.jsonl")), _Tail(base / telemetry.FILENAME)]
        self._lock = threading.Lock()
        self._per_file: list[list[dict[str, Any]]] = [[], []]
        self.recalls: list[dict[str, Any]] = []
        self.verdicts: dict[str, dict[str, str]] = {}  # session → {path: how} (used notes only)
        self.judged: set[str] = set()  # sessions the usefulness judge has seen
        self._by_path: dict[str, list[int]] = {}

    def refresh(self) -> Timeline:
        with self._lock:
            changed = False
            for i, tail in enumerate(self._files):
                reset, new = tail.read_new()
                if reset:
                    self._per_file[i] = []
                if reset or new:
                    changed = True
                    self._per_file[i].extend(new)
            if changed:
                self._rebuild()
        return self

    def _rebuild(self) -> None:
        events = [e for part in self._per_file for e in part]
        self.recalls = [e for e in events if e.get("event") == "recall"][-MAX_EVENTS:]
        self.verdicts, self.judged = {}, set()
        for e in events:
            if e.get("event") != "usefulness" or not isinstance(e.get("session"), str):
                continue
            self.judged.add(e["session"])
            used = self.verdicts.setdefault(e["session"], {})
            for v in e.get("verdicts") or []:
                if isinstance(v, dict) and v.get("used") and isinstance(v.get("path"), str):
                    used[v["path"]] = str(v.get("how") or "used")
            for p in e.get("used") or []:
                if isinstance(p, str):
                    used.setdefault(p, "used")
        self._by_path = {}
        for i, e in enumerate(self.recalls):
            for p in _injected(e):
                self._by_path.setdefault(p, []).append(i)

    # -- queries -----------------------------------------------------------------------------------

    def sessions(self) -> list[tuple[str, int, float]]:
        """(session, recalls, last ts), most recent first."""
        count: Counter[str] = Counter()
        last: dict[str, float] = {}
        for e in self.recalls:
            s = e.get("session")
            if isinstance(s, str) and s:
                count[s] += 1
                last[s] = max(last.get(s, 0.0), float(e["ts"]))
        return sorted(((s, n, last[s]) for s, n in count.items()), key=lambda x: -x[2])

    def days(self) -> list[tuple[str, int]]:
        """(YYYY-MM-DD, recalls), most recent first (local time)."""
        count = Counter(_dt.datetime.fromtimestamp(float(e["ts"])).date().isoformat() for e in self.recalls)
        return sorted(count.items(), reverse=True)

    def page(self, *, session: str | None = None, day: str | None = None, before: float | None = None,
             limit: int = 50, with_block_only: bool = False) -> tuple[list[Recall], float | None]:
        """Recalls newest first matching the filters, and the ``before`` value of the next page."""
        out: list[Recall] = []
        idx = len(self.recalls) - 1
        if before is not None:
            idx = bisect.bisect_left([float(e["ts"]) for e in self.recalls], before) - 1
        while idx >= 0 and len(out) <= limit:
            e = self.recalls[idx]
            idx -= 1
            if session and e.get("session") != session:
                continue
            if day and _dt.datetime.fromtimestamp(float(e["ts"])).date().isoformat() != day:
                continue
            if with_block_only and not _injected(e):
                continue
            out.append(Recall(float(e["ts"]), e.get("session"), e))
        more = out[limit].ts if len(out) > limit else None
        return out[:limit], (out[limit - 1].ts if more is not None else None)

    def injections_of(self, path: str, limit: int = 20) -> tuple[list[Recall], int]:
        """The recalls whose block held ``path``, newest first, and how many there are in all."""
        idx = self._by_path.get(path, [])
        shown = [Recall(float(self.recalls[i]["ts"]), self.recalls[i].get("session"), self.recalls[i])
                 for i in reversed(idx[-limit:])]
        return shown, len(idx)

    def injected_since(self, since: float) -> Counter[str]:
        """How often each note was injected since ``since`` (unix time)."""
        out: Counter[str] = Counter()
        for e in self.recalls:
            if float(e["ts"]) >= since:
                out.update(_injected(e))
        return out

    def first_ts(self) -> float | None:
        return float(self.recalls[0]["ts"]) if self.recalls else None

    def follow_up(self, recalls: list[Recall], usage_events: list[tuple[float, str, str]]) -> list[Recall]:
        """Fill each recall's ``shown``: which injected notes were read after it, and judged useful."""
        reads: dict[str, list[float]] = {}
        for ts, kind, p in usage_events:
            if kind == "read":
                reads.setdefault(p, []).append(ts)
        next_in_session = self._next_in_session()
        for r in recalls:
            end = next_in_session.get((r.session, r.ts)) if r.session else None
            end = min(end, r.ts + READ_WINDOW) if end is not None else r.ts + READ_WINDOW
            used = self.verdicts.get(r.session or "", {})
            judged = (r.session or "") in self.judged
            r.shown = []
            for p in _injected(r.event):
                times = reads.get(p, [])
                lo, hi = bisect.bisect_left(times, r.ts), bisect.bisect_left(times, end)
                r.shown.append(Shown(p, round(times[lo] - r.ts, 1) if hi > lo else None, hi - lo,
                                     used.get(p), judged))
        return recalls

    def _next_in_session(self) -> dict[tuple[str | None, float], float]:
        out: dict[tuple[str | None, float], float] = {}
        last: dict[str, float] = {}
        for e in reversed(self.recalls):
            s = e.get("session")
            if isinstance(s, str) and s:
                if s in last:
                    out[(s, float(e["ts"]))] = last[s]
                last[s] = float(e["ts"])
        return out


def _injected(event: dict[str, Any]) -> list[str]:
    return [p for p in event.get("injected") or [] if isinstance(p, str)]


_timelines: dict[Path, Timeline] = {}
_timelines_lock = threading.Lock()


def timeline(vault: Path) -> Timeline:
    """The vault's timeline for this process, brought up to date with the telemetry files."""
    vault = Path(vault).resolve()
    with _timelines_lock:
        found = _timelines.get(vault)
        if found is None:
            found = _timelines[vault] = Timeline(vault)
    return found.refresh()
