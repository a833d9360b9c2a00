"""QueryWords finds the query's terms in a hit's text the way one longest-first regex does: the
str.find path (no regex compiled per query) changes no snippet."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from core.ranking.snippets import QueryWords

# letters that collide (a term inside another, at and after word starts), a few separators, a
# character that lower-cases to two (İ) and one whose lower case depends on its place (Σ)
TEXT = st.text(alphabet="abcAB _-.\n1éİΣσ東京", max_size=60)
TERM = st.text(alphabet="abcé1σ東京", min_size=1, max_size=4)


def _regex_matches(terms: list[str], text: str) -> list[tuple[int, str]]:
    """The definition: a word start, then the longest term that fits there, over the lower-cased text."""
    low = text.lower()
    if len(low) != len(text):
        low = "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)
    alternatives = "|".join(re.escape(t) for t in sorted(set(terms), key=lambda t: (-len(t), t)))
    return [(m.start(), m.group()) for m in re.finditer(f"(?<![^\\W_])(?:{alternatives})", low)]


@settings(max_examples=400, deadline=None)
@given(st.lists(TERM, min_size=1, max_size=5), TEXT)
def test_matches_are_the_longest_first_regex_matches(terms: list[str], text: str) -> None:
    assert QueryWords(terms, {}).matches(text) == _regex_matches(terms, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab-_ c", min_size=1, max_size=4), min_size=1, max_size=4), TEXT)
def test_terms_with_other_characters_use_the_regex(terms: list[str], text: str) -> None:
    assert QueryWords(terms, {}).matches(text) == _regex_matches([t for t in terms if t], text)


def test_a_term_inside_a_word_is_not_a_match_and_the_longest_term_wins() -> None:
    words = QueryWords(["temp", "template", "late"], {})
    assert words.matches("Templates, a template-late xtemp") == [(0, "template"), (13, "template"), (22, "late")]
