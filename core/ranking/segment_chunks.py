"""The `vector` mode's chunk vectors over a generation's segments (core.ranking.segments): each segment's
ChunkVectors (loaded with its own SparseIndex, cached per segment SHA-256) combined into the ChunkVectors
of the combined index: the live notes' chunks in the combined row order, postings in its term ids, and
idf and the mean chunk length computed from the combined statistics, so that every number equals that
of one segment of the live notes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from core.errors import IntegrityError
from core.ranking.chunk_vectors import ChunkVectors, class_chunks, vector_statistics
from core.ranking.postings import splice, stable_order
from core.ranking.segment_delta import Delta
from core.ranking.segment_dropped import spans
from core.ranking.segments import Combined, posting_terms
from core.ranking.sparse_index import gather_postings


def _chunk_order(combined: Combined, vectors: Sequence[ChunkVectors]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the chunks of the combined rows, in row order, as positions in the segments' chunks laid end to
    end; each combined group's first chunk; each group's combined row)."""
    row, first, sizes = _groups(combined, 0, vectors)
    ptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    positions, _ = gather_postings(spans(first, first + sizes), 2 * np.arange(row.shape[0], dtype=np.int64))
    return positions, ptr[:-1], row


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


def _groups(combined: Combined, first: int, added: Sequence[ChunkVectors]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The live chunk groups of ``combined``'s segments ``first``, ``first + 1``, ... (their vectors ``added``)
    sorted by combined row: (row, first chunk as a position in those segments' chunks laid end to end, size)."""
    offsets = np.concatenate(([0], np.cumsum([v.n_chunks for v in added]))).astype(np.int64)
    rows, starts, sizes = [], [], []
    for s, v in enumerate(added):
        row_map = combined.row_map[first + s]
        if v.group_of_row.shape[0] != row_map.shape[0]:
            raise IntegrityError(
                f"segment {first + s}'s chunk vectors cover {v.group_of_row.shape[0]} notes, not {row_map.shape[0]}"
            )
        ends = np.append(v.group_starts[1:], v.n_chunks)
        known = np.flatnonzero(v.group_rows >= 0)
        row = row_map[v.group_rows[known]]
        live = row >= 0
        rows.append(row[live])
        starts.append(offsets[s] + v.group_starts[known][live])
        sizes.append((ends - v.group_starts)[known][live])
    empty = np.zeros(0, np.int64)
    row, start, size = (np.concatenate(x or [empty]) for x in (rows, starts, sizes))
    order = np.argsort(row, kind="stable")
    return row[order], start[order], size[order]


def extend_chunks(prev: ChunkVectors, delta: Delta, combined: Combined, added: Sequence[ChunkVectors]) -> ChunkVectors:
    """The chunk vectors of ``combined`` (``core.ranking.segment_delta.extend`` of the generation ``prev``'s
    are of, by ``delta``) from ``prev`` and the added segments' (``combined``'s segments from
    ``delta.first_added`` on): the kept chunks' arrays moved, the added chunks inserted in row order, their
    postings appended to their term's run; equal to ``combine_chunks`` of the new generation's vectors."""
    sizes = np.diff(np.append(prev.group_starts, prev.n_chunks))
    moved = delta.rows[prev.group_rows]
    group_alive = moved >= 0
    chunk_alive = np.repeat(group_alive, sizes)
    kept_rows, kept_sizes = moved[group_alive], sizes[group_alive]
    rows, starts, add_sizes = _groups(combined, delta.first_added, added)
    pos = np.searchsorted(kept_rows, rows)
    kept_starts = np.concatenate(([0], np.cumsum(kept_sizes))).astype(np.int64)
    added_before = np.concatenate(([0], np.cumsum(add_sizes))).astype(np.int64)
    shift = added_before[np.searchsorted(pos, np.arange(kept_rows.shape[0]), side="right")]
    chunk_map = np.full(prev.n_chunks, -1, dtype=np.int64)
    chunk_map[chunk_alive] = np.arange(int(kept_starts[-1])) + np.repeat(shift, kept_sizes)
    laid, _ = gather_postings(spans(starts, starts + add_sizes), 2 * np.arange(rows.shape[0], dtype=np.int64))
    added_new = np.full(sum(v.n_chunks for v in added), -1, dtype=np.int64)
    added_new[laid] = np.repeat(kept_starts[pos] + added_before[:-1], add_sizes) + (
        np.arange(laid.shape[0]) - np.repeat(added_before[:-1], add_sizes)
    )
    at_chunk = np.repeat(kept_starts[pos], add_sizes)
    lengths = np.concatenate([v.lengths for v in added] or [np.zeros(0, np.int64)])[laid]
    ids = np.concatenate([v.chunk_ids for v in added] or [np.zeros(0, np.int64)])[laid]
    dead = np.flatnonzero(~chunk_alive)
    lengths, chunk_ids = splice(prev.lengths, dead, at_chunk, lengths), splice(prev.chunk_ids, dead, at_chunk, ids)
    group_sizes = np.insert(kept_sizes, pos, add_sizes)
    group_starts = (
        np.concatenate(([0], np.cumsum(group_sizes)[:-1])).astype(np.int64) if group_sizes.size else group_sizes
    )
    group_rows = np.insert(kept_rows, pos, rows)
    indptr, chunks, tf = _relaid_chunks(prev, delta, combined, added, (chunk_alive, chunk_map, added_new))
    group_of_row = np.full(combined.sparse.n_docs, -1, dtype=np.int64)
    group_of_row[group_rows] = np.arange(group_rows.shape[0])
    count, total = class_chunks(combined.sparse, group_rows, group_starts, lengths)
    n_terms = int(combined.sparse.df.shape[0])
    return ChunkVectors(
        indptr, chunks, tf, lengths, group_starts, group_rows, chunk_ids, group_of_row, count, total,
        **vector_statistics(combined.sparse, n_terms, lengths),
    )  # fmt: skip


def _relaid_chunks(
    prev: ChunkVectors,
    delta: Delta,
    combined: Combined,
    added: Sequence[ChunkVectors],
    maps: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, chunks, tf) of the new generation: the previous runs without the dead chunks' postings,
    renumbered, the added chunks' postings appended to their term's run."""
    chunk_alive, chunk_map, added_new = maps
    n_terms = int(combined.sparse.df.shape[0])
    old = np.asarray(prev.chunks[:])
    drop, gone = _dead_postings(prev, old, chunk_alive, delta.dead_terms)
    counts = np.diff(prev.indptr) - np.bincount(gone, minlength=prev.indptr.shape[0] - 1)
    if counts[delta.terms < 0].any():
        if delta.dead_terms is not None:  # the runs missed a dead chunk's posting: look everywhere
            return _relaid_chunks(prev, replace(delta, dead_terms=None), combined, added, maps)
        raise IntegrityError("a live chunk holds a term no live note holds")
    kept_counts = np.zeros(n_terms, np.int64)
    kept_counts[delta.terms[delta.terms >= 0]] = counts[delta.terms >= 0]
    terms, chunks, tf, at = [], [], [], 0
    for s, v in enumerate(added):
        mine = added_new[at + np.asarray(v.chunks[:]).astype(np.int64)]
        held = np.flatnonzero(mine >= 0)
        terms.append(combined.term_map[delta.first_added + s][posting_terms(v.indptr)[held]])
        chunks.append(mine[held])
        tf.append(np.asarray(v.tf[:])[held])
        at += v.n_chunks
    t = np.concatenate(terms or [np.zeros(0, np.int64)])
    if (t < 0).any():
        raise IntegrityError("a live chunk holds a term no live note holds")
    order = np.argsort(t, kind="stable")
    where = np.cumsum(kept_counts)[t[order]]
    old_tf = np.asarray(prev.tf[:])
    new_chunks = splice(old, drop, where, np.concatenate(chunks or [t])[order], lookup=chunk_map.astype(np.int32))
    if new_chunks.size and int(new_chunks.min()) < 0:  # a dead chunk's posting outside its note's terms' runs
        if delta.dead_terms is None:
            raise IntegrityError("a dead chunk's posting is left in the chunk vectors")
        return _relaid_chunks(prev, replace(delta, dead_terms=None), combined, added, maps)
    new_tf = splice(old_tf, drop, where, np.concatenate(tf or [old_tf[:0]])[order])
    indptr = np.concatenate(([0], np.cumsum(kept_counts + np.bincount(t, minlength=n_terms)))).astype(np.int64)
    return indptr, new_chunks, new_tf


def _dead_postings(
    prev: ChunkVectors, old: np.ndarray, chunk_alive: np.ndarray, terms: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(the positions of the dead chunks' postings, ascending; their terms): looked for in the runs of
    ``terms`` (the terms of the notes that died: their chunks' terms are theirs), or, when None, in every
    posting (``_relaid_chunks`` looks everywhere when the runs missed one: the same arrays, a longer look)."""
    if chunk_alive.all():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if terms is None:
        drop = np.flatnonzero(~chunk_alive[old])
        return drop, np.searchsorted(prev.indptr, drop, side="right") - 1
    ids = np.unique(terms)
    run, owner = gather_postings(prev.indptr, ids)
    hit = np.flatnonzero(~chunk_alive[old[run]])
    return run[hit], ids[owner[hit]]
