"""The words a result's snippet and matched_text look for (``core.searcher._without_extensions``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.searcher import _without_extensions


def _naive(words: dict[str, float]) -> list[str]:
    return [w for w in words if not any(o != w and w.startswith(o) for o in words)]


def test_a_word_that_extends_another_is_left_out() -> None:
    words = {"templates": 1.0, "templat": 2.0, "note": 1.0, "ab": 1.0, "abc": 1.0, "abd": 1.0, "b": 1.0}
    assert _without_extensions(words) == ["templat", "note", "ab", "b"]


@given(st.dictionaries(st.text(alphabet="abcé", max_size=4), st.floats(0, 5), max_size=12))
def test_the_same_words_as_comparing_every_pair(words: dict[str, float]) -> None:
    assert _without_extensions(words) == _naive(words)
