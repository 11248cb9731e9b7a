"""What every command shares: the error type, JSON output, the vault and its settings.

Commands import from here, never from ``cli.py`` (which only builds the parser and dispatches).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
from pathlib import Path
from typing import Any

from .. import config


class CliError(Exception):
    """An error for the user: printed without a traceback, exit code 1 (or ``code``)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def vault_path(args: argparse.Namespace, must_exist: bool = True) -> Path:
    """The vault this command works on (``--vault``, ``$MEMORY_HUB_VAULT``, the user file, the default)."""
    try:
        return config.resolve_vault(getattr(args, "vault", None), must_exist=must_exist)
    except config.ConfigError as exc:
        raise CliError(str(exc)) from None


def settings_of(args: argparse.Namespace) -> config.Settings:
    """The settings ``cli.main`` loaded for this run (loaded here when a test calls a command directly)."""
    got = getattr(args, "settings", None)
    if got is None:
        got = load_settings(args)
    return got


def load_settings(args: argparse.Namespace) -> config.Settings:
    """Settings for the vault this run names (user-level only while that vault does not exist yet)."""
    target = getattr(args, "init_path", None)
    if target:
        path, source = Path(target).expanduser().resolve(), "argument"
    else:
        path, source = config.vault_choice(getattr(args, "vault", None))
    return config.load_settings(path if path.is_dir() else None, vault_source=source)


# -- argument types: bad values are refused by the parser, with the reason ------------------------

def iso_date(value: str) -> str:
    """``--since``: an ISO date (``2026-05-01``), a month (``2026-05``), or ``N`` days/weeks ago (``7d``, ``2w``)."""
    text = value.strip()
    m = re.fullmatch(r"(\d+)\s*([dw])", text)
    if m:
        days = int(m.group(1)) * (7 if m.group(2) == "w" else 1)
        return (_dt.date.today() - _dt.timedelta(days=days)).isoformat()
    if re.fullmatch(r"\d{4}-\d{2}", text):
        text += "-01"
    try:
        return _dt.datetime.fromisoformat(text).date().isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a date: use YYYY-MM-DD, YYYY-MM, or a number of days/weeks ago such as 7d or 2w"
        ) from None


def note_kind(value: str) -> str:
    from ..vault.notes import KINDS

    kind = value.strip().lower()
    if kind not in KINDS:
        raise argparse.ArgumentTypeError(f"unknown kind {value!r}: use one of {', '.join(KINDS)}")
    return kind


def search_mode(value: str) -> str:
    from ..retrieval.search import MODES

    if value not in MODES:
        raise argparse.ArgumentTypeError(f"unknown mode {value!r}: use one of {', '.join(MODES)}")
    return value


def positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def budget(value: str) -> int:
    n = positive(value)
    if not 50 <= n <= 8000:
        raise argparse.ArgumentTypeError(f"must be between 50 and 8000 tokens, not {n}")
    return n
