"""memory-hub: long-term memory for AI coding agents, kept in a Markdown vault.

This module only builds the parser and dispatches; every command lives in ``memory_hub/commands/``
(parse, call one library function, print) and shares ``commands/shell.py``. Global options
(``--vault``, ``--json``) work before or after the command name. No command prints a traceback:
errors are one line on stderr with a non-zero exit (``MEMORY_HUB_DEBUG=1`` shows the traceback of
an unexpected one). ``--json`` shapes are documented with the commands that print them.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

from . import __version__
from .commands import MODULES
from .entry import hook_args

Command = Callable[[argparse.Namespace], int]


def _global_options(in_subcommand: bool) -> argparse.ArgumentParser:
    """``--vault`` and ``--json``, accepted on both sides of the command name.

    In a sub-command their default is "not given" (SUPPRESS), so a value given before the command
    name is not overwritten by the sub-parser's default."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--vault", metavar="PATH", default=argparse.SUPPRESS if in_subcommand else None,
                   help="vault folder (default: $MEMORY_HUB_VAULT, else `vault` in the user settings, "
                        "else the default vault)")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS if in_subcommand else False,
                   help="machine-readable output")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memory-hub", description=__doc__.splitlines()[0],
                                     parents=[_global_options(False)])
    parser.add_argument("--version", action=_Version, nargs=0, help="show the version and where it is installed")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = _global_options(True)

    def add(name: str, func: Command, help_text: str, **defaults: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text, parents=[common])
        p.set_defaults(func=func, **defaults)
        return p

    for name in MODULES:
        importlib.import_module(f"{__package__}.commands.{name}").register(add)
    return parser


class _Version(argparse.Action):
    """``--version`` printed as is (argparse's own action wraps long paths across lines)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    where = os.path.dirname(os.path.abspath(__file__))
    return f"memory-hub {__version__} (Python {sys.version.split()[0]}, {where})"


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """Settings are exported to this process's environment for the run; a caller's stays as it was."""
    before = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != before:
            os.environ.clear()
            os.environ.update(before)


# Commands whose stdout is a protocol (MCP over stdio, a hook's JSON reply) are left untouched.
_RAW_OUTPUT = frozenset({"serve", "hook"})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    hook = hook_args(argv)  # also here: `python -m memory_hub.cli hook …` and callers of main()
    if hook is not None:
        from .hooks.__main__ import main as hook_main

        return hook_main(hook)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error (exit 2, message printed), --help or --version (0)
        return int(exc.code or 0)
    streams = sys.stdout, sys.stderr
    if args.command not in _RAW_OUTPUT:  # note names and fields print visibly, never as raw controls
        from .textsafe import VisibleStream

        sys.stdout, sys.stderr = VisibleStream(sys.stdout), VisibleStream(sys.stderr)
    try:
        with _environment_kept():
            return _run(args)
    finally:
        sys.stdout, sys.stderr = streams


def _run(args: argparse.Namespace) -> int:
    from .commands.shell import CliError, load_settings
    from .config import ConfigError

    try:
        try:
            args.settings = load_settings(args)
        except ConfigError as exc:
            if not getattr(args, "reports_config_errors", False):
                raise
            args.settings, args.settings_error = None, str(exc)
        if args.settings is not None:
            args.settings.export_environment()
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep the interpreter's flush quiet
        return 0
    except OSError as exc:
        if os.environ.get("MEMORY_HUB_DEBUG"):
            raise
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - the last line of defence against a traceback
        if os.environ.get("MEMORY_HUB_DEBUG"):
            raise
        print(f"error: unexpected {type(exc).__name__}: {exc} (MEMORY_HUB_DEBUG=1 shows where; "
              "please report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
