"""The run functions of the model-free modes, and the context every mode receives."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core import scoring
from core.analysis import analyzer_for
from core.errors import QuerySyntaxError, UsageError
from core.filters import Filters
from core.generations import ResolvedIndex
from core.query import MAX_QUERY_TERMS, phrase_expression
from core.schema import FTS_COLUMNS, get_meta
from core.chunk_vectors import ChunkVectors, best_chunk_ids, load_chunk_vectors, vector_scores
from core.sparse import (CHUNK_CACHE, GRAPH_CACHE, SPARSE_CACHE, QueryPostings, SparseIndex, bm25_scores, load_sparse,
                         query_postings)

# Candidates taken from each list before fusion.
FUSION_DEPTH = 100
RRF_K = 60.0
# A query word that splits into several terms (an identifier) adds this share of the best
# score to notes that contain it verbatim; at most MAX_IDENTIFIERS such words per query.
IDENTIFIER_BONUS = 0.1
MAX_IDENTIFIERS = 4
# The same for vector's cosines, whose spread is narrower than BM25's (0.3 costs SciFact's
# vector 0.002 nDCG@10 and nothing on the known-item sets; it makes `wiki-knowledge` find the
# note that holds it over a short note titled "Knowledge").
VECTOR_IDENTIFIER_BONUS = 0.3
# share + (1 - share) * coverage ** 4: full bonus at coverage 1, +0.06 at 1/2, ~0 at 1/5 (SciFact
# train fts 0.7065 -> 0.7064, known-item dev unchanged; the parts-apart case is fixed).
IDENTIFIER_COVERAGE_POWER = 4
_WORD = re.compile(r"[^\W_]+")
# hybrid's RRF list weights (fts, vector): tuned on SciFact train + known-item (docs/architecture.md).
HYBRID_WEIGHTS = (1.0, 0.4)
GRAPH_ANCHORS = 10
GRAPH_HOPS = 2
GRAPH_DECAY = 0.5
# bm25() column weights for raw FTS5 queries, in FTS_COLUMNS order.
RAW_BM25_WEIGHTS = (2.0, 1.5, 1.5, 4.0, 1.0)


# Filter masks of recent (generation, filters) pairs: numbers only, no note text.
_MASK_CACHE_SIZE = 64
_MASKS: dict[tuple, np.ndarray] = {}


@dataclass(frozen=True)
class Hit:
    note_id: int
    score: float
    score_source: str                    # which stage produced the score
    via: dict[str, Any] | None = None    # graph expansion: the edge it came through
    chunk_id: int | None = None          # best chunk, when the mode knows it


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
    _terms: list[str] | None = None
    _meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        if self._meta is None:
            self._meta = get_meta(self.conn)
        return self._meta

    @property
    def terms(self) -> list[str]:
        if self._terms is None:
            self._terms = analyzer_for(self.meta["tokenizer"]).terms(self.text)[:MAX_QUERY_TERMS]
        return self._terms

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
            self._postings = query_postings(self.sparse(), self.terms)
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

    def allowed_ids(self) -> set[int]:
        clause, vals = self.filters.where()
        return {r[0] for r in self.conn.execute(f"SELECT n.id FROM notes n WHERE {clause}", vals)}

    def mask(self) -> np.ndarray:
        """Boolean mask over the sparse rows of the notes the filters allow (cached per generation)."""
        if self._mask is None:
            sp = self.sparse()
            r = self.resolved
            key = (str(r.path), r.sha256, self.filters) if r.kind != "legacy_db" else None
            found = _MASKS.get(key) if key else None
            if found is None:
                ids = [row[0] for row in self.conn.execute(
                    f"SELECT n.id FROM notes n WHERE {self.filters.where()[0]}", self.filters.where()[1])]
                found = np.isin(sp.note_ids, np.asarray(ids, dtype=np.int64))
                if key:
                    if len(_MASKS) >= _MASK_CACHE_SIZE:
                        _MASKS.pop(next(iter(_MASKS)))
                    _MASKS[key] = found
            self._mask = found
        return self._mask


def _ranked(ctx: SparseIndex, scores: np.ndarray, matched: np.ndarray, mask: np.ndarray, k: int
            ) -> list[tuple[int, float]]:
    cand = np.flatnonzero((matched > 0) & mask)
    rows = scoring.top_k(scores, k, cand)
    return [(int(ctx.note_ids[r]), float(scores[r])) for r in rows]


def fts_ranking(ctx: SearchContext, k: int) -> list[tuple[int, float]]:
    """(note id, score) best first: raw FTS5 syntax through FTS5, plain text through BM25F."""
    if ctx.raw:
        return raw_fts_ranking(ctx, k)
    sp = ctx.sparse()
    scores, matched = bm25_scores(sp, ctx.terms, ctx.postings())
    _add_identifier_bonus(ctx, sp, scores, matched)
    return _ranked(sp, scores, matched, ctx.mask(), k)


def _add_identifier_bonus(ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray,
                          share: float = IDENTIFIER_BONUS) -> None:
    """Reward notes that hold a compound identifier of the query (``wiki-knowledge``,
    ``live/live#2181``, ``Get-ChildItem``) verbatim: an FTS5 phrase match of its words.

    Bag-of-words BM25 alone ranks a note with the parts apart as high as one with the identifier.
    The bonus grows with the share of the query's words the identifiers make up: a query that
    is nothing but an identifier adds the whole best score (the verbatim notes come first), one
    identifier in a sentence adds about ``share`` (SciFact's claims hold words like ``IL-6``).
    """
    groups = [words for piece in ctx.text.split()[:MAX_IDENTIFIERS * 4]
              if len(words := _WORD.findall(piece)) >= 2][:MAX_IDENTIFIERS]
    if not groups or not matched.any():
        return
    top = float(scores.max())
    coverage = sum(len(w) for w in groups) / max(len(_WORD.findall(ctx.text)), 1)
    share += (1.0 - share) * coverage ** IDENTIFIER_COVERAGE_POWER
    for words in groups:
        rows = ctx.conn.execute("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ?",
                                (phrase_expression(words),)).fetchall()
        found = sp.rows_of(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
        scores[found[found >= 0]] += np.float32(share * top / len(groups))


def vector_ranking(ctx: SearchContext, k: int) -> list[tuple[int, float]]:
    return _vector(ctx, k, with_chunks=False)[0]


def _vector(ctx: SearchContext, k: int, *, with_chunks: bool = True) -> tuple[list[tuple[int, float]], dict[int, int]]:
    """vector's ranking, and (``with_chunks``) the best chunk id of each ranked note."""
    if ctx.raw:
        raise UsageError("raw FTS5 syntax applies to the fts-based modes, not to vector")
    sp, chunks = ctx.sparse(), ctx.chunk_vectors()
    scores, matched, per_chunk = vector_scores(sp, chunks, ctx.terms, ctx.postings())
    _add_identifier_bonus(ctx, sp, scores, matched, VECTOR_IDENTIFIER_BONUS)
    cand = np.flatnonzero((matched > 0) & ctx.mask())
    rows = scoring.top_k(scores, k, cand).tolist()
    best = best_chunk_ids(chunks, per_chunk, rows) if with_chunks else {}
    ranking = [(int(sp.note_ids[r]), float(scores[r])) for r in rows]
    return ranking, {int(sp.note_ids[r]): cid for r, cid in best.items()}


def raw_fts_ranking(ctx: SearchContext, k: int) -> list[tuple[int, float]]:
    """The caller's FTS5 expression ranked by FTS5's bm25(), filters in the same statement."""
    clause, vals = ctx.filters.where()
    weights = ", ".join(str(w) for w in RAW_BM25_WEIGHTS)
    sql = (f"SELECT n.id, bm25(notes_fts, {weights}) AS s FROM notes_fts JOIN notes n ON n.id = notes_fts.rowid "
           f"WHERE notes_fts MATCH ? AND {clause} ORDER BY s, n.id LIMIT ?")
    try:
        rows = ctx.conn.execute(sql, [ctx.text, *vals, k]).fetchall()
    except sqlite3.OperationalError as exc:
        raise QuerySyntaxError(f"invalid FTS5 query {ctx.text!r}: {exc}", query=ctx.text,
                               hint="drop raw=True / --raw to search the text literally") from exc
    return [(nid, -float(s)) for nid, s in rows]


def _hits(ranking: list[tuple[int, float]], source: str, limit: int) -> list[Hit]:
    return [Hit(nid, score, source) for nid, score in ranking[:limit]]


def run_fts(ctx: SearchContext) -> ModeRun:
    source = "fts5_bm25" if ctx.raw else "bm25f"
    return ModeRun(_hits(fts_ranking(ctx, ctx.limit), source, ctx.limit), "fts", "fts")


def run_vector(ctx: SearchContext) -> ModeRun:
    """vector's hits, each with the chunk that scored best (its snippet comes from there)."""
    ranking, best = _vector(ctx, ctx.limit)
    return ModeRun([Hit(nid, score, "tfidf_cosine", chunk_id=best.get(nid)) for nid, score in ranking],
                   "vector", "vector")


def fused(rankings: list[list[tuple[int, float]]], limit: int, weights: tuple[float, ...] = HYBRID_WEIGHTS
          ) -> list[tuple[int, float]]:
    scores = scoring.rrf_fuse([[nid for nid, _ in r] for r in rankings], k=RRF_K, weights=weights)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


def run_hybrid(ctx: SearchContext) -> ModeRun:
    depth = max(FUSION_DEPTH, ctx.limit)
    fusion = fused([fts_ranking(ctx, depth), vector_ranking(ctx, depth)], ctx.limit)
    return ModeRun(_hits(fusion, "rrf", ctx.limit), "hybrid", "hybrid")


def _neighbors(ctx: SearchContext) -> dict[int, list[tuple[int, str, str]]]:
    """The link graph, both directions; loaded once per verified generation (never cached for legacy)."""
    r = ctx.resolved
    if r.kind == "legacy_db":
        return _load_neighbors(ctx.conn)
    return GRAPH_CACHE.get(str(r.layout.index_dir), (str(r.path), r.generation_id, r.sha256),
                           lambda: _load_neighbors(ctx.conn))


def _load_neighbors(conn: sqlite3.Connection) -> dict[int, list[tuple[int, str, str]]]:
    out: dict[int, list[tuple[int, str, str]]] = {}
    for src, dst, kind in conn.execute("SELECT src_id, dst_id, kind FROM edges WHERE dst_id IS NOT NULL "
                                           "AND src_id != dst_id"):
        out.setdefault(src, []).append((dst, kind, "out"))
        out.setdefault(dst, []).append((src, kind, "in"))
    return out


class _Allowed:
    """``note_id in allowed`` answered from the cached filter mask (no per-query id set)."""

    def __init__(self, note_ids: np.ndarray, mask: np.ndarray) -> None:
        self.note_ids, self.mask = note_ids, mask

    def __contains__(self, note_id: object) -> bool:
        pos = int(np.searchsorted(self.note_ids, note_id))
        return pos < self.note_ids.shape[0] and int(self.note_ids[pos]) == note_id and bool(self.mask[pos])


def run_graph(ctx: SearchContext) -> ModeRun:
    """Hybrid list; its top anchors spread their scores through stored links, never through hidden notes."""
    depth = max(FUSION_DEPTH, ctx.limit)
    fusion = fused([fts_ranking(ctx, depth), vector_ranking(ctx, depth)], depth)
    anchors = dict(fusion[:GRAPH_ANCHORS])
    expanded = scoring.graph_expand(anchors, _neighbors(ctx), hops=GRAPH_HOPS, decay=GRAPH_DECAY,
                                    allowed=_Allowed(ctx.sparse().note_ids, ctx.mask()))
    best: dict[int, Hit] = {nid: Hit(nid, s, "rrf") for nid, s in fusion}
    for nid, (s, via, kind, direction, hops) in expanded.items():
        if nid not in best or s > best[nid].score:
            best[nid] = Hit(nid, s, "graph", {"from": via, "edge": kind, "direction": direction, "hops": hops})
    hits = sorted(best.values(), key=lambda h: (-h.score, h.note_id))[:ctx.limit]
    via_ids = sorted({h.via["from"] for h in hits if h.via})
    path_of = dict(ctx.conn.execute(f"SELECT id, rel_path FROM notes WHERE id IN ({', '.join('?' * len(via_ids))})",
                                    via_ids)) if via_ids else {}
    hits = [Hit(h.note_id, h.score, h.score_source, {**h.via, "from": path_of[h.via["from"]]}) if h.via else h
            for h in hits]
    return ModeRun(hits, "graph_assisted", "graph_assisted")


def note_fields(conn: sqlite3.Connection, note_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The notes rows of the hits."""
    if not note_ids:
        return {}
    rows = conn.execute(f"SELECT id, rel_path, title, description, note_type, tags FROM notes "
                        f"WHERE id IN ({', '.join('?' * len(note_ids))})", note_ids)
    return {r[0]: {"rel_path": r[1], "title": r[2], "description": r[3], "note_type": r[4],
                   "tags": tuple(json.loads(r[5]))} for r in rows}


BODY_COLUMN = FTS_COLUMNS.index("body")
