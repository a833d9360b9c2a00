"""Run functions of the dense-backed modes (semantic, reranked, auto's dense pipeline) and their readiness.

Readiness (:func:`dense_readiness`) is checked in this order, each failing closed with its
typed CapabilityError (the registry turns that into a labelled fts fallback only when the
caller allowed it, and ``auto`` always does):

1. the generation has vectors                 else ``dense_index_unavailable``
2. every chunk has a vector                   else ``dense_incomplete``
3. onnxruntime and tokenizers import          else ``onnxruntime_missing``
4. the model (``ctx.model``, else the one recorded in meta ``dense_model``) resolves
   locally                                    else ``model_missing``
5. its identity equals the index's            else ``model_identity_mismatch``

Exact search: the whole matrix of a verified generation is scored with numpy. It is kept
in :data:`DENSE_CACHE` keyed by (vault, generation id, SHA-256), assembled from its segments'
matrices, each kept in :data:`PART_CACHE` by (part SHA-256, model identity) so a publish that adds
one segment loads only that one (core.modes.dense_parts); rows are in note-path order, so ties are
broken on the path. A legacy index is loaded per search, never cached. Filters become a chunk mask
before any ranking, so a hidden note cannot influence a score, a count or a candidate list. One hit per note: its best chunk,
whose id goes into the Hit so the snippet comes from it.

``reranked``: weighted RRF of fts + vector + dense (top :data:`RERANK_CANDIDATES`), then the
cross-encoder over ``"title\\n\\nbest passage"``; the final order is the reranker's.

``auto`` (dense ready): weighted RRF of fts and dense (:data:`AUTO_WEIGHTS`), except when fts
is lexically confident (its 2nd score is below :data:`AUTO_CONFIDENT_RATIO` x its 1st: one note
clearly matches the words, the known-item case) - then the fts order stands and dense only adds
the notes fts missed. Measured with all-MiniLM-L6-v2 fp32 (bench/bench_dense.py), nDCG@10:

    SciFact train / dev, Dendron known-item dev:   fts 0.707 / 0.702 / 0.937
    semantic                                           0.689 / 0.700 / 0.711
    RRF(fts, 0.5 x dense), always                      0.729 / 0.740 / 0.916
    auto (RRF 0.5, fts order when confident, 0.7)      0.728 / 0.739 / 0.942

Semantic alone does not beat fts; plain fusion wins on SciFact but loses 0.02 on known-item
queries; the confidence gate keeps both. Ratio and weight were picked on SciFact train and
Dendron dev (the only known-item set embedded here), so the Dendron figure is optimistic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from core.dense import (
    META_KEY,
    DenseCacheKey,
    DenseMatrix,
    DenseMatrixCache,
    Embedder,
    clear_model_cache,
    identity_key,
    load_embedder,
    model_reference,
    stored_identity,
    stored_reference,
)
from core.errors import (
    CapabilityError,
    DenseIncompleteError,
    DenseIndexUnavailableError,
    ModelIdentityMismatchError,
    ModelMissingError,
    OnnxRuntimeMissingError,
    RerankerUnavailableError,
    UsageError,
)
from core.index.tables.chunk_vectors import count_vectors_and_chunks, count_visible_coverage
from core.index.tables.chunks import titled_chunks
from core.index.tables.notes_fts import note_bodies
from core.models.catalog import import_backend, resolve_model
from core.models.installed import default_model
from core.models.local import KIND_RERANKER
from core.models.presets import DEFAULT_RERANKER_MODEL
from core.modes import dense_parts, lexical
from core.modes.context import Hit, ModeRun, SearchContext
from core.modes.segment_arrays import SegmentSource, segment_sources
from core.ranking import scoring
from core.rerank import CrossEncoder

# Bytes of dense matrices kept per process (100k chunks x 1024 dims float32 is ~410 MB).
DENSE_CACHE_BYTES = 1 << 30
DENSE_CACHE = DenseMatrixCache(DENSE_CACHE_BYTES)
# Each segment's matrix by (vault, part SHA-256, model identity): a publish keeps the unchanged ones.
PART_CACHE = dense_parts.PartCache(DENSE_CACHE_BYTES)
# RRF list weights: auto = (fts, dense); reranked candidates = (fts, vector, dense), vector as in
# hybrid. auto keeps the fts order when fts is confident: its 2nd score < AUTO_CONFIDENT_RATIO x
# its 1st. Both numbers measured with bench/bench_dense.py (see the module docstring).
AUTO_WEIGHTS = (1.0, 0.5)
AUTO_CONFIDENT_RATIO = 0.7
RERANK_WEIGHTS = (1.0, 0.05, 0.5)
RERANK_CANDIDATES = 30
AUTO_MODE = "dense_hybrid"

_RERANKERS: dict[str, CrossEncoder] = {}
_RERANKERS_LOCK = threading.Lock()


def clear_model_caches() -> None:
    """Forget every loaded Embedder and CrossEncoder (e.g. after a model directory changed)."""
    clear_model_cache()
    with _RERANKERS_LOCK:
        _RERANKERS.clear()


# ---------------------------------------------------------------- readiness


def _counts(ctx: SearchContext) -> tuple[int, int]:
    """(chunks with a vector, chunks).

    A generation's counts come from its verified state row (written from the staged database
    at publish; the file's SHA-256 was checked against that row), because ``count(*)`` over the
    vector table reads every page of it (~75 ms for 17k vectors). A legacy index is counted.
    """
    stats = ctx.statistics()
    if stats.restricted:  # readiness over the caller's notes: a hidden note's missing vector is no trace
        return stats.cached("dense_counts", lambda: (0, 0), lambda visible: _visible_counts(ctx, visible))
    record = ctx.resolved.record
    if ctx.resolved.kind != "legacy_db" and "dense_chunks" in record and "chunks" in record:
        return int(record["dense_chunks"]), int(record["chunks"])
    return count_vectors_and_chunks(ctx.conn)


def _visible_counts(ctx: SearchContext, visible: tuple[str, list[object]]) -> tuple[int, int]:
    """(chunks with a vector, chunks) of the notes the visible clause allows."""
    clause, vals = visible
    return count_visible_coverage(ctx.conn, clause, vals)


def _model_ref(ctx: SearchContext) -> str | None:
    """The embedding model to use: the caller's, else the one the index recorded."""
    return model_reference(ctx.model) if ctx.model else stored_reference(ctx.meta.get(META_KEY))


def _check(ctx: SearchContext) -> tuple[CapabilityError | None, Embedder | None]:
    """(the first failing readiness check as an error, else the Embedder to use)."""
    vectors, chunks = _counts(ctx)
    if vectors == 0:
        return DenseIndexUnavailableError(
            f"the index of {ctx.vault} has no dense vectors",
            hint="run: vaultsearch index VAULT --embed",
            vault=str(ctx.vault),
        ), None
    if vectors < chunks:
        return DenseIncompleteError(
            f"{chunks - vectors} of {chunks} chunks of {ctx.vault} have no vector yet",
            hint="run: vaultsearch index VAULT --embed-only",
            vault=str(ctx.vault),
            chunks=chunks,
            chunks_with_vectors=vectors,
        ), None
    try:
        import_backend("onnxruntime")
        import_backend("tokenizers")
        ref = _model_ref(ctx)
        if ref is None:
            return ModelMissingError("the index names no dense model", vault=str(ctx.vault)), None
        embedder = load_embedder(ref)
    except (OnnxRuntimeMissingError, ModelMissingError) as exc:
        return exc, None
    return _identity_problem(ctx, embedder), embedder


def _identity_problem(ctx: SearchContext, embedder: Embedder) -> CapabilityError | None:
    indexed = stored_identity(ctx.meta.get(META_KEY))
    if indexed is not None and identity_key(indexed) == embedder.identity_key():
        return None
    name = (indexed or {}).get("name")
    return ModelIdentityMismatchError(
        f"the index was embedded with {name!r} (weights {str((indexed or {}).get('weights_sha256'))[:12]}), "
        f"the query model is {embedder.config.name!r} (weights {embedder.identity['weights_sha256'][:12]})",
        hint="search with the index's model (drop --model) or re-embed: vaultsearch index VAULT --embed-only --model M",
        index_model=indexed,
        query_model=embedder.identity,
    )


def dense_readiness(ctx: SearchContext) -> str | None:
    """None when a dense pipeline can run honestly, else the stable reason why not."""
    problem, _ = _check(ctx)
    return None if problem is None else problem.reason


def _require_dense(ctx: SearchContext) -> Embedder:
    problem, embedder = _check(ctx)
    if problem is not None:
        raise problem
    assert embedder is not None
    return embedder


# ---------------------------------------------------------------- the matrix and its ranking


def load_matrix(conn: Any) -> DenseMatrix:
    """Every vector of one database with its chunk and note ids, ordered by note path then chunk order."""
    return dense_parts.load_part(conn).dense


def dense_matrix(ctx: SearchContext) -> DenseMatrix:
    """The generation's matrix from the process cache, assembled from its segments' matrices (each cached
    by part SHA-256 and model identity: core.modes.dense_parts); a legacy index is loaded every time."""
    if ctx.resolved.kind == "legacy_db":
        return load_matrix(ctx.conn)
    return DENSE_CACHE.get_or_load(DenseCacheKey.for_index(ctx.resolved), lambda: _assembled(ctx))


def _assembled(ctx: SearchContext) -> DenseMatrix:
    """The generation's live rows: every segment's matrix (from PART_CACHE) minus its own dead notes."""
    identity = stored_identity(ctx.meta.get(META_KEY))
    sources = segment_sources(ctx.resolved)
    if identity is None or not sources:  # readiness checked both (a model is named; a generation has segments)
        raise DenseIndexUnavailableError(f"generation {ctx.resolved.generation_id} names no model or no segment")
    key = identity_key(identity)
    parts, keys = [], []
    for source in sources:
        keys.append(DenseCacheKey.part_key(ctx.resolved, source.sha256, key))
        part = PART_CACHE.get_or_load(keys[-1], partial(_load_source, source))
        parts.append((dense_parts.checked(part, source.sha256, key), source.dead))
    PART_CACHE.keep_only(keys)  # as DENSE_CACHE: the vault's newest generation replaces the older ones
    return dense_parts.assemble(parts)


def _load_source(source: SegmentSource) -> dense_parts.PartMatrix:
    conn = source.connect()
    try:
        return dense_parts.load_part(conn)
    finally:
        conn.close()


def chunk_mask(ctx: SearchContext, dm: DenseMatrix) -> np.ndarray:
    """Rows of the matrix whose note the filters allow (the same notes as ctx.mask())."""
    sp = ctx.sparse()
    allowed = sp.note_ids[ctx.mask()]
    return np.isin(dm.note_ids, allowed)


@dataclass(frozen=True)
class DenseScores:
    """The query's cosine to every row of the generation's matrix, and the rows the filters allow."""

    matrix: DenseMatrix
    scores: np.ndarray
    allowed_rows: np.ndarray
    tie: Callable[[np.ndarray], np.ndarray]  # note ids -> where equal scores put them (SearchContext.tie_ranks)

    def ranking(self, k: int) -> tuple[list[tuple[int, float]], dict[int, int]]:
        """Top ``k`` allowed notes by their best chunk: ([(note, cosine)], {note: best chunk id})."""
        return self._pick(self.allowed_rows, k)

    def best_chunks(self, notes: list[int]) -> dict[int, int]:
        """The best chunk of each of ``notes`` (all allowed: they come from filtered rankings)."""
        rows = self.allowed_rows[np.isin(self.matrix.note_ids[self.allowed_rows], np.asarray(notes, np.int64))]
        return self._pick(rows, len(notes))[1]

    def _pick(self, rows: np.ndarray, k: int) -> tuple[list[tuple[int, float]], dict[int, int]]:
        if k <= 0 or rows.size == 0:
            return [], {}
        chosen = scoring.best_row_per_group(self.scores, rows, self.matrix.note_ids, k, self.tie)
        note_ids, chunk_ids = self.matrix.note_ids, self.matrix.chunk_ids
        return (
            [(int(note_ids[r]), float(self.scores[r])) for r in chosen],
            {int(note_ids[r]): int(chunk_ids[r]) for r in chosen},
        )


def dense_scores(ctx: SearchContext, embedder: Embedder) -> DenseScores:
    """Embed the query once and score every row of the (cached) matrix; filters become a row mask."""
    dm = dense_matrix(ctx)
    query = embedder.embed_query(ctx.text)
    if query.shape != (dm.matrix.shape[1],):
        raise ModelIdentityMismatchError(
            f"query vector has {query.shape[0]} dims, the index {dm.matrix.shape[1]}",
            expected=dm.matrix.shape[1],
            actual=int(query.shape[0]),
        )
    if ctx.statistics().restricted:
        # only the visible notes' rows, as one matrix: the same product (bit for bit) as in an index
        # without the hidden notes, where BLAS would see a matrix of exactly these rows
        visible = np.flatnonzero(np.isin(dm.note_ids, ctx.sparse().visible_note_ids()))
        scores: np.ndarray = np.zeros(dm.matrix.shape[0], dtype=np.float32)
        scores[visible] = scoring.unit_cosine(dm.matrix[visible], query)
    else:
        scores = scoring.unit_cosine(dm.matrix, query)
    return DenseScores(dm, scores, np.flatnonzero(chunk_mask(ctx, dm)), ctx.tie_ranks)


# ---------------------------------------------------------------- modes


def run_semantic(ctx: SearchContext) -> ModeRun:
    """Exact cosine over the dense matrix, best chunk per note."""
    if ctx.raw:
        raise UsageError("raw FTS5 syntax applies to the fts-based modes, not to semantic")
    embedder = _require_dense(ctx)
    notes, best = dense_scores(ctx, embedder).ranking(ctx.limit)
    hits = [Hit(nid, score, "dense_cosine", chunk_id=best[nid]) for nid, score in notes]
    return ModeRun(hits)


def lexically_confident(fts: list[tuple[Any, float]]) -> bool:
    """True when one note clearly leads the fts ranking: 2nd score < AUTO_CONFIDENT_RATIO x 1st."""
    if not fts or fts[0][1] <= 0:
        return False
    return len(fts) == 1 or fts[1][1] < AUTO_CONFIDENT_RATIO * fts[0][1]


def auto_fusion(
    fts: list[tuple[Any, float]],
    dense: list[tuple[Any, float]],
    limit: int,
    tie: Callable[[Any], int] | None = None,
) -> list[tuple[Any, float]]:
    """auto's ranking of (id, score): RRF(fts, dense), or the fts order + dense-only ids when fts is confident.

    Scores are RRF scores in both cases (ids only dense found score 0 after a confident fts list);
    equal scores by ``tie`` (``lexical.fused``; the mode: the note's path).
    """
    if not lexically_confident(fts):
        return lexical.fused([fts, dense], limit, AUTO_WEIGHTS, tie)
    head = lexical.fused([fts], limit, AUTO_WEIGHTS[:1], tie)
    seen = {i for i, _ in head}
    return (head + [(i, 0.0) for i, _ in dense if i not in seen])[:limit]


def run_dense_auto(ctx: SearchContext) -> ModeRun:
    """auto with dense ready: :func:`auto_fusion` of fts and dense (measured, see the module docstring)."""
    embedder = _require_dense(ctx)
    depth = max(lexical.FUSION_DEPTH, ctx.limit)
    dense = dense_scores(ctx, embedder)
    fusion = auto_fusion(lexical.fts_ranking(ctx, depth), dense.ranking(depth)[0], ctx.limit, ctx.tie_order())
    best = dense.best_chunks([nid for nid, _ in fusion])
    hits = [Hit(nid, score, "rrf", chunk_id=best.get(nid)) for nid, score in fusion]
    return ModeRun(hits, AUTO_MODE, AUTO_MODE)


def load_reranker(ctx: SearchContext) -> CrossEncoder:
    """The cross-encoder of ``ctx.options['reranker']`` (else the user's default from ``models install``, else
    the default preset), opened once per process."""
    ref = model_reference(ctx.options.get("reranker") or default_model("reranker") or DEFAULT_RERANKER_MODEL)
    with _RERANKERS_LOCK:
        found = _RERANKERS.get(ref)
        if found is None:
            try:
                files = resolve_model(ref, kind=KIND_RERANKER)
            except ModelMissingError as exc:
                raise RerankerUnavailableError(
                    f"reranker {ref!r} is not available locally: {exc.message}", hint=exc.hint, model=ref
                ) from exc
            found = _RERANKERS[ref] = CrossEncoder(files)
        return found


def _passages(ctx: SearchContext, notes: list[int], best_chunk: dict[int, int]) -> dict[int, tuple[int, str]]:
    """note -> (chunk id, "title\\n\\nbody of its best dense chunk") for the reranker."""
    chunks = [best_chunk[n] for n in notes]
    rows = titled_chunks(ctx.conn, chunks)
    bodies = note_bodies(ctx.conn, (r[0] for r in rows))
    return {nid: (cid, f"{title}\n\n{bodies[nid][start:end]}") for nid, cid, title, start, end in rows}


def run_reranked(ctx: SearchContext) -> ModeRun:
    """RRF candidates of fts + vector + dense, ordered by the cross-encoder's score."""
    embedder = _require_dense(ctx)
    reranker = load_reranker(ctx)
    depth = max(lexical.FUSION_DEPTH, ctx.limit)
    n = max(RERANK_CANDIDATES, ctx.limit)
    dense, tie = dense_scores(ctx, embedder), ctx.tie_order()
    candidates = lexical.fused(
        [lexical.fts_ranking(ctx, depth), lexical.vector_ranking(ctx, depth), dense.ranking(depth)[0]],
        n,
        RERANK_WEIGHTS,
        tie,
    )
    notes = [nid for nid, _ in candidates]
    if not notes:
        return ModeRun([])
    passages = _passages(ctx, notes, dense.best_chunks(notes))
    scores = reranker.score(ctx.text, [passages[nid][1] for nid in notes])
    order = sorted(range(len(notes)), key=lambda i: (-float(scores[i]), tie(notes[i])))[: ctx.limit]
    hits = [Hit(notes[i], float(scores[i]), "cross_encoder", chunk_id=passages[notes[i]][0]) for i in order]
    return ModeRun(hits)
