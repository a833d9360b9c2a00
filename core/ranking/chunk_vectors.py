"""The `vector` mode's structure: BM25 over chunks, with the query's idf applied per query.

Each chunk's stored term vector (``chunk_terms``: the chunk text, plus its section heading on
the section's first chunk and the note's title, description and tags on chunk 0, weighted
like fts's BM25F fields) is stored as it is: per posting the chunk's weighted term count, per
chunk its length (the sum of those counts). Nothing stored depends on another note, so an edit of
one note leaves every other chunk's numbers as they are (issue 29: segments). At query time a
chunk scores ``sum_t q_t * tf (k1 + 1) / (tf + k1 (1 - b + b len / avglen))`` (BM25's saturation
and length normalisation, ``VECTOR_K1`` / ``VECTOR_B``) with ``q`` the query's
``(1 + ln qtf) * idf**VECTOR_IDF_POWER`` (idf over notes, as fts counts document frequency; the
analysis' term weights), L2-normalised; ``avglen`` (over the non-empty chunks) and idf are
computed when the vectors are loaded, from sums. A note scores its best chunk. Why chunk-level, and
why this form replaced the pivoted TF-IDF cosine whose norm held idf: docs/architecture.md
("vector"), bench/bench_vector_norm.py.

Loaded once per verified generation (numbers only, no text) and cached like the sparse
index, but only when a mode asks for it: fts alone never pays for it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from core.errors import IntegrityError
from core.index.tables.chunks import chunk_ids_in_order, count_chunks_of
from core.index.tables.connection import read_snapshot
from core.index.tables.terms import CHUNK_UNIT, chunk_term_rows, chunk_terms_bytes, require_working
from core.ranking import scoring, stored
from core.ranking.postings import READ_ROWS, TermMajor, row_blocks
from core.ranking.sparse import (
    QueryPostings,
    SparseIndex,
    gather_postings,
    query_postings,
    query_term_ids,
)

# BM25's saturation and length normalisation of a chunk's term counts (Robertson & Zaragoza 2009).
VECTOR_K1 = 1.2
VECTOR_B = 0.75
# The power of idf on the query side (the stored numbers hold none): chosen on SciFact dev + train,
# the known-item and the MDN sets (bench/bench_vector_norm.py, bench/results/vector_norm.json).
VECTOR_IDF_POWER = 1.5
# The stored group of chunk arrays; v2: raw counts and lengths (v1, ``chunks:<slope>``, held idf); v3: and
# per classification the non-empty chunks and their length sum (a restricted caller's mean chunk length).
CHUNK_GROUP = "chunks:v3"


@dataclass
class ChunkVectors:
    """Term-major postings over chunks; chunk rows are grouped by note (by note id as stored; over segments,
    each segment's laid end to end: core.ranking.segment_view), ``group_rows`` naming each group's SparseIndex
    row (the order of the groups decides no tie: a note scores its best chunk, ranked by its row)."""

    indptr: np.ndarray  # int64 [n_terms + 1]: postings of term t are indptr[t]:indptr[t+1]
    # the per-posting arrays may be stored arrays read a piece at a time (core.ranking.stored)
    chunks: np.ndarray | stored.StoredArray  # int32 [postings] chunk row
    tf: np.ndarray | stored.StoredArray  # uint16 [postings] weighted term count, in CHUNK_UNIT units
    lengths: np.ndarray  # int64 [n_chunks] each chunk's length: the sum of its tf
    group_starts: np.ndarray  # int64 [n_groups] first chunk row of each note that has chunks
    group_rows: np.ndarray  # int64 [n_groups] SparseIndex row of that note (-1: not in it)
    chunk_ids: np.ndarray  # int64 [n_chunks] chunk id of each chunk row
    group_of_row: np.ndarray  # int64 [n_docs] group of each SparseIndex row (-1: no chunks)
    # per class of the SparseIndex (core.ranking.classes): its non-empty chunks, and their length sum
    class_chunks: np.ndarray  # int64 [classes]
    class_chunk_len: np.ndarray  # int64 [classes]
    # computed on load from the generation's statistics, never stored:
    idf: np.ndarray  # float32 [n_terms] smoothed idf over notes (scoring.tfidf_idf of SparseIndex.df)
    factors: np.ndarray  # float32 [n_chunks] BM25 length factor of each chunk (scoring.chunk_length_factors)
    # a restricted caller's view (``restrict_chunks``): bool per chunk, may it see the chunk's note; None: all
    seen: np.ndarray | None = None

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
                self.tf,
                self.lengths,
                self.group_starts,
                self.group_rows,
                self.chunk_ids,
                self.group_of_row,
                self.idf,
                self.factors,
            )
        )


def read_chunk_rows(conn: sqlite3.Connection) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(chunk ids, note id of each chunk, postings per chunk, terms, weighted tf), chunks by note."""
    n_chunks = count_chunks_of(conn, None)
    chunk_ids, done = np.empty(n_chunks, np.int64), 0
    ids = chunk_ids_in_order(conn, None)
    while batch := ids.fetchmany(16 * READ_ROWS):
        chunk_ids[done : done + len(batch)] = [r[0] for r in batch]
        done += len(batch)
    total = chunk_terms_bytes(conn, None)
    note_of, lengths = np.empty(n_chunks, np.int64), np.empty(n_chunks, np.int64)
    terms, tf = np.empty(total // 4, np.int32), np.empty(total // 4, np.uint16)
    pos = row = 0
    rows = chunk_term_rows(conn, None)
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


def _lengths(tf: np.ndarray, counts: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each chunk's length, the sum of its tf (chunk-major postings, ``counts`` per chunk)."""
    out = np.zeros(counts.shape[0], dtype=np.int64)
    for c0, c1 in row_blocks(starts):
        sl = slice(int(starts[c0]), int(starts[c1]))
        local = np.repeat(np.arange(c1 - c0), counts[c0:c1])
        out[c0:c1] = np.bincount(local, weights=tf[sl], minlength=c1 - c0).astype(np.int64)
    return out


def _term_major(
    terms: np.ndarray, tf: np.ndarray, counts: np.ndarray, starts: np.ndarray, n_terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr, chunk row, tf) sorted by term, chunk rows ascending within a term."""
    layout = TermMajor(terms, n_terms)
    out_rows = np.empty(terms.shape[0], dtype=np.int32)
    out_tf = np.empty(terms.shape[0], dtype=tf.dtype)
    for c0, c1 in row_blocks(starts):
        sl = slice(int(starts[c0]), int(starts[c1]))
        order, dest = layout.slots(terms[sl])
        out_rows[dest] = np.repeat(np.arange(c0, c1, dtype=np.int32), counts[c0:c1])[order]
        out_tf[dest] = tf[sl][order]
    return layout.indptr, out_rows, out_tf


_CHUNK_ARRAYS = ("indptr", "chunks", "tf", "lengths", "group_starts", "group_rows", "chunk_ids", "group_of_row",
                 "class_chunks", "class_chunk_len")  # fmt: skip


def vector_statistics(
    sparse: SparseIndex, n_terms: int, lengths: np.ndarray, mean: float | None = None
) -> dict[str, np.ndarray]:
    """What the vectors take from the notes the caller may see: idf of every term (from ``sparse``'s
    document frequencies) and each chunk's BM25 length factor (from the mean non-empty chunk length
    ``mean``; default: over every chunk)."""
    if sparse.df.shape[0] > n_terms:
        raise IntegrityError(f"chunk arrays know {n_terms} terms, the sparse index {sparse.df.shape[0]}")
    df = np.zeros(n_terms, dtype=np.int64)
    df[: sparse.df.shape[0]] = sparse.df
    factors = scoring.chunk_length_factors(lengths, VECTOR_K1, VECTOR_B, mean)
    return {"idf": scoring.tfidf_idf(df, sparse.n_stat), "factors": factors}


def restrict_chunks(vectors: ChunkVectors, sparse: SparseIndex) -> ChunkVectors:
    """``vectors`` as the caller of the restricted ``sparse`` (``SparseIndex.restrict``) sees them: the same
    arrays, the chunks of its hidden notes never scored, idf over its visible notes and the mean chunk
    length over their chunks (sums over its visible classes: exact integers)."""
    if sparse.seen is None or sparse.classes is None:
        return vectors
    chosen = sparse.seen.classes
    count, total = int(vectors.class_chunks[chosen].sum()), int(vectors.class_chunk_len[chosen].sum())
    mean = total / count if count else 1.0  # the float64 mean of exact integer lengths, in any order
    sizes = np.diff(np.append(vectors.group_starts, vectors.n_chunks))
    group_seen = np.zeros(vectors.group_rows.shape[0], dtype=bool)
    known = vectors.group_rows >= 0
    group_seen[known] = sparse.seen.rows[vectors.group_rows[known]]
    n_terms = max(int(vectors.indptr.shape[0]) - 1, 0)
    stats = vector_statistics(sparse, n_terms, vectors.lengths, mean)
    return replace(vectors, **stats, seen=np.repeat(group_seen, sizes))


def class_chunks(
    sparse: SparseIndex, group_rows: np.ndarray, group_starts: np.ndarray, lengths: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per class of ``sparse``: its non-empty chunks and their exact length sum (a chunk of a note
    ``sparse`` lacks belongs to no class)."""
    c = len(sparse.classes.names) if sparse.classes is not None else 0
    count, total = np.zeros(c, np.int64), np.zeros(c, np.int64)
    if sparse.classes is not None and lengths.size:
        sizes = np.diff(np.append(group_starts, lengths.shape[0]))
        row = np.repeat(group_rows, sizes)
        held = (row >= 0) & (lengths > 0)
        cls = sparse.classes.row_class[row[held]]
        np.add.at(count, cls, 1)
        np.add.at(total, cls, lengths[held].astype(np.int64))
    return count, total


def load_chunk_vectors(
    conn: sqlite3.Connection,
    sparse: SparseIndex,
    *,
    reader: stored.Reader | None = None,
) -> ChunkVectors:
    """The chunk vectors of the generation ``sparse`` was loaded from: the arrays the build stored (with a
    ``reader``, the postings read a piece at a time as queries need them), else computed from the rows
    (``compute_chunk_vectors``: the same numbers); idf and the length factors computed here. A restricted
    caller's are a view of them (``restrict_chunks``)."""
    if sparse.seen is not None:
        raise ValueError("load the whole generation's chunk vectors, then restrict_chunks them")
    arrays = stored.load_group(conn, CHUNK_GROUP, _CHUNK_ARRAYS, reader=reader)
    if arrays is None:
        return compute_chunk_vectors(conn, sparse)
    postings = int(arrays["indptr"][-1]) if arrays["indptr"].size else 0
    if arrays["chunks"].shape[0] != postings or arrays["tf"].shape[0] != postings:
        raise IntegrityError(f"stored chunk arrays disagree on the number of postings ({postings})")
    if arrays["lengths"].shape[0] != arrays["chunk_ids"].shape[0]:
        raise IntegrityError(f"stored chunk arrays disagree on the number of chunks ({arrays['chunk_ids'].shape[0]})")
    if arrays["group_of_row"].shape[0] != sparse.n_docs:
        raise IntegrityError(f"stored chunk arrays cover {arrays['group_of_row'].shape[0]} notes, not {sparse.n_docs}")
    classes = len(sparse.classes.names) if sparse.classes is not None else 0
    if arrays["class_chunks"].shape != (classes,) or arrays["class_chunk_len"].shape != (classes,):
        raise IntegrityError(f"stored chunk arrays do not cover the {classes} classifications")
    n_terms = max(int(arrays["indptr"].shape[0]) - 1, 0)
    return ChunkVectors(**arrays, **vector_statistics(sparse, n_terms, arrays["lengths"]))


def store_chunk_vectors(conn: sqlite3.Connection, vectors: ChunkVectors) -> None:
    """Store ``vectors`` (computed from this database's rows) in the build's database: the per-chunk
    arrays only (idf and the length factors, which depend on every note, are computed on load)."""
    arrays = {name: getattr(vectors, name) for name in _CHUNK_ARRAYS}
    ascending = ("chunks", "indptr", "group_starts", "chunk_ids")  # stored as differences
    stored.save_group(conn, CHUNK_GROUP, arrays, ("chunks", "tf"), ascending)  # per posting: in pieces


def compute_chunk_vectors(conn: sqlite3.Connection, sparse: SparseIndex) -> ChunkVectors:
    """Read every chunk vector of the generation ``sparse`` was loaded from (same snapshot), with the
    per-class chunk counts and length sums.

    Memory-lean like ``load_sparse``: 6 bytes per posting are read, and the term-major copy (6 bytes
    per posting, what is held) is filled block by block.
    """
    require_working(conn)
    with read_snapshot(conn):  # a legacy index.db may change between the reads below
        chunk_ids, note_of, counts, terms, tf = read_chunk_rows(conn)
    n_terms = max(int(sparse.df.shape[0]), int(terms.max(initial=-1)) + 1)
    starts = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    lengths = _lengths(tf, counts, starts)
    indptr, rows, tf = _term_major(terms, tf, counts, starts, n_terms)
    del terms
    group_starts = np.flatnonzero(np.diff(note_of, prepend=-1)) if note_of.size else np.zeros(0, np.int64)
    group_rows = sparse.rows_of(note_of[group_starts])
    group_of_row = np.full(sparse.n_docs, -1, dtype=np.int64)
    known = group_rows >= 0
    group_of_row[group_rows[known]] = np.flatnonzero(known)
    arrays = (indptr, rows, tf, lengths, group_starts, group_rows, chunk_ids, group_of_row)
    count, total = class_chunks(sparse, group_rows, group_starts, lengths)
    return ChunkVectors(*arrays, count, total, **vector_statistics(sparse, n_terms, lengths))


class VectorScores(NamedTuple):
    scores: np.ndarray  # float32 [n_docs]: the best chunk score of each note
    matched: np.ndarray  # float32 [n_docs]: distinct query terms the note holds (0: not a candidate)
    per_chunk: np.ndarray  # float64 [n_chunks]: each chunk's score


def vector_scores(
    index: SparseIndex, vectors: ChunkVectors, terms: list[str], postings: QueryPostings | None = None
) -> VectorScores:
    """Per SparseIndex row: the best BM25 score of the query with any chunk of the note (the query's
    terms weighted by ``scoring.chunk_query_weights``, each chunk's by ``scoring.bm25_chunk_scores``)."""
    ids, qtf = query_term_ids(index, terms)
    n = index.n_docs
    scores = np.zeros(n, dtype=np.float32)
    if ids.size == 0:
        return VectorScores(scores, np.zeros(n, dtype=np.float32), np.zeros(vectors.n_chunks))
    term_weight = postings.weight if postings is not None else None  # the query analysis' term weights
    q = scoring.chunk_query_weights(qtf, vectors.idf[ids], VECTOR_IDF_POWER, term_weight)
    pos, owner = gather_postings(vectors.indptr, ids)
    rows = vectors.chunks[pos]
    if vectors.seen is not None:  # a hidden note's chunks are never scored
        keep = np.flatnonzero(vectors.seen[rows])
        pos, owner, rows = pos[keep], owner[keep], rows[keep]
    tf = vectors.tf[pos].astype(np.float32) / np.float32(CHUNK_UNIT)
    per_chunk = scoring.bm25_chunk_scores(rows, tf, vectors.factors[rows], q[owner], VECTOR_K1, vectors.n_chunks)
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
