"""ONNX cross-encoder reranking: :class:`CrossEncoder` scores (query, passage) pairs.

Same loading rules as :class:`core.dense.Embedder` (CPU onnxruntime session, declared
inputs only, tokenizer padding/truncation overridden). Pairs are encoded with truncation
strategy ``only_second``: the passage is cut, the query survives. A query so long that
it would leave no room for the passage is first clipped to ``max_length // 2`` tokens
(at a token boundary of the original text), so encoding never fails.

The output (config ``output``, else ``logits``, else the first output) must be ``[B, 1]``
or ``[B]``; the score is ``logits[:, 0]`` as float32 (raw logits: higher is more relevant;
apply a sigmoid for a 0-1 value). ``token_type_ids`` carry the real segment ids (0 for
the query, 1 for the passage) when the graph declares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from core.dense import PROBE_PASSAGE, PROBE_QUERY, Embedder, OnnxTextModel
from core.errors import ModelError
from core.models.local import KIND_EMBEDDING, KIND_RERANKER, ModelFiles
from core.models.onnx import encodings_to_feeds, length_order, open_tokenizers, select_output

DEFAULT_OUTPUT = "logits"


class CrossEncoder(OnnxTextModel):
    """Relevance scores of passages for a query from an ONNX cross-encoder."""

    kind = KIND_RERANKER

    def __init__(self, files: ModelFiles, *, threads: int | None = None) -> None:
        super().__init__(files, threads=threads)
        cfg = self.config
        names = [o.name for o in self._session.get_outputs()]
        wanted = cfg.output or (DEFAULT_OUTPUT if DEFAULT_OUTPUT in names else None)
        self._output, shape = select_output(self._session, wanted, model=cfg.name)
        if len(shape) not in (1, 2) or (len(shape) == 2 and isinstance(shape[1], int) and shape[1] != 1):
            raise ModelError(
                f"output {self._output!r} of {cfg.name!r} has shape {shape}; expected [batch, 1] or [batch]",
                model=cfg.name,
                shape=[str(s) for s in shape],
            )
        self._tokenizer, self._plain = open_tokenizers(files, strategy="only_second")
        self._max_query_tokens = max(1, cfg.max_length // 2)

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies this reranker (reported with reranked results)."""
        cfg = self.config
        return {
            "kind": KIND_RERANKER,
            "name": cfg.name,
            "revision": cfg.revision,
            "weights_sha256": self._weights_sha256,
            "max_length": cfg.max_length,
            "output": self._output,
        }

    def clip_query(self, query: str) -> str:
        """The query, cut after its ``max_length // 2``-th token when longer (keeps room for the passage)."""
        encoding = self._plain.encode(query, add_special_tokens=False)
        if len(encoding.ids) <= self._max_query_tokens:
            return query
        return query[: encoding.offsets[self._max_query_tokens - 1][1]]

    def tokenize(self, query: str, passages: Sequence[str]) -> dict[str, np.ndarray]:
        """The exact model inputs for one batch of pairs (query clipped as documented)."""
        pairs = [(self.clip_query(query), p) for p in passages]
        return encodings_to_feeds(self._tokenizer.encode_batch(pairs), self._inputs, type_ids=True)

    def score(self, query: str, passages: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """float32 [N] relevance scores (logits[:, 0]), in the order of ``passages``."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = np.empty(len(passages), dtype=np.float32)
        if not passages:
            return out
        lengths = [len(e.ids) for e in self._plain.encode_batch(list(passages), add_special_tokens=False)]
        order = length_order(lengths)
        for start in range(0, len(passages), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._run(self.tokenize(query, [passages[i] for i in idx]))
        return out

    def self_test(self) -> list[str]:
        """Score two pairs (``models install``): two finite numbers, else ModelError. Returns the checks passed."""
        scores = self.score(PROBE_QUERY, [PROBE_PASSAGE, "An unrelated note about tax forms."])
        if scores.shape != (2,) or not np.all(np.isfinite(scores)):
            raise ModelError(f"reranker {self.config.name!r} gave scores {scores.tolist()}", model=self.config.name)
        return ["onnx_loads", "inputs_outputs", "tokenizer", "scores_finite"]

    def _run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        try:
            logits = self._session.run([self._output], feeds)[0]
        except self._ort_errors as exc:
            raise ModelError(f"reranker {self.config.name!r} failed on a batch: {exc}", model=self.config.name) from exc
        batch = feeds["input_ids"].shape[0]
        if logits.ndim == 1 and logits.shape[0] == batch:
            return logits.astype(np.float32, copy=False)
        if logits.ndim == 2 and logits.shape[0] == batch and logits.shape[1] == 1:
            return logits[:, 0].astype(np.float32)
        raise ModelError(
            f"output {self._output!r} of {self.config.name!r} returned shape {list(logits.shape)}",
            model=self.config.name,
            shape=list(logits.shape),
        )


def check_model(files: ModelFiles) -> dict[str, Any]:
    """Open a model of either kind (digests, graph, inputs, output, tokenizer) and run its self-test; the
    check ``models install`` runs (here because this module sees both kinds). A problem -> ModelError."""
    model: Embedder | CrossEncoder = Embedder(files) if files.config.kind == KIND_EMBEDDING else CrossEncoder(files)
    checks = model.self_test()
    return {
        "kind": files.config.kind,
        "model_name": files.config.name,
        "dim": model.dim if isinstance(model, Embedder) else None,
        "weights_sha256": model.identity["weights_sha256"],
        "location": str(files.model_path.parent),
        "checks": ["files", "config", *checks],
    }
