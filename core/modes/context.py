"""What every mode receives (:class:`SearchContext`) and returns (:class:`ModeRun` of :class:`Hit`)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from core.index.layout import ResolvedIndex
from core.index.tables.meta import get_meta
from core.index.tables.names import named_note_ids
from core.index.tables.notes import filtered_note_ids, hit_rows, refused_note_ids
from core.index.verify import connect_readonly
from core.modes.segment_arrays import (
    SegmentSource,
    generation_chunks,
    generation_default_mask,
    generation_sparse,
    segment_sources,
)
from core.ranking import stored
from core.ranking.chunk_vectors import ChunkVectors, load_chunk_vectors
from core.ranking.expansion import QueryAnalysis, QueryAnalyzer, vocabulary
from core.ranking.filters import Filters
from core.ranking.names import name_key
from core.ranking.sparse import (
    CHUNK_CACHE,
    SPARSE_CACHE,
    TITLE_BIT,
    QueryPostings,
    SparseIndex,
    load_sparse,
    query_postings,
)
from core.ranking.visibility import CallerStatistics


class RecentCache:
    """A bounded map of recent entries, oldest evicted first, locked: the request threads share it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: dict[tuple, Any] = {}

    def get(self, key: tuple) -> Any:
        with self._lock:
            return self._items.get(key)

    def put(self, key: tuple, value: Any) -> None:
        with self._lock:
            while self._items and len(self._items) >= self.size:
                del self._items[next(iter(self._items))]
            self._items[key] = value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# Filter masks of recent (generation, filters) pairs: numbers only, no note text.
_MASKS = RecentCache(64)
# The meta table of recent generations (immutable once published): one read per generation, not per query.
_METAS = RecentCache(8)
_NO_FILTERS = Filters()


@dataclass(frozen=True)
class Hit:
    note_id: int
    score: float
    score_source: str  # which stage produced the score
    via: dict[str, Any] | None = None  # graph expansion: the edge it came through
    chunk_id: int | None = None  # best chunk, when the mode knows it


@dataclass(frozen=True)
class ModeRun:
    """What a run function returns. It leaves ``actual_mode`` and ``retrieval_contract`` unset
    when it ran as its registry spec says: ``registry.dispatch`` labels the run with ``spec.name``.
    Only a run that did something else (auto's dense pipeline, a labelled fallback) sets them."""

    hits: list[Hit]
    actual_mode: str | None = None
    retrieval_contract: str | None = None
    fallback_reason: str | None = None

    def labels(self) -> tuple[str, str]:
        """(actual_mode, retrieval_contract) of a dispatched run; an unlabelled run is a bug."""
        if self.actual_mode is None or self.retrieval_contract is None:
            raise RuntimeError("a ModeRun reached the results without going through registry.dispatch")
        return self.actual_mode, self.retrieval_contract


@dataclass
class SearchContext:
    """Everything a mode needs; built once per search_vault call."""

    vault: Path
    text: str
    limit: int
    filters: Filters
    raw: bool
    allow_fallback: bool
    model: str | None
    resolved: ResolvedIndex
    conn: sqlite3.Connection
    options: dict[str, Any] = field(default_factory=dict)
    _sparse: SparseIndex | None = None
    _whole: SparseIndex | None = None  # the whole generation's (``_sparse`` is a restricted caller's view of it)
    _chunks: ChunkVectors | None = None
    _postings: QueryPostings | None = None
    _mask: np.ndarray | None = None
    _analysis: QueryAnalysis | None = None
    _meta: dict[str, Any] | None = None
    _statistics: CallerStatistics | None = None
    _named: np.ndarray | None = None
    _segment_sources: list[SegmentSource] | None = None
    # note id -> how many of the query's quoted phrases it holds (core.modes.lexical, once per search)
    phrase_notes: dict[int, int] | None = None
    # the rows fts's identifier bonus (one array per identifier) and passage bonus reward (core.modes.lexical)
    identifier_rows: list[np.ndarray] | None = None
    passage_rows: np.ndarray | None = None
    # a pruned fts run's postings (core.ranking.pruning): exact for every note it ranked; None: ``postings()``
    ranked_postings: QueryPostings | None = None

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            r = self.resolved
            key = (str(r.path), r.generation_id, r.sha256) if r.kind != "legacy_db" else None
            found = _METAS.get(key) if key else None
            if found is None:
                found = get_meta(self.conn)
                if key:
                    _METAS.put(key, found)
            self._meta = found
        return self._meta

    @property
    def analysis(self) -> QueryAnalysis:
        """The query's weighted terms in every language of the index, with its expansions."""
        if self._analysis is None:
            self._analysis = self._analyse(self.text)
        return self._analysis

    def _analyse(self, text: str) -> QueryAnalysis:
        sp, mask = self.sparse(), self.mask()
        languages = self.meta.get("languages") or ["en"]
        visible = None
        # expansions and unmatched words count only the notes the filters let through; when those are
        # exactly the caller's visible notes, its df (summed over its visible classes) is that count
        seen = sp.seen.rows if sp.seen is not None else None
        if not (mask.all() if seen is None else np.array_equal(mask, seen)):

            def visible(tid: int) -> int:
                return int(np.count_nonzero(mask[sp.docs[sp.indptr[tid] : sp.indptr[tid + 1]]]))

        return QueryAnalyzer(sp.term_id, vocabulary(sp), languages, visible, _name_counter(sp, mask)).analyse(text)

    @property
    def terms(self) -> list[str]:
        return self.analysis.terms

    def statistics(self) -> CallerStatistics:
        """Whose statistics this caller is scored with: the whole generation's, or (when its
        classifications hide some note) the visible notes' only (core.ranking.visibility)."""
        if self._statistics is None:
            r, f = self.resolved, self.filters
            visible = f.visible_classification_clause() if f.classifications is not None else None
            generation = None if r.kind == "legacy_db" else (str(r.path), r.generation_id, r.sha256)
            self._statistics = CallerStatistics(
                self.conn, visible, str(r.layout.index_dir), generation, f.classifications
            )
        return self._statistics

    def where(self) -> tuple[str, list[object]]:
        """The filters' SQL condition for this caller (supersession among its visible notes when restricted)."""
        stats = self.statistics()
        restricted = not self.filters.include_superseded and stats.restricted
        return self.filters.where(superseded=stats.superseded_ids() if restricted else None)

    def _reader(self) -> stored.Reader:
        """A connection of its own to the verified generation, for the postings the cached
        structures read a piece at a time after this search (core.ranking.stored)."""
        return stored.Reader(connect_readonly(self.resolved, any_thread=True))

    def _full_sparse(self) -> SparseIndex:
        if self._whole is None:
            r = self.resolved
            if r.kind == "legacy_db":  # mutable file: never cached, read whole
                self._whole = load_sparse(self.conn)
            else:
                key, owner = (str(r.path), r.generation_id, r.sha256), str(r.layout.index_dir)

                def today() -> SparseIndex:
                    return SPARSE_CACHE.get(owner, key, lambda: load_sparse(self.conn, reader=self._reader()))

                self._whole = generation_sparse(self._sources(), owner, key, today)
        return self._whole

    def _sources(self) -> list[SegmentSource]:
        """The resolved generation's (segment, tombstone) list (core.modes.segment_arrays)."""
        if self._segment_sources is None:
            self._segment_sources = segment_sources(self.resolved)
        return self._segment_sources

    def tie_order(self) -> Callable[[int], int]:
        """note id -> where equal scores put it: its row in the generation's index, whose rows are in path
        order in every generation (one segment: core.ranking.sparse_rows; several: core.ranking.segments),
        whatever ids its notes have. A note the index lacks comes after every row, by id."""
        ranks = self.tie_ranks

        def rank(nid: int) -> int:
            return int(ranks(np.asarray([nid], dtype=np.int64))[0])

        return rank

    def tie_ranks(self, note_ids: np.ndarray) -> np.ndarray:
        """int64 per id of ``note_ids``: ``tie_order`` of each, at once."""
        whole = self._full_sparse()
        rows = whole.positions(note_ids)
        return np.where(rows >= 0, rows, whole.n_docs + np.asarray(note_ids, dtype=np.int64))

    def analyzer_terms(self, text: str) -> list[str]:
        """The terms the query analysis gives ``text`` (the words of a raw FTS5 expression)."""
        return self._analyse(text).terms

    def sparse(self) -> SparseIndex:
        """The term statistics this caller is scored with (visible notes only when some are hidden)."""
        if self._sparse is None:
            self._sparse = self.statistics().sparse(self._full_sparse)
        return self._sparse

    def postings(self) -> QueryPostings:
        """The query's postings in the sparse index, gathered once (ranking and match counts)."""
        if self._postings is None:
            a = self.analysis
            self._postings = query_postings(self.sparse(), a.terms, a.weights, a.cover)
        return self._postings

    def hit_postings(self) -> QueryPostings:
        """Postings exact for every note the mode ranked: a pruned fts run's (fewer), else ``postings()``."""
        return self.ranked_postings if self.ranked_postings is not None else self.postings()

    def named_rows(self) -> np.ndarray:
        """The sparse rows of the notes one of whose names the query is exactly (``core.ranking.names``)."""
        if self._named is None:
            key = name_key(self.text)
            ids = named_note_ids(self.conn, key) if key else []
            rows = self.sparse().rows_of(np.asarray(ids, dtype=np.int64))
            self._named = rows[rows >= 0]
        return self._named

    def chunk_vectors(self) -> ChunkVectors:
        """The vector mode's chunk vectors, loaded on first use and cached like ``sparse``."""
        if self._chunks is None:
            r, sp = self.resolved, self.sparse()

            def full() -> ChunkVectors:
                whole = self._full_sparse()
                if r.kind == "legacy_db":
                    return load_chunk_vectors(self.conn, whole)
                key, owner = (str(r.path), r.generation_id, r.sha256), str(r.layout.index_dir)

                def today() -> ChunkVectors:
                    return CHUNK_CACHE.get(
                        owner, key, lambda: load_chunk_vectors(self.conn, whole, reader=self._reader())
                    )

                return generation_chunks(self._sources(), owner, key, today)

            self._chunks = self.statistics().chunk_vectors(sp, full)
        return self._chunks

    def mask(self) -> np.ndarray:
        """Boolean mask over the sparse rows of the notes the filters allow (cached per generation)."""
        if self._mask is None:
            sp = self.sparse()
            r = self.resolved
            key = (str(r.path), r.sha256, self.filters) if r.kind != "legacy_db" else None
            found = _MASKS.get(key) if key else None
            if found is None and self._default_filters():  # what the query below gives with no filter set:
                found = sp.default_mask if sp.default_mask is not None else self._default_mask()  # stored, derived
            if found is None:
                clause, vals = self.where()
                ids = filtered_note_ids(self.conn, clause, vals)
                found = np.isin(sp.note_ids, np.asarray(ids, dtype=np.int64))
                if key:
                    _MASKS.put(key, found)
            self._mask = found
        return self._mask

    def _default_filters(self) -> bool:
        """Do the filters let through what the default ones do? No filter set, or only classifications
        that hide no note of the generation (a server's fixed ones, usually): the same notes pass."""
        if self.filters == _NO_FILTERS:
            return True
        only_classes = replace(self.filters, classifications=None) == _NO_FILTERS
        return only_classes and not self.statistics().restricted

    def _default_mask(self) -> np.ndarray | None:
        """The default filters' mask of a generation of several segments (core.modes.segment_arrays); None
        for one segment or a legacy index (SQL decides)."""
        r = self.resolved
        if r.kind == "legacy_db" or self.statistics().restricted:
            return None
        clause, vals = _NO_FILTERS.where()  # nothing hidden: the same notes, without the classes' joins (1/3 the time)

        def refused() -> np.ndarray:
            return np.asarray(refused_note_ids(self.conn, clause, vals), dtype=np.int64)

        key, owner = (str(r.path), r.generation_id, r.sha256), str(r.layout.index_dir)
        return generation_default_mask(self._sources(), owner, key, refused)


def note_fields(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The notes rows of the hits, with the date fields that are set and the file mtime."""
    if not note_ids:
        return {}
    rows = hit_rows(conn, note_ids)
    return {
        r[0]: {
            "rel_path": r[1],
            "title": r[2],
            "description": r[3],
            "note_type": r[4],
            "tags": tuple(json.loads(r[5])),
            "dates": {
                **{k: v for k, v in zip(_ROW_DATES, r[6:12]) if v is not None},
                "mtime": _mtime_iso(r[12]),
            },
            "date_keys": {"updated": r[13]} if r[13] else {},  # a field read from another key (lastmod)
        }
        for r in rows
    }


_ROW_DATES = ("created", "updated", "source_date", "date", "git_date", "git_created")


def _mtime_iso(mtime_ns: int) -> str:
    """A file modification time as ISO-8601 UTC (seconds)."""
    return datetime.fromtimestamp(mtime_ns // 1_000_000_000, tz=UTC).isoformat()


def _name_counter(index: SparseIndex, mask: np.ndarray) -> Callable[[int], int]:
    """term id -> in how many notes of ``mask`` the term is in the title field (a name)."""

    def count(tid: int) -> int:
        a, b = int(index.indptr[tid]), int(index.indptr[tid + 1])
        if b <= a:
            return 0
        in_title = (np.asarray(index.field_mask[a:b]) & TITLE_BIT) != 0
        return int(mask[np.asarray(index.docs[a:b])[in_title]].sum())

    return count
