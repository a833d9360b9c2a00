"""Sparse term statistics of a verified generation: BM25F scoring in numpy (and the cache the
chunk-level vectors of `vector`, core.ranking.chunk_vectors, share).

The per-note term vectors stored at build time (``note_terms``, FTS5 tokens) are loaded
once per generation into term-major posting arrays (core.ranking.sparse_index); a query then
costs a few array slices and computes BM25F for the postings it gathers (core.ranking.bm25f).
The structure holds numbers only, never note text, and is cached per process by
(index path, generation id, sha256) like the dense matrix.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np

from core.errors import IntegrityError
from core.index.tables import notes
from core.index.tables.notes_fts import FTS_COLUMNS
from core.ranking import bm25f, scoring, stored
from core.ranking.classes import CLASS_ARRAYS, class_stats_from
from core.ranking.expansion import VOCABULARY_ARRAYS, vocabulary_arrays
from core.ranking.filters import Filters
from core.ranking.postings import distinct
from core.ranking.sparse_index import (
    DEFAULT_PARAMS,
    HEADING_BIT,
    TITLE_BIT,
    RankParams,
    SparseIndex,
    gather_postings,
    id_order_of,
)
from core.ranking.sparse_rows import compute_sparse

__all__ = [
    "DEFAULT_PARAMS",
    "TITLE_BIT",
    "RankParams",
    "SparseIndex",
    "compute_sparse",
    "gather_postings",
]

T = TypeVar("T")


# one value per posting (or side value): stored in pieces
_POSTING_ARRAYS = ("docs", "field_mask", "body_tf", "side_tf", "name_terms")
SPARSE_ARRAYS = (  # the stored arrays of a SparseIndex (besides its vocabulary, default mask and terms)
    "note_ids",
    "indptr",
    *_POSTING_ARRAYS,
    "side_ptr",
    "field_len",
    "df",
    "name_ptr",
)
# The arrays' layout: a generation stored with another (v1 held name term counts, v2 BM25F weights under
# one RankParams, v3 idf arrays) computes from its rows. Since v4 no stored number depends on the ranking
# parameters or on collection statistics (N, df, average lengths): a query computes what does. v5 adds the
# per-classification statistics a restricted caller's are summed from (core.ranking.classes).
SPARSE_LAYOUT = 5
SPARSE_GROUP = f"sparse:v{SPARSE_LAYOUT}"  # the stored group of arrays (core.ranking.stored)


def load_sparse(
    conn: sqlite3.Connection,
    params: RankParams = DEFAULT_PARAMS,
    *,
    reader: stored.Reader | None = None,
) -> SparseIndex:
    """The term-major postings of ``conn``: the arrays the build stored for ``params`` (no rebuild;
    with a ``reader``, the postings are read a piece at a time as queries need them), else computed
    from the rows (``compute_sparse``: the same numbers, e.g. for other params). A restricted
    caller's is a view of it (``SparseIndex.restrict``)."""
    arrays = stored.load_group(
        conn,
        SPARSE_GROUP,
        (*SPARSE_ARRAYS, *VOCABULARY_ARRAYS, *CLASS_ARRAYS, "default_mask", "term_text", "term_ids"),
        reader=reader,
    )
    if arrays is None:
        return compute_sparse(conn, params)
    index = SparseIndex(
        note_ids=arrays["note_ids"],
        term_id=stored.unpack_terms(arrays),
        indptr=arrays["indptr"],
        docs=arrays["docs"],
        field_mask=arrays["field_mask"],
        body_tf=arrays["body_tf"],
        side_tf=arrays["side_tf"],
        side_ptr=arrays["side_ptr"],
        field_len=arrays["field_len"],
        df=arrays["df"],
        params=params,
        name_ptr=arrays["name_ptr"],
        name_terms=arrays["name_terms"],
        vocabulary={name: arrays[name] for name in VOCABULARY_ARRAYS},
        default_mask=arrays["default_mask"],
        classes=class_stats_from(arrays, int(arrays["note_ids"].shape[0]), len(FTS_COLUMNS), arrays["df"].shape[0]),
        id_order=id_order_of(arrays["note_ids"]),  # rows in path order (compute_sparse), ids need not follow
    )
    postings = int(index.indptr[-1]) if index.indptr.size else 0
    if any(a.shape[0] != postings for a in (index.docs, index.field_mask, index.body_tf)):
        raise IntegrityError(f"stored sparse arrays disagree on the number of postings ({postings})")
    sides = int(index.side_ptr[-1]) if index.side_ptr.size else 0
    if index.side_ptr.shape != index.indptr.shape or index.side_tf.shape[0] != sides:
        raise IntegrityError(f"stored side counts do not fit the {index.indptr.shape[0] - 1} terms' postings")
    names = int(index.name_ptr[-1]) if index.name_ptr.size else -1
    if index.name_ptr.shape != (index.n_docs + 1,) or index.name_terms.shape[0] != names:
        raise IntegrityError(f"stored name terms do not cover the {index.n_docs} notes")
    if index.field_len.shape != (index.n_docs, len(FTS_COLUMNS)):
        raise IntegrityError(f"stored field lengths {index.field_len.shape} do not cover the {index.n_docs} notes")
    if index.default_mask is None or index.default_mask.shape != index.note_ids.shape:
        raise IntegrityError(f"stored default mask does not cover the {index.n_docs} notes")
    return index


def store_sparse(conn: sqlite3.Connection, index: SparseIndex) -> None:
    """Store ``index`` (computed from this database's rows) and its query vocabulary in the build's database."""
    arrays = {name: getattr(index, name) for name in SPARSE_ARRAYS}
    vocab = vocabulary_arrays(index.term_id, index.df)
    mask = {"default_mask": default_filter_mask(conn, index.note_ids)}
    if index.classes is None or not isinstance(index.term_id, dict):
        raise ValueError("store_sparse stores a whole generation's index, computed with its classes")
    stored.save_group(
        conn,
        SPARSE_GROUP,
        {**arrays, **vocab, **mask, **index.classes.arrays(), **stored.pack_terms(index.term_id)},
        _POSTING_ARRAYS,
        # ascending within a term's postings / a note's name terms; the pointers and ids ascend: stored as differences
        ("docs", "name_terms", "indptr", "side_ptr", "name_ptr", "note_ids", "term_ids", "vocab_base_indptr"),
    )


def default_filter_mask(conn: sqlite3.Connection, note_ids: np.ndarray) -> np.ndarray:
    """Per note of ``note_ids``: do the default filters (``Filters()``: none set, every classification)
    let it through? What a search's filter mask is without filters (core.modes.context), computed by the
    same SQL; stored by the build, since at 100k notes that query costs a new process ~0.2 s."""
    clause, vals = Filters().where()
    ids = notes.filtered_note_ids(conn, clause, vals)
    return np.isin(note_ids, np.asarray(ids, dtype=np.int64))


def known_term_id(index: SparseIndex, term: str) -> int | None:
    """The id of ``term`` when some note of ``index`` holds it (``query_term_ids``), else None."""
    tid = index.term_id.get(term)
    return tid if tid is not None and tid < index.df.shape[0] and index.df[tid] > 0 else None


def query_term_ids(index: SparseIndex, terms: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct known term ids of the query and their query frequencies. A term no note holds (df 0: a
    dictionary keeps the terms of notes deleted since it was written, e.g. a merged segment's) is unknown,
    as in a cold build of the same notes: it would weigh in ``vector``'s query norm."""
    counts: dict[int, int] = {}
    for t in terms:
        tid = known_term_id(index, t)
        if tid is not None:
            counts[tid] = counts.get(tid, 0) + 1
    ids = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    qtf = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
    return ids, qtf


class QueryPostings(NamedTuple):
    """Every posting of a query's known terms in one SparseIndex, gathered once per query."""

    ids: np.ndarray  # distinct known term ids
    pos: np.ndarray  # posting positions
    owner: np.ndarray  # index into ``ids`` of each posting
    docs: np.ndarray  # document row of each posting
    weight: np.ndarray | None = None  # float32 per id: the term's share of the score (None: all 1)
    cover: np.ndarray | None = None  # float32 per id: its share in the coverage bonus (None: all 1)
    # a restricted caller's: the positions of the gathered postings' side values (None: every posting of ``ids``)
    side: np.ndarray | None = None
    # the postings' field masks and body counts, read with their docs (a term's run at once, not a gather)
    mask: np.ndarray | None = None
    body: np.ndarray | None = None


def query_postings(
    index: SparseIndex,
    terms: list[str],
    weights: list[float] | None = None,
    cover: list[float] | None = None,
) -> QueryPostings:
    """The query's postings (of the notes the caller may see); ``weights`` / ``cover`` (one per term of
    ``terms``, which are then distinct) scale each term's score and its share in the coverage bonus.
    A pruned run's are fewer (core.ranking.candidate_postings)."""
    ids, _ = query_term_ids(index, terms)
    pos, owner = gather_postings(index.indptr, ids)
    docs, side, mask, body = index.docs[pos], None, np.asarray(index.field_mask[pos]), np.asarray(index.body_tf[pos])
    keep = None if index.seen is None else index.seen.rows[docs]  # a hidden note's postings are never scored
    if keep is not None:
        side, _ = gather_postings(index.side_ptr, ids)
        if side.size:  # the side values of the kept postings, in their order
            side = side[np.repeat(keep, bm25f.side_counts(mask))]
        kept = np.flatnonzero(keep)
        pos, owner, docs, mask, body = pos[kept], owner[kept], docs[kept], mask[kept], body[kept]
    w, c = term_shares(index, terms, weights, cover)
    return QueryPostings(ids, pos, owner, docs, w, c, side, mask, body)


def term_shares(
    index: SparseIndex, terms: list[str], weights: list[float] | None, cover: list[float] | None
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``QueryPostings.weight`` and ``.cover``: ``weights`` / ``cover`` (one per distinct term of ``terms``)
    of the known terms, float32, in their order (None: not given)."""
    if weights is None and cover is None:
        return None, None
    known = [i for i, t in enumerate(terms) if known_term_id(index, t) is not None]
    w = np.asarray([weights[i] if weights is not None else 1.0 for i in known], dtype=np.float32)
    c = np.asarray([cover[i] if cover is not None else 1.0 for i in known], dtype=np.float32)
    return w, c


def bm25_scores(
    index: SparseIndex,
    terms: list[str],
    postings: QueryPostings | None = None,
    params: RankParams | None = None,
    named: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, matched) over all documents: BM25F plus the coverage bonuses of RankParams.

    ``matched`` counts the distinct query terms each document contains. The bonus rewards documents
    that match the whole query (idf-weighted coverage), those whose headings hold every query term, and
    those whose names (title field) hold every query term, the more so the closer the name is to the query
    (``name_match``) and never less than the headings would (``scoring.name_bonus``), without dropping
    documents that match only some terms. All postings of the query are gathered once, weighed (BM25F of
    their counts) and summed per document with ``bincount``. ``params`` overrides the index's coverage
    weights; ``named`` holds the rows of the notes one of whose names the query is exactly (name match 1)."""
    scores, matched, _ = bm25_scores_top(index, terms, postings, params, named)
    return scores, matched


def bm25_scores_top(
    index: SparseIndex,
    terms: list[str],
    postings: QueryPostings | None = None,
    params: RankParams | None = None,
    named: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """``bm25_scores`` and the best BM25F score the bonuses were scaled by (0.0 when none was)."""
    q = postings if postings is not None else query_postings(index, terms)
    ids, pos, owner, docs, weight, cover = q.ids, q.pos, q.owner, q.docs, q.weight, q.cover
    n = index.n_docs
    top = 0.0
    fields = index.field_mask[pos] if q.mask is None else q.mask
    bm25 = index.posting_weights(ids, pos, owner, docs, q.side, fields, q.body)  # for the gathered postings only
    contribution = bm25 if weight is None else bm25 * weight[owner]
    scores = np.bincount(docs, weights=contribution, minlength=n).astype(np.float32)
    matched = np.bincount(docs, minlength=n).astype(np.float32)
    p = params or index.params
    idf = index.idf(ids).astype(np.float64)
    if cover is not None:  # only content words count towards coverage (core.ranking.expansion)
        idf = idf * cover
    total = float(idf.sum())
    weights = (
        p.coverage_weight,
        p.heading_coverage_weight,
        p.title_heading_coverage_weight,
        p.name_match_weight,
        p.title_coverage_weight,
    )
    if total > 0 and any(weights):
        # the bonuses are computed for the matched rows only (the others get none); a bool array: numpy's nonzero
        # of a float array costs 5-8 times as much (100k notes: 240-560 us against 27-70 us)
        rows = np.flatnonzero(matched != 0)
        bonus = np.zeros(rows.shape[0], dtype=np.float64)
        term_idf = idf[owner]
        in_title = np.flatnonzero((fields & TITLE_BIT) != 0)  # positions, not masks: one pass, then small gathers

        def held(sel: np.ndarray | None = None) -> np.ndarray:  # the postings in those fields only (others add 0)
            at = docs if sel is None else docs[sel]
            return np.bincount(at, weights=term_idf if sel is None else term_idf[sel], minlength=n)[rows]

        if p.coverage_weight:
            bonus += scoring.coverage_bonus(held(), total, p.coverage_weight)
        if p.heading_coverage_weight:
            bonus += scoring.coverage_bonus(
                held(np.flatnonzero((fields & HEADING_BIT) != 0)), total, p.heading_coverage_weight
            )
        if p.title_heading_coverage_weight:
            th = held(np.flatnonzero((fields & (HEADING_BIT | TITLE_BIT)) != 0))
            bonus += scoring.coverage_bonus(th, total, p.title_heading_coverage_weight)
        if p.name_match_weight:
            match = _name_match(index, terms, ids, owner, docs, cover, in_title, named)[rows]
            bonus += scoring.name_bonus(match, p.name_match_weight, p.heading_coverage_weight)
        if p.title_coverage_weight:
            bonus += scoring.coverage_bonus(held(in_title), total, p.title_coverage_weight)
        top = float(scores.max()) if n else 0.0
        scores[rows] += (bonus * top).astype(np.float32)
    return scores, matched, top


def name_match(
    index: SparseIndex, terms: list[str], postings: QueryPostings | None = None, named: np.ndarray | None = None
) -> np.ndarray:
    """Per document: 0 unless its title field holds every word of the query; then the idf-weighted
    share of its names the query covers, squared (1.0: the query is exactly the note's name;
    ``scoring.name_match``).

    A query word is analysed in every language of the index, each stem with its share of the
    word (``cover``, core.ranking.expansion); a word counts as in the name by the shares of its
    stems there, and half a word of slack lets a word match through the note's own language only.
    Exact-form terms (``=word``) and expansions with no coverage share are not names the query says.
    A query that is exactly one of a note's names (``named``: rows, core.index.tables.names) is that
    note's name: 1.0, however many other names the note has (``BGB`` of "Bürgerliches Gesetzbuch (BGB)")."""
    p = postings if postings is not None else query_postings(index, terms)
    fields = index.field_mask[p.pos] if p.mask is None else p.mask
    ids, owner, docs, cover = p.ids, p.owner, p.docs, p.cover
    in_title = np.flatnonzero((fields & TITLE_BIT) != 0)
    return _name_match(index, terms, ids, owner, docs, cover, in_title, named)


def _name_match(
    index: SparseIndex,
    terms: list[str],
    ids: np.ndarray,
    owner: np.ndarray,
    docs: np.ndarray,
    cover: np.ndarray | None,
    in_title: np.ndarray,
    exact: np.ndarray | None = None,
) -> np.ndarray:
    """``name_match`` given the positions (in ``owner`` / ``docs``) of the postings in the title field;
    1.0 at the ``exact`` rows (the query is one of their names)."""
    share, need = name_shares(index, terms, ids, cover)
    title_owner = owner[in_title]
    named = share[title_owner] > 0
    title_owner, title_docs = title_owner[named], docs[in_title[named]]
    in_name = np.bincount(title_docs, weights=share[title_owner], minlength=index.n_docs)
    match = np.zeros(index.n_docs, dtype=np.float64)
    if in_name.size and in_name.max() >= need:  # else no name holds the query (most sentences): nothing to weigh
        term_idf = index.idf(ids).astype(np.float64)
        matched_idf = np.bincount(title_docs, weights=term_idf[title_owner], minlength=index.n_docs)
        held = np.flatnonzero((in_name >= need) & (matched_idf > 0))  # the only rows whose name idf counts
        # the match of those rows only (every other row's is 0: ``scoring.name_match``'s own condition), not
        # of every note (100k notes: 0.3 ms a query)
        match[held] = scoring.name_match(in_name[held], need, matched_idf[held], index.name_idf(held))
    if exact is not None and exact.size:
        match[exact] = 1.0
    return match


def name_shares(
    index: SparseIndex, terms: list[str], ids: np.ndarray, cover: np.ndarray | None
) -> tuple[np.ndarray, float]:
    """(float64 per term id of ``ids``: its share of a word when it is in a name, the share of the query's
    words a name must hold to match it): an exact form counts nothing; with ``cover`` (a word's stems in
    every language), half a word of slack."""
    known = [t for t in dict.fromkeys(terms) if t in index.term_id]
    keep = np.fromiter((not t.startswith("=") for t in known), dtype=bool, count=len(known))
    if keep.size != ids.size:  # terms and postings disagree: count every term (the plain BM25F case)
        keep = np.ones(ids.size, dtype=bool)
    share = np.ones(ids.size, dtype=np.float64) if cover is None else cover.astype(np.float64)
    share = np.where(keep, share, 0.0)
    words = float(share.sum())
    return share, words - 0.5 if cover is not None else words


def body_term_counts(
    index: SparseIndex,
    terms: list[str],
    note_ids: list[int],
    postings: QueryPostings | None = None,
    counted: np.ndarray | None = None,
) -> dict[int, int]:
    """Occurrences of the query's terms in each given note's body (exact, from the stored vectors).

    ``counted`` (bool per id of ``postings.ids``) limits the count to some of the query's terms.
    Only the given notes' postings are looked at: a few hundred of a query's many thousands."""
    if not note_ids:
        return {}
    found = postings if postings is not None else query_postings(index, terms)
    rows = index.rows_of(np.asarray(note_ids, dtype=np.int64))
    notes = distinct(rows[rows >= 0])
    asked = np.zeros(index.n_docs, dtype=bool)
    asked[notes] = True
    mine = np.flatnonzero(asked[found.docs])
    if counted is not None:
        mine = mine[counted[found.owner[mine]]]
    per_note = np.bincount(
        np.searchsorted(notes, found.docs[mine]),
        weights=index.body_tf[found.pos[mine]] if found.body is None else found.body[mine],
        minlength=notes.size,
    )
    count = dict(zip(notes.tolist(), per_note.tolist()))
    return {nid: int(count[r]) if r >= 0 else 0 for nid, r in zip(note_ids, rows.tolist())}


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
