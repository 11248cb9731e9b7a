"""The torch half of the export scripts, against torch's own outputs.

torch is a build-time tool and is never installed by ``make test``, so these tests run only when
``MEMORY_HUB_TORCH_PYTHON`` names a Python that has torch and transformers (for instance a
separate venv: ``pip install torch==2.13.0 transformers onnx onnxruntime``):

    MEMORY_HUB_TORCH_PYTHON=/path/to/venv/bin/python .venv/bin/python -m pytest tests/test_export_torch.py

That Python builds a tiny *random* BERT (an embedder and a cross-encoder) in sentence-transformers
layout, computes the reference outputs with torch, and runs ``models/export_hf.py`` /
``models/export_cross_encoder.py`` on it. This process then serves the exported folders with
ONNX Runtime alone, as a user's install would, and compares.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
TORCH_PYTHON = os.environ.get("MEMORY_HUB_TORCH_PYTHON", "")

pytestmark = pytest.mark.skipif(
    not TORCH_PYTHON, reason="set MEMORY_HUB_TORCH_PYTHON to a Python with torch + transformers (build-time only)"
)

WORDS = ("memory hub search note vault link graph index query vector agent prompt session the a of to "
         "and is in database failover replica standby pasta noodles water salt boil deploy error").split()
TEXTS = [
    "memory hub search",
    "the agent asks the vault a query",
    "database failover to the standby replica",
    "boil water and salt the pasta noodles",
    # past max_seq_length (32): both sides must cut at the same place
    " ".join(WORDS * 3),
]
PAIRS = [("database failover", t) for t in TEXTS]

BUILD = r'''
import json, sys
from pathlib import Path
import torch
from transformers import BertConfig, BertForSequenceClassification, BertModel, BertTokenizerFast

root, words = Path(sys.argv[1]), sys.argv[2].split()
texts, pairs = json.loads(sys.argv[3]), json.loads(sys.argv[4])
torch.manual_seed(0)
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, max_position_embeddings=64, initializer_range=0.2)
out = {}
for kind in ("embedder", "reranker"):
    folder = root / kind
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))
    tok.save_pretrained(str(folder))
    if kind == "embedder":
        model = BertModel(cfg).eval()
        model.save_pretrained(str(folder))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32}))
        enc = tok(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        with torch.no_grad():
            h = model(**enc).last_hidden_state
        m = enc["attention_mask"].unsqueeze(-1).float()
        v = (h * m).sum(1) / m.sum(1)
        out["vectors"] = torch.nn.functional.normalize(v, dim=-1).tolist()
    else:
        cfg.num_labels = 1
        model = BertForSequenceClassification(cfg).eval()
        model.save_pretrained(str(folder))
        enc = tok([q for q, _ in pairs], [d for _, d in pairs], padding=True, truncation="only_second",
                  max_length=48, return_tensors="pt")
        with torch.no_grad():
            out["logits"] = model(**enc).logits[:, 0].tolist()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list]]:
    root = tmp_path_factory.mktemp("torch-export")
    done = subprocess.run([TORCH_PYTHON, "-c", BUILD, str(root / "src"), " ".join(WORDS), json.dumps(TEXTS),
                           json.dumps(PAIRS)], check=True, capture_output=True, text=True, timeout=600)
    return root, json.loads(done.stdout.strip().splitlines()[-1])


def _export(script: str, *args: str) -> None:
    subprocess.run([TORCH_PYTHON, str(REPO / "models" / script), *args], check=True, capture_output=True,
                   text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_exported_embedder_serves_torch_vectors(built) -> None:  # noqa: ANN001
    from memory_hub.index.embed import load_embedder

    root, ref = built
    _export("export_hf.py", str(root / "src" / "embedder"), str(root / "fp32"), "--name", "tiny", "--no-quantize")
    _export("export_hf.py", str(root / "src" / "embedder"), str(root / "int8"), "--name", "tiny")
    want = np.array(ref["vectors"], dtype=np.float32)
    manifest = json.loads((root / "fp32" / "manifest.json").read_text())
    assert manifest["max_tokens"] == 32  # sentence-transformers' max_seq_length, not the 64 positions
    fp32 = np.asarray(load_embedder(str(root / "fp32")).embed_passages(TEXTS))
    assert np.min(np.sum(fp32 * want, axis=1)) > 0.9999
    int8 = np.asarray(load_embedder(str(root / "int8")).embed_passages(TEXTS))
    assert np.min(np.sum(int8 * want, axis=1)) > 0.95


def test_exported_cross_encoder_serves_torch_logits(built) -> None:  # noqa: ANN001
    from memory_hub.retrieval.rerank import load_reranker

    root, ref = built
    _export("export_cross_encoder.py", str(root / "src" / "reranker"), str(root / "ce"), "--name", "tiny-ce",
            "--no-quantize", "--max-length", "48")
    reranker = load_reranker(str(root / "ce"))
    got = np.asarray(reranker.logits(PAIRS[0][0], [d for _, d in PAIRS]))[:, 0]
    np.testing.assert_allclose(got, ref["logits"], atol=1e-4)
