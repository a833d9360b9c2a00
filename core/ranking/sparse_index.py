"""The sparse index of a generation (``SparseIndex``): term-major postings with raw per-field counts,
per-note field lengths and the statistics a query computes BM25F from (core.ranking.bm25f), and the
ranking parameters it is scored under. Loaded and scored by core.ranking.sparse."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from core.errors import IntegrityError
from core.index.tables.notes_fts import FTS_COLUMNS
from core.ranking import bm25f, scoring, stored
from core.ranking.classes import ClassStats


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
TITLE_FIELD = FTS_COLUMNS.index("title")
TITLE_BIT = np.uint8(1 << TITLE_FIELD)  # a posting's field_mask bit of the title field (the note's names)
HEADING_BIT = np.uint8(1 << FTS_COLUMNS.index("headings"))


class VisibleTerms(Mapping[str, int]):
    """A caller's term dictionary: the terms of ``all`` some visible note holds (visible ``df`` > 0),
    looked up in the generation's dictionary without copying it."""

    def __init__(self, terms: Mapping[str, int], df: np.ndarray) -> None:
        self.all, self._n = terms, int(df.shape[0])
        self._live = (df > 0).tobytes()  # a byte per term: indexing bytes costs a tenth of a numpy scalar

    def __getitem__(self, term: str) -> int:
        tid = self.all[term]
        if tid >= self._n or not self._live[tid]:
            raise KeyError(term)
        return tid

    def __contains__(self, term: object) -> bool:
        tid = self.all.get(term) if isinstance(term, str) else None
        return tid is not None and tid < self._n and self._live[tid] == 1

    def __iter__(self) -> Iterator[str]:
        return (t for t, i in self.all.items() if i < self._n and self._live[i])

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Seen:
    """What a restricted caller's statistics are computed over: its visible rows, their number and
    their exact field-length sums (sums over its visible classes, core.ranking.classes)."""

    classes: np.ndarray  # bool per class (ClassStats.names): the caller's visible classes
    rows: np.ndarray  # bool [n_docs]
    n_docs: int
    length_sums: np.ndarray  # int64 [fields]
    total_df: np.ndarray | None = None  # the df over every row (what a further restriction derives from)


@dataclass
class SparseIndex:
    """Term-major postings of one generation; numbers only, never note text."""

    note_ids: np.ndarray  # int64 [n_docs], row -> note id (rows in path order; ids ascending unless ``id_order``)
    term_id: Mapping[str, int]  # FTS5 token -> term id (a caller's: VisibleTerms)
    indptr: np.ndarray  # int64 [max_term_id + 2]: postings of term t are indptr[t]:indptr[t+1]
    # the per-posting arrays may be stored arrays read a piece at a time (core.ranking.stored)
    # int32 [postings] row of the document (ascending within a term; a combined index's: within each segment's run)
    docs: np.ndarray | stored.StoredArray
    field_mask: np.ndarray | stored.StoredArray  # uint8 [postings] bit f set when the term occurs in field f
    body_tf: np.ndarray | stored.StoredArray  # uint16 [postings] occurrences in the body
    # uint16 [side values]: the other fields' non-zero counts (core.ranking.bm25f), term t's at side_ptr[t]:side_ptr[t+1]
    side_tf: np.ndarray | stored.StoredArray
    side_ptr: np.ndarray  # int64 [max_term_id + 2]
    field_len: np.ndarray  # uint32 [n_docs, fields]: each note's field lengths (its terms' counts summed)
    df: np.ndarray  # int64 [max_term_id + 1]
    params: RankParams
    # the term ids of each note's title field (its names; not the exact forms ``=word``), in the note's
    # term order: row r's at name_terms[name_ptr[r]:name_ptr[r+1]] (``name_idf``)
    name_ptr: np.ndarray  # int64 [n_docs + 1]
    name_terms: np.ndarray | stored.LazyArray  # int32 (a segmented view's: core.ranking.segment_view.NameTerms)
    # the query vocabulary's arrays as the build stored them (core.ranking.expansion.vocabulary_arrays);
    # None: computed from term_id and df on first use (an index computed from its rows); a restricted caller's
    # view keeps the generation's and filters its look-ups by its visible df (core.ranking.vocabulary)
    vocabulary: dict[str, np.ndarray] | None = None
    # or, without stored arrays, a function giving its word lists (core.ranking.vocabulary._vocabulary_lists's
    # result; a segmented generation's view derives them from its largest segment's stored ones once asked)
    vocabulary_lists: Callable[[], tuple[list[str], list[int], list[int], list[int]]] | None = None
    # bool [n_docs]: the notes the default filters (none set) let through, i.e. not superseded, as the
    # build computed them (``default_filter_mask``); None: the search computes its mask with SQL
    default_mask: np.ndarray | None = None
    # the notes per classification and their statistics (core.ranking.classes); None: not known
    classes: ClassStats | None = None
    # a restricted caller's view (``restrict``): the rows it may see; None: every row
    seen: Seen | None = None
    # the rows in note id order when ``note_ids`` are not ascending (``id_order_of``: rows are in path order,
    # core.ranking.sparse_rows and core.ranking.segments, and ids need not follow paths); None: they ascend
    id_order: np.ndarray | None = None
    # what a query computes from the arrays above once per loaded index (``factors``)
    _derived: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def factors(self) -> np.ndarray:
        """float32 [fields, n_docs]: each note's BM25F field factors under ``params``, a field's in one row
        (computed once: an index is cached per generation and per visibility set)."""
        found = self._derived.get("factors")
        if found is None:
            p = self.params
            computed = bm25f.field_factors(self.field_len, p.weights, p.b, self.length_sums(), self.n_stat)
            found = self._derived["factors"] = np.ascontiguousarray(computed.T)
        return found

    def idf(self, ids: np.ndarray | int) -> np.ndarray:
        """float32 BM25 idf of the term ids ``ids`` (``scoring.bm25_idf`` of their df and N)."""
        return scoring.bm25_idf(self.df[ids], self.n_stat)

    def name_idf(self, rows: np.ndarray) -> np.ndarray:
        """float64 per row of ``rows``: the summed idf of the distinct terms of its title field (its names),
        summed in the note's term order."""
        pos, owner = gather_postings(self.name_ptr, rows)
        terms = np.asarray(self.name_terms[pos], dtype=np.int64)
        return np.bincount(owner, weights=self.idf(terms).astype(np.float64), minlength=rows.shape[0])

    def posting_weights(
        self,
        ids: np.ndarray,
        pos: np.ndarray,
        owner: np.ndarray,
        docs: np.ndarray,
        side: np.ndarray | None = None,
        mask: np.ndarray | None = None,
        body: np.ndarray | None = None,
    ) -> np.ndarray:
        """float32 BM25F weight of the postings ``pos`` (every posting of the term ids ``ids``, in their
        order, as ``gather_postings`` gives them; ``owner``: index into ``ids``, ``docs``: rows); a
        restricted caller's are its visible ones, ``side`` the positions of their side values
        (``query_postings``; None: found here). ``mask`` / ``body``: their field masks and body counts
        when the caller read them already (None: read here)."""
        if side is None:
            side, _ = gather_postings(self.side_ptr, ids)
            if self.seen is not None and side.size:  # the side values of the visible postings only
                every, _ = gather_postings(self.indptr, ids)
                held = bm25f.side_counts(self.field_mask[every])
                side = side[np.repeat(self.seen.rows[self.docs[every]], held)]
        mask = self.field_mask[pos] if mask is None else mask
        body = self.body_tf[pos] if body is None else body
        values = np.asarray(self.side_tf[side])
        return bm25f.posting_weights(mask, body, values, self.factors(), docs, self.idf(ids)[owner], self.params.k1)

    @property
    def n_docs(self) -> int:
        """The rows of the arrays (every note of the generation, for a restricted caller too)."""
        return int(self.note_ids.shape[0])

    @property
    def n_stat(self) -> int:
        """BM25's N: the notes the caller may see."""
        return self.n_docs if self.seen is None else self.seen.n_docs

    def length_sums(self) -> np.ndarray:
        """int64 [fields]: the exact field-length sums over the notes the caller may see."""
        return self.field_len.sum(axis=0, dtype=np.int64) if self.seen is None else self.seen.length_sums

    def sees(self, rows: np.ndarray) -> np.ndarray:
        """bool per row of ``rows``: may the caller see it?"""
        return np.ones(rows.shape[0], dtype=bool) if self.seen is None else self.seen.rows[rows]

    def visible_note_ids(self) -> np.ndarray:
        """The ids of the notes the caller may see, in row order."""
        return self.note_ids if self.seen is None else self.note_ids[self.seen.rows]

    def restrict(self, visible: Iterable[str]) -> SparseIndex:
        """This index as a caller who sees the classifications ``visible`` only: the same arrays with its
        hidden rows masked (never scored, never counted), and N, df, average lengths and the term
        dictionary summed over its visible classes (core.ranking.classes): exact integers, so every
        number equals that of an index of its visible notes alone."""
        if self.classes is None:
            raise IntegrityError("this sparse index holds no per-classification statistics")
        chosen = self.classes.select(visible)
        total, terms = self.df, self.term_id
        if self.seen is not None:  # a view restricted again: the classes both let through, from the whole df
            chosen &= self.seen.classes
            total, terms = (self.df if self.seen.total_df is None else self.seen.total_df), getattr(terms, "all", terms)
        df = self.classes.df(total, chosen)
        rows, n, sums = self.classes.rows(chosen), self.classes.n_docs(chosen), self.classes.length_sums(chosen)
        seen = Seen(chosen, rows, n, sums, total)
        return replace(self, term_id=VisibleTerms(terms, df), df=df, default_mask=None, seen=seen, _derived={})

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
                self.side_tf,
                self.side_ptr,
                self.field_len,
                self.df,
                self.name_ptr,
                self.name_terms,
            )
        )

    def rows_of(self, note_ids: np.ndarray) -> np.ndarray:
        """The row of each note id (-1 for an id this index does not hold, or the caller may not see)."""
        rows = self.positions(note_ids)
        found = rows >= 0
        found[found] = self.sees(rows[found])
        return np.where(found, rows, -1).astype(np.int64)

    def positions(self, note_ids: np.ndarray) -> np.ndarray:
        """The row of each note id (-1 for an id this index does not hold), whoever the caller."""
        note_ids = np.asarray(note_ids, dtype=np.int64)
        if self.n_docs == 0:
            return np.full(note_ids.shape, -1, dtype=np.int64)
        order = self.id_order
        ids = self.note_ids if order is None else self._derived.get("sorted_ids")
        if ids is None:  # the ids in ascending order, once per loaded index (a dict item is set atomically)
            ids = self._derived["sorted_ids"] = np.asarray(self.note_ids)[order]
        at = np.minimum(np.searchsorted(ids, note_ids), self.n_docs - 1)
        rows = at if order is None else order[at]
        return np.where(ids[at] == note_ids, rows, -1).astype(np.int64)


def id_order_of(note_ids: np.ndarray) -> np.ndarray | None:
    """``SparseIndex.id_order`` of rows holding ``note_ids``: their rows in id order, or None when the ids
    ascend already (a cold build's, whose ids follow the paths the rows are in)."""
    if note_ids.size < 2 or bool((np.diff(note_ids) > 0).all()):
        return None
    order = np.argsort(note_ids, kind="stable")
    if (np.diff(note_ids[order]) == 0).any():
        raise IntegrityError("two rows of a sparse index hold the same note id")
    return order


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
