"""Dense matrices per segment (issue 29): what the dense modes score a generation of several segments with.

A segment is immutable and named by its SHA-256, so its vectors are loaded once per process and kept in
:data:`PART_CACHE` keyed by (vault, part SHA-256, dense model identity): :class:`PartMatrix`, ALL the
segment's vectors (its dead notes' rows too: which rows are dead depends on the generation, not on the
part), ordered by note path then chunk order. A generation's matrix is assembled from its parts
(:func:`assemble`): each part's rows minus the notes ITS tombstone lists (dead sets are per segment: an
id dead in an old segment may be live in a newer one), merged into one path order. So

- a publish that adds one segment (a one-note edit) loads only that segment's vectors
  (``PART_CACHE.stats.loads`` counts it); the unchanged segments' matrices are reused;
- rows are in (note path, chunk order) in every generation, one segment or eleven, so a tie (broken on
  the row index by ``core.ranking.scoring.best_row_per_group``) is broken on the path, never on a
  segment's order or its ids, and the live rows form exactly the matrix a cold build of the live notes
  holds (the same product, bit for bit).

A part whose vectors carry another model identity than the generation's fails closed
(``DenseIncompleteError``: the part must be embedded again), never mixed into one ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.dense import META_KEY, DenseMatrix, DenseMatrixCache, identity_key, stored_identity
from core.errors import DenseIncompleteError
from core.index.tables.chunk_vectors import path_ordered_vector_rows
from core.index.tables.meta import get_meta

# Past this many runs of consecutive rows, a part's rows are copied by one gather and scatter (_copy_rows).
MAX_RUNS = 4096


@dataclass(frozen=True)
class PartMatrix:
    """One segment's vectors (``dense``, rows in path order) with each row's note path and chunk order,
    and the model identity key its meta stamps (None: no stamp)."""

    dense: DenseMatrix
    paths: np.ndarray  # str [N]
    ords: np.ndarray  # int64 [N]
    identity: str | None

    def __post_init__(self) -> None:
        for arr in (self.paths, self.ords):
            arr.flags.writeable = False

    @property
    def nbytes(self) -> int:
        return int(self.dense.nbytes + self.paths.nbytes + self.ords.nbytes)

    @classmethod
    def in_path_order(cls, dense: DenseMatrix, paths: np.ndarray, ords: np.ndarray, identity: str | None) -> PartMatrix:
        """The part with its rows sorted by (path, chunk order), what :func:`assemble` relies on (rows read
        in SQLite's byte order of UTF-8 are already in numpy's code point order: nothing moves)."""
        order = np.lexsort((ords, paths))
        if (order == np.arange(order.size)).all():
            return cls(dense, paths, ords, identity)
        moved = DenseMatrix(dense.matrix[order], dense.chunk_ids[order], dense.note_ids[order])
        return cls(moved, paths[order], ords[order], identity)


def load_part(conn: Any) -> PartMatrix:
    """Every vector of one database (a segment's own connection, or a legacy index), in path order."""
    rows = path_ordered_vector_rows(conn)
    dim = len(rows[0][4]) // 4 if rows else 0
    matrix = np.frombuffer(b"".join(r[4] for r in rows), dtype="<f4").astype(np.float32).reshape(len(rows), dim)
    dense = DenseMatrix(
        matrix=matrix,
        chunk_ids=np.array([r[0] for r in rows], dtype=np.int64),
        note_ids=np.array([r[1] for r in rows], dtype=np.int64),
    )
    stamp = stored_identity(get_meta(conn).get(META_KEY))
    paths, ords = np.array([r[2] for r in rows], dtype=str), np.array([r[3] for r in rows], dtype=np.int64)
    return PartMatrix.in_path_order(dense, paths, ords, _key_of(stamp))


def _key_of(identity: dict[str, Any] | None) -> str | None:
    return None if identity is None else identity_key(identity)


class PartCache(DenseMatrixCache):
    """Byte-bounded LRU of PartMatrix by (vault, part SHA-256, model identity key), the rules of
    DenseMatrixCache (one lock, loads included; a part larger than the bound is returned but not kept)
    except that loading a part replaces none: every generation listing it shares it. Once a generation
    is assembled, ``keep_only`` drops its vault's parts it does not list (memory: about twice one
    generation's vectors, the parts and the assembled matrix of a generation of several segments)."""

    def get_or_load(self, key: Any, loader: Callable[[], Any]) -> Any:
        if not (isinstance(key, tuple) and len(key) == 3 and all(isinstance(k, str) for k in key)):
            raise TypeError(f"a part key is (vault, part SHA-256, model identity), got {key!r}")
        return self._get_or_load(key, loader, PartMatrix, lambda k: False)

    def keep_only(self, keys: Sequence[tuple[str, str, str]]) -> None:
        """Forget the parts of these keys' vault that they do not name (the parts of older generations)."""
        vaults, wanted = {k[0] for k in keys}, set(keys)
        with self._lock:
            self._drop([k for k in self._entries if k[0] in vaults and k not in wanted])


def assemble(parts: Sequence[tuple[PartMatrix, Sequence[int]]]) -> DenseMatrix:
    """The generation's matrix: each part's rows whose note its own dead set does not list, in (path,
    chunk order). One part with nothing dead is served as it is (no copy).

    A live path is in one part only, and each part is sorted, so a row's place is its place in its part
    plus, for every other part, how many of that part's live rows sort before its path (a merge of sorted
    runs by binary search: no string sort of the whole generation)."""
    if len(parts) == 1 and not parts[0][1]:
        return parts[0][0].dense
    kept = [np.flatnonzero(~np.isin(p.dense.note_ids, np.asarray(dead, dtype=np.int64))) for p, dead in parts]
    paths = [p.paths[k] for (p, _), k in zip(parts, kept)]
    total = sum(k.size for k in kept)
    dim = max((p.dense.matrix.shape[1] for p, _ in parts), default=0)
    matrix = np.empty((total, dim), dtype=np.float32)
    chunk_ids = np.empty(total, dtype=np.int64)
    note_ids = np.empty(total, dtype=np.int64)
    for i, ((part, _), rows) in enumerate(zip(parts, kept)):
        if not rows.size:  # a part without live vectors (a segment of no chunk) adds no row
            continue
        place = np.arange(rows.size, dtype=np.int64)
        for j, other in enumerate(paths):
            if j != i and other.size:
                place += np.searchsorted(other, paths[i])
        for target, source in zip(
            (matrix, chunk_ids, note_ids), (part.dense.matrix, part.dense.chunk_ids, part.dense.note_ids)
        ):
            _copy_rows(target, place, source, rows)
    return DenseMatrix(matrix=matrix, chunk_ids=chunk_ids, note_ids=note_ids)


def _copy_rows(target: np.ndarray, place: np.ndarray, source: np.ndarray, rows: np.ndarray) -> None:
    """``target[place] = source[rows]``, as slice copies of the runs where both advance by one (a big part
    with a few dead rows and a few rows of newer parts between its own is a few runs: one pass over the
    bytes instead of a gather and a scatter); as one gather and scatter when the runs are many."""
    breaks = np.flatnonzero((np.diff(place) != 1) | (np.diff(rows) != 1)) + 1
    if breaks.size > MAX_RUNS:
        target[place] = source[rows]
        return
    for a, b in zip([0, *breaks.tolist()], [*breaks.tolist(), place.size]):
        target[place[a] : place[a] + b - a] = source[rows[a] : rows[a] + b - a]


def checked(part: PartMatrix, sha256: str, identity: str | None) -> PartMatrix:
    """``part`` when its vectors are of the generation's model ``identity`` (or it holds none), else
    DenseIncompleteError naming the segment."""
    if part.dense.matrix.shape[0] and part.identity != identity:
        raise DenseIncompleteError(
            f"segment {sha256[:12]} holds vectors of another model than the generation's",
            hint="run: vaultsearch index VAULT --embed-only",
            segment=sha256,
        )
    return part
