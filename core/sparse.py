"""Sparse term statistics of a verified generation: BM25F and TF-IDF scoring in numpy.

The per-note term vectors stored at build time (``note_terms``, FTS5 tokens) are loaded
once per generation into term-major posting arrays; a query then costs a few array
slices. The structure holds numbers only, never note text, and is cached per process by
(index path, generation id, sha256) like the dense matrix.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass

import numpy as np

from core import scoring
from core.schema import FTS_COLUMNS


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
    note_ids: np.ndarray      # int64 [n_docs], row -> note id
    term_id: dict[str, int]   # FTS5 token -> term id
    indptr: np.ndarray        # int64 [max_term_id + 2]: postings of term t are indptr[t]:indptr[t+1]
    docs: np.ndarray          # int32 [postings] row of the document
    tf: np.ndarray            # uint16 [postings, fields]
    field_mask: np.ndarray    # uint8 [postings] bit f set when tf[:, f] > 0
    field_len: np.ndarray     # float32 [n_docs, fields]
    df: np.ndarray            # int64 [max_term_id + 1]
    tfidf: np.ndarray         # float32 [postings], L2-normalised per document
    params: RankParams
    bm25: np.ndarray          # float32 [postings]
    bm25_idf: np.ndarray      # float32 [max_term_id + 1]

    @property
    def n_docs(self) -> int:
        return int(self.note_ids.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.note_ids, self.indptr, self.docs, self.tf, self.field_mask,
                                      self.field_len, self.df, self.tfidf, self.bm25, self.bm25_idf))

    def row_of(self) -> dict[int, int]:
        return {int(n): i for i, n in enumerate(self.note_ids)}


def load_sparse(conn: sqlite3.Connection, params: RankParams = DEFAULT_PARAMS) -> SparseIndex:
    """Read every note's term vector and build term-major postings."""
    rows = conn.execute("SELECT note_id, term_ids, tf FROM note_terms ORDER BY note_id").fetchall()
    n_fields = len(FTS_COLUMNS)
    note_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    term_lists = [np.frombuffer(r[1], dtype="<i4") for r in rows]
    tf_lists = [np.frombuffer(r[2], dtype="<u2").reshape(-1, n_fields) for r in rows]
    lengths = np.fromiter((t.shape[0] for t in term_lists), dtype=np.int64, count=len(rows))
    terms = np.concatenate(term_lists) if rows else np.empty(0, np.int32)
    tf = np.concatenate(tf_lists) if rows else np.empty((0, n_fields), np.uint16)
    docs = np.repeat(np.arange(len(rows), dtype=np.int32), lengths)
    term_id = dict(conn.execute("SELECT term, id FROM terms"))
    max_t = max(term_id.values(), default=0)
    order = np.argsort(terms, kind="stable")
    terms, tf, docs = terms[order], tf[order], docs[order]
    df = np.bincount(terms, minlength=max_t + 1).astype(np.int64)
    indptr = np.zeros(max_t + 2, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    field_len = np.zeros((len(rows), n_fields), dtype=np.float32)
    np.add.at(field_len, docs, tf.astype(np.float32)) if rows else None
    mask = np.zeros(tf.shape[0], dtype=np.uint8)
    for f in range(n_fields):
        mask |= ((tf[:, f] > 0).astype(np.uint8) << f)
    n = len(rows)
    tfidf = scoring.l2_normalize_rows(docs, scoring.tfidf_weights(tf.sum(axis=1), scoring.tfidf_idf(df, n)[terms]), n)
    index = SparseIndex(note_ids, term_id, indptr, docs, tf, mask, field_len, df, tfidf, params,
                        np.empty(0, np.float32), scoring.bm25_idf(df, n))
    return with_params(index, params)


def with_params(index: SparseIndex, params: RankParams) -> SparseIndex:
    """Precompute per-posting BM25F weights for ``params`` (cheap; used by tuning too)."""
    terms = np.repeat(np.arange(index.df.shape[0]), index.df)
    avg = index.field_len.mean(axis=0) if index.n_docs else np.ones(len(FTS_COLUMNS), np.float32)
    pseudo = scoring.bm25f_pseudo_tf(index.tf, index.field_len[index.docs], avg,
                                     np.asarray(params.weights, np.float32), np.asarray(params.b, np.float32))
    bm25 = scoring.bm25_saturate(pseudo, index.bm25_idf[terms], params.k1)
    return SparseIndex(index.note_ids, index.term_id, index.indptr, index.docs, index.tf, index.field_mask,
                       index.field_len, index.df, index.tfidf, params, bm25, index.bm25_idf)


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


def bm25_scores(index: SparseIndex, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(scores, matched) over all documents: BM25F plus the coverage bonuses of RankParams.

    ``matched`` counts the distinct query terms each document contains. The bonus rewards
    documents that match the whole query (idf-weighted coverage) and those whose title or
    headings hold every query term, without dropping documents that match only some terms.
    """
    ids, _ = query_term_ids(index, terms)
    n = index.n_docs
    scores = np.zeros(n, dtype=np.float32)
    matched = np.zeros(n, dtype=np.float32)
    cov = np.zeros(n, dtype=np.float32)
    head = np.zeros(n, dtype=np.float32)
    idf = index.bm25_idf[ids] if ids.size else np.empty(0, np.float32)
    p = index.params
    for tid, w in zip(ids.tolist(), idf.tolist()):
        sl = slice(index.indptr[tid], index.indptr[tid + 1])
        d = index.docs[sl]
        scores[d] += index.bm25[sl]
        matched[d] += 1.0
        if p.coverage_weight:
            cov[d] += w
        if p.heading_coverage_weight:
            head[d] += w * ((index.field_mask[sl] & _TITLE_HEADING_BITS) > 0)
    total = float(idf.sum())
    if total > 0 and (p.coverage_weight or p.heading_coverage_weight):
        top = float(scores.max()) if n else 0.0
        bonus = p.coverage_weight * scoring.coverage(cov, total) ** 2
        bonus += p.heading_coverage_weight * scoring.coverage(head, total) ** 2
        scores += (bonus * top).astype(np.float32) * (matched > 0)
    return scores, matched


def tfidf_scores(index: SparseIndex, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(cosine, matched): cosine of the query's TF-IDF vector with every document's."""
    ids, qtf = query_term_ids(index, terms)
    n = index.n_docs
    scores = np.zeros(n, dtype=np.float32)
    matched = np.zeros(n, dtype=np.float32)
    if ids.size == 0:
        return scores, matched
    q = scoring.tfidf_weights(qtf, scoring.tfidf_idf(index.df[ids], n))
    norm = float(np.linalg.norm(q)) or 1.0
    for tid, w in zip(ids.tolist(), (q / norm).tolist()):
        sl = slice(index.indptr[tid], index.indptr[tid + 1])
        scores[index.docs[sl]] += index.tfidf[sl] * w
        matched[index.docs[sl]] += 1.0
    return scores, matched


class SparseCache:
    """Per-process cache of SparseIndex by (index path, generation id, sha256); one entry per index dir."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[tuple, SparseIndex]] = {}
        self.loads = 0

    def get(self, owner: str, key: tuple, loader) -> SparseIndex:
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


SPARSE_CACHE = SparseCache()
