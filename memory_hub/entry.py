"""The ``memory-hub`` command's entry point: a prompt hook goes straight to the lean hook path.

An agent runs ``memory-hub hook claude-code --vault V`` before every prompt. Importing the CLI
(argparse and its helpers) costs that process more than the warm answer itself, so this module
imports nothing but ``sys`` before it knows the command is not a hook; everything else is
``cli.main``.
"""

from __future__ import annotations

import sys


def hook_args(argv: list[str]) -> list[str] | None:
    """``[--vault V] hook AGENT [--vault V]`` → the lean hook entry's arguments (no parser to build:
    an agent runs this before every prompt, and importing every command costs more than the answer)."""
    words = list(argv)
    lead: list[str] = []
    while words[:1] == ["--vault"] and len(words) > 1:
        lead += words[:2]
        del words[:2]
    if len(words) >= 2 and words[0] == "hook" and words[1] in ("claude-code", "codex") and all(
            w == "--vault" or not w.startswith("-") for w in words[2:]):
        return lead + words[1:]
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    hook = hook_args(argv)
    if hook is not None:
        from .hooks.__main__ import main as hook_main

        return hook_main(hook)
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
