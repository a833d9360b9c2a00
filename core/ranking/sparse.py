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
from core.index.tables import notes
from core.index.tables.connection import read_snapshot
from core.index.tables.notes_fts import FTS_COLUMNS
from core.index.tables.terms import note_term_rows, note_terms_size, term_dictionary
from core.ranking import scoring, stored
from core.ranking.expansion import VOCABULARY_ARRAYS, vocabulary_arrays
from core.ranking.filters import Filters
from core.ranking.postings import READ_ROWS, TermMajor, row_blocks


@dataclass(frozen=True)
class RankParams:
    """BM25F parameters; tuned on SciFact train and the known-item sets (docs/architecture.md)."""

    k1: float = 0.9
    # field order = FTS_COLUMNS: title, description, tags, headings, body
    weights: tuple[float, ...] = (2.0, 1.5, 1.5, 4.0, 1.0)
    b: tuple[float, ...] = (0.5, 0.5, 0.3, 0.5, 0.75)
    coverage_weight: float = 0.0
    # A note whose headings hold every query term (its names have their own bonus, below).
    heading_coverage_weight: float = 1.2
    # A note whose names (title, file name, aliases: the title field) hold every query term,
    # scaled by the idf-weighted share of the name the query covers: "dendron topic schema" is the
    # name of dendron.topic.schema.md more than of dendron.topic.schema.complete.md. Never below
    # heading_coverage_weight (scoring.name_bonus): a name is at least as good a place as a heading.
    name_match_weight: float = 2.5
    # A note whose title field and headings together hold every query term.
    title_heading_coverage_weight: float = 0.4
    # The same for the title alone (on top): CJK-only look-ups (core.modes.lexical.CJK_TITLE_COVERAGE).
    title_coverage_weight: float = 0.0


DEFAULT_PARAMS = RankParams()
_TITLE = FTS_COLUMNS.index("title")
_TITLE_BIT = np.uint8(1 << _TITLE)
TITLE_BIT = _TITLE_BIT  # a posting's field_mask bit of the title field (the note's names)
_HEADING_BIT = np.uint8(1 << FTS_COLUMNS.index("headings"))


@dataclass
class SparseIndex:
    """Term-major postings of one generation; numbers only, never note text."""

    note_ids: np.ndarray  # int64 [n_docs], row -> note id (ascending)
    term_id: dict[str, int]  # FTS5 token -> term id
    indptr: np.ndarray  # int64 [max_term_id + 2]: postings of term t are indptr[t]:indptr[t+1]
    # the per-posting arrays may be stored arrays read a piece at a time (core.ranking.stored)
    docs: np.ndarray | stored.StoredArray  # int32 [postings] row of the document (ascending within a term)
    field_mask: np.ndarray | stored.StoredArray  # uint8 [postings] bit f set when the term occurs in field f
    body_tf: np.ndarray | stored.StoredArray  # uint16 [postings] occurrences in the body
    df: np.ndarray  # int64 [max_term_id + 1]
    params: RankParams
    bm25: np.ndarray | stored.StoredArray  # float32 [postings] BM25F weight under ``params``
    bm25_idf: np.ndarray  # float32 [max_term_id + 1]
    name_idf: np.ndarray  # float64 [n_docs] summed idf of the distinct terms of the title field (the note's names)
    # the query vocabulary's arrays as the build stored them (core.ranking.expansion.vocabulary_arrays);
    # None: computed from term_id and df on first use (restricted callers, rows-computed indexes)
    vocabulary: dict[str, np.ndarray] | None = None
    # bool [n_docs]: the notes the default filters (none set) let through, i.e. not superseded, as the
    # build computed them (``default_filter_mask``); None: the search computes its mask with SQL
    default_mask: np.ndarray | None = None

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
                self.name_idf,
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
    conn: sqlite3.Connection, n_fields: int, visible: tuple[str, list[object]] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(note_ids, postings per note, terms, tf [P, fields], field lengths [notes, fields]) in
    note order, read ``READ_ROWS`` notes at a time into preallocated arrays."""
    n, total = note_terms_size(conn, visible)
    note_ids, lengths = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    terms = np.empty(total // 4, dtype=np.int32)
    tf = np.empty((total // 4, n_fields), dtype=np.uint16)
    field_len = np.zeros((n, n_fields), dtype=np.float32)
    pos = row = 0
    rows = note_term_rows(conn, visible)
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


_POSTING_ARRAYS = ("docs", "field_mask", "body_tf", "bm25")  # one value per posting: stored in pieces
_SPARSE_ARRAYS = ("note_ids", "indptr", "docs", "field_mask", "body_tf", "df", "bm25", "bm25_idf", "name_idf")
# The arrays' layout: a generation stored with another (v1 held name term counts) computes from its rows.
SPARSE_LAYOUT = 2


def sparse_group(params: RankParams) -> str:
    """The stored group of arrays computed under ``params`` (core.ranking.stored)."""
    return f"sparse:v{SPARSE_LAYOUT}:{params!r}"


def load_sparse(
    conn: sqlite3.Connection,
    params: RankParams = DEFAULT_PARAMS,
    *,
    visible: tuple[str, list[object]] | None = None,
    reader: stored.Reader | None = None,
) -> SparseIndex:
    """The term-major postings of ``conn``: the arrays the build stored for ``params`` (no rebuild;
    with a ``reader``, the postings are read a piece at a time as queries need them), else computed
    from the rows (``compute_sparse``: the same numbers, e.g. for other params).
    A restricted caller's (``visible``) statistics are always computed from its notes' rows."""
    if visible is not None:
        return compute_sparse(conn, params, visible=visible)
    arrays = stored.load_group(
        conn,
        sparse_group(params),
        (*_SPARSE_ARRAYS, *VOCABULARY_ARRAYS, "default_mask", "term_text", "term_ids"),
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
        df=arrays["df"],
        params=params,
        bm25=arrays["bm25"],
        bm25_idf=arrays["bm25_idf"],
        name_idf=arrays["name_idf"],
        vocabulary={name: arrays[name] for name in VOCABULARY_ARRAYS},
        default_mask=arrays["default_mask"],
    )
    postings = int(index.indptr[-1]) if index.indptr.size else 0
    if any(a.shape[0] != postings for a in (index.docs, index.field_mask, index.body_tf, index.bm25)):
        raise IntegrityError(f"stored sparse arrays disagree on the number of postings ({postings})")
    if index.default_mask is None or index.default_mask.shape != index.note_ids.shape:
        raise IntegrityError(f"stored default mask does not cover the {index.n_docs} notes")
    return index


def store_sparse(conn: sqlite3.Connection, index: SparseIndex) -> None:
    """Store ``index`` (computed from this database's rows) and its query vocabulary in the build's database."""
    arrays = {name: getattr(index, name) for name in _SPARSE_ARRAYS}
    vocab = vocabulary_arrays(index.term_id, index.df)
    mask = {"default_mask": default_filter_mask(conn, index.note_ids)}
    stored.save_group(
        conn,
        sparse_group(index.params),
        {**arrays, **vocab, **mask, **stored.pack_terms(index.term_id)},
        _POSTING_ARRAYS,
    )


def default_filter_mask(conn: sqlite3.Connection, note_ids: np.ndarray) -> np.ndarray:
    """Per note of ``note_ids``: do the default filters (``Filters()``: none set, every classification)
    let it through? What a search's filter mask is without filters (core.modes.context), computed by the
    same SQL; stored by the build, since at 100k notes that query costs a new process ~0.2 s."""
    clause, vals = Filters().where()
    ids = notes.filtered_note_ids(conn, clause, vals)
    return np.isin(note_ids, np.asarray(ids, dtype=np.int64))


def compute_sparse(
    conn: sqlite3.Connection, params: RankParams = DEFAULT_PARAMS, *, visible: tuple[str, list[object]] | None = None
) -> SparseIndex:
    """Read every note's term vector and build term-major postings with their BM25F weights.

    ``visible`` (a condition over ``notes n`` and its values) reads only those notes: every
    statistic (N, df, average field lengths) and the term dictionary are then theirs alone.

    Memory-lean: the row-major terms and tf (14 bytes per posting) are read once; weights,
    field masks and body counts are computed a block of notes at a time and dropped straight
    into their term-major slots (11 bytes per posting, what is held).
    """
    n_fields = len(FTS_COLUMNS)
    with read_snapshot(conn):  # a legacy index.db may change between the reads below
        note_ids, lengths, terms, tf, field_len = _read_vectors(conn, n_fields, visible)
        term_id = term_dictionary(conn)
    n = int(note_ids.shape[0])
    layout = TermMajor(terms, max(max(term_id.values(), default=0), int(terms.max(initial=0))) + 1)
    df = layout.counts.astype(np.int64)
    if visible is not None:  # no term that only hidden notes hold
        term_id = {t: i for t, i in term_id.items() if i < df.shape[0] and df[i] > 0}
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
    name_idf = np.zeros(n, dtype=np.float64)
    exact_form = np.zeros(layout.counts.shape[0], dtype=bool)  # `=word` terms: not names of their own
    exact_form[[i for t, i in term_id.items() if t.startswith("=") and i < exact_form.shape[0]]] = True
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
        in_name = (block_tf[:, _TITLE] > 0) & ~exact_form[block_terms]
        idf_in_name = bm25_idf[block_terms[in_name]].astype(np.float64)
        name_idf[r0:r1] = np.bincount(block_docs[in_name] - r0, weights=idf_in_name, minlength=r1 - r0)
    return SparseIndex(note_ids, term_id, layout.indptr, docs, mask, body_tf, df, params, bm25, bm25_idf, name_idf)


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
    # posting i of term j sits at starts[j] + (i - first slot of term j): one repeat of the shifts
    shift = starts - (np.cumsum(lengths) - lengths)
    return np.arange(lengths.sum()) + np.repeat(shift, lengths), owner


class QueryPostings(NamedTuple):
    """Every posting of a query's known terms in one SparseIndex, gathered once per query."""

    ids: np.ndarray  # distinct known term ids
    pos: np.ndarray  # posting positions
    owner: np.ndarray  # index into ``ids`` of each posting
    docs: np.ndarray  # document row of each posting
    weight: np.ndarray | None = None  # float32 per id: the term's share of the score (None: all 1)
    cover: np.ndarray | None = None  # float32 per id: its share in the coverage bonus (None: all 1)


def query_postings(
    index: SparseIndex,
    terms: list[str],
    weights: list[float] | None = None,
    cover: list[float] | None = None,
) -> QueryPostings:
    """The query's postings; ``weights`` / ``cover`` (one per term of ``terms``, which are then
    distinct) scale each term's score and its share in the coverage bonus."""
    ids, _ = query_term_ids(index, terms)
    pos, owner = gather_postings(index.indptr, ids)
    w = c = None
    if weights is not None or cover is not None:
        known = [i for i, t in enumerate(terms) if t in index.term_id]
        w = np.asarray([weights[i] if weights is not None else 1.0 for i in known], dtype=np.float32)
        c = np.asarray([cover[i] if cover is not None else 1.0 for i in known], dtype=np.float32)
    return QueryPostings(ids, pos, owner, index.docs[pos], w, c)


def bm25_scores(
    index: SparseIndex,
    terms: list[str],
    postings: QueryPostings | None = None,
    params: RankParams | None = None,
    named: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, matched) over all documents: BM25F plus the coverage bonuses of RankParams.

    ``matched`` counts the distinct query terms each document contains. The bonus rewards
    documents that match the whole query (idf-weighted coverage), those whose headings hold
    every query term, and those whose names (title field) hold every query term, the more so
    the closer the name is to the query (``name_match``) and never less than the headings would
    (``scoring.name_bonus``), without dropping documents that match only some terms.
    All postings of the query are gathered once and summed per document with ``bincount``.
    ``params`` overrides the index's coverage weights (k1, b and field weights are in its postings);
    ``named`` holds the rows of the notes one of whose names the query is exactly (name match 1)."""
    ids, pos, owner, docs, weight, cover = postings if postings is not None else query_postings(index, terms)
    n = index.n_docs
    contribution = index.bm25[pos] if weight is None else index.bm25[pos] * weight[owner]
    scores = np.bincount(docs, weights=contribution, minlength=n).astype(np.float32)
    matched = np.bincount(docs, minlength=n).astype(np.float32)
    p = params or index.params
    idf = index.bm25_idf[ids].astype(np.float64)
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
        bonus = np.zeros(n, dtype=np.float64)
        fields = index.field_mask[pos]
        term_idf = idf[owner]
        in_title = np.flatnonzero((fields & _TITLE_BIT) != 0)  # positions, not masks: one pass, then small gathers

        def held(sel: np.ndarray) -> np.ndarray:  # the postings in those fields only: the others' zeros change no sum
            return np.bincount(docs[sel], weights=term_idf[sel], minlength=n)

        if p.coverage_weight:
            bonus += scoring.coverage_bonus(np.bincount(docs, weights=term_idf, minlength=n), total, p.coverage_weight)
        if p.heading_coverage_weight:
            bonus += scoring.coverage_bonus(
                held(np.flatnonzero((fields & _HEADING_BIT) != 0)), total, p.heading_coverage_weight
            )
        if p.title_heading_coverage_weight:
            th = held(np.flatnonzero((fields & (_HEADING_BIT | _TITLE_BIT)) != 0))
            bonus += scoring.coverage_bonus(th, total, p.title_heading_coverage_weight)
        if p.name_match_weight:
            match = _name_match(index, terms, ids, owner, docs, cover, in_title, named)
            bonus += scoring.name_bonus(match, p.name_match_weight, p.heading_coverage_weight)
        if p.title_coverage_weight:
            bonus += scoring.coverage_bonus(held(in_title), total, p.title_coverage_weight)
        top = float(scores.max()) if n else 0.0
        scores += (bonus * top).astype(np.float32) * (matched > 0)
    return scores, matched


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
    ids, pos, owner, docs, _, cover = postings if postings is not None else query_postings(index, terms)
    in_title = np.flatnonzero((index.field_mask[pos] & _TITLE_BIT) != 0)
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
    known = [t for t in dict.fromkeys(terms) if t in index.term_id]
    keep = np.fromiter((not t.startswith("=") for t in known), dtype=bool, count=len(known))
    if keep.size != ids.size:  # terms and postings disagree: count every term (the plain BM25F case)
        keep = np.ones(ids.size, dtype=bool)
    share = np.ones(ids.size, dtype=np.float64) if cover is None else cover.astype(np.float64)
    share = np.where(keep, share, 0.0)
    title_owner = owner[in_title]
    named = share[title_owner] > 0
    title_owner, title_docs = title_owner[named], docs[in_title[named]]
    in_name = np.bincount(title_docs, weights=share[title_owner], minlength=index.n_docs)
    words = float(share.sum())
    need = words - 0.5 if cover is not None else words
    match = np.zeros(index.n_docs, dtype=np.float64)
    if in_name.size and in_name.max() >= need:  # else no name holds the query (most sentences): nothing to weigh
        term_idf = index.bm25_idf[ids].astype(np.float64)
        matched_idf = np.bincount(title_docs, weights=term_idf[title_owner], minlength=index.n_docs)
        match = scoring.name_match(in_name, need, matched_idf, index.name_idf)
    if exact is not None and exact.size:
        match[exact] = 1.0
    return match


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
    notes = np.unique(rows[rows >= 0])
    asked = np.zeros(index.n_docs, dtype=bool)
    asked[notes] = True
    mine = np.flatnonzero(asked[found.docs])
    if counted is not None:
        mine = mine[counted[found.owner[mine]]]
    per_note = np.bincount(
        np.searchsorted(notes, found.docs[mine]), weights=index.body_tf[found.pos[mine]], minlength=notes.size
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
