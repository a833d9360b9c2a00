"""The run functions of the lexical modes: fts, vector and hybrid."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from core.errors import QuerySyntaxError, UsageError
from core.index.tables import notes_fts
from core.modes.context import Hit, ModeRun, SearchContext
from core.ranking import phrases, pruning, scoring
from core.ranking.candidate_postings import candidate_postings
from core.ranking.chunk_vectors import best_chunk_ids, vector_scores
from core.ranking.languages import has_cjk
from core.ranking.query import phrase_expression
from core.ranking.sparse import (
    TITLE_BIT,
    QueryPostings,
    RankParams,
    SparseIndex,
    bm25_scores,
    bm25_scores_top,
    name_match,
    name_shares,
    query_postings,
    query_term_ids,
    term_shares,
)

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
# A query of CJK words only is a look-up by character bigrams: no word boundary, no exact
# form, no stem tells a name from a passing mention, so a title that holds the whole query counts
# extra (RankParams.title_coverage_weight; the multilingual dev sets, docs/architecture.md "Languages").
CJK_TITLE_COVERAGE = 0.5
# A note whose name holds a word the query's last word starts (_add_name_start_bonus): below
# RankParams.name_match_weight (a name that is the whole query) so that an exact name stays above.
NAME_START_BONUS = 1.0
# A note whose passage holds every word of a short query close together (_add_passage_bonus), words
# matched by their stems: Dendron headings 0.940 -> 0.947, PowerShell 0.926 -> 0.933, MDN sets within
# 0.005 or better; 0.6 gave Dendron 0.953 but cost MDN ru headings 0.007 (dev sets); SciFact dev and
# train unchanged (its claims are longer than PASSAGE_MAX_WORDS).
PASSAGE_BONUS = 0.3


def _ranked(
    ctx: SparseIndex, scores: np.ndarray, matched: np.ndarray, mask: np.ndarray, k: int
) -> list[tuple[int, float]]:
    cand = np.flatnonzero((matched > 0) & mask)
    rows = scoring.top_k(scores, k, cand)
    return [(int(ctx.note_ids[r]), float(scores[r])) for r in rows]


def fts_ranking(ctx: SearchContext, k: int, *, prune: bool = False) -> list[tuple[int, float]]:
    """(note id, score) best first: raw FTS5 syntax through FTS5, plain text through BM25F. ``prune``: try
    the exact pruned run first (``_pruned_ranking``; its postings then serve the hits' match counts)."""
    if ctx.raw:
        return raw_fts_ranking(ctx, k)
    sp = ctx.sparse()
    params = replace(sp.params, title_coverage_weight=CJK_TITLE_COVERAGE) if ctx.analysis.cjk_only else None
    if prune:
        ranked = _pruned_ranking(ctx, sp, params, k)
        if ranked is not None:
            return ranked
    scores, matched = bm25_scores(sp, ctx.terms, ctx.postings(), params, ctx.named_rows())
    _add_bonuses(ctx, sp, scores, matched, ctx.postings())
    return _ranked(sp, scores, matched, ctx.mask(), k)


def _add_bonuses(
    ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray, p: QueryPostings
) -> None:
    """fts's bonuses after BM25F's own, in their order (each scaled by the best score so far)."""
    _add_identifier_bonus(ctx, sp, scores, matched)
    _add_name_start_bonus(ctx, sp, scores, matched, p)
    _add_passage_bonus(ctx, sp, scores, matched)
    _add_phrase_bonus(ctx, sp, scores, matched)


def _pruned_ranking(
    ctx: SearchContext, sp: SparseIndex, params: RankParams | None, k: int
) -> list[tuple[int, float]] | None:
    """fts's ranking scored in the candidates only (core.ranking.pruning), or None when pruning cannot
    prove it equal to the whole run's: then every posting is scored. Exact when it answers: the same
    notes, scores and order. The bolder split first (fewer candidates), a safer one when it is refused."""
    a = ctx.analysis
    ids, _ = query_term_ids(sp, a.terms)
    lengths = np.asarray(sp.indptr[ids + 1] - sp.indptr[ids])
    if int(lengths.sum()) < pruning.MIN_SKIPPED_POSTINGS:
        return None  # too few postings to skip any worth skipping
    w, c = term_shares(sp, a.terms, a.weights, a.cover)
    idf = sp.idf(ids).astype(np.float64)
    bounds = idf * (1.0 if w is None else w)
    cover_idf = idf * (1.0 if c is None else c)
    starts = {sp.term_id[t] for t in a.name_starts if t in sp.term_id}
    whole = np.fromiter((int(i) in starts for i in ids), dtype=bool, count=ids.size)  # a bonus reads all their notes
    shares, need = name_shares(sp, a.terms, ids, c)
    forced: np.ndarray | None = None
    for share in pruning.PARTIAL_SHARES:
        partial = pruning.choose_partial(bounds, cover_idf, lengths, whole, share)
        if not partial.any():
            return None
        if forced is None:
            forced = np.zeros(sp.n_docs, dtype=bool)
            for rows in (ctx.named_rows(), *_identifier_rows(ctx, sp), _passage_rows(ctx, sp), _phrase_rows(ctx, sp)):
                forced[rows] = True
        part = pruning.split(partial, bounds, cover_idf, shares)
        ranked = _pruned_attempt(ctx, sp, params, k, part, need, forced)
        if ranked is not None:
            return ranked
    return None


def _pruned_attempt(
    ctx: SearchContext,
    sp: SparseIndex,
    params: RankParams | None,
    k: int,
    part: pruning.Split,
    need: float,
    forced: np.ndarray,
) -> list[tuple[int, float]] | None:
    """One pruned run with the partial terms of ``part`` (its postings kept for the hits on success)."""
    a = ctx.analysis
    p = candidate_postings(sp, a.terms, a.weights, a.cover, ~part.partial, forced)
    scores, matched, top = bm25_scores_top(sp, a.terms, p, params, ctx.named_rows())
    if not p.docs.size:
        return None
    rp = params or sp.params
    coverage = rp.coverage_weight + rp.heading_coverage_weight + rp.title_heading_coverage_weight
    outside = pruning.outside_bound(
        part, top, coverage + rp.title_coverage_weight, rp.name_match_weight, rp.heading_coverage_weight, need
    )
    best = float(scores.max())  # the best score the later bonuses are scaled by (it only grows)
    _add_bonuses(ctx, sp, scores, matched, p)
    cand = np.flatnonzero((matched > 0) & ctx.mask())
    if not pruning.proven(part, outside, top, best, pruning.kth_best(scores, cand, k)):
        return None
    ctx.ranked_postings = p
    return _ranked(sp, scores, matched, ctx.mask(), k)


def phrase_notes(ctx: SearchContext) -> dict[int, int]:
    """note id -> how many of the query's quoted phrases it holds (``core.ranking.phrases``); each
    phrase is reported in ``query_expansions`` (kind ``phrase``, ``to``: the phrase as matched)."""
    if ctx.phrase_notes is None:
        found: dict[int, int] = {}
        sp = ctx.sparse()
        for phrase in phrases.quoted_phrases(ctx.text):
            candidates: list[int] = []
            if has_cjk(phrase):  # the notes holding every bigram of it
                ids = [sp.term_id.get(g, -1) for g in phrases.phrase_grams(phrase)]
                rows = None
                for tid in ids:
                    held = np.asarray(sp.docs[sp.indptr[tid] : sp.indptr[tid + 1]]) if tid >= 0 else np.zeros(0, int)
                    held = held[sp.sees(held)]  # the caller's notes only
                    rows = held if rows is None else np.intersect1d(rows, held)
                candidates = sp.note_ids[rows].tolist() if rows is not None else []
            holding = phrases.phrase_note_ids(ctx.conn, phrase, candidates)
            for nid in holding:
                found[nid] = found.get(nid, 0) + 1
            ctx.analysis.expansions.append({"word": phrase, "kind": "phrase", "to": [phrase]})
        ctx.phrase_notes = found
    return ctx.phrase_notes


def _add_phrase_bonus(ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray) -> None:
    """A note holding a quoted phrase gains the best score once per phrase it holds: it ranks above
    every note that holds only the phrase's words, however long it is (BM25's length normalisation
    would bury it: one sentence in a law of 100,000 words)."""
    found = phrase_notes(ctx)
    if not found or not matched.any():
        return
    rows = sp.rows_of(np.fromiter(found, dtype=np.int64, count=len(found)))
    count = np.fromiter(found.values(), dtype=np.float32, count=len(found))
    top = float(scores.max())
    scores[rows[rows >= 0]] += np.float32(top) * count[rows >= 0]


def _phrase_rows(ctx: SearchContext, sp: SparseIndex) -> np.ndarray:
    """The rows the phrase bonus rewards."""
    found = phrase_notes(ctx)
    rows = sp.rows_of(np.fromiter(found, dtype=np.int64, count=len(found)))
    return rows[rows >= 0]


def _add_passage_bonus(ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray) -> None:
    """A note with a passage holding every content word of a short query close together
    (``phrases.passage_note_ids``) gains PASSAGE_BONUS of the best score: its best passage counts,
    not only its length-normalised whole."""
    if not matched.any():
        return
    rows = _passage_rows(ctx, sp)
    if rows.size:
        scores[rows] += np.float32(PASSAGE_BONUS * float(scores.max()))


def _passage_rows(ctx: SearchContext, sp: SparseIndex) -> np.ndarray:
    """The rows the passage bonus rewards (the caller's), found once per search."""
    if ctx.passage_rows is None:
        a = ctx.analysis
        content = [w for w in a.words if w not in a.stop]
        words = [w for w in content if w not in a.unmatched and not has_cjk(w) and not w.isdigit()]
        held: set[int] = set()
        if PASSAGE_BONUS and len(words) == len(content):
            held = phrases.passage_note_ids(ctx.conn, [a.stems.get(w) or w for w in words])
        rows = sp.rows_of(np.fromiter(held, dtype=np.int64, count=len(held)))
        ctx.passage_rows = rows[rows >= 0]
    return ctx.passage_rows


def _add_name_start_bonus(
    ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray, p: QueryPostings
) -> None:
    """A note whose name holds a word the query's last word starts (``cumula`` -> "Cumulative
    Layout Shift"; ``QueryAnalysis.name_starts``) gains NAME_START_BONUS of the best score, times
    the idf share of the query's other words its name holds: the name being typed comes first, the way a
    name that is the query does (``name_match``), but a word start ranks below the whole word."""
    a = ctx.analysis
    if not a.name_starts or not matched.any():
        return
    known = [t for t in a.terms if t in sp.term_id]  # aligned with the postings' ids
    starts = np.fromiter((t in a.name_starts for t in known), dtype=bool, count=len(known))
    in_title = (np.asarray(sp.field_mask[p.pos] if p.mask is None else p.mask) & TITLE_BIT) != 0
    named = np.zeros(sp.n_docs, dtype=bool)
    named[p.docs[np.flatnonzero(starts[p.owner] & in_title)]] = True
    kinds = dict(zip(a.terms, a.kinds))
    other = np.fromiter((kinds[t] == "base" and t not in a.name_word for t in known), dtype=bool, count=len(known))
    idf = sp.idf(p.ids).astype(np.float64) * (p.cover if p.cover is not None else 1.0) * other
    total = float(idf.sum())
    held = np.bincount(p.docs, weights=idf[p.owner] * in_title, minlength=sp.n_docs)  # in the name too
    share = held / total if total > 0 else 1.0
    bonus = NAME_START_BONUS * float(scores.max()) * np.asarray(share) * named
    scores += bonus.astype(np.float32)


def _add_identifier_bonus(
    ctx: SearchContext, sp: SparseIndex, scores: np.ndarray, matched: np.ndarray, share: float = IDENTIFIER_BONUS
) -> None:
    """Reward notes that hold a compound identifier of the query (``wiki-knowledge``,
    ``live/live#2181``, ``Get-ChildItem``) verbatim: an FTS5 phrase match of its words.

    Bag-of-words BM25 alone ranks a note with the parts apart as high as one with the identifier.
    The bonus grows with the share of the query's words the identifiers make up: a query that
    is nothing but an identifier adds the whole best score (the verbatim notes come first), one
    identifier in a sentence adds about ``share`` (SciFact's claims hold words like ``IL-6``).
    """
    groups = _identifier_groups(ctx.text)
    if not groups or not matched.any():
        return
    top = float(scores.max())
    coverage = sum(len(w) for w in groups) / max(len(_WORD.findall(ctx.text)), 1)
    share = scoring.identifier_share(share, coverage, IDENTIFIER_COVERAGE_POWER)
    for found in _identifier_rows(ctx, sp):
        scores[found] += np.float32(share * top / len(groups))


def _identifier_groups(text: str) -> list[list[str]]:
    """The words of each compound identifier of the query (at most MAX_IDENTIFIERS)."""
    return [words for piece in text.split()[: MAX_IDENTIFIERS * 4] if len(words := _WORD.findall(piece)) >= 2][
        :MAX_IDENTIFIERS
    ]


def _identifier_rows(ctx: SearchContext, sp: SparseIndex) -> list[np.ndarray]:
    """Per identifier of the query, the rows (the caller's) of the notes that hold it verbatim, found once."""
    if ctx.identifier_rows is None:
        found = []
        for words in _identifier_groups(ctx.text):
            rows = notes_fts.matching_rowids(ctx.conn, phrase_expression(words))
            at = sp.rows_of(np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)))
            found.append(at[at >= 0])
        ctx.identifier_rows = found
    return ctx.identifier_rows


def vector_ranking(ctx: SearchContext, k: int) -> list[tuple[int, float]]:
    return _vector(ctx, k, with_chunks=False)[0]


def _vector(ctx: SearchContext, k: int, *, with_chunks: bool = True) -> tuple[list[tuple[int, float]], dict[int, int]]:
    """vector's ranking, and (``with_chunks``) the best chunk id of each ranked note."""
    if ctx.raw:
        raise UsageError("raw FTS5 syntax applies to the fts-based modes, not to vector")
    sp, chunks = ctx.sparse(), ctx.chunk_vectors()
    scores, matched, per_chunk = vector_scores(sp, chunks, ctx.terms, ctx.postings())
    _add_name_bonus(sp, ctx.terms, ctx.postings(), scores, matched, ctx.named_rows())
    _add_identifier_bonus(ctx, sp, scores, matched, VECTOR_IDENTIFIER_BONUS)
    cand = np.flatnonzero((matched > 0) & ctx.mask())
    rows = scoring.top_k(scores, k, cand).tolist()
    best = best_chunk_ids(chunks, per_chunk, rows) if with_chunks else {}
    ranking = [(int(sp.note_ids[r]), float(scores[r])) for r in rows]
    return ranking, {int(sp.note_ids[r]): cid for r, cid in best.items()}


def _add_name_bonus(
    sp: SparseIndex,
    terms: list[str],
    postings: QueryPostings,
    scores: np.ndarray,
    matched: np.ndarray,
    named: np.ndarray | None = None,
) -> None:
    """vector's scores plus fts's name bonus (``scoring.name_bonus`` of ``name_match``, the same
    weights, times the best score): a chunk cosine cannot tell a note's name from a passing mention.
    Without it, vector put the note named by a CJK title substring at rank 6-30 (and hybrid's
    fusion followed), and a file name found its note at nDCG@10 0.63-0.69 against fts's 0.99."""
    p = sp.params
    if not p.name_match_weight or not matched.any():
        return
    bonus = scoring.name_bonus(name_match(sp, terms, postings, named), p.name_match_weight, p.heading_coverage_weight)
    scores += (bonus * float(scores.max())).astype(np.float32) * (matched > 0)


def raw_fts_ranking(ctx: SearchContext, k: int) -> list[tuple[int, float]]:
    """The caller's FTS5 expression decides which notes match (filters in the same statement);
    they are ranked by BM25F over the expression's words with the caller's statistics.

    Not FTS5's own bm25(): its N, document frequencies and average lengths count every row of
    the table, hidden notes included, so a restricted caller's scores would move with them."""
    clause, vals = ctx.where()
    try:
        ids = notes_fts.matching_note_ids(ctx.conn, ctx.text, clause, vals)
    except sqlite3.OperationalError as exc:
        raise QuerySyntaxError(
            f"invalid FTS5 query {ctx.text!r}: {exc}",
            query=ctx.text,
            hint="drop raw=True / --raw to search the text literally",
        ) from exc
    sp = ctx.sparse()
    rows = sp.rows_of(np.asarray(ids, dtype=np.int64))
    rows = rows[rows >= 0]
    text = _RAW_SYNTAX.sub(" ", ctx.text)
    terms = ctx.analyzer_terms(_RAW_PREFIX.sub(" ", text)) + _prefix_terms(sp, _RAW_PREFIX.findall(text))
    scores, _ = bm25_scores(sp, terms, query_postings(sp, terms))
    return [(int(sp.note_ids[r]), float(scores[r])) for r in scoring.top_k(scores, k, rows)]


def _surface(term: str) -> str:
    """A term without its language tag (``de:kont``) or exact-form mark (``=templater``)."""
    return term.rsplit(":", 1)[-1].lstrip("=")


def _prefix_terms(sp: SparseIndex, prefixes: list[str]) -> list[str]:
    """The indexed terms (of the caller's index) a raw ``prefix*`` matches, at most RAW_PREFIX_TERMS each."""
    out: list[str] = []
    for prefix in (p.lower() for p in prefixes):
        out += sorted(t for t in sp.term_id if _surface(t).startswith(prefix))[:RAW_PREFIX_TERMS]
    return out


RAW_PREFIX_TERMS = 64
_RAW_PREFIX = re.compile(r"(\w+)\*")
# FTS5 syntax that is not a word of the text: operators, column filters, the initial-token caret.
_RAW_SYNTAX = re.compile(r"\b(?:AND|OR|NOT|NEAR)\b|\{[^}]*\}\s*:|\b\w+\s*:|\^|\bNEAR\s*\(")


def _hits(ranking: list[tuple[int, float]], source: str, limit: int, ctx: SearchContext | None = None) -> list[Hit]:
    labels = expansion_labels(ctx, [nid for nid, _ in ranking[:limit]]) if ctx is not None and not ctx.raw else {}
    for nid in ctx.phrase_notes or {} if ctx is not None else {}:
        labels[nid] = labels.get(nid, "") + "+phrase"
    return [Hit(nid, score, source + labels.get(nid, "")) for nid, score in ranking[:limit]]


def expansion_labels(ctx: SearchContext, note_ids: list[int]) -> dict[int, str]:
    """note id -> ``+kind+kind`` of the query expansions (prefix, variant, subword, cjk_unigram,
    typo) whose terms the note holds, for its ``score_source``; no entry for plain matches."""
    a, sp = ctx.analysis, ctx.sparse()
    kinds = [k for t, k in zip(a.terms, a.kinds) if t in sp.term_id]  # aligned with the postings' ids
    if not note_ids or all(k in ("base", "exact") for k in kinds):
        return {}
    p = ctx.hit_postings()
    rows = sp.rows_of(np.asarray(note_ids, dtype=np.int64))
    sel = np.flatnonzero(np.isin(p.docs, rows[rows >= 0]))
    found: dict[int, set[str]] = {}
    for doc, owner in zip(p.docs[sel].tolist(), p.owner[sel].tolist()):
        if kinds[owner] not in ("base", "exact"):
            found.setdefault(int(sp.note_ids[doc]), set()).add(kinds[owner])
    return {nid: "".join(f"+{k}" for k in sorted(ks)) for nid, ks in found.items()}


def run_fts(ctx: SearchContext) -> ModeRun:
    source = "fts5_match_bm25f" if ctx.raw else "bm25f"
    return ModeRun(_hits(fts_ranking(ctx, ctx.limit, prune=True), source, ctx.limit, ctx))


def run_vector(ctx: SearchContext) -> ModeRun:
    """vector's hits, each with the chunk that scored best (its snippet comes from there)."""
    ranking, best = _vector(ctx, ctx.limit)
    labels = expansion_labels(ctx, [nid for nid, _ in ranking])
    return ModeRun(
        [Hit(nid, score, "chunk_bm25" + labels.get(nid, ""), chunk_id=best.get(nid)) for nid, score in ranking]
    )


def fused(
    rankings: list[list[tuple[int, float]]],
    limit: int,
    weights: tuple[float, ...] = HYBRID_WEIGHTS,
    tie: Callable[[int], int] | None = None,
) -> list[tuple[int, float]]:
    """The RRF fusion of ``rankings``, best first; equal scores by ``tie(note id)`` (default: the id)."""
    scores = scoring.rrf_fuse([[nid for nid, _ in r] for r in rankings], k=RRF_K, weights=weights)
    order = tie or (lambda nid: nid)
    return sorted(scores.items(), key=lambda kv: (-kv[1], order(kv[0])))[:limit]


def run_hybrid(ctx: SearchContext) -> ModeRun:
    depth = max(FUSION_DEPTH, ctx.limit)
    fusion = fused([fts_ranking(ctx, depth), vector_ranking(ctx, depth)], ctx.limit, tie=ctx.tie_order())
    return ModeRun(_hits(fusion, "rrf", ctx.limit, ctx))


BODY_COLUMN = notes_fts.FTS_COLUMNS.index("body")
