"""A tiny progress bar with an ETA: drawn on a terminal, silent when output is piped."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``with Progress(total, 'indexing') as p: p.advance()``. Draws at most ~10 times a second."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool | None = None,
                 min_total: int = 200) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = (isatty and total >= min_total) if enabled is None else enabled
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._draw(final=True)
            self.stream.write("\n")
            self.stream.flush()

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and (time.monotonic() - self._last > 0.1 or self.done >= self.total):
            self._draw()

    def _draw(self, final: bool = False) -> None:
        self._last = time.monotonic()
        elapsed = self._last - self.start
        frac = self.done / self.total if self.total else 1.0
        width = 28
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        if final or not self.done:
            eta = f"{elapsed:5.1f}s" if final else "  ?  "
        else:
            eta = f"ETA {elapsed / self.done * (self.total - self.done):5.1f}s"
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {eta}")
        self.stream.flush()
