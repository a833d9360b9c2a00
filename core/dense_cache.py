"""The per-process cache of exact dense matrices, and exact top-k cosine scoring over them.

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

:func:`cosine_topk` is the exact scorer (numpy partial selection, O(N)) used on a cached matrix.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class DenseCacheKey:
    """Identity of one cacheable dense matrix: (vault key, generation id, database SHA-256)."""

    vault: str
    generation_id: str
    db_sha256: str

    def __post_init__(self) -> None:
        for name in ("vault", "generation_id", "db_sha256"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise TypeError(f"DenseCacheKey.{name} must be a str, got {type(value).__name__} "
                                "(a legacy index has no generation and must not be cached)")
            if not value:
                raise ValueError(f"DenseCacheKey.{name} must not be empty")
        if not _SHA256.fullmatch(self.db_sha256):
            raise ValueError(f"DenseCacheKey.db_sha256 must be 64 lowercase hex digits, got {self.db_sha256!r}")

    @classmethod
    def for_index(cls, resolved: Any) -> DenseCacheKey:
        """The key of a verified index (a ``core.generations.ResolvedIndex``); legacy -> ValueError."""
        if resolved.kind != "immutable_generation":
            raise ValueError(f"the dense cache is never used for a {resolved.kind!r} index")
        return cls(str(resolved.layout.vault.resolve()), resolved.generation_id, resolved.sha256)


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
        self._entries: OrderedDict[DenseCacheKey, DenseMatrix] = OrderedDict()
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
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return entry
            entry = loader()
            if not isinstance(entry, DenseMatrix):
                raise TypeError(f"loader must return a DenseMatrix, got {type(entry).__name__}")
            self._loads += 1
            self._drop(k for k in self._entries if k.vault == key.vault)
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


def cosine_topk(matrix: np.ndarray, query_vec: np.ndarray, k: int,
                mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k rows by cosine similarity: (row indices int64, scores float32), best first.

    Rows must be L2-normalised (the Embedder writes them so); the query is normalised here,
    so ``score = matrix[i] . q / |q|`` is the cosine. ``mask`` (bool [N]) keeps only the
    allowed rows (filters run before ranking). Selection is ``np.partition`` (O(N)), then
    the winners are sorted by score, ties by row index, so results are deterministic.
    Reference: exact maximum inner product search, as in FAISS ``IndexFlatIP``.
    """
    if matrix.ndim != 2 or query_vec.shape != (matrix.shape[1],):
        raise ValueError(f"query of shape {query_vec.shape} does not fit a matrix of shape {matrix.shape}")
    rows = np.arange(matrix.shape[0], dtype=np.int64)
    if mask is not None:
        if mask.dtype != np.bool_ or mask.shape != (matrix.shape[0],):
            raise ValueError(f"mask must be bool [{matrix.shape[0]}], got {mask.dtype} {mask.shape}")
        rows = rows[mask]
    k = min(max(int(k), 0), rows.shape[0])
    if k == 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
    q = query_vec.astype(np.float32) / np.float32(max(float(np.linalg.norm(query_vec)), 1e-12))
    scores = (matrix @ q)[rows]
    kth_best = -np.partition(-scores, k - 1)[k - 1]
    winners = np.flatnonzero(scores >= kth_best)          # ties at the boundary all compete
    winners = winners[np.lexsort((rows[winners], -scores[winners]))][:k]
    return rows[winners], scores[winners].astype(np.float32)
