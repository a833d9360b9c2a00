"""Issue 28 case 8: any query string up to the allowed length (``MAX_QUERY_CHARS``) costs bounded
memory. A word that matches nothing went to typo expansion, whose candidates grow with the square
of its length (4,000 characters: 4.8 s and 844 MiB); now a word longer than
``MAX_EXPANDED_CHARS`` is not expanded and the response says so.

Measured deterministically: the tracemalloc peak of one search (after a warm-up that loads the
generation), never wall time.
"""

from __future__ import annotations

import string
import tracemalloc
from pathlib import Path

import pytest
from conftest import MakeVault, note
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.ranking.query import MAX_QUERY_CHARS
from core.searcher import search_vault

MAX_EXPANDED_CHARS = 64  # core.ranking.expansion.MAX_EXPANDED_CHARS (pinned by a test below)
PEAK_BOUND = 24 * 1024 * 1024  # bytes one search may allocate at most, whatever the query


@pytest.fixture(scope="module")
def vault(make_vault: MakeVault) -> Path:
    words = "lighthouse harbour lamp tides moonbeam Dateisicherung graphansicht café naïve straße"
    files = {f"n{i}.md": note(f"Note {i}", f"{words} extra{i} " * 3) for i in range(20)}
    root = make_vault(files)
    search_vault(root, "warm up", 10, "fts", freshness=False)
    return root


def search_peak(vault: Path, text: str) -> tuple[int, dict]:
    tracemalloc.start()
    try:
        got = search_vault(vault, text, 10, "fts", freshness=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak, got.to_dict()


def test_a_2000_letter_word_that_matches_nothing_costs_bounded_memory_and_says_it_was_not_expanded(
    vault: Path,
) -> None:
    word = ("harbour" * 300)[:2000]  # today: every one-edit variant of it, about 200 MB
    peak, got = search_peak(vault, word)
    assert peak < PEAK_BOUND
    skipped = [e for e in got["query_expansions"] if e["kind"] == "skipped"]
    assert [(e["reason"], e["chars"]) for e in skipped] == [("word_too_long", 2000)]
    assert got["unmatched_words"] == [word]


def test_a_long_word_up_to_the_bound_is_still_corrected(vault: Path) -> None:
    got = search_vault(vault, "lighthouze", 10, "fts", freshness=False).to_dict()
    assert any(e["kind"] == "typo" and "lighthouse" in e["to"] for e in got["query_expansions"])
    word = "a" * MAX_EXPANDED_CHARS  # at the bound: expanded as before (nothing found, nothing skipped)
    got = search_vault(vault, word, 10, "fts", freshness=False).to_dict()
    assert not [e for e in got["query_expansions"] if e["kind"] == "skipped"]


LETTERS = string.ascii_letters + "éäöüßçñøłžäëïяжкфб"
_word = st.text(alphabet=LETTERS, min_size=1, max_size=MAX_QUERY_CHARS)
_query = st.one_of(
    _word,  # one word of any length up to the maximum
    st.lists(st.text(alphabet=LETTERS, min_size=1, max_size=MAX_EXPANDED_CHARS + 8), max_size=200).map(" ".join),
    st.text(max_size=MAX_QUERY_CHARS),  # anything at all
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=_query)
@example(text="x" * MAX_QUERY_CHARS)
@example(text="lighthouze" * (MAX_QUERY_CHARS // 10))
@example(text=" ".join(["ab" * (MAX_EXPANDED_CHARS // 2)] * 150))
@example(text=" ".join(("harbour" * 10)[: MAX_EXPANDED_CHARS - i] for i in range(64)))
def test_any_query_up_to_the_allowed_length_costs_bounded_memory(vault: Path, text: str) -> None:
    peak, _ = search_peak(vault, text)
    assert peak < PEAK_BOUND, (len(text), peak)


def test_the_bound_here_is_the_library_s() -> None:
    from core.ranking import expansion

    assert expansion.MAX_EXPANDED_CHARS == MAX_EXPANDED_CHARS
