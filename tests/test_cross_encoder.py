"""The ONNX cross-encoder backend end to end, on a tiny random BERT built here without torch.

No reachable package ships cross-encoder weights, so the model is made at test time: a 1-layer
BERT (hidden 32) as an onnx.helper graph with random weights and a WordPiece ``tokenizer.json``.
It proves the plumbing (pair encoding, truncation, batching, scoring, search integration), not
ranking quality.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_hub.retrieval.cross_encoder import CrossEncoderReranker, folder_settings
from memory_hub.retrieval.rerank import SPEC_ENV, RerankerError, blend, load_reranker
from memory_hub.retrieval.search import search

REPO = Path(__file__).resolve().parents[1]
HIDDEN, HEADS, FFN, MAX_POS = 32, 2, 64, 128
WORDS = (
    "the a of and to in is it when primary server dies promote standby replica repoint connection "
    "string database failover wal records are shipped continuously hot boil salted water add noodles "
    "drain after nine minutes friday deploy log release printed err 042 twice then recovered memory "
    "long note word how do i restart indexer cooking pasta old mysql notes we by hand 2019"
).split()
NOTES = {
    "db-failover.md": "---\ntitle: Database failover\n---\nWhen the primary server dies, promote the standby "
                      "replica and repoint the connection string.\n",
    "streaming-replication.md": "---\ntitle: Streaming replication\n---\nWAL records are shipped continuously "
                                "to a hot standby database.\n",
    "pasta.md": "---\ntitle: Cooking pasta\n---\nBoil salted water, add the noodles, drain after nine minutes.\n",
    "deploy-log.md": "---\ntitle: Friday deploy log\n---\nThe release printed ERR_042 twice and then recovered.\n",
    "old-failover.md": "---\ntitle: Old MySQL failover notes\n---\nIn 2019 we promoted the MySQL replica by hand.\n",
}


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789_.,?")
    vocab = specials + sorted(set(WORDS)) + chars + [f"##{c}" for c in chars]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(dict.fromkeys(vocab))}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.save(str(path))


def _graph(vocab: int, seed: int, sign: float, hidden: int = HIDDEN, layers: int = 1, heads: int = HEADS,
           ffn: int = FFN, max_pos: int = MAX_POS):  # noqa: ANN202 - onnx ModelProto
    """BERT-like cross-encoder: embeddings + encoder layers + tanh pooler on [CLS] + 1-logit head.

    Defaults are tiny; ``hidden=384, layers=6, heads=12, ffn=1536`` has MiniLM-L6's shape and cost.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def w(name: str, *shape: int, scale: float = 0.3) -> str:
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(kind: str, ins: list[str], out: str, **attrs) -> str:  # noqa: ANN003
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    def ln(x: str, name: str) -> str:
        return op("LayerNormalization", [x, const(f"{name}.g", np.ones(hidden, np.float32)),
                                         const(f"{name}.b", np.zeros(hidden, np.float32))], name, axis=-1)

    def dense(x: str, nin: int, nout: int, name: str) -> str:
        return op("Add", [op("MatMul", [x, w(f"{name}.w", nin, nout)], f"{name}.mm"), w(f"{name}.b", nout)], name)

    seq = op("Shape", ["input_ids"], "seq", start=1, end=2)
    pos = op("Slice", [w("pos", max_pos, hidden), const("zero", np.array([0], np.int64)), seq,
                       const("axis0", np.array([0], np.int64))], "pos.rows")
    x = op("Add", [op("Gather", [w("word", vocab, hidden, scale=1.0), "input_ids"], "word.rows"),
                   op("Gather", [w("type", 2, hidden), "token_type_ids"], "type.rows")], "emb0")
    x = ln(op("Add", [x, pos], "emb1"), "emb.ln")
    hd = hidden // heads
    split = const("split", np.array([0, 0, heads, hd], np.int64))
    merge = const("merge", np.array([0, 0, hidden], np.int64))
    maskf = op("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    bias = op("Mul", [op("Sub", [const("one", np.array(1, np.float32)), maskf], "mask.inv"),
                      const("neg", np.array(-1e4, np.float32))], "mask.neg")
    bias = op("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask.bias")
    scale = const("scale", np.array(hd ** -0.5, np.float32))
    half, one_b, rs2 = (const(n, np.array(v, np.float32)) for n, v in (("half", 0.5), ("one_b", 1), ("rs2", 2 ** -0.5)))
    for i in range(layers):
        p = f"l{i}."
        q, k, v = (op("Transpose", [op("Reshape", [dense(x, hidden, hidden, p + n), split], f"{p}{n}.r")],
                      f"{p}{n}.t", perm=perm)
                   for n, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])))
        scores = op("Add", [op("Mul", [op("MatMul", [q, k], p + "qk"), scale], p + "qk.s"), bias], p + "scores")
        ctx = op("MatMul", [op("Softmax", [scores], p + "probs", axis=-1), v], p + "ctx")
        ctx = op("Reshape", [op("Transpose", [ctx], p + "ctx.t", perm=[0, 2, 1, 3]), merge], p + "ctx.r")
        x = ln(op("Add", [x, dense(ctx, hidden, hidden, p + "ao")], p + "res1"), p + "ln1")
        mid = dense(x, hidden, ffn, p + "fi")
        erf = op("Erf", [op("Mul", [mid, rs2], p + "g.s")], p + "g.erf")
        gelu = op("Mul", [op("Mul", [mid, half], p + "g.half"), op("Add", [one_b, erf], p + "g.1p")], p + "gelu")
        x = ln(op("Add", [x, dense(gelu, ffn, hidden, p + "fo")], p + "res2"), p + "ln2")
    cls = op("Gather", [x, const("cls.idx", np.array(0, np.int64))], "cls", axis=1)
    pooled = op("Tanh", [dense(cls, hidden, hidden, "pool")], "pooled")
    head = dense(pooled, hidden, 1, "head")
    op("Mul", [head, const("sign", np.array(sign, np.float32))], "logits")
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
            for n in ("input_ids", "attention_mask", "token_type_ids")]
    graph = helper.make_graph(nodes, "tiny-cross-encoder", ints,
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def make_cross_encoder(folder: Path, *, seed: int = 7, sign: float = 1.0, max_length: int | None = 64,
                       **shape: int) -> Path:
    """A cross-encoder folder with random weights; ``shape`` overrides the graph's sizes."""
    import onnx
    from tokenizers import Tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    _tokenizer(folder / "tokenizer.json")
    vocab = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size()
    onnx.save_model(_graph(vocab, seed, sign, **shape), str(folder / "model.onnx"))
    max_pos = shape.get("max_pos", MAX_POS)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "max_position_embeddings": max_pos,
                                                    "id2label": {"0": "LABEL_0"}}))
    if max_length:
        (folder / "manifest.json").write_text(json.dumps({"model": "tiny-random", "max_length": max_length}))
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny")


DOCS = [
    "When the primary server dies, promote the standby replica.",
    "Boil salted water, add the noodles, drain after nine minutes.",
    "The release printed ERR_042 twice and then recovered.",
    "WAL records are shipped continuously to a hot standby.",
]


def test_load_reranker_serves_a_folder(tiny: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rr = load_reranker(str(tiny))
    assert isinstance(rr, CrossEncoderReranker)
    assert rr.name == "cross-encoder/tiny-random" and rr.max_length == 64 and rr.activation == "sigmoid"
    monkeypatch.setenv(SPEC_ENV, str(tiny))
    assert isinstance(load_reranker("auto"), CrossEncoderReranker)


def test_scores_are_deterministic_and_differ_per_doc(tiny: Path) -> None:
    rr = load_reranker(str(tiny))
    a = rr.rerank("database failover", DOCS)
    assert len(a) == len(DOCS) and all(isinstance(x, float) and 0.0 < x < 1.0 for x in a)
    assert len({round(x, 6) for x in a}) == len(DOCS)
    assert rr.rerank("database failover", DOCS) == a
    assert CrossEncoderReranker(tiny).rerank("database failover", DOCS) == a  # a fresh session agrees
    # the score depends on the query, and on each doc alone: input order and batch-mates do not matter
    assert rr.rerank("cooking pasta", DOCS) != a
    np.testing.assert_allclose(rr.rerank("database failover", DOCS[::-1])[::-1], a, atol=1e-5)
    np.testing.assert_allclose([rr.rerank("database failover", [d])[0] for d in DOCS], a, atol=1e-5)
    assert CrossEncoderReranker(tiny, batch=1).rerank("database failover", DOCS) == pytest.approx(a, abs=1e-5)
    assert rr.rerank("anything", []) == []


def test_raw_logits_when_asked(tiny: Path, tmp_path: Path) -> None:
    raw = make_cross_encoder(tmp_path / "raw")
    (raw / "manifest.json").write_text(json.dumps({"model": "tiny-raw", "max_length": 64, "activation": "none"}))
    logits = CrossEncoderReranker(raw).rerank("database failover", DOCS)
    probs = CrossEncoderReranker(tiny).rerank("database failover", DOCS)
    np.testing.assert_allclose(1 / (1 + np.exp(-np.array(logits))), probs, atol=1e-6)


def test_long_docs_are_cut_before_the_query(tiny: Path) -> None:
    rr = load_reranker(str(tiny))
    query = "how do i restart the indexer"
    long_doc = " ".join(WORDS * 20)
    pair = rr.encode_pair(query, long_doc)
    assert len(pair.ids) == rr.max_length == 64
    q_ids = rr._tok.encode(query, add_special_tokens=False).ids
    assert pair.ids[: len(q_ids) + 2] == [2, *q_ids, 3]  # [CLS] query [SEP]: the query is whole
    assert pair.ids[-1] == 3 and pair.type_ids[-1] == 1 and pair.type_ids[0] == 0
    # the cut doc scores exactly like the doc's own first words that fit
    fits = 64 - 3 - len(q_ids)
    head = " ".join(long_doc.split()[:fits])
    assert rr.encode_pair(query, head).ids == pair.ids
    assert rr.rerank(query, [long_doc]) == pytest.approx(rr.rerank(query, [head]), abs=1e-6)
    # a query longer than the window still leaves the doc half of it
    huge = rr.encode_pair(" ".join(WORDS * 5), "pasta note")
    assert len(huge.ids) == 64 and huge.ids[-3:] == [rr._tok.token_to_id("pasta"), rr._tok.token_to_id("note"), 3]


def test_settings_and_clear_errors(tmp_path: Path, tiny: Path) -> None:
    assert folder_settings(tiny)["label_index"] == 0
    cfg_only = make_cross_encoder(tmp_path / "cfg", max_length=None)
    assert folder_settings(cfg_only)["max_length"] == MAX_POS  # from config.json when no manifest
    (cfg_only / "manifest.json").write_text(json.dumps({"activation": "tanh"}))
    with pytest.raises(RerankerError, match="activation"):
        load_reranker(str(cfg_only))
    (cfg_only / "manifest.json").write_text("{not json")
    with pytest.raises(RerankerError, match="cannot read"):
        load_reranker(str(cfg_only))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{}")
    with pytest.raises(RerankerError, match="needs model.onnx"):
        load_reranker(str(broken))
    (broken / "model.onnx").write_bytes(b"not a model")
    (broken / "tokenizer.json").write_text((tiny / "tokenizer.json").read_text())
    with pytest.raises(RerankerError, match="onnxruntime cannot load"):
        load_reranker(str(broken))


def _run(store, reranker, query: str = "ERR_042 database failover"):  # noqa: ANN001, ANN202
    return search(store, query, k=5, mode="hybrid+rerank", explain=True, reranker=reranker)


def test_search_runs_the_cross_encoder_and_keeps_exact_ids_on_top(make_vault, tmp_path: Path) -> None:
    _, store = make_vault(dict(NOTES))
    fused = search(store, "ERR_042 database failover", k=5, mode="hybrid")
    assert fused.hits[0].path == "deploy-log.md" and fused.hits[0].exact
    # pick the sign of the head so that the reranker does NOT like the exact match best
    for sign in (1.0, -1.0):
        rr = CrossEncoderReranker(make_cross_encoder(tmp_path / f"ce{sign}", sign=sign))
        result = _run(store, rr)
        by_path = {h.path: h.rerank["score"] for h in result.hits}
        if by_path["deploy-log.md"] < max(by_path.values()):
            break
    assert by_path["deploy-log.md"] < max(by_path.values())
    assert result.hits[0].path == "deploy-log.md" and result.hits[0].exact  # not buried
    assert "rerank" in result.timings_ms
    for hit in result.hits:  # explain says what the reranker did, per hit
        assert hit.rerank["model"] == "cross-encoder/tiny-random"
        assert {"score", "before", "after"} <= set(hit.rerank)
    assert [h.rerank["after"] for h in result.hits] == list(range(1, len(result.hits) + 1))
    # the final order is the position blend of retrieval order and the cross-encoder's scores
    free = _run(store, rr, "database failover replica")
    head = sorted(free.hits, key=lambda h: h.rerank["before"])
    expected = blend([h.path for h in head], [h.rerank["score"] for h in head])
    assert [h.path for h in free.hits] == [p for p, _ in expected]
    assert len({h.rerank["score"] for h in free.hits}) == len(free.hits) > 1


def test_rerank_depth_comes_from_the_manifest(make_vault, tiny: Path, tmp_path: Path) -> None:
    """Cost is depth × pair length: a manifest's ``depth`` limits how many candidates are read."""
    _, store = make_vault(dict(NOTES))
    assert CrossEncoderReranker(tiny).depth == 20
    shallow = tmp_path / "shallow"
    shutil.copytree(tiny, shallow)
    manifest = json.loads((shallow / "manifest.json").read_text())
    (shallow / "manifest.json").write_text(json.dumps(manifest | {"depth": 2}))
    rr = CrossEncoderReranker(shallow)
    assert rr.depth == 2 and CrossEncoderReranker(tiny, depth=3).depth == 3
    result = search(store, "database failover replica", k=5, mode="hybrid+rerank", explain=True, reranker=rr)
    assert len(result.hits) > 2
    assert sum(1 for h in result.hits if h.rerank) == 2  # only the first two were read


def test_quantize_only_export_serves(tiny: Path, tmp_path: Path) -> None:
    """The exporter's torch-free half: INT8-quantize an ONNX cross-encoder into a serving folder."""
    sys.path.insert(0, str(REPO / "models"))
    try:
        import export_cross_encoder as ex
    finally:
        sys.path.remove(str(REPO / "models"))
    out = ex.quantize_folder(tiny / "model.onnx", tiny / "tokenizer.json", tmp_path / "q8", name="tiny-q8",
                             config=json.loads((tiny / "config.json").read_text()), max_length=64)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"] == "onnx-int8" and manifest["activation"] == "sigmoid"
    assert manifest["max_length"] == 64 and manifest["label_index"] == 0
    q8 = load_reranker(str(out))
    assert q8.name == "cross-encoder/tiny-q8"
    fp = np.array(CrossEncoderReranker(tiny).rerank("database failover", DOCS))
    got = np.array(q8.rerank("database failover", DOCS))
    assert np.abs(got - fp).max() < 0.1 and not np.array_equal(got, fp)
    # INT8 scales activations per batch: by default each pair runs alone, so its score is its own
    alone = [q8.rerank("database failover", [d])[0] for d in DOCS]
    assert got.tolist() == alone
    batched = CrossEncoderReranker(out, batch=len(DOCS)).rerank("database failover", DOCS)
    assert batched != alone  # what batching would have done to the same pairs
    subprocess.run([sys.executable, str(REPO / "models" / "export_cross_encoder.py"), "--help"],
                   check=True, capture_output=True)


def test_serving_never_imports_torch(tiny: Path) -> None:
    code = ("import sys; from memory_hub.retrieval.rerank import load_reranker;"
            f"r = load_reranker({str(tiny)!r}); r.rerank('q', ['d']);"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
