"""Filters in every model-free mode, metadata-only search, and the classification no-trace contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import note

from core.errors import FilterError, UsageError
from core.ranking.filters import Filters
from core.searcher import search_vault

MODEL_FREE = ("fts", "vector", "hybrid", "graph_assisted", "auto")

FILES = {
    "projects/alpha.md": note(
        "Alpha orchid project",
        "Alpha grows the orchid greenhouse. See [[beta]].",
        type="project",
        tags=["orchid", "Red"],
        created="2023-01-01",
        updated="2024-01-10",
        volatility="stable",
        status="active",
        classification="public",
    ),
    "projects/beta.md": note(
        "Beta orchid project",
        "Beta waters every orchid daily. #inline-tag",
        type="project",
        tags="orchid, blue",
        created="2023-06-01",
        updated="2024-03-05",
        volatility="volatile",
        status="draft",
    ),
    "howtos/gamma.md": note(
        "Gamma orchid howto",
        "How to repot an orchid safely.",
        type="howto",
        tags=["red", "blue"],
        created="2023-02-01",
        updated="2024-02-29T10:00:00+00:00",
        volatility="evolving",
        status="active",
        classification="lan",
    ),
    "howtos/delta.md": note(
        "Delta orchid howto",
        "Delta prunes the orchid roots.",
        type="howto",
        tags=["green"],
        created="2022-05-05",
        updated="2023-12-31",
        status="archived",
        classification="restricted",
    ),
    "decisions/old.md": note(
        "Old orchid decision",
        "We chose clay pots for the orchid.",
        type="decision",
        tags=["red"],
        updated="2023-01-01",
        status="active",
        superseded_by="new",
    ),
    "decisions/new.md": note(
        "New orchid decision",
        "We choose bark mix for the orchid now.",
        type="decision",
        supersedes="old",
        updated="2024-04-01",
        status="active",
    ),
    "decisions/replaced.md": note(
        "Replaced orchid decision",
        "An orchid decision nobody follows.",
        type="decision",
        status="superseded",
        updated="2023-02-02",
    ),
    "projects2/eps.md": note(
        "Epsilon orchid note", "Epsilon lists orchid suppliers.", type="project", updated="2024-05-05", status="active"
    ),
}
ALPHA, BETA, GAMMA, DELTA = "projects/alpha.md", "projects/beta.md", "howtos/gamma.md", "howtos/delta.md"
OLD, NEW, REPLACED, EPS = "decisions/old.md", "decisions/new.md", "decisions/replaced.md", "projects2/eps.md"
CURRENT = {ALPHA, BETA, GAMMA, DELTA, NEW, EPS}  # superseded notes are hidden by default

CASES = [
    ({}, CURRENT),
    ({"note_types": "project"}, {ALPHA, BETA, EPS}),
    ({"note_types": ["howto", "decision"]}, {GAMMA, DELTA, NEW}),
    ({"note_types": "PROJECT"}, {ALPHA, BETA, EPS}),
    ({"tags_all": ["red", "blue"]}, {GAMMA}),
    ({"tags_all": "#Red"}, {ALPHA, GAMMA}),
    ({"tags_any": ["green", "blue"]}, {BETA, GAMMA, DELTA}),
    ({"tags_all": "inline-tag"}, {BETA}),
    ({"path_prefixes": "projects/"}, {ALPHA, BETA}),
    ({"path_prefixes": ["howtos/", "decisions/"]}, {GAMMA, DELTA, NEW}),
    ({"path_prefixes": "/howtos/"}, {GAMMA, DELTA}),
    ({"path_prefixes": "projects/alpha.md"}, {ALPHA}),
    ({"since": "2024-02-29"}, {GAMMA, BETA, NEW, EPS}),
    ({"until": "2024-02-29"}, {ALPHA, GAMMA, DELTA}),  # a date bound covers the whole day
    ({"since": "2024-01-01", "until": "2024-03-05"}, {ALPHA, GAMMA, BETA}),
    ({"since": "2024-02-29T09:00:00"}, {GAMMA, BETA, NEW, EPS}),
    ({"date_field": "created", "since": "2023-01-01", "until": "2023-02-01"}, {ALPHA, GAMMA}),
    ({"date_field": "created", "until": "2022-12-31"}, {DELTA}),  # notes without the date never match
    ({"volatility": "stable"}, {ALPHA}),
    ({"volatility": ["volatile", "evolving"]}, {BETA, GAMMA}),
    ({"status": "active"}, {ALPHA, GAMMA, NEW, EPS}),
    ({"status": ["draft", "archived"]}, {BETA, DELTA}),
    ({"include_superseded": True}, set(FILES)),
    ({"include_superseded": True, "status": "superseded"}, {REPLACED}),
    ({"include_superseded": True, "note_types": "decision"}, {OLD, NEW, REPLACED}),
    ({"classifications": "public"}, {ALPHA, BETA, NEW, EPS}),  # no classification counts as public
    ({"classifications": ["public", "lan"]}, {ALPHA, BETA, GAMMA, NEW, EPS}),
    ({"classifications": "RESTRICTED"}, {DELTA}),
    ({"note_types": "project", "tags_any": "blue", "classifications": "public"}, {BETA}),
]


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def found(results) -> set[str]:
    paths = [r.rel_path for r in results]
    assert len(paths) == len(set(paths))
    return set(paths)


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize(("kw", "expected"), CASES, ids=[json.dumps(kw) for kw, _ in CASES])
def test_every_filter_in_every_model_free_mode(vault, mode, kw, expected):
    assert found(search_vault(vault, "orchid", mode=mode, limit=50, **kw)) == expected


@pytest.mark.parametrize(("kw", "expected"), CASES, ids=[json.dumps(kw) for kw, _ in CASES])
def test_metadata_only_search_lists_the_matching_notes(vault, kw, expected):
    results = search_vault(vault, "", mode="fts", limit=50, **kw)
    assert found(results) == expected
    assert (results.actual_mode, results.retrieval_contract, results.fallback_reason) == (
        "metadata",
        "metadata_only",
        None,
    )


def test_metadata_only_lists_newest_first(vault):
    results = search_vault(vault, "", note_types="howto")
    assert [r.rel_path for r in results] == [GAMMA, DELTA]


@pytest.mark.parametrize("mode", ["fts", "auto"])
def test_raw_queries_apply_the_filters_too(vault, mode):
    assert found(
        search_vault(vault, "orchid", mode=mode, raw=True, limit=50, note_types="project", classifications="public")
    ) == {ALPHA, BETA, EPS}


def test_a_filters_object_and_keywords_are_the_same(vault):
    obj = search_vault(vault, "orchid", filters=Filters(note_types=("howto",), include_superseded=True))
    kw = search_vault(vault, "orchid", note_types="howto", include_superseded=True)
    assert [r.rel_path for r in obj] == [r.rel_path for r in kw]
    with pytest.raises(UsageError):
        search_vault(vault, "orchid", filters=Filters(), note_types="howto")


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize("query", ["orchid", "", "!!!"])
def test_unknown_date_field_is_an_invalid_filter_in_every_mode(vault, mode, query):
    with pytest.raises(FilterError) as info:
        search_vault(vault, query, mode=mode, date_field="published", since="2024-01-01")
    assert info.value.reason == "invalid_filter" and isinstance(info.value, ValueError)


@pytest.mark.parametrize("kw", [{"since": "2024-13-40"}, {"until": "yesterday"}])
def test_bad_filter_values_are_invalid_filters(vault, kw):
    with pytest.raises(FilterError) as info:
        search_vault(vault, "orchid", mode="fts", **kw)
    assert info.value.reason == "invalid_filter"


# --- classification: a hidden note leaves no trace -----------------------------------------------------

LEAK_FILES = {
    "pub/a.md": note(
        "Quasar log", "quasar observations tonight. See [[hidden-plans]] and [[pub-c]].", classification="public"
    ),
    "pub/d.md": note("Catalogue", "a quasar catalogue of the northern sky"),
    "pub/pub-c.md": note("Telescope", "telescope maintenance schedule", classification="public"),
    "pub/pub-b.md": note("Garden", "plain note about gardening", classification="public"),
    "pub/pub-p.md": note("Cooking", "another plain note about cooking", classification="public"),
    "sec/hidden-plans.md": note(
        "Moonbeam budget", "moonbeam secret budget with quasar figures. See [[pub-b]].", classification="restricted"
    ),
    "lan/r2.md": note("Nebulark internal", "nebulark quasar notes; see [[a]] and [[pub-p]].", classification="lan"),
}
HIDDEN_MARKS = ("sec/hidden-plans.md", "lan/r2.md", "Moonbeam", "moonbeam", "nebulark", "Nebulark")
PUBLIC = {p for p in LEAK_FILES if p.startswith("pub/")}


@pytest.fixture(scope="module")
def leak_vault(make_vault) -> Path:
    return make_vault(LEAK_FILES, name="leak")


def test_the_leak_vault_really_has_paths_through_hidden_notes(leak_vault):
    """Control: without a restriction, expansion does reach the notes only hidden ones link to."""
    results = search_vault(leak_vault, "quasar", mode="graph_assisted", limit=50)
    assert {"sec/hidden-plans.md", "lan/r2.md", "pub/pub-b.md", "pub/pub-p.md"} <= found(results)


@pytest.mark.parametrize("mode", [*MODEL_FREE, "semantic", "reranked"])
@pytest.mark.parametrize("query", ["quasar", "moonbeam budget", "nebulark", "quasar telescope gardening cooking", ""])
def test_public_caller_gets_no_trace_of_lan_or_restricted_notes(leak_vault, mode, query):
    results = search_vault(leak_vault, query, mode=mode, limit=50, classifications=("public",), allow_fallback=True)
    assert found(results) <= PUBLIC
    assert all(r.via is None or r.via["from"] in PUBLIC for r in results)
    # the echoed query aside (also as analysed terms), and its words that nothing visible serves (an echo
    # too: which words are reported is the same as for words no note holds)
    dump = json.dumps(
        {**results.to_dict(), "query": None, "query_terms": None, "unmatched_words": None}, ensure_ascii=False
    )
    assert not [m for m in HIDDEN_MARKS if m in dump]  # not in titles, snippets, matched_text, via, counts


def test_graph_expansion_never_steps_through_a_hidden_note(leak_vault):
    results = search_vault(leak_vault, "quasar", mode="graph_assisted", limit=50, classifications=("public",))
    assert found(results) == {"pub/a.md", "pub/d.md", "pub/pub-c.md"}  # pub-b / pub-p sit behind hidden notes
    by_path = {r.rel_path: r for r in results}
    assert by_path["pub/pub-c.md"].via == {"from": "pub/a.md", "edge": "wikilink", "direction": "out", "hops": 1}


def test_a_lan_caller_sees_lan_but_still_nothing_restricted(leak_vault):
    results = search_vault(leak_vault, "quasar", mode="graph_assisted", limit=50, classifications=("public", "lan"))
    assert found(results) == {"pub/a.md", "pub/d.md", "pub/pub-c.md", "lan/r2.md", "pub/pub-p.md"}
    assert "oonbeam" not in json.dumps(results.to_dict())


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_a_query_only_a_hidden_note_matches_returns_an_ordinary_empty_list(leak_vault, mode):
    hidden = search_vault(leak_vault, "moonbeam", mode=mode, classifications=("public",))
    absent = search_vault(leak_vault, "xylophonist", mode=mode, classifications=("public",))
    # both words are reported unmatched (each echoes its own query): the rest is identical
    assert hidden.unmatched_words == ("moonbeam",) and absent.unmatched_words == ("xylophonist",)
    same = {"query": "", "query_terms": [], "index": {}, "unmatched_words": [], "freshness": {}}  # ages differ
    assert list(hidden) == [] and hidden.to_dict() | same == absent.to_dict() | same
    assert set(hidden.freshness) == set(absent.freshness) and hidden.freshness["stale"] is False
