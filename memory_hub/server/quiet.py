"""Warnings that repeat are printed once per kind per interval, with a count of the rest.

A flood of bad connections must not become a flood of log lines (or fill a disk with them). Kept
apart from ``http_limits`` so a stdio server does not import the HTTP stack to log.
"""

from __future__ import annotations

import logging
import time


class QuietLog:
    """Log a warning once per kind per ``interval`` seconds; repeats are counted, not printed."""

    def __init__(self, logger: logging.Logger, interval: float = 60.0) -> None:
        self.logger, self.interval = logger, interval
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def allow(self, kind: str) -> tuple[bool, int]:
        """Whether to print this occurrence of ``kind``, and how many were held back before it."""
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return False, 0
        if len(self._last) > 10_000:  # kinds are few; never let a stream of unique ones grow memory
            self._last.clear()
            self._suppressed.clear()
        self._last[kind] = now
        return True, self._suppressed.pop(kind, 0)

    def note(self, kind: str, message: str) -> None:
        show, held = self.allow(kind)
        if show:
            self.logger.warning(message + self.tail(held))  # pre-formatted: each kind is its own template

    def tail(self, held: int) -> str:
        return f" ({held} more like this in the last {self.interval:.0f} s)" if held else ""


class QuietFilter(logging.Filter):
    """A handler filter: each warning passes once per interval, with a count of the ones held back.

    A library's warning is keyed by its template (its arguments name a connection or a client);
    ours by template and arguments (they name a tool or a note, which deserve a line each)."""

    def __init__(self, quiet: QuietLog) -> None:
        super().__init__()
        self.quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        own = record.name.startswith("memory_hub")
        show, held = self.quiet.allow(f"{record.name}:{record.msg}" + (f":{record.args!r:.200}" if own else ""))
        if show and held:
            record.msg = f"{record.msg}{self.quiet.tail(held)}"  # the tail has no % to format
        return show
