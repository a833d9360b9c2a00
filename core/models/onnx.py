"""Opening an ONNX text model of a local model directory: the session, its inputs and output, the tokenizers.

Shared by the bi-encoder (:mod:`core.dense`) and the cross-encoder (:mod:`core.rerank`). A graph
onnxruntime cannot load, an input signature we cannot feed, an absent output or an unreadable
tokenizer is a typed ``ModelError``; the optional backends are imported through
:func:`core.models.catalog.import_backend` (a missing one is a typed error naming the extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from core.errors import ModelError
from core.models.catalog import import_backend
from core.models.local import ModelFiles

TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_NUMPY_INT = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
_FALLBACK_PAD_TOKENS = ("[PAD]", "<pad>")


def ort_errors(ort: ModuleType) -> tuple[type[BaseException], ...]:
    """onnxruntime's own exception classes (they derive from Exception, not RuntimeError)."""
    state = ort.capi.onnxruntime_pybind11_state
    return tuple(
        getattr(state, n)
        for n in (
            "Fail",
            "InvalidArgument",
            "InvalidGraph",
            "InvalidProtobuf",
            "NoSuchFile",
            "NotImplemented",
            "RuntimeException",
        )
        if hasattr(state, n)
    )


def open_session(files: ModelFiles, *, threads: int | None = None) -> Any:
    """An onnxruntime CPU InferenceSession with full graph optimisation; bad graphs -> ModelError."""
    ort = import_backend("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(str(files.model_path), sess_options=options, providers=["CPUExecutionProvider"])
    except ort_errors(ort) as exc:
        raise ModelError(
            f"onnxruntime cannot load {files.model_path}: {exc}", model=files.config.name, path=str(files.model_path)
        ) from exc


def input_spec(session: Any, *, allowed: Sequence[str], model: str) -> dict[str, type]:
    """Declared input name -> numpy dtype; inputs we cannot feed or non-integer ones -> ModelError."""
    spec: dict[str, type] = {}
    problems: list[str] = []
    for node in session.get_inputs():
        if node.name not in allowed:
            problems.append(f"unsupported input {node.name!r} (we feed {list(allowed)})")
        elif node.type not in _NUMPY_INT:
            problems.append(f"input {node.name!r} has type {node.type}, expected int64 or int32")
        else:
            spec[node.name] = _NUMPY_INT[node.type]
    for required in ("input_ids", "attention_mask"):
        if required not in spec and not problems:
            problems.append(f"the graph does not declare {required!r}")
    if problems:
        raise ModelError(
            f"model {model!r} has an unusable input signature: " + "; ".join(problems), model=model, problems=problems
        )
    return spec


def select_output(session: Any, wanted: str | None, *, model: str) -> tuple[str, list[Any]]:
    """(name, declared shape) of the configured output, else the first; absent name -> ModelError."""
    outputs = session.get_outputs()
    by_name = {o.name: o for o in outputs}
    if wanted is None:
        return outputs[0].name, list(outputs[0].shape or [])
    if wanted not in by_name:
        raise ModelError(
            f"model {model!r} has no output {wanted!r}; it has {sorted(by_name)}",
            model=model,
            output=wanted,
            outputs=sorted(by_name),
        )
    return wanted, list(by_name[wanted].shape or [])


def resolve_padding(tokenizer: Any, files: ModelFiles) -> tuple[int, str]:
    """(pad_id, pad_token): config overrides, else tokenizer.json's padding, else [PAD] / <pad>."""
    cfg = files.config
    if cfg.pad_token is not None:
        token_id = tokenizer.token_to_id(cfg.pad_token)
        if token_id is None or (cfg.pad_id is not None and cfg.pad_id != token_id):
            raise ModelError(
                f"pad token {cfg.pad_token!r} has id {token_id} in the tokenizer, config says {cfg.pad_id}",
                model=cfg.name,
            )
        return token_id, cfg.pad_token
    if cfg.pad_id is not None:
        token = tokenizer.id_to_token(cfg.pad_id)
        if token is None:
            raise ModelError(f"pad id {cfg.pad_id} is not in the tokenizer vocabulary", model=cfg.name)
        return cfg.pad_id, token
    if tokenizer.padding is not None:
        return int(tokenizer.padding["pad_id"]), str(tokenizer.padding["pad_token"])
    for token in _FALLBACK_PAD_TOKENS:
        if tokenizer.token_to_id(token) is not None:
            return tokenizer.token_to_id(token), token
    raise ModelError(
        f"cannot tell the pad token of {files.tokenizer_path}; set pad_token in the config", model=cfg.name
    )


def open_tokenizers(files: ModelFiles, *, strategy: str) -> tuple[Any, Any]:
    """(batch tokenizer, plain tokenizer).

    The batch tokenizer truncates to ``max_length`` with ``strategy`` and pads to the
    longest text of each batch with the model's pad token, whatever tokenizer.json says.
    The plain copy neither truncates nor pads: it measures lengths for sorting.
    """
    tokenizers = import_backend("tokenizers")
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(files.tokenizer_path))
    except Exception as exc:  # tokenizers raises a bare Exception for any unreadable file
        raise ModelError(
            f"cannot read tokenizer {files.tokenizer_path}: {exc}",
            model=files.config.name,
            path=str(files.tokenizer_path),
        ) from exc
    pad_id, pad_token = resolve_padding(tokenizer, files)
    plain = tokenizers.Tokenizer.from_str(tokenizer.to_str())
    plain.no_truncation()
    plain.no_padding()
    tokenizer.enable_truncation(max_length=files.config.max_length, strategy=strategy)
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
    return tokenizer, plain


def encodings_to_feeds(encodings: Sequence[Any], spec: dict[str, type], *, type_ids: bool) -> dict[str, np.ndarray]:
    """Model inputs from padded encodings; ``token_type_ids`` are zeros unless ``type_ids``."""
    feeds: dict[str, np.ndarray] = {}
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    for name, dtype in spec.items():
        if name == "input_ids":
            feeds[name] = ids.astype(dtype, copy=False)
        elif name == "attention_mask":
            feeds[name] = np.array([e.attention_mask for e in encodings], dtype=dtype)
        elif type_ids:
            feeds[name] = np.array([e.type_ids for e in encodings], dtype=dtype)
        else:
            feeds[name] = np.zeros(ids.shape, dtype=dtype)
    return feeds


def length_order(lengths: Sequence[int]) -> np.ndarray:
    """Indices sorting texts longest first (stable), so each batch holds similar lengths."""
    return np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
