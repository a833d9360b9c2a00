"""The `vector` mode's structure: chunk-level TF-IDF vectors with pivoted length normalisation.

Each chunk's stored term vector (``chunk_terms``: the chunk text, plus its section heading on
the section's first chunk and the note's title, description and tags on chunk 0, weighted
like fts's BM25F fields) becomes a sublinear TF-IDF vector (idf over notes, as fts counts
document frequency). A note scores the best cosine of the query with any of its chunks, the
chunk's length normalised by a pivot (Singhal, Buckley & Mitra 1996): ``(1 - s) * mean + s
* norm`` with slope ``s`` = VECTOR_PIVOT_SLOPE, so a long chunk is penalised less than plain
cosine penalises it. Why chunk-level and pivoted: docs/architecture.md ("vector").

Loaded once per verified generation (numbers only, no text) and cached like the sparse
index, but only when a mode asks for it: fts alone never pays for it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from core.errors import IntegrityError
from core.index.tables.chunks import chunk_ids_in_order, count_chunks_of
from core.index.tables.connection import read_snapshot
from core.index.tables.terms import CHUNK_UNIT, chunk_term_rows, chunk_terms_bytes
from core.ranking import scoring, stored
from core.ranking.postings import READ_ROWS, TermMajor, row_blocks
from core.ranking.sparse import (
    QueryPostings,
    SparseIndex,
    gather_postings,
    query_postings,
    query_term_ids,
)

# Pivot slope of the chunk length normalisation; tuned on SciFact train + known-item dev.
VECTOR_PIVOT_SLOPE = 0.3


@dataclass
class ChunkVectors:
    """Term-major postings over chunks; chunk rows are grouped by note, in SparseIndex row order."""

    indptr: np.ndarray  # int64 [n_terms + 1]: postings of term t are indptr[t]:indptr[t+1]
    # the per-posting arrays may be stored arrays read a piece at a time (core.ranking.stored)
    chunks: np.ndarray | stored.StoredArray  # int32 [postings] chunk row
    weights: np.ndarray | stored.StoredArray  # float32 [postings] TF-IDF weight / pivoted chunk length
    idf: np.ndarray  # float32 [n_terms] smoothed idf over notes
    group_starts: np.ndarray  # int64 [n_groups] first chunk row of each note that has chunks
    group_rows: np.ndarray  # int64 [n_groups] SparseIndex row of that note (-1: not in it)
    chunk_ids: np.ndarray  # int64 [n_chunks] chunk id of each chunk row
    group_of_row: np.ndarray  # int64 [n_docs] group of each SparseIndex row (-1: no chunks)

    @property
    def n_chunks(self) -> int:
        return int(self.chunk_ids.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (
                self.indptr,
                self.chunks,
                self.weights,
                self.idf,
                self.group_starts,
                self.group_rows,
                self.chunk_ids,
                self.group_of_row,
            )
        )


def _read(
    conn: sqlite3.Connection, visible: tuple[str, list[object]] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(chunk ids, note id of each chunk, postings per chunk, terms, weighted tf), chunks by note."""
    n_chunks = count_chunks_of(conn, visible)
    chunk_ids, done = np.empty(n_chunks, np.int64), 0
    ids = chunk_ids_in_order(conn, visible)
    while batch := ids.fetchmany(16 * READ_ROWS):
        chunk_ids[done : done + len(batch)] = [r[0] for r in batch]
        done += len(batch)
    total = chunk_terms_bytes(conn, visible)
    note_of, lengths = np.empty(n_chunks, np.int64), np.empty(n_chunks, np.int64)
    terms, tf = np.empty(total // 4, np.int32), np.empty(total // 4, np.uint16)
    pos = row = 0
    rows = chunk_term_rows(conn, visible)
    while batch := rows.fetchmany(READ_ROWS):  # a few thousand notes per numpy call
        nids, length_blobs, term_blobs, tf_blobs = zip(*batch)
        per_note = np.frombuffer(b"".join(length_blobs), dtype="<u4")
        k, n = sum(map(len, term_blobs)) // 4, per_note.shape[0]
        if row + n > n_chunks:
            raise IntegrityError(
                f"chunk_terms describe more chunks than the chunks table holds ({n_chunks})", chunks=n_chunks
            )
        note_of[row : row + n] = np.repeat(np.asarray(nids, np.int64), [len(b) // 4 for b in length_blobs])
        lengths[row : row + n] = per_note
        terms[pos : pos + k] = np.frombuffer(b"".join(term_blobs), dtype="<i4")
        tf[pos : pos + k] = np.frombuffer(b"".join(tf_blobs), dtype="<u2")
        pos, row = pos + k, row + n
    if row != n_chunks or pos != terms.shape[0]:
        raise IntegrityError(
            f"chunk_terms describe {row} chunks, the chunks table holds {n_chunks}", chunk_terms=row, chunks=n_chunks
        )
    return chunk_ids, note_of, lengths, terms, tf


def _weights(
    terms: np.ndarray, tf: np.ndarray, lengths: np.ndarray, starts: np.ndarray, idf: np.ndarray, slope: float
) -> np.ndarray:
    """Per posting (chunk-major): sublinear TF-IDF divided by the chunk's pivoted length."""
    weights = np.empty(terms.shape[0], dtype=np.float32)
    norms = np.zeros(lengths.shape[0], dtype=np.float64)
    blocks = row_blocks(starts)
    for c0, c1 in blocks:
        sl = slice(int(starts[c0]), int(starts[c1]))
        weights[sl] = scoring.tfidf_weights(tf[sl].astype(np.float32) / CHUNK_UNIT, idf[terms[sl]])
        local = np.repeat(np.arange(c1 - c0), lengths[c0:c1])
        norms[c0:c1] = scoring.row_norms(local, weights[sl], c1 - c0)
    pivoted = scoring.pivoted_lengths(norms, slope)
    for c0, c1 in blocks:
        sl = slice(int(starts[c0]), int(starts[c1]))
        weights[sl] /= np.repeat(pivoted[c0:c1], lengths[c0:c1]).astype(np.float32)
    return weights


def _term_major(
    terms: np.ndarray, weights: np.ndarray, lengths: np.ndarray, starts: np.ndarray, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, chunk row, weight) sorted by term, chunk rows ascending within a term."""
    layout = TermMajor(terms, n_terms)
    out_rows = np.empty(terms.shape[0], dtype=np.int32)
    out_weights = np.empty(terms.shape[0], dtype=np.float32)
    for c0, c1 in row_blocks(starts):
        sl = slice(int(starts[c0]), int(starts[c1]))
        order, dest = layout.slots(terms[sl])
        out_rows[dest] = np.repeat(np.arange(c0, c1, dtype=np.int32), lengths[c0:c1])[order]
        out_weights[dest] = weights[sl][order]
    return layout.indptr, out_rows, out_weights


_CHUNK_ARRAYS = ("indptr", "chunks", "weights", "idf", "group_starts", "group_rows", "chunk_ids", "group_of_row")


def chunk_group(slope: float) -> str:
    """The stored group of chunk arrays computed with pivot ``slope`` (core.ranking.stored)."""
    return f"chunks:{slope!r}"


def load_chunk_vectors(
    conn: sqlite3.Connection,
    sparse: SparseIndex,
    slope: float = VECTOR_PIVOT_SLOPE,
    *,
    visible: tuple[str, list[object]] | None = None,
    reader: stored.Reader | None = None,
) -> ChunkVectors:
    """The chunk vectors of the generation ``sparse`` was loaded from: the arrays the build stored (with a
    ``reader``, the postings read a piece at a time as queries need them), else computed from the rows
    (``compute_chunk_vectors``: the same numbers)."""
    if visible is not None:  # a restricted caller's vectors come from its notes' rows
        return compute_chunk_vectors(conn, sparse, slope, visible=visible)
    arrays = stored.load_group(conn, chunk_group(slope), _CHUNK_ARRAYS, reader=reader)
    if arrays is None:
        return compute_chunk_vectors(conn, sparse, slope)
    vectors = ChunkVectors(**{name: arrays[name] for name in _CHUNK_ARRAYS})
    postings = int(vectors.indptr[-1]) if vectors.indptr.size else 0
    if vectors.chunks.shape[0] != postings or vectors.weights.shape[0] != postings:
        raise IntegrityError(f"stored chunk arrays disagree on the number of postings ({postings})")
    if vectors.group_of_row.shape[0] != sparse.n_docs:
        raise IntegrityError(f"stored chunk arrays cover {vectors.group_of_row.shape[0]} notes, not {sparse.n_docs}")
    return vectors


def store_chunk_vectors(conn: sqlite3.Connection, vectors: ChunkVectors, slope: float = VECTOR_PIVOT_SLOPE) -> None:
    """Store ``vectors`` (computed from this database's rows) in the build's database."""
    arrays = {name: getattr(vectors, name) for name in _CHUNK_ARRAYS}
    stored.save_group(conn, chunk_group(slope), arrays, ("chunks", "weights"))  # per posting: in pieces


def compute_chunk_vectors(
    conn: sqlite3.Connection,
    sparse: SparseIndex,
    slope: float = VECTOR_PIVOT_SLOPE,
    *,
    visible: tuple[str, list[object]] | None = None,
) -> ChunkVectors:
    """Read every chunk vector of the generation ``sparse`` was loaded from (same snapshot);
    ``visible`` (as for ``load_sparse``, the same one ``sparse`` was loaded with) reads only those notes'.

    Memory-lean like ``load_sparse``: 6 bytes per posting are read, 4 more computed a block at
    a time, and the term-major copy (8 bytes per posting, what is held) is filled block by block.
    """
    with read_snapshot(conn):  # a legacy index.db may change between the reads below
        chunk_ids, note_of, lengths, terms, tf = _read(conn, visible)
    n_terms = max(int(sparse.df.shape[0]), int(terms.max(initial=-1)) + 1)
    df = np.zeros(n_terms, dtype=np.int64)
    df[: sparse.df.shape[0]] = sparse.df
    idf = scoring.tfidf_idf(df, sparse.n_docs)
    starts = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    weights = _weights(terms, tf, lengths, starts, idf, slope)
    del tf
    indptr, rows, weights = _term_major(terms, weights, lengths, starts, n_terms)
    del terms
    group_starts = np.flatnonzero(np.diff(note_of, prepend=-1)) if note_of.size else np.zeros(0, np.int64)
    group_rows = sparse.rows_of(note_of[group_starts])
    group_of_row = np.full(sparse.n_docs, -1, dtype=np.int64)
    known = group_rows >= 0
    group_of_row[group_rows[known]] = np.flatnonzero(known)
    return ChunkVectors(indptr, rows, weights, idf, group_starts, group_rows, chunk_ids, group_of_row)


class VectorScores(NamedTuple):
    scores: np.ndarray  # float32 [n_docs]: the best chunk score of each note
    matched: np.ndarray  # float32 [n_docs]: distinct query terms the note holds (0: not a candidate)
    per_chunk: np.ndarray  # float64 [n_chunks]: each chunk's score


def vector_scores(
    index: SparseIndex, vectors: ChunkVectors, terms: list[str], postings: QueryPostings | None = None
) -> VectorScores:
    """Per SparseIndex row: the best pivoted cosine of the query with any chunk of the note."""
    ids, qtf = query_term_ids(index, terms)
    n = index.n_docs
    scores = np.zeros(n, dtype=np.float32)
    if ids.size == 0:
        return VectorScores(scores, np.zeros(n, dtype=np.float32), np.zeros(vectors.n_chunks))
    q = scoring.tfidf_weights(qtf, vectors.idf[ids])
    if postings is not None and postings.weight is not None:  # the query analysis' term weights
        q = q * postings.weight
    q = q / (float(np.linalg.norm(q)) or 1.0)
    pos, owner = gather_postings(vectors.indptr, ids)
    per_chunk = np.bincount(vectors.chunks[pos], weights=vectors.weights[pos] * q[owner], minlength=vectors.n_chunks)
    if vectors.group_starts.size:
        best = np.maximum.reduceat(per_chunk, vectors.group_starts)
        known = vectors.group_rows >= 0
        scores[vectors.group_rows[known]] = best[known]
    note_docs = (postings if postings is not None else query_postings(index, terms)).docs
    matched = np.bincount(note_docs, minlength=n).astype(np.float32)
    return VectorScores(scores, matched, per_chunk)


def best_chunk_ids(vectors: ChunkVectors, per_chunk: np.ndarray, rows: list[int]) -> dict[int, int]:
    """SparseIndex row -> id of its best-scoring chunk, for the given rows (first of equals)."""
    out: dict[int, int] = {}
    n_groups = vectors.group_starts.shape[0]
    for row in rows:
        g = int(vectors.group_of_row[row])
        if g >= 0:
            start = int(vectors.group_starts[g])
            end = int(vectors.group_starts[g + 1]) if g + 1 < n_groups else vectors.n_chunks
            out[row] = int(vectors.chunk_ids[start + int(np.argmax(per_chunk[start:end]))])
    return out
