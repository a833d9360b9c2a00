"""BM25F at query time from raw per-field term counts (the stored layout of core.ranking.sparse).

A generation stores, per posting (term, note), nothing that depends on collection statistics
(N, df, average field lengths): the body count, a bit per field that holds the term, and the
counts of the other fields (title, description, tags, headings: rare) in a side array; per note,
its five field lengths. A query computes the BM25F weight of the postings it gathers from those
counts, the idf of its terms (from df and N) and per-note field factors (from the lengths and
their averages, computed once per loaded index): the model of Lucene and tantivy, where one
note's edit leaves every other note's stored numbers as they were.

Side array layout: the values of a posting are its non-zero non-body counts in field order; the
values of term t's postings (rows ascending, as its postings) are ``values[vptr[t]:vptr[t+1]]``.
"""

from __future__ import annotations

import numpy as np

from core.errors import IntegrityError
from core.index.tables.notes_fts import FTS_COLUMNS
from core.ranking import scoring

N_FIELDS = len(FTS_COLUMNS)
BODY = FTS_COLUMNS.index("body")
# bits of the fields whose counts live in the side array (every field but the body)
SIDE_BITS = np.uint8(sum(1 << f for f in range(N_FIELDS) if f != BODY))
_SIDE_FIELDS = tuple(f for f in range(N_FIELDS) if f != BODY)
if BODY != N_FIELDS - 1:  # posting_weights adds the body last, as scoring.bm25f_combine does in field order
    raise ImportError(f"the body must be the last field of {FTS_COLUMNS}")
# number of set bits of each uint8
POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)
# per field mask, the fields of its side values in order: SIDE_FIELD_OF[mask, k] is the k-th (padding 0)
SIDE_FIELD_OF = np.zeros((256, len(_SIDE_FIELDS)), dtype=np.intp)
for _m in range(256):
    _held = [f for f in _SIDE_FIELDS if _m & (1 << f)]
    SIDE_FIELD_OF[_m, : len(_held)] = _held


def field_mask(tf: np.ndarray) -> np.ndarray:
    """uint8 per posting of ``tf`` [postings, fields]: bit f set when field f holds the term."""
    mask = np.zeros(tf.shape[0], dtype=np.uint8)
    for f in range(tf.shape[1]):
        mask |= (tf[:, f] > 0).view(np.uint8) << np.uint8(f)
    return mask


def side_counts(mask: np.ndarray) -> np.ndarray:
    """How many side values each posting with ``mask`` has (its non-body fields holding the term)."""
    return POPCOUNT[np.asarray(mask) & SIDE_BITS]


def side_values(tf: np.ndarray) -> np.ndarray:
    """The side values of postings ``tf`` [postings, fields], posting by posting, fields in order."""
    side = tf[:, list(_SIDE_FIELDS)]
    return side[side > 0].astype(np.uint16)


def posting_tf(mask: np.ndarray, body_tf: np.ndarray, values: np.ndarray) -> np.ndarray:
    """uint16 [postings, fields]: the counts of postings given their field masks, body counts and their
    side values in posting order (``side_values`` of the result gives ``values`` back)."""
    mask = np.asarray(mask)
    tf = np.zeros((mask.shape[0], N_FIELDS), dtype=np.uint16)
    tf[:, BODY] = body_tf
    counts = side_counts(mask)
    if values.shape[0] != int(counts.sum(dtype=np.int64)):
        raise IntegrityError(f"{values.shape[0]} stored side counts for postings that hold {int(counts.sum())}")
    if values.shape[0] == 0:
        return tf
    start = np.cumsum(counts, dtype=np.int64) - counts
    for f in _SIDE_FIELDS:
        has = np.flatnonzero(mask & np.uint8(1 << f))
        if has.size:
            before = POPCOUNT[mask[has] & SIDE_BITS & np.uint8((1 << f) - 1)]
            tf[has, f] = values[start[has] + before]
    return tf


def average_lengths(sums: np.ndarray, n_docs: int) -> np.ndarray:
    """float32 average field lengths from their exact integer sums over ``n_docs`` notes (1 when empty).

    ``float32(sum) / float32(n)``: the same number a float32 mean of the lengths gives while every
    partial sum stays below 2**24 (the ranking's numbers before lengths were stored raw), and the
    same whatever the order the notes are summed in (segments, visible classes)."""
    if n_docs == 0:
        return np.ones(sums.shape[0], dtype=np.float32)
    return np.asarray(sums, dtype=np.int64).astype(np.float32) / np.float32(n_docs)


def field_factors(
    field_len: np.ndarray,
    weights: tuple[float, ...],
    b: tuple[float, ...],
    sums: np.ndarray | None = None,
    n_docs: int | None = None,
) -> np.ndarray:
    """float32 [notes, fields]: each note's BM25F factors ``w_f / (1 - b_f + b_f * len_f / avg_f)``
    (``scoring.bm25f_field_factors``) from its raw field lengths [notes, fields]; the averages are
    ``sums / n_docs`` (default: over these notes; a restricted caller's: over its visible notes)."""
    n = int(field_len.shape[0]) if n_docs is None else n_docs
    avg = average_lengths(field_len.sum(axis=0, dtype=np.int64) if sums is None else sums, n)
    return scoring.bm25f_field_factors(
        field_len.astype(np.float32), avg, np.asarray(weights, np.float32), np.asarray(b, np.float32)
    )


def posting_weights(
    mask: np.ndarray,
    body_tf: np.ndarray,
    values: np.ndarray,
    factors: np.ndarray,
    docs: np.ndarray,
    idf: np.ndarray,
    k1: float,
) -> np.ndarray:
    """float32 BM25F weight of each posting: ``idf * x / (k1 + x)`` with ``x = sum_f tf_f * factor_f``.

    The postings' field masks, body counts and side values (as for ``posting_tf``); ``factors``
    [fields, notes] (``field_factors`` transposed), ``docs`` the postings' notes, ``idf`` per posting.
    Bit for bit ``scoring.bm25f_combine`` of the dense counts (float32, field by field in order, the
    body last; a field without the term adds an exact 0 there), without building them: the other
    fields are summed for the postings that hold the term there only (a few)."""
    mask = np.asarray(mask)
    x = np.asarray(body_tf).astype(np.float32) * factors[BODY][docs]
    sub = np.flatnonzero((mask & SIDE_BITS) != 0)  # of a bool array: 5 times faster than of the uint8 one
    counts = POPCOUNT[mask[sub] & SIDE_BITS]
    if values.shape[0] != int(counts.sum(dtype=np.int64)):
        raise IntegrityError(f"{values.shape[0]} stored side counts for postings that hold {int(counts.sum())}")
    if sub.size:  # each side value times its field's factor, then summed per posting in field order
        starts = np.cumsum(counts, dtype=np.int64) - counts
        owner = np.repeat(np.arange(sub.size), counts)
        rank = np.arange(values.shape[0]) - starts[owner]
        fields = SIDE_FIELD_OF[mask[sub][owner], rank]
        part = values.astype(np.float32) * factors[fields, docs[sub][owner]]
        side = part[starts]  # summed in field order, as bm25f_combine adds them (np.add.reduceat does not)
        for k in range(1, int(counts.max())):
            more = np.flatnonzero(counts > k)
            side[more] += part[starts[more] + k]
        x[sub] = side + x[sub]
    return scoring.bm25_saturate(x, idf, k1)
