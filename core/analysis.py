"""Text -> terms with the index's own FTS5 tokenizer.

Ranking statistics and query terms must use exactly the tokens FTS5 produces, or BM25
would score a different vocabulary than the one FTS5 matches. Running every document
through ``fts5vocab`` is slow (one Python row per token), so text is split into words by
a regex that only ever splits where unicode61 splits too (anything that is not a letter
or digit), and each *distinct* word is then tokenised once by a real FTS5 table with the
configured tokenizer (case folding, diacritics, stemming). A test compares the result
with fts5vocab's per-document counts on real notes.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable

_WORD = re.compile(r"[^\W_]+")
_BATCH = 5000


def word_counts(text: str) -> Counter[str]:
    """Lower-cased words of a text (split where unicode61 splits) with their counts."""
    return Counter(_WORD.findall(text.lower()))


class Analyzer:
    """Maps text to FTS5 tokens for one tokenizer spec; caches word -> tokens."""

    def __init__(self, tokenizer: str) -> None:
        if "'" in tokenizer:
            raise ValueError(f"invalid tokenizer spec: {tokenizer!r}")
        self.tokenizer = tokenizer
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute(f"CREATE VIRTUAL TABLE w USING fts5(x, tokenize='{tokenizer}')")
        self._conn.execute("CREATE VIRTUAL TABLE temp.wi USING fts5vocab(main, w, instance)")
        self._cache: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _map_new(self, words: list[str]) -> None:
        for start in range(0, len(words), _BATCH):
            batch = words[start:start + _BATCH]
            with self._conn:
                self._conn.execute("DELETE FROM w")
                self._conn.executemany("INSERT INTO w(rowid, x) VALUES (?, ?)",
                                       ((i, wd) for i, wd in enumerate(batch)))
                found: dict[int, list[tuple[int, str]]] = {}
                for term, doc, offset in self._conn.execute("SELECT term, doc, offset FROM temp.wi"):
                    found.setdefault(doc, []).append((offset, term))
            for i, wd in enumerate(batch):
                self._cache[wd] = tuple(t for _, t in sorted(found.get(i, ())))

    def map_words(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """word -> its FTS5 tokens (usually one; none for words FTS5 drops)."""
        cache = self._cache
        missing = [w for w in set(words) if w not in cache]
        if missing:
            with self._lock:
                self._map_new(missing)
        return cache

    def count_terms(self, text: str) -> Counter[str]:
        """Term frequencies of one text."""
        words = Counter(_WORD.findall(text.lower()))
        mapping = self.map_words(words)
        out: Counter[str] = Counter()
        for word, n in words.items():
            for tok in mapping[word]:
                out[tok] += n
        return out

    def terms(self, text: str) -> list[str]:
        """The text's tokens in order (duplicates kept), as a query sees them."""
        words = _WORD.findall(text.lower())
        mapping = self.map_words(words)
        return [tok for w in words for tok in mapping[w]]


_analyzers: dict[str, Analyzer] = {}


def analyzer_for(tokenizer: str) -> Analyzer:
    """One shared analyzer per tokenizer spec in this process."""
    found = _analyzers.get(tokenizer)
    if found is None:
        found = _analyzers[tokenizer] = Analyzer(tokenizer)
    return found
