"""Capture: getting material into the vault with no decision left to the person.

``write_capture`` / ``braindump`` write a dated capture note (scope, action items, themes, deadline
fields, daily-note link); ``lookahead`` reads the deadline fields; ``learnings`` turns a saved
transcript into learning notes; ``autocommit`` and ``schedule`` keep the vault's git history.
"""

from __future__ import annotations

from .braindump import CaptureError, CaptureResult, braindump, write_capture

__all__ = ["CaptureError", "CaptureResult", "braindump", "write_capture"]
