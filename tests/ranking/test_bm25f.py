"""BM25F computed at query time from raw per-field counts (core.ranking.bm25f, SparseIndex.posting_weights):
a hand-computed case, the side-array encoding round trip, and a property against a dense recompute."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import IntegrityError
from core.index.tables.terms import DDL_NOTE_TERMS, DDL_TERMS, insert_note_terms
from core.ranking import bm25f, scoring
from core.ranking.sparse import RankParams, bm25_scores, compute_sparse

BM25F_ONLY = RankParams(heading_coverage_weight=0.0, title_heading_coverage_weight=0.0, name_match_weight=0.0)


def corpus_db(tf: np.ndarray) -> sqlite3.Connection:
    """An in-memory database holding the term vectors of ``tf`` [notes, terms, fields] (term i is ``t{i}``)."""
    conn = sqlite3.connect(":memory:")
    conn.execute(DDL_TERMS)
    conn.execute(DDL_NOTE_TERMS)
    conn.executemany("INSERT INTO terms(id, term) VALUES (?, ?)", [(i, f"t{i}") for i in range(tf.shape[1])])
    rows = []
    for d in range(tf.shape[0]):
        held = np.flatnonzero(tf[d].sum(axis=1))
        rows.append((d + 1, held.astype("<i4").tobytes(), tf[d, held].astype("<u2").tobytes()))
    insert_note_terms(conn, rows)
    # the notes' classes and paths (rows are in path order: here the ids' order)
    conn.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, rel_path TEXT NOT NULL, classification TEXT)")
    conn.executemany(
        "INSERT INTO notes(id, rel_path) VALUES (?, ?)", [(d + 1, f"n{d + 1:06d}.md") for d in range(tf.shape[0])]
    )
    return conn


def test_bm25f_at_query_time_equals_the_hand_computed_weight():
    """Note A: title "soil", body "soil soil worms"; note B: body "worms". N = 2, df(soil) = 1.
    Averages: title 1/2, body 4/2 (empty fields average 0: factor w_f). A's factors: title
    2 / (0.5 + 0.5 * 1 / 0.5) = 4/3, body 1 / (0.25 + 0.75 * 3 / 2) = 8/11, so its combined tf
    for soil is 1 * 4/3 + 2 * 8/11 = 92/33 and its weight ln(1 + 1.5/1.5) * x / (0.9 + x)."""
    tf = np.zeros((2, 2, 5), dtype=np.uint16)  # terms: soil, worms; fields: title .. body
    tf[0, 0] = (1, 0, 0, 0, 2)
    tf[0, 1] = (0, 0, 0, 0, 1)
    tf[1, 1] = (0, 0, 0, 0, 1)
    index = compute_sparse(corpus_db(tf), BM25F_ONLY)
    assert index.field_len.tolist() == [[1, 0, 0, 0, 3], [0, 0, 0, 0, 1]]
    x = 92 / 33
    expected = math.log(2.0) * x / (0.9 + x)
    scores, matched = bm25_scores(index, ["t0"])
    assert scores.tolist() == pytest.approx([expected, 0.0], rel=1e-6) and matched.tolist() == [1, 0]
    # worms: df 2, idf ln(1 + 0.5/2.5); A's body factor 8/11, B's 1 / (0.25 + 0.75 / 2) = 8/5
    idf = math.log(1.2)
    want = [idf * (8 / 11) / (0.9 + 8 / 11), idf * (8 / 5) / (0.9 + 8 / 5)]
    assert bm25_scores(index, ["t1"])[0].tolist() == pytest.approx(want, rel=1e-6)


def test_average_lengths_are_a_float32_mean_of_exact_sums():
    lengths = np.array([[3, 0], [4, 0], [6, 0]], dtype=np.uint32)
    avg = bm25f.average_lengths(lengths.sum(axis=0, dtype=np.int64), 3)
    assert avg.dtype == np.float32 and avg.tolist() == [np.float32(13) / np.float32(3), 0.0]
    # below 2**24 the sum is exact in float32: the float32 mean of the lengths, the numbers ranked with before
    assert np.array_equal(avg, lengths.astype(np.float32).mean(axis=0))
    assert bm25f.average_lengths(np.zeros(2, dtype=np.int64), 0).tolist() == [1.0, 1.0]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(*[st.sampled_from([0, 0, 0, 1, 2, 300, 65535])] * 5), max_size=60))
def test_the_side_array_gives_every_count_back(rows):
    tf = np.array(rows, dtype=np.uint16).reshape(-1, 5)
    mask = bm25f.field_mask(tf)
    values = bm25f.side_values(tf)
    assert values.shape[0] == int(bm25f.side_counts(mask).sum())
    assert np.array_equal(bm25f.posting_tf(mask, tf[:, bm25f.BODY], values), tf)
    with pytest.raises(IntegrityError):
        bm25f.posting_tf(mask, tf[:, bm25f.BODY], np.append(values, 1).astype(np.uint16))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(*[st.sampled_from([0, 0, 0, 1, 2, 7, 300])] * 5), min_size=1, max_size=60), st.integers(0, 99)
)
def test_posting_weights_are_bit_for_bit_the_dense_combination(rows, seed):
    """The sparse sum (side fields for the postings that hold them, the body last) gives the float32
    numbers of ``scoring.bm25f_combine`` over the dense counts, so rankings stay as they were."""
    tf = np.array(rows, dtype=np.uint16).reshape(-1, 5)
    rng = np.random.default_rng(seed)
    docs = rng.integers(0, 4, tf.shape[0])
    factors = rng.random((4, 5)).astype(np.float32) * 3
    idf = rng.random(tf.shape[0]).astype(np.float32) * 5
    mask, values = bm25f.field_mask(tf), bm25f.side_values(tf)
    got = bm25f.posting_weights(mask, tf[:, bm25f.BODY], values, np.ascontiguousarray(factors.T), docs, idf, 0.9)
    want = scoring.bm25_saturate(scoring.bm25f_combine(tf, factors[docs]), idf, 0.9)
    assert got.dtype == np.float32 and np.array_equal(got, want)


def dense_bm25f(tf: np.ndarray, query: list[int], p: RankParams) -> np.ndarray:
    """BM25F of every note for the distinct terms ``query``, straight from the dense counts, in float64."""
    n = tf.shape[0]
    lengths = tf.sum(axis=1).astype(np.float64)  # [notes, fields]
    avg = lengths.mean(axis=0)
    avg = np.where(avg > 0, avg, 1.0)
    factors = np.asarray(p.weights) / (1 - np.asarray(p.b) + np.asarray(p.b) * lengths / avg)
    scores = np.zeros(n)
    for t in set(query):
        df = int((tf[:, t].sum(axis=1) > 0).sum())
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        x = (tf[:, t].astype(np.float64) * factors).sum(axis=1)
        scores += idf * x / (p.k1 + x)
    return scores


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 9),
    st.integers(0, 2**31),
    st.lists(st.integers(0, 8), min_size=1, max_size=4),
    st.sampled_from([BM25F_ONLY, RankParams(k1=1.7, b=(0.1, 0.9, 0.0, 0.95, 0.4), name_match_weight=0.0)]),
)
def test_query_time_bm25f_equals_a_dense_recompute(n_notes, n_terms, seed, query, params):
    rng = np.random.default_rng(seed)
    tf = rng.integers(0, 4, (n_notes, n_terms, 5)) * (rng.random((n_notes, n_terms, 5)) < 0.3)
    params = RankParams(
        k1=params.k1, b=params.b, heading_coverage_weight=0.0, title_heading_coverage_weight=0.0, name_match_weight=0.0
    )
    index = compute_sparse(corpus_db(tf.astype(np.uint16)), params)
    terms = [f"t{t}" for t in query if t < n_terms]
    scores, _ = bm25_scores(index, terms)
    expected = dense_bm25f(tf, [t for t in query if t < n_terms and tf[:, t].any()], params)
    assert scores.astype(np.float64) == pytest.approx(expected, rel=2e-5, abs=1e-6)
