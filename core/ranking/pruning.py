"""Exact top-k pruning of fts's BM25F (MaxScore, Turtle & Flood 1995; Lucene's ``MaxScoreBulkScorer``):
which query terms need not be scored for every note that holds them, and the proof that the notes left
unscored could not have ranked.

A term's BM25F weight in a note is ``idf * x / (k1 + x)`` for some ``x >= 0``, so it is below ``idf``
whatever the note's counts and lengths: its upper bound needs no stored maximum and never goes stale
when the collection statistics move. The terms with the smallest bounds (``the``, ``of``, an exact
form's tenth of a stem: the longest lists of a query) are *partial*: they are scored only in the
*candidates*, the notes that hold a whole term or that a bonus names. A note outside the candidates
holds partial terms only, so its score is at most:

- the partial terms' bounds summed (the BM25F part), plus
- the coverage bonuses with at most the partial terms' share of the query's idf mass (they grow
  with the share squared, ``scoring.coverage_bonus``), plus
- the name bonus, when the partial terms alone can make up the words a name must hold;

all times the best score where the ranking multiplies by it. ``outside_bound`` is that bound. The
ranking keeps a pruned run only when the bound is below the k-th best score it found (so no outside
note could have ranked, ties included) and below the best BM25F score (so the best score every bonus
is scaled by is the one the whole run would have found); else it scores every posting. The numbers a
pruned run returns are those of the whole run bit for bit: a candidate's postings are all present, in
the same order (core.ranking.sparse.query_postings, ``within``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A term is partial only when it has at least this many postings: a short list costs less to score
# than to look up; and a query is pruned only when its partial terms hold at least MIN_SKIPPED_POSTINGS
# (a pruned run's own costs, the bonuses' rows found first and a pass per term, are a millisecond or two:
# on PowerShell's 3k notes and SciFact's 5k they cost more than they saved, bench.bench_fts_warm).
MIN_PARTIAL_POSTINGS = 2048
MIN_SKIPPED_POSTINGS = 65536
# The partial terms' bounds may sum to at most a share of all the terms' bounds, and their idf mass to
# at most the same share of the query's: the outside notes' bound must stay below the k-th best score,
# which a known-item query's notes reach by holding most of its words. fts tries these shares, the bolder
# first (fewer whole terms, fewer candidates); a refused split is tried again with the next (on the 100k
# synthetic vault's 200 known-item queries, bench.bench_fts_warm: 0.8 refused 3 of 156 pruned queries,
# 0.7 none; p50 20.2 ms at 0.6, 18.8 at 0.7, 17.7 at 0.8).
PARTIAL_SHARES = (0.8, 0.5)
# Relative slack on the bound: the ranking sums float32 weights in float64 and rounds to float32.
BOUND_SLACK = 1e-4


@dataclass(frozen=True)
class Split:
    """Which query term ids are partial (bool per id), and what the notes that hold only those can score."""

    partial: np.ndarray
    bm25: float  # the partial terms' BM25F bounds summed
    cover: float  # their share of the query's idf mass (0..1)
    name_share: float  # their share of the words a name must hold (``in_name``; 0 when none counts)


def choose_partial(
    bounds: np.ndarray,
    cover_idf: np.ndarray,
    lengths: np.ndarray,
    whole: np.ndarray,
    share: float,
    min_postings: int | None = None,
    skipped: int | None = None,
) -> np.ndarray:
    """bool per query term id: partial. ``bounds``: each term's BM25F bound (idf times its weight),
    ``cover_idf``: its idf mass in the coverage bonuses, ``lengths``: its postings, ``whole``: terms that
    must be scored everywhere (a bonus reads all their notes). The terms with the smallest bounds (the
    longest lists first among equals) are taken while both sums stay within ``share`` of theirs; none when
    they hold fewer than ``skipped`` postings (default: MIN_PARTIAL_POSTINGS, MIN_SKIPPED_POSTINGS)."""
    min_postings = MIN_PARTIAL_POSTINGS if min_postings is None else min_postings
    bounds = np.asarray(bounds, dtype=np.float64)
    cover_idf = np.asarray(cover_idf, dtype=np.float64)
    partial = np.zeros(bounds.shape[0], dtype=bool)
    total, total_cover = float(bounds.sum()), float(cover_idf.sum())
    if total <= 0 or total_cover <= 0:
        return partial
    eligible = np.flatnonzero((np.asarray(lengths) >= min_postings) & ~np.asarray(whole, dtype=bool))
    order = eligible[np.lexsort((-np.asarray(lengths)[eligible], bounds[eligible]))]
    summed = summed_cover = 0.0
    for i in order.tolist():
        if summed + bounds[i] > share * total or summed_cover + cover_idf[i] > share * total_cover:
            break
        summed += float(bounds[i])
        summed_cover += float(cover_idf[i])
        partial[i] = True
    if int(np.asarray(lengths)[partial].sum()) < (MIN_SKIPPED_POSTINGS if skipped is None else skipped):
        partial[:] = False
    return partial


def split(partial: np.ndarray, bounds: np.ndarray, cover_idf: np.ndarray, name_shares: np.ndarray) -> Split:
    """The ``Split`` of ``partial``; ``name_shares``: each term's share of a word in ``in_name``
    (core.ranking.sparse._name_match: its cover, 0 for an exact form)."""
    total_cover = float(np.asarray(cover_idf, dtype=np.float64).sum())
    cover = float(np.asarray(cover_idf, dtype=np.float64)[partial].sum()) / total_cover if total_cover > 0 else 1.0
    return Split(
        partial,
        float(np.asarray(bounds, dtype=np.float64)[partial].sum()),
        min(cover, 1.0),
        float(np.asarray(name_shares, dtype=np.float64)[partial].sum()),
    )


def outside_bound(
    s: Split,
    top: float,
    coverage_weights: float,
    name_weight: float,
    name_floor: float,
    name_need: float,
) -> float:
    """The most a note holding only ``s``'s partial terms can score: their BM25F bounds, plus
    ``top`` (the best BM25F score) times the bonuses their share allows. ``coverage_weights``: the
    coverage-style weights summed (coverage, heading, title+heading, title: each at most
    ``weight * share**2``); the name bonus (at most ``max(name_weight, name_floor)``) counts when the
    partial terms can make up ``name_need`` words of a name."""
    bonus = coverage_weights * s.cover**2
    if s.name_share >= name_need and s.name_share > 0:
        bonus += max(name_weight, name_floor)
    return (s.bm25 + bonus * top) * (1.0 + BOUND_SLACK)


def kth_best(scores: np.ndarray, rows: np.ndarray, k: int) -> float | None:
    """The k-th best of ``scores`` at ``rows`` (None: fewer than k rows)."""
    if k <= 0 or rows.size < k:
        return None
    vals = scores[rows]
    return float(vals[np.argpartition(-vals, k - 1)[k - 1]])


def proven(s: Split, outside: float, top: float, best: float, kth: float | None) -> bool:
    """May a pruned run answer? Only when a note outside its candidates (scoring at most ``outside``) could
    neither hold the best BM25F score (``top``: the bonuses are scaled by it), nor the best score after
    them (``best``: the later bonuses are), nor reach the k-th best score (``kth``; None: fewer than k
    candidates, so an outside note would have ranked)."""
    return kth is not None and s.bm25 * (1.0 + BOUND_SLACK) < top and outside < best and outside < kth
