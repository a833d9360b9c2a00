"""The `vector` mode's chunk vectors over a generation's segments (core.ranking.segments): each segment's
ChunkVectors (loaded with its own SparseIndex, cached per segment SHA-256) combined into the ChunkVectors
of the combined index: the live notes' chunks in the combined row order, postings in its term ids, and
idf and the mean chunk length computed from the combined statistics, so that every number equals that
of one segment of the live notes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.errors import IntegrityError
from core.ranking.chunk_vectors import ChunkVectors, class_chunks, vector_statistics
from core.ranking.postings import stable_order
from core.ranking.segments import Combined, posting_terms
from core.ranking.sparse_index import gather_postings


def _chunk_order(combined: Combined, vectors: Sequence[ChunkVectors]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the chunks of the combined rows, in row order, as positions in the segments' chunks laid end to
    end; each combined group's first chunk; each group's combined row)."""
    offsets = np.concatenate(([0], np.cumsum([v.n_chunks for v in vectors]))).astype(np.int64)
    starts, ends, rows = [], [], []
    for s, (v, row_map) in enumerate(zip(vectors, combined.row_map)):
        if v.group_of_row.shape[0] != row_map.shape[0]:
            raise IntegrityError(
                f"segment {s}'s chunk vectors cover {v.group_of_row.shape[0]} notes, not {row_map.shape[0]}"
            )
        group_ends = np.append(v.group_starts[1:], v.n_chunks)
        known = np.flatnonzero(v.group_rows >= 0)
        global_row = row_map[v.group_rows[known]]
        live = global_row >= 0
        starts.append(offsets[s] + v.group_starts[known][live])
        ends.append(offsets[s] + group_ends[known][live])
        rows.append(global_row[live])
    empty = np.zeros(0, np.int64)
    first, last, row = (np.concatenate(x or [empty]) for x in (starts, ends, rows))
    order = np.argsort(row, kind="stable")
    first, last, row = first[order], last[order], row[order]
    sizes = last - first
    ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    positions, _ = gather_postings(_ptr(first, sizes), 2 * np.arange(row.shape[0], dtype=np.int64))
    return positions, ptr[:-1], row


def _ptr(first: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """An indptr-like array whose entries 2i, 2i+1 span first[i]..first[i]+sizes[i] (for gather_postings)."""
    out = np.empty(2 * first.shape[0], dtype=np.int64)
    out[0::2], out[1::2] = first, first + sizes
    return out


def combine_chunks(combined: Combined, vectors: Sequence[ChunkVectors]) -> ChunkVectors:
    """The combined index's chunk vectors from each segment's (in the order of ``combined``'s segments)."""
    keep, group_starts, group_rows = _chunk_order(combined, vectors)
    n_all = sum(v.n_chunks for v in vectors)
    new_of = np.full(n_all, -1, dtype=np.int64)
    new_of[keep] = np.arange(keep.shape[0])
    lengths = np.concatenate([v.lengths for v in vectors] or [np.zeros(0, np.int64)])[keep]
    chunk_ids = np.concatenate([v.chunk_ids for v in vectors] or [np.zeros(0, np.int64)])[keep]
    n_terms = int(combined.sparse.df.shape[0])
    terms, chunks, tf, at = [], [], [], 0
    for v, term_map in zip(vectors, combined.term_map):
        rows = np.asarray(v.chunks[:]).astype(np.int64)
        mine = new_of[at + rows]
        held = np.flatnonzero(mine >= 0)
        local_term = posting_terms(v.indptr)[held]
        terms.append(term_map[local_term])
        chunks.append(mine[held])
        tf.append(np.asarray(v.tf[:])[held])
        at += v.n_chunks
    t, c = np.concatenate(terms or [np.zeros(0, np.int64)]), np.concatenate(chunks or [np.zeros(0, np.int64)])
    if (t < 0).any():
        raise IntegrityError("a live chunk holds a term no live note holds")
    order = stable_order(t, max(n_terms, 1))  # within a term: segment after segment (core.ranking.segments)
    indptr = np.concatenate(([0], np.cumsum(np.bincount(t, minlength=n_terms)))).astype(np.int64)
    group_of_row = np.full(combined.sparse.n_docs, -1, dtype=np.int64)
    group_of_row[group_rows] = np.arange(group_rows.shape[0])
    count, total = class_chunks(combined.sparse, group_rows, group_starts, lengths)
    return ChunkVectors(
        indptr, c[order].astype(np.int32), np.concatenate(tf or [np.zeros(0, np.uint16)])[order], lengths,
        group_starts, group_rows, chunk_ids, group_of_row, count, total,
        **vector_statistics(combined.sparse, n_terms, lengths),
    )  # fmt: skip
