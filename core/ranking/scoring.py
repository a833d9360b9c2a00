"""Pure ranking math: one function per formula, explicit dtypes, no I/O.

Each function cites where its formula comes from and is tested on a hand-computed case.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping, Sequence

import numpy as np


def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene/BM25+ style non-negative idf: log(1 + (N - df + 0.5) / (df + 0.5)).

    Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond" (2009),
    eq. 3.3, with the +1 inside the log that Lucene uses so idf never goes negative.
    """
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)


def bm25f_field_factors(field_len: np.ndarray, avg_len: np.ndarray, weights: np.ndarray, b: np.ndarray) -> np.ndarray:
    """BM25F per-field factor w_f / (1 - b_f + b_f * len_f / avglen_f) of each document.

    Robertson, Zaragoza & Taylor, "Simple BM25 extension to multiple weighted fields" (CIKM 2004).
    ``field_len`` is [docs, fields]; ``avg_len``, ``weights``, ``b`` are [fields].
    """
    avg = np.where(avg_len > 0, avg_len, 1.0)
    norm = 1.0 - b + b * (field_len / avg)
    return weights / norm


def bm25f_combine(tf: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """BM25F combined term frequency sum_f tf_f * factor_f; ``tf`` and ``factors`` are [postings, fields]."""
    out = np.zeros(tf.shape[0], dtype=np.float32)
    for f in range(tf.shape[1]):  # field by field, left to right: faster than sum(axis=1) over a few columns
        out += tf[:, f].astype(np.float32) * factors[:, f]
    return out


def bm25_saturate(pseudo_tf: np.ndarray, idf: np.ndarray, k1: float) -> np.ndarray:
    """Per-posting BM25 weight: idf * tf / (k1 + tf) (the (k1+1) factor is a constant and dropped)."""
    return (idf * pseudo_tf / (k1 + pseudo_tf)).astype(np.float32)


def tfidf_weights(tf_total: np.ndarray, idf: np.ndarray) -> np.ndarray:
    """Sublinear TF-IDF weight (1 + ln tf) * idf (Manning et al., IR book, section 6.4.1)."""
    tf = tf_total.astype(np.float32)
    return np.where(tf > 0, (1.0 + np.log(np.maximum(tf, 1.0))) * idf, 0.0).astype(np.float32)


def tfidf_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Smoothed idf ln((1 + N) / (1 + df)) + 1 (as scikit-learn's smooth_idf)."""
    return (np.log((1.0 + n_docs) / (1.0 + np.asarray(df, dtype=np.float64))) + 1.0).astype(np.float32)


def chunk_query_weights(
    qtf: np.ndarray, idf: np.ndarray, idf_power: float, term_weight: np.ndarray | None
) -> np.ndarray:
    """The query side of `vector`, L2-normalised: ``(1 + ln qtf) * idf**idf_power * term_weight``.

    The stored chunk numbers hold no idf (they depend on the chunk alone), so the query carries all
    of it; a power above 1 favours rare terms more than BM25's single idf does.
    """
    q = tfidf_weights(qtf, idf.astype(np.float32) ** np.float32(idf_power))
    if term_weight is not None:
        q = q * term_weight
    return (q / np.float32(float(np.linalg.norm(q)) or 1.0)).astype(np.float32)


def chunk_length_factors(lengths: np.ndarray, k1: float, b: float, avg: float | None = None) -> np.ndarray:
    """BM25's length factor ``k1 * (1 - b + b * len / avglen)`` of each chunk (float32), ``avglen``
    the mean length of the non-empty chunks (Robertson & Zaragoza 2009, eq. 3.15; ``avg`` when given:
    a restricted caller's, over its visible chunks); an empty chunk (no postings) gets ``k1``. The
    mean is a sum and a count, so it can be kept over segments and classes."""
    lengths = np.asarray(lengths, dtype=np.float64)
    nonzero = lengths > 0
    if avg is None:
        avg = float(lengths[nonzero].mean()) if nonzero.any() else 1.0
    return np.where(nonzero, k1 * (1.0 - b + b * lengths / avg), k1).astype(np.float32)


def bm25_chunk_scores(
    rows: np.ndarray, tf: np.ndarray, factors: np.ndarray, query: np.ndarray, k1: float, n_rows: int
) -> np.ndarray:
    """Per row (chunk), float64: ``sum(query * tf (k1 + 1) / (tf + factor))`` over its gathered postings.

    ``rows``, ``tf``, ``factors`` (the posting's chunk's ``chunk_length_factors``) and ``query`` (the
    weight of the posting's query term) are per posting: BM25's saturated tf, computed per query from
    the stored raw tf, times the query's idf-weighted term weight.
    """
    tf = np.asarray(tf, dtype=np.float32)
    saturated = tf * np.float32(k1 + 1.0) / (tf + factors)
    return np.bincount(rows, weights=saturated * query, minlength=n_rows)


def row_norms(rows: np.ndarray, weights: np.ndarray, n_rows: int, block: int = 1 << 20) -> np.ndarray:
    """L2 norm of each row (document) of postings: ``rows[i]`` owns ``weights[i]`` (0 for an empty row).

    Works in blocks of ``block`` postings so temporary memory stays bounded on large indexes.
    """
    sq = np.zeros(n_rows, dtype=np.float64)
    for start in range(0, weights.shape[0], block):
        w = weights[start : start + block].astype(np.float64)
        sq += np.bincount(rows[start : start + block], weights=w * w, minlength=n_rows)
    return np.sqrt(sq)


def pivoted_lengths(norms: np.ndarray, slope: float) -> np.ndarray:
    """Pivoted length normalisation (Singhal, Buckley & Mitra, SIGIR 1996): ``(1 - slope) * pivot
    + slope * norm`` with the pivot = the mean norm of the non-empty rows. Slope 1 is plain
    cosine; a smaller slope penalises long rows less. Empty rows get 1 (they have no postings)."""
    nonzero = norms > 0
    pivot = float(norms[nonzero].mean()) if nonzero.any() else 1.0
    out = (1.0 - slope) * pivot + slope * norms
    return np.where(nonzero, out, 1.0)


def rrf_fuse(
    rankings: Sequence[Sequence[int]], k: float = 60.0, weights: Sequence[float] | None = None
) -> dict[int, float]:
    """Reciprocal rank fusion: score(d) = sum_i w_i / (k + rank_i(d)), ranks starting at 1.

    Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
    rank learning methods" (SIGIR 2009), k = 60.
    """
    out: dict[int, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else float(weights[i])
        for rank, doc in enumerate(ranking, start=1):
            out[doc] = out.get(doc, 0.0) + w / (k + rank)
    return out


def coverage(matched_idf: np.ndarray, total_idf: float) -> np.ndarray:
    """Share of the query's idf mass a document matches, in [0, 1]."""
    if total_idf <= 0:
        return np.zeros_like(matched_idf, dtype=np.float32)
    return np.clip(matched_idf / total_idf, 0.0, 1.0).astype(np.float32)


def coverage_bonus(matched_idf: np.ndarray, total_idf: float, weight: float) -> np.ndarray:
    """``weight * coverage**2`` (float32, as the ranking has always summed it): the share of the best score a document gains for
    matching the query's idf mass (whole body, or title and headings).

    Squared so that matching most of the query pays and matching a little pays almost
    nothing (the heading bonus of docs/architecture.md, "Ranking"). Multiplied by the best
    BM25F score of the query by the caller.
    """
    return weight * coverage(matched_idf, total_idf) ** 2


def identifier_share(base_share: float, coverage: float, power: float) -> float:
    """Share of the best score an identifier phrase match adds: ``s + (1 - s) * c**power``.

    ``coverage`` is the share of the query's words that identifiers make up: a query that is
    only an identifier adds the whole best score (``c = 1``); one identifier in a sentence adds
    about ``base_share``.
    """
    return base_share + (1.0 - base_share) * coverage**power


def unit_cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Cosine of each row of an L2-normalised float32 matrix with ``query`` (normalised here).

    ``matrix @ q / max(|q|, 1e-12)`` in float32: exact maximum inner product search over unit
    rows, as FAISS ``IndexFlatIP`` computes it.
    """
    q = query.astype(np.float32) / np.float32(max(float(np.linalg.norm(query)), 1e-12))
    return matrix @ q


def best_row_per_group(
    scores: np.ndarray,
    rows: np.ndarray,
    groups: np.ndarray,
    k: int,
    tie: Callable[[np.ndarray], np.ndarray] | None = None,
) -> list[int]:
    """Rows (among ``rows``) of the top ``k`` groups by their best row score; equal scores by
    ``tie(groups)`` (an int per group: where its note's path sorts), then by row index.

    One row per group (per note: its best chunk). Grows a partial selection (with every row tied with
    the last one taken) until it holds ``k`` distinct groups (or all rows), so the cost stays O(N) for
    the usual k.
    """
    take = min(len(rows), max(4 * k, 64))
    while True:
        sub = scores[rows]
        part = np.arange(len(rows))
        if take < len(rows):
            part = np.flatnonzero(sub >= sub[np.argpartition(-sub, take - 1)[take - 1]])
        keys = [rows[part], -sub[part]] if tie is None else [rows[part], tie(groups[rows[part]]), -sub[part]]
        order = part[np.lexsort(keys)]
        chosen: list[int] = []
        seen: set[int] = set()
        for i in order:
            gid = int(groups[rows[i]])
            if gid not in seen:
                seen.add(gid)
                chosen.append(int(rows[i]))
                if len(chosen) == k:
                    return chosen
        if part.shape[0] >= len(rows):
            return chosen
        take = min(len(rows), max(take * 4, part.shape[0] + 1))


def name_match(in_name: np.ndarray, n_query_terms: float, matched_idf: np.ndarray, name_idf: np.ndarray) -> np.ndarray:
    """Known-item name match of each document: 0 unless its name field holds all ``n_query_terms``
    query terms (``in_name`` of them), then the idf-weighted share of the name the query covers,
    squared: (idf of the matched name terms / idf of all its name terms)^2, at most 1.

    A weighted Jaccard-style overlap restricted to names that contain the whole query (Jaccard,
    1901; weighted by idf like every coverage share of the ranking): 1 when the query is exactly
    the name, and a name word that nearly every note's name holds (``index`` of ``index.md``, a
    vault-wide file-name prefix) neither lowers nor raises the share.
    """
    matched = np.asarray(matched_idf, dtype=np.float64)
    total = np.asarray(name_idf, dtype=np.float64)
    share = np.minimum(matched / np.where(total > 0, total, 1.0), 1.0)
    held = np.asarray(in_name, dtype=np.float64) >= n_query_terms
    return np.where(held & (matched > 0), share**2, 0.0)


def name_bonus(match: np.ndarray, weight: float, floor: float) -> np.ndarray:
    """Share of the best score a document gains for its name match (``name_match``):
    ``weight * match``, and at least ``floor`` for every document whose name holds the query.

    The floor is the heading bonus (``RankParams.heading_coverage_weight``): a note whose name
    holds every query word is at least as well matched as one whose headings hold them. Without
    it, a query that is part of a long name (a CJK title substring, one word of a title) earned
    its note ``weight * share^2``, far below what any note with the words in a heading earned.
    """
    m = np.asarray(match, dtype=np.float64)
    return np.where(m > 0, np.maximum(weight * m, floor), 0.0)


def top_k(scores: np.ndarray, k: int, candidates: np.ndarray | None = None) -> np.ndarray:
    """Indices of the k best scores, best first (ties broken by index for determinism)."""
    idx = np.arange(scores.shape[0]) if candidates is None else candidates
    if idx.size == 0 or k <= 0:
        return np.empty(0, dtype=np.int64)
    vals = scores[idx]
    if idx.size > k:
        kth = vals[np.argpartition(-vals, k - 1)[k - 1]]
        keep = vals >= kth  # every candidate tied with the k-th, so ties break by index below
        idx, vals = idx[keep], vals[keep]
    order = np.lexsort((idx, -vals))[:k]
    return idx[order].astype(np.int64)


def graph_expand(
    anchors: Mapping[int, float],
    neighbors: Mapping[int, Sequence[tuple[int, str, str]]],
    hops: int = 2,
    decay: float = 0.5,
    allowed: Container[int] | None = None,
    tie: Callable[[int], int] | None = None,
) -> dict[int, tuple[float, int, str, str, int]]:
    """Spread anchor scores through links: a node reached in h hops from anchor a gets
    score(a) * decay**h; it keeps the best path found. Breadth-first, so cycles end.

    ``neighbors[n]`` lists (other node, edge kind, direction 'out'|'in'). Returns, for each
    non-anchor node reached, (score, via node, edge kind, direction, hops). Nodes not in
    ``allowed`` (when given) are neither returned nor walked through. Of paths with equal scores the
    fewest hops win, then the via node first in ``tie(via)`` (default: its id; the modes: its path),
    then the edge kind and direction: never the order the edges are listed in.
    """
    order = tie or (lambda nid: nid)

    def rank(score: float, via: int, kind: str, direction: str, hop: int) -> tuple[float, int, int, str, str]:
        return (-score, hop, order(via), kind, direction)

    best: dict[int, tuple[float, int, str, str, int]] = {}
    frontier = dict(anchors)
    seen = set(anchors)
    for hop in range(1, hops + 1):
        nxt: dict[int, float] = {}
        for node, score in frontier.items():
            for other, kind, direction in neighbors.get(node, ()):
                if other in anchors or (allowed is not None and other not in allowed):
                    continue
                s = score * decay
                found = best.get(other)
                if found is None or rank(s, node, kind, direction, hop) < rank(*found):
                    best[other] = (s, node, kind, direction, hop)
                if other not in seen and s > nxt.get(other, 0.0):
                    nxt[other] = s
        seen.update(nxt)
        frontier = nxt
    return best


def volatility_age_decay(age_days: np.ndarray, half_life_days: np.ndarray, floor: float) -> np.ndarray:
    """Multiplicative down-weight of each note by its age: floor + (1 - floor) * 2^(-age / half_life).

    Exponential time decay as in Li & Croft, "Time-based language models" (CIKM 2003), whose
    recency prior is exp(-lambda * age), written with a half-life (lambda = ln 2 / half_life) and
    floored so that an old note is demoted, never removed. ``half_life_days`` is per note (from its
    ``volatility``); ``inf`` means no decay (factor 1), and a negative age (a date in the future)
    counts as 0.
    """
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    half = np.asarray(half_life_days, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = np.where(np.isinf(half), 1.0, np.exp2(-age / half))
    return (floor + (1.0 - floor) * decay).astype(np.float64)
