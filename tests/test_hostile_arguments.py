"""Hostile arguments to search_vault and `vaultsearch search`: a typed error or a labelled result, never a
traceback; filter lists of any length compile to the same small clause (one bound JSON array)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.cli import main
from core.errors import VaultSearchError
from core.ranking.filters import Filters
from core.registry import MODE_NAMES
from core.search_arguments import MAX_LIMIT
from core.searcher import search_vault
from tests.conftest import note

FILES = {
    "projects/alpha.md": note("Alpha", "the alpha project plan", tags=["work", "plan"], classification="public"),
    "projects2/beta.md": note("Beta", "the beta project plan", tags=["work"]),
    "notes/gamma.md": note("Gamma", "a gamma note about plans", tags=["misc"], classification="secret"),
}
MODEL_FREE = ("fts", "vector", "hybrid", "graph_assisted", "auto")


@pytest.fixture(scope="module")
def vault(make_vault):
    return make_vault(FILES, name="hostile")


HOSTILE = {
    "query_none": ({"query": None}, "invalid_argument"),
    "query_int": ({"query": 5}, "invalid_argument"),
    "query_lone_surrogate": ({"query": "plan \ud800"}, "invalid_argument"),
    "limit_huge": ({"limit": 10**30}, "invalid_argument"),
    "limit_float": ({"limit": 2.5}, "invalid_argument"),
    "limit_string": ({"limit": "5"}, "invalid_argument"),
    "limit_zero": ({"limit": 0}, "invalid_argument"),
    "limit_negative": ({"limit": -1}, "invalid_argument"),
    "limit_bool": ({"limit": True}, "invalid_argument"),
    "limit_over_max": ({"limit": MAX_LIMIT + 1}, "invalid_argument"),
    "mode_list": ({"mode": ["fts"]}, "invalid_argument"),
    "mode_unknown": ({"mode": "bogus"}, "unknown_mode"),
    "raw_string": ({"raw": "yes"}, "invalid_argument"),
    "options_unknown_key": ({"options": {"rerankr": "x"}}, "invalid_argument"),
    "options_not_a_dict": ({"options": ["reranker"]}, "invalid_argument"),
    "options_value_int": ({"options": {"reranker": 5}}, "invalid_argument"),
    "model_int": ({"model": 5}, "invalid_argument"),
    "index_dir_int": ({"index_dir": 5}, "invalid_argument"),
    "since_int": ({"since": 5}, "invalid_filter"),
    "since_not_a_date": ({"since": "yesterday"}, "invalid_filter"),
    "until_list": ({"until": ["2024-01-01"]}, "invalid_filter"),
    "classifications_none_item": ({"classifications": [None]}, "invalid_filter"),
    "classifications_int": ({"classifications": 3}, "invalid_filter"),
    "tags_surrogate": ({"tags_any": ["\udcff"]}, "invalid_filter"),
    "tags_mapping": ({"tags_all": {"a": 1}}, "invalid_filter"),
    "path_prefix_int": ({"path_prefixes": [1]}, "invalid_filter"),
    "date_field_unknown": ({"date_field": "birthday"}, "invalid_filter"),
    "include_superseded_string": ({"include_superseded": "no"}, "invalid_filter"),
    "filters_not_filters": ({"filters": {"tags_any": "x"}}, "invalid_argument"),
    "filters_bad_field_type": ({"filters": Filters(tags_any="work")}, "invalid_filter"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_argument_is_a_typed_error(vault, case):
    kw, reason = HOSTILE[case]
    kw = {"query": "plan", **kw}
    with pytest.raises(VaultSearchError) as info:
        search_vault(vault, kw.pop("query"), **kw)
    assert info.value.reason == reason and info.value.exit_code == 2


def test_a_misspelled_keyword_is_a_type_error_naming_the_valid_ones(vault):
    """Issue #12: a keyword that is neither a parameter nor a filter is Python's own TypeError."""
    with pytest.raises(TypeError, match="colour") as info:
        search_vault(vault, "plan", colour="blue")
    assert "max_results" in str(info.value) and "tags_any" in str(info.value)


def test_2000_tags_work_and_find_the_tagged_notes(vault):
    tags = [f"t{i}" for i in range(1999)] + ["plan"]
    assert {r.rel_path for r in search_vault(vault, "project", mode="fts", tags_any=tags)} == {"projects/alpha.md"}
    assert list(search_vault(vault, "project", mode="fts", tags_all=tags)) == []
    assert [r.rel_path for r in search_vault(vault, "project", mode="fts", tags_all=["work", "plan"])] == [
        "projects/alpha.md"
    ]


def test_40000_path_prefixes_work_and_keep_prefix_semantics(vault):
    prefixes = [f"p{i}/" for i in range(39_999)] + ["projects/"]
    found = {r.rel_path for r in search_vault(vault, "project plan", mode="hybrid", path_prefixes=prefixes)}
    assert found == {"projects/alpha.md"}  # "projects/" must not match "projects2/"
    both = {r.rel_path for r in search_vault(vault, "project plan", mode="fts", path_prefixes=["projects"])}
    assert both == {"projects/alpha.md", "projects2/beta.md"}


def test_filter_clause_is_one_bound_array_whatever_the_list_length():
    small = Filters.make(tags_any=["a"], path_prefixes=["x/"], note_types=["T"]).where()
    big = Filters.make(
        tags_any=[f"t{i}" for i in range(2000)], path_prefixes=[f"{i}/" for i in range(40_000)], note_types=["T"]
    ).where()
    assert (
        small[0]
        == big[0]
        == (
            "lower(n.note_type) IN (SELECT value FROM json_each(?)) AND "
            "n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON "
            "(t.tag = q.value OR (t.tag >= q.value || '.' AND t.tag < q.value || '0'))) AND "
            "n.id IN (SELECT m.id FROM json_each(?) r JOIN notes m ON m.rel_path >= json_extract(r.value, '$[0]') "
            "AND m.rel_path < json_extract(r.value, '$[1]')) AND "
            "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
            "(SELECT e.dst_id FROM edges e WHERE e.kind = 'supersedes' AND e.dst_id IS NOT NULL))"
        )
    )
    assert small[1] == ['["t"]', '["a"]', '[["x/", "x0"]]'] and len(big[1]) == 3


def test_tags_all_clause_counts_distinct_tags():
    clause, vals = Filters.make(tags_all=["b", "a", "b"]).where()
    assert clause.startswith(
        "n.id IN (SELECT t.note_id FROM json_each(?) q JOIN note_tags t ON "
        "(t.tag = q.value OR (t.tag >= q.value || '.' AND t.tag < q.value || '0')) "
        "GROUP BY t.note_id HAVING count(DISTINCT q.value) = ?) AND "
    )
    assert vals[:2] == ['["a", "b"]', 2]


def test_supersession_clause_counts_only_visible_sources():
    clause, vals = Filters.make(classifications=["public"]).where()
    assert clause == (
        "NOT (n.superseded_by != '[]' OR lower(coalesce(n.status, '')) = 'superseded' OR n.id IN "
        "(SELECT e.dst_id FROM edges e JOIN notes s ON s.id = e.src_id WHERE e.kind = 'supersedes' "
        "AND e.dst_id IS NOT NULL AND lower(coalesce(s.classification, ?)) IN (SELECT value FROM json_each(?)))) "
        "AND lower(coalesce(n.classification, ?)) IN (SELECT value FROM json_each(?))"
    )
    assert vals == ["public", '["public"]', "public", '["public"]']


# ---------------------------------------------------------------- hypothesis: arbitrary text, filters, options

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20))
VALUES = st.one_of(SCALARS, st.lists(st.one_of(st.text(max_size=10), st.none(), st.integers()), max_size=4))
FILTER_KEYS = st.sampled_from(
    [
        "note_types",
        "tags_all",
        "tags_any",
        "path_prefixes",
        "namespaces",
        "date_field",
        "since",
        "until",
        "volatility",
        "status",
        "include_superseded",
        "classifications",
        "bogus",
    ]
)
LIMITS = st.one_of(st.integers(-5, 30), st.sampled_from([10**30, 2.5, "5", None, True]))


def _labelled(results) -> None:
    assert results.actual_mode and results.retrieval_contract
    for r in results:
        assert r.actual_mode == results.actual_mode and r.retrieval_contract == results.retrieval_contract


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.one_of(st.text(max_size=60), st.none(), st.integers()),
    mode=st.sampled_from([*MODE_NAMES, "hybrid_reranked", "nope"]),
    raw=st.booleans(),
    limit=LIMITS,
    filters=st.dictionaries(FILTER_KEYS, VALUES, max_size=3),
    options=st.one_of(st.none(), st.dictionaries(st.sampled_from(["reranker", "x"]), SCALARS, max_size=2)),
)
def test_api_never_raises_untyped_or_returns_unlabelled(vault, query, mode, raw, limit, filters, options):
    if "bogus" in filters:  # a misspelled keyword: Python's TypeError naming the valid ones (issue #12)
        with pytest.raises(TypeError, match="bogus"):
            search_vault(vault, query, mode=mode, raw=raw, limit=limit, options=options, **filters)
        return
    with contextlib.suppress(VaultSearchError), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # hybrid_reranked, the deprecated alias
        _labelled(
            search_vault(vault, query, mode=mode, raw=raw, limit=limit, options=options, allow_fallback=True, **filters)
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.text(st.characters(codec=None, exclude_categories=()), max_size=40),  # lone surrogates too (argv bytes)
    extra=st.lists(
        st.sampled_from(
            ["--raw", "--tag", "x", "--since", "5", "--path", "", "-n", "0", "-n", "3", "--classification", "LAN"]
            + ["-n", str(10**30), "--tag", "\udcff", "--any-tag", "a b"]
        ),
        max_size=4,
    ),
    mode=st.sampled_from(MODEL_FREE),
)
@example(query="plan \udcff", extra=["--raw"], mode="fts")  # invalid UTF-8 in argv arrives as a lone surrogate
@example(query="plan-b \udcff", extra=[], mode="hybrid")
@example(query="plan", extra=["-n", str(10**30)], mode="fts")
@example(query="plan", extra=["--tag", "\udcff"], mode="vector")
def test_cli_search_never_gives_a_traceback(vault, query, extra, mode):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["search", str(vault), "--mode", mode, "--json", *extra, "--", query])
        except SystemExit as exc:  # argparse's own usage error (exit 2, a usage line, no traceback)
            code = exc.code
    assert code in (0, 2), err.getvalue()
    if code == 0:
        _labelled_json = json.loads(out.getvalue())
        assert _labelled_json["actual_mode"]
    elif err.getvalue().startswith("{"):
        assert json.loads(err.getvalue())["reason"] in {"invalid_argument", "invalid_filter", "query_syntax", "usage"}


def test_cli_invalid_utf8_query_is_a_typed_usage_error(vault):
    proc = subprocess.run(
        [sys.executable, "-m", "core.cli", "search", str(vault).encode(), b"plan \xff\xfe", "--json"],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr  # argparse's usage error: the query argument is refused
    assert b"not valid UTF-8" in proc.stderr and b"Traceback" not in proc.stderr
