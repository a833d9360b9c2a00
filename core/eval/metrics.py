"""Retrieval metrics: one pure function per formula, no I/O.

Conventions follow trec_eval (and BEIR, which calls trec_eval through pytrec_eval):

- ``qrels`` maps a document id to an integer relevance grade. A document is
  *relevant* when its grade is > 0; grades <= 0 count as not relevant and give no gain.
  A retrieved document absent from ``qrels`` is not relevant (unjudged = non-relevant).
- ``ranked`` is the system's ranking, best first. Rank positions are 1-based.
- **Duplicates**: when a document appears more than once in ``ranked``, only its
  first occurrence counts; later copies are removed before the cutoff is applied, so
  they neither earn gain again nor push other documents down. (trec_eval rejects
  duplicate docnos in a run; ranx stores a run as a dict, so duplicates cannot exist
  there. Dropping repeats keeps both comparable.)
- A cutoff ``k`` must be a positive integer. ``ranked`` may be shorter than ``k``.

Every function returns a Python ``float`` in [0, 1]. A query without any relevant
document scores 0.0 on every metric; trec_eval skips such queries, so the caller
(``core.eval.evaluation``) excludes them before averaging.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from core.errors import UsageError


def dedupe_ranking(ranked: Sequence[str]) -> list[str]:
    """Return ``ranked`` with repeated ids removed, keeping each id's first occurrence."""
    seen: set[str] = set()
    out: list[str] = []
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def relevant_ids(qrels: Mapping[str, int]) -> frozenset[str]:
    """The ids whose relevance grade is > 0 (trec_eval's notion of a relevant document)."""
    return frozenset(doc for doc, rel in qrels.items() if rel > 0)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise UsageError(f"cutoff k must be a positive integer, got {k!r}", k=repr(k))


def _top_k(ranked: Sequence[str], k: int) -> list[str]:
    _check_k(k)
    return dedupe_ranking(ranked)[:k]


def dcg_gains(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains listed in rank order.

    DCG = sum_{i=1..n} gain_i / log2(i + 1)  (Jarvelin & Kekalainen 2002, "Cumulated
    gain-based evaluation of IR techniques", TOIS 20(4); the form used by trec_eval's
    ``ndcg_cut`` with gain = relevance grade).
    """
    if len(gains) == 0:
        return 0.0
    g = np.asarray(gains, dtype=np.float64)
    discounts = np.log2(np.arange(2, g.size + 2, dtype=np.float64))
    return float(np.sum(g / discounts))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Normalised DCG at cutoff k with graded (linear) gains, as trec_eval ``ndcg_cut.k``.

    nDCG@k = DCG@k / IDCG@k, where DCG@k sums ``max(rel, 0) / log2(rank + 1)`` over the
    first k (deduplicated) retrieved documents, and IDCG@k is the DCG of the ideal
    ranking built from ``qrels``: all relevant grades sorted descending, cut at k.
    Returns 0.0 when there is no relevant document (IDCG = 0). Matches ranx's
    ``ndcg@k`` (Jarvelin form); ranx's ``ndcg_burges@k`` uses 2^rel - 1 instead.
    """
    top = _top_k(ranked, k)
    ideal = sorted((rel for rel in qrels.values() if rel > 0), reverse=True)[:k]
    idcg = dcg_gains(ideal)
    if idcg == 0.0:
        return 0.0
    gains = [max(qrels.get(doc, 0), 0) for doc in top]
    return dcg_gains(gains) / idcg


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Recall at k, as trec_eval ``recall.k``: relevant docs in the top k / all relevant docs.

    Returns 0.0 when ``qrels`` holds no relevant document.
    """
    relevant = relevant_ids(qrels)
    top = _top_k(ranked, k)
    if not relevant:
        return 0.0
    return sum(1 for doc in top if doc in relevant) / len(relevant)


def precision_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Precision at k, as trec_eval ``P.k``: relevant docs in the top k / k.

    The denominator is k even when fewer than k documents were retrieved (missing
    positions count as non-relevant), which is trec_eval's and ranx's convention.
    """
    relevant = relevant_ids(qrels)
    top = _top_k(ranked, k)
    return sum(1 for doc in top if doc in relevant) / k


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Reciprocal rank at k: 1 / rank of the first relevant document within the top k, else 0.

    The per-query term of MRR@k (Voorhees, TREC-8 QA track, 1999; MS MARCO's MRR@10);
    averaging it over queries with :func:`mean` gives MRR@k. Equals trec_eval's
    ``recip_rank`` on a run truncated to k, and ranx's ``mrr@k``.
    """
    relevant = relevant_ids(qrels)
    for rank, doc in enumerate(_top_k(ranked, k), start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def first_relevant_rank(ranked: Sequence[str], qrels: Mapping[str, int]) -> int | None:
    """1-based rank of the best-ranked relevant document in ``ranked`` (deduplicated), or None."""
    relevant = relevant_ids(qrels)
    for rank, doc in enumerate(dedupe_ranking(ranked), start=1):
        if doc in relevant:
            return rank
    return None


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean over queries (trec_eval's ``all`` line averages per-query scores).

    An empty input has no mean: it raises ``UsageError`` rather than returning 0 or NaN,
    so that "no query was evaluated" can never pass for a score.
    """
    vals = [float(v) for v in values]
    if not vals:
        raise UsageError("mean of no values: no query was evaluated")
    return math.fsum(vals) / len(vals)


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between order statistics.

    This is numpy's default method ("linear", Hyndman & Fan 1996 definition 7), used for
    latency p50/p95. An empty input raises ``UsageError``.
    """
    vals = np.asarray(list(values), dtype=np.float64)
    if vals.size == 0:
        raise UsageError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise UsageError(f"percentile must be within 0..100, got {q!r}")
    return float(np.percentile(vals, q))
