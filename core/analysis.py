"""Text -> terms with the index's own FTS5 tokenizer, and per-note sparse term vectors.

Ranking statistics and query terms must use exactly the tokens FTS5 produces, or BM25
would score a different vocabulary than the one FTS5 matches. Running every document
through ``fts5vocab`` is slow (one Python row per token), so text is split into words by
a regex that only ever splits where unicode61 splits too (anything that is not a letter
or digit), and each *distinct* word is then tokenised once by a real FTS5 table with the
configured tokenizer (case folding, diacritics, stemming). A test compares the result
with fts5vocab's per-document counts on real notes.

``TermVectors`` turns the per-field word counts of a batch of notes into the packed
vectors stored in ``note_terms`` with a few numpy calls per batch (not per word): each
word maps to a run of term ids in flat arrays, so the batch becomes one array of
(note, term, field, count) entries that is grouped by ``np.unique`` and summed by
``np.bincount``.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

_WORD = re.compile(r"[^\W_]+")
_BATCH = 5000
_TF_MAX = int(np.iinfo(np.uint16).max)


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
        # contentless: only the index is needed, and 'delete-all' empties it without re-tokenising
        self._conn.execute(f"CREATE VIRTUAL TABLE w USING fts5(x, content='', tokenize='{tokenizer}')")
        self._conn.execute("CREATE VIRTUAL TABLE temp.wi USING fts5vocab(main, w, instance)")
        self._cache: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _map_new(self, words: list[str]) -> None:
        for start in range(0, len(words), _BATCH):
            batch = words[start:start + _BATCH]
            with self._conn:
                self._conn.executemany("INSERT INTO w(rowid, x) VALUES (?, ?)", enumerate(batch))
                found: dict[int, list[tuple[int, str]]] = {}
                for term, doc, offset in self._conn.execute("SELECT term, doc, offset FROM temp.wi"):
                    found.setdefault(doc, []).append((offset, term))
                self._conn.execute("INSERT INTO w(w) VALUES ('delete-all')")
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


class TermVectors:
    """Per-field word counts of notes -> packed sparse term vectors (the ``note_terms`` rows).

    Term ids come from ``term_ids`` (the index's ``terms`` table); terms never seen before get
    the next ids and are handed out once by ``take_new_terms``. A vector is the ascending
    int32 term ids and a uint16 matrix ``[n_terms, n_fields]`` of frequencies (capped at
    65535), both as little-endian bytes.
    """

    def __init__(self, analyzer: Analyzer, term_ids: dict[str, int], n_fields: int) -> None:
        self.analyzer = analyzer
        self.n_fields = n_fields
        self._term_ids = term_ids
        self._next_term = max(term_ids.values(), default=0) + 1
        self._new_terms: list[tuple[int, str]] = []
        self._word_no: dict[str, int] = {}      # word -> its number in the arrays below
        self._starts: list[int] = []            # word number -> first index into _flat
        self._lens: list[int] = []              # word number -> how many term ids (0 when FTS5 drops it)
        self._flat: list[int] = []              # term ids of all known words, back to back
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def take_new_terms(self) -> list[tuple[int, str]]:
        """(id, term) of the terms assigned since the last call, for the ``terms`` table."""
        out, self._new_terms = self._new_terms, []
        return out

    def _learn(self, words: Iterable[str]) -> None:
        """Give every unseen word its term ids (tokenising the new words in one go)."""
        new = sorted(set(words).difference(self._word_no))  # sorted: term ids do not depend on hashing
        if not new:
            return
        mapping = self.analyzer.map_words(new)
        for word in new:
            self._word_no[word] = len(self._starts)
            self._starts.append(len(self._flat))
            tokens = mapping[word]
            self._lens.append(len(tokens))
            for term in tokens:
                tid = self._term_ids.get(term)
                if tid is None:
                    tid = self._term_ids[term] = self._next_term
                    self._next_term += 1
                    self._new_terms.append((tid, term))
                self._flat.append(tid)
        self._arrays = None

    def _word_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.asarray(self._starts, dtype=np.int64), np.asarray(self._lens, dtype=np.int64),
                            np.asarray(self._flat, dtype=np.int64))
        return self._arrays

    def _entries(self, notes: Sequence[Sequence[Counter[str]]]) -> tuple[np.ndarray, ...]:
        """Flat (note position, term id, field, count) arrays of the batch, one entry per word token."""
        words: list[str] = []
        counts: list[int] = []
        sizes: list[int] = []
        for fields in notes:
            for c in fields:
                words.extend(c)
                counts.extend(c.values())
                sizes.append(len(c))
        self._learn(words)
        starts, lens, flat = self._word_arrays()
        word_no = np.fromiter(map(self._word_no.__getitem__, words), dtype=np.int64, count=len(words))
        note = np.repeat(np.repeat(np.arange(len(notes), dtype=np.int64), self.n_fields), sizes)
        field = np.repeat(np.tile(np.arange(self.n_fields, dtype=np.int64), len(notes)), sizes)
        count = np.asarray(counts, dtype=np.float64)
        n_ids = lens[word_no]
        pos = starts[word_no]
        if not np.all(n_ids == 1):  # words with zero or several tokens: one entry per token
            rep = np.repeat(np.arange(word_no.size), n_ids)
            pos = pos[rep] + np.arange(rep.size) - np.repeat(np.cumsum(n_ids) - n_ids, n_ids)
            note, field, count = note[rep], field[rep], count[rep]
        return note, flat[pos], field, count

    def vectors(self, notes: Sequence[Sequence[Counter[str]]]) -> list[tuple[bytes, bytes]]:
        """(term_ids bytes, tf bytes) per note; ``notes[i]`` holds one word Counter per field."""
        note, tids, field, count = self._entries(notes)
        span = self._next_term
        uniq, inv = np.unique(note * span + tids, return_inverse=True)
        tf = np.bincount(inv * self.n_fields + field, weights=count, minlength=uniq.size * self.n_fields)
        tf_bytes = np.minimum(tf, _TF_MAX).astype("<u2").tobytes()
        tid_bytes = (uniq % span).astype("<i4").tobytes()
        bounds = np.searchsorted(uniq // span, np.arange(len(notes) + 1)).tolist()
        width = 2 * self.n_fields
        return [(tid_bytes[4 * a:4 * b], tf_bytes[width * a:width * b]) for a, b in zip(bounds, bounds[1:])]


_analyzers: dict[str, Analyzer] = {}


def analyzer_for(tokenizer: str) -> Analyzer:
    """One shared analyzer per tokenizer spec in this process."""
    found = _analyzers.get(tokenizer)
    if found is None:
        found = _analyzers[tokenizer] = Analyzer(tokenizer)
    return found
