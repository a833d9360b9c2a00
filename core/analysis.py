"""Text -> terms with the index's own FTS5 tokenizer, and per-note sparse term vectors.

Ranking statistics and query terms must use exactly the tokens FTS5 produces, or BM25
would score a different vocabulary than the one FTS5 matches. Running every document
through ``fts5vocab`` is slow (one Python row per token), so text is split into words by
a regex that only ever splits where unicode61 splits too (anything that is not a letter
or digit), and each *distinct* word is then tokenised once by a real FTS5 table with the
configured tokenizer (case folding, diacritics, stemming). A test compares the result
with fts5vocab's per-document counts on real notes.

``field_terms`` counts the terms of a note's fields into a compact ``FieldTerms`` (cheap
to pickle, so a worker process can make it). ``TermVectors`` turns a batch of them into
the packed vectors stored in ``note_terms`` with a few numpy calls per batch, not per
term: the batch becomes flat (note, term id, field, count) arrays, grouped by
``np.unique`` and summed by ``np.bincount``.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
        self._single: dict[str, str] = {}   # the words that are exactly one token (nearly all)
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
                tokens = self._cache[wd] = tuple(t for _, t in sorted(found.get(i, ())))
                if len(tokens) == 1:
                    self._single[wd] = tokens[0]

    def map_words(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """word -> its FTS5 tokens (usually one; none for words FTS5 drops)."""
        cache = self._cache
        missing = set(words).difference(cache)
        if missing:
            with self._lock:
                self._map_new(sorted(missing.difference(cache)))
        return cache

    def count_terms(self, text: str) -> Counter[str]:
        """Term frequencies of one text."""
        words = _WORD.findall(text.lower())
        mapping = self.map_words(words)
        counts = Counter(map(self._single.get, words))  # C-speed path: every word is one token
        if None not in counts:
            return counts
        return Counter(tok for w in words for tok in mapping[w])

    def terms(self, text: str) -> list[str]:
        """The text's tokens in order (duplicates kept), as a query sees them."""
        words = _WORD.findall(text.lower())
        mapping = self.map_words(words)
        return [tok for w in words for tok in mapping[w]]


@dataclass(frozen=True)
class FieldTerms:
    """The distinct terms of each field of one note with their frequencies, flat and compact."""

    terms: str                # distinct terms, field after field, joined by NUL (never part of a term)
    counts: bytes             # native int32 frequency of each term, same order
    sizes: tuple[int, ...]    # number of distinct terms in each field

    def term_list(self) -> list[str]:
        return self.terms.split("\0") if self.terms else []


def field_terms(analyzer: Analyzer, texts: Sequence[str]) -> FieldTerms:
    """Term frequencies of each field text (one text per FTS column, in column order)."""
    counts = [analyzer.count_terms(text) for text in texts]
    return FieldTerms(terms="\0".join(t for c in counts for t in c),
                      counts=array("i", [n for c in counts for n in c.values()]).tobytes(),
                      sizes=tuple(len(c) for c in counts))


class TermVectors:
    """``FieldTerms`` of notes -> packed sparse term vectors (the ``note_terms`` rows).

    Term ids come from ``term_ids`` (the index's ``terms`` table); terms never seen before get
    the next ids (in sorted order, so ids do not depend on hashing) and are handed out once
    by ``take_new_terms``. A vector is the ascending int32 term ids and a uint16 matrix
    ``[n_terms, n_fields]`` of frequencies (capped at 65535), both as little-endian bytes.
    """

    def __init__(self, term_ids: dict[str, int], n_fields: int) -> None:
        self.n_fields = n_fields
        self._term_ids = term_ids
        self._next_term = max(term_ids.values(), default=0) + 1
        self._new_terms: list[tuple[int, str]] = []

    def take_new_terms(self) -> list[tuple[int, str]]:
        """(id, term) of the terms assigned since the last call, for the ``terms`` table."""
        out, self._new_terms = self._new_terms, []
        return out

    def _ids(self, terms: list[str]) -> np.ndarray:
        ids = self._term_ids
        for term in sorted(set(terms).difference(ids)):
            ids[term] = self._next_term
            self._new_terms.append((self._next_term, term))
            self._next_term += 1
        return np.fromiter(map(ids.__getitem__, terms), dtype=np.int64, count=len(terms))

    def vectors(self, notes: Sequence[FieldTerms]) -> list[tuple[bytes, bytes]]:
        """(term_ids bytes, tf bytes) of each note, in order."""
        terms: list[str] = []
        for ft in notes:
            terms.extend(ft.term_list())
        tids = self._ids(terms)
        sizes = [n for ft in notes for n in ft.sizes]
        note = np.repeat(np.repeat(np.arange(len(notes), dtype=np.int64), self.n_fields), sizes)
        field = np.repeat(np.tile(np.arange(self.n_fields, dtype=np.int64), len(notes)), sizes)
        count = np.frombuffer(b"".join(ft.counts for ft in notes), dtype=np.int32).astype(np.float64)
        span = self._next_term
        uniq, inv = np.unique(note * span + tids, return_inverse=True)
        tf = np.bincount(inv * self.n_fields + field, weights=count, minlength=uniq.size * self.n_fields)
        tf_bytes = np.minimum(tf, _TF_MAX).astype("<u2").tobytes()
        tid_bytes = (uniq % span).astype("<i4").tobytes()
        bounds = np.searchsorted(uniq // span, np.arange(len(notes) + 1)).tolist()
        width = 2 * self.n_fields
        return [(tid_bytes[4 * a:4 * b], tf_bytes[width * a:width * b]) for a, b in zip(bounds, bounds[1:])]


_analyzers: dict[str, Analyzer] = {}
_inherited: list[Analyzer] = []


def analyzer_for(tokenizer: str) -> Analyzer:
    """One shared analyzer per tokenizer spec in this process."""
    found = _analyzers.get(tokenizer)
    if found is None:
        found = _analyzers[tokenizer] = Analyzer(tokenizer)
    return found


def forget_inherited_analyzers() -> None:
    """In a forked child: make ``analyzer_for`` build fresh analyzers. An SQLite connection must
    not be used across a fork; the parent's are kept referenced (never used, never closed)."""
    _inherited.extend(_analyzers.values())
    _analyzers.clear()
