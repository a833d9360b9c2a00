"""Each retrieval mode on a tiny vault whose right answers are unambiguous, and the labels it returns."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from conftest import note

from core.errors import DenseIndexUnavailableError, IndexMissingError, UnknownModeError, UsageError
from core.modes.graph import GRAPH_DECAY
from core.modes.lexical import HYBRID_WEIGHTS, RRF_K
from core.registry import MODE_NAMES
from core.searcher import search_vault

MODEL_FREE = ("fts", "vector", "hybrid", "graph_assisted", "auto")
DENSE_MODES = ("semantic", "reranked")
ANCHOR = round((HYBRID_WEIGHTS[0] + HYBRID_WEIGHTS[1]) / (RRF_K + 1), 6)  # rank 1 in both lists

FILES = {
    "food/sourdough.md": note(
        "Sourdough starter care",
        """
        Feed the sourdough starter with flour and water every day. A lively starter
        doubles in four hours; a sluggish one needs a warmer spot.""",
    ),
    "ops/kubernetes.md": note(
        "Kubernetes pods",
        """
        Pods are scheduled on nodes. A deployment keeps the pods of a service running
        and rolls them when the image changes.""",
    ),
    "games/chess.md": note(
        "Chess opening repertoire",
        """
        Play the Italian opening with white. Against the Sicilian, choose the Alapin.
        Every chess opening needs a plan for the middle game.""",
    ),
    "money/taxes.md": note(
        "Tax return checklist",
        """
        Collect receipts, the annual statement of the bank and the pension letter
        before filing the return.""",
    ),
    "food/marmalade.md": note(
        "Marmalade",
        """
        Seville oranges, sugar and lemon, boiled until the set point; pot while hot.""",
    ),
    "food/preserves.md": note(
        "Preserves pantry",
        """
        The pantry holds pickles, chutney, apricot jam, one jar of marmalade, canned
        beans, dried lentils, rice, pasta, flour, oats, honey and tinned tomatoes.""",
    ),
    "animals/quokka.md": note("Quokka", "Quokka quokka."),
    "air/zeppelin.md": note("Zeppelin history", "The zeppelin airship flew over the lake. See [[hangar]]."),
    "air/hangar.md": note("Hangar", "A big shed by the field. See [[field]]."),
    "air/field.md": note("Field", "Grass and a windsock. See [[farm]]."),
    "air/farm.md": note("Farm", "Cows graze beside the grass strip."),
    "air/fan.md": note("Fan club", "We love airship rides.", related=["zeppelin"]),  # a frontmatter relation
    "air/island.md": note("Island", "An island with no links at all."),
}


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def paths(results) -> list[str]:
    return [r.rel_path for r in results]


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("sourdough starter", "food/sourdough.md"),
        ("kubernetes pods", "ops/kubernetes.md"),
        ("chess opening", "games/chess.md"),
        ("tax receipts", "money/taxes.md"),
    ],
)
def test_every_model_free_mode_finds_the_obvious_note_first(vault, mode, query, expected):
    results = search_vault(vault, query, mode=mode)
    assert paths(results)[0] == expected
    assert results.requested_mode == mode


@pytest.mark.parametrize("mode", ["fts", "vector", "hybrid"])
def test_ranked_modes_only_return_notes_that_contain_a_query_term(vault, mode):
    assert set(paths(search_vault(vault, "marmalade", mode=mode))) == {"food/marmalade.md", "food/preserves.md"}


def test_fts_labels_and_ranks_a_title_match_above_a_passing_body_mention(vault):
    results = search_vault(vault, "marmalade", mode="fts")
    assert paths(results) == ["food/marmalade.md", "food/preserves.md"]
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == ("fts", "fts", None)
    assert all(r.score_source == "bm25f" and r.score > 0 for r in results)
    assert results[0].score > results[1].score


def test_vector_finds_the_only_note_with_the_query_term(vault):
    results = search_vault(vault, "quokka", mode="vector")
    assert paths(results) == ["animals/quokka.md"] and results[0].score > 0
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == ("vector", "vector", None)
    assert results[0].score_source == "chunk_bm25"  # what scored it (BM25 over chunks since schema 12)


def test_vector_scores_are_positive_and_ordered(vault):
    # the exact numbers are checked against a reference implementation in test_chunk_vectors.py
    results = search_vault(vault, "marmalade flour pantry", mode="vector")
    assert paths(results)[0] == "food/preserves.md" and len(results) == 3 and all(r.score > 0 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_hybrid_score_is_the_weighted_rrf_of_both_lists(vault):
    results = search_vault(vault, "quokka", mode="hybrid")
    assert paths(results) == ["animals/quokka.md"]
    assert results[0].score == pytest.approx(ANCHOR, abs=1e-6) and results[0].score_source == "rrf"
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == ("hybrid", "hybrid", None)


def test_hybrid_does_not_expand_through_links(vault):
    assert paths(search_vault(vault, "zeppelin", mode="hybrid")) == ["air/zeppelin.md"]


def test_graph_assisted_expands_links_both_ways_with_decay_per_hop(vault):
    results = search_vault(vault, "zeppelin", mode="graph_assisted", limit=20)
    by_path = {r.rel_path: r for r in results}
    assert set(by_path) == {"air/zeppelin.md", "air/hangar.md", "air/fan.md", "air/field.md"}  # farm: 3 hops
    assert paths(results)[0] == "air/zeppelin.md" and by_path["air/zeppelin.md"].via is None
    assert by_path["air/zeppelin.md"].score == pytest.approx(ANCHOR, abs=1e-6)
    hop1 = round(ANCHOR * GRAPH_DECAY, 6)
    assert by_path["air/hangar.md"].via == {
        "from": "air/zeppelin.md",
        "edge": "wikilink",
        "direction": "out",
        "hops": 1,
    }
    assert by_path["air/fan.md"].via == {"from": "air/zeppelin.md", "edge": "related", "direction": "in", "hops": 1}
    assert by_path["air/field.md"].via == {"from": "air/hangar.md", "edge": "wikilink", "direction": "out", "hops": 2}
    assert by_path["air/hangar.md"].score == pytest.approx(hop1, abs=2e-6)
    assert by_path["air/field.md"].score == pytest.approx(ANCHOR * GRAPH_DECAY**2, abs=2e-6)
    assert all(by_path[p].score_source == "graph" for p in ("air/hangar.md", "air/fan.md", "air/field.md"))
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == (
        "graph_assisted",
        "graph_assisted",
        None,
    )


def test_graph_assisted_limit_keeps_the_best(vault):
    assert paths(search_vault(vault, "zeppelin", mode="graph_assisted", limit=1)) == ["air/zeppelin.md"]


def test_auto_without_dense_is_fts_labelled_as_a_fallback(vault):
    auto = search_vault(vault, "marmalade", mode="auto")
    fts = search_vault(vault, "marmalade", mode="fts")
    assert [(r.rel_path, r.score) for r in auto] == [(r.rel_path, r.score) for r in fts]
    assert (auto.actual_mode, auto.retrieval_contract, auto.fallback_reason) == (
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    assert all(
        (r.actual_mode, r.retrieval_contract, r.fallback_reason) == ("fts", "fts_fallback", "dense_index_unavailable")
        for r in auto
    )


def test_auto_is_the_default_mode(vault):
    results = search_vault(vault, "marmalade")
    assert results.requested_mode == "auto" and results.retrieval_contract == "fts_fallback"


def test_an_empty_result_list_still_carries_the_fallback_labels(vault):
    results = search_vault(vault, "xylophonist", mode="auto")
    assert list(results) == []
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == (
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    assert results.to_dict()["fallback_reason"] == "dense_index_unavailable"


@pytest.mark.parametrize("mode", DENSE_MODES)
def test_dense_modes_fail_closed_without_vectors(vault, mode):
    with pytest.raises(DenseIndexUnavailableError) as info:
        search_vault(vault, "marmalade", mode=mode)
    assert info.value.reason == "dense_index_unavailable" and info.value.exit_code == 5


@pytest.mark.parametrize("mode", DENSE_MODES)
def test_dense_modes_with_allow_fallback_run_fts_and_say_so(vault, mode):
    results = search_vault(vault, "marmalade", mode=mode, allow_fallback=True)
    fts = search_vault(vault, "marmalade", mode="fts")
    assert [(r.rel_path, r.score) for r in results] == [(r.rel_path, r.score) for r in fts]
    assert (results.requested_mode, results.actual_mode, results.retrieval_contract, results.fallback_reason) == (
        mode,
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    assert all(
        r.retrieval_contract == "fts_fallback" and r.fallback_reason == "dense_index_unavailable" for r in results
    )


def test_hybrid_reranked_is_a_deprecated_alias_of_reranked(vault):
    with pytest.warns(DeprecationWarning):
        results = search_vault(vault, "marmalade", mode="hybrid_reranked", allow_fallback=True)
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == (
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    with pytest.warns(DeprecationWarning), pytest.raises(DenseIndexUnavailableError):
        search_vault(vault, "marmalade", mode="hybrid_reranked")
    assert "hybrid_reranked" not in MODE_NAMES


def test_unknown_mode_is_refused_before_anything_runs(vault, tmp_path):
    for where in (vault, tmp_path):  # even without an index: the mode is checked first
        with pytest.raises(ValueError) as info:
            search_vault(where, "marmalade", mode="bm42")
        assert isinstance(info.value, UnknownModeError) and info.value.reason == "unknown_mode"


@pytest.mark.parametrize("mode", [*MODE_NAMES, "hybrid_reranked"])
def test_no_index_fails_with_index_missing_in_every_mode(make_vault, mode):
    bare = make_vault({"a.md": note("A", "marmalade")}, build=False, name="bare")
    with pytest.warns(DeprecationWarning) if mode == "hybrid_reranked" else contextlib.nullcontext():
        with pytest.raises(IndexMissingError) as info:
            search_vault(bare, "marmalade", mode=mode, allow_fallback=True)
    assert info.value.reason == "index_missing" and info.value.exit_code == 3
    assert not (bare / ".vaultsearch").exists()  # searching never creates an index


def test_a_vault_that_does_not_exist_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError) as info:  # issue 11: a missing vault is named as such, exit 2
        search_vault(tmp_path / "nowhere", "marmalade", mode="auto")
    assert info.value.reason == "vault_missing" and info.value.exit_code == 2


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_limit_is_honoured_and_must_be_positive(vault, mode):
    assert len(search_vault(vault, "the a of and with", mode=mode, limit=2)) <= 2
    with pytest.raises(UsageError) as info:
        search_vault(vault, "marmalade", mode=mode, limit=0)
    assert info.value.reason == "invalid_argument"


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_results_are_deterministic(vault, mode):
    a = search_vault(vault, "grass field zeppelin flour", mode=mode)
    b = search_vault(vault, "grass field zeppelin flour", mode=mode)
    assert [r.to_dict() | {"index_age_seconds": 0} for r in a] == [r.to_dict() | {"index_age_seconds": 0} for r in b]
