"""What every mode receives (:class:`SearchContext`) and returns (:class:`ModeRun` of :class:`Hit`)."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.index.layout import ResolvedIndex
from core.index.schema import get_meta
from core.ranking.chunk_vectors import ChunkVectors, load_chunk_vectors
from core.ranking.expansion import QueryAnalysis, QueryAnalyzer, vocabulary
from core.ranking.filters import Filters
from core.ranking.sparse import CHUNK_CACHE, SPARSE_CACHE, QueryPostings, SparseIndex, load_sparse, query_postings

# Filter masks of recent (generation, filters) pairs: numbers only, no note text.
_MASK_CACHE_SIZE = 64
_MASKS: dict[tuple, np.ndarray] = {}


@dataclass(frozen=True)
class Hit:
    note_id: int
    score: float
    score_source: str  # which stage produced the score
    via: dict[str, Any] | None = None  # graph expansion: the edge it came through
    chunk_id: int | None = None  # best chunk, when the mode knows it


@dataclass(frozen=True)
class ModeRun:
    hits: list[Hit]
    actual_mode: str
    retrieval_contract: str
    fallback_reason: str | None = None


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
    _chunks: ChunkVectors | None = None
    _postings: QueryPostings | None = None
    _mask: np.ndarray | None = None
    _analysis: QueryAnalysis | None = None
    _meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = get_meta(self.conn)
        return self._meta

    @property
    def analysis(self) -> QueryAnalysis:
        """The query's weighted terms in every language of the index, with its expansions."""
        if self._analysis is None:
            sp, mask = self.sparse(), self.mask()
            languages = self.meta.get("languages") or ["en"]
            visible = None
            if not mask.all():  # expansions and unmatched words see only the notes the caller may see

                def visible(tid: int) -> int:
                    return int(mask[sp.docs[sp.indptr[tid] : sp.indptr[tid + 1]]].sum())

            self._analysis = QueryAnalyzer(sp.term_id, vocabulary(sp), languages, visible).analyse(self.text)
        return self._analysis

    @property
    def terms(self) -> list[str]:
        return self.analysis.terms

    def sparse(self) -> SparseIndex:
        if self._sparse is None:
            r = self.resolved
            if r.kind == "legacy_db":  # mutable file: never cached
                self._sparse = load_sparse(self.conn)
            else:
                key = (str(r.path), r.generation_id, r.sha256)
                self._sparse = SPARSE_CACHE.get(str(r.layout.index_dir), key, lambda: load_sparse(self.conn))
        return self._sparse

    def postings(self) -> QueryPostings:
        """The query's postings in the sparse index, gathered once (ranking and match counts)."""
        if self._postings is None:
            a = self.analysis
            self._postings = query_postings(self.sparse(), a.terms, a.weights, a.cover)
        return self._postings

    def chunk_vectors(self) -> ChunkVectors:
        """The vector mode's chunk vectors, loaded on first use and cached like ``sparse``."""
        if self._chunks is None:
            r, sp = self.resolved, self.sparse()
            if r.kind == "legacy_db":
                self._chunks = load_chunk_vectors(self.conn, sp)
            else:
                key = (str(r.path), r.generation_id, r.sha256)
                self._chunks = CHUNK_CACHE.get(str(r.layout.index_dir), key, lambda: load_chunk_vectors(self.conn, sp))
        return self._chunks

    def mask(self) -> np.ndarray:
        """Boolean mask over the sparse rows of the notes the filters allow (cached per generation)."""
        if self._mask is None:
            sp = self.sparse()
            r = self.resolved
            key = (str(r.path), r.sha256, self.filters) if r.kind != "legacy_db" else None
            found = _MASKS.get(key) if key else None
            if found is None:
                ids = [
                    row[0]
                    for row in self.conn.execute(
                        f"SELECT n.id FROM notes n WHERE {self.filters.where()[0]}", self.filters.where()[1]
                    )
                ]
                found = np.isin(sp.note_ids, np.asarray(ids, dtype=np.int64))
                if key:
                    if len(_MASKS) >= _MASK_CACHE_SIZE:
                        _MASKS.pop(next(iter(_MASKS)))
                    _MASKS[key] = found
            self._mask = found
        return self._mask


def note_fields(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The notes rows of the hits."""
    if not note_ids:
        return {}
    rows = conn.execute(
        f"SELECT id, rel_path, title, description, note_type, tags FROM notes "
        f"WHERE id IN ({', '.join('?' * len(note_ids))})",
        note_ids,
    )
    return {
        r[0]: {"rel_path": r[1], "title": r[2], "description": r[3], "note_type": r[4], "tags": tuple(json.loads(r[5]))}
        for r in rows
    }
