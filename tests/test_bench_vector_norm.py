"""bench/bench_vector_norm.py (issue 29): its re-implementation of the variant core ships scores what
core scores, and its tables judge each variant against today's."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import note

from bench import bench_vector_norm as bvn
from core import generations as gen
from core.ranking.analysis import language_analyzer_for
from core.ranking.chunk_vectors import VECTOR_B, VECTOR_IDF_POWER, VECTOR_K1, load_chunk_vectors, vector_scores
from core.ranking.sparse import load_sparse

FILES = {
    "garden.md": note(
        "Garden", "# Soil\n\n" + "Soil and compost in the garden beds. " * 40 + "\n\n# Heaps\n\nTurn heaps."
    ),
    "kitchen.md": note("Kitchen", "Keep knives sharp. Soil on vegetables washes off.", tags=["home"]),
    "compost.md": note("Compost", "Compost needs air, water and soil."),
}


def test_the_core_variant_is_what_core_implements(make_vault) -> None:
    v = bvn.VARIANTS[bvn.CORE_VARIANT]
    assert (v.tf, v.idf_power, bvn.BM25_K1, bvn.BM25_B) == ("bm25", VECTOR_IDF_POWER, VECTOR_K1, VECTOR_B)
    conn = gen.connect_readonly(gen.resolve(gen.layout_for(make_vault(FILES, name="bvn"))))
    sp = load_sparse(conn)
    raw = bvn.read_raw(conn, sp)
    vectors = load_chunk_vectors(conn, sp)
    analyzer = language_analyzer_for("en")
    scorers = {name: bvn.variant_scores(raw, bvn.prepare(raw, sp, bvn.VARIANTS[name])) for name in bvn.VARIANTS}
    for query in ("soil compost", "sharp knives", "heaps", "garden soil water"):
        terms = analyzer.terms(query)
        core = vector_scores(sp, vectors, terms)
        assert core.scores.max() > 0
        assert np.array_equal(scorers[bvn.CORE_VARIANT](sp, vectors, terms).scores, core.scores)
        for name, scorer in scorers.items():  # every variant scores the same candidates
            assert np.array_equal(scorer(sp, vectors, terms).matched, core.matched), name


def test_the_table_gives_each_variants_change_from_today_and_the_mean_of_the_sets() -> None:
    report = {
        "variants": {"today": {}, "x": {}},
        "modes": ["vector"],
        "ndcg10": {
            "c": {
                "s1": {"n": 3, "vector": {"today": 0.5, "x": 0.75}},
                "s2": {"n": 2, "vector": {"today": 1.0, "x": 0.5}},
            }
        },
    }
    lines = bvn.table(report).splitlines()
    assert lines[2] == "| c s1 | 3 | 0.5000 | 0.7500 (+0.2500) |"
    assert lines[3] == "| c s2 | 2 | 1.0000 | 0.5000 (-0.5000) |"
    assert lines[4] == "| mean of the sets | | 0.7500 | 0.6250 |"


def test_a_bm25_variant_holds_the_chunk_length_factors_a_pivoted_one_the_pivoted_norms() -> None:
    raw = bvn.Raw(
        np.array([0, 2, 3]), np.array([0, 1, 1], np.int32), np.array([1, 2, 1], np.float32), np.array([2, 6]), 2
    )
    sp = type("Sp", (), {"df": np.array([2, 1]), "n_docs": 2})()
    prepared = bvn.prepare(raw, sp, bvn.VARIANTS["bm25_idf1.5"])
    # length factors k1 (1 - b + b len / avg), avg 4
    assert prepared.per_chunk.tolist() == pytest.approx([1.2 * (0.25 + 0.75 * 0.5), 1.2 * (0.25 + 0.75 * 1.5)])
    assert bvn.prepare(raw, sp, bvn.VARIANTS["sub_l2_idf2"]).per_chunk.shape == (2,)
