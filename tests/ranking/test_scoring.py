"""core.ranking.scoring: each formula on a hand-computed example, and the fusion/graph math as properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.ranking import scoring

PROPS = settings(max_examples=100, deadline=None)


# --- hand-computed examples ---------------------------------------------------------------------------


def test_bm25_idf_hand_computed_and_never_negative():
    idf = scoring.bm25_idf(np.array([1, 2, 4]), n_docs=4)
    assert idf.dtype == np.float32
    # log(1 + (4 - 1 + .5) / 1.5) = log(10/3); log(1 + 2.5 / 2.5) = log 2; log(1 + .5 / 4.5) = log(10/9)
    assert idf == pytest.approx([math.log(10 / 3), math.log(2), math.log(10 / 9)], rel=1e-6)
    assert (idf > 0).all()  # a term in every document still weighs something, never less than zero


def test_bm25_idf_decreases_with_document_frequency():
    idf = scoring.bm25_idf(np.arange(1, 101), n_docs=100)
    assert (np.diff(idf) < 0).all()


def test_bm25f_combined_tf_hand_computed():
    tf = np.array([[1, 2]], dtype=np.uint16)
    field_len = np.array([[2.0, 4.0]], dtype=np.float32)
    avg = np.array([2.0, 2.0], dtype=np.float32)
    weights = np.array([2.0, 1.0], dtype=np.float32)
    b = np.array([0.5, 1.0], dtype=np.float32)
    # field 0: 2 * 1 / (1 - .5 + .5 * 2/2) = 2; field 1: 1 * 2 / (1 - 1 + 1 * 4/2) = 1
    factors = scoring.bm25f_field_factors(field_len, avg, weights, b)
    assert factors.dtype == np.float32 and factors[0].tolist() == pytest.approx([2.0, 0.5])
    out = scoring.bm25f_combine(tf, factors)
    assert out.dtype == np.float32
    assert out.tolist() == pytest.approx([3.0])


def test_bm25f_empty_field_average_does_not_divide_by_zero():
    factors = scoring.bm25f_field_factors(
        np.array([[3.0, 0.0]], np.float32),
        np.array([3.0, 0.0], np.float32),
        np.ones(2, np.float32),
        np.array([0.75, 0.75], np.float32),
    )
    out = scoring.bm25f_combine(np.array([[1, 0]], np.uint16), factors)
    assert np.isfinite(out).all() and out.tolist() == pytest.approx([1.0])


def test_bm25_saturate_hand_computed_and_bounded_by_idf():
    out = scoring.bm25_saturate(np.array([3.0, 1e9], np.float32), np.array([2.0, 2.0], np.float32), k1=1.0)
    assert out.tolist() == pytest.approx([1.5, 2.0], rel=1e-6)  # 2 * 3 / (1 + 3); saturates at idf


def test_tfidf_idf_hand_computed():
    idf = scoring.tfidf_idf(np.array([0, 1, 3]), n_docs=3)
    assert idf.dtype == np.float32
    assert idf.tolist() == pytest.approx([math.log(4) + 1, math.log(2) + 1, 1.0], rel=1e-6)


def test_tfidf_weights_sublinear_and_zero_for_absent_terms():
    w = scoring.tfidf_weights(np.array([0, 1, 3]), np.array([2.0, 2.0, 2.0], np.float32))
    assert w.dtype == np.float32
    assert w.tolist() == pytest.approx([0.0, 2.0, (1 + math.log(3)) * 2], rel=1e-6)


def test_row_norms_hand_computed():
    rows = np.array([0, 0, 1, 2])
    norms = scoring.row_norms(rows, np.array([3.0, 4.0, 5.0, 0.0]), n_rows=4)
    assert norms.tolist() == pytest.approx([5.0, 5.0, 0.0, 0.0])  # rows 2 and 3 are empty


@PROPS
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0.01, 100.0)), min_size=1, max_size=40), st.integers(1, 1 << 4))
def test_row_norms_do_not_depend_on_the_block_size(postings, block):
    rows = np.array([r for r, _ in postings])
    weights = np.array([w for _, w in postings])
    expected = [math.sqrt(sum(w * w for r, w in postings if r == row)) for row in range(6)]
    assert scoring.row_norms(rows, weights, 6, block=block).tolist() == pytest.approx(expected, rel=1e-9)


def test_pivoted_lengths_hand_computed():
    norms = np.array([1.0, 3.0, 0.0])  # pivot = mean of the non-empty rows = 2
    assert scoring.pivoted_lengths(norms, 0.3).tolist() == pytest.approx([0.7 * 2 + 0.3, 0.7 * 2 + 0.9, 1.0])
    assert scoring.pivoted_lengths(norms, 1.0).tolist() == pytest.approx([1.0, 3.0, 1.0])  # plain cosine


@PROPS
@given(st.lists(st.floats(0.01, 1e4), min_size=1, max_size=30), st.floats(0.0, 1.0))
def test_pivoted_lengths_keep_the_mean_and_shrink_the_spread(norms, slope):
    arr = np.array(norms)
    out = scoring.pivoted_lengths(arr, slope)
    assert out.mean() == pytest.approx(arr.mean(), rel=1e-9)  # the pivot is a fixed point
    assert np.ptp(out) == pytest.approx(slope * np.ptp(arr), rel=1e-9, abs=1e-9)  # long rows penalised less


def test_coverage_hand_computed():
    assert scoring.coverage(np.array([0.0, 1.0, 3.0]), 2.0).tolist() == [0.0, 0.5, 1.0]
    assert scoring.coverage(np.array([1.0]), 0.0).tolist() == [0.0]


def test_unit_cosine_hand_computed_normalises_the_query():
    matrix = np.array([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.0]], dtype=np.float32)
    out = scoring.unit_cosine(matrix, np.array([3.0, 4.0], dtype=np.float32))  # q/|q| = (0.6, 0.8)
    assert out.dtype == np.float32 and out.tolist() == pytest.approx([0.6, 1.0, -0.6])
    assert scoring.unit_cosine(matrix, np.zeros(2, np.float32)).tolist() == [0.0, 0.0, 0.0]  # |q| = 0: no NaN


def test_coverage_bonus_hand_computed():
    out = scoring.coverage_bonus(np.array([0.0, 1.0, 2.0, 5.0]), 2.0, 0.5)
    assert out.dtype == np.float32 and out.tolist() == pytest.approx([0.0, 0.125, 0.5, 0.5])  # 0.5 * c**2
    assert scoring.coverage_bonus(np.array([1.0]), 0.0, 0.5).tolist() == [0.0]


def test_identifier_share_hand_computed():
    assert scoring.identifier_share(0.1, 1.0, 4) == pytest.approx(1.0)  # the query is the identifier
    assert scoring.identifier_share(0.1, 0.5, 4) == pytest.approx(0.1 + 0.9 / 16)
    assert scoring.identifier_share(0.1, 0.0, 4) == pytest.approx(0.1)


@PROPS
@given(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def test_identifier_share_grows_with_coverage_and_stays_in_base_to_one(base: float, c1: float, c2: float):
    lo, hi = sorted((c1, c2))
    a, b = scoring.identifier_share(base, lo, 4), scoring.identifier_share(base, hi, 4)
    assert base - 1e-12 <= a <= b + 1e-12 <= 1.0 + 2e-12


@PROPS
@given(st.lists(st.floats(0, 10), min_size=1, max_size=20), st.floats(0.01, 10), st.floats(0, 2))
def test_coverage_bonus_is_bounded_by_its_weight_and_monotone(matched: list[float], total: float, weight: float):
    arr = np.array(sorted(matched))
    out = scoring.coverage_bonus(arr, total, weight)
    assert np.all(out >= 0) and np.all(out <= weight * (1 + 1e-6))
    assert np.all(np.diff(out) >= -1e-6)


@PROPS
@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 10_000))
def test_best_row_per_group_equals_a_full_sort(n_rows: int, k: int, seed: int):
    rng = np.random.default_rng(seed)
    scores = rng.random(n_rows).astype(np.float32)
    groups = rng.integers(0, 8, n_rows).astype(np.int64)
    rows = np.flatnonzero(rng.random(n_rows) < 0.8)
    got = scoring.best_row_per_group(scores, rows, groups, k)
    ranked = sorted(rows.tolist(), key=lambda r: (-scores[r], r))
    want: list[int] = []
    for r in ranked:
        if int(groups[r]) not in {int(groups[w]) for w in want}:
            want.append(r)
    assert got == want[:k]


def test_best_row_per_group_picks_each_notes_best_row_and_grows_past_duplicates():
    scores = np.array([0.9, 0.8, 0.7, 0.95, 0.1, 0.5], dtype=np.float32)
    notes = np.array([1, 1, 1, 2, 3, 3], dtype=np.int64)
    rows = np.arange(6)
    assert scoring.best_row_per_group(scores, rows, notes, 3) == [3, 0, 5]
    assert scoring.best_row_per_group(scores, np.array([1, 2, 4]), notes, 5) == [1, 4]
    many = np.repeat(np.arange(100, dtype=np.int64), 50)  # 50 rows per note: forces regrowth
    s = np.random.default_rng(0).random(5000).astype(np.float32)
    got = scoring.best_row_per_group(s, np.arange(5000), many, 100)
    assert len({int(many[r]) for r in got}) == 100
    best = {n: s[many == n].max() for n in range(100)}
    assert [float(s[r]) for r in got] == sorted(best.values(), reverse=True)


def test_name_match_hand_computed():
    # 3 query words (idf 1, 2, 1: matched idf 4); names: exactly the query, the query + a word of idf 4,
    # the query + a word every note's name holds (idf 0: ``index`` of index.md), 2 of the 3 words, none
    out = scoring.name_match(
        np.array([3.0, 3.0, 3.0, 2.0, 0.0]),
        3,
        np.array([4.0, 4.0, 4.0, 3.0, 0.0]),
        np.array([4.0, 8.0, 4.0, 3.0, 0.0]),
    )
    assert out.tolist() == [1.0, 0.25, 1.0, 0.0, 0.0]


def test_name_bonus_hand_computed():
    # weight 2.5, floor 1.2 (the heading bonus): a partial name earns the floor, a close one its weight
    out = scoring.name_bonus(np.array([1.0, 0.64, 0.04, 0.0]), 2.5, 1.2)
    assert out.tolist() == pytest.approx([2.5, 1.6, 1.2, 0.0])


@PROPS
@given(
    st.lists(st.tuples(st.floats(0, 8), st.floats(0, 5), st.floats(0, 5)), min_size=1, max_size=20),
    st.floats(0.5, 8),
    st.floats(0, 5),
)
def test_name_match_is_a_squared_share_of_names_that_hold_the_query(rows, n_words: float, extra: float):
    """In [0, 1]; 0 unless the name holds every query word; one more name word never raises it."""
    in_name = np.array([r[0] for r in rows])
    matched = np.array([r[1] for r in rows])
    name = matched + np.array([r[2] for r in rows])  # the query's share of its name: matched / name
    out = scoring.name_match(in_name, n_words, matched, name)
    assert np.all((out >= 0) & (out <= 1))
    assert np.all(out[in_name < n_words] == 0)
    assert np.all(scoring.name_match(in_name, n_words, matched, name + extra) <= out + 1e-12)


@PROPS
@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.floats(0, 5), st.floats(0, 5))
def test_name_bonus_is_at_least_the_floor_for_every_held_name(match: list[float], weight: float, floor: float):
    m = np.array(match)
    out = scoring.name_bonus(m, weight, floor)
    assert np.all(out[m > 0] >= floor) and np.all(out[m > 0] >= weight * m[m > 0])
    assert np.all(out[m == 0] == 0)
    order = np.argsort(m, kind="stable")
    assert np.all(np.diff(out[order]) >= 0)  # monotone in the match


def test_rrf_hand_computed():
    fused = scoring.rrf_fuse([[1, 2, 3], [3, 1]], k=60)
    assert fused == pytest.approx({1: 1 / 61 + 1 / 62, 2: 1 / 62, 3: 1 / 63 + 1 / 61})


def test_rrf_weighted_hand_computed():
    fused = scoring.rrf_fuse([[1, 2], [2]], k=10, weights=(1.0, 0.2))
    assert fused == pytest.approx({1: 1 / 11, 2: 1 / 12 + 0.2 / 11})


def test_top_k_hand_computed_ties_by_index():
    scores = np.array([1.0, 3.0, 3.0, 2.0, 3.0], dtype=np.float32)
    assert scoring.top_k(scores, 2).tolist() == [1, 2]
    assert scoring.top_k(scores, 10).tolist() == [1, 2, 4, 3, 0]
    assert scoring.top_k(scores, 5, np.array([0, 3])).tolist() == [3, 0]
    assert scoring.top_k(scores, 0).tolist() == []
    assert scoring.top_k(scores, 3, np.array([], dtype=np.int64)).tolist() == []


def test_top_k_tie_at_the_cut_is_broken_by_index():
    scores = np.array([1.0, 0.0, 1.0, 1.0, 2.0, 2.0, 0.0, 2.0, 1.0], dtype=np.float32)
    assert scoring.top_k(scores, 1).tolist() == [4]


@PROPS
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=1, max_size=30), st.integers(1, 40))
def test_top_k_matches_a_stable_sort_when_k_covers_all(values, k):
    """With k >= n no partition happens: the order is score desc, index asc."""
    scores = np.array(values, dtype=np.float32)
    k = max(k, len(values))
    assert scoring.top_k(scores, k).tolist() == sorted(range(len(values)), key=lambda i: (-values[i], i))


@PROPS
@given(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=1, max_size=30), st.integers(1, 40))
def test_top_k_returns_the_best_scores_in_order(values, k):
    scores = np.array(values, dtype=np.float32)
    got = scoring.top_k(scores, k).tolist()
    assert len(got) == min(k, len(values)) and len(set(got)) == len(got)
    assert [values[i] for i in got] == sorted(values, reverse=True)[: len(got)]


# --- RRF properties -----------------------------------------------------------------------------------


def _rankings(max_lists: int = 4):
    ranking = st.lists(st.integers(0, 15), max_size=12, unique=True)
    return st.lists(ranking, min_size=1, max_size=max_lists)


@PROPS
@given(_rankings(), st.floats(0.01, 500.0), st.randoms(use_true_random=False))
def test_rrf_is_invariant_to_the_order_of_the_lists(rankings, k, rnd):
    weights = [0.1 + i for i in range(len(rankings))]
    order = list(range(len(rankings)))
    rnd.shuffle(order)
    a = scoring.rrf_fuse(rankings, k=k, weights=weights)
    b = scoring.rrf_fuse([rankings[i] for i in order], k=k, weights=[weights[i] for i in order])
    assert a.keys() == b.keys()
    assert all(math.isclose(a[d], b[d], rel_tol=1e-12) for d in a)


@PROPS
@given(_rankings(), st.floats(0.01, 500.0))
def test_rrf_scores_are_positive_bounded_and_cover_exactly_the_ranked_docs(rankings, k):
    fused = scoring.rrf_fuse(rankings, k=k)
    assert set(fused) == {d for r in rankings for d in r}
    assert all(0 < s <= len(rankings) / (k + 1) + 1e-12 for s in fused.values())


@PROPS
@given(st.lists(st.integers(0, 50), min_size=2, max_size=20, unique=True), st.floats(0.01, 500.0))
def test_rrf_single_list_is_strictly_decreasing_in_rank(ranking, k):
    fused = scoring.rrf_fuse([ranking], k=k)
    scores = [fused[d] for d in ranking]
    assert all(a > b for a, b in zip(scores, scores[1:]))


@PROPS
@given(_rankings(), st.floats(0.01, 500.0), st.data())
def test_rrf_moving_a_doc_up_raises_it_and_lowers_the_one_it_passes(rankings, k, data):
    i = data.draw(st.integers(0, len(rankings) - 1))
    ranking = rankings[i]
    if len(ranking) < 2:
        return
    pos = data.draw(st.integers(1, len(ranking) - 1))
    up, down = ranking[pos], ranking[pos - 1]
    swapped = list(ranking)
    swapped[pos - 1], swapped[pos] = up, down
    before = scoring.rrf_fuse(rankings, k=k)
    after = scoring.rrf_fuse([*rankings[:i], swapped, *rankings[i + 1 :]], k=k)
    assert after[up] > before[up] and after[down] < before[down]
    assert all(math.isclose(after[d], before[d]) for d in before if d not in (up, down))


@PROPS
@given(_rankings(), st.floats(0.01, 100.0), st.floats(0.01, 100.0))
def test_rrf_a_larger_k_flattens_every_score(rankings, k, extra):
    small, large = scoring.rrf_fuse(rankings, k=k), scoring.rrf_fuse(rankings, k=k + extra)
    assert all(large[d] < small[d] for d in small)


# --- graph expansion ----------------------------------------------------------------------------------


def _neighbors(edges: list[tuple[int, int, str]]) -> dict[int, list[tuple[int, str, str]]]:
    """Both directions, as retrieval.run_graph builds them."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    for src, dst, kind in edges:
        out.setdefault(src, []).append((dst, kind, "out"))
        out.setdefault(dst, []).append((src, kind, "in"))
    return out


def test_graph_expand_chain_decays_per_hop_and_stops_at_hops():
    nb = _neighbors([(1, 2, "wikilink"), (2, 3, "related"), (4, 3, "parent")])
    out = scoring.graph_expand({1: 1.0}, nb, hops=2, decay=0.5)
    assert out == {2: (0.5, 1, "wikilink", "out", 1), 3: (0.25, 2, "related", "out", 2)}
    out3 = scoring.graph_expand({1: 1.0}, nb, hops=3, decay=0.5)
    assert out3[4] == (0.125, 3, "parent", "in", 3)  # reached backwards through 4 -> 3


def test_graph_expand_keeps_the_best_path():
    # 3 is one hop from a weak anchor and two hops from a strong one
    nb = _neighbors([(10, 3, "wikilink"), (20, 5, "wikilink"), (5, 3, "related")])
    out = scoring.graph_expand({10: 0.1, 20: 1.0}, nb, hops=2, decay=0.5)
    assert out[3] == (0.25, 5, "related", "out", 2)
    assert out[5] == (0.5, 20, "wikilink", "out", 1)


def test_graph_expand_cycles_end_and_anchors_are_never_returned():
    nb = _neighbors([(1, 2, "w"), (2, 3, "w"), (3, 1, "w"), (2, 2, "w"), (3, 3, "w")])
    out = scoring.graph_expand({1: 1.0}, nb, hops=50, decay=0.9)
    assert set(out) == {2, 3}
    assert out[2][0] == pytest.approx(0.9) and out[3][0] == pytest.approx(0.9)


def test_graph_expand_never_walks_through_a_node_outside_allowed():
    nb = _neighbors([(1, 99, "w"), (99, 2, "w")])
    assert scoring.graph_expand({1: 1.0}, nb, hops=3, decay=0.5, allowed={1, 2}) == {}
    assert set(scoring.graph_expand({1: 1.0}, nb, hops=3, decay=0.5)) == {99, 2}


@st.composite
def graphs(draw):
    n = draw(st.integers(2, 12))
    node = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(node, node, st.sampled_from(["wikilink", "related", "parent"])), max_size=30))
    anchor_ids = draw(st.lists(node, min_size=1, max_size=4, unique=True))
    anchors = {a: draw(st.floats(0.001, 1.0)) for a in anchor_ids}
    allowed = draw(st.none() | st.sets(node))
    return n, edges, anchors, allowed


@PROPS
@given(graphs(), st.integers(1, 5), st.floats(0.05, 1.0))
def test_graph_expand_invariants(graph, hops, decay):
    _, edges, anchors, allowed = graph
    nb = _neighbors(edges)
    out = scoring.graph_expand(anchors, nb, hops=hops, decay=decay, allowed=allowed)
    for node, (score, via, kind, direction, h) in out.items():
        assert node not in anchors
        assert allowed is None or node in allowed
        assert via in anchors or allowed is None or via in allowed  # never walked through hidden
        assert (node, kind, direction) in nb[via]  # a real edge
        assert 1 <= h <= hops and (h == 1) == (via in anchors)
        assert any(math.isclose(score, a * decay**h, rel_tol=1e-9) for a in anchors.values())  # decay^hops


@PROPS
@given(graphs(), st.integers(1, 5), st.floats(0.05, 1.0))
def test_graph_expand_with_allowed_equals_the_graph_without_the_hidden_nodes(graph, hops, decay):
    _, edges, anchors, allowed = graph
    if allowed is None:
        return
    visible = allowed | set(anchors)
    pruned = [(s, d, k) for s, d, k in edges if s in visible and d in visible]
    a = scoring.graph_expand(anchors, _neighbors(edges), hops=hops, decay=decay, allowed=allowed)
    b = scoring.graph_expand(anchors, _neighbors(pruned), hops=hops, decay=decay)
    assert a == b


def _best_paths(anchors: dict[int, float], nb, hops: int, decay: float, allowed) -> dict[int, float]:
    """Brute force: the best anchor * decay**len over walks of <= hops edges whose other nodes are no anchors."""
    best: dict[int, float] = {}

    def walk(node: int, score: float, depth: int) -> None:
        if depth == hops:
            return
        for other, _, _ in nb.get(node, ()):
            if other in anchors or (allowed is not None and other not in allowed):
                continue
            s = score * decay
            best[other] = max(best.get(other, 0.0), s)
            walk(other, s, depth + 1)

    for a, s in anchors.items():
        walk(a, s, 0)
    return best


@PROPS
@given(graphs(), st.integers(1, 2), st.floats(0.05, 1.0))
def test_graph_expand_finds_the_best_path_within_two_hops(graph, hops, decay):
    _, edges, anchors, allowed = graph
    nb = _neighbors(edges)
    out = scoring.graph_expand(anchors, nb, hops=hops, decay=decay, allowed=allowed)
    expected = _best_paths(anchors, nb, hops, decay, allowed)
    assert set(out) == set(expected)
    assert all(math.isclose(out[n][0], expected[n], rel_tol=1e-9) for n in out)
