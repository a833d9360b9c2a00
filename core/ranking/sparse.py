"""Sparse term statistics of a verified generation: BM25F scoring in numpy (and the cache the
chunk-level vectors of `vector`, core.ranking.chunk_vectors, share).

The per-note term vectors stored at build time (``note_terms``, FTS5 tokens) are loaded
once per generation into term-major posting arrays; a query then costs a few array
slices. The structure holds numbers only, never note text, and is cached per process by
(index path, generation id, sha256) like the dense matrix.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import numpy as np

from core.errors import IntegrityError
from core.index.schema import FTS_COLUMNS
from core.ranking import scoring, stored
from core.ranking.postings import READ_ROWS, TermMajor, row_blocks


@dataclass(frozen=True)
class RankParams:
    """BM25F parameters; tuned on SciFact train and the known-item sets (docs/architecture.md)."""

    k1: float = 0.9
    # field order = FTS_COLUMNS: title, description, tags, headings, body
    weights: tuple[float, ...] = (2.0, 1.5, 1.5, 4.0, 1.0)
    b: tuple[float, ...] = (0.5, 0.5, 0.3, 0.5, 0.75)
    coverage_weight: float = 0.0
    heading_coverage_weight: float = 0.5


DEFAULT_PARAMS = RankParams()
_TITLE_HEADING_BITS = np.uint8((1 << FTS_COLUMNS.index("title")) | (1 << FTS_COLUMNS.index("headings")))


@dataclass
class SparseIndex:
    """Term-major postings of one generation; numbers only, never note text."""

    note_ids: np.ndarray  # int64 [n_docs], row -> note id (ascending)
    term_id: dict[str, int]  # FTS5 token -> term id
    indptr: np.ndarray  # int64 [max_term_id + 2]: postings of term t are indptr[t]:indptr[t+1]
    docs: np.ndarray  # int32 [postings] row of the document (ascending within a term)
    field_mask: np.ndarray  # uint8 [postings] bit f set when the term occurs in field f
    body_tf: np.ndarray  # uint16 [postings] occurrences in the body
    df: np.ndarray  # int64 [max_term_id + 1]
    params: RankParams
    bm25: np.ndarray  # float32 [postings] BM25F weight under ``params``
    bm25_idf: np.ndarray  # float32 [max_term_id + 1]

    @property
    def n_docs(self) -> int:
        return int(self.note_ids.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(
            a.nbytes
            for a in (
                self.note_ids,
                self.indptr,
                self.docs,
                self.field_mask,
                self.body_tf,
                self.df,
                self.bm25,
                self.bm25_idf,
            )
        )

    def rows_of(self, note_ids: np.ndarray) -> np.ndarray:
        """The row of each note id (-1 for an id this index does not hold)."""
        rows = np.searchsorted(self.note_ids, note_ids)
        if self.n_docs == 0:
            return np.full(rows.shape, -1, dtype=np.int64)
        found = (rows < self.n_docs) & (self.note_ids[np.minimum(rows, self.n_docs - 1)] == note_ids)
        return np.where(found, rows, -1).astype(np.int64)


T = TypeVar("T")
_BODY = FTS_COLUMNS.index("body")


def _read_vectors(
    conn: sqlite3.Connection, n_fields: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(note_ids, postings per note, terms, tf [P, fields], field lengths [notes, fields]) in
    note order, read ``READ_ROWS`` notes at a time into preallocated arrays."""
    n, total = conn.execute("SELECT count(*), coalesce(sum(length(term_ids)), 0) FROM note_terms").fetchone()
    note_ids, lengths = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    terms = np.empty(total // 4, dtype=np.int32)
    tf = np.empty((total // 4, n_fields), dtype=np.uint16)
    field_len = np.zeros((n, n_fields), dtype=np.float32)
    pos = row = 0
    rows = conn.execute("SELECT note_id, term_ids, tf FROM note_terms ORDER BY note_id")
    while batch := rows.fetchmany(READ_ROWS):
        ids, term_blobs, tf_blobs = zip(*batch)
        k, r = sum(map(len, term_blobs)) // 4, len(batch)
        note_ids[row : row + r] = ids
        lengths[row : row + r] = [len(blob) // 4 for blob in term_blobs]
        terms[pos : pos + k] = np.frombuffer(b"".join(term_blobs), dtype="<i4")
        tf[pos : pos + k] = np.frombuffer(b"".join(tf_blobs), dtype="<u2").reshape(k, n_fields)
        filled = np.flatnonzero(lengths[row : row + r])  # reduceat needs rows with postings
        if filled.size:
            firsts = np.concatenate(([0], np.cumsum(lengths[row : row + r])[:-1]))[filled]
            field_len[row + filled] = np.add.reduceat(tf[pos : pos + k], firsts, axis=0, dtype=np.int64)
        pos, row = pos + k, row + r
    return note_ids, lengths, terms, tf, field_len


_SPARSE_ARRAYS = ("note_ids", "indptr", "docs", "field_mask", "body_tf", "df", "bm25", "bm25_idf")


def sparse_group(params: RankParams) -> str:
    """The stored group of arrays computed under ``params`` (core.ranking.stored)."""
    return f"sparse:{params!r}"


def load_sparse(conn: sqlite3.Connection, params: RankParams = DEFAULT_PARAMS) -> SparseIndex:
    """The term-major postings of ``conn``: the arrays the build stored for ``params`` (one query, no
    rebuild), else computed from the rows (``compute_sparse``: the same numbers, e.g. for other params)."""
    arrays = stored.load_group(conn, sparse_group(params), (*_SPARSE_ARRAYS, "term_text", "term_ids"))
    if arrays is None:
        return compute_sparse(conn, params)
    index = SparseIndex(
        note_ids=arrays["note_ids"],
        term_id=stored.unpack_terms(arrays),
        indptr=arrays["indptr"],
        docs=arrays["docs"],
        field_mask=arrays["field_mask"],
        body_tf=arrays["body_tf"],
        df=arrays["df"],
        params=params,
        bm25=arrays["bm25"],
        bm25_idf=arrays["bm25_idf"],
    )
    postings = int(index.indptr[-1]) if index.indptr.size else 0
    if any(a.shape[0] != postings for a in (index.docs, index.field_mask, index.body_tf, index.bm25)):
        raise IntegrityError(f"stored sparse arrays disagree on the number of postings ({postings})")
    return index


def store_sparse(conn: sqlite3.Connection, index: SparseIndex) -> None:
    """Store ``index`` (computed from this database's rows) in the build's database."""
    arrays = {name: getattr(index, name) for name in _SPARSE_ARRAYS}
    stored.save_group(conn, sparse_group(index.params), {**arrays, **stored.pack_terms(index.term_id)})


def compute_sparse(conn: sqlite3.Connection, params: RankParams = DEFAULT_PARAMS) -> SparseIndex:
    """Read every note's term vector and build term-major postings with their BM25F weights.

    Memory-lean: the row-major terms and tf (14 bytes per posting) are read once; weights,
    field masks and body counts are computed a block of notes at a time and dropped straight
    into their term-major slots (11 bytes per posting, what is held).
    """
    n_fields = len(FTS_COLUMNS)
    snapshot = not conn.in_transaction  # a legacy index.db may change between the reads below
    if snapshot:
        conn.execute("BEGIN")
    try:
        note_ids, lengths, terms, tf, field_len = _read_vectors(conn, n_fields)
        term_id = dict(conn.execute("SELECT term, id FROM terms"))
    finally:
        if snapshot:
            conn.execute("ROLLBACK")
    n = int(note_ids.shape[0])
    layout = TermMajor(terms, max(max(term_id.values(), default=0), int(terms.max(initial=0))) + 1)
    df = layout.counts.astype(np.int64)
    avg = field_len.mean(axis=0) if n else np.ones(n_fields, np.float32)
    factors = scoring.bm25f_field_factors(
        field_len, avg, np.asarray(params.weights, np.float32), np.asarray(params.b, np.float32)
    )
    bm25_idf = scoring.bm25_idf(df, n)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    docs = np.empty(terms.shape[0], dtype=np.int32)
    mask = np.empty(terms.shape[0], dtype=np.uint8)
    body_tf = np.empty(terms.shape[0], dtype=np.uint16)
    bm25 = np.empty(terms.shape[0], dtype=np.float32)
    for r0, r1 in row_blocks(starts):
        sl = slice(int(starts[r0]), int(starts[r1]))
        block_tf, block_terms = tf[sl], terms[sl]
        block_docs = np.repeat(np.arange(r0, r1, dtype=np.int32), lengths[r0:r1])
        pseudo = scoring.bm25f_combine(block_tf, factors[block_docs])
        order, dest = layout.slots(block_terms)
        docs[dest] = block_docs[order]
        block_mask = np.zeros(block_terms.shape[0], dtype=np.uint8)
        for f in range(n_fields):
            block_mask |= (block_tf[:, f] > 0).view(np.uint8) << np.uint8(f)
        mask[dest] = block_mask[order]
        body_tf[dest] = block_tf[order, _BODY]
        bm25[dest] = scoring.bm25_saturate(pseudo, bm25_idf[block_terms], params.k1)[order]
    return SparseIndex(note_ids, term_id, layout.indptr, docs, mask, body_tf, df, params, bm25, bm25_idf)


def query_term_ids(index: SparseIndex, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct known term ids of the query and their query frequencies."""
    counts: dict[int, int] = {}
    for t in terms:
        tid = index.term_id.get(t)
        if tid is not None:
            counts[tid] = counts.get(tid, 0) + 1
    ids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    qtf = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
    return ids, qtf


def gather_postings(indptr: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(posting positions, owning query-term index) of all postings of the given term ids in a
    term-major layout whose postings of term t are ``indptr[t]:indptr[t+1]``."""
    starts, ends = indptr[ids], indptr[ids + 1]
    lengths = ends - starts
    if ids.size == 0 or lengths.sum() == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    owner = np.repeat(np.arange(ids.size), lengths)
    offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return starts[owner] + offsets, owner


class QueryPostings(NamedTuple):
    """Every posting of a query's known terms in one SparseIndex, gathered once per query."""

    ids: np.ndarray  # distinct known term ids
    pos: np.ndarray  # posting positions
    owner: np.ndarray  # index into ``ids`` of each posting
    docs: np.ndarray  # document row of each posting


def query_postings(index: SparseIndex, terms: list[str]) -> QueryPostings:
    ids, _ = query_term_ids(index, terms)
    pos, owner = gather_postings(index.indptr, ids)
    return QueryPostings(ids, pos, owner, index.docs[pos])


def bm25_scores(
    index: SparseIndex, terms: list[str], postings: QueryPostings | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, matched) over all documents: BM25F plus the coverage bonuses of RankParams.

    ``matched`` counts the distinct query terms each document contains. The bonus rewards
    documents that match the whole query (idf-weighted coverage) and those whose title or
    headings hold every query term, without dropping documents that match only some terms.
    All postings of the query are gathered once and summed per document with ``bincount``.
    """
    ids, pos, owner, docs = postings if postings is not None else query_postings(index, terms)
    n = index.n_docs
    scores = np.bincount(docs, weights=index.bm25[pos], minlength=n).astype(np.float32)
    matched = np.bincount(docs, minlength=n).astype(np.float32)
    p = index.params
    idf = index.bm25_idf[ids].astype(np.float64)
    total = float(idf.sum())
    if total > 0 and (p.coverage_weight or p.heading_coverage_weight):
        bonus = np.zeros(n, dtype=np.float64)
        if p.coverage_weight:
            cov = np.bincount(docs, weights=idf[owner], minlength=n)
            bonus += p.coverage_weight * scoring.coverage(cov, total) ** 2
        if p.heading_coverage_weight:
            in_head = (index.field_mask[pos] & _TITLE_HEADING_BITS) > 0
            head = np.bincount(docs, weights=idf[owner] * in_head, minlength=n)
            bonus += p.heading_coverage_weight * scoring.coverage(head, total) ** 2
        top = float(scores.max()) if n else 0.0
        scores += (bonus * top).astype(np.float32) * (matched > 0)
    return scores, matched


def body_term_counts(
    index: SparseIndex, terms: list[str], note_ids: list[int], postings: QueryPostings | None = None
) -> dict[int, int]:
    """Occurrences of the query's terms in each given note's body (exact, from the stored vectors)."""
    if not note_ids:
        return {}
    _, pos, _, docs = postings if postings is not None else query_postings(index, terms)
    per_doc = np.bincount(docs, weights=index.body_tf[pos], minlength=index.n_docs)
    rows = index.rows_of(np.asarray(note_ids, dtype=np.int64))
    return {nid: int(per_doc[r]) if r >= 0 else 0 for nid, r in zip(note_ids, rows.tolist())}


class GenerationCache:
    """Per-process cache of one derived structure per index dir, valid for one verified generation
    (key = index path, generation id, sha256); a new generation replaces the old entry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[tuple, Any]] = {}
        self.loads = 0

    def get(self, owner: str, key: tuple, loader: Callable[[], T]) -> T:
        with self._lock:
            found = self._entries.get(owner)
            if found is not None and found[0] == key:
                return found[1]
        value = loader()
        with self._lock:
            self.loads += 1
            self._entries[owner] = (key, value)  # a new generation replaces the old entry
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


SPARSE_CACHE: GenerationCache = GenerationCache()  # SparseIndex per generation
CHUNK_CACHE: GenerationCache = GenerationCache()  # ChunkVectors (vector mode) per generation
GRAPH_CACHE: GenerationCache = GenerationCache()  # link adjacency per generation
