"""The detached worker hooks hand slow work to: judging usefulness and syncing the index.

Hooks have seconds; a judge call to a local model can take a minute. So a hook saves its input,
starts ``python -m memory_hub.hooks.worker …`` in a new session (it outlives the hook and the
agent's process group) and returns at once. Output goes to ``.memory_hub/logs/worker.log``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from ..config import index_dir


def spawn(vault: Path, *args: str) -> int | None:
    """Start the worker detached; returns its pid, or None when it could not start."""
    log_dir = index_dir(Path(vault)) / "logs"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_dir / "worker.log", "ab")  # noqa: SIM115 - handed to the child
    except OSError:
        return None
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memory_hub.hooks.worker", "--vault", str(vault), *args],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
            cwd=str(vault),
        )
    except OSError:
        return None
    finally:
        log.close()
    return proc.pid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memory_hub.hooks.worker")
    parser.add_argument("--vault", required=True)
    sub = parser.add_subparsers(dest="job", required=True)
    end = sub.add_parser("session-end", help="judge usefulness of the session's injected notes, then sync")
    end.add_argument("--session", required=True)
    end.add_argument("--transcript")
    end.add_argument("--cwd")
    sub.add_parser("sync", help="bring the SQLite index and recall's index up to date")
    sub.add_parser("build-recall", help="build recall's own index")
    hint = sub.add_parser("hint", help="compute the session's hint for its next prompt (a cold hook's lost race)")
    hint.add_argument("--session", required=True)
    args = parser.parse_args(argv)
    vault = Path(args.vault).resolve()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    if args.job == "session-end":
        from ..eval.usefulness import judge_session
        from ..retrieval.session import prune

        summary = judge_session(vault, args.session, args.transcript, args.cwd)
        prune(vault)
        print(f"{stamp} judged session {args.session}: {len(summary['used'])}/{summary['injected']} used "
              f"({summary['judge']}; {summary['fallback'] or 'llm'})", flush=True)
    if args.job == "hint":
        return _hint(vault, args.session, stamp)
    if args.job in ("session-end", "sync"):
        from ..index.sync import sync

        report = sync(vault, progress=False)
        print(f"{stamp} sync: {report.summary()}", flush=True)
    if args.job in ("session-end", "sync", "build-recall"):
        from ..retrieval.recall_index import RecallIndex

        index = RecallIndex(vault)
        index.load()
        print(f"{stamp} recall index: {index.refresh()}", flush=True)
    return 0


def _hint(vault: Path, session_id: str, stamp: str) -> int:
    """Ask for the hint a cold hook could not wait for, and keep it for the session's next prompt."""
    from ..retrieval import hints, session
    from ..services.llm import LLMError

    pending = session.load(vault, session_id).get("hint_pending")
    if not isinstance(pending, dict) or not isinstance(pending.get("prompt"), str):
        return 0
    try:
        terms = hints.ask(pending["prompt"])
    except LLMError as exc:
        session.update(vault, session_id, hint_pending=None, hint_error=str(exc)[:200])
        print(f"{stamp} hint for session {session_id} failed: {exc}", flush=True)
        return 0
    session.update(vault, session_id, hint={"terms": terms, "at": time.time()}, hint_pending=None)
    print(f"{stamp} hint for session {session_id}: {terms}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
