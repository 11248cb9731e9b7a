"""``python -m memory_hub.hooks [--vault V] claude-code|codex``: the lean hook entry point.

Same behaviour as ``memory-hub hook …``, which comes here without building the whole CLI (whose
imports cost more than the warm round trip itself). ``install-hooks`` writes ``memory-hub hook …``
with the ``memory-hub`` on PATH, so hooks survive a moved clone; older installs wrote this form.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    vault = None
    if "--vault" in args:
        i = args.index("--vault")
        vault = args[i + 1] if i + 1 < len(args) else None
        del args[i : i + 2]
    agent = args[0] if args else "claude-code"
    # A prompt with a server running is answered by hooks/warm.py, which imports almost nothing;
    # anything else goes on to the full hook with the event already read.
    from .warm import read_event, read_limit, try_warm

    raw = read_event(sys.stdin, read_limit())
    if raw is None:
        return 0  # stdin never closed: nothing to answer (the full path gives up the same way)
    handover = try_warm(agent, vault, raw)
    if handover is None:
        return 0
    import io

    if agent == "codex":
        from .codex import run

        return run(vault, detach=True, stdin=io.StringIO(raw), handover=handover)
    from .claude_code import run as run_claude

    return run_claude("claude-code", vault, detach=True, stdin=io.StringIO(raw), handover=handover)


if __name__ == "__main__":
    sys.exit(main())
