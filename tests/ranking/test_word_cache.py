"""core.ranking.word_cache: the analyzers' word maps stay bounded in a long-lived process."""

from __future__ import annotations

import threading

from core.ranking import word_cache
from core.ranking.analysis import Analyzer, LanguageAnalyzer


def test_a_stream_of_distinct_long_words_never_grows_the_map_past_its_bound() -> None:
    analyzer = Analyzer("unicode61 remove_diacritics 2")
    analyzer._words.max_chars = 100_000
    for i in range(200):  # 200 queries of one distinct 2,000-letter word: 400,000 characters asked for
        word = f"w{i:04d}" + "x" * 1995
        assert analyzer.map_words([word, "plain"])[word] == (word.lower(),)
        assert sum(len(w) for w in analyzer._words.map) <= 100_000


def test_the_language_analyzer_is_bounded_too_and_still_maps_every_word() -> None:
    analyzer = LanguageAnalyzer("en")
    houses = analyzer.map_words(["houses"])["houses"]  # its terms, before any bound was reached
    analyzer._words.max_chars = 10_000
    for i in range(100):
        words = [f"running{i}" + "q" * 300, "houses"]
        got = analyzer.map_words(words)
        assert set(words) <= set(got)
        assert got["houses"] == houses
        assert sum(len(w) for w in analyzer._words.map) <= 10_000


def test_a_map_handed_out_keeps_its_words_when_another_thread_starts_a_fresh_one() -> None:
    analyzer = Analyzer("unicode61 remove_diacritics 2")
    analyzer._words.max_chars = 5_000
    errors: list[BaseException] = []

    def ask(tag: str) -> None:
        try:
            for i in range(300):
                words = [f"{tag}{i}" + "z" * 200, f"{tag}word"]
                got = analyzer.map_words(words)
                for w in words:
                    assert got[w] == (w.lower(),)
        except BaseException as exc:  # recorded for the main thread, which fails the test with it
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(t,)) for t in ("a", "b", "c", "d")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_the_default_bound_is_tens_of_megabytes_of_words() -> None:
    assert 16 * 2**20 <= word_cache.MAX_CACHED_CHARS <= 256 * 2**20


class _NoWalk(dict):
    """A word map that fails when something iterates over all of it (``set.issubset(a_dict)`` does)."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise AssertionError("the whole word map was walked to look up a few words")


def test_looking_up_cached_words_costs_the_words_asked_not_the_whole_map() -> None:
    # a build asks once per batch of notes; walking a map of every word met so far made a cold build quadratic
    for analyzer in (Analyzer("unicode61 remove_diacritics 2"), LanguageAnalyzer("en")):
        first = dict(analyzer.map_words(["houses", "Running", "x1"]))
        analyzer._words.map = _NoWalk(analyzer._words.map)
        for _ in range(3):
            got = analyzer.map_words(["houses", "Running", "x1"])
            assert {w: got[w] for w in first} == first
