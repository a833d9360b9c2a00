"""core.ranking.scoring's `vector` math (issue 29): BM25 over chunks from raw counts and lengths, idf on
the query side; hand-computed cases and a property against a straightforward dense recompute."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.ranking import scoring
from core.ranking.sparse import gather_postings

PROPS = settings(max_examples=100, deadline=None)


def test_chunk_query_weights_hand_computed():
    qtf = np.array([1.0, 2.0], np.float32)
    idf = np.array([4.0, 1.0], np.float32)
    # raw: 1 * 4**1.5 = 8 and (1 + ln 2) * 1**1.5; then L2-normalised
    raw = np.array([8.0, 1 + math.log(2)])
    q = scoring.chunk_query_weights(qtf, idf, 1.5, None)
    assert q.dtype == np.float32
    assert q.tolist() == pytest.approx((raw / np.linalg.norm(raw)).tolist(), rel=1e-6)
    weighted = scoring.chunk_query_weights(qtf, idf, 1, np.array([0.5, 1.0], np.float32))
    raw1 = np.array([4.0 * 0.5, 1 + math.log(2)])  # idf to the first power, times the term weights
    assert weighted.tolist() == pytest.approx((raw1 / np.linalg.norm(raw1)).tolist(), rel=1e-6)
    assert scoring.chunk_query_weights(np.zeros(0, np.float32), np.zeros(0, np.float32), 2, None).size == 0


def test_chunk_length_factors_hand_computed():
    # mean of the non-empty chunks: (2 + 6) / 2 = 4; the empty chunk gets k1
    got = scoring.chunk_length_factors(np.array([2, 6, 0]), k1=1.2, b=0.75)
    assert got.dtype == np.float32
    assert got.tolist() == pytest.approx([1.2 * (0.25 + 0.75 * 0.5), 1.2 * (0.25 + 0.75 * 1.5), 1.2], rel=1e-6)
    assert scoring.chunk_length_factors(np.array([2, 6]), k1=1.2, b=0.0).tolist() == pytest.approx([1.2, 1.2])


def test_bm25_chunk_scores_hand_computed():
    # chunk 0 holds a (tf 1) and b (tf 3), factor 1; chunk 1 holds b (tf 1), factor 2; query weights a .6, b .8
    rows = np.array([0, 0, 1])
    tf = np.array([1.0, 3.0, 1.0], np.float32)
    factors = np.array([1.0, 1.0, 2.0], np.float32)  # per posting: its chunk's
    query = np.array([0.6, 0.8, 0.8], np.float32)  # per posting: its term's
    got = scoring.bm25_chunk_scores(rows, tf, factors, query, 1.0, 3)
    assert got.dtype == np.float64
    # tf (k1 + 1) / (tf + factor), k1 = 1: 2 * 1 / 2 = 1, 2 * 3 / 4 = 1.5, 2 * 1 / 3
    assert got.tolist() == pytest.approx([0.6 * 1 + 0.8 * 1.5, 0.8 * 2 / 3, 0.0], rel=1e-6)


@st.composite
def _collections(draw):
    n_chunks, n_terms = draw(st.integers(1, 8)), draw(st.integers(1, 6))
    counts = st.sampled_from([0, 0, 1, 2, 3, 8, 15])  # stored counts, in CHUNK_UNIT = 2 units
    tf = np.array(draw(st.lists(counts, min_size=n_chunks * n_terms, max_size=n_chunks * n_terms)))
    tf = tf.reshape(n_chunks, n_terms)
    df = np.array(draw(st.lists(st.integers(0, 20), min_size=n_terms, max_size=n_terms)))
    query = draw(st.lists(st.integers(0, n_terms - 1), min_size=1, max_size=5, unique=True))
    qtf = draw(st.lists(st.integers(1, 3), min_size=len(query), max_size=len(query)))
    weight = draw(st.lists(st.floats(0.1, 2.0), min_size=len(query), max_size=len(query)))
    power = draw(st.sampled_from([1.0, 1.5, 2.0]))
    return tf, df, np.array(query), np.array(qtf, np.float32), np.array(weight, np.float32), power


@PROPS
@given(_collections(), st.floats(0.5, 2.0), st.floats(0.0, 1.0))
def test_term_major_scores_equal_a_dense_recompute(collection, k1, b):
    """Gathering a query's postings from term-major arrays of raw counts and scoring them gives, per
    chunk, the BM25 matrix (computed densely from the count matrix) times the idf-weighted query."""
    counts, df, query, qtf, weight, power = collection
    n_docs, unit = 25, 2
    # dense: saturate every cell with its chunk's length factor; the query carries idf**power, normalised
    tf = counts / unit
    lengths = counts.sum(axis=1)
    avg = lengths[lengths > 0].mean() if (lengths > 0).any() else 1.0
    k = k1 * (1 - b + b * lengths / avg)
    # a cell without the term scores 0 (an empty chunk with b = 1 has k = 0: 0/0 without the where)
    matrix = np.divide(tf * (k1 + 1), tf + k[:, None], out=np.zeros_like(tf), where=tf > 0)
    idf = np.log((1 + n_docs) / (1 + df)) + 1
    q = np.zeros(tf.shape[1])
    q[query] = (1 + np.log(qtf)) * idf[query] ** power * weight
    expected = matrix @ (q / np.linalg.norm(q))
    # term-major, as chunk_vectors stores it: postings of term t at indptr[t]:indptr[t + 1], chunks ascending
    term_of, chunk_of = np.nonzero(counts.T > 0)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(term_of, minlength=tf.shape[1]))])
    stored_tf = counts[chunk_of, term_of].astype(np.uint16)
    factors = scoring.chunk_length_factors(lengths, k1, b)
    qw = scoring.chunk_query_weights(qtf, scoring.tfidf_idf(df, n_docs)[query], power, weight)
    pos, owner = gather_postings(indptr, query)
    rows = chunk_of[pos]
    got = scoring.bm25_chunk_scores(rows, stored_tf[pos] / np.float32(unit), factors[rows], qw[owner], k1, len(counts))
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-6)
