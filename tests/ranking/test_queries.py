"""Query text: adversarial input never raises nor degrades silently; raw=True is FTS5 syntax, checked."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from conftest import note
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import QuerySyntaxError, UsageError
from core.ranking.query import MAX_QUERY_CHARS, clean_text, fts_quote, phrase_expression
from core.searcher import search_vault

MODEL_FREE = ("fts", "vector", "hybrid", "graph_assisted", "auto")
RAW_REFUSED = ("vector", "hybrid", "graph_assisted")

FILES = {
    "ids.md": note("Deploy log", "We fixed live/live#2181 during the wiki-knowledge migration."),
    "live.md": note("Site status", "The live site shows traffic from the dashboard."),
    "ticket.md": note("Ticket", "Ticket 2181 was about printer toner."),
    "wiki.md": note("Wiki", "Our wiki has pages about the team, the office and holidays."),
    "knowledge.md": note("Knowledge", "Knowledge of the codebase grows with time and reviews."),
    "quote.md": note(
        "Syntax soup",
        """
        He said "exact phrase here" and it's fine; NEAR the end AND OR NOT. x^2 and #hashtag,
        col:value, (paren), star* and C++.""",
    ),
    "cjk.md": note("CJK", "東京 の 天気 は 晴れ です。 中文 搜索 测试"),
    "emoji.md": note("Party", "party 🎉 time"),
}

# (query, the note that must come first in every model-free mode)
LITERAL = [
    ("live/live#2181", "ids.md"),
    ("wiki-knowledge", "ids.md"),
    ('"wiki-knowledge"', "ids.md"),
    ("NEAR", "quote.md"),
    ("NOT AND OR NEAR", "quote.md"),
    ("it's", "quote.md"),
    ("x^2", "quote.md"),
    ("col:value", "quote.md"),
    ("star*", "quote.md"),
    ("(paren)", "quote.md"),
    ('"exact phrase"', "quote.md"),
    ("#hashtag", "quote.md"),
    ("C++", "quote.md"),
    ("NEAR(", "quote.md"),
    ("東京", "cjk.md"),
    ("中文 搜索", "cjk.md"),
    ("deploy " * 1500, "ids.md"),  # 10,500 characters
]
# queries with text but no searchable word: labelled no_query_terms, empty
NO_TERMS = ['"', "'", "*", ":", "()", "^", "#", "/", "-", "!!!...", "🎉", "🎉🎉 ✨", '"" :: ** ^^ ##', "(((", "\\"]
# queries with no text at all: metadata listing (no ranking), labelled metadata_only
EMPTY = ["", "   ", "\x00", "\t\n", "\x00\x01\x02"]
# text with words that match nothing: ranked mode ran, empty list
NO_MATCH = ["zzyzx qwfp", "x" * MAX_QUERY_CHARS, "a" * (MAX_QUERY_CHARS + 5000), "(zzyzx* qwfp)", "日本語のテキスト"]


@pytest.fixture(scope="module")
def vault(make_vault) -> Path:
    return make_vault(FILES)


def labels(results) -> tuple:
    return results.actual_mode, results.retrieval_contract, results.fallback_reason


def ranked_labels(mode: str) -> tuple:
    return ("fts", "fts_fallback", "dense_index_unavailable") if mode == "auto" else (mode, mode, None)


def assert_hits_carry_the_labels(results) -> None:
    assert all((r.actual_mode, r.retrieval_contract, r.fallback_reason) == labels(results) for r in results)


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize(("query", "expected"), LITERAL, ids=[repr(q[:20]) for q, _ in LITERAL])
def test_adversarial_text_is_searched_literally(vault, mode, query, expected):
    results = search_vault(vault, query, mode=mode)
    assert results and results[0].rel_path == expected
    assert labels(results) == ranked_labels(mode)
    assert_hits_carry_the_labels(results)


@pytest.mark.parametrize("mode", MODEL_FREE)
def test_a_nul_byte_separates_words_like_a_space(vault, mode):
    with_nul = search_vault(vault, "wiki\x00knowledge", mode=mode)
    with_space = search_vault(vault, "wiki knowledge", mode=mode)
    assert [(r.rel_path, r.score) for r in with_nul] == [(r.rel_path, r.score) for r in with_space]
    assert "ids.md" in [r.rel_path for r in with_nul] and labels(with_nul) == ranked_labels(mode)


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize("query", NO_TERMS)
def test_text_without_words_is_labelled_no_query_terms(vault, mode, query):
    results = search_vault(vault, query, mode=mode)
    assert list(results) == []
    assert labels(results) == ("none", "no_query_terms", "no_query_terms")
    assert results.query == query and results.requested_mode == mode


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize("query", EMPTY, ids=repr)
def test_empty_text_lists_notes_labelled_metadata_only(vault, mode, query):
    results = search_vault(vault, query, mode=mode, limit=50)
    assert sorted(r.rel_path for r in results) == sorted(FILES)
    assert labels(results) == ("metadata", "metadata_only", None)
    assert_hits_carry_the_labels(results)


@pytest.mark.parametrize("mode", MODEL_FREE)
@pytest.mark.parametrize("query", NO_MATCH, ids=lambda q: repr(q[:20]))
def test_text_that_matches_nothing_ran_the_mode_and_says_so(vault, mode, query):
    results = search_vault(vault, query, mode=mode)
    assert list(results) == [] and labels(results) == ranked_labels(mode)


@pytest.fixture(scope="module")
def apart_vault(make_vault) -> Path:
    return make_vault({**FILES, "apart.md": note("Apart", "The wiki holds knowledge about many things.")})


@pytest.mark.parametrize("mode", ("fts", "vector", "hybrid"))
def test_an_identifier_beats_a_note_with_its_parts_apart(apart_vault, mode):
    assert search_vault(apart_vault, "wiki-knowledge", mode=mode)[0].rel_path == "ids.md"
    # as one word of a longer query the identifier is a small bonus, not a filter
    assert "apart.md" in [r.rel_path for r in search_vault(apart_vault, "wiki-knowledge about many things", mode=mode)]


def _check_honest(results, mode: str, query: str) -> None:
    cleaned = clean_text(query)
    assert_hits_carry_the_labels(results)
    if not cleaned.strip():
        assert labels(results) == ("metadata", "metadata_only", None)
    elif labels(results)[0] == "none":
        assert labels(results) == ("none", "no_query_terms", "no_query_terms") and list(results) == []
        assert not re.search(r"[A-Za-z0-9]", cleaned)  # a query with an ASCII word always runs its mode
    else:
        assert labels(results) == ranked_labels(mode)
    assert len({r.rel_path for r in results}) == len(results)


FTS_SOUP = st.lists(
    st.sampled_from(
        list("\"'*:()^#/-+{}[]~,.;!? \x00\t\n")
        + ["NOT", "AND", "OR", "NEAR", "wiki", "live", "2181", "東京", "🎉", "é"]
    ),
    max_size=25,
).map("".join)
ANY_TEXT = st.text(max_size=120) | FTS_SOUP


@pytest.mark.parametrize("mode", MODEL_FREE)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=ANY_TEXT)
def test_arbitrary_text_never_raises_and_is_labelled_honestly(vault, mode, query):
    _check_honest(search_vault(vault, query, mode=mode), mode, query)


# --- raw=True: FTS5 syntax passes through --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["fts", "auto"])
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("title:wiki", ["wiki.md"]),  # a column filter
        ('"exact phrase here"', ["quote.md"]),  # a phrase
        ('"here phrase exact"', []),  # ... whose word order matters
        ("NEAR(wiki knowledge, 1)", ["ids.md"]),
        ("wiki NOT knowledge", ["wiki.md"]),
        ("wiki NEAR knowledge", []),  # bare NEAR is the word "near": syntax accepted
        ("a NEAR b", []),
        ("know*", ["ids.md", "knowledge.md"]),  # prefix query
        ("live AND 2181", ["ids.md"]),
        ("ticket OR toner", ["ticket.md"]),
    ],
)
def test_raw_passes_fts5_syntax_through(vault, mode, query, expected):
    results = search_vault(vault, query, mode=mode, raw=True)
    assert sorted(r.rel_path for r in results) == expected
    assert labels(results) == ranked_labels("fts" if mode == "fts" else "auto")
    assert all(r.score_source == "fts5_match_bm25f" and r.score > 0 for r in results)


def test_raw_and_plain_text_differ_where_syntax_matters(vault):
    plain = {r.rel_path for r in search_vault(vault, "title:wiki", mode="fts")}
    assert {"wiki.md", "ids.md"} <= plain  # literally: the words "title" and "wiki" anywhere
    assert [r.rel_path for r in search_vault(vault, "title:wiki", mode="fts", raw=True)] == ["wiki.md"]


def test_raw_applies_filters_in_the_same_statement(vault):
    assert [r.rel_path for r in search_vault(vault, "know*", mode="fts", raw=True, path_prefixes="knowledge")] == [
        "knowledge.md"
    ]


@pytest.mark.parametrize("mode", ["fts", "auto"])
@pytest.mark.parametrize(
    "query",
    ['"unterminated', "title:", "AND", "(", "nocolumn:foo", "NEAR(", "wiki AND", "* wiki", "NEAR(wiki knowledge, x)"],
)
def test_a_bad_raw_query_is_a_query_syntax_error(vault, mode, query):
    with pytest.raises(QuerySyntaxError) as info:
        search_vault(vault, query, mode=mode, raw=True)
    assert info.value.reason == "query_syntax" and info.value.exit_code == 2
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("mode", RAW_REFUSED)
def test_raw_is_refused_by_modes_that_cannot_honour_it(vault, mode):
    with pytest.raises(UsageError) as info:
        search_vault(vault, "title:wiki", mode=mode, raw=True)
    assert info.value.reason == "usage"


# --- query.py: the one path from text to MATCH ---------------------------------------------------------


def test_clean_text_drops_control_characters_and_bounds_length():
    assert clean_text("a\x00b\x07c\td\ne") == "a b c\td\ne"
    assert len(clean_text("x" * (MAX_QUERY_CHARS + 10))) == MAX_QUERY_CHARS


def test_fts_quote_and_expressions():
    assert fts_quote('say "hi"') == '"say ""hi"""'
    assert phrase_expression(["wiki", "knowledge"]) == '"wiki knowledge"'


@pytest.fixture(scope="module")
def fts_table() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE notes_fts USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    return conn


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=30).map(clean_text), min_size=1, max_size=5))
def test_quoted_text_is_always_valid_fts5_and_matches_itself(fts_table, tokens):
    expression = " AND ".join(fts_quote(t) for t in tokens)
    fts_table.execute("SELECT rowid FROM notes_fts WHERE notes_fts MATCH ? LIMIT 1", (expression,)).fetchall()
    with fts_table:
        fts_table.execute("DELETE FROM notes_fts")
        fts_table.execute("INSERT INTO notes_fts(body) VALUES (?)", (" ".join(tokens),))
        hits = fts_table.execute("SELECT count(*) FROM notes_fts WHERE notes_fts MATCH ?", (expression,)).fetchone()
    if all(re.search(r"[A-Za-z0-9]", t) for t in tokens):
        assert hits[0] == 1  # the quoted text finds the row that holds it, literally
