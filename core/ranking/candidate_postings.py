"""A pruned run's postings (core.ranking.pruning): every posting of the terms scored whole, and of the partial
terms only those in the candidates (the rows holding a whole term, and the rows a bonus names). A partial
term's run is tested a byte per posting (its rows, and for the side values its field masks); only the
postings found are weighed and summed. The postings are in the order ``query_postings`` gives (term by term
in the query's order, each term's in its run's order), so each candidate's sums are bit for bit those of the
whole query's."""

from __future__ import annotations

from typing import Any

import numpy as np

from core.ranking import bm25f
from core.ranking.sparse import QueryPostings, SparseIndex, query_term_ids, term_shares

# per term: positions, rows, body counts of the postings kept
_Kept = tuple[np.ndarray, np.ndarray, np.ndarray]


def candidate_postings(
    index: SparseIndex,
    terms: list[str],
    weights: list[float] | None,
    cover: list[float] | None,
    whole: np.ndarray,
    forced: np.ndarray,
) -> QueryPostings:
    """The query's postings (``query_postings``) of the whole terms (bool per known term id) everywhere and
    of the others in the candidates: the rows of ``forced`` (bool per row) and those holding a whole term."""
    ids, _ = query_term_ids(index, terms)
    for array in (index.docs, index.field_mask, index.body_tf):  # a long-lived process reads them whole, once
        counted = getattr(array, "gathered", None)
        if counted is not None:
            counted()
    seen = None if index.seen is None else index.seen.rows
    rows = forced.copy()
    kept: dict[int, _Kept] = {}
    for t, docs, body in zip(
        ids[whole].tolist(), _runs(index, index.docs, ids[whole]), _runs(index, index.body_tf, ids[whole])
    ):
        a = int(index.indptr[t])
        kept[t] = (np.arange(a, a + docs.shape[0], dtype=np.int64), docs, body)
        rows[docs if seen is None else docs[seen[docs]]] = True
    if seen is not None:
        rows &= seen
    kept.update(zip(ids[~whole].tolist(), _find(index, ids[~whole], rows)))
    return _assemble(index, terms, weights, cover, ids, [kept[t] for t in ids.tolist()])


def _runs(index: SparseIndex, array: Any, terms: np.ndarray) -> list[np.ndarray]:
    """The values of ``array`` (one per posting) on each term's whole run."""
    runs = getattr(array, "term_runs", None)
    if runs is not None:
        found: list[np.ndarray] = runs(terms)
        return found
    return [np.asarray(array[int(index.indptr[t]) : int(index.indptr[t + 1])]) for t in terms.tolist()]


def _find(index: SparseIndex, terms: np.ndarray, rows: np.ndarray) -> list[_Kept]:
    """Per term of ``terms``: (positions, rows, body counts) of its postings in the rows marked in ``rows``."""
    finder = getattr(index.docs, "find", None)
    if finder is not None:  # a view of segments: each segment's run tested, the body counts read where found
        take = index.body_tf.take  # type: ignore[union-attr]
        return [(pos, docs, take(where)) for pos, docs, where in finder(terms, rows)]
    out = []
    for t, run in zip(terms.tolist(), _runs(index, index.docs, terms)):
        hit = np.flatnonzero(rows[run])
        pos = int(index.indptr[t]) + hit.astype(np.int64)
        out.append((pos, run[hit], np.asarray(index.body_tf[pos])))
    return out


def _assemble(
    index: SparseIndex,
    terms: list[str],
    weights: list[float] | None,
    cover: list[float] | None,
    ids: np.ndarray,
    parts: list[_Kept],
) -> QueryPostings:
    """The postings of ``parts`` (per term, in its run's order) with their masks and side positions, a hidden
    row's dropped."""
    seen = None if index.seen is None else index.seen.rows
    pos_l, docs_l, body_l, mask_l, side_l, owner_l = [], [], [], [], [], []
    for i, (t, run_mask, (pos, docs, body)) in enumerate(zip(ids.tolist(), _runs(index, index.field_mask, ids), parts)):
        at = pos - int(index.indptr[t])
        if seen is not None:
            keep = seen[docs]
            at, pos, docs, body = at[keep], pos[keep], docs[keep], body[keep]
        masks = run_mask[at]
        side_l.append(int(index.side_ptr[t]) + _side_positions(run_mask, at, masks))
        pos_l.append(pos)
        docs_l.append(docs)
        body_l.append(body)
        mask_l.append(masks)
        owner_l.append(np.full(pos.size, i, dtype=np.int64))
    w, c = term_shares(index, terms, weights, cover)
    return QueryPostings(
        ids,
        _joined(pos_l, np.int64),
        _joined(owner_l, np.int64),
        _joined(docs_l, np.int64),
        w,
        c,
        _joined(side_l, np.int64),
        _joined(mask_l, np.uint8),
        _joined(body_l, np.uint16),
    )


def _joined(arrays: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, dtype)


def _side_positions(run_mask: np.ndarray, at: np.ndarray, masks: np.ndarray) -> np.ndarray:
    """The positions, in a term's run of side values, of the side values of its postings ``at`` (ascending;
    ``masks``: theirs): the side values of the postings before each, then one per field it holds besides the
    body, in order."""
    held = bm25f.side_counts(masks)
    sub = np.flatnonzero(held != 0)  # of a bool array: 5 times faster than of the uint8 one
    if not sub.size:
        return np.empty(0, np.int64)
    side = run_mask & bm25f.SIDE_BITS
    counts = np.zeros(run_mask.shape[0], dtype=np.uint8)
    for f in range(8):  # a popcount of the side bits, bit by bit (a table look-up per posting costs more)
        if (int(bm25f.SIDE_BITS) >> f) & 1:
            counts += (side >> f) & 1
    starts = at[sub]  # ascending, distinct: the side values between one and the next summed, then accumulated
    between = np.add.reduceat(counts, np.concatenate(([0], starts)), dtype=np.int64)[:-1]
    if starts[0] == 0:
        between[0] = 0  # reduceat's empty first span gives the first value, not 0
    return np.repeat(np.cumsum(between), held[sub]) + _within(held[sub])


def _within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., n-1 for each n of ``counts``, one after another."""
    counts = counts.astype(np.int64)
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
