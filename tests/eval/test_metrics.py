"""core.eval.metrics: hand-computed examples per formula, properties, and agreement with ranx."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import UsageError
from core.eval import metrics

LOG2_3 = math.log2(3)  # 1.584962500721156, the discount at rank 2

# Graded judgements shared by the examples: a=3, b=2, c=1 relevant; x graded 0 (judged non-relevant).
QRELS = {"a": 3, "b": 2, "c": 1, "x": 0}


# ----------------------------------------------------------------------------- nDCG


def test_ndcg_graded_example():
    # ranked a, x, b at k=3:
    #   DCG  = 3/log2(2) + 0/log2(3) + 2/log2(4) = 3 + 0 + 1 = 4
    #   IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 1.26186 + 0.5 = 4.76186
    #   nDCG = 4 / 4.76186 = 0.84000
    expected = 4 / (3 + 2 / LOG2_3 + 0.5)
    assert metrics.ndcg_at_k(["a", "x", "b"], QRELS, 3) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.840008, abs=1e-6)


def test_ndcg_cutoff_uses_ideal_cut_at_k():
    # k=1, ranked b, a: DCG@1 = 2/1 = 2; IDCG@1 = 3/1 = 3 (only the best grade fits) -> 2/3
    assert metrics.ndcg_at_k(["b", "a"], QRELS, 1) == pytest.approx(2 / 3, abs=1e-12)


def test_ndcg_ideal_ranking_is_one_and_empty_is_zero():
    assert metrics.ndcg_at_k(["a", "b", "c"], QRELS, 10) == pytest.approx(1.0, abs=1e-12)
    assert metrics.ndcg_at_k([], QRELS, 10) == 0.0
    assert metrics.ndcg_at_k(["a"], {"a": 0, "b": -1}, 10) == 0.0  # no relevant doc: IDCG = 0


def test_ndcg_negative_grade_gives_no_gain():
    # ranked a, b with a=-1, b=1: DCG = 0 + 1/log2(3) = 0.63093; IDCG = 1/1 = 1
    assert metrics.ndcg_at_k(["a", "b"], {"a": -1, "b": 1}, 10) == pytest.approx(1 / LOG2_3, abs=1e-12)


def test_ndcg_counts_first_occurrence_only():
    # a, a, b dedupes to a, b: DCG@2 = 3 + 2/log2(3) = IDCG@2 -> 1.0.
    # Counting the repeat would give 3 + 3/log2(3) > IDCG, an nDCG above 1.
    assert metrics.ndcg_at_k(["a", "a", "b"], QRELS, 2) == pytest.approx(1.0, abs=1e-12)


# ----------------------------------------------------------------------------- recall / precision / MRR

RANKED = ["x", "a", "y", "c"]  # relevant a (rank 2) and c (rank 4); x is graded 0


def test_recall_example():
    # relevant = {a, b, c} (3 docs). Top 2 holds a -> 1/3; top 4 holds a, c -> 2/3.
    assert metrics.recall_at_k(RANKED, QRELS, 2) == pytest.approx(1 / 3, abs=1e-12)
    assert metrics.recall_at_k(RANKED, QRELS, 4) == pytest.approx(2 / 3, abs=1e-12)
    # a repeated three times is still one relevant doc: 1/3, not 3/3
    assert metrics.recall_at_k(["a", "a", "a"], QRELS, 3) == pytest.approx(1 / 3, abs=1e-12)
    assert metrics.recall_at_k(RANKED, {"x": 0}, 4) == 0.0


def test_precision_example():
    # top 4 holds a, c relevant -> 2/4 = 0.5; top 1 holds x (grade 0) -> 0/1
    assert metrics.precision_at_k(RANKED, QRELS, 4) == pytest.approx(0.5, abs=1e-12)
    assert metrics.precision_at_k(RANKED, QRELS, 1) == 0.0
    # a short ranking still divides by k (trec_eval P.k): 1 relevant / 10
    assert metrics.precision_at_k(["a"], QRELS, 10) == pytest.approx(0.1, abs=1e-12)
    # duplicates: a, a dedupes to a -> 1/2, not 2/2
    assert metrics.precision_at_k(["a", "a"], QRELS, 2) == pytest.approx(0.5, abs=1e-12)


def test_mrr_example():
    # first relevant doc a is at rank 2 -> 1/2; with k=1 it is cut off -> 0
    assert metrics.mrr_at_k(RANKED, QRELS, 10) == pytest.approx(0.5, abs=1e-12)
    assert metrics.mrr_at_k(RANKED, QRELS, 1) == 0.0
    # x (grade 0) and a repeated y do not count; c at rank 3 after dedupe -> 1/3
    assert metrics.mrr_at_k(["x", "y", "y", "c"], QRELS, 10) == pytest.approx(1 / 3, abs=1e-12)


def test_first_relevant_rank():
    assert metrics.first_relevant_rank(RANKED, QRELS) == 2
    assert metrics.first_relevant_rank(["x", "y"], QRELS) is None


@pytest.mark.parametrize("fn", [metrics.ndcg_at_k, metrics.recall_at_k, metrics.precision_at_k, metrics.mrr_at_k])
@pytest.mark.parametrize("k", [0, -1, True, 2.0])
def test_bad_cutoff_is_a_usage_error(fn, k):
    with pytest.raises(UsageError) as exc:
        fn(["a"], QRELS, k)
    assert exc.value.reason == "usage"


# ----------------------------------------------------------------------------- mean / percentile


def test_mean_and_empty_mean():
    # (1 + 0 + 0.5) / 3 = 0.5
    assert metrics.mean([1.0, 0.0, 0.5]) == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(UsageError):
        metrics.mean([])


def test_percentile_linear_interpolation():
    # sorted 10, 20, 30, 40: p50 sits at position 0.5*3 = 1.5 -> 20 + 0.5*10 = 25;
    # p95 at 0.95*3 = 2.85 -> 30 + 0.85*10 = 38.5
    assert metrics.percentile([40, 10, 30, 20], 50) == pytest.approx(25.0)
    assert metrics.percentile([40, 10, 30, 20], 95) == pytest.approx(38.5)
    with pytest.raises(UsageError):
        metrics.percentile([], 50)
    with pytest.raises(UsageError):
        metrics.percentile([1.0], 101)


# ----------------------------------------------------------------------------- properties

DOCS = st.sampled_from([f"d{i}" for i in range(12)])
QRELS_ST = st.dictionaries(DOCS, st.integers(min_value=-1, max_value=3), max_size=8)


@settings(max_examples=200, deadline=None)
@given(ranked=st.lists(DOCS, max_size=15), qrels=QRELS_ST, k=st.integers(min_value=1, max_value=15))
def test_metrics_are_bounded_and_ignore_repeats(ranked, qrels, k):
    deduped = metrics.dedupe_ranking(ranked)
    for fn in (metrics.ndcg_at_k, metrics.recall_at_k, metrics.precision_at_k, metrics.mrr_at_k):
        value = fn(ranked, qrels, k)
        assert 0.0 <= value <= 1.0 + 1e-12
        assert value == fn(deduped, qrels, k)


@settings(max_examples=100, deadline=None)
@given(qrels=QRELS_ST, k=st.integers(min_value=1, max_value=10))
def test_ideal_ranking_has_ndcg_one(qrels, k):
    ideal = sorted((d for d, r in qrels.items() if r > 0), key=lambda d: -qrels[d])
    expected = 1.0 if ideal else 0.0
    assert metrics.ndcg_at_k(ideal, qrels, k) == pytest.approx(expected, abs=1e-12)


# ----------------------------------------------------------------------------- ranx agreement


def _random_cases(seed: int, n_queries: int) -> tuple[dict, dict]:
    """Seeded random qrels (grades -1..3, at least one relevant) and duplicate-free runs."""
    rng = random.Random(seed)
    pool = [f"doc{i}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    runs: dict[str, list[str]] = {}
    for i in range(n_queries):
        qid = f"q{i:04d}"
        judged = rng.sample(pool, rng.randint(1, 10))
        grades = {d: rng.choice([-1, 0, 1, 1, 2, 3]) for d in judged}
        grades[judged[0]] = rng.randint(1, 3)
        qrels[qid] = grades
        runs[qid] = rng.sample(pool, rng.randint(1, 30))
    return qrels, runs


@pytest.mark.slow  # a cross-check of the formulas above: ranx's numba compilation alone takes ~25 s of CPU
@pytest.mark.filterwarnings("ignore::numba.core.errors.NumbaTypeSafetyWarning")
def test_agrees_with_ranx_on_random_rankings():
    """ranx's ndcg@k (Jarvelin linear gains, like trec_eval ndcg_cut; not ndcg_burges),
    recall@k, mrr@k and precision@k, per query, to 1e-9. ranx treats grades < 1 as not
    relevant (rel_lvl=1), which is our rel <= 0 rule for integer grades. Runs are
    duplicate-free because a ranx run is a dict."""
    import ranx  # noqa: PLC0415 (heavy import: numba)

    qrels, runs = _random_cases(seed=20240611, n_queries=300)
    ranx_qrels = ranx.Qrels(qrels)
    ranx_run = ranx.Run({q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items()})
    ks = (1, 3, 10, 20)
    ours = {
        "ndcg": metrics.ndcg_at_k,
        "recall": metrics.recall_at_k,
        "mrr": metrics.mrr_at_k,
        "precision": metrics.precision_at_k,
    }
    names = [f"{m}@{k}" for m in ours for k in ks]
    ranx.evaluate(ranx_qrels, ranx_run, names, return_mean=False, make_comparable=False)
    checked = 0
    for name in names:
        metric, k = name.split("@")
        theirs = ranx_run.scores[name]
        for qid, ranked in runs.items():
            assert ours[metric](ranked, qrels[qid], int(k)) == pytest.approx(float(theirs[qid]), abs=1e-9), (name, qid)
            checked += 1
    assert checked == len(names) * 300
