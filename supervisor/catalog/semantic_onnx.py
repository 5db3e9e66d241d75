"""The BERT encoder of ``catalog.semantic_bert`` as an ONNX graph that onnxruntime runs (issue 48).

Same weights, same arithmetic, same vectors as the numpy forward pass (to ~1e-6;
``tests/catalog/test_semantic_bert.py`` compares them), at about half the time a query:
onnxruntime fuses the attention, the layer norms and GELU, and its matrix kernels do
better than numpy's BLAS on a query's ~12 rows (``bench p7``: ~4 ms against ~9 ms).
No ONNX file ships or is downloaded: ``encoder_session`` writes the graph from the
``model.safetensors`` weights at load (~0.7 s, in the engine's worker thread). Used when
``onnx`` and ``onnxruntime`` are installed (the ``search-minilm`` extra has them);
without them ``model = "bert"`` runs the numpy pass.

Not quantized: onnxruntime's dynamic int8 made a query ~1.3 ms but cost fused R@1
0.574 -> 0.519 on ``bench p7``, so the float weights stay.

Concurrency: nothing here awaits; building the session and running it block (the
engine's worker thread). One session, one intra-op thread: a query never has threads
competing with the trio loop for the cores, as numpy's BLAS is capped in ``semantic``.
"""

from __future__ import annotations

import importlib.util
import math
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

OPSET: Final = 17
"""LayerNormalization is an operator from opset 17."""


def onnx_available() -> bool:
    """Whether ``onnx`` and ``onnxruntime`` can be imported (nothing is imported to find out)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


class _Graph:
    """The nodes and constants of the encoder's graph, named as they are added."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.constants: list[Any] = []
        self._count = 0

    def const(self, name: str, value: Any) -> str:
        import numpy as np  # noqa: PLC0415 - the search extra only
        from onnx import numpy_helper  # noqa: PLC0415

        self.constants.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind: str, *inputs: str, **attributes: Any) -> str:
        """A node of one output; its output's name."""
        return self.ops(kind, *inputs, outputs=1, **attributes)[0]

    def ops(self, kind: str, *inputs: str, outputs: int, **attributes: Any) -> list[str]:
        """A node of ``outputs`` outputs; their names."""
        from onnx import helper  # noqa: PLC0415

        self._count += 1
        names = [f"n{self._count}_{index}" for index in range(outputs)]
        self.nodes.append(helper.make_node(kind, list(inputs), names, **attributes))
        return names


def _encoder_graph(config: Mapping[str, Any], weights: Mapping[str, Any]) -> Any:
    """The ModelProto: ``ids`` and ``mask`` (batch, tokens) in, ``hidden`` (batch, tokens, width) out."""
    import numpy as np  # noqa: PLC0415 - the search extra only
    from onnx import TensorProto, helper  # noqa: PLC0415

    heads, width, eps = int(config["num_attention_heads"]), int(config["hidden_size"]), float(config["layer_norm_eps"])
    size = width // heads
    g = _Graph()
    for name, value in {
        "zero": np.array(0, np.int64), "one": np.array(1, np.int64), "onef": np.array(1.0, np.float32),
        "masked": np.array(-1e9, np.float32), "half": np.array(0.5, np.float32),
        "rsqrt2": np.array(1 / math.sqrt(2.0), np.float32), "scale": np.array(1 / math.sqrt(size), np.float32),
        "by_head": np.array([0, 0, heads, size], np.int64), "by_width": np.array([0, 0, width], np.int64),
        "thirds": np.array([width] * 3, np.int64), "axes12": np.array([1, 2], np.int64),
    }.items():  # fmt: skip
        g.const(name, value)

    def linear(x: str, name: str, weight: Any, bias: Any) -> str:
        product = g.op("MatMul", x, g.const(f"{name}.w", np.ascontiguousarray(weight.T)))
        return g.op("Add", product, g.const(f"{name}.b", bias))

    def dense(x: str, name: str) -> str:
        return linear(x, name, weights[f"{name}.weight"], weights[f"{name}.bias"])

    def norm(x: str, name: str) -> str:
        scale, shift = g.const(f"{name}.w", weights[f"{name}.weight"]), g.const(f"{name}.b", weights[f"{name}.bias"])
        return g.op("LayerNormalization", x, scale, shift, axis=-1, epsilon=eps)

    def table(name: str, rows: str) -> str:
        return g.op("Gather", g.const(name, weights[f"embeddings.{name}.weight"]), rows)

    positions = g.op("Range", "zero", g.op("Gather", g.op("Shape", "ids"), "one", axis=0), "one")
    x = g.op("Add", table("word_embeddings", "ids"), table("position_embeddings", positions))
    x = g.op("Add", x, g.const("type0", weights["embeddings.token_type_embeddings.weight"][0]))
    x = norm(x, "embeddings.LayerNorm")
    padding = g.op("Unsqueeze", g.op("Mul", g.op("Sub", "onef", "mask"), "masked"), "axes12")
    for number in range(int(config["num_hidden_layers"])):
        layer = f"encoder.layer.{number}."
        attention = [f"{layer}attention.self.{part}" for part in ("query", "key", "value")]
        qkv_w = np.concatenate([weights[f"{name}.weight"] for name in attention])
        qkv_b = np.concatenate([weights[f"{name}.bias"] for name in attention])
        q, k, v = g.ops("Split", linear(x, f"{layer}qkv", qkv_w, qkv_b), "thirds", outputs=3, axis=-1)
        q = g.op("Transpose", g.op("Reshape", q, "by_head"), perm=[0, 2, 1, 3])
        k = g.op("Transpose", g.op("Reshape", k, "by_head"), perm=[0, 2, 3, 1])
        v = g.op("Transpose", g.op("Reshape", v, "by_head"), perm=[0, 2, 1, 3])
        scores = g.op("Softmax", g.op("Add", g.op("Mul", g.op("MatMul", q, k), "scale"), padding), axis=-1)
        attended = g.op("Reshape", g.op("Transpose", g.op("MatMul", scores, v), perm=[0, 2, 1, 3]), "by_width")
        x = g.op("Add", dense(attended, f"{layer}attention.output.dense"), x)
        x = norm(x, f"{layer}attention.output.LayerNorm")
        hidden = dense(x, f"{layer}intermediate.dense")
        erf = g.op("Erf", g.op("Mul", hidden, "rsqrt2"))
        hidden = g.op("Mul", g.op("Mul", hidden, "half"), g.op("Add", erf, "onef"))  # GELU, exact as BERT's
        x = norm(g.op("Add", dense(hidden, f"{layer}output.dense"), x), f"{layer}output.LayerNorm")
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    graph = helper.make_graph(
        g.nodes, "bert-encoder",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "tokens", width])],
        g.constants,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def encoder_session(config: Mapping[str, Any], weights: Mapping[str, Any]) -> Any:
    """An onnxruntime session of the encoder (blocking, ~1 s for MiniLM-L6): ``run(None, {"ids", "mask"})``.

    The graph goes to a temporary directory with its weights as one external-data file, and
    onnxruntime loads it from there: loaded from bytes, the session held ~+190 MB of RSS; from
    the file with its weights inside it, ~+140 MB; with them beside it, ~+70 MB (the word
    embeddings' rows are read as tokens need them). The directory is removed once loaded.
    """
    import onnx  # noqa: PLC0415 - the search-minilm extra
    import onnxruntime  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    with tempfile.TemporaryDirectory(prefix="mcp-supervisor-bert-") as folder:
        path = str(Path(folder) / "encoder.onnx")
        onnx.save(_encoder_graph(config, weights), path, save_as_external_data=True, location="encoder.weights")
        return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


__all__ = ["encoder_session", "onnx_available"]
