"""ONNX bi-encoder embeddings: :class:`Embedder`, the process-wide Embedder per model, and the dense-matrix cache.

An Embedder opens a resolved model (:func:`core.models.catalog.resolve_model`) with onnxruntime on
the CPU and a `tokenizers` tokenizer (the loading helpers it shares with the reranker are in
:mod:`core.models.onnx`), and turns texts into L2-normalised float32 vectors:

- the tokenizer's truncation and padding are **always overridden** with the model's
  ``max_length`` and pad token (tokenizer files often carry fixed padding, e.g. to 128);
- only the inputs the graph declares are fed (``token_type_ids`` as zeros);
- the output is found by name (config ``output``, else the first output) and must be
  ``[B, S, H]`` (pooled here: masked mean or CLS) or ``[B, H]`` (pooled by the graph);
- texts are sorted by token length and batched, so padding and memory stay bounded,
  and results come back in input order; batched and single results agree to ~1e-6.

The model identity (:attr:`Embedder.identity`) is stored with the vectors; an index built
with one identity is only searched with an Embedder of the same identity.

Below it: the process-wide Embedder per model reference, how a stored model identity is read
back, and the per-process cache of exact dense matrices.

:class:`DenseMatrixCache` keeps, per verified index generation, the whole embedding matrix
(float32 ``[N, H]``) with its chunk ids and note ids (int64 ``[N]``) - numpy arrays only,
never note text. It is keyed by :class:`DenseCacheKey` = (vault, generation id, database
SHA-256), so a changed or republished database can never be served from a stale entry.

- Loading a generation of a vault evicts every other generation of that vault: a new
  generation replaces the old one (the generation asked for last is the one kept).
- Entries are evicted least-recently-used first while the total exceeds ``max_bytes``.
- An entry larger than ``max_bytes`` on its own is returned to the caller but not kept
  (each such request loads again; ``stats.loads`` shows it).
- A legacy single-file index has no generation id or SHA-256; :class:`DenseCacheKey`
  refuses to exist without them, so a legacy index cannot be cached (the spec's rule).
- One lock serialises the cache, loads included: two threads asking for the same key
  load it once.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from core.errors import ModelError
from core.models.catalog import import_backend, resolve_model
from core.models.installed import installed_dir
from core.models.local import KIND_EMBEDDING, ModelFiles, verify_model_files
from core.models.onnx import (
    TEXT_INPUTS,
    encodings_to_feeds,
    input_spec,
    length_order,
    open_session,
    open_tokenizers,
    ort_errors,
    select_output,
)
from core.models.presets import PRESETS

# The texts a model runs once when it is installed (Embedder.self_test, CrossEncoder.self_test).
PROBE_PASSAGE = "Semantic search finds notes by meaning: a query about cooking pasta finds the spaghetti recipe."
PROBE_QUERY = "how do I cook pasta"

# ---------------------------------------------------------------- pooling (pure numpy)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Masked mean of token vectors: sum_t h[b,t]*m[b,t] / max(sum_t m[b,t], 1e-9).

    Sentence-BERT mean pooling (Reimers & Gurevych 2019, arXiv:1908.10084). float32 [B, H].
    """
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * weights).sum(axis=1)
    return summed / np.maximum(weights.sum(axis=1), np.float32(1e-9))


def cls_pool(hidden: np.ndarray) -> np.ndarray:
    """The first token's vector, h[:, 0] (BGE models: Xiao et al. 2023, arXiv:2309.07597). float32 [B, H]."""
    return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows divided by their Euclidean norm (floored at 1e-12 so zero rows stay zero). float32."""
    vectors = vectors.astype(np.float32, copy=False)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


def identity_key(identity: dict[str, Any]) -> str:
    """Canonical JSON of an identity: sorted keys, no spaces; equal identities give equal keys."""
    return json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------- the embedder


class OnnxTextModel:
    """What the embedder and the reranker share: the kind check, the optional backends, verified
    weights, a CPU session and its declared inputs. Subclasses set ``kind``."""

    kind: str = ""

    def __init__(self, files: ModelFiles, *, threads: int | None = None) -> None:
        cfg = files.config
        if cfg.kind != self.kind:
            raise ModelError(
                f"model {cfg.name!r} is a {cfg.kind!r} model, not a {self.kind!r} model", model=cfg.name, kind=cfg.kind
            )
        import_backend("onnxruntime")
        import_backend("tokenizers")
        self.files = files
        self.config = cfg
        self._weights_sha256 = verify_model_files(files)
        self._session = open_session(files, threads=threads)
        self._ort_errors = ort_errors(import_backend("onnxruntime"))
        self._inputs = input_spec(self._session, allowed=TEXT_INPUTS, model=cfg.name)

    @classmethod
    def from_name(cls, name_or_dir: str | Path, *, cache_dir: Path | None = None, threads: int | None = None) -> Self:
        """Resolve a preset or local directory (no download) and open it."""
        return cls(resolve_model(name_or_dir, kind=cls.kind, cache_dir=cache_dir), threads=threads)

    @property
    def identity(self) -> dict[str, Any]:
        raise NotImplementedError  # each model kind says what identifies it

    def identity_key(self) -> str:
        """The identity as a stable JSON string (what the index stores and compares)."""
        return identity_key(self.identity)


class Embedder(OnnxTextModel):
    """Dense text embeddings from an ONNX encoder; see the module docstring for the contract."""

    kind = KIND_EMBEDDING

    def __init__(self, files: ModelFiles, *, threads: int | None = None) -> None:
        super().__init__(files, threads=threads)
        self._output, shape = select_output(self._session, self.config.output, model=self.config.name)
        self._tokenizer, self._plain = open_tokenizers(files, strategy="longest_first")
        self._rank = self._check_rank(shape)
        self._dim: int | None = shape[-1] if isinstance(shape[-1], int) else None
        self._check_dim(self._dim)
        if self._dim is None:
            self._dim = self._probe_dim()

    @property
    def dim(self) -> int:
        """Hidden size of the vectors (from the graph's declared shape, else one probe run)."""
        assert self._dim is not None
        return self._dim

    @property
    def output_name(self) -> str:
        """The graph output the Embedder reads."""
        return self._output

    def _check_rank(self, shape: list[Any]) -> int:
        if len(shape) not in (2, 3):
            raise ModelError(
                f"output {self._output!r} of {self.config.name!r} has shape {shape}; expected "
                "[batch, sequence, hidden] or [batch, hidden]",
                model=self.config.name,
                output=self._output,
                shape=[str(s) for s in shape],
            )
        return len(shape)

    def _check_dim(self, dim: int | None) -> None:
        if dim is not None and self.config.dim is not None and dim != self.config.dim:
            raise ModelError(
                f"output {self._output!r} of {self.config.name!r} has hidden size {dim}, config says {self.config.dim}",
                model=self.config.name,
                expected=self.config.dim,
                actual=dim,
            )

    def _probe_dim(self) -> int:
        """Hidden size of a graph whose output shape is symbolic: run one tiny text."""
        vectors = self._run(self.tokenize(["probe"]))
        self._check_dim(int(vectors.shape[1]))
        return int(vectors.shape[1])

    # ------------------------------------------------------------ identity

    @property
    def identity(self) -> dict[str, Any]:
        """What must match between index time and query time (stored with the vectors)."""
        cfg = self.config
        return {
            "kind": KIND_EMBEDDING,
            "name": cfg.name,
            "revision": cfg.revision,
            "weights_sha256": self._weights_sha256,
            "dim": self.dim,
            "pooling": cfg.pooling if self._rank == 3 else "graph",
            "query_prefix": cfg.query_prefix,
            "passage_prefix": cfg.passage_prefix,
            "max_length": cfg.max_length,
            "normalize": cfg.normalize,
        }

    # ------------------------------------------------------------ embedding

    def tokenize(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """The exact model inputs for one batch of (already prefixed) texts."""
        return encodings_to_feeds(self._tokenizer.encode_batch(list(texts)), self._inputs, type_ids=False)

    def embed_passages(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """float32 [N, dim] vectors of passages (passage prefix applied), in input order."""
        return self._embed([self.config.passage_prefix + t for t in texts], batch_size)

    def embed_query(self, text: str) -> np.ndarray:
        """float32 [dim] vector of one query (query prefix applied)."""
        return self._embed([self.config.query_prefix + text], 1)[0]

    def _embed(self, texts: list[str], batch_size: int) -> np.ndarray:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        lengths = [len(e.ids) for e in self._plain.encode_batch(texts, add_special_tokens=False)]
        order = length_order(lengths)
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._run(self.tokenize([texts[i] for i in idx]))
        return out

    def self_test(self) -> list[str]:
        """Embed one passage and one query (``models install``): [2, dim] finite vectors, unit length when
        the config normalises, else ModelError naming what is wrong. Returns the checks passed."""
        cfg = self.config
        vectors = np.vstack([self.embed_passages([PROBE_PASSAGE]), self.embed_query(PROBE_QUERY)[None, :]])
        problems = []
        if vectors.shape != (2, self.dim) or (cfg.dim is not None and self.dim != cfg.dim):
            problems.append(f"shape {list(vectors.shape)}, expected [2, {cfg.dim or self.dim}]")
        if not np.all(np.isfinite(vectors)):
            problems.append("non-finite values")
        elif cfg.normalize and not np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3):
            problems.append("vectors are not unit length although the config normalises")
        if problems:
            raise ModelError(
                f"model {cfg.name!r} failed its test embedding: " + "; ".join(problems),
                hint="check pooling, output and dim in vaultsearch-model.json (docs/models.md)",
                model=cfg.name,
                problems=problems,
            )
        return ["onnx_loads", "inputs_outputs", "tokenizer", "embedding_dim", "finite"]

    def _run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """One batch through the graph, then pooling and normalisation; shape drift -> ModelError."""
        try:
            hidden = self._session.run([self._output], feeds)[0]
        except self._ort_errors as exc:
            raise ModelError(f"model {self.config.name!r} failed on a batch: {exc}", model=self.config.name) from exc
        if hidden.ndim != self._rank or (self._dim is not None and hidden.shape[-1] != self._dim):
            raise ModelError(
                f"output {self._output!r} of {self.config.name!r} returned shape {list(hidden.shape)}",
                model=self.config.name,
                shape=list(hidden.shape),
            )
        if self._rank == 2:
            pooled = hidden.astype(np.float32, copy=False)
        elif self.config.pooling == "cls":
            pooled = cls_pool(hidden)
        else:
            pooled = mean_pool(hidden, feeds["attention_mask"])
        return l2_normalize(pooled) if self.config.normalize else pooled


# ---------------------------------------------------------------- one Embedder per model, stored identities

META_KEY = "dense_model"
REF_KEY = "model_ref"


def model_reference(model: str | Path) -> str:
    """A preset name as is; an installed model's name -> its folder; anything else is a directory.
    Folders are stored absolute, so a search (by any user who can read them) reloads the same files."""
    text = str(model)
    if text in PRESETS:
        return text
    return str((installed_dir(text) or Path(text).expanduser()).resolve())


def stored_identity(meta_value: Any) -> dict[str, Any] | None:
    """The identity part of a ``dense_model`` meta value (without ``model_ref``), or None."""
    if meta_value is None:
        return None
    value = json.loads(meta_value) if isinstance(meta_value, str) else dict(meta_value)
    return {k: v for k, v in value.items() if k != REF_KEY}


def stored_reference(meta_value: Any) -> str | None:
    """The ``model_ref`` of a ``dense_model`` meta value, or None."""
    if meta_value is None:
        return None
    value = json.loads(meta_value) if isinstance(meta_value, str) else dict(meta_value)
    return value.get(REF_KEY)


_EMBEDDERS: dict[tuple[str, int | None], Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def load_embedder(model: str | Path, *, threads: int | None = None) -> Embedder:
    """The process-wide Embedder of a model (preset or directory), opened once per reference."""
    key = (model_reference(model), threads)
    with _EMBEDDERS_LOCK:
        found = _EMBEDDERS.get(key)
        if found is None:
            found = _EMBEDDERS[key] = Embedder(resolve_model(key[0], kind=KIND_EMBEDDING), threads=threads)
        return found


def clear_model_cache() -> None:
    """Forget every loaded Embedder (tests; a model directory rewritten in place)."""
    with _EMBEDDERS_LOCK:
        _EMBEDDERS.clear()


# ---------------------------------------------------------------- the exact dense matrix cache

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class DenseCacheKey:
    """Identity of one cacheable dense matrix of a whole generation: (vault key, generation id, manifest
    SHA-256). The manifest names every part by its SHA-256, so this key is exact for the generation.

    Per part (``part_key``): a segment's own matrix is keyed by ``(vault key, part SHA-256, dense model
    identity)`` (core.modes.dense_parts), so the matrices of the segments a publish did not change survive
    it; the generation's matrix assembled from them stays keyed by this class."""

    vault: str
    generation_id: str
    manifest_sha256: str

    def __post_init__(self) -> None:
        for name in ("vault", "generation_id", "manifest_sha256"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(
                    f"DenseCacheKey.{name} must be a str, got {type(value).__name__} "
                    "(a legacy index has no generation and must not be cached)"
                )
            if not value:
                raise ValueError(f"DenseCacheKey.{name} must not be empty")
        if not _SHA256.fullmatch(self.manifest_sha256):
            raise ValueError(
                f"DenseCacheKey.manifest_sha256 must be 64 lowercase hex digits, got {self.manifest_sha256!r}"
            )

    @classmethod
    def for_index(cls, resolved: Any) -> DenseCacheKey:
        """The key of a verified index (a ``core.generations.ResolvedIndex``); legacy -> ValueError."""
        if resolved.kind != "immutable_generation":
            raise ValueError(f"the dense cache is never used for a {resolved.kind!r} index")
        return cls(str(resolved.layout.vault.resolve()), resolved.generation_id, resolved.sha256)

    @staticmethod
    def part_key(resolved: Any, part_sha256: str, model_identity: str) -> tuple[str, str, str]:
        """The key a segment's matrix is cached by: (vault key, part SHA-256, model identity). Content-addressed, so it stays valid in every generation that lists the part."""
        if not _SHA256.fullmatch(part_sha256) or not model_identity:
            raise ValueError("a part key needs the part's SHA-256 and a model identity")
        return (str(resolved.layout.vault.resolve()), part_sha256, model_identity)


@dataclass(frozen=True)
class DenseMatrix:
    """Exact vectors of one generation: ``matrix[i]`` embeds chunk ``chunk_ids[i]`` of note ``note_ids[i]``.

    The arrays are made read-only on construction: a cached matrix is shared by every
    search of the process and must not be changed by one of them.
    """

    matrix: np.ndarray
    chunk_ids: np.ndarray
    note_ids: np.ndarray

    def __post_init__(self) -> None:
        if self.matrix.dtype != np.float32 or self.matrix.ndim != 2:
            raise ValueError(f"matrix must be float32 [N, H], got {self.matrix.dtype} {self.matrix.shape}")
        n = self.matrix.shape[0]
        for name in ("chunk_ids", "note_ids"):
            arr = getattr(self, name)
            if arr.dtype != np.int64 or arr.shape != (n,):
                raise ValueError(f"{name} must be int64 [{n}], got {arr.dtype} {arr.shape}")
        for arr in (self.matrix, self.chunk_ids, self.note_ids):
            arr.flags.writeable = False

    @property
    def nbytes(self) -> int:
        return int(self.matrix.nbytes + self.chunk_ids.nbytes + self.note_ids.nbytes)


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was made: loader calls, hits, and entries evicted."""

    loads: int
    hits: int
    evictions: int


class DenseMatrixCache:
    """Byte-bounded LRU of DenseMatrix by DenseCacheKey (see the module docstring)."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._loads = self._hits = self._evictions = 0

    @property
    def stats(self) -> CacheStats:
        return CacheStats(self._loads, self._hits, self._evictions)

    @property
    def current_bytes(self) -> int:
        return sum(entry.nbytes for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get_or_load(self, key: DenseCacheKey, loader: Callable[[], DenseMatrix]) -> DenseMatrix:
        """The cached matrix of ``key``, or ``loader()``'s result (kept when it fits the bound)."""
        if not isinstance(key, DenseCacheKey):
            raise TypeError(f"key must be a DenseCacheKey, got {type(key).__name__}")
        found: DenseMatrix = self._get_or_load(key, loader, DenseMatrix, lambda k: k.vault == key.vault)
        return found

    def _get_or_load(
        self, key: Any, loader: Callable[[], Any], kind: type[Any], replaced: Callable[[Any], bool]
    ) -> Any:
        """The entry of ``key``, or ``loader()``'s (a ``kind``, with ``nbytes``): the entries ``replaced`` names go."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return entry
            entry = loader()
            if not isinstance(entry, kind):
                raise TypeError(f"loader must return a {kind.__name__}, got {type(entry).__name__}")
            self._loads += 1
            self._drop([k for k in self._entries if replaced(k)])
            if entry.nbytes <= self.max_bytes:
                self._entries[key] = entry
                self._shrink_to_bound()
            return entry

    def clear(self) -> None:
        """Forget every entry (counted as evictions)."""
        with self._lock:
            self._drop(self._entries)

    def _drop(self, keys: Any) -> None:
        for key in list(keys):
            del self._entries[key]
            self._evictions += 1

    def _shrink_to_bound(self) -> None:
        total = self.current_bytes
        while total > self.max_bytes and self._entries:
            _, oldest = self._entries.popitem(last=False)
            total -= oldest.nbytes
            self._evictions += 1
