"""SearchResult / SearchResults: one hit per note, typed fields, bounded body-only text, provenance, rendering."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
import types
import typing
from pathlib import Path

import pytest
from conftest import note

from core import generations as gen
from core.build.builder import IndexConfig, build_index
from core.ranking.snippets import MATCHED_TEXT_CHARS, SNIPPET_CHARS
from core.render import EMBED_HINT, format_search_results, results_html, results_markdown
from core.searcher import IndexIdentity, SearchResult, SearchResults, search_vault

MODEL_FREE = ("fts", "vector", "hybrid", "graph_assisted", "auto")
ELLIPSIS = " …"

FILLER = " ".join(f"word{i}" for i in range(400))
FILES = {
    "long.md": note(
        "Long handbook",
        "\n\n".join(
            f"## Part {i}\n\nThe lighthouse part {i}. " + " ".join(f"pad{i}x{j}" for j in range(60)) for i in range(8)
        ),
    ),
    "deep.md": note("Deep note", f"{FILLER} the beacon shines here. {FILLER}"),
    "fm.md": note(
        "Unique Title Xyzzy",
        "Body text about the harbour and the lighthouse. See [[count]].",
        description="Desc qwerty",
        secret_field="frontmatterzebra",
        tags=["sea", "Light"],
        type="howto",
    ),
    "count.md": note("Count", "lighthouse keeper lighthouse lamp lighthouse"),
}
FIELD_TYPES = typing.get_type_hints(SearchResult)


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


@pytest.fixture(scope="module")
def wide_vault(make_vault) -> Path:
    """Chunks far longer than matched_text's bound, so the bound itself is exercised."""
    return make_vault(
        {"wide.md": note("Wide", f"{FILLER} the beacon shines {FILLER}")},
        config=IndexConfig(chunk_size=8000, chunk_overlap=60),
        name="wide",
    )


def _isinstance(value: object, hint: object) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_isinstance(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is tuple:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    return isinstance(value, hint)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_one_hit_per_note_even_when_many_chunks_match(vault, mode):
    results = search_vault(vault, "lighthouse", mode=mode, limit=50)
    paths = [r.rel_path for r in results]
    assert len(paths) == len(set(paths)) and "long.md" in paths


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_every_field_is_present_and_typed(vault, mode):
    results = search_vault(vault, "harbour lighthouse", mode=mode, limit=50)
    assert results
    for r in results:
        for f in dataclasses.fields(SearchResult):
            assert _isinstance(getattr(r, f.name), FIELD_TYPES[f.name]), (f.name, getattr(r, f.name))
        assert set(r.to_dict()) == {f.name for f in dataclasses.fields(SearchResult)}
        assert isinstance(r.to_dict()["tags"], list)
        json.dumps(r.to_dict())  # JSON-serialisable as is
    fm = next(r for r in results if r.rel_path == "fm.md")
    assert (fm.title, fm.description, fm.note_type, fm.tags) == (
        "Unique Title Xyzzy",
        "Desc qwerty",
        "howto",
        ("light", "sea"),
    )


def test_result_is_frozen(vault):
    r = search_vault(vault, "harbour", mode="fts")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.score = 99.0  # type: ignore[misc]


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_matched_text_is_body_only(vault, mode):
    r = next(r for r in search_vault(vault, "harbour", mode=mode) if r.rel_path == "fm.md")
    assert r.matched_text == "Body text about the harbour and the lighthouse. See [[count]]."
    for leak in ("---", "frontmatterzebra", "secret_field", "Xyzzy", "qwerty", "title:"):
        assert leak not in r.matched_text and leak not in r.snippet


def test_matched_text_is_bounded_at_words_and_holds_the_match(wide_vault):
    """A chunk far longer than the bound: the passage is cut around the match, between words."""
    r = search_vault(wide_vault, "beacon", mode="fts")[0]
    assert len(r.matched_text) <= MATCHED_TEXT_CHARS + 2 * len(ELLIPSIS)
    assert "the beacon shines" in r.matched_text
    assert r.matched_text.startswith("… ") and r.matched_text.endswith(ELLIPSIS)
    inner = r.matched_text[2 : -len(ELLIPSIS)]
    assert f" {inner} " in f" {FILLER} the beacon shines {FILLER} "  # whole words only


def test_matched_text_of_a_chunk_whose_match_is_early_starts_at_the_chunk(wide_vault):
    r = search_vault(wide_vault, "word3", mode="fts")[0]
    assert r.matched_text.startswith("word0 word1") and r.matched_text.endswith(ELLIPSIS)
    assert len(r.matched_text) <= MATCHED_TEXT_CHARS + len(ELLIPSIS)


def test_snippet_is_a_window_around_the_match(wide_vault):
    r = search_vault(wide_vault, "beacon", mode="fts")[0]
    assert "beacon" in r.snippet
    assert r.snippet.startswith("… ") and r.snippet.endswith(" …")  # the match is deep inside a long chunk
    assert len(r.snippet) <= SNIPPET_CHARS + 4


def test_best_chunk_gives_the_snippet_and_heading_path(vault):
    r = search_vault(vault, "pad5x30 lighthouse", mode="fts")[0]
    assert r.rel_path == "long.md" and json.loads(r.heading_path) == ["Part 5"]  # the chunk with both terms
    assert "pad5x30" in r.matched_text and "lighthouse part 5" in r.matched_text
    r = search_vault(vault, "pad5x30", mode="fts")[0]
    assert "pad5x30" in r.snippet and json.loads(r.heading_path) == ["Part 5"]


def test_match_count_counts_occurrences_in_the_note(vault):
    by_path = {r.rel_path: r for r in search_vault(vault, "lighthouse", mode="fts", limit=50)}
    assert by_path["count.md"].match_count == 3
    assert by_path["long.md"].match_count == 8


def test_match_count_does_not_count_chunk_overlap_twice(make_vault):
    words = [f"w{i}" if i % 7 else "beacon" for i in range(600)]
    root = make_vault(
        {"n.md": note("N", " ".join(words))}, config=IndexConfig(chunk_size=120, chunk_overlap=50), name="overlap"
    )
    r = search_vault(root, "beacon", mode="fts")[0]
    assert r.match_count == words.count("beacon")


def test_provenance_is_the_active_generation(vault):
    layout = gen.layout_for(vault)
    active = gen.active_record(layout)
    results = search_vault(vault, "lighthouse", mode="hybrid")
    assert results
    for r in results:
        assert r.index_kind == "immutable_generation"
        assert r.index_generation_id == active["generation_id"]
        assert r.index_source_snapshot_hash == active["source_snapshot_hash"]
        assert r.index_age_seconds >= 0
    index = results.index
    assert index.kind == "immutable_generation" and index.generation_id == active["generation_id"]
    assert index.source_snapshot_hash == active["source_snapshot_hash"] and index.age_seconds >= 0


def test_provenance_follows_a_new_generation(make_vault):
    root = make_vault({"a.md": note("A", "lighthouse one")}, name="regen")
    first = search_vault(root, "lighthouse", mode="fts")
    (root / "b.md").write_text(note("B", "lighthouse two"), encoding="utf-8")
    report = build_index(root)
    second = search_vault(root, "lighthouse", mode="fts")
    assert report.generation_id and second[0].index_generation_id == report.generation_id
    assert second.index.generation_id != first.index.generation_id
    assert second.index.source_snapshot_hash != first.index.source_snapshot_hash
    assert {r.rel_path for r in second} == {"a.md", "b.md"}


def test_in_place_index_is_labelled_legacy_db(make_vault):
    root = make_vault({"a.md": note("A", "lighthouse one")}, in_place=True, name="legacy")
    results = search_vault(root, "lighthouse", mode="fts")
    assert [r.rel_path for r in results] == ["a.md"]
    assert (results[0].index_kind, results[0].index_generation_id, results[0].index_source_snapshot_hash) == (
        "legacy_db",
        None,
        None,
    )
    assert results.index.kind == "legacy_db" and results.index.generation_id is None


def test_search_results_carries_what_ran(vault):
    results = search_vault(vault, "lighthouse", mode="auto", limit=2)
    assert isinstance(results, SearchResults) and len(results) == 2 and results.hits == tuple(results)
    d = results.to_dict()
    assert set(d) == {
        "query",
        "query_expansions",
        "unmatched_words",
        "requested_mode",
        "query_terms",
        "actual_mode",
        "retrieval_contract",
        "fallback_reason",
        "index",
        "freshness",
        "results",
    }
    assert set(d["index"]) == {"kind", "generation_id", "source_snapshot_hash", "watermark", "age_seconds"}
    assert (d["query"], d["requested_mode"], d["actual_mode"], d["retrieval_contract"], d["fallback_reason"]) == (
        "lighthouse",
        "auto",
        "fts",
        "fts_fallback",
        "dense_index_unavailable",
    )
    assert [r["rel_path"] for r in d["results"]] == [r.rel_path for r in results]
    assert results.index.kind == "immutable_generation"


def test_format_search_results_says_what_ran_and_lists_hits(vault):
    results = search_vault(vault, "lighthouse", mode="auto", limit=3)
    text = format_search_results(results, "lighthouse", "auto")
    assert "'lighthouse'" in text and "requested auto" in text
    assert "FALLBACK" not in text and "contract fts_fallback" in text  # a default user without dense: no alarm
    assert text.splitlines()[-1] == EMBED_HINT
    assert results.index.generation_id is not None and results.index.generation_id in text
    for r in results:
        assert r.rel_path in text and r.title in text


def test_format_of_an_empty_list_still_has_the_labels(vault):
    results = search_vault(vault, "xylophonist", mode="auto")
    text = format_search_results(results, "xylophonist", "auto")
    assert text.startswith("0 result(s)") and "mode fts (requested auto" in text and text.endswith(EMBED_HINT)


def test_graph_hits_show_where_they_came_from(vault):
    results = search_vault(vault, "harbour", mode="graph_assisted")
    assert [r.rel_path for r in results] == ["fm.md", "count.md"]
    assert "via wikilink link (out) from fm.md" in format_search_results(results, "harbour", "graph_assisted")


def test_notebook_renderings_escape_markup(make_vault):
    root = make_vault(
        {"x.md": note("<b>Pipes | and tags</b>", "lighthouse <script>alert(1)</script> | cell")}, name="markup"
    )
    results = search_vault(root, "lighthouse", mode="fts")
    html = results._repr_html_()
    assert html == results_html(results)
    assert "<script>" not in html and "alert(1)" in html and "<b>Pipes" not in html and "&lt;b&gt;Pipes" in html
    md = results._repr_markdown_()
    assert md == results_markdown(results)
    row = md.splitlines()[-1]
    assert row.count("|") - row.count("\\|") == 6  # every pipe inside a cell is escaped


def test_search_results_are_frozen_and_typed(example_vault):
    results = search_vault(example_vault, "postgres", mode="fts")
    before = results.to_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.actual_mode = "semantic"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        results.hits = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        results[0] = results[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        results.freshness["stale"] = True  # type: ignore[index]
    for name in ("append", "pop", "sort", "clear", "extend"):
        assert not hasattr(results, name)
    assert results.to_dict() == before
    # the fields are declared (typed), never computed by property lambdas
    assert not [k for k, v in vars(SearchResults).items() if isinstance(v, property)]
    assert {f.name: f.type for f in dataclasses.fields(SearchResults)}["hits"] == "tuple[SearchResult, ...]"
    assert isinstance(results.index, IndexIdentity) and isinstance(results.query_expansions, tuple)


def test_search_results_copy_pickle_and_serialise(example_vault):
    results = search_vault(example_vault, "postgres", mode="fts")
    assert pickle.loads(pickle.dumps(results)) == results == copy.deepcopy(results)
    assert json.loads(json.dumps(results.freshness)) == results.to_dict()["freshness"]
    assert repr(results.freshness).startswith("{'checked': True")  # prints as the dict it is


def test_search_results_reads_like_a_sequence_of_its_hits(example_vault):
    results = search_vault(example_vault, "postgres", mode="fts", limit=3)
    assert len(results) == len(results.hits) and bool(results) and list(results) == list(results.hits)
    assert results[0] is results.hits[0] and results[-1] is results.hits[-1]
    assert results[:2] == results.hits[:2] and results.hits[0] in results
    empty = search_vault(example_vault, "xylophonist", mode="fts")
    assert not empty and len(empty) == 0 and empty.hits == ()
