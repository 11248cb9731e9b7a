"""The usefulness judge: did the assistant actually use the notes recall showed it?

Run at session end by a detached worker. For each note injected during the session it decides
whether the assistant used it: quoted it, applied its rule, paraphrased it, or opened the file.
Appearing in the block does not count, so only the assistant's own words and tool calls are
evidence. With a local OpenAI-compatible endpoint configured (``MEMORY_HUB_LLM_URL``, see
``services/llm.py``) a model is asked for JSON at temperature 0; without one, or when it fails, a
deterministic heuristic decides. Either way verdicts are checked against the injected set: a path
the judge invents is dropped, never written. Notes that pass get a ``useful`` event in the usage
log (``vault/usage.py``); the notes themselves are never written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..retrieval.recall_index import tokens

MAX_TRANSCRIPT_CHARS = 16_000
_COMMON = frozenset("""use using used note notes file files step steps run make new add change check set get see
one two first last also like just need want way work time case fix test code""".split())

SYSTEM = (
    "You judge whether an AI coding assistant used notes from its memory during a session. A note "
    "counts as used only if the assistant quoted it, applied its rule or procedure, paraphrased its "
    "content, or opened the file. Merely being listed in the memory block does NOT count. Answer with "
    "JSON only: {\"verdicts\": [{\"path\": \"<path exactly as given>\", \"used\": true|false, "
    "\"how\": \"quoted|applied|paraphrased|opened|none\"}]}"
)


@dataclass
class Verdict:
    path: str
    used: bool
    how: str
    judge: str  # llm | heuristic


def _distinctive(text: str) -> set[str]:
    return {t for t in tokens(text) if t not in _COMMON and (len(t) > 3 or not t.isascii())}


def heuristic(injected: Sequence[dict[str, Any]], assistant_text: str, opened: Sequence[str]) -> list[Verdict]:
    """Deterministic verdicts from the assistant's words and the files it opened."""
    said = assistant_text.lower()
    said_terms = set(tokens(assistant_text))
    opened_set = set(opened)
    out = []
    for note in injected:
        path = str(note.get("path", ""))
        title = str(note.get("title", "") or "")
        stem = PurePosixPath(path).stem.lower()
        how = "none"
        if path in opened_set:
            how = "opened"
        elif path.lower() in said or (len(stem) >= 6 and stem in said) or (len(title) >= 6 and title.lower() in said):
            how = "quoted"
        else:
            terms = _distinctive(f"{title} {note.get('description', '')}")
            hit = terms & said_terms
            if len(terms) >= 4 and len(hit) >= 4 and len(hit) / len(terms) >= 0.5:
                how = "paraphrased"
        out.append(Verdict(path, how != "none", how, "heuristic"))
    return out


def _llm_prompt(injected: Sequence[dict[str, Any]], assistant_text: str, opened: Sequence[str]) -> str:
    notes = [{"path": n.get("path"), "title": n.get("title"), "description": n.get("description", "")}
             for n in injected]
    text = assistant_text[-MAX_TRANSCRIPT_CHARS:]
    return ("Notes shown to the assistant:\n" + json.dumps(notes, ensure_ascii=False, indent=1)
            + "\n\nFiles the assistant opened:\n" + json.dumps(list(opened), ensure_ascii=False)
            + "\n\nWhat the assistant wrote (most recent part of the session):\n" + text)


def judge_llm(injected: Sequence[dict[str, Any]], assistant_text: str, opened: Sequence[str],
              config: Any = None) -> list[Verdict]:
    """Ask the configured model; raises ``services.llm.LLMError`` when it cannot answer."""
    from ..services.llm import LLMError, chat_json

    reply = chat_json(SYSTEM, _llm_prompt(injected, assistant_text, opened), config)
    items = reply.get("verdicts") if isinstance(reply, dict) else reply
    if not isinstance(items, list):
        raise LLMError("judge reply has no 'verdicts' list")
    allowed = {str(n.get("path")) for n in injected}
    out: dict[str, Verdict] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        path = item.get("path")
        if not isinstance(path, str) or path not in allowed or path in out:
            continue  # an invented or repeated path is ignored: the judge only confirms what was shown
        used = item.get("used") is True
        how = str(item.get("how") or ("used" if used else "none"))[:20]
        out[path] = Verdict(path, used, how if used else "none", "llm")
    for path in allowed - set(out):
        out[path] = Verdict(path, False, "none", "llm")
    return [out[str(n.get("path"))] for n in injected if str(n.get("path")) in out]


def judge(injected: Sequence[dict[str, Any]], assistant_text: str, opened: Sequence[str] = (),
          use_llm: bool | None = None) -> tuple[list[Verdict], str | None]:
    """Verdicts for ``injected``, and the reason the LLM was not used (None when it was)."""
    from ..services.llm import LLMError, configured

    if not injected:
        return [], None
    config = configured() if use_llm is not False else None
    if config is None:
        return heuristic(injected, assistant_text, opened), "no LLM endpoint configured"
    try:
        verdicts = judge_llm(injected, assistant_text, opened, config)
    except LLMError as exc:
        return heuristic(injected, assistant_text, opened), f"LLM failed: {exc}"
    # Opening the file is a fact, not an opinion: it counts whatever the model said.
    opened_set = set(opened)
    for v in verdicts:
        if not v.used and v.path in opened_set:
            v.used, v.how = True, "opened"
    return verdicts, None


def judge_session(vault: Path, session_id: str, transcript_path: str | None, cwd: str | None = None,
                  write: bool = True) -> dict[str, Any]:
    """Judge one session's injected notes and record a ``useful`` usage event for each one used."""
    from ..hooks.transcript import assistant_text, opened_files, read_tail, relative_to_vault
    from ..retrieval import session
    from ..vault.usage import record_useful
    from . import telemetry

    record = session.load(vault, session_id)
    injected = [e for e in record.get("injected", []) if isinstance(e, dict) and isinstance(e.get("path"), str)]
    judged = set(record.get("judged", []))
    injected = [e for e in injected if e["path"] not in judged]
    messages = read_tail(transcript_path, max_bytes=2 * 1024 * 1024)
    opened = [r for r in (relative_to_vault(vault, p, cwd) for p in opened_files(messages)) if r]
    verdicts, why_not_llm = judge(injected, assistant_text(messages), opened)
    used = [v.path for v in verdicts if v.used]
    written = record_useful(vault, used) if write and used else []
    if write:
        session.update(vault, session_id, judged=sorted(judged | {v.path for v in verdicts}))
    summary = {"event": "usefulness", "session": session_id, "injected": len(injected), "used": used,
               "written": sorted(written), "judge": verdicts[0].judge if verdicts else None,
               "fallback": why_not_llm, "verdicts": [v.__dict__ for v in verdicts]}
    telemetry.record(vault, summary)
    return summary


